"""Messages larger than the broker's limit: chunked by the producer, reassembled by the
consumer, interoperable with the official client."""

from __future__ import annotations

import os

import pytest

import magnetar

BIG = 12 * 1024 * 1024


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_chunked_round_trip(api, topic, compression):
    producer = api.call(api.client, "create_producer", topic, chunking=True, batching=False, compression=compression)
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest")
    big = os.urandom(BIG // 2) * 2
    small = b"after"
    api.call(producer, "send", big, key="k", properties={"p": "v"})
    api.call(producer, "send", small)
    got = api.call(consumer, "receive", timeout=30)
    assert len(got.data) == len(big) and got.data == big
    assert got.key == "k" and got.properties == {"p": "v"}
    api.call(consumer, "ack", got)
    assert api.call(consumer, "receive", timeout=10).data == small


def test_chunked_message_acked_is_not_redelivered(client, topic):
    producer = client.create_producer(topic, chunking=True, batching=False)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer.send(b"z" * BIG)
    producer.send(b"tail")
    consumer.ack(consumer.receive(timeout=30))
    consumer.close()
    again = client.subscribe(topic, "s")
    assert again.receive(timeout=10).data == b"tail"


@pytest.mark.interop
def test_chunks_interoperate_with_the_official_client(service_url, client, topic):
    import pulsar

    official = pulsar.Client(service_url)
    try:
        big = os.urandom(7 * 1024 * 1024)
        # magnetar -> official
        consumer = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
        client.create_producer(topic, chunking=True, batching=False).send(big)
        msg = consumer.receive(30_000)
        assert msg.data() == big
        consumer.acknowledge(msg)
        # official -> magnetar
        other = topic + "-2"
        mine = client.subscribe(other, "mine", initial_position="earliest")
        producer = official.create_producer(other, chunking_enabled=True, batching_enabled=False)
        producer.send(big)
        assert mine.receive(timeout=30).data == big
    finally:
        official.close()


@pytest.mark.parametrize("mode", ["shared", "failover"])
def test_a_chunked_message_acked_in_a_transaction_acks_every_chunk(broker, client, topic, mode):
    # Individual acks (Shared) and a cumulative ack, which on Failover goes as individual acks
    # of what it covers: either way the entries of the earlier chunks must be acknowledged too,
    # or they stay in the backlog for ever (the message itself is never complete again).
    producer = client.create_producer(topic, chunking=True, batching=False)
    consumer = client.subscribe(topic, "s", subscription_type=mode, initial_position="earliest")
    producer.send(b"z" * BIG)
    producer.send(b"tail")
    big, tail = consumer.receive(timeout=30), consumer.receive(timeout=10)
    assert (len(big.data), tail.data) == (BIG, b"tail")
    with client.new_transaction() as txn:
        if mode == "shared":
            consumer.ack(big, txn=txn)
            consumer.ack(tail, txn=txn)
        else:
            consumer.ack_cumulative(tail, txn=txn)
    # The coordinator answers the commit once every subscription has applied it.
    assert broker.topic_stats(topic)["subscriptions"]["s"]["msgBacklog"] == 0
