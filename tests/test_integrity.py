"""Integrity scenarios of issue 11 against the session's real broker: no acknowledged message
comes back, none is lost, and no operation hangs, across unloads, connection resets and
server-side errors.

Faults go through a :class:`~magnetar.testing.faults.FaultProxy` per test. The session broker
advertises a loopback address, so its lookups tell clients to stay on their service-URL
connection, and a client given the proxy's URL keeps all its traffic on the proxy
(``test_traffic_stays_on_the_proxy`` checks it). Payloads are message indexes.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import magnetar
from magnetar.testing.faults import FaultProxy
from magnetar.testing.stress import unload_run

from waiting import bounded, wait_until

pytestmark = pytest.mark.timeout(120)

DEDUP_NS = "public/integrity-dedup"


# --------------------------------------------------------------------------- fixtures and helpers


@pytest.fixture(scope="module")
def dedup_ns(broker: Any) -> str:
    broker.create_namespace(DEDUP_NS)
    broker.set_deduplication(DEDUP_NS, True)
    return DEDUP_NS


@pytest.fixture
def proxy(broker: Any) -> Iterator[FaultProxy]:
    with FaultProxy(broker.port, max_lifetime=300) as p:
        yield p


def new_topic(ns: str = "public/default", prefix: str = "i") -> str:
    return f"persistent://{ns}/{prefix}-{uuid.uuid4().hex[:10]}"


def stays(pred: Callable[[], bool], seconds: float, period: float = 0.1) -> bool:
    """Whether ``pred`` holds at every check over ``seconds``: how a test states that something
    does *not* happen (a revived consumer, a message delivered while paused)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not pred():
            return False
        time.sleep(period)
    return pred()


def reconnected(proxy: FaultProxy, before: int, *handles: Any, timeout: float = 15.0) -> bool:
    """Whether every handle re-attached over a connection opened after the ``before``-th."""
    return wait_until(lambda: proxy.accepted > before and all(h.is_connected for h in handles), timeout)


def broker_consumers(broker: Any, topic: str, sub: str) -> list[dict[str, Any]]:
    subs = broker.topic_stats(topic)["subscriptions"]
    return list(subs[sub]["consumers"]) if sub in subs else []


def receive_indexes(consumer: magnetar.Consumer, count: int, timeout: float = 15.0,
                    ack: bool = True) -> list[int]:
    """``count`` messages (acked with receipt unless ``ack`` is false), as indexes."""
    got: list[int] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for m in consumer.receive_many(count - len(got), timeout=0.2):
            got.append(int(m.data))
            if ack:
                consumer.ack_with_receipt(m)
    return got


def test_traffic_stays_on_the_proxy(broker: Any, proxy: FaultProxy, clients: Any) -> None:
    """What every fault below relies on: a producer and a consumer made with the proxy's URL
    attach through the proxy (the broker sees the proxy's upstream ports)."""
    topic = new_topic()
    client = clients(proxy.service_url)
    client.create_producer(topic).send(b"0")
    client.subscribe(topic, "s")
    stats = broker.topic_stats(topic)
    ports = [int(p["address"].rsplit(":", 1)[1]) for p in stats["publishers"]]
    ports += [int(c["address"].rsplit(":", 1)[1]) for c in stats["subscriptions"]["s"]["consumers"]]
    assert ports and set(ports) <= {c.upstream_port for c in proxy.connections}, (ports, proxy.connections)


# --------------------------------------------------------------------------- acked messages stay acked


