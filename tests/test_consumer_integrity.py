"""No acked message comes back: the consumer's side of a reconnect, against a fake broker that
does what a real one does when an Exclusive subscription is reattached — it rewinds to the
first entry it has not seen acked and, on the first Flow, sends everything from there.

A real broker cannot be made to hold a Subscribe's answer while the application keeps acking;
this fake can, which makes each race here happen every time instead of once in twenty runs.
The same defects are exercised on a real broker by tests/test_integrity.py and
``scripts/dev stress unload``.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from typing import Any

import pytest

import magnetar
from test_fake_peer import (
    ACK, CLOSE_CONSUMER, FLOW, SUBSCRIBE, SUCCESS, FakePeer, PeerConn, client_for, close_bounded,
    RawBrokerConnection, command, f_bytes, f_varint, frame, metadata, parse, payload_frame, run_bounded,
)
from waiting import wait_until

pytestmark = pytest.mark.timeout(60)

MESSAGE, ACK_RESPONSE = 9, 38


def _message(consumer_id: int, entry: int, data: bytes, meta: bytes | None = None) -> bytes:
    body = f_varint(1, consumer_id) + f_bytes(2, f_varint(1, 7) + f_varint(2, entry))
    return payload_frame(command(MESSAGE, body), metadata(entry) if meta is None else meta, data)


def _batch(consumer_id: int, entry: int, payloads: list[bytes]) -> bytes:
    """One entry holding a batch: [size][SingleMessageMetadata][payload] per message."""
    data = b""
    for p in payloads:
        single = f_varint(3, len(p))
        data += struct.pack(">I", len(single)) + single + p
    return _message(consumer_id, entry, data, meta=metadata(entry) + f_varint(11, len(payloads)))


def _acked_entries(body: dict[int, list[Any]]) -> list[tuple[int, list[int]]]:
    """(entry, ack_set) of each id in a CommandAck body."""
    out = []
    for raw in body.get(3, []):
        mid = parse(raw)
        out.append((mid[2][0], mid.get(5, [])))
    return out


class RewindingBroker:
    """A fake broker for one topic of ``entries`` entries (entry ids 1..n). Every Flow sends
    every entry it has not seen acked in full, like an Exclusive subscribe's rewind.

    ``hold_second_subscribe``: the answer to the second Subscribe waits until ``release()``.
    ``forget_acks``: acks are recorded as received but never applied, and never answered, as
    if they had been lost with the connection.
    """

    def __init__(self, frames: dict[int, bytes] | None = None, entries: int = 20, *,
                 hold_second_subscribe: bool = True, forget_acks: bool = False) -> None:
        self.frames = frames
        self.entries = entries
        self.hold_second_subscribe = hold_second_subscribe
        self.forget_acks = forget_acks
        self.acked: set[int] = set()
        self.subscribes = 0
        self.log: list[tuple[int, int]] = []  # (subscribe number, command type)
        self.ack_log: list[tuple[int, list[tuple[int, list[int]]]]] = []
        self._release: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.conn: PeerConn | None = None
        self.consumer_id = 0

    def frame_for(self, entry: int) -> bytes:
        if self.frames is not None and entry in self.frames:
            return self.frames[entry]
        return _message(self.consumer_id, entry, b"m%d" % entry)

    def release(self) -> None:
        assert self._loop is not None and self._release is not None
        self._loop.call_soon_threadsafe(self._release.set)

    def close_consumer(self) -> None:
        """The broker closes the consumer (what a topic unload does)."""
        assert self._loop is not None and self.conn is not None
        conn = self.conn
        body = f_varint(1, self.consumer_id) + f_varint(2, 0)
        asyncio.run_coroutine_threadsafe(conn.send(frame(command(CLOSE_CONSUMER, body))), self._loop).result(5)

    async def behaviour(self, conn: PeerConn) -> None:
        self._loop = asyncio.get_running_loop()
        self._release = self._release or asyncio.Event()
        self.conn = conn
        if not await conn.handshake():
            return

        async def on_subscribe(c: PeerConn, body: dict[int, list[Any]]) -> None:
            self.subscribes += 1
            self.consumer_id = body[4][0]
            if self.subscribes == 2 and self.hold_second_subscribe:
                assert self._release is not None
                await self._release.wait()
            await c.send(frame(command(SUCCESS, f_varint(1, body[5][0]))))

        async def on_flow(c: PeerConn, body: dict[int, list[Any]]) -> None:
            self.log.append((self.subscribes, FLOW))
            for entry in range(1, self.entries + 1):
                if entry not in self.acked:
                    await c.send(self.frame_for(entry))

        async def on_ack(c: PeerConn, body: dict[int, list[Any]]) -> None:
            self.log.append((self.subscribes, ACK))
            ids = _acked_entries(body)
            self.ack_log.append((self.subscribes, ids))
            if self.forget_acks:
                return
            for entry, ack_set in ids:
                if not ack_set:
                    self.acked.add(entry)
            if 8 in body:
                answer = f_varint(1, body[1][0]) + f_varint(6, body[8][0])
                await c.send(frame(command(ACK_RESPONSE, answer)))

        await conn.serve({SUBSCRIBE: on_subscribe, FLOW: on_flow, ACK: on_ack})


def _wait_for(cond: Any, what: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def _receive_all(consumer: magnetar.Consumer, idle: float = 0.5) -> list[magnetar.Message]:
    out = []
    while True:
        try:
            out.append(consumer.receive(timeout=idle))
        except magnetar.Timeout:
            return out


def _subscribe(client: magnetar.Client, **kw: Any) -> magnetar.Consumer:
    kw.setdefault("subscription_type", magnetar.SubscriptionType.EXCLUSIVE)
    consumer, error, _ = run_bounded(lambda: client.subscribe("t", "s", **kw), 15)
    assert error is None, repr(error)
    return consumer


def test_acks_made_while_detached_reach_the_broker_before_the_first_flow() -> None:
    """The application takes half the messages, the broker closes the consumer, and while the
    resubscribe waits the application acks what it took. Nothing it acked comes back, the
    queue it had not taken is gone at the detach (not served stale), and on the new
    subscription the acks precede the Flow."""
    fake = RewindingBroker()
    with FakePeer(fake.behaviour) as peer:
        client = client_for(peer, initial_backoff=0.05)
        try:
            consumer = _subscribe(client)
            _wait_for(lambda: len(fake.log) >= 1, "the first flow")
            taken = [consumer.receive(timeout=5) for _ in range(10)]
            fake.close_consumer()
            _wait_for(lambda: fake.subscribes == 2, "the resubscribe")
            # The inbox was dropped at the detach: nothing stale to take while detached.
            with pytest.raises(magnetar.Timeout):
                consumer.receive(timeout=0.3)
            acked = set()
            for m in taken:
                consumer.ack(m)
                acked.add(m.data)
            fake.release()
            rest = _receive_all(consumer)
            again = [m.data for m in rest if m.data in acked]
            assert not again, f"{len(again)} acked messages delivered again: {again}"
            assert sorted(m.data for m in taken + rest) == sorted(b"m%d" % i for i in range(1, 21))
            after = [t for n, t in fake.log if n == 2]
            assert after and after[0] == ACK, f"second subscription saw {after} (ACK must precede FLOW)"
        finally:
            close_bounded(client)


def test_acks_the_broker_never_confirmed_are_resent_and_filter_its_resends() -> None:
    """Acks lost with a connection (sent, never answered) go out again on the next one, and
    while unconfirmed they make the consumer drop the broker's resends of those messages."""
    fake = RewindingBroker(hold_second_subscribe=False, forget_acks=True)
    with FakePeer(fake.behaviour) as peer:
        client = client_for(peer, initial_backoff=0.05)
        try:
            consumer = _subscribe(client, ack_group_time=0)
            first = [consumer.receive(timeout=5) for _ in range(5)]
            for m in first:
                consumer.ack(m)
            _wait_for(lambda: sum(len(ids) for _, ids in fake.ack_log) >= 5, "the acks")
            fake.close_consumer()
            _wait_for(lambda: fake.subscribes == 2 and any(n == 2 for n, _ in fake.log), "the resubscribe")
            rest = _receive_all(consumer)
            acked = {m.data for m in first}
            again = [m.data for m in rest if m.data in acked]
            assert not again, f"acked messages delivered again: {again}"
            assert len(rest) == 15
            resent = {e for n, ids in fake.ack_log if n == 2 for e, _ in ids}
            assert {1, 2, 3, 4, 5} <= resent, f"acks not resent on the new connection: {fake.ack_log}"
        finally:
            close_bounded(client)


