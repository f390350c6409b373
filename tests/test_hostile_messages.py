"""Messages that must not hurt a consumer: an entry whose batch declares 2**31 - 1 messages
(one such message used to abort every consumer process of the topic), a batch shorter than it
says, and chunk streams with duplicates, gaps and a missing end.

The batch cases go through the real broker: a hand-made producer (raw protocol on a socket)
publishes what no well-behaved client would. The chunk cases use the fake peer, which can
order chunks as a producer's reconnect does.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import magnetar
from magnetar.testing import Standalone
from test_fake_peer import (
    ACK, FakePeer, client_for, close_bounded, command, f_bytes, f_varint, frame, parse, payload_frame,
    run_bounded,
)
from test_consumer_integrity import RewindingBroker

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


class RawProducer:
    """Just enough of the protocol to publish hand-made entries to a real broker."""

    def __init__(self, port: int, topic: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""
        self.sock.sendall(frame(command(CONNECT, f_bytes(1, "hostile-test") + f_varint(4, 21))))
        self._expect(CONNECTED)
        self.sock.sendall(frame(command(PRODUCER, f_bytes(1, topic) + f_varint(2, 1) + f_varint(3, 1))))
        self._expect(PRODUCER_SUCCESS)
        self.seq = 0

    def _read_frame(self) -> tuple[int, dict[int, list[Any]]]:
        while True:
            if len(self.buf) >= 8:
                total, size = struct.unpack(">II", self.buf[:8])
                if len(self.buf) >= 4 + total:
                    cmd = parse(self.buf[8:8 + size])
                    self.buf = self.buf[4 + total:]
                    t = cmd[1][0]
                    return t, parse(cmd[t][0]) if t in cmd else {}
            chunk = self.sock.recv(65536)
            assert chunk, "broker closed the connection"
            self.buf += chunk

    def _expect(self, type_: int) -> dict[int, list[Any]]:
        while True:
            t, body = self._read_frame()
            if t == type_:
                return body
            assert t in (CONNECTED, 18, 19, 22, 24, 37), f"unexpected command {t}: {body}"  # pings, etc.

    def publish(self, metadata: bytes, payload: bytes, num_messages: int = 1) -> None:
        send = f_varint(1, 1) + f_varint(2, self.seq) + f_varint(3, num_messages)
        self.sock.sendall(payload_frame(command(SEND, send), metadata, payload))
        self._expect(SEND_RECEIPT)
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


# --------------------------------------------------------------------------- chunks (fake peer)


def _chunk(cid: int, entry: int, uid: str, chunk_id: int, num: int, data: bytes, total: int) -> bytes:
    meta = _meta(entry, extra=f_bytes(26, uid) + f_varint(27, num) + f_varint(28, total) + f_varint(29, chunk_id))
    body = f_varint(1, cid) + f_bytes(2, f_varint(1, 7) + f_varint(2, entry))
    return payload_frame(command(9, body), meta, data)


def _acked(peer: FakePeer) -> set[int]:
    out = set()
    for t, body in peer.received:
        if t == ACK:
            for raw in body.get(3, []):
                out.add(parse(raw)[2][0])
    return out


def _wait_acked(peer: FakePeer, entries: set[int], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not entries <= _acked(peer):
        if time.monotonic() > deadline:
            pytest.fail(f"entries {sorted(entries - _acked(peer))} were never acked; acked: {sorted(_acked(peer))}")
        time.sleep(0.02)


def _stream(frames: dict[int, Any]) -> RewindingBroker:
    """A broker whose entries are the given chunk frames (built once the consumer id is known)."""
    fake = RewindingBroker(entries=max(frames), hold_second_subscribe=False)

    class Lazy(dict):  # type: ignore[type-arg]
        def __contains__(self, entry: object) -> bool:
            return entry in frames

        def __getitem__(self, entry: int) -> bytes:
            return frames[entry](fake.consumer_id)

    fake.frames = Lazy()
    return fake


@contextlib.contextmanager
def _consuming(frames: dict[int, Any], **subscribe: Any) -> Iterator[tuple[FakePeer, magnetar.Consumer]]:
    """A fake broker serving ``frames`` and an Exclusive consumer of it (from the earliest)."""
    fake = _stream(frames)
    with FakePeer(fake.behaviour) as peer:
        client = client_for(peer)
        try:
            consumer = run_bounded(lambda: client.subscribe("t", "s", initial_position="earliest", **subscribe), 15)[0]
            yield peer, consumer
        finally:
            close_bounded(client)


def _normal(entry: int, data: bytes) -> Any:
    def make(cid: int) -> bytes:
        body = f_varint(1, cid) + f_bytes(2, f_varint(1, 7) + f_varint(2, entry))
        return payload_frame(command(9, body), _meta(entry), data)
    return make


def test_a_duplicate_chunk_is_skipped_and_acked_and_the_message_is_whole() -> None:
    """c0 c1 c1' c2 (a producer resent c1 after a reconnect, dedup off): one message, whole,
    and the duplicate's entry acked."""
    u = "p-1"
    parts = [b"aaa", b"bbb", b"ccc"]
    frames = {
        1: lambda cid: _chunk(cid, 1, u, 0, 3, parts[0], 9),
        2: lambda cid: _chunk(cid, 2, u, 1, 3, parts[1], 9),
        3: lambda cid: _chunk(cid, 3, u, 1, 3, parts[1], 9),
        4: lambda cid: _chunk(cid, 4, u, 2, 3, parts[2], 9),
        5: _normal(5, b"after"),
    }
    with _consuming(frames) as (peer, consumer):
        first = consumer.receive(timeout=10)
        assert first.data == b"aaabbbccc"
        assert consumer.receive(timeout=10).data == b"after"
        _wait_acked(peer, {3})
        consumer.ack(first)
        _wait_acked(peer, {1, 2, 3, 4})