@pytest.mark.parametrize("mode", ["drain", "live"])
def test_acked_messages_never_come_back_across_unloads(broker: Any, mode: str) -> None:
    """Issue 11 part 1 at a third of its scale (``scripts/dev stress unload`` runs it at 30,000
    messages, many times): a batching producer sends while the topic is unloaded (3 times for
    ``drain``, 6 for ``live``, 0.7 s apart) on a deduplicated namespace; the Exclusive
    consumer drains afterwards (``drain``) or acks live (``live``). Every message arrives, and
    none is delivered again after the application acked it. (Before the consumer fix, ``live``
    failed every run here and ``drain`` about one in six; the next test makes the drain case
    certain.)"""
    with magnetar.Client(broker.service_url, operation_timeout=30.0, max_backoff=1.0) as client:
        run = unload_run(client, broker, mode=mode, messages=10_000, deadline=90.0)
    assert run.unloads >= 3, run.line()
    assert not run.send_failures and not run.receive_errors and not run.unexpected, run.line()
    assert run.lost == 0, run.line()
    assert run.after_ack == 0, run.line()


def test_acked_messages_never_come_back_when_the_reattach_is_held(broker: Any, dedup_ns: str,
                                                                 proxy: FaultProxy, clients: Any) -> None:
    """The drain case of issue 11, made certain: the topic is unloaded while the consumer's
    receiver queue is full and the proxy holds its way back to the broker (client -> broker
    silenced), and the application drains and acks meanwhile. Once the consumer re-attaches,
    nothing it acked is delivered again (the broker's cursor rewinds to the last ack it knows
    of, so acks taken while detached must reach it before the first Flow), and every message
    arrives."""
    n = 3000
    topic = new_topic(dedup_ns, "held")
    consumer = clients(proxy.service_url).subscribe(topic, "s", initial_position="earliest",
                                                    subscription_type=magnetar.SubscriptionType.EXCLUSIVE)
    producer = clients(broker.service_url).create_producer(topic)
    for f in [producer.send_async(str(i).encode()) for i in range(n)]:
        f.result(timeout=30)
    assert wait_until(lambda: int(consumer.stats()[0]["queued"]) >= 1000, 10), consumer.stats()
    acked: set[int] = set()
    after_ack: list[int] = []
    deliveries = 0

    def take(timeout: float) -> int:
        nonlocal deliveries
        msgs = consumer.receive_many(1000, timeout=timeout)
        for m in msgs:
            i = int(m.data)
            deliveries += 1
            if i in acked:
                after_ack.append(i)
            consumer.ack(m)
            acked.add(i)
        return len(msgs)

    proxy.blackhole(True, direction="up", new_connections=False)
    try:
        broker.unload_topic(topic)
        assert wait_until(lambda: not consumer.is_connected, 10), "the unload did not detach the consumer"
        while take(0.5):  # whatever the application can still read while detached
            pass
    finally:
        proxy.blackhole(False)
    quiet_since = time.monotonic()
    deadline = quiet_since + 60
    while time.monotonic() < deadline and (len(acked) < n or time.monotonic() - quiet_since < 2.0):
        if take(0.2):
            quiet_since = time.monotonic()
    assert after_ack == [], (f"{len(after_ack)} of {deliveries} deliveries came after the message's ack, "
                             f"e.g. {after_ack[:10]}")
    assert acked == set(range(n)), f"never delivered: {len(set(range(n)) - acked)}"


# --------------------------------------------------------------------------- sequence continuity


def test_sequence_ids_continue_across_reopen_and_old_ids_are_deduplicated(
        broker: Any, dedup_ns: str, clients: Any) -> None:
    """With deduplication on, a named producer reopened (on a new client) learns its last
    sequence id from the broker and continues after it, through an unload too; a message sent
    again with an old sequence id is dropped by the broker as a duplicate (its send still
    completes)."""
    topic = new_topic(dedup_ns, "seq")
    name = f"seq-{uuid.uuid4().hex[:8]}"
    consumer = clients(broker.service_url).subscribe(topic, "s", initial_position="earliest")
    first = clients(broker.service_url).create_producer(topic, name=name, batching=False)
    assert first.last_sequence_id == -1
    for i in range(10):
        first.send(str(i).encode())
    assert first.last_sequence_id == 9
    first.close()

    again = clients(broker.service_url).create_producer(topic, name=name, batching=False)
    assert again.last_sequence_id == 9, "the reopened producer did not learn its last sequence id"
    for i in range(10, 15):
        again.send(str(i).encode())
    broker.unload_topic(topic)
    for i in range(15, 20):
        again.send(str(i).encode())
    assert again.last_sequence_id == 19
    again.send(b"-3", sequence_id=3)  # an id the broker has stored: a duplicate
    again.send(b"20")
    got: list[magnetar.Message] = []
    while not got or got[-1].data != b"20":
        got.append(consumer.receive(timeout=10))
    assert [m.data for m in got] == [str(i).encode() for i in range(21)], "an old sequence id was delivered"
    assert [m.sequence_id for m in got] == list(range(20)) + [got[-1].sequence_id]
    assert got[-1].sequence_id > 19


