"""Fault injection against a real broker: dropped connections, topic unloads, broker kill -9 and
restart, half-open connections, multi-host failover, timeouts.

Every client connection goes through a :class:`~magnetar.testing.faults.FaultProxy`. The
module's broker advertises the proxy (``proxied_broker_conf``), and a standalone broker also
tells clients to stay on their service-URL connection (a loopback advertised address sets
``proxy_through_service_url``), so lookups never lead a client around the proxy;
``test_topic_traffic_goes_through_the_proxy`` checks it.

Payloads are the message's index, so a reader draining the topic from the earliest position
can classify every message: lost (acked, not stored), duplicated, out of order.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import magnetar
from magnetar.testing.faults import (
    FaultProxy,
    can_store,
    free_port,
    kill9,
    proxied_broker_conf,
    restart,
    restartable_broker,
)

from waiting import bounded, wait_until

DEDUP_NS = "public/dedup"
PLAIN_NS = "public/default"

pytestmark = pytest.mark.timeout(180)

# Scenario sizes: MAGNETAR_RESILIENCE_SCALE multiplies the message counts of the long runs
# (1 gives the 100,000); MAGNETAR_SOAK_SECONDS sets the soak's length (60 s by
# default, at most 600).
SCALE = float(os.environ.get("MAGNETAR_RESILIENCE_SCALE", "1"))
SOAK_SECONDS = min(600.0, max(10.0, float(os.environ.get("MAGNETAR_SOAK_SECONDS", "60"))))


def scaled(n: int) -> int:
    return max(1000, int(n * SCALE))


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def _engine_logs() -> Iterator[None]:
    """Reconnects and faults are logged at INFO: keep them in the captured log of a failure."""
    logger = logging.getLogger("magnetar")
    old = logger.level
    logger.setLevel(logging.INFO)
    yield
    logger.setLevel(old)


_FIGURES: list[str] = []


def figure(line: str) -> None:
    """Records a measured figure (faults injected, lost, duplicated, recovery times); they are
    printed at the end of the module's run."""
    _FIGURES.append(line)
    logging.getLogger(__name__).info("%s", line)


@pytest.fixture(scope="module", autouse=True)
def _print_figures(request: Any) -> Iterator[None]:
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or not _FIGURES:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        reporter.write_line("resilience figures:")
        for line in _FIGURES:
            reporter.write_line(f"  {line}")


@pytest.fixture
def integrity(record_property: Any) -> Callable[..., None]:
    """Records what a scenario measured as test properties: ``lost`` (acknowledged sends
    missing from the topic or the consumer), ``duplicated`` (messages the topic holds more
    than once) and ``redelivered`` (deliveries beyond the first; allowed for unacked
    messages). ``scripts/dev chaos`` sums them over repeated runs; JUnit XML carries them too.
    Scenarios call it before their asserts, so a failing run still reports what it saw."""

    def record(**counts: int) -> None:
        for name, value in counts.items():
            assert name in ("lost", "duplicated", "redelivered", "after_ack"), name
            record_property(name, int(value))

    return record


def missing(expected: range, *seen: list[int]) -> int:
    """How many of ``expected`` are absent from any of the ``seen`` lists."""
    want = set(expected)
    return len(set().union(*(want - set(s) for s in seen)))


