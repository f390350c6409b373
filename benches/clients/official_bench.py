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
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio

from benches.common import (
    Window,
    load_spec,
    make_payloads,
    measure_idle,
    send_at_fixed_rate,
    send_from_tasks,
    time_each_send,
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
    result = await send_from_tasks(producer, payloads, spec, w)
    await producer.close()
    await client.close()
    return result


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
    payloads = make_payloads(spec["n"], spec["size"])
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
    producer.send(b"warm-up")
    result = time_each_send(producer.send, payloads, spec)
    producer.close()
    client.close()
    return result


def latency(spec: dict[str, Any]) -> dict[str, Any]:
    n = int(spec["rate"] * spec["duration"])
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

    result = send_at_fixed_rate(send_one, producer.flush, done, errors, spec)
    producer.close()
    client.close()
    return result


def idle(spec: dict[str, Any]) -> dict[str, Any]:
    client = pulsar.Client(spec["service_url"], **_client_kwargs())
    producer = client.create_producer(spec["topic"], **_producer_kwargs(spec))
    consumer = client.subscribe(spec["topic"], spec["subscription"], **_consumer_kwargs(spec))
    producer.send(b"hello")
    consumer.acknowledge(consumer.receive(30_000))
    return measure_idle(consumer.receive, spec)


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
