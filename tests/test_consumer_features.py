"""Consumer semantics against the real broker: subscription types, nack, ack timeout, dead
letters, seek, multi-topic and pattern subscriptions, partitioned topics, end of topic."""

from __future__ import annotations

import threading
import time

import pytest

import magnetar

from waiting import wait_until


def drain(api, consumer, n, timeout=10.0):
    out: list[magnetar.Message] = []
    while len(out) < n:
        out.append(api.call(consumer, "receive", timeout=timeout))
    return out


def redelivery_setup(api, topic, **subscribe_options):
    """A non-batching producer (one message, one entry: redelivered by itself) and a shared
    consumer from the earliest message, for the redelivery tests."""
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "sub", subscription_type="shared",
                        initial_position="earliest", **subscribe_options)
    return producer, consumer


def test_nack_redelivers_after_the_delay(api, topic):
    producer, consumer = redelivery_setup(api, topic, nack_redelivery_delay=0.2)
    api.call(producer, "send", b"retry-me")
    first = api.call(consumer, "receive", timeout=10)
    api.call(consumer, "nack", first)
    again = api.call(consumer, "receive", timeout=10)
    assert again.data == b"retry-me"
    assert again.message_id == first.message_id
    assert again.redelivery_count == first.redelivery_count + 1
    api.call(consumer, "ack", again)


def test_ack_timeout_redelivers_unacked(api, topic):
    producer, consumer = redelivery_setup(api, topic, ack_timeout=1.0)
    api.call(producer, "send", b"forgotten")
    first = api.call(consumer, "receive", timeout=10)
    again = api.call(consumer, "receive", timeout=15)
    assert again.message_id == first.message_id
    assert again.redelivery_count >= 1
    api.call(consumer, "ack", again)


def test_dead_letter_after_max_redeliveries(api, topic):
    dlq = topic + "-dlq"
    dlq_consumer = api.call(api.client, "subscribe", dlq, "dlq-sub", initial_position="earliest")
    producer, consumer = redelivery_setup(api, topic, nack_redelivery_delay=0.1, max_redeliver_count=2,
                                          dead_letter_topic=dlq)
    api.call(producer, "send", b"poison", key="pk", properties={"x": "1"})
    deliveries = 0
    while True:
        try:
            msg = api.call(consumer, "receive", timeout=3)
        except magnetar.Timeout:
            break
        deliveries += 1
        api.call(consumer, "nack", msg)
    assert deliveries == 3  # the first delivery plus two redeliveries
    dead = api.call(dlq_consumer, "receive", timeout=10)
    assert dead.data == b"poison"
    assert dead.key == "pk"
    assert dead.properties["x"] == "1"
    assert dead.properties["REAL_TOPIC"] == topic


def test_shared_subscription_spreads_and_cumulative_ack_is_refused(client, topic):
    producer = client.create_producer(topic, batching=False)
    c1 = client.subscribe(topic, "sub", subscription_type=magnetar.SubscriptionType.SHARED, receiver_queue_size=10)
    c2 = client.subscribe(topic, "sub", subscription_type=magnetar.SubscriptionType.SHARED, receiver_queue_size=10)
    for i in range(40):
        producer.send(b"%d" % i)
    got1 = c1.receive_many(40, timeout=2)
    got2 = c2.receive_many(40, timeout=2)
    while len(got1) + len(got2) < 40:
        got1 += c1.receive_many(40, timeout=0.5)
        got2 += c2.receive_many(40, timeout=0.5)
    assert sorted(int(m.data) for m in got1 + got2) == list(range(40))
    assert got1 and got2
    with pytest.raises(magnetar.InvalidConfiguration):
        c1.ack_cumulative(got1[-1])


def test_exclusive_subscription_refuses_a_second_consumer(client, topic):
    client.subscribe(topic, "excl")
    with pytest.raises(magnetar.ConsumerBusy) as info:
        client.subscribe(topic, "excl")
    assert info.value.code is not None


