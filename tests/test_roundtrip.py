"""The round trip through every layer, in both API styles, against the real broker."""

from __future__ import annotations

import datetime
import gc
import threading
import time

import pytest

import magnetar

from conftest import Api
from waiting import wait_until


def _receive_all(api, consumer, n):
    """Exactly `n` messages, read with receive_many; fails if the consumer stalls."""
    got: list[magnetar.Message] = []
    while len(got) < n:
        batch = api.call(consumer, "receive_many", n - len(got), timeout=10)
        assert batch, f"stalled after {len(got)}"
        got.extend(batch)
    return got


def test_send_receive_ack_round_trip(api, topic):
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    before = int(time.time() * 1000)
    sent_id = api.call(
        producer, "send", b"hello", key="k1", properties={"a": "b", "c": "d"},
        event_time=1_700_000_000_123, ordering_key=b"ok",
    )
    msg = api.call(consumer, "receive", timeout=10)
    assert msg.data == b"hello"
    assert msg.key == "k1"
    assert msg.properties == {"a": "b", "c": "d"}
    assert msg.event_time == 1_700_000_000_123
    assert msg.ordering_key == b"ok"
    assert msg.message_id == sent_id
    assert msg.topic == topic
    assert msg.producer_name == producer.name
    assert msg.redelivery_count == 0
    assert msg.sequence_id == 0
    assert before - 5000 <= msg.publish_time <= int(time.time() * 1000) + 5000
    api.call(consumer, "ack", msg)
    api.call(consumer, "close")
    api.call(producer, "close")


def test_acked_messages_are_not_redelivered_and_unacked_are(api, topic):
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    for i in range(4):
        api.call(producer, "send", f"m{i}".encode())
    got = [api.call(consumer, "receive", timeout=10) for _ in range(4)]
    assert [m.data for m in got] == [b"m0", b"m1", b"m2", b"m3"]
    api.call(consumer, "ack", got[0])
    api.call(consumer, "ack", got[2])
    api.call(consumer, "close")  # flushes grouped acks
    again = api.call(api.client, "subscribe", topic, "sub")
    redelivered = [api.call(again, "receive", timeout=10) for _ in range(2)]
    assert sorted(m.data for m in redelivered) == [b"m1", b"m3"]
    # Sent again because the subscription was attached again, not redelivered by a nack or an
    # ack timeout: the broker does not count these (the counts of nack redeliveries are
    # test_listener's dead-letter test).
    assert [m.redelivery_count for m in redelivered] == [0, 0]
    with pytest.raises(magnetar.Timeout):
        api.call(again, "receive", timeout=0.5)
    api.call(again, "close")


def test_send_many_and_receive_many(api, topic):
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    payloads = [b"p%05d" % i for i in range(5000)]
    ids = api.call(producer, "send_many", payloads)
    assert len(ids) == 5000
    assert ids == sorted(ids)
    got = _receive_all(api, consumer, 5000)
    assert [m.data for m in got] == payloads
    assert [m.message_id for m in got] == ids
    api.call(consumer, "ack_cumulative", got[-1])


@pytest.mark.parametrize("enabled", [True, False])
def test_bulk_calls_leave_the_garbage_collector_as_they_found_it(api, topic, enabled):
    """send_many and receive_many pause the cyclic collector while they build their lists;
    it must come back on, and stay off for a program that turned it off."""
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        ids = api.call(producer, "send_many", [b"%d" % i for i in range(2000)])
        assert gc.isenabled() is enabled
        got: list[magnetar.Message] = []
        while len(got) < 2000:
            batch = api.call(consumer, "receive_many", 2000, timeout=10)
            assert batch, f"stalled after {len(got)}"
            assert gc.isenabled() is enabled
            got.extend(batch)
        assert [m.message_id for m in got] == ids
    finally:
        (gc.enable if was else gc.disable)()


def test_send_many_larger_than_the_pending_queue_waits_and_keeps_order(api, topic):
    """send_many hands messages over in runs of free pending slots: more messages than
    max_pending go out in several runs, each waiting for acks to free slots."""
    producer = api.call(api.client, "create_producer", topic, max_pending=16)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    payloads = [b"r%05d" % i for i in range(3000)]
    ids = api.call(producer, "send_many", payloads)
    assert ids == sorted(ids) and len(set(ids)) == 3000
    got = _receive_all(api, consumer, 3000)
    assert [m.data for m in got] == payloads
    assert [m.message_id for m in got] == ids