# --------------------------------------------------------------------------- operations during a reconnect


def hold_link_down(proxy: FaultProxy, *handles: Any) -> None:
    """Resets every connection and refuses new ones: the handles keep trying to reconnect."""
    proxy.refuse(True)
    proxy.drop_connections()
    assert wait_until(lambda: not any(h.is_connected for h in handles), 10), "still connected"


def test_consumer_close_during_reconnect_returns_and_is_final(broker: Any, proxy: FaultProxy,
                                                              clients: Any) -> None:
    """Closing a consumer while it is trying to reconnect returns without waiting for the
    link, and the consumer is not revived once the broker is reachable again."""
    topic = new_topic(prefix="cclose")
    consumer = clients(proxy.service_url).subscribe(topic, "s")
    hold_link_down(proxy, consumer)
    bounded(consumer.close, 10, "consumer.close() while reconnecting")
    proxy.refuse(False)
    probe = clients(proxy.service_url).create_producer(topic)  # the proxy carries traffic again
    probe.send(b"x")
    # Several backoff periods (max 1 s): a revived consumer would have re-attached by now.
    assert stays(lambda: broker_consumers(broker, topic, "s") == [], 3.0), "the closed consumer was revived"
    with pytest.raises(magnetar.AlreadyClosed):
        consumer.receive(timeout=0.1)


def test_seek_during_reconnect_fails_fast_or_applies(broker: Any, proxy: FaultProxy, clients: Any) -> None:
    """A seek while the consumer is detached must not hang: it either fails with a clear error
    rather than waiting out a timeout (the Java client's choice) and works once reattached, or
    it is applied. Either way the consumer then reads from the sought position."""
    topic = new_topic(prefix="seek")
    producer = clients(broker.service_url).create_producer(topic, batching=False)
    ids = [producer.send(str(i).encode()) for i in range(10)]
    consumer = clients(proxy.service_url).subscribe(topic, "s", initial_position="earliest")
    assert receive_indexes(consumer, 10) == list(range(10))
    hold_link_down(proxy, consumer)
    before = proxy.accepted
    try:
        bounded(lambda: consumer.seek(ids[4]), 15, "seek while reconnecting")
        failed = None
    except magnetar.PulsarError as e:
        failed = e
    proxy.refuse(False)
    assert reconnected(proxy, before, consumer)
    if failed is not None:
        assert not isinstance(failed, magnetar.Timeout), f"seek waited for the reconnect and timed out: {failed!r}"
        consumer.seek(ids[4])
    assert receive_indexes(consumer, 6) == list(range(4, 10))


def test_unsubscribe_during_reconnect_fails_fast_or_applies(broker: Any, proxy: FaultProxy,
                                                           clients: Any) -> None:
    """Like seek: an unsubscribe while detached fails with a clear error (not a timeout) and
    succeeds once reattached, or it takes effect; it never hangs, and the subscription ends up
    gone."""
    topic = new_topic(prefix="unsub")
    consumer = clients(proxy.service_url).subscribe(topic, "s")
    hold_link_down(proxy, consumer)
    before = proxy.accepted
    try:
        bounded(consumer.unsubscribe, 15, "unsubscribe while reconnecting")
        failed = None
    except magnetar.PulsarError as e:
        failed = e
    proxy.refuse(False)
    if failed is not None:
        assert not isinstance(failed, magnetar.Timeout), f"unsubscribe waited and timed out: {failed!r}"
        assert reconnected(proxy, before, consumer)
        consumer.unsubscribe()
    assert wait_until(lambda: "s" not in broker.topic_stats(topic)["subscriptions"], 10), \
        "the subscription survived the unsubscribe"