def test_seek_by_id_and_by_time(api, topic):
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    ids = [api.call(producer, "send", b"%d" % i) for i in range(10)]
    drain(api, consumer, 10)
    api.call(consumer, "seek", ids[5])
    # the sought message itself comes next (a subscription's seek is inclusive)
    assert api.call(consumer, "receive", timeout=10).data == b"5"
    api.call(consumer, "seek", magnetar.MessageId.earliest)
    assert api.call(consumer, "receive", timeout=10).data == b"0"
    api.call(consumer, "seek", int(time.time() * 1000) + 60_000)
    with pytest.raises(magnetar.Timeout):
        api.call(consumer, "receive", timeout=0.5)


def test_get_last_message_id(api, topic):
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    ids = [api.call(producer, "send", b"%d" % i) for i in range(3)]
    last = ids[-1]
    got = api.call(consumer, "get_last_message_id")
    assert (got.ledger_id, got.entry_id) == (last.ledger_id, last.entry_id)


def test_multi_topic_subscription(api, topic):
    topics = [topic + "-a", topic + "-b", topic + "-c"]
    consumer = api.call(api.client, "subscribe", topics, "sub", initial_position="earliest")
    for t in topics:
        p = api.call(api.client, "create_producer", t)
        api.call(p, "send", t.encode())
        api.call(p, "close")
    got = drain(api, consumer, 3)
    assert sorted(m.data.decode() for m in got) == sorted(topics)
    assert sorted(m.topic for m in got) == sorted(topics)
    for m in got:
        api.call(consumer, "ack", m)
        api.call(consumer, "ack", m.message_id)


def test_pattern_subscription_picks_up_new_topics(api, topic):
    base = topic.rsplit("/", 1)[1]
    first = api.call(api.client, "create_producer", f"{base}-p1")
    consumer = api.call(api.client, "subscribe", f"persistent://public/default/{base}-p.*", "sub", pattern=True,
                        initial_position="earliest", discovery_period=0.5)
    api.call(first, "send", b"one")
    assert api.call(consumer, "receive", timeout=10).data == b"one"
    second = api.call(api.client, "create_producer", f"{base}-p2")
    api.call(second, "send", b"two")
    assert api.call(consumer, "receive", timeout=15).data == b"two"


def test_get_last_message_ids_gives_each_partitions_last(api, broker, topic):
    broker.create_partitioned_topic(topic, 3)
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "last-ids")
    sent = {}
    for key in ("a", "b", "c", "d", "e", "f"):  # keys hash to partitions; the last per partition counts
        msg_id = api.call(producer, "send", key.encode(), key=key)
        sent[msg_id.partition] = msg_id
    ids = api.call(consumer, "get_last_message_ids")
    assert [i.partition for i in ids] == [0, 1, 2]
    for i in ids:
        if i.partition in sent:
            assert (i.ledger_id, i.entry_id) == (sent[i.partition].ledger_id, sent[i.partition].entry_id)
        else:
            assert i.entry_id < 0, "a partition nothing was sent to has no last message"
    assert api.call(consumer, "get_last_message_id") == max(ids)


def test_partitioned_topic_produce_and_consume(api, broker, topic):
    broker.create_partitioned_topic(topic, 4)
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    assert len(consumer.topics) == 4
    ids = [api.call(producer, "send", b"%d" % i) for i in range(40)]
    assert {i.partition for i in ids} == {0, 1, 2, 3}
    got = drain(api, consumer, 40)
    assert sorted(int(m.data) for m in got) == list(range(40))
    for m in got:
        api.call(consumer, "ack", m)


def test_ack_many_across_partitions_acks_exactly_those_messages(api, broker, topic):
    """ack_many groups ids by partition; the acked ones never come back, the others do."""
    broker.create_partitioned_topic(topic, 3)
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest")
    api.call(producer, "send_many", [b"%d" % i for i in range(600)], keys=[f"k{i}" for i in range(600)])
    got = drain(api, consumer, 600)
    assert {m.message_id.partition for m in got} == {0, 1, 2}
    acked = [m for m in got if int(m.data) % 3 != 0]
    api.call(consumer, "ack_many", acked)
    api.call(consumer, "ack_many", [])
    api.call(consumer, "close")  # flushes grouped acks
    again = api.call(api.client, "subscribe", topic, "sub")
    redelivered = drain(api, again, 200)
    assert sorted(int(m.data) for m in redelivered) == list(range(0, 600, 3))
    assert api.call(again, "receive_many", 10, timeout=0.5) == []
    api.call(again, "ack_many", (m.message_id for m in redelivered))
    api.call(again, "close")
    with pytest.raises(magnetar.AlreadyClosed):
        api.call(again, "ack_many", redelivered[:1])


