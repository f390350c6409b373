"""One run of one scenario with magnetar: ``python -m benches.clients.magnetar_bench SPEC OUT``.

APIs: produce ``send_async`` / ``send_many`` / ``asyncio`` (``await producer.send`` from many
tasks); consume ``receive`` / ``receive_many`` (+ ``ack_many``) / ``async_for``; ``blocking`` (``send()``),
``latency`` (``send_async`` at a fixed open-loop rate), ``idle``, and ``fill`` (pre-fills a
topic for the consume scenario; not measured).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, ContextManager

import magnetar

from benches import common


def _telemetry_from_env() -> None:
    """``MAGNETAR_BENCH_TELEMETRY=1``: the run has OpenTelemetry on (SDK meter and tracer
    providers: metrics collected every second and exported to nowhere, spans sampled and dropped by
    a no-op processor), to measure what it costs; ``=metrics``: metrics only. Ignored by builds
    without ``magnetar.telemetry``."""
    import os

    mode = os.environ.get("MAGNETAR_BENCH_TELEMETRY")
    if mode not in ("1", "metrics"):
        return
    try:
        import magnetar.telemetry as telemetry
    except ImportError:
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    tracers = TracerProvider()
    tracers.add_span_processor(SpanProcessor())
    # Collected every second (60 s is the SDK's default), exported to nowhere.
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(out=open(os.devnull, "w")), export_interval_millis=1000)
    telemetry.enable(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tracers,
                     tracing=mode == "1")


_telemetry_from_env()


def _producer_kwargs(spec: dict[str, Any]) -> dict[str, Any]:
    return dict(batching=True, batch_max_messages=spec["batch_max_messages"], batch_max_bytes=spec["batch_max_bytes"],
                batch_max_delay=spec["batch_delay_ms"] / 1000.0, compression=None,
                max_pending=spec["max_pending"], block_if_full=True)


def _consumer_kwargs(spec: dict[str, Any]) -> dict[str, Any]:
    return dict(initial_position="earliest", receiver_queue_size=spec["receiver_queue"])


def _warm_producer(spec: dict[str, Any]) -> ContextManager[magnetar.Producer]:
    return common.warm_producer(magnetar.Client(spec["service_url"]), _producer_kwargs(spec), spec)


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    n, api = spec["n"], spec["api"]
    if api == "asyncio":
        return asyncio.run(_produce_asyncio(spec))
    payloads = common.make_payloads(n, spec["size"])
    w = common.Window(spec["broker_pid"])
    with _warm_producer(spec) as producer:
        if api == "send_async":
            futs: list[Any] = []
            append = futs.append
            send_async = producer.send_async
            w.start()
            for p in payloads:
                append(send_async(p))
            producer.flush()
            res = w.stop()
            errors = sum(1 for f in futs if f.exception() is not None)
            sent = len(futs) - errors
        elif api == "send_many":
            chunk = spec.get("many_chunk") or n
            ids: list[Any] = []
            w.start()
            for k in range(0, n, chunk):
                ids += producer.send_many(payloads[k:k + chunk])
            res = w.stop()
            sent, errors = len(ids), n - len(ids)
        else:
            raise SystemExit(f"unknown produce api {api!r}")
    return {**res, "sent": sent, "errors": errors, "extra_messages": 1}


async def _produce_asyncio(spec: dict[str, Any]) -> dict[str, Any]:
    return await common.send_from_tasks(magnetar.AsyncClient(spec["service_url"]), _producer_kwargs(spec), spec)


def fill(spec: dict[str, Any]) -> dict[str, Any]:
    payloads = common.make_payloads(spec["n"], spec["size"])
    with magnetar.Client(spec["service_url"]) as client:
        producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
        ids = producer.send_many(payloads)
        producer.close()
    return {"sent": len(ids), "errors": len(payloads) - len(ids)}


def consume(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["api"] == "async_for":
        return asyncio.run(_consume_async_for(spec))
    loops = {"receive": _receive_each, "receive_many": _receive_many}
    return common.consume_blocking(magnetar.Client(spec["service_url"]), _consumer_kwargs(spec), spec, loops)


def _receive_each(consumer: magnetar.Consumer, spec: dict[str, Any]) -> tuple[int, int]:
    nbytes = 0
    receive, ack = consumer.receive, consumer.ack
    for _ in range(spec["n"]):
        m = receive()
        nbytes += len(m.data)
        ack(m)
    return spec["n"], nbytes


def _receive_many(consumer: magnetar.Consumer, spec: dict[str, Any]) -> tuple[int, int]:
    n, batch = spec["n"], spec["receive_batch"]
    got = nbytes = 0
    receive_many = consumer.receive_many
    while got < n:
        msgs = receive_many(min(batch, n - got), 5.0)
        if not msgs:
            break
        for m in msgs:
            nbytes += len(m.data)
        consumer.ack_many(msgs)  # each message acked individually, in one call
        got += len(msgs)
    return got, nbytes


async def _consume_async_for(spec: dict[str, Any]) -> dict[str, Any]:
    async def loop(consumer: magnetar.AsyncConsumer, n: int, deadline: float) -> tuple[int, int]:
        got = nbytes = 0
        ack = consumer.ack
        async for m in consumer:
            nbytes += len(m.data)
            ack(m)
            got += 1
            if got >= n or (got & 255 == 0 and time.monotonic() > deadline):
                break
        return got, nbytes

    return await common.consume_async(magnetar.AsyncClient(spec["service_url"]), _consumer_kwargs(spec), spec, loop)


def blocking(spec: dict[str, Any]) -> dict[str, Any]:
    return common.time_each_send(_warm_producer(spec), spec)


def latency(spec: dict[str, Any]) -> dict[str, Any]:
    run = common.FixedRate(spec)
    with _warm_producer(spec) as producer:
        send_async, payloads, completed = producer.send_async, run.payloads, run.completed

        def on_done(i: int, fut: Any) -> None:
            completed(i, fut.exception() is None)

        def send_one(i: int) -> None:
            send_async(payloads[i], callback=functools.partial(on_done, i))

        return run.measure(send_one, producer.flush)


def idle(spec: dict[str, Any]) -> dict[str, Any]:
    with magnetar.Client(spec["service_url"]) as client:
        producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
        consumer = client.subscribe(spec["topic"], spec["subscription"], **_consumer_kwargs(spec))
        producer.send(b"hello")
        consumer.ack(consumer.receive(timeout=30))
        return common.measure_idle(consumer.receive, spec)


def main() -> None:
    spec, out = common.load_spec()
    scenario = spec["scenario"]
    fn = {"produce": produce, "fill": fill, "consume": consume, "blocking": blocking, "latency": latency,
          "idle": idle}[scenario]
    result = fn(spec)
    result.update(client="magnetar", version=magnetar.__version__, module=magnetar.__file__)
    common.write_result(out, result)


if __name__ == "__main__":
    main()