@pytest.fixture(scope="module")
def proxy_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def rbroker(proxy_port: int) -> Iterator[Any]:
    """A broker of this module only: fixed ports and kept data (it is killed and restarted),
    advertising the proxy's port."""
    broker = restartable_broker(extra_conf=proxied_broker_conf(proxy_port), keep_data=False)
    with broker:
        broker.create_namespace(DEDUP_NS)
        broker.set_deduplication(DEDUP_NS, True)
        # Tests check what a topic stores after their consumer acked it all; without retention
        # the broker deletes fully acked ledgers, and a late reader would see "loss".
        for ns in (DEDUP_NS, PLAIN_NS):
            broker.request("POST", f"/admin/v2/namespaces/{ns}/retention",
                           {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
        yield broker


@pytest.fixture
def proxy(rbroker: Any, proxy_port: int) -> Iterator[FaultProxy]:
    # A restarted standalone's bookie has been seen to stop taking new ledgers minutes later
    # on loaded machines; that is the test broker's fault, not the client's, so heal it here
    # rather than fail every later test of the module.
    if not can_store(rbroker.service_url):
        figure("the module broker could not store a message before a test: killed and restarted it")
        kill9(rbroker)
        restart(rbroker)
    with FaultProxy(rbroker.port, listen_port=proxy_port, max_lifetime=300) as p:
        yield p


def index(data: bytes) -> int:
    """The message index at the front of a payload (``b"17"`` or ``b"17......"``)."""
    return int(data.split(b".", 1)[0])


def new_topic(ns: str = PLAIN_NS, prefix: str = "r") -> str:
    return f"persistent://{ns}/{prefix}-{uuid.uuid4().hex[:10]}"


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def every(period: float, action: Callable[[], Any], first: float | None = None) -> Iterator[list[Any]]:
    """Runs ``action`` every ``period`` s in a thread while the block runs; yields the list of
    its results."""
    results: list[Any] = []
    stop = threading.Event()

    def loop() -> None:
        if stop.wait(period if first is None else first):
            return
        while True:
            results.append(action())
            if stop.wait(period):
                return

    t = threading.Thread(target=loop, daemon=True, name="chaos")
    t.start()
    try:
        yield results
    finally:
        stop.set()
        t.join(30)


def paced_send(producer: magnetar.Producer, n: int, seconds: float, start: int = 0) -> list[Any]:
    """``send_async`` of payloads ``start..start+n-1`` spread over about ``seconds``."""
    futures = []
    step = 100
    pause = seconds / max(1, n // step)
    for i in range(start, start + n):
        futures.append(producer.send_async(str(i).encode()))
        if i % step == step - 1:
            time.sleep(pause)
    return futures


def outcomes(futures: list[Any], timeout: float) -> tuple[list[int], dict[str, int]]:
    """Indexes of futures that succeeded, and a count of failures by exception class."""
    ok: list[int] = []
    failed: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    for i, f in enumerate(futures):
        try:
            f.result(timeout=max(0.01, deadline - time.monotonic()))
            ok.append(i)
        except Exception as e:  # noqa: BLE001 - classified
            failed[type(e).__name__] = failed.get(type(e).__name__, 0) + 1
    return ok, failed


def drain(client: magnetar.Client, topic: str, idle: float = 3.0, limit: float = 60.0,
          expect: int = 0, slow_idle: float = 30.0) -> list[int]:
    """Every payload stored in ``topic``, in order, read by a fresh subscription from the earliest.
    Reading stops after ``idle`` s without a message, or ``slow_idle`` s while fewer than
    ``expect`` were read (a broker recovering the ledgers of a crash can pause reads)."""
    consumer = client.subscribe(topic, f"drain-{uuid.uuid4().hex[:6]}", initial_position="earliest",
                                receiver_queue_size=2000)
    values: list[int] = []
    deadline = time.monotonic() + limit
    last = time.monotonic()
    while time.monotonic() < deadline and \
            time.monotonic() - last < (idle if len(values) >= expect else slow_idle):
        msgs = consumer.receive_many(2000, timeout=0.5)
        if msgs:
            last = time.monotonic()
            values.extend(index(m.data) for m in msgs)
    consumer.close()
    return values


def classify(values: list[int], expected: range) -> dict[str, int]:
    seen = set(values)
    return {
        "received": len(values),
        "lost": len(set(expected) - seen),
        "duplicated": len(values) - len(seen),
        "unexpected": len(seen - set(expected)),
        "reordered": sum(1 for a, b in zip(values, values[1:]) if b < a),
    }


def gaps(values: list[int], first: int = 0) -> list[tuple[int, int]]:
    """Forward jumps of more than one in a delivery sequence: messages skipped. (Going back is
    a redelivery and allowed.)"""
    out = []
    top = first - 1
    for v in values:
        if v > top + 1:
            out.append((top, v))
        top = max(top, v)
    return out


class Receiver:
    """Receives (and acks) on a thread, recording payloads in arrival order."""

    batch = 500  # receive_many size
    join_timeout = 10.0

    def __init__(self, consumer: magnetar.Consumer, ack: bool = True) -> None:
        self.consumer = consumer
        self.ack = ack
        self.values: list[int] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=type(self).__name__)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                msgs = self.consumer.receive_many(self.batch, timeout=0.2)
            except magnetar.AlreadyClosed:
                return
            except Exception as e:  # noqa: BLE001 - recorded and asserted on
                self.errors.append(e)
                time.sleep(0.1)
                continue
            if msgs and not self._handle(msgs):
                return

    def _handle(self, msgs: list[magnetar.Message]) -> bool:
        """Records (and acks) one non-empty batch; False once the consumer is closed."""
        for m in msgs:
            self.values.append(index(m.data))
            if self.ack:
                self.consumer.ack(m)
        return True

    def wait_for(self, expected: set[int], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if expected <= set(self.values):
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.join_timeout)


def backlog(broker: Any, topic: str, sub: str) -> int:
    return int(broker.topic_stats(topic)["subscriptions"][sub]["msgBacklog"])


# --------------------------------------------------------------------------- the proxy itself


@contextlib.contextmanager
def echo_server() -> Iterator[int]:
    """A loopback TCP echo server (one thread per connection); yields its port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve(c: socket.socket) -> None:
        with c, contextlib.suppress(OSError):
            while data := c.recv(65536):
                c.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                c, _ = srv.accept()
                threading.Thread(target=serve, args=(c,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        srv.close()


def test_fault_proxy_controls() -> None:
    """The harness itself, against an echo server: pass-through, one-way and two-way blackhole
    (held bytes delivered on healing), refusal, RST, and the self-imposed lifetime."""
    with echo_server() as port, FaultProxy(port, max_lifetime=3) as proxy:
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
        s.sendall(b"hi")
        assert s.recv(10) == b"hi"
        proxy.blackhole(True, direction="down")
        s.sendall(b"held")
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.recv(10)
        proxy.blackhole(False)
        s.settimeout(2)
        assert s.recv(10) == b"held"
        proxy.set_latency(0.3)
        t0 = time.monotonic()
        s.sendall(b"slow")
        assert s.recv(10) == b"slow" and time.monotonic() - t0 >= 0.55
        proxy.set_latency(0)
        proxy.refuse(True)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
        proxy.refuse(False)
        assert proxy.drop_connections("rst") == 1
        with pytest.raises(ConnectionResetError):
            s.recv(10)
        s.close()
        assert proxy.wait_for(lambda p: not p.running, 6), "outlived max_lifetime"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", proxy.port), timeout=2)


def pulsar_frame(ctype: int, body: bytes = b"") -> bytes:
    """A frame the proxy's scanner can follow: a BaseCommand starting with its ``type``."""
    command = bytes([0x08, ctype]) + body
    return (len(command) + 4).to_bytes(4, "big") + len(command).to_bytes(4, "big") + command


def test_fault_proxy_cuts_at_a_command() -> None:
    """The harness's lost-receipt fault, against an echo server: frames before the picked
    one arrive, the picked one and everything after it never do, and the connection is
    reset, even when frame headers are split across writes."""
    frames = [pulsar_frame(9, b"x" * 40), pulsar_frame(19), pulsar_frame(7, b"r" * 20), pulsar_frame(9)]
    wire = b"".join(frames)
    with echo_server() as port, FaultProxy(port, max_lifetime=30) as proxy:
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        split = len(frames[0]) + 5  # the first frame and part of the second one's header
        for i in range(0, split, 7):  # in pieces: headers split across writes
            s.sendall(wire[i:min(i + 7, split)])
            time.sleep(0.01)  # lets each piece travel as its own read
        got = b""
        while len(got) < split:
            got += s.recv(100)
        proxy.cut_at("SEND_RECEIPT")
        s.sendall(wire[split:])
        s.settimeout(5)
        rest = b""
        with pytest.raises(ConnectionResetError):
            while chunk := s.recv(100):
                rest += chunk
        assert got + rest == frames[0] + frames[1]
        assert [c[1] for c in proxy.cuts] == ["SEND_RECEIPT"]
        s.close()
        # One-shot: a new connection passes a receipt through.
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        s.sendall(frames[2])
        got = b""
        while len(got) < len(frames[2]):
            got += s.recv(100)
        assert got == frames[2]
        s.close()


def test_topic_traffic_goes_through_the_proxy(rbroker: Any, proxy: FaultProxy, clients: Any) -> None:
    """The lookup pitfall: producers and consumers must end up on a proxied connection."""
    lookup = rbroker.request("GET", "/lookup/v2/topic/persistent/public/default/some-topic")
    assert lookup["brokerUrl"] == proxy.service_url  # the broker advertises the proxy
    topic = new_topic()
    client = clients(proxy.service_url)
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer.send(b"1")
    assert consumer.receive(timeout=10).data == b"1"
    stats = rbroker.topic_stats(topic)
    via_proxy = {c.upstream_port for c in proxy.connections}
    ports = [int(p["address"].rsplit(":", 1)[1]) for p in stats["publishers"]]
    ports += [int(c["address"].rsplit(":", 1)[1]) for c in stats["subscriptions"]["s"]["consumers"]]
    assert ports and set(ports) <= via_proxy, (ports, proxy.connections)
    assert proxy.bytes_forwarded > 0


def test_latency_and_bandwidth_limits_slow_but_lose_nothing(rbroker: Any, proxy: FaultProxy, clients: Any,
                                                            integrity: Any) -> None:
    topic = new_topic()
    client = clients(proxy.service_url)
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    proxy.set_latency(0.2)
    proxy.set_bandwidth(256 * 1024)
    t0 = time.monotonic()
    producer.send(b"0")
    assert time.monotonic() - t0 >= 0.35  # a round trip through 200 ms each way
    futures = [producer.send_async(str(i).encode() + b"." * 1000) for i in range(1, 501)]
    ok, failed = outcomes(futures, 60)
    assert len(ok) == 500 and not failed
    got: list[int] = []
    with contextlib.suppress(magnetar.Timeout):
        while len(got) < 501:
            got.append(int(consumer.receive(timeout=20).data.split(b".")[0]))
    integrity(lost=missing(range(501), got), redelivered=len(got) - len(set(got)))
    assert got == list(range(501))


# --------------------------------------------------------------------------- dropped connections


@pytest.mark.parametrize(
    ("dedup", "how"),
    [(True, "rst"), (True, "fin"), (False, "rst")],
    ids=["dedup-rst", "dedup-fin", "nodedup-rst"],
)
def test_producer_survives_dropped_connections(rbroker: Any, proxy: FaultProxy, clients: Any,
                                               integrity: Any, dedup: bool, how: str) -> None:
    """20k send_async while the proxy drops every connection every 0.7 s: every future succeeds
    and nothing is lost; with deduplication the topic holds each message exactly once, in order."""
    n = 20_000
    topic = new_topic(DEDUP_NS if dedup else PLAIN_NS, "drop")
    client = clients(proxy.service_url)
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}")
    with every(0.7, lambda: proxy.drop_connections(how)) as drops:
        futures = paced_send(producer, n, seconds=5.0)
        ok, failed = outcomes(futures, 60)
    assert sum(1 for d in drops if d) >= 4, f"too few faults injected: {drops}"
    assert not failed and len(ok) == n, f"failed sends: {failed}"
    values = drain(clients(rbroker.service_url), topic)
    report = classify(values, range(n))
    figure(f"producer {n} msgs, dedup={dedup}, {sum(1 for d in drops if d)} drops ({how}): {report}")
    integrity(lost=report["lost"], duplicated=report["duplicated"])
    assert report["lost"] == 0, report
    assert report["unexpected"] == 0, report
    if dedup:
        assert report["duplicated"] == 0, report
        assert values == list(range(n)), report


@pytest.mark.parametrize("dedup", [False, True], ids=["nodedup-control", "dedup"])
def test_lost_send_receipt_is_resent(rbroker: Any, proxy: FaultProxy, clients: Any, integrity: Any,
                                     dedup: bool) -> None:
    """The broker stores a message but its receipt is lost with the connection (the proxy
    withholds the receipt and resets the link), so the producer sends it again on its next
    connection. Without deduplication the topic must then hold it twice: the control that
    proves the duplicate detector sees a duplicate when there is one. With deduplication on,
    the twin: the topic holds every message exactly once, in order."""
    n = 400
    topic = new_topic(DEDUP_NS if dedup else PLAIN_NS, "receipt")
    client = clients(proxy.service_url)
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}", batching=False)
    ok, failed = outcomes([producer.send_async(str(i).encode()) for i in range(n // 2)], 30)
    assert len(ok) == n // 2 and not failed, failed
    before = proxy.accepted
    proxy.cut_at("SEND_RECEIPT")
    rest = [producer.send_async(str(i).encode()) for i in range(n // 2, n)]
    assert proxy.wait_for(lambda p: len(p.cuts) == 1 and p.accepted > before, 15), \
        f"cuts {proxy.cuts}, connections {proxy.accepted - before} new"
    ok, failed = outcomes(rest, 30)
    assert len(ok) == n - n // 2 and not failed, failed
    stored = drain(clients(rbroker.service_url), topic)
    report = classify(stored, range(n))
    figure(f"lost receipt, dedup={dedup}: {report}")
    integrity(lost=report["lost"], duplicated=report["duplicated"])
    assert report["lost"] == 0 and report["unexpected"] == 0, report
    if dedup:
        assert stored == list(range(n)), report
    else:
        # The message whose receipt was cut was stored before the cut, and again after it.
        assert report["duplicated"] >= 1, f"the control saw no duplicate: {report}"


def test_consumer_survives_dropped_connections(rbroker: Any, proxy: FaultProxy, clients: Any,
                                               integrity: Any) -> None:
    """A consumer (exclusive, acking) reading 6k messages while connections drop every 0.6 s
    receives every message, never skips one, and the backlog ends at zero."""
    n = 6_000
    topic = new_topic(prefix="cdrop")
    direct = clients(rbroker.service_url)
    producer = direct.create_producer(topic)
    ok, failed = outcomes([producer.send_async(str(i).encode() + b"." * 300) for i in range(n)], 60)
    assert len(ok) == n and not failed
    # ~2 MB at 512 kB/s: the consumer reads for about 4 s, and the drops land meanwhile.
    proxy.set_bandwidth(512 * 1024)
    consumer = clients(proxy.service_url).subscribe(topic, "s", initial_position="earliest", receiver_queue_size=500)
    rx = Receiver(consumer)
    try:
        with every(0.6, proxy.drop_connections, first=0.2) as drops:
            complete = rx.wait_for(set(range(n)), 60)
        proxy.set_bandwidth(None)
    finally:
        rx.stop()
    report = classify(rx.values, range(n))
    figure(f"consumer {n} msgs, {len(drops)} drops: {report}")
    integrity(lost=report["lost"], redelivered=report["duplicated"])
    assert len(drops) >= 4, f"too few faults injected: {drops}"
    assert complete, report
    assert report["lost"] == 0 and report["unexpected"] == 0, report
    assert gaps(rx.values) == [], "the consumer skipped messages"
    assert not rx.errors, rx.errors[:3]
    assert wait_until(lambda: backlog(rbroker, topic, "s") == 0, 15, 0.2), "acked messages stay in the backlog"


def test_reconnects_after_refused_connections(rbroker: Any, proxy: FaultProxy, clients: Any,
                                              integrity: Any) -> None:
    """The proxy refuses new connections after dropping the live ones: the producer keeps
    retrying (its client counts the refused attempts) and delivers everything once the proxy
    accepts again."""
    topic = new_topic(DEDUP_NS, "refuse")
    client = clients(proxy.service_url)
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}", max_pending=5000)
    first = [producer.send_async(str(i).encode()) for i in range(1000)]
    failed_before = client.stats()["connections_failed"]
    proxy.refuse(True)
    proxy.drop_connections()
    second = [producer.send_async(str(i).encode()) for i in range(1000, 1500)]
    assert wait_until(lambda: client.stats()["connections_failed"] >= failed_before + 3, 30), \
        "the client did not keep retrying while refused"
    assert not producer.is_connected
    proxy.refuse(False)
    ok, failed = outcomes(first + second, 20)
    stored = drain(clients(rbroker.service_url), topic)
    integrity(lost=missing(range(1500), stored), duplicated=classify(stored, range(1500))["duplicated"])
    assert len(ok) == 1500 and not failed, failed
    assert stored == list(range(1500))


# --------------------------------------------------------------------------- topic unload


def test_topic_unload_during_produce_and_consume(rbroker: Any, proxy: FaultProxy, clients: Any,
                                                 integrity: Any) -> None:
    """Three admin unloads while a producer sends and a consumer reads: no send fails, the topic
    holds each message once, and the consumer gets every message without a gap."""
    n = 15_000
    topic = new_topic(DEDUP_NS, "unload")
    client = clients(proxy.service_url)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}")
    rx = Receiver(consumer)
    try:
        with every(1.2, lambda: rbroker.unload_topic(topic), first=0.5) as unloads:
            futures = paced_send(producer, n, seconds=5.0)
            ok, failed = outcomes(futures, 60)
        complete = rx.wait_for(set(range(n)), 30)
    finally:
        rx.stop()
    assert len(unloads) >= 3, unloads
    assert not failed and len(ok) == n, failed
    stored = drain(clients(rbroker.service_url), topic)
    report = classify(rx.values, range(n))
    figure(f"unload x{len(unloads)} during {n} msgs: stored {classify(stored, range(n))}; consumer {report}")
    integrity(lost=missing(range(n), stored, rx.values), duplicated=classify(stored, range(n))["duplicated"],
              redelivered=report["duplicated"])
    assert classify(stored, range(n))["lost"] == 0
    assert stored == list(range(n)), classify(stored, range(n))
    assert complete and report["lost"] == 0, report
    assert gaps(rx.values) == [], "the consumer skipped messages"


# --------------------------------------------------------------------------- broker kill -9


def test_broker_kill9_and_restart_during_produce(rbroker: Any, proxy: FaultProxy, clients: Any,
                                                 integrity: Any) -> None:
    """kill -9 of the broker in the middle of a produce run, restart on the same ports and data:
    every send completes, every acknowledged message is stored exactly once (dedup), in order,
    and a consumer reading through the restart gets everything without a gap."""
    n = 10_000
    topic = new_topic(DEDUP_NS, "kill")
    client = clients(proxy.service_url, max_backoff=1.0)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}", send_timeout=0)
    rx = Receiver(consumer)
    futures: list[Any] = []
    sender = threading.Thread(target=lambda: futures.extend(paced_send(producer, n, seconds=6.0)), daemon=True)
    try:
        sender.start()
        # In the middle of the run: a fifth of it stored and received, the sender still sending.
        assert wait_until(lambda: len(rx.values) >= n // 5, 60), "nothing arrived before the kill"
        assert sender.is_alive(), "the produce run ended before the kill"
        killed_at = time.monotonic()
        kill9(rbroker)
        startup = restart(rbroker)
        ready_at = time.monotonic()
        sender.join(120)
        assert not sender.is_alive(), "send_async blocked for good"
        ok, failed = outcomes(futures, 60)
        recovered_at = time.monotonic()
        complete = rx.wait_for(set(range(n)), 60)
    finally:
        rx.stop()
    figure(f"kill -9: broker down {ready_at - killed_at:.1f} s (start-up {startup:.1f} s); all {n} sends "
           f"done {recovered_at - ready_at:.1f} s after it was ready; consumer: {classify(rx.values, range(n))}")
    assert not failed and len(ok) == n, failed
    stored = drain(clients(rbroker.service_url), topic)
    report = classify(stored, range(n))
    integrity(lost=missing(range(n), stored, rx.values), duplicated=report["duplicated"],
              redelivered=classify(rx.values, range(n))["duplicated"])
    assert report["lost"] == 0 and report["duplicated"] == 0, report
    assert stored == list(range(n)), report
    assert complete, classify(rx.values, range(n))
    assert gaps(rx.values) == [], "the consumer skipped messages"


class ConfirmingReceiver(Receiver):
    """Receives on a thread and acks cumulatively *with receipt* after every batch it gets, so
    it knows which messages the broker has confirmed as acknowledged. Any later delivery of a
    confirmed message is a duplicate after ack (Pulsar allows duplicates of unacked messages
    only). An entry holding a batch of messages counts as confirmed once the ack covers its
    last message (without batch-index acks the broker redelivers partly acked batches whole).

    A broker killed -9 may lose acks it had confirmed: it persists a cursor's mark-delete
    position asynchronously (rate-limited), so after a crash it redelivers from the last
    persisted position. :meth:`note_crash` marks such a crash: redeliveries of messages acked
    before it are counted in ``after_crash`` (allowed), until the consumer has acked past them
    again on the restarted broker.
    """

    batch = 1000
    join_timeout = 15.0

    def __init__(self, consumer: magnetar.Consumer) -> None:
        self.confirmed = -1  # highest index of a confirmed, fully acked entry
        self.after_ack: list[int] = []  # deliveries of messages at or below ``confirmed``
        self.after_crash: list[int] = []  # the same, for acks a broker crash may have lost
        self.crash_floor = -1  # ``confirmed`` at the last crash, until acked past it again
        self._crashed_at = 0.0
        self.ack_failures: dict[str, int] = {}
        self._entry: tuple[int, int] | None = None
        self._before_entry = -1  # highest index delivered in entries before the current one
        self._entry_max = -1
        super().__init__(consumer)  # starts the thread, so every field above is set first

    def _handle(self, msgs: list[magnetar.Message]) -> bool:
        for m in msgs:
            v = index(m.data)
            if v <= self.crash_floor:
                self.after_crash.append(v)
            elif v <= self.confirmed:
                self.after_ack.append(v)
            self.values.append(v)
            mid = m.message_id
            entry = (mid.ledger_id, mid.entry_id)
            if entry != self._entry:
                self._before_entry = max(self._before_entry, self._entry_max)
                self._entry, self._entry_max = entry, v
            else:
                self._entry_max = max(self._entry_max, v)
        last = msgs[-1]
        mid = last.message_id
        whole = mid.batch_size <= 1 or mid.batch_index == mid.batch_size - 1
        covered = index(last.data) if whole else self._before_entry
        ack_started = time.monotonic()
        try:
            self.consumer.ack_with_receipt(last, cumulative=True)
        except magnetar.AlreadyClosed:
            return False
        except Exception as e:  # noqa: BLE001 - counted: the ack is retried by the next batch
            self.ack_failures[type(e).__name__] = self.ack_failures.get(type(e).__name__, 0) + 1
            return True
        self.confirmed = max(self.confirmed, covered)
        if ack_started > self._crashed_at and covered >= self.crash_floor:
            self.crash_floor = -1  # acked past it on the restarted broker
        return True

    def note_crash(self) -> None:
        """Called once the broker is dead after a kill -9: acks it confirmed up to then may be
        lost (its cursor is persisted asynchronously)."""
        self._crashed_at = time.monotonic()
        self.crash_floor = self.confirmed


@pytest.mark.timeout(600)
def test_broker_killed_twice_and_topic_unloaded_twice(rbroker: Any, proxy: FaultProxy, clients: Any,
                                                     integrity: Any) -> None:
    """Scenarios 1 and 2 of the proof: 100,000 send_async (``MAGNETAR_RESILIENCE_SCALE``) on a
    deduplicated topic while the broker is killed -9 and restarted twice and the topic is
    unloaded twice: every send completes, the topic holds each message exactly once, in order;
    a consumer reading (and acking with receipt) through it all receives every message without
    a gap, and never a message whose ack the broker had confirmed."""
    n = scaled(100_000)
    rate = 5000  # messages per second offered by the sender
    topic = new_topic(DEDUP_NS, "kill2")
    client = clients(proxy.service_url, max_backoff=1.0)
    consumer = client.subscribe(topic, "s", initial_position="earliest", receiver_queue_size=1000)
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}", send_timeout=0,
                                      max_pending=5000)
    rx = ConfirmingReceiver(consumer)
    futures: list[Any] = []

    def send() -> None:
        step = 100
        for i in range(n):
            futures.append(producer.send_async(str(i).encode()))
            if i % step == step - 1:
                time.sleep(step / rate)

    schedule = [(0.15, "kill"), (0.35, "unload"), (0.55, "kill"), (0.75, "unload")]
    events: list[str] = []
    sender = threading.Thread(target=send, daemon=True, name="sender")
    t_start = time.monotonic()
    try:
        sender.start()
        for frac, what in schedule:
            target = frac * n
            assert wait_until(lambda: len(futures) >= target, 180, 0.02), \
                f"the sender stalled at {len(futures)}/{n} before the {what} at {frac:.0%}"
            t0 = time.monotonic()
            if what == "kill":
                kill9(rbroker)
                # After the kill: every ack the dead broker confirmed may be lost with it.
                rx.note_crash()
                startup = restart(rbroker)
                ready = time.monotonic()
                back = wait_until(lambda: producer.is_connected and consumer.is_connected, 60, 0.05)
                events.append(f"kill -9 at {len(futures)} sent: down {ready - t0:.1f} s (start-up {startup:.1f} s), "
                              f"producer+consumer back {time.monotonic() - ready:.1f} s after"
                              + ("" if back else " (NOT reconnected within 60 s)"))
            else:
                rbroker.unload_topic(topic)
                back = wait_until(lambda: producer.is_connected and consumer.is_connected, 30, 0.02)
                events.append(f"unload at {len(futures)} sent: back after {time.monotonic() - t0:.2f} s"
                              + ("" if back else " (NOT reconnected within 30 s)"))
        sender.join(180)
        assert not sender.is_alive(), "send_async blocked for good"
        ok, failed = outcomes(futures, 120)
        sends_done = time.monotonic()
        complete = rx.wait_for(set(range(n)), 120)
        received = time.monotonic()
        # Once everything is received and confirmed acked, one more unload must not bring any
        # acked message back.
        wait_until(lambda: rx.confirmed >= n - 1, 15)
        rbroker.unload_topic(topic)
        # Loaded again from what the broker persisted, the subscription has nothing left to
        # deliver (a lost ack would be a backlog the broker sends again), and the consumer is
        # back on it.
        assert wait_until(lambda: backlog(rbroker, topic, "s") == 0, 30), \
            f"backlog {backlog(rbroker, topic, 's')} after the last unload: acked messages would come back"
        assert wait_until(lambda: consumer.is_connected, 30)
    finally:
        rx.stop()
    report = classify(rx.values, range(n))
    figure(f"kill -9 x2 + unload x2 during {n} msgs: all sends done after {sends_done - t_start:.1f} s, "
           f"consumer complete after {received - t_start:.1f} s; consumer {report}, "
           f"delivered again after a confirmed ack: {len(rx.after_ack)} (and {len(rx.after_crash)} whose confirmed "
           f"ack the kill -9 lost), ack failures {rx.ack_failures}")
    for e in events:
        figure(f"  {e}")
    assert not failed and len(ok) == n, f"failed sends: {failed}"
    stored = drain(clients(rbroker.service_url), topic, limit=120, expect=n)
    stored_report = classify(stored, range(n))
    figure(f"  stored: {stored_report}")
    integrity(lost=missing(range(n), stored, rx.values), duplicated=stored_report["duplicated"],
              redelivered=report["duplicated"], after_ack=len(rx.after_ack))
    assert stored_report["lost"] == 0 and stored_report["duplicated"] == 0, stored_report
    assert stored == list(range(n)), stored_report
    assert complete, report
    assert report["lost"] == 0 and report["unexpected"] == 0, report
    assert gaps(rx.values) == [], f"the consumer skipped messages: {gaps(rx.values)[:5]}"
    assert rx.after_ack == [], f"{len(rx.after_ack)} messages delivered again after their ack was confirmed: {rx.after_ack[:10]}"
    assert not rx.errors, rx.errors[:3]


# --------------------------------------------------------------------------- soak


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


@pytest.mark.timeout(SOAK_SECONDS + 300)
def test_soak_with_rotating_faults(rbroker: Any, proxy: FaultProxy, clients: Any, integrity: Any) -> None:
    """Scenario 5: produce and consume continuously through the proxy for ``MAGNETAR_SOAK_SECONDS``
    (60 s by default) with a fault every 3 s, in rotation: RST of every connection, FIN of every
    connection, a 1.5 s blackhole, a 2 s latency spike of 300 ms each way. Zero loss (every
    acknowledged send is consumed), no send fails, the consumer never skips a message, and the
    process's RSS stays flat after a warm-up."""
    seconds = SOAK_SECONDS
    rate = 1000  # messages per second
    pad = b"." * 200
    cap = int(rate * (seconds + 60) * 1.5) + 10_000
    # Book-keeping preallocated (no growth during the run): one byte per message index.
    acked = bytearray(cap)  # 1: the send succeeded
    got = bytearray(cap)  # deliveries (saturating at 255)
    failures: dict[str, int] = {}
    counters = {"submitted": 0, "completed": 0, "received": 0, "gaps": 0, "top": -1}
    topic = new_topic(DEDUP_NS, "soak")
    client = clients(proxy.service_url, keepalive_interval=2.0, max_backoff=1.0)
    consumer = client.subscribe(topic, "s", initial_position="earliest", receiver_queue_size=1000)
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}", send_timeout=0,
                                      max_pending=5000)
    stop_sending = threading.Event()
    stop_receiving = threading.Event()
    errors: list[BaseException] = []

    def done(i: int, fut: Any) -> None:
        exc = fut.exception(0)
        if exc is None:
            acked[i] = 1
        else:
            failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
        counters["completed"] += 1

    def send() -> None:
        i = 0
        t0 = time.monotonic()
        while not stop_sending.is_set() and i < cap:
            try:
                f = producer.send_async(str(i).encode() + pad)
            except Exception as e:  # noqa: BLE001 - asserted on
                errors.append(e)
                return
            counters["submitted"] = i + 1
            f.add_done_callback(lambda fut, i=i: done(i, fut))
            i += 1
            if i % 50 == 0:
                ahead = t0 + i / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)

    def receive() -> None:
        while not stop_receiving.is_set():
            try:
                msgs = consumer.receive_many(500, timeout=0.2)
            except magnetar.AlreadyClosed:
                return
            except Exception as e:  # noqa: BLE001 - asserted on
                errors.append(e)
                time.sleep(0.1)
                continue
            for m in msgs:
                v = index(m.data)
                if got[v] < 255:
                    got[v] += 1
                if v > counters["top"] + 1:
                    counters["gaps"] += 1
                counters["top"] = max(counters["top"], v)
                counters["received"] += 1
                consumer.ack(m)

    kinds = ["rst", "fin", "blackhole", "latency"]
    injected: dict[str, int] = dict.fromkeys(kinds, 0)

    def inject() -> None:
        kind = kinds[sum(injected.values()) % len(kinds)]
        injected[kind] += 1
        if kind in ("rst", "fin"):
            proxy.drop_connections(kind)
        elif kind == "blackhole":
            proxy.blackhole(True)
            time.sleep(1.5)
            proxy.blackhole(False)
        else:
            proxy.set_latency(0.3)
            time.sleep(2.0)
            proxy.set_latency(0)

    warmup = min(15.0, seconds / 4)
    samples: list[tuple[float, int]] = []
    sender = threading.Thread(target=send, daemon=True, name="soak sender")
    receiver = threading.Thread(target=receive, daemon=True, name="soak receiver")
    t_start = time.monotonic()
    sender.start()
    receiver.start()
    try:
        with every(3.0, inject, first=2.0):
            time.sleep(warmup)
            samples.append((time.monotonic() - t_start, rss_bytes()))
            while time.monotonic() - t_start < seconds:
                time.sleep(min(5.0, max(0.0, seconds - (time.monotonic() - t_start))))
                samples.append((time.monotonic() - t_start, rss_bytes()))
        proxy.heal()
        stop_sending.set()
        sender.join(60)
        assert not sender.is_alive(), "send_async blocked for good"
        submitted = counters["submitted"]
        all_done = wait_until(lambda: counters["completed"] >= submitted, 60)
        sent_ok = [i for i in range(submitted) if acked[i]]
        all_received = wait_until(lambda: all(got[i] for i in sent_ok), 60, 0.5)
        samples.append((time.monotonic() - t_start, rss_bytes()))
    finally:
        proxy.heal()
        stop_sending.set()
        stop_receiving.set()
        receiver.join(15)
    lost = sum(1 for i in sent_ok if not got[i])
    duplicated = sum(max(0, c - 1) for c in got)
    unexpected = sum(1 for i in range(submitted, cap) if got[i])
    growth = samples[-1][1] - samples[0][1]
    mib = 1024 * 1024
    integrity(lost=lost, redelivered=duplicated)
    figure(f"soak {seconds:.0f} s at {rate} msg/s: {submitted} sent, {len(sent_ok)} acked, "
           f"failed {failures}, {counters['received']} received, lost {lost}, duplicated {duplicated} "
           f"(unacked redelivery), gaps {counters['gaps']}, faults {sum(injected.values())} {injected}")
    figure(f"  RSS MiB after {warmup:.0f} s warm-up .. end: "
           + " ".join(f"{t:.0f}s:{b / mib:.1f}" for t, b in samples) + f"; growth {growth / mib:+.1f} MiB")
    assert sum(injected.values()) >= seconds / 5, injected  # one every 3 s, plus the blackholes' and spikes' length
    assert all_done, f"{submitted - counters['completed']} sends never completed"
    assert not failures and len(sent_ok) == submitted, f"failed sends: {failures}"
    assert all_received and lost == 0, f"{lost} acknowledged sends never consumed"
    assert unexpected == 0
    assert counters["gaps"] == 0, "the consumer skipped messages"
    assert not errors, errors[:3]
    assert growth < 64 * mib, f"RSS grew by {growth / mib:.1f} MiB during the soak"