def test_keyed_messages_stay_on_their_partition(client, broker, topic):
    broker.create_partitioned_topic(topic, 5)
    producer = client.create_producer(topic)
    keys = [f"key-{i}" for i in range(50)]
    futs = [producer.send_async(b"x", key=k) for k in keys]
    producer.flush()
    for k, f in zip(keys, futs):
        assert f.result(timeout=10).partition == magnetar._core._key_hash(k) % 5


def test_partitions_added_later_are_consumed(api, broker, topic):
    broker.create_partitioned_topic(topic, 2)
    consumer = api.call(api.client, "subscribe", topic, "sub", initial_position="earliest", discovery_period=0.5)
    broker.update_partitioned_topic(topic, 3)
    p2 = api.call(api.client, "create_producer", topic + "-partition-2")
    api.call(p2, "send", b"new-partition")
    assert api.call(consumer, "receive", timeout=15).data == b"new-partition"


def test_terminated_topic_ends_iteration(client, broker, topic):
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub", initial_position="earliest")
    producer.send_many([b"1", b"2"])
    broker.terminate_topic(topic)
    seen = []
    # The broker announces the end once every message is acknowledged.
    for m in consumer:
        seen.append(m.data)
        consumer.ack(m)
    assert seen == [b"1", b"2"]
    with pytest.raises(magnetar.TopicTerminated):
        consumer.receive(timeout=1)
    with pytest.raises(magnetar.TopicTerminated):
        producer.send(b"3")


def test_pause_and_resume(client, topic):
    producer = client.create_producer(topic, batching=False)
    consumer = client.subscribe(topic, "sub", initial_position="earliest", receiver_queue_size=5)
    consumer.pause()
    for i in range(20):
        producer.send(b"%d" % i)
    # Everything the paused consumer can take: what it had asked for before the pause (its
    # queue of 5), and no more however much is taken, since paused it asks for no more. An
    # unpaused consumer takes all 20 here, asking again as its queue drains.
    got = []
    with pytest.raises(magnetar.Timeout):
        while True:
            got.append(consumer.receive(timeout=2))
    assert len(got) <= 5, [m.data for m in got]
    consumer.resume()
    while len(got) < 20:
        got += consumer.receive_many(100, timeout=5)
    assert sorted(int(m.data) for m in got) == list(range(20))


def test_unsubscribe_deletes_the_subscription(client, broker, topic):
    consumer = client.subscribe(topic, "gone")
    assert "gone" in broker.topic_stats(topic)["subscriptions"]
    consumer.unsubscribe()
    assert "gone" not in broker.topic_stats(topic)["subscriptions"]
    with pytest.raises(magnetar.AlreadyClosed):
        consumer.receive(timeout=0.1)


def test_consumer_stats(api, topic):
    """The broker's figures for this consumer: a received, unacknowledged message counts as
    unacknowledged and in the backlog (a shared subscription, whose consumers the broker
    tracks acks for), and neither once it is acknowledged."""
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "stats-sub", initial_position="earliest",
                        subscription_type="shared")
    api.call(producer, "send", b"x")
    msg = api.call(consumer, "receive", timeout=10)
    stats = api.call(consumer, "stats")
    assert len(stats) == 1
    assert stats[0]["topic"] == topic
    assert (stats[0]["unacked_messages"], stats[0]["msg_backlog"]) == (1, 1), stats[0]
    api.call(consumer, "ack", msg)
    stats_after: list = []

    def settled() -> bool:
        stats_after[:] = api.call(consumer, "stats")
        return (stats_after[0]["unacked_messages"], stats_after[0]["msg_backlog"]) == (0, 0)

    assert wait_until(settled, 15), stats_after


