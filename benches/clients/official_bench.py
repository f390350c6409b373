"""One run of one scenario with the official ``pulsar-client``:
``python -m benches.clients.official_bench SPEC OUT``.

APIs: produce ``send_async`` / ``asyncio`` (``pulsar.asyncio``, ``await producer.send`` from many
tasks); consume ``receive`` / ``batch_receive`` / ``asyncio``; ``blocking`` (``send()``),
``latency`` (``send_async`` at a fixed open-loop rate), ``idle``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio

from benches.common import (
    Window,
    fixed_rate_schedule,
    latency_stats,
    wait_for_callbacks,
    load_spec,
    make_payloads,
    percentiles,
    write_result,
)


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


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    n, api = spec["n"], spec["api"]
    payloads = make_payloads(n, spec["size"])
    w = Window(spec["broker_pid"])
    if api == "asyncio":
        return asyncio.run(_produce_asyncio(spec, payloads, w))
    if api != "send_async":
        raise SystemExit(f"unknown produce api {api!r}")
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
    producer.send(b"warm-up")
    results: list[Any] = []
    append = results.append

    def callback(res: Any, msg_id: Any) -> None:
        append(res)

    send_async = producer.send_async
    w.start()
    for p in payloads:
        send_async(p, callback)
    producer.flush()
    res = w.stop()
    ok = sum(1 for r in results if r == pulsar.Result.Ok)
    producer.close()
    client.close()
    return {**res, "sent": ok, "errors": n - ok, "extra_messages": 1}


async def _produce_asyncio(spec: dict[str, Any], payloads: list[bytes], w: Window) -> dict[str, Any]:
    client = pulsar_asyncio.Client(spec["service_url"], **_client_kwargs())
    producer = await client.create_producer(spec["topic"], **_producer_kwargs(spec))
    await producer.send(b"warm-up")
    k = spec["concurrency"]
    slices = [payloads[j::k] for j in range(k)]
    send = producer.send

    # The asyncio paths can be 10-100x slower than the others: a time cap keeps a run bounded
    # (the rates stay valid; the count check then uses what was sent).
    deadline = time.monotonic() + (spec.get("async_max_seconds") or 1e9)
    mono = time.monotonic

    async def worker(chunk: list[bytes]) -> int:
        done = 0
        for p in chunk:
            await send(p)
            done += 1
            if mono() > deadline:
                break
        return done

    w.start()
    counts = await asyncio.gather(*(worker(s) for s in slices), return_exceptions=True)
    await producer.flush()
    res = w.stop()
    sent = sum(c for c in counts if isinstance(c, int))
    failed = sum(1 for c in counts if not isinstance(c, int))
    await producer.close()
    await client.close()
    return {**res, "sent": sent, "errors": failed, "extra_messages": 1, "capped": sent < len(payloads)}


def consume(spec: dict[str, Any]) -> dict[str, Any]:
    n, api = spec["n"], spec["api"]
    w = Window(spec["broker_pid"])
    if api == "asyncio":
        return asyncio.run(_consume_asyncio(spec, w))
    got = nbytes = 0
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    consumer = client.subscribe(spec["topic"], spec["subscription"], **_consumer_kwargs(spec, api == "batch_receive"))
    ack = consumer.acknowledge
    if api == "receive":
        receive = consumer.receive
        w.start()
        for _ in range(n):
            m = receive()
            nbytes += len(m.data())
            ack(m)
        got = n
        res = w.stop()
    elif api == "batch_receive":
        batch_receive = consumer.batch_receive
        w.start()
        deadline = time.monotonic() + 600
        while got < n and time.monotonic() < deadline:
            for m in batch_receive():
                nbytes += len(m.data())
                ack(m)
                got += 1
        res = w.stop()
    else:
        raise SystemExit(f"unknown consume api {api!r}")
    consumer.close()
    client.close()
    return {**res, "received": got, "bytes": nbytes}


async def _consume_asyncio(spec: dict[str, Any], w: Window) -> dict[str, Any]:
    n = spec["n"]
    client = pulsar_asyncio.Client(spec["service_url"], **_client_kwargs())
    consumer = await client.subscribe(spec["topic"], spec["subscription"], **_consumer_kwargs(spec))
    got = nbytes = 0
    receive, ack = consumer.receive, consumer.acknowledge
    deadline = time.monotonic() + (spec.get("async_max_seconds") or 1e9)
    w.start()
    for _ in range(n):
        m = await receive()
        nbytes += len(m.data())
        await ack(m)
        got += 1
        if got & 255 == 0 and time.monotonic() > deadline:
            break
    res = w.stop()
    await consumer.close()
    await client.close()
    return {**res, "received": got, "bytes": nbytes, "capped": got < n}


def blocking(spec: dict[str, Any]) -> dict[str, Any]:
    n, cap = spec["n"], spec.get("max_seconds") or 1e9
    payloads = make_payloads(n, spec["size"])
    lat: list[float] = []
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
    producer.send(b"warm-up")
    send, now, append = producer.send, time.perf_counter, lat.append
    w = Window(spec["broker_pid"])
    w.start()
    deadline = now() + cap
    for i, p in enumerate(payloads):
        t = now()
        send(p)
        append(now() - t)
        if i % 100 == 99 and now() > deadline:
            break
    res = w.stop()
    producer.close()
    client.close()
    return {**res, "sent": len(lat), "errors": 0, "extra_messages": 1, "capped": len(lat) < n,
            "latency_ms": percentiles(lat)}


def latency(spec: dict[str, Any]) -> dict[str, Any]:
    rate = spec["rate"]
    n = int(rate * spec["duration"])
    payloads = make_payloads(n, spec["size"])
    done = [0.0] * n
    errors = [0]
    now = time.perf_counter
    ok = pulsar.Result.Ok
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
    producer.send(b"warm-up")
    send_async = producer.send_async

    def on_done(i: int, res: Any, msg_id: Any) -> None:
        done[i] = now()
        if res != ok:
            errors[0] += 1

    def send_one(i: int) -> None:
        send_async(payloads[i], functools.partial(on_done, i))

    w = Window(spec["broker_pid"])
    w.start()
    intended, t0 = fixed_rate_schedule(n, rate, send_one)
    producer.flush()
    res = w.stop()
    missing = wait_for_callbacks(done)
    producer.close()
    client.close()
    return {**res, "sent": n - errors[0] - missing, "errors": errors[0] + missing, "extra_messages": 1,
            "latency_ms": latency_stats(intended, done, t0)}


def idle(spec: dict[str, Any]) -> dict[str, Any]:
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
    consumer = client.subscribe(spec["topic"], spec["subscription"], **_consumer_kwargs(spec))
    producer.send(b"hello")
    consumer.acknowledge(consumer.receive(30_000))
    # An application thread parked in receive(), as an idle consumer would have.
    threading.Thread(target=lambda: _swallow(consumer.receive), daemon=True).start()
    time.sleep(1.0)
    w = Window(spec["broker_pid"])
    w.start()
    time.sleep(spec["duration"])
    res = w.stop()
    return {**res, "cpu_percent_of_core": 100.0 * res["cpu_s"] / res["wall_s"]}


def _swallow(fn: Any) -> None:
    try:
        fn()
    except Exception:
        pass


def main() -> None:
    spec, out = load_spec()
    fn = {"produce": produce, "consume": consume, "blocking": blocking, "latency": latency,
          "idle": idle}[spec["scenario"]]
    result = fn(spec)
    result.update(client="official", version=getattr(pulsar, "__version__", None) or _version())
    write_result(out, result)
    if spec["scenario"] == "idle":
        import os

        os._exit(0)  # a thread is parked in the C++ receive(); do not wait for it


def _version() -> str:
    from importlib.metadata import version

    return version("pulsar-client")


if __name__ == "__main__":
    main()