# --------------------------------------------------------------------------- half-open connections


def test_half_open_connection_detected_by_keepalive(rbroker: Any, proxy: FaultProxy, clients: Any) -> None:
    """The live connection goes silent both ways (no FIN, no RST); with a 1 s keepalive the
    client notices, opens a new connection, and traffic resumes. Keepalive is the only thing
    that can notice: the operation timeout (120 s) and the send timeout (none) lie past the
    30 s bound on the new connection."""
    interval = 1.0
    topic = new_topic(DEDUP_NS, "halfopen")
    client = clients(proxy.service_url, keepalive_interval=interval, operation_timeout=120.0)
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}", send_timeout=0)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer.send(b"0")
    first = consumer.receive(timeout=10)
    assert first.data == b"0"
    consumer.ack(first)
    before = proxy.accepted
    t0 = time.monotonic()
    proxy.blackhole(True, new_connections=False)
    pending = producer.send_async(b"1")  # written into the dead connection
    assert proxy.wait_for(lambda p: p.accepted > before, 30), "no new connection after the blackhole"
    detected = time.monotonic() - t0
    # The broker checks the old connection's liveness before it lets the producer re-attach
    # (about 5 s), so allow for that on top of the detection.
    pending.result(timeout=15)
    producer.send(b"2")
    got: set[bytes] = set()
    while not {b"1", b"2"} <= got:  # an unacked message may come twice; that is allowed
        got.add(consumer.receive(timeout=15).data)
    resumed = time.monotonic() - t0
    figure(f"half-open (keepalive {interval} s): new connection after {detected:.2f} s, traffic resumed after {resumed:.2f} s")
    assert got <= {b"0", b"1", b"2"}
    proxy.blackhole(False)