def test_custom_router(api, broker, topic):
    broker.create_partitioned_topic(topic, 3)
    producer = api.call(api.client, "create_producer", topic, router=lambda key, n: 2)
    assert api.call(producer, "send", b"x", key="anything").partition == 2
    bad = api.call(api.client, "create_producer", topic, router=lambda key, n: 7)
    with pytest.raises(magnetar.InvalidConfiguration):
        api.call(bad, "send", b"x")


def test_producer_picks_up_added_partitions(client, broker, topic):
    broker.create_partitioned_topic(topic, 1)
    producer = client.create_producer(topic, partitions_update_interval=0.3, batching=False)
    broker.update_partitioned_topic(topic, 2)
    consumer = client.subscribe(topic + "-partition-1", "s", initial_position="earliest")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if producer.send(b"x", key="k").partition == 1 or producer.send(b"y").partition == 1:
            break
        time.sleep(0.1)
    assert consumer.receive(timeout=10)


def test_key_based_batching_keeps_keys_in_their_own_batches(client, topic):
    producer = client.create_producer(topic, batching_type="key_based", batch_max_delay=0.5)
    consumer = client.subscribe(topic, "s", subscription_type="key_shared", initial_position="earliest")
    keys = ["a", "b", "a", "c", "b", "a"]
    futs = [producer.send_async(f"{k}{i}".encode(), key=k) for i, k in enumerate(keys)]
    producer.flush()
    ids = [f.result(timeout=10) for f in futs]
    by_entry: dict[tuple[int, int], set[str]] = {}
    for k, i in zip(keys, ids):
        by_entry.setdefault((i.ledger_id, i.entry_id), set()).add(k)
    assert all(len(v) == 1 for v in by_entry.values())
    got = [consumer.receive(timeout=10) for _ in keys]
    per_key: dict[str, list[bytes]] = {}
    for m in got:
        per_key.setdefault(m.key, []).append(m.data)
    assert per_key == {"a": [b"a0", b"a2", b"a5"], "b": [b"b1", b"b4"], "c": [b"c3"]}


def test_memoryview_of_a_message_is_zero_copy(client, topic):
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer.send(b"zero-copy payload")
    msg = consumer.receive(timeout=10)
    view = memoryview(msg)
    assert view.readonly and bytes(view) == b"zero-copy payload" and len(msg) == len(view)
    # The view exports the message's own payload: the message is the exporter, and every view
    # (and every buffer made from one) sees the same memory rather than a copy of its own.
    import pyarrow as pa

    again = memoryview(msg)
    assert view.obj is msg
    assert pa.py_buffer(view).address == pa.py_buffer(again).address


def test_ack_with_receipt(api, topic):
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "rcpt", initial_position="earliest")
    for i in range(3):
        api.call(producer, "send", b"%d" % i)
    got = drain(api, consumer, 3)
    api.call(consumer, "ack_with_receipt", got[0])
    api.call(consumer, "ack_with_receipt", got[2], cumulative=True)
    api.call(consumer, "close")
    again = api.call(api.client, "subscribe", topic, "rcpt")
    with pytest.raises(magnetar.Timeout):
        api.call(again, "receive", timeout=0.5)


def _one_batch(client: magnetar.Client, topic: str, n: int,
               consuming: magnetar.Client | None = None) -> tuple[magnetar.Producer, magnetar.Consumer, list]:
    """A Shared consumer (of ``consuming``, else of ``client``) that received ``n`` messages
    sent as one batch entry."""
    producer = client.create_producer(topic, batch_max_messages=n, batch_max_delay=5.0)
    consumer = (consuming or client).subscribe(topic, "s", subscription_type="shared", initial_position="earliest")
    for i in range(n):
        producer.send_async(b"%d" % i)
    producer.flush()
    got = [consumer.receive(timeout=10) for _ in range(n)]
    assert len({(m.message_id.ledger_id, m.message_id.entry_id) for m in got}) == 1, "one batch entry"
    return producer, consumer, got