def test_a_partly_acked_batch_is_acked_in_full_after_a_reconnect() -> None:
    """A batch of three: the application acks the first and last, the consumer is closed and
    resubscribes, the broker resends the whole entry. Only the middle message is delivered
    again, and acking it acks the entry."""
    fake = RewindingBroker(entries=1, hold_second_subscribe=False)
    fake.frames = {}
    with FakePeer(fake.behaviour) as peer:
        client = client_for(peer, initial_backoff=0.05)
        try:
            fake.frames = _LazyBatch(fake)  # type: ignore[assignment]
            consumer = _subscribe(client, ack_group_time=0)
            msgs = [consumer.receive(timeout=5) for _ in range(3)]
            assert [m.data for m in msgs] == [b"a", b"b", b"c"]
            consumer.ack(msgs[0])
            consumer.ack(msgs[2])
            fake.close_consumer()
            again = _receive_all(consumer)
            assert [m.data for m in again] == [b"b"]
            consumer.ack(again[0])
            _wait_for(lambda: 1 in fake.acked, "the whole-entry ack")
        finally:
            close_bounded(client)


class _LazyBatch(dict):  # type: ignore[type-arg]
    """Frames for the batch entry, built with the consumer id known at send time."""

    def __init__(self, fake: RewindingBroker) -> None:
        super().__init__()
        self.fake = fake

    def __contains__(self, entry: object) -> bool:
        return entry == 1

    def __getitem__(self, entry: int) -> bytes:
        return _batch(self.fake.consumer_id, entry, [b"a", b"b", b"c"])