def test_half_open_connection_detected_under_load(rbroker: Any, proxy: FaultProxy, clients: Any,
                                                  integrity: Any) -> None:
    """Like the previous test, but the producer has megabytes in flight when the path goes
    silent, so the client's socket send buffer fills up. Keepalive must still detect the dead
    connection (nothing else can: no send timeout, a 120 s operation timeout, a 30 s bound), and
    nothing may be lost."""
    interval = 1.0
    n, size = 2500, 10_000  # 25 MB: more than the loopback socket buffers hold
    topic = new_topic(DEDUP_NS, "halfload")
    client = clients(proxy.service_url, keepalive_interval=interval, operation_timeout=120.0)
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}", batching=False,
                                      max_pending=n, send_timeout=0)
    producer.send(b"-1")
    before = proxy.accepted
    proxy.blackhole(True, new_connections=False)
    t0 = time.monotonic()
    futures: list[Any] = []
    sender = threading.Thread(
        target=lambda: futures.extend(producer.send_async(str(i).encode() + b"." * size) for i in range(n)),
        daemon=True)
    sender.start()
    try:
        detected = proxy.wait_for(lambda p: p.accepted > before, 30)
        took = time.monotonic() - t0
    finally:
        # Unstick whatever is stuck on the dead sockets so the test ends either way.
        if not detected:
            proxy.drop_connections()
        proxy.blackhole(False)
    sender.join(60)
    ok, failed = outcomes(futures, 60)
    delivered = f"after the proxy reset the stuck connection: {len(ok)}/{n} sends succeeded, failures {failed}"
    assert detected, (f"a half-open connection with a full send buffer was not detected by keepalive "
                      f"({interval} s) within {took:.1f} s; {delivered}")
    stored = drain(clients(rbroker.service_url), topic)
    integrity(lost=missing(range(-1, n), stored), duplicated=classify(stored, range(-1, n))["duplicated"])
    assert len(ok) == n and not failed, delivered
    assert stored == [-1, *range(n)], classify(stored, range(-1, n))


