"""Readers: start positions, inclusive starts, has_message_available, seek, iteration."""

from __future__ import annotations

import time

import pytest

import magnetar


@pytest.fixture
def filled(client, topic):
    producer = client.create_producer(topic, batching=False)
    ids = [producer.send(b"%d" % i) for i in range(10)]
    return topic, ids


def test_reader_from_earliest_reads_everything_then_catches_up(api, filled):
    topic, ids = filled
    reader = api.call(api.client, "create_reader", topic, magnetar.MessageId.earliest)
    got = []
    while api.call(reader, "has_message_available"):
        got.append(api.call(reader, "read_next", timeout=10))
    assert [m.data for m in got] == [b"%d" % i for i in range(10)]
    assert [m.message_id for m in got] == ids
    api.call(reader, "close")


def test_reader_from_an_id_exclusive_and_inclusive(api, filled):
    topic, ids = filled
    r = api.call(api.client, "create_reader", topic, ids[3])
    assert api.call(r, "read_next", timeout=10).data == b"4"
    r2 = api.call(api.client, "create_reader", topic, ids[3], start_inclusive=True)
    assert api.call(r2, "read_next", timeout=10).data == b"3"


def test_reader_from_latest_sees_only_new_messages(api, client, filled):
    topic, _ = filled
    reader = api.call(api.client, "create_reader", topic, magnetar.MessageId.latest)
    assert api.call(reader, "has_message_available") is False
    client.create_producer(topic).send(b"fresh")
    assert api.call(reader, "read_next", timeout=10).data == b"fresh"


def test_reader_at_latest_inclusive_starts_at_the_last_message(api, filled):
    topic, ids = filled
    reader = api.call(api.client, "create_reader", topic, magnetar.MessageId.latest, start_inclusive=True)
    assert api.call(reader, "has_message_available") is True
    last = api.call(reader, "read_next", timeout=10)
    assert (last.data, last.message_id) == (b"9", ids[-1])
    assert api.call(reader, "has_message_available") is False


def test_nothing_is_available_after_seeking_to_latest(api, client, filled):
    topic, _ = filled
    reader = api.call(api.client, "create_reader", topic, magnetar.MessageId.earliest)
    assert api.call(reader, "has_message_available") is True
    api.call(reader, "seek", magnetar.MessageId.latest)
    assert api.call(reader, "has_message_available") is False
    client.create_producer(topic).send(b"fresh")
    assert api.call(reader, "has_message_available") is True
    assert api.call(reader, "read_next", timeout=10).data == b"fresh"


def test_reader_from_a_time(api, client, topic):
    producer = client.create_producer(topic, batching=False)
    producer.send(b"old")
    time.sleep(0.05)  # publish times are in milliseconds: separate the two groups
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    producer.send(b"new")
    reader = api.call(api.client, "create_reader", topic, cut)
    assert api.call(reader, "read_next", timeout=10).data == b"new"


def test_reader_seek_and_batched_start(client, topic):
    producer = client.create_producer(topic, batching=True, batch_max_delay=1.0)
    futs = [producer.send_async(b"%d" % i) for i in range(6)]
    producer.flush()
    ids = [f.result(timeout=10) for f in futs]
    assert ids[2].batch_index == 2
    reader = client.create_reader(topic, ids[2])
    assert reader.read_next(timeout=10).data == b"3"
    reader.seek(ids[0])
    # After seek, the reader restarts at the sought message (inclusive), the first of its batch.
    assert reader.read_next(timeout=10).data == b"0"


def test_reader_on_partitioned_topic(client, broker, topic):
    broker.create_partitioned_topic(topic, 3)
    producer = client.create_producer(topic, batching=False)
    for i in range(9):
        producer.send(b"%d" % i)
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(timeout=10))
    assert sorted(int(m.data) for m in got) == list(range(9))