def test_a_queued_copy_of_an_acked_message_is_never_handed_out() -> None:
    """The application holds a message across a reconnect; the broker's resend of it is
    queued before the application acks the copy it holds. After that ack, the queued copy is
    never delivered."""
    fake = RewindingBroker(hold_second_subscribe=False)
    with FakePeer(fake.behaviour) as peer:
        client = client_for(peer, initial_backoff=0.05)
        try:
            consumer = _subscribe(client)
            held = consumer.receive(timeout=5)
            fake.close_consumer()
            _wait_for(lambda: sum(1 for n, t in fake.log if n == 2 and t == FLOW) == 1, "the second flow")
            # The resends, including a copy of the held message, are queued before the ack.
            _wait_for(lambda: consumer._core.queued >= 20, "the resent messages to be queued")
            consumer.ack(held)
            rest = _receive_all(consumer)
            assert held.data not in [m.data for m in rest]
            assert len(rest) == 19
        finally:
            close_bounded(client)


def test_threads_do_not_leak() -> None:
    """Clients made and closed one after another leave no thread behind: after the first one
    (which starts what lives as long as the process: the engine's runtime, the fake peer), the
    process's thread count (every OS thread, the engine's included) comes back to where it was
    after each further client."""
    fake = RewindingBroker(hold_second_subscribe=False)
    with FakePeer(fake.behaviour) as peer:

        def one_client() -> None:
            client = client_for(peer)
            _subscribe(client)
            close_bounded(client)

        one_client()
        baseline = os_threads()
        for _ in range(3):
            one_client()
        assert wait_until(lambda: os_threads() <= baseline, 20), \
            f"{os_threads()} threads after 3 more clients, {baseline} after the first"


def os_threads() -> int:
    """The process's threads, as the kernel counts them (Python's and the engine's)."""
    return len(os.listdir("/proc/self/task"))


# --------------------------------------------------------------------------- the fake, checked


class _RawConsumer(RawBrokerConnection):
    """Just enough of the protocol to subscribe to a real broker and see its frames as they
    come: which entries a Flow brings, and acks answered by receipt."""

    def __init__(self, port: int, topic: str, subscription: str) -> None:
        super().__init__(port, "rewind-check")
        self.request = 1
        body = (f_bytes(1, topic) + f_bytes(2, subscription) + f_varint(3, 0) + f_varint(4, 1)
                + f_varint(5, self.request) + f_varint(13, 1))  # Exclusive, earliest
        self.sock.sendall(frame(command(SUBSCRIBE, body)))
        self.expect(SUCCESS)

    def flow_and_take(self, n: int) -> list[tuple[int, int]]:
        """Grants 1000 permits and returns the (ledger, entry) of the next ``n`` messages."""
        self.sock.sendall(frame(command(FLOW, f_varint(1, 1) + f_varint(2, 1000))))
        got = []
        for _ in range(n):
            mid = parse(self.expect(MESSAGE)[2][0])
            got.append((mid[1][0], mid[2][0]))
        return got

    def ack(self, ids: list[tuple[int, int]]) -> None:
        """Individual acks, waited for until the broker's receipt."""
        self.request += 1
        body = f_varint(1, 1) + f_varint(2, 0) + b"".join(
            f_bytes(3, f_varint(1, ledger) + f_varint(2, entry)) for ledger, entry in ids) + f_varint(8, self.request)
        self.sock.sendall(frame(command(ACK, body)))
        self.expect(ACK_RESPONSE)

    def close(self) -> None:
        self.sock.close()


def test_the_fakes_rewind_is_what_a_real_broker_does(broker: Any, topic: str) -> None:
    """What :class:`RewindingBroker` stands for, checked once against Pulsar: an Exclusive
    subscription attached again on a new connection gets, on its first Flow, every entry not
    acked in full, from the first of them, in order -- entries that the old connection had
    already been sent included, acked ones never."""
    with magnetar.Client(broker.service_url) as client:
        producer = client.create_producer(topic, batching=False)
        for i in range(10):
            producer.send(b"m%d" % i)
    first = _RawConsumer(broker.port, topic, "rewind")
    sent = first.flow_and_take(10)
    acked = [sent[i] for i in (0, 2, 5, 6)]
    first.ack(acked)
    first.close()
    again = bounded_attach(lambda: _RawConsumer(broker.port, topic, "rewind"))
    unacked = [e for e in sent if e not in acked]
    assert again.flow_and_take(len(unacked)) == unacked
    again.close()


def bounded_attach(make: Any) -> _RawConsumer:
    """The broker may still hold the old connection's consumer for a moment after the close:
    ``ConsumerBusy`` (an Error frame) until it has seen the socket go."""
    made: list[_RawConsumer] = []

    def attach() -> bool:
        try:
            made.append(make())
            return True
        except AssertionError:
            return False

    assert wait_until(attach, 30, 0.1), "the subscription could not be attached again"
    return made[0]