# --------------------------------------------------------------------------- flow control across a reconnect


def test_paused_consumer_stays_paused_across_a_reconnect(broker: Any, proxy: FaultProxy, clients: Any) -> None:
    """A paused consumer asks for nothing when it re-attaches (apache/pulsar#10506: a paused
    consumer got messages after a reconnect); after resume it gets every message."""
    topic = new_topic(prefix="paused")
    producer = clients(broker.service_url).create_producer(topic, batching=False)
    consumer = clients(proxy.service_url).subscribe(topic, "s", initial_position="earliest", receiver_queue_size=5)
    consumer.pause()
    for i in range(20):
        producer.send(str(i).encode())
    # The permits granted when it subscribed let the first 5 through.
    first = receive_indexes(consumer, 5)
    assert first == list(range(5))
    before = proxy.accepted
    proxy.drop_connections()
    assert reconnected(proxy, before, consumer)
    assert wait_until(lambda: len(broker_consumers(broker, topic, "s")) == 1, 10)

    def nothing_flows() -> bool:
        (c,) = broker_consumers(broker, topic, "s")
        return int(c["availablePermits"]) == 0 and int(c["msgOutCounter"]) == 0

    assert stays(nothing_flows, 1.5), f"the paused consumer asked for messages: {broker_consumers(broker, topic, 's')}"
    assert consumer.receive_many(20, timeout=0.5) == [], "messages delivered while paused"
    consumer.resume()
    rest = receive_indexes(consumer, 15)
    assert sorted(set(rest)) == list(range(5, 20)), rest


@pytest.mark.parametrize("queue", [1, 2])
def test_small_receiver_queue_permits_after_reconnect(broker: Any, proxy: FaultProxy, clients: Any,
                                                      queue: int) -> None:
    """With a receiver queue of 1 or 2, after a reset the broker's permits plus the client's
    queue add up to the queue size (no permits lost, none granted twice), every message
    arrives, and at the end the broker holds ``queue`` permits for the idle consumer."""
    n = 12
    topic = new_topic(prefix=f"q{queue}")
    producer = clients(broker.service_url).create_producer(topic, batching=False)
    for i in range(n):
        producer.send(str(i).encode())
    consumer = clients(proxy.service_url).subscribe(topic, "s", initial_position="earliest",
                                                    receiver_queue_size=queue)
    got = receive_indexes(consumer, 3)
    for _ in range(2):
        before = proxy.accepted
        proxy.drop_connections()
        assert reconnected(proxy, before, consumer)
        samples: list[tuple[int, int]] = []

        def settled() -> bool:
            (s,) = consumer.stats()
            samples.append((int(s["available_permits"]), int(s["queued"])))
            return samples[-1][0] + samples[-1][1] == queue

        assert wait_until(settled, 10, 0.1), f"(broker permits, client queue) after the reconnect: {samples[-5:]}"
        # A sample reads the broker's permits, then the client's queue: a message dispatched in
        # between counts in both, so one sample may add up to queue + 1. A permit granted twice
        # does not pass by: the broker then holds or sends more than `queue`, and the two never
        # settle at exactly `queue` (checked above).
        assert all(p <= queue and q <= queue for p, q in samples), f"more than {queue} permits out: {samples}"
        got += receive_indexes(consumer, 2)
    got += receive_indexes(consumer, n - len(set(got)))
    assert sorted(set(got)) == list(range(n)), got
    assert wait_until(lambda: int(consumer.stats()[0]["available_permits"]) == queue, 10, 0.1), consumer.stats()


# --------------------------------------------------------------------------- batch-index acks