def test_one_way_loss_broker_to_client(rbroker: Any, proxy: FaultProxy, clients: Any, integrity: Any) -> None:
    """The broker gets everything but the client hears nothing back (receipts and pongs lost):
    keepalive closes the connection, the producer resends on a new one, and deduplication
    keeps every message exactly once. Keepalive is the only thing that can close it here: no
    send timeout, and the operation timeout (120 s) lies past the 30 s bound."""
    interval = 1.0
    n = 2000
    topic = new_topic(DEDUP_NS, "oneway")
    client = clients(proxy.service_url, keepalive_interval=interval, operation_timeout=120.0)
    producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}", send_timeout=0)
    producer.send(b"0")
    before = proxy.accepted
    t0 = time.monotonic()
    proxy.blackhole(True, new_connections=False, direction="down")
    futures = [producer.send_async(str(i).encode()) for i in range(1, n)]
    try:
        assert proxy.wait_for(lambda p: p.accepted > before, 30), "no new connection after the broker went mute"
        detected = time.monotonic() - t0
        ok, failed = outcomes(futures, 30)
    finally:
        proxy.blackhole(False)
    figure(f"one-way loss (keepalive {interval} s): new connection after {detected:.2f} s, "
           f"all sends done after {time.monotonic() - t0:.2f} s")
    stored = drain(clients(rbroker.service_url), topic)
    integrity(lost=missing(range(n), stored), duplicated=classify(stored, range(n))["duplicated"])
    assert len(ok) == n - 1 and not failed, failed
    assert stored == list(range(n)), classify(stored, range(n))


