"""Listener (push) consumers: bounded concurrency, order per key, ack on return, redelivery on
exception, dead letter after the maximum."""

from __future__ import annotations

import asyncio
import threading
import time

import magnetar


def wait_until(cond, timeout=15.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


def test_listener_keeps_order_per_key_and_acks(client, topic):
    producer = client.create_producer(topic)
    seen: dict[str, list[int]] = {}
    lock = threading.Lock()

    def handle(msg: magnetar.Message) -> None:
        k, i = msg.data.decode().split(":")
        time.sleep(0.001)
        with lock:
            seen.setdefault(k, []).append(int(i))

    consumer = client.subscribe(topic, "s", subscription_type="shared", initial_position="earliest",
                                listener=handle, listener_concurrency=4)
    producer.send_many([f"k{i % 5}:{i}".encode() for i in range(300)], keys=[f"k{i % 5}" for i in range(300)])
    assert wait_until(lambda: sum(len(v) for v in seen.values()) == 300)
    for k, values in seen.items():
        assert values == sorted(values), k
    consumer.close()
    # Everything was acked: a new consumer on the subscription gets nothing.
    again = client.subscribe(topic, "s", subscription_type="shared")
    assert again.receive_many(10, timeout=0.5) == []


def test_listener_runs_at_most_its_concurrency_at_once(client, topic):
    """``listener_concurrency=3``: with every handler held, exactly three run (each message a
    key of its own, so order per key serialises nothing); the others wait their turn, and all
    run once the held ones return."""
    limit, n = 3, 12
    lock = threading.Lock()
    running, peak, done = [0], [0], []
    release = threading.Event()

    def handle(msg: magnetar.Message) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(60)
        with lock:
            running[0] -= 1
            done.append(msg.data)

    consumer = client.subscribe(topic, "s", subscription_type="shared", initial_position="earliest",
                                listener=handle, listener_concurrency=limit)
    client.create_producer(topic).send_many([b"%d" % i for i in range(n)], keys=[f"k{i}" for i in range(n)])
    try:
        assert wait_until(lambda: running[0] == limit), f"{running[0]} handlers running, {limit} expected"
        # held, none of the other nine may start
        assert not wait_until(lambda: running[0] > limit, 2.0), f"{running[0]} handlers at once"
    finally:
        release.set()
    assert wait_until(lambda: len(done) == n), f"{len(done)} of {n} handled"
    assert peak[0] == limit
    consumer.close()


def test_listener_exception_redelivers_then_dead_letters(client, topic):
    dlq = topic + "-dlq"
    dead = client.subscribe(dlq, "d", initial_position="earliest")
    calls: list[int] = []

    def fail(msg: magnetar.Message) -> None:
        calls.append(msg.redelivery_count)
        raise RuntimeError("cannot process")

    consumer = client.subscribe(topic, "s", subscription_type="shared", initial_position="earliest",
                                listener=fail, nack_redelivery_delay=0.1, max_redeliver_count=2,
                                dead_letter_topic=dlq)
    client.create_producer(topic).send(b"bad")
    assert dead.receive(timeout=20).data == b"bad"
    assert calls == [0, 1, 2]
    consumer.close()


def test_async_listener(service_url, topic):
    async def main() -> list[bytes]:
        async with magnetar.AsyncClient(service_url) as client:
            got: list[bytes] = []

            async def handle(msg: magnetar.Message) -> None:
                got.append(msg.data)

            consumer = await client.subscribe(topic, "s", initial_position="earliest", listener=handle,
                                              listener_concurrency=2)
            producer = await client.create_producer(topic)
            await producer.send_many([b"a", b"b", b"c"])
            for _ in range(200):
                if len(got) == 3:
                    break
                await asyncio.sleep(0.05)
            await consumer.close()
            return got

    assert sorted(asyncio.run(main())) == [b"a", b"b", b"c"]
