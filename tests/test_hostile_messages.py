"""Messages that must not hurt a consumer: an entry whose batch declares 2**31 - 1 messages
(one such message used to abort every consumer process of the topic), a batch shorter than it
says, and chunk streams with duplicates, gaps and a missing end.

Every case goes through the real broker: a hand-made producer (raw protocol on a socket)
publishes what no well-behaved client would, chunks in the order a producer's reconnect leaves
them included; what the consumer acked is read from the broker's backlog.
"""

from __future__ import annotations

import contextlib
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import magnetar
from magnetar.testing import Standalone
from test_fake_peer import RawBrokerConnection, command, f_bytes, f_varint, frame, payload_frame
from waiting import wait_until

pytestmark = pytest.mark.timeout(120)

CONNECT, CONNECTED, PRODUCER, SEND, SEND_RECEIPT, PRODUCER_SUCCESS = 2, 3, 5, 6, 7, 17
BATCH_DESERIALIZE_ERROR = 3


def _meta(seq: int, *, batch: int | None = None, extra: bytes = b"") -> bytes:
    m = f_bytes(1, "hostile") + f_varint(2, seq) + f_varint(3, int(time.time() * 1000))
    if batch is not None:
        m += f_varint(11, batch)
    return m + extra


def _batch_payload(payloads: list[bytes]) -> bytes:
    out = b""
    for p in payloads:
        single = f_varint(3, len(p))
        out += struct.pack(">I", len(single)) + single + p
    return out


class RawProducer(RawBrokerConnection):
    """Just enough of the protocol to publish hand-made entries to a real broker."""

    tolerated = (CONNECTED, 18, 19, 22, 24, 37)  # pings, lookups and the like

    def __init__(self, port: int, topic: str) -> None:
        super().__init__(port, "hostile-test")
        self.sock.sendall(frame(command(PRODUCER, f_bytes(1, topic) + f_varint(2, 1) + f_varint(3, 1))))
        self.expect(PRODUCER_SUCCESS)
        self.seq = 0

    def publish(self, metadata: bytes, payload: bytes, num_messages: int = 1) -> None:
        send = f_varint(1, 1) + f_varint(2, self.seq) + f_varint(3, num_messages)
        self.sock.sendall(payload_frame(command(SEND, send), metadata, payload))
        self.expect(SEND_RECEIPT)
        self.seq += 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def hostile_topic(broker: Standalone) -> str:
    """A topic holding: a batch declaring 2**31 - 1 messages that holds two, a batch declaring
    three that holds two, then one good message."""
    topic = f"persistent://public/default/hostile-{uuid.uuid4().hex[:10]}"
    with magnetar.Client(broker.service_url) as c:
        c.create_producer(topic).close()  # the topic exists before the raw producer
    raw = RawProducer(broker.port, topic)
    try:
        raw.publish(_meta(0, batch=2**31 - 1), _batch_payload([b"x1", b"x2"]), num_messages=2)
        raw.publish(_meta(1, batch=3), _batch_payload([b"y1", b"y2"]), num_messages=3)
        raw.publish(_meta(2), b"good")
    finally:
        raw.close()
    return topic


def _corrupt_count(consumer: magnetar.Consumer) -> int:
    return int(consumer._core.corrupt_messages)


def test_a_batch_declaring_2_31_messages_is_skipped_and_the_next_is_delivered(
        hostile_topic: str, service_url: str) -> None:
    """The consumer survives (the process used to abort), skips both malformed batches with a
    logged error, acks them, counts them as corrupt, and delivers the good message. A second
    consumer on the same subscription afterwards sees nothing: they were acked."""
    with magnetar.Client(service_url, operation_timeout=20) as client:
        consumer = client.subscribe(hostile_topic, "s", initial_position="earliest")
        msg = consumer.receive(timeout=20)
        assert msg.data == b"good"
        assert _corrupt_count(consumer) == 2
        consumer.ack(msg)
        consumer.close()
        again = client.subscribe(hostile_topic, "s", initial_position="earliest")
        with pytest.raises(magnetar.Timeout):
            again.receive(timeout=1.0)


def test_malformed_messages_are_dead_lettered_when_the_subscription_has_a_dead_letter_topic(
        hostile_topic: str, service_url: str) -> None:
    dlq = hostile_topic + "-dlq"
    with magnetar.Client(service_url, operation_timeout=20) as client:
        dead = client.subscribe(dlq, "watch", initial_position="earliest")
        consumer = client.subscribe(hostile_topic, "s", initial_position="earliest", dead_letter_topic=dlq)
        assert consumer.receive(timeout=20).data == b"good"
        letters = [dead.receive(timeout=20) for _ in range(2)]
        assert all(m.properties.get("REAL_TOPIC") == hostile_topic for m in letters)
        assert all("ORIGIN_MESSAGE_ID" in m.properties for m in letters)


# --------------------------------------------------------------------------- chunks


def _chunk(seq: int, uid: str, chunk_id: int, num: int, data: bytes, total: int) -> tuple[bytes, bytes]:
    """One chunk of a chunked message, as the metadata and payload of an entry of its own."""
    return _meta(seq, extra=f_bytes(26, uid) + f_varint(27, num) + f_varint(28, total) + f_varint(29, chunk_id)), data