# --------------------------------------------------------------------------- failover


def test_multi_host_url_skips_a_dead_host(rbroker: Any, proxy: FaultProxy, clients: Any) -> None:
    dead = free_port()
    topic = new_topic()
    client = clients(f"pulsar://127.0.0.1:{dead},127.0.0.1:{proxy.port}")
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer.send(b"x")
    assert consumer.receive(timeout=10).data == b"x"
    assert proxy.accepted >= 1


def test_multi_host_url_fails_over_when_a_host_dies(rbroker: Any, proxy: FaultProxy, clients: Any,
                                                   integrity: Any) -> None:
    """Two proxies in front of the broker; the one in use stops accepting and drops its
    connections: the client moves to the other host and nothing is lost."""
    topic = new_topic(DEDUP_NS, "failover")
    with FaultProxy(rbroker.port, max_lifetime=120) as second:
        client = clients(f"pulsar://127.0.0.1:{proxy.port},127.0.0.1:{second.port}")
        producer = client.create_producer(topic, name=f"p-{uuid.uuid4().hex[:8]}")
        first = [producer.send_async(str(i).encode()) for i in range(500)]
        assert proxy.accepted >= 1 and second.accepted == 0
        proxy.refuse(True)
        proxy.drop_connections()
        rest = [producer.send_async(str(i).encode()) for i in range(500, 1000)]
        ok, failed = outcomes(first + rest, 30)
        assert len(ok) == 1000 and not failed, failed
        assert second.accepted >= 1
    proxy.refuse(False)
    stored = drain(clients(rbroker.service_url), topic)
    integrity(lost=missing(range(1000), stored), duplicated=classify(stored, range(1000))["duplicated"])
    assert stored == list(range(1000))