def test_a_chunked_message_with_a_gap_is_given_up_and_acked() -> None:
    """c0 then c2 (c1 lost): the message can never complete; its chunks are acked, not left
    as a hole, and the next message is delivered."""
    u = "p-2"
    frames = {
        1: lambda cid: _chunk(cid, 1, u, 0, 3, b"aaa", 9),
        2: lambda cid: _chunk(cid, 2, u, 2, 3, b"ccc", 9),
        3: _normal(3, b"after"),
    }
    with _consuming(frames) as (peer, consumer):
        assert consumer.receive(timeout=10).data == b"after"
        _wait_acked(peer, {1, 2})


def test_an_incomplete_chunked_message_expires_and_its_chunks_are_acked() -> None:
    u = "p-3"
    frames = {
        1: lambda cid: _chunk(cid, 1, u, 0, 3, b"aaa", 9),
        2: lambda cid: _chunk(cid, 2, u, 1, 3, b"bbb", 9),
        3: _normal(3, b"after"),
    }
    with _consuming(frames, chunk_expiry=0.5) as (peer, consumer):
        assert consumer.receive(timeout=10).data == b"after"
        _wait_acked(peer, {1, 2})


def test_chunked_messages_beyond_the_pending_limit_give_up_the_oldest() -> None:
    """Three interleaved chunked messages with max_pending_chunked_messages=2: the oldest is
    given up (acked), the other two complete."""
    frames = {
        1: lambda cid: _chunk(cid, 1, "a", 0, 2, b"a0", 4),
        2: lambda cid: _chunk(cid, 2, "b", 0, 2, b"b0", 4),
        3: lambda cid: _chunk(cid, 3, "c", 0, 2, b"c0", 4),
        4: lambda cid: _chunk(cid, 4, "b", 1, 2, b"b1", 4),
        5: lambda cid: _chunk(cid, 5, "c", 1, 2, b"c1", 4),
    }
    with _consuming(frames, max_pending_chunked_messages=2) as (peer, consumer):
        got = [consumer.receive(timeout=10).data for _ in range(2)]
        assert got == [b"b0b1", b"c0c1"]
        _wait_acked(peer, {1})


@pytest.mark.parametrize("value", [-1.0, float("nan")])
def test_invalid_chunk_options_are_refused(service_url: str, value: float) -> None:
    with magnetar.Client(service_url) as client:
        with pytest.raises(magnetar.InvalidConfiguration):
            client.subscribe("t-invalid-chunk-opts", "s", chunk_expiry=value)
        with pytest.raises(magnetar.InvalidConfiguration):
            client.subscribe("t-invalid-chunk-opts", "s", max_pending_chunked_messages=0)