def test_send_many_within_a_small_client_memory_limit(service_url, topic, api_kind):
    """A memory limit far below the call's bytes: send_many waits for memory, loses nothing."""
    api = Api(api_kind, service_url, memory_limit=2_000)
    try:
        producer = api.call(api.client, "create_producer", topic)
        consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
        payloads = [b"%03d" % i + b"m" * 97 for i in range(500)]
        ids = api.call(producer, "send_many", payloads)
        assert len(ids) == 500
        assert [m.data for m in _receive_all(api, consumer, 500)] == payloads
    finally:
        api.close()


def test_send_many_refuses_an_oversized_message_and_sends_the_rest(api, topic):
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    small = [b"s%03d" % i for i in range(200)]
    with pytest.raises(magnetar.MessageTooLarge, match="1 of 201 messages failed"):
        api.call(producer, "send_many", small[:100] + [b"x" * (6 * 1024 * 1024)] + small[100:])
    assert [m.data for m in _receive_all(api, consumer, 200)] == small


def test_send_many_without_blocking_reports_a_full_queue(service_url, topic, api_kind):
    api = Api(api_kind, service_url)
    try:
        producer = api.call(api.client, "create_producer", topic, max_pending=4, block_if_full=False,
                            batch_max_delay=0.01)
        consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
        with pytest.raises(magnetar.ProducerQueueFull):
            api.call(producer, "send_many", [b"%d" % i for i in range(50)])
        api.call(producer, "flush")
        # The first four (the free slots) and whatever found a slot freed by an ack arrive,
        # in order; the refused ones do not.
        api.call(producer, "send", b"end")
        got: list[bytes] = []
        while not got or got[-1] != b"end":
            got.append(api.call(consumer, "receive", timeout=10).data)
        accepted = [int(d) for d in got[:-1]]
        assert accepted[:4] == [0, 1, 2, 3] and len(accepted) < 50
        assert accepted == sorted(set(accepted))
    finally:
        api.close()


def test_send_many_with_keys_properties_and_event_times(api, topic):
    """Per-message columns of send_many arrive on each message; None leaves a field unset."""
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    n = 300
    keys = [None if i % 3 == 0 else f"k{i}" for i in range(n)]
    props = [None if i % 4 == 0 else {"i": str(i), "parity": "odd" if i % 2 else "even"} for i in range(n)]
    stamp = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)
    times = [None if i % 5 == 0 else (stamp if i % 2 else 1_700_000_000_000 + i) for i in range(n)]
    api.call(producer, "send_many", [b"%d" % i for i in range(n)], keys=keys, properties=props, event_times=times)
    got = _receive_all(api, consumer, n)
    assert [m.data for m in got] == [b"%d" % i for i in range(n)]
    assert [m.key for m in got] == keys
    assert [m.properties for m in got] == [p or {} for p in props]
    expected_times = [None if t is None else int(stamp.timestamp() * 1000) if t is stamp else t for t in times]
    assert [m.event_time for m in got] == expected_times


def test_send_many_rejects_bad_columns_and_sends_nothing(api, topic):
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    with pytest.raises(magnetar.InvalidConfiguration, match="1 properties for 2 payloads"):
        api.call(producer, "send_many", [b"a", b"b"], properties=[{"x": "y"}])
    with pytest.raises(magnetar.InvalidConfiguration, match="properties must map str to str"):
        api.call(producer, "send_many", [b"a", b"b"], properties=[{"x": 1}, None])
    with pytest.raises(magnetar.InvalidConfiguration, match="event_times"):
        api.call(producer, "send_many", [b"a", b"b"], event_times=[-1, None])
    with pytest.raises(magnetar.InvalidConfiguration, match="3 keys for 2 payloads"):
        api.call(producer, "send_many", [b"a", b"b"], keys=["a", "b", "c"])
    api.call(producer, "send", b"after")
    assert api.call(consumer, "receive", timeout=10).data == b"after"