def test_a_receipt_of_part_of_a_batch_is_not_given_before_the_broker_has_the_ack(broker, topic):
    """Without batch-index acks the broker acks a batch entry only whole, so the receipt of one
    of its messages cannot be given while the rest is unacked: it times out saying so. The
    receipt of the ack that completes the entry is given once the broker has the entry."""
    # The topic and the subscription are made by a client with the usual timeout: only the
    # receipt's wait is to be short.
    with magnetar.Client(broker.service_url) as client, \
            magnetar.Client(broker.service_url, operation_timeout=2.0) as impatient:
        _, consumer, got = _one_batch(client, topic, 4, consuming=impatient)
        with pytest.raises(magnetar.Timeout, match="whole batch"):
            consumer.ack_with_receipt(got[0])
        consumer.ack_many(got[1:-1])
        consumer.ack_with_receipt(got[-1])  # the last of the batch: the entry is whole, and confirmed
        consumer.ack_with_receipt(got[0])  # the receipt that timed out, retried: confirmed already
        subscription = broker.topic_stats(topic)["subscriptions"]["s"]
        assert subscription["msgBacklog"] == 0 and subscription["unackedMessages"] == 0


def test_a_consumer_goes_on_while_a_receipt_waits_and_the_receipt_follows_it_across_an_unload(broker, topic):
    """While a receipt waits (here for the rest of its batch), the consumer is not held up: it
    follows an unload of its topic to the new connection and receives there (the batch's unacked
    messages again, then a new one); the receipt is given once the broker confirmed the ack, on
    the new connection."""
    with magnetar.Client(broker.service_url, operation_timeout=60.0) as client:
        producer, consumer, got = _one_batch(client, topic, 10)
        outcome: dict[str, object] = {}
        done = threading.Event()

        def wait_for_the_receipt() -> None:
            try:
                consumer.ack_with_receipt(got[0])
                outcome["confirmed"] = True
            except Exception as e:  # noqa: BLE001 - handed to the assertion below
                outcome["error"] = e
            finally:
                done.set()

        threading.Thread(target=wait_for_the_receipt, daemon=True).start()
        broker.unload_topic(topic)
        producer.send(b"after the unload")
        # The unacked rest of the batch comes again on the new connection (not the acked
        # first message), then the new one.
        again: list[magnetar.Message] = []
        while not again or again[-1].data != b"after the unload":
            again.append(consumer.receive(timeout=30))
        assert [m.data for m in again[:-1]] == [m.data for m in got[1:]]
        assert not done.is_set(), f"a receipt for half a batch was given: {outcome}"
        consumer.ack_many(again[:-1])
        assert done.wait(30) and outcome == {"confirmed": True}
        assert broker.topic_stats(topic)["subscriptions"]["s"]["msgBacklog"] == 1  # "after the unload"


def test_replicate_subscription_state_is_asked_of_the_broker(broker, topic):
    """``replicate_subscription_state=True`` subscribes with the flag: the broker marks the
    subscription replicated (its position then goes to the other clusters of a geo-replicated
    topic), and only that one."""
    with magnetar.Client(broker.service_url) as client:
        client.subscribe(topic, "replicated", replicate_subscription_state=True)
        client.subscribe(topic, "plain")
        subscriptions = broker.topic_stats(topic)["subscriptions"]
        assert subscriptions["replicated"]["isReplicated"] is True
        assert subscriptions["plain"]["isReplicated"] is False


def test_receive_many_stops_at_its_byte_limit(api, topic):
    """``max_bytes`` bounds the payload bytes of one ``receive_many`` (the first message always
    comes, even when larger than the limit); the rest stays queued, in order."""
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "bytes", initial_position="earliest")
    sizes = [300, 300, 300, 1000, 10]
    for i, n in enumerate(sizes):
        api.call(producer, "send", bytes([i]) * n)
    got: list[list[int]] = []
    while sum(len(g) for g in got) < len(sizes):
        batch = api.call(consumer, "receive_many", 10, timeout=10, max_bytes=700)
        got.append([len(m) for m in batch])
    flat = [n for g in got for n in g]
    assert flat == sizes
    assert all(sum(g) <= 700 or len(g) == 1 for g in got), got
    with pytest.raises(magnetar.InvalidConfiguration):
        api.call(consumer, "receive_many", 10, timeout=0, max_bytes=0)