def _normal(seq: int, data: bytes) -> tuple[bytes, bytes]:
    return _meta(seq), data


@contextlib.contextmanager
def _consuming(broker: Standalone, entries: list[tuple[bytes, bytes]],
               **subscribe: Any) -> Iterator[tuple[Callable[[], int], magnetar.Consumer]]:
    """A fresh topic of the real broker holding ``entries``, one entry each (the raw producer
    orders chunks as a producer's reconnect does), and an Exclusive consumer of it from the
    earliest. Yields the subscription's backlog (entries not acked, as the broker counts them)
    and the consumer."""
    topic = f"persistent://public/default/chunks-{uuid.uuid4().hex[:10]}"
    with magnetar.Client(broker.service_url, operation_timeout=20) as client:
        client.create_producer(topic).close()  # the topic exists before the raw producer
        raw = RawProducer(broker.port, topic)
        try:
            for meta, payload in entries:
                raw.publish(meta, payload)
        finally:
            raw.close()
        consumer = client.subscribe(topic, "s", initial_position="earliest", **subscribe)
        yield lambda: int(broker.topic_stats(topic)["subscriptions"]["s"]["msgBacklog"]), consumer


def _settles_at(backlog: Callable[[], int], n: int) -> None:
    assert wait_until(lambda: backlog() == n, 15), f"backlog {backlog()}, {n} expected"


def test_a_duplicate_chunk_is_skipped_and_acked_and_the_message_is_whole(broker: Standalone) -> None:
    """c0 c1 c1' c2 (a producer resent c1 after a reconnect, dedup off): one message, whole,
    and the duplicate's entry acked by the consumer itself."""
    u = "p-1"
    parts = [b"aaa", b"bbb", b"ccc"]
    entries = [_chunk(1, u, 0, 3, parts[0], 9), _chunk(2, u, 1, 3, parts[1], 9), _chunk(3, u, 1, 3, parts[1], 9),
               _chunk(4, u, 2, 3, parts[2], 9), _normal(5, b"after")]
    with _consuming(broker, entries) as (backlog, consumer):
        first = consumer.receive(timeout=10)
        assert first.data == b"aaabbbccc"
        after = consumer.receive(timeout=10)
        assert after.data == b"after"
        _settles_at(backlog, 4)  # the duplicate's entry: acked
        consumer.ack(first)
        _settles_at(backlog, 1)  # and the message's three: only "after" is left
        consumer.ack(after)
        _settles_at(backlog, 0)


def test_a_chunked_message_with_a_gap_is_given_up_and_acked(broker: Standalone) -> None:
    """c0 then c2 (c1 lost): the message can never complete; its chunks are acked, not left
    as a hole, and the next message is delivered."""
    u = "p-2"
    entries = [_chunk(1, u, 0, 3, b"aaa", 9), _chunk(2, u, 2, 3, b"ccc", 9), _normal(3, b"after")]
    with _consuming(broker, entries) as (backlog, consumer):
        assert consumer.receive(timeout=10).data == b"after"
        _settles_at(backlog, 1)


def test_an_incomplete_chunked_message_expires_and_its_chunks_are_acked(broker: Standalone) -> None:
    u = "p-3"
    entries = [_chunk(1, u, 0, 3, b"aaa", 9), _chunk(2, u, 1, 3, b"bbb", 9), _normal(3, b"after")]
    with _consuming(broker, entries, chunk_expiry=0.5) as (backlog, consumer):
        assert consumer.receive(timeout=10).data == b"after"
        _settles_at(backlog, 1)


def test_chunked_messages_beyond_the_pending_limit_give_up_the_oldest(broker: Standalone) -> None:
    """Three interleaved chunked messages with max_pending_chunked_messages=2: the oldest is
    given up (acked), the other two complete."""
    entries = [_chunk(1, "a", 0, 2, b"a0", 4), _chunk(2, "b", 0, 2, b"b0", 4), _chunk(3, "c", 0, 2, b"c0", 4),
               _chunk(4, "b", 1, 2, b"b1", 4), _chunk(5, "c", 1, 2, b"c1", 4)]
    with _consuming(broker, entries, max_pending_chunked_messages=2) as (backlog, consumer):
        got = [consumer.receive(timeout=10).data for _ in range(2)]
        assert got == [b"b0b1", b"c0c1"]
        _settles_at(backlog, 4)  # "a"'s one entry acked; the other four wait for the application


@pytest.mark.parametrize("value", [-1.0, float("nan")])
def test_invalid_chunk_options_are_refused(service_url: str, value: float) -> None:
    with magnetar.Client(service_url) as client:
        with pytest.raises(magnetar.InvalidConfiguration):
            client.subscribe("t-invalid-chunk-opts", "s", chunk_expiry=value)
        with pytest.raises(magnetar.InvalidConfiguration):
            client.subscribe("t-invalid-chunk-opts", "s", max_pending_chunked_messages=0)