def test_batch_index_acks_survive_connection_resets(broker: Any, proxy: FaultProxy, clients: Any) -> None:
    """Batches of 10; the consumer (batch-index acks on) acks half of what it gets, with
    receipt, and then the connection is reset, round after round. No message whose ack the
    broker confirmed is delivered again, none is lost, and the backlog ends at zero."""
    n = 200
    topic = new_topic(prefix="bidx")
    producer = clients(broker.service_url).create_producer(topic, batch_max_messages=10, batch_max_delay=1.0)
    ids = producer.send_many([str(i).encode() for i in range(n)])
    assert max(i.batch_size for i in ids) == 10
    consumer = clients(proxy.service_url).subscribe(topic, "s", initial_position="earliest",
                                                    batch_index_ack=True, receiver_queue_size=50)
    acked: set[int] = set()
    after_ack: list[int] = []
    deliveries = 0
    deadline = time.monotonic() + 60
    rounds = 0
    while len(acked) < n and time.monotonic() < deadline:
        msgs = consumer.receive_many(100, timeout=0.5)
        for m in msgs:
            i = int(m.data)
            deliveries += 1
            if i in acked:
                after_ack.append(i)
            elif rounds >= 6 or (i + rounds) % 2 == 0:
                consumer.ack_with_receipt(m)
                acked.add(i)
        if msgs and rounds < 6:
            rounds += 1
            before = proxy.accepted
            proxy.drop_connections()
            assert reconnected(proxy, before, consumer)
    assert rounds >= 4, f"only {rounds} resets"
    assert after_ack == [], f"{len(after_ack)} deliveries after a confirmed batch-index ack: {sorted(after_ack)[:20]}"
    assert acked == set(range(n)), f"never delivered: {sorted(set(range(n)) - acked)[:20]}"
    assert wait_until(lambda: int(broker.topic_stats(topic)["subscriptions"]["s"]["msgBacklog"]) == 0, 10), \
        broker.topic_stats(topic)["subscriptions"]["s"]


@pytest.mark.parametrize("kept", [150, 60])
def test_a_batch_past_64_messages_redelivers_only_its_unacked_indexes(broker: Any, client: magnetar.Client,
                                                                      kept: int) -> None:
    """One batch of 200 with every message but one acked by index: a new consumer gets that
    one alone. The broker's ack set is a Java BitSet's words without its trailing zero words
    (here the words after the one holding ``kept``): an index past them is acknowledged."""
    topic = new_topic(prefix="bidx-tail")
    ids = client.create_producer(topic, batch_max_delay=1.0).send_many([b"%d" % i for i in range(200)])
    assert {(i.ledger_id, i.entry_id) for i in ids} == {(ids[0].ledger_id, ids[0].entry_id)}
    consumer = client.subscribe(topic, "s", initial_position="earliest", batch_index_ack=True)
    for _ in range(200):
        m = consumer.receive(timeout=10)
        if int(m.data) != kept:
            consumer.ack(m)
    consumer.close()  # sends the acks held for grouping first
    again = client.subscribe(topic, "s", initial_position="earliest", batch_index_ack=True)
    assert again.receive(timeout=10).data == b"%d" % kept
    # Anything else the broker sent would be queued by now: it came in the same entry.
    assert again.receive_many(200, timeout=0) == []


# --------------------------------------------------------------------------- resources


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.timeout(240)
def test_resources_flat_after_1000_create_close_cycles(broker: Any) -> None:
    """1,000 cycles of a client with a producer and a consumer (each attached to the broker),
    closed in turn: the process's file descriptors and threads come back to where they were.
    Every tenth cycle also sends a message through, so the send and receive paths are in it."""
    topic = new_topic(prefix="cycles")

    def cycle(i: int) -> None:
        with magnetar.Client(broker.service_url, operation_timeout=10.0) as client:
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic, batching=False)
            if i % 10 == 0:
                producer.send(str(i).encode())
                consumer.ack(consumer.receive(timeout=10))
            producer.close()
            consumer.close()

    for i in range(20):  # the runtime, its worker threads and lazy state exist after these
        cycle(i)
    fds, ths = open_fds(), threads()
    t0 = time.monotonic()
    for i in range(1000):
        cycle(i)
    took = time.monotonic() - t0
    # The runtime's blocking-pool threads end after 10 s idle, and a closed socket's fd goes when
    # its task ends: allow that long to come back.
    back = wait_until(lambda: open_fds() <= fds + 2 and threads() <= ths + 2, 15, 0.2)
    assert back, f"after 1,000 cycles ({took:.0f} s): fds {fds} -> {open_fds()}, threads {ths} -> {threads()}"


