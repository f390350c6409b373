"""One run of one scenario with the official ``pulsar-client``:
``python -m benches.clients.official_bench SPEC OUT``.

APIs: produce ``send_async`` / ``asyncio`` (``pulsar.asyncio``, ``await producer.send`` from many
tasks); consume ``receive`` / ``batch_receive`` / ``asyncio``; ``blocking`` (``send()``),
``latency`` (``send_async`` at a fixed open-loop rate), ``idle``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, ContextManager

import pulsar
import pulsar.asyncio as pulsar_asyncio

from benches import common


def _client_kwargs() -> dict[str, Any]:
    return {"logger": pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)}


def _producer_kwargs(spec: dict[str, Any]) -> dict[str, Any]:
    return dict(batching_enabled=True, batching_max_messages=spec["batch_max_messages"],
                batching_max_allowed_size_in_bytes=spec["batch_max_bytes"],
                batching_max_publish_delay_ms=spec["batch_delay_ms"], compression_type=pulsar.CompressionType.NONE,
                max_pending_messages=spec["max_pending"], block_if_queue_full=True)


def _consumer_kwargs(spec: dict[str, Any], batch: bool = False) -> dict[str, Any]:
    kw: dict[str, Any] = dict(initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=spec["receiver_queue"])
    if batch:
        kw["batch_receive_policy"] = pulsar.ConsumerBatchReceivePolicy(spec["receive_batch"], 16 * 1024 * 1024, 100)
    return kw


def _warm_producer(spec: dict[str, Any]) -> ContextManager[Any]:
    return common.warm_producer(pulsar.Client(spec["service_url"], **_client_kwargs()), _producer_kwargs(spec), spec)


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    n, api = spec["n"], spec["api"]
    if api == "asyncio":
        return asyncio.run(_produce_asyncio(spec))
    if api != "send_async":
        raise SystemExit(f"unknown produce api {api!r}")
    payloads = common.make_payloads(n, spec["size"])
    w = common.Window(spec["broker_pid"])
    results: list[Any] = []
    append = results.append

    def callback(res: Any, msg_id: Any) -> None:
        append(res)

    with _warm_producer(spec) as producer:
        send_async = producer.send_async
        w.start()
        for p in payloads:
            send_async(p, callback)
        producer.flush()
        res = w.stop()
    ok = sum(1 for r in results if r == pulsar.Result.Ok)
    return {**res, "sent": ok, "errors": n - ok, "extra_messages": 1}


async def _produce_asyncio(spec: dict[str, Any]) -> dict[str, Any]:
    client = pulsar_asyncio.Client(spec["service_url"], **_client_kwargs())
    return await common.send_from_tasks(client, _producer_kwargs(spec), spec)


def consume(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["api"] == "asyncio":
        return asyncio.run(_consume_asyncio(spec))
    loops = {"receive": _receive_each, "batch_receive": _batch_receive}
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    return common.consume_blocking(client, _consumer_kwargs(spec, spec["api"] == "batch_receive"), spec, loops)


def _receive_each(consumer: Any, spec: dict[str, Any]) -> tuple[int, int]:
    nbytes = 0
    receive, ack = consumer.receive, consumer.acknowledge
    for _ in range(spec["n"]):
        m = receive()
        nbytes += len(m.data())
        ack(m)
    return spec["n"], nbytes


def _batch_receive(consumer: Any, spec: dict[str, Any]) -> tuple[int, int]:
    n = spec["n"]
    got = nbytes = 0
    batch_receive, ack = consumer.batch_receive, consumer.acknowledge
    deadline = time.monotonic() + 600
    while got < n and time.monotonic() < deadline:
        for m in batch_receive():
            nbytes += len(m.data())
            ack(m)
            got += 1
    return got, nbytes


async def _consume_asyncio(spec: dict[str, Any]) -> dict[str, Any]:
    async def loop(consumer: Any, n: int, deadline: float) -> tuple[int, int]:
        got = nbytes = 0
        receive, ack = consumer.receive, consumer.acknowledge
        for _ in range(n):
            m = await receive()
            nbytes += len(m.data())
            await ack(m)
            got += 1
            if got & 255 == 0 and time.monotonic() > deadline:
                break
        return got, nbytes

    client = pulsar_asyncio.Client(spec["service_url"], **_client_kwargs())
    return await common.consume_async(client, _consumer_kwargs(spec), spec, loop)


def blocking(spec: dict[str, Any]) -> dict[str, Any]:
    return common.time_each_send(_warm_producer(spec), spec)


def latency(spec: dict[str, Any]) -> dict[str, Any]:
    run = common.FixedRate(spec)
    ok = pulsar.Result.Ok
    with _warm_producer(spec) as producer:
        send_async, payloads, completed = producer.send_async, run.payloads, run.completed

        def on_done(i: int, res: Any, msg_id: Any) -> None:
            completed(i, res == ok)

        def send_one(i: int) -> None:
            send_async(payloads[i], functools.partial(on_done, i))

        return run.measure(send_one, producer.flush)


def idle(spec: dict[str, Any]) -> dict[str, Any]:
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
    consumer = client.subscribe(spec["topic"], spec["subscription"], **_consumer_kwargs(spec))
    producer.send(b"hello")
    consumer.acknowledge(consumer.receive(30_000))
    return common.measure_idle(consumer.receive, spec)


def main() -> None:
    spec, out = common.load_spec()
    fn = {"produce": produce, "consume": consume, "blocking": blocking, "latency": latency,
          "idle": idle}[spec["scenario"]]
    result = fn(spec)
    result.update(client="official", version=getattr(pulsar, "__version__", None) or _version())
    common.write_result(out, result)
    if spec["scenario"] == "idle":
        import os

        os._exit(0)  # a thread is parked in the C++ receive(); do not wait for it


def _version() -> str:
    from importlib.metadata import version

    return version("pulsar-client")


if __name__ == "__main__":
    main()