def test_receive_times_out_with_timeout_error(api, topic):
    consumer = api.call(api.client, "subscribe", topic, "sub")
    t0 = time.monotonic()
    with pytest.raises(magnetar.Timeout) as info:
        api.call(consumer, "receive", timeout=0.3)
    assert isinstance(info.value, TimeoutError)
    assert time.monotonic() - t0 >= 0.25
    assert api.call(consumer, "receive_many", 10, timeout=0.2) == []


def test_blocking_iteration_stops_when_consumer_closes(client, topic):
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub", initial_position="earliest")
    producer.send_many([b"a", b"b"])
    seen = []
    for msg in consumer:
        seen.append(msg.data)
        consumer.ack(msg)
        if len(seen) == 2:
            consumer.close()
    assert seen == [b"a", b"b"]


def test_async_iteration(topic, service_url):
    import asyncio

    async def main() -> list[bytes]:
        async with magnetar.AsyncClient(service_url) as client:
            producer = await client.create_producer(topic)
            consumer = await client.subscribe(topic, "sub", initial_position="earliest")
            await producer.send_many([b"x", b"y", b"z"])
            out = []
            async for msg in consumer:
                out.append(msg.data)
                consumer.ack(msg)
                if len(out) == 3:
                    await consumer.close()
            return out

    assert asyncio.run(main()) == [b"x", b"y", b"z"]


@pytest.mark.parametrize("batching", [True, False])
@pytest.mark.parametrize("compression", [None, "lz4", "zlib", "zstd", "snappy"])
def test_batching_and_compression(client, topic, batching, compression):
    producer = client.create_producer(topic, batching=batching, compression=compression)
    consumer = client.subscribe(topic, "sub", initial_position="earliest")
    payloads = [(b"payload-%d-" % i) * 50 for i in range(200)]
    futures = [producer.send_async(p, key=f"k{i}", properties={"i": str(i)}) for i, p in enumerate(payloads)]
    producer.flush()
    ids = [f.result(timeout=10) for f in futures]
    got = [consumer.receive(timeout=10) for _ in payloads]
    assert [m.data for m in got] == payloads
    assert [m.key for m in got] == [f"k{i}" for i in range(200)]
    assert [m.properties["i"] for m in got] == [str(i) for i in range(200)]
    assert [m.message_id for m in got] == ids
    if batching:
        assert any(i.batch_index > 0 for i in ids)
    else:
        assert all(i.batch_index == -1 for i in ids)


def test_send_async_future_interface(client, topic):
    producer = client.create_producer(topic)
    seen = []
    fut = producer.send_async(b"a", callback=lambda f: seen.append(f.result()))
    mid = fut.result(timeout=10)
    assert fut.done() and not fut.cancelled() and fut.exception() is None
    assert isinstance(mid, magnetar.MessageId)
    producer.flush()
    # A callback added after completion runs at once; callbacks run in order on one thread.
    late = []
    fut.add_done_callback(lambda f: late.append(f.result()))
    assert late == [mid]
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [mid]


def test_callback_exceptions_do_not_break_the_producer(client, topic):
    producer = client.create_producer(topic)

    def boom(_f):
        raise RuntimeError("user callback failed")

    futs = [producer.send_async(b"x", callback=boom) for _ in range(10)]
    producer.flush()
    assert all(f.result(timeout=10) for f in futs)
    assert producer.send(b"still works")


def test_blocking_receive_releases_the_gil(client, topic):
    """While ``receive`` waits, another Python thread runs: a counting thread advances as far
    during a 1 s ``receive`` as during a 1 s wait known to release the GIL (``Event.wait``).
    A receive that held the GIL would leave it the few milliseconds of one switch interval.
    Each count is read by this thread right before and right after the call, so only the
    call itself is measured (the spinner starts and warms up before either)."""
    consumer = client.subscribe(topic, "sub")
    counter = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            counter[0] += 1

    def growth_during(call) -> int:
        before = counter[0]
        call()
        return counter[0] - before

    def receive_until_timeout() -> None:
        with pytest.raises(magnetar.Timeout):
            consumer.receive(timeout=1.0)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        assert wait_until(lambda: counter[0] > 0, 10)
        reference = growth_during(lambda: threading.Event().wait(1.0))
        during_receive = growth_during(receive_until_timeout)
    finally:
        stop.set()
        spinner.join(10)
    assert reference > 0
    assert during_receive > reference // 4, (
        f"the other thread counted {during_receive} during receive, {reference} during a GIL-free wait")