# --------------------------------------------------------------------------- server-side errors


def test_backlog_quota_exceeded_fails_sends_with_a_clear_error(broker: Any, clients: Any) -> None:
    """A namespace backlog quota with the producer_exception policy: once the backlog is over
    it, a new producer is refused and a re-attaching one fails its sends with the broker's
    quota error (not a timeout, not a hang)."""
    ns = f"public/quota-{uuid.uuid4().hex[:6]}"
    broker.create_namespace(ns)
    broker.request("POST", f"/admin/v2/namespaces/{ns}/backlogQuota?backlogQuotaType=destination_storage",
                   {"limitSize": 10 * 1024, "limitTime": -1, "policy": "producer_exception"})
    topic = new_topic(ns, "quota")
    client = clients(broker.service_url)
    client.subscribe(topic, "s")  # a subscription, so the messages are backlog
    producer = client.create_producer(topic, batching=False, send_timeout=30.0)
    for i in range(40):
        producer.send(str(i).encode() + b"." * 1024)
    broker.unload_topic(topic)  # the broker checks the quota when a producer attaches
    with pytest.raises(magnetar.PulsarError) as refused:
        bounded(lambda: client.create_producer(topic), 15, "create_producer over the backlog quota")
    assert "Quota" in str(refused.value), repr(refused.value)
    with pytest.raises(magnetar.PulsarError) as failed:
        bounded(lambda: producer.send(b"over"), 40, "send over the backlog quota")
    assert not isinstance(failed.value, magnetar.Timeout), "the send timed out instead of failing"
    assert "Quota" in str(failed.value), repr(failed.value)


def test_topic_deleted_while_consuming_ends_the_consumer(broker: Any, clients: Any) -> None:
    """The topic is force-deleted under a consumer blocked in receive (in a namespace without
    auto-creation, so it cannot come back): the receive fails with a clear error, well within
    its timeout, and so does every later one (as the Java client closes a consumer whose
    topic is gone)."""
    ns = f"public/noauto-{uuid.uuid4().hex[:6]}"
    broker.create_namespace(ns)
    broker.request("POST", f"/admin/v2/namespaces/{ns}/autoTopicCreation", {"allowAutoTopicCreation": False})
    topic = new_topic(ns, "gone")
    broker.create_topic(topic)
    client = clients(broker.service_url)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    client.create_producer(topic).send(b"0")
    consumer.ack(consumer.receive(timeout=10))
    box: dict[str, Any] = {}

    def receive() -> None:
        t0 = time.monotonic()
        try:
            box["message"] = consumer.receive(timeout=60)
        except magnetar.PulsarError as e:
            box["error"] = e
        box["took"] = time.monotonic() - t0

    waiter = threading.Thread(target=receive, daemon=True)
    waiter.start()
    broker.delete_topic(topic, force=True)
    waiter.join(30)
    assert not waiter.is_alive(), "receive() still blocked 30 s after its topic was deleted"
    assert "error" in box, f"receive returned a message from a deleted topic: {box}"
    assert not isinstance(box["error"], magnetar.Timeout), f"receive timed out: {box}"
    with pytest.raises(magnetar.PulsarError) as later:
        bounded(lambda: consumer.receive(timeout=5), 10, "receive after the topic was deleted")
    assert not isinstance(later.value, magnetar.Timeout), repr(later.value)