# --------------------------------------------------------------------------- timeouts and closing


@pytest.mark.parametrize("fault", ["blackhole", "refuse"])
def test_send_timeout_while_broker_unreachable(rbroker: Any, proxy: FaultProxy, clients: Any, fault: str) -> None:
    """With a 1 s send timeout and a broker that went silent (blackhole) or that the client is
    reconnecting to in vain (refused), every future fails with Timeout, and it is the send
    timeout that ends them: the sends of a producer without one, made at the same moment on the
    same client, are all still pending when they have failed. Nothing hangs."""
    topic = new_topic(prefix="sto")
    # the operation timeout, the other timer that could end a send, far beyond the bounds below
    client = clients(proxy.service_url, operation_timeout=120.0)
    producer = client.create_producer(topic, send_timeout=1.0)
    patient = client.create_producer(topic, send_timeout=0)
    producer.send(b"warm-up")
    patient.send(b"warm-up")
    if fault == "blackhole":
        proxy.blackhole(True)
    else:
        proxy.refuse(True)
        proxy.drop_connections()
    try:
        waiting = [patient.send_async(b"w") for _ in range(50)]
        futures = [producer.send_async(b"x") for _ in range(50)]
        errors = bounded(lambda: [f.exception() for f in futures], 30, "sends with a 1 s send timeout")
        assert all(isinstance(e, magnetar.Timeout) for e in errors), {type(e).__name__ for e in errors}
        assert not any(f.done() for f in waiting), "sends without a send timeout failed as well"
        with pytest.raises(magnetar.Timeout):
            bounded(lambda: producer.send(b"y"), 30, "send with a 1 s send timeout")
    finally:
        proxy.heal()
    # healed, the patient producer's sends go through: they were pending, not lost
    assert all(bounded(lambda: [f.result() for f in waiting], 60, "the patient sends after healing"))


def test_producer_close_during_reconnect_is_prompt_and_final(rbroker: Any, proxy: FaultProxy, clients: Any) -> None:
    """Closing a producer (nothing pending) while it is reconnecting returns without waiting
    for the reconnect attempt, and the producer is not revived when the broker becomes
    reachable again. The broker side went silent: connections are accepted but the handshake
    is never answered, so a reconnect attempt lasts the connect timeout, 120 s here: a close
    that waited for it would outlast the 30 s bound."""
    topic = new_topic(prefix="closerec")
    client = clients(proxy.service_url, connect_timeout=120.0, operation_timeout=120.0)
    producer = client.create_producer(topic, name=f"closing-{uuid.uuid4().hex[:8]}")
    # a producer of the same client on another topic: once it is back, the client's
    # reconnects have run, and a revived producer would have re-attached with it
    sibling = client.create_producer(new_topic(prefix="closerec-sibling"))
    producer.send(b"x")
    before = proxy.accepted
    proxy.blackhole(True)  # new connections too
    proxy.drop_connections()
    try:
        assert wait_until(lambda: not producer.is_connected, 15)
        # a reconnect attempt is under way: its connection reached the (silent) proxy
        assert proxy.wait_for(lambda p: p.accepted > before, 30), "no reconnect attempt"
        bounded(producer.close, 30, "producer.close() while reconnecting")
    finally:
        proxy.drop_connections()
        proxy.blackhole(False)
    assert wait_until(lambda: sibling.is_connected, 60), "the client did not reconnect"
    sibling.send(b"after")
    assert rbroker.topic_stats(topic)["publishers"] == [], "the closed producer was revived"
    with pytest.raises(magnetar.AlreadyClosed):
        producer.send(b"y")
    client.create_producer(topic).send(b"z")  # the client itself still works


def test_close_with_pending_sends_while_broker_unreachable(rbroker: Any, proxy: FaultProxy, clients: Any) -> None:
    """Closing a client whose broker went silent returns in bounded time, pending sends fail
    (AlreadyClosed or Timeout, never a hang), and later operations raise AlreadyClosed."""
    topic = new_topic(prefix="close")
    client = magnetar.Client(proxy.service_url, operation_timeout=3.0, connect_timeout=2.0, max_backoff=1.0)
    try:
        producer = client.create_producer(topic, send_timeout=0)  # no send timeout
        producer.send(b"warm-up")
        proxy.blackhole(True)
        futures = [producer.send_async(b"x") for _ in range(10)]
        bounded(client.close, 15, "client.close() with pending sends and a silent broker")
        for f in futures:
            exc = f.exception(timeout=5)
            assert isinstance(exc, (magnetar.AlreadyClosed, magnetar.Timeout)), repr(exc)
    finally:
        proxy.drop_connections()
        proxy.blackhole(False)
        bounded(client.close, 15, "client.close()")
    with pytest.raises(magnetar.AlreadyClosed):
        client.create_producer(topic)
    with pytest.raises(magnetar.AlreadyClosed):
        producer.send(b"z")
    with pytest.raises(magnetar.AlreadyClosed):
        client.subscribe(topic, "s")


def test_operations_on_a_closed_client_raise_already_closed(rbroker: Any, proxy: FaultProxy) -> None:
    topic = new_topic(prefix="closed")
    client = magnetar.Client(proxy.service_url, operation_timeout=10.0)
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s")
    client.close()
    for op in (lambda: client.create_producer(topic), lambda: client.subscribe(topic, "s2"),
               lambda: producer.send(b"x"), lambda: producer.send_async(b"x").result(5),
               lambda: consumer.receive(timeout=1)):
        with pytest.raises(magnetar.AlreadyClosed):
            bounded(op, 10, "an operation on a closed client")


def test_connect_to_a_closed_port_fails_with_connect_error() -> None:
    """A refused connection is a ConnectError, not retried until the operation timeout (120 s,
    past the bound)."""
    port = free_port()
    client = magnetar.Client(f"pulsar://127.0.0.1:{port}", connect_timeout=2.0, operation_timeout=120.0)
    try:
        with pytest.raises(magnetar.ConnectError):
            bounded(lambda: client.create_producer("t"), 30, "create_producer on a closed port")
    finally:
        client.close()


def test_connect_to_a_silent_server_fails_within_connect_timeout(proxy: FaultProxy) -> None:
    """TCP connects but the handshake is never answered (blackholed from the start): the
    connect timeout (1.5 s) ends it ("connect timed out"), not the operation timeout (120 s,
    past the bound)."""
    proxy.blackhole(True)
    client = magnetar.Client(proxy.service_url, connect_timeout=1.5, operation_timeout=120.0)
    try:
        with pytest.raises((magnetar.ConnectError, magnetar.Timeout), match="connect"):
            bounded(lambda: client.create_producer("t"), 30, "create_producer on a silent server")
    finally:
        proxy.blackhole(False)
        client.close()


@pytest.mark.parametrize("dedup", [True, False], ids=["dedup", "no-dedup"])
def test_chunked_message_survives_a_reset_mid_sequence(rbroker: Any, proxy: FaultProxy, clients: Any,
                                                        integrity: Any, dedup: bool) -> None:
    """A 12 MB message goes out in chunks; the receipt of its first chunk is lost and the
    connection reset, so the producer sends the chunks again on a new connection (with
    deduplication off the topic then holds some twice). The consumer delivers the message
    once, whole, then the message after it, and every entry ends up acked."""
    topic = new_topic(DEDUP_NS if dedup else PLAIN_NS, "chunk")
    client = clients(proxy.service_url)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer = client.create_producer(topic, chunking=True, batching=False, name=f"p-{uuid.uuid4().hex[:8]}")
    big = os.urandom(3 * 1024 * 1024) * 4
    proxy.cut_at("SEND_RECEIPT")
    bounded(lambda: producer.send(big), 60, "send of the chunked message")
    bounded(lambda: producer.send(b"tail"), 30, "send after it")
    assert proxy.cuts, "the fault was not injected"
    got = []
    while True:
        try:
            got.append(bounded(lambda: consumer.receive(timeout=3.0), 30, "receive"))
        except magnetar.Timeout:
            break
    datas = [m.data for m in got]
    whole = sum(1 for d in datas if d == big)
    integrity(lost=int(whole == 0) + int(b"tail" not in datas), duplicated=max(0, whole - 1))
    assert whole == 1 and datas.count(b"tail") == 1, (
        f"{whole} whole copies, {datas.count(b'tail')} tails, {len(datas)} messages")
    assert all(d in (big, b"tail") for d in datas), "a partial or garbled message was delivered"
    for m in got:
        consumer.ack(m)
    assert wait_until(lambda: backlog(rbroker, topic, "s") == 0, 30, 0.2), (
        f"backlog {backlog(rbroker, topic, 's')}: chunk entries left unacked")
