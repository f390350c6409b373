"""Fault scenarios on a real two-broker Pulsar cluster, for magnetar and, as a control, the
official ``pulsar-client`` (docs/resilience.md, "A cluster on one machine").

    python scripts/cluster_scenarios.py --runs 5 [--client magnetar|official|both]
        [--scenario unload unload-partitioned kill restart split] [--messages 5000] [--rate 1000]
        [--load-manager modular|extensible] [--ack-with-receipt] [--no-record]

(also ``scripts/dev cluster --scenarios ...``). One :class:`magnetar.testing.Cluster` (2 brokers)
serves every run. Each run has a namespace of its own (broker deduplication on, retention
unlimited) and a fresh topic; a subprocess (one per run, so a client crash is one failed run)
subscribes a Shared consumer from earliest, then a named batching producer sends ``messages``
payloads (the index as ASCII) at ``rate`` per second with ``send_async``, while the consumer
receives and acks on its own thread. As soon as the subprocess says it is producing, this
process applies the fault:

- ``unload``: the topic moved to the other broker 3 times (``unload(topic, to=other)``), each
  move verified with ``owner()``;
- ``unload-partitioned``: the same on a 4-partition topic, bundle by bundle (partitions in one
  bundle move together), every partition's new owner verified;
- ``kill``: the owner killed with ``kill -9`` once, mid-run; restarted after the run;
- ``restart``: the owner stopped gracefully (SIGTERM: it hands its bundles over as it shuts
  down) once, mid-run; restarted after the run;
- ``split``: ``split_bundle`` of the topic's bundle, mid-run.
- ``txn`` (magnetar only: the official Python client has no transactions): consume, transform,
  produce exactly once. The input topic holds ``messages`` indexes; the worker takes them 50 at
  a time (paced at ``rate``) and, in one transaction each, sends them to an output topic and
  acks them (a failed transaction is aborted and its inputs negatively acked, to come again),
  while both topics are moved to the other broker 3 times. Counted on the output topic: lost =
  inputs not there, stored twice = copies (read committed, so an aborted attempt's never count).

A run ends when every index the producer got a receipt for was received and nothing arrived
for ``--quiet`` s, or at ``--deadline`` (then it is "incomplete"). Then the topic (every
partition) is read back from earliest with a reader. Counts, the same for both clients:

- ``lost``: indexes with a receipt that the topic does not hold;
- ``stored twice``: copies beyond the first of an index in the topic;
- ``after_ack``: deliveries to the consumer of an index the application had already acked;
- ``silence``: the longest gap between two deliveries to the consumer (s);
- send failures, by error;
- magnetar only: the consumer's ``stats()[0]["client"]["acked_before"]`` (copies of confirmed
  acks the broker sent again, dropped by the client).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from magnetar.testing.stress import Deliveries

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "resilience.md"
OUT_DIR = ROOT / "target" / "cluster-scenarios"
SCENARIOS = ("unload", "unload-partitioned", "kill", "restart", "split", "txn")
# The official Python client has no transactions.
MAGNETAR_ONLY = ("txn",)
CLIENTS = ("magnetar", "official")
PARTITIONS = 4


# ---------------------------------------------------------------------------------------------
# The worker: one client, one run (a subprocess of the driver)
# ---------------------------------------------------------------------------------------------

def _stamp() -> str:
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


class _Counts(Deliveries):
    """The run's deliveries, and the longest gap between two of them."""

    def __init__(self, messages: int) -> None:
        super().__init__(messages)
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.silence = 0.0
        self.silence_from = 0.0  # when the longest silence began, s after production started
        self.base = time.monotonic()  # production's start
        self.receive_errors: list[str] = []

    def delivered(self, data: bytes, now: float) -> int:
        """Books one delivery at ``now``; the index, or -1."""
        if self.last_at is not None and now - self.last_at > self.silence:
            self.silence = now - self.last_at
            self.silence_from = self.last_at - self.base
        if self.first_at is None:
            self.first_at = now
        self.last_at = now
        return self.book(data)


def _worker(p: dict[str, Any], proto: Any) -> dict[str, Any]:
    official = p["client"] == "official"
    if official:
        import pulsar
    else:
        import logging

        import magnetar
        # The engine's reconnects and lookups, timed, in the run's log (target/cluster-scenarios).
        logging.basicConfig(level=logging.DEBUG if p.get("debug") else logging.INFO, stream=sys.stderr,
                            format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    topic, messages, rate = p["topic"], p["messages"], p["rate"]
    topics = [f"{topic}-partition-{k}" for k in range(p["partitions"])] if p["partitions"] else [topic]
    t0 = time.monotonic()
    counts = _Counts(messages)
    receipts = bytearray(messages)
    failures: dict[str, int] = {}
    lock = threading.Lock()
    done_sends = [0]

    def sent(i: int, error: str | None) -> None:
        with lock:
            done_sends[0] += 1
            if error is None:
                receipts[i] = 1
            else:
                failures[error] = failures.get(error, 0) + 1

    if official:
        client = pulsar.Client(p["service_url"], operation_timeout_seconds=30,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, producer_name=f"scen-{uuid.uuid4().hex[:8]}", batching_enabled=True,
                                          send_timeout_millis=int(p["send_timeout"] * 1000),
                                          max_pending_messages=messages,
                                          max_pending_messages_across_partitions=messages, block_if_queue_full=True)

        def send(i: int) -> None:
            def cb(res: Any, _msg_id: Any, i: int = i) -> None:
                sent(i, None if res == pulsar.Result.Ok else str(res))
            producer.send_async(str(i).encode(), cb)

        def take() -> None:
            try:
                msg = consumer.receive(timeout_millis=200)
            except pulsar.Timeout:
                return
            i = counts.delivered(msg.data(), time.monotonic())
            consumer.acknowledge(msg)
            if i >= 0:
                counts.acked[i] = 1
    else:
        client = magnetar.Client(p["service_url"], operation_timeout=30.0, connect_timeout=5.0, max_backoff=1.0)
        # ack_with_receipt of one message of a batch waits for the whole batch unless the
        # broker acks batch indexes: so batch_index_ack with it.
        consumer = client.subscribe(topic, "s", subscription_type=magnetar.SubscriptionType.SHARED,
                                    initial_position="earliest", batch_index_ack=p["ack_with_receipt"])
        producer = client.create_producer(topic, name=f"scen-{uuid.uuid4().hex[:8]}", batching=True,
                                          send_timeout=p["send_timeout"], max_pending=messages)

        def send(i: int) -> None:
            def cb(fut: Any, i: int = i) -> None:
                e = fut.exception()
                sent(i, None if e is None else type(e).__name__)
            producer.send_async(str(i).encode(), cb)

        ack = consumer.ack_with_receipt if p["ack_with_receipt"] else consumer.ack

        def take() -> None:
            for msg in consumer.receive_many(1000, timeout=0.2):
                i = counts.delivered(msg.data, time.monotonic())
                ack(msg)
                if i >= 0:
                    counts.acked[i] = 1

    stop = threading.Event()

    def receiver() -> None:
        while not stop.is_set():
            try:
                take()
            except Exception as e:  # noqa: BLE001 - reported
                if len(counts.receive_errors) < 20:
                    counts.receive_errors.append(f"{time.monotonic() - t0:.1f}s {type(e).__name__}: {e}"[:200])
                time.sleep(0.1)

    rx = threading.Thread(target=receiver, daemon=True, name="receiver")
    rx.start()
    counts.base = start = time.monotonic()
    print(f"{_stamp()} worker: producing", file=sys.stderr, flush=True)
    proto.write("READY\n")
    proto.flush()
    step = max(1, rate // 50)
    for i in range(messages):
        send(i)
        if i % step == step - 1:
            ahead = start + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    produced_in = time.monotonic() - start
    end = t0 + p["deadline"]
    while time.monotonic() < end and done_sends[0] < messages:
        time.sleep(0.05)
    sends_done_at = time.monotonic() - t0

    def finished() -> bool:
        with lock:
            want = [i for i in range(messages) if receipts[i]] if done_sends[0] >= messages else None
        if want is None or counts.last_at is None:
            return False
        return (all(counts.received[i] for i in want)
                and time.monotonic() - counts.last_at >= p["quiet"])

    while time.monotonic() < end and not finished():
        time.sleep(0.1)
    complete = finished()
    stop.set()
    rx.join(10)
    acked_before = None
    if not official:
        try:
            acked_before = consumer.stats()[0]["client"]["acked_before"]
        except Exception as e:  # noqa: BLE001 - reported
            counts.receive_errors.append(f"stats(): {type(e).__name__}: {e}"[:200])
    for close in (producer.close, consumer.close):
        try:
            close()
        except Exception as e:  # noqa: BLE001 - reported
            counts.receive_errors.append(f"close: {type(e).__name__}: {e}"[:200])
    received_for = time.monotonic() - t0
    # The driver's fault must be over before the topic is read back.
    proto.write("RECEIVED\n")
    proto.flush()
    sys.stdin.readline()

    # Read every partition back from earliest (a partition whose read fails is read again, up
    # to 3 times; if it still fails, lost is not known: None).
    stored = [0] * messages
    readback_errors: list[str] = []
    stored_unexpected = 0
    def read_back(t: str) -> list[int]:
        counted = [0] * (messages + 1)  # the last slot: payloads that are no index
        if official:
            reader = client.create_reader(t, pulsar.MessageId.earliest)
            read = lambda: reader.read_next(timeout_millis=10_000).data()  # noqa: E731
        else:
            reader = client.create_reader(t, magnetar.MessageId.earliest)
            read = lambda: reader.read_next(timeout=10.0).data  # noqa: E731
        try:
            stop_at = time.monotonic() + 60
            while reader.has_message_available():
                if time.monotonic() > stop_at:
                    raise TimeoutError("still reading after 60 s")
                data = read()
                try:
                    i = int(data)
                except ValueError:
                    i = -1
                counted[i if 0 <= i < messages else messages] += 1
        finally:
            with contextlib.suppress(Exception):
                reader.close()
        return counted

    stored = [0] * messages
    readback_errors: list[str] = []
    stored_unexpected = 0
    unread = 0
    for t in topics:
        for attempt in range(3):
            try:
                counted = read_back(t)
            except Exception as e:  # noqa: BLE001 - reported
                readback_errors.append(f"{t.rsplit('/', 1)[-1]} try {attempt + 1}: {type(e).__name__}: {e}"[:200])
                time.sleep(2)
                continue
            for i in range(messages):
                stored[i] += counted[i]
            stored_unexpected += counted[messages]
            break
        else:
            unread += 1
    with contextlib.suppress(Exception):
        client.close()
    return {
        "messages": messages, "receipts": sum(receipts), "send_failures": failures,
        "lost": None if unread else sum(1 for i in range(messages) if receipts[i] and not stored[i]),
        "lost_first": [] if unread else [i for i in range(messages) if receipts[i] and not stored[i]][:10],
        "stored_twice": None if unread else sum(max(0, c - 1) for c in stored), "stored_unexpected": stored_unexpected,
        "undelivered": sum(1 for i in range(messages) if receipts[i] and not counts.received[i]),
        "distinct": counts.distinct, "deliveries": counts.deliveries, "after_ack": counts.after_ack,
        "first_after_ack": counts.first_after_ack, "unexpected": counts.unexpected,
        "silence": round(counts.silence, 3), "silence_from": round(counts.silence_from, 2),
        "acked_before": acked_before, "complete": complete, "receive_errors": counts.receive_errors,
        "readback_errors": readback_errors, "produced_in": round(produced_in, 2),
        "sends_done_at": round(sends_done_at, 2), "seconds": round(received_for, 2),
    }


def _txn_worker(p: dict[str, Any], proto: Any) -> dict[str, Any]:
    import logging

    import magnetar
    logging.basicConfig(level=logging.DEBUG if p.get("debug") else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    src, messages, rate = p["topic"], p["messages"], p["rate"]
    dst = src + "-out"
    t0 = time.monotonic()
    counts = _Counts(messages)
    committed = bytearray(messages)  # inputs acked by a committed transaction
    errors: list[str] = []
    txn_failures = 0
    done: list[tuple[tuple[int, int], list[int], list[Any]]] = []  # committed: txn id, inputs, sends
    client = magnetar.Client(p["service_url"], operation_timeout=30.0, connect_timeout=5.0, max_backoff=1.0)
    client.create_producer(src, batching=True).send_many([str(i).encode() for i in range(messages)])
    consumer = client.subscribe(src, "s", subscription_type=magnetar.SubscriptionType.SHARED,
                                initial_position="earliest", nack_redelivery_delay=0.1)
    producer = client.create_producer(dst, name=f"scen-{uuid.uuid4().hex[:8]}", batching=True,
                                      send_timeout=p["send_timeout"])
    counts.base = start = time.monotonic()
    proto.write("READY\n")
    proto.flush()
    end = t0 + p["deadline"]
    taken = 0
    while time.monotonic() < end and sum(committed) < messages:
        msgs = consumer.receive_many(50, timeout=0.2)
        if not msgs:
            continue
        ids = [counts.delivered(m.data, time.monotonic()) for m in msgs]
        sent: list[Any] = []
        try:
            with client.new_transaction(timeout=60) as txn:
                for m in msgs:
                    sent.append(producer.send_async(m.data, txn=txn))
                    consumer.ack(m, txn=txn)
                txn_id = txn.id
        except Exception as e:  # noqa: BLE001 - aborted: the inputs come again
            txn_failures += 1
            if len(errors) < 10:
                errors.append(f"{time.monotonic() - t0:.1f}s {type(e).__name__}: {e}"[:200])
            for m in msgs:
                consumer.nack(m)
        else:
            done.append((txn_id, ids, sent))
            for i in ids:
                if i >= 0:
                    counts.acked[i] = committed[i] = 1
        taken += len(msgs)
        ahead = start + taken / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    complete = sum(committed) >= messages
    received_for = time.monotonic() - t0
    proto.write("RECEIVED\n")
    proto.flush()
    sys.stdin.readline()
    stored = [0] * messages
    stored_unexpected = 0
    reader = client.create_reader(dst, magnetar.MessageId.earliest)
    readback_errors: list[str] = []
    try:
        while reader.has_message_available():
            data = reader.read_next(timeout=10.0).data
            try:
                i = int(data)
            except ValueError:
                i = -1
            if 0 <= i < messages:
                stored[i] += 1
            else:
                stored_unexpected += 1
    except Exception as e:  # noqa: BLE001 - reported
        readback_errors.append(f"{type(e).__name__}: {e}"[:200])
    acked_before = None
    try:
        acked_before = consumer.stats()[0]["client"]["acked_before"]
    except Exception as e:  # noqa: BLE001 - reported
        errors.append(f"stats(): {type(e).__name__}: {e}"[:200])
    with contextlib.suppress(Exception):
        client.close()
    unread = bool(readback_errors)
    lost_txns = [] if unread else _lost_txns(p, dst, done, stored)
    return {
        "lost_txns": lost_txns,
        "messages": messages, "receipts": messages, "send_failures": {"transactions aborted": txn_failures}
        if txn_failures else {},
        "lost": None if unread else sum(1 for i in range(messages) if not stored[i]),
        "lost_first": [] if unread else [i for i in range(messages) if not stored[i]][:10],
        "stored_twice": None if unread else sum(max(0, c - 1) for c in stored), "stored_unexpected": stored_unexpected,
        "undelivered": sum(1 for i in range(messages) if not counts.received[i]),
        "distinct": counts.distinct, "deliveries": counts.deliveries, "after_ack": counts.after_ack,
        "first_after_ack": counts.first_after_ack, "unexpected": counts.unexpected,
        "silence": round(counts.silence, 3), "silence_from": round(counts.silence_from, 2),
        "acked_before": acked_before, "complete": complete, "receive_errors": errors,
        "readback_errors": readback_errors, "produced_in": round(received_for, 2),
        "sends_done_at": round(received_for, 2), "seconds": round(received_for, 2),
    }


def _lost_txns(p: dict[str, Any], dst: str, done: list[tuple[tuple[int, int], list[int], list[Any]]],
               stored: list[int]) -> list[dict[str, Any]]:
    """For each committed transaction whose outputs are missing: its id, the ids its sends got
    and what the broker says of it (the coordinator's record, the output topic's transaction
    buffer, the entries at those ids), so a loss can be told apart: never written, written
    but filtered as aborted, or held behind the buffer's max read position."""
    import urllib.error
    import urllib.request

    def get(path: str) -> Any:
        try:
            with urllib.request.urlopen(p["admin_url"] + path, timeout=10) as r:
                body = r.read()
                try:
                    return json.loads(body)
                except ValueError:
                    return {"status": r.status, "bytes": len(body), "headers": dict(r.headers)}
        except urllib.error.HTTPError as e:
            return {"http": e.code, "body": e.read()[:300].decode(errors="replace")}
        except Exception as e:  # noqa: BLE001 - reported
            return {"error": f"{type(e).__name__}: {e}"[:200]}

    out: list[dict[str, Any]] = []
    tpath = dst.replace("persistent://", "persistent/")
    for (most, least), ids, sent in done:
        missing = [i for i in ids if 0 <= i < len(stored) and not stored[i]]
        if not missing:
            continue
        receipts: list[str] = []
        for f in sent:
            try:
                receipts.append(str(f.result(0)))
            except Exception as e:  # noqa: BLE001 - reported
                receipts.append(f"{type(e).__name__}: {e}"[:120])
        entries = sorted({tuple(r.split(":")[:2]) for r in receipts if r[:1].isdigit()})
        out.append({
            "txn": [most, least], "missing": len(missing), "first_missing": missing[0],
            "receipts": receipts[:3] + receipts[-2:],
            "coordinator": get(f"/admin/v3/transactions/transactionMetadata/{most}/{least}"),
            "in_buffer": get(f"/admin/v3/transactions/transactionInBufferStats/{tpath}/{most}/{least}"),
            "buffer": get(f"/admin/v3/transactions/transactionBufferStats/{tpath}"),
            "entries": {f"{le[0]}:{le[1]}": get(f"/admin/v2/{tpath}/ledger/{le[0]}/entry/{le[1]}")
                        for le in entries[:3]},
        })
        if len(out) >= 3:
            break
    return out


def worker_main(arg: str) -> None:
    # The protocol goes to the real stdout; anything a client library prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    p = json.loads(arg)
    result = _txn_worker(p, proto) if p.get("scenario") == "txn" else _worker(p, proto)
    proto.write("RESULT " + json.dumps(result) + "\n")
    proto.flush()
    os._exit(0)  # no waiting on client threads at exit


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------

def _wait_owner(cluster: Any, topic: str, want: int, timeout: float = 20.0) -> float | None:
    """Seconds until ``owner(topic) == want``, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        with contextlib.suppress(Exception):
            if cluster.owner(topic) == want:
                return time.monotonic() - t0
        time.sleep(0.1)
    return None


class _Fault:
    """The scenario's fault, on a thread of the driver, started when the worker produces."""

    def __init__(self, cluster: Any, scenario: str, topic: str, partitions: int, duration: float) -> None:
        self.cluster, self.scenario, self.topic, self.partitions = cluster, scenario, topic, partitions
        self.duration = duration
        self.notes: list[str] = []
        self.moves = 0
        self.moves_verified = 0
        self.errors: list[str] = []
        self.killed: int | None = None
        self.longest_move = 0.0  # s from the fault's call until the topic's new owner answers
        self.log: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="fault")

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.thread.start()

    def _at(self, frac: float) -> None:
        delay = self.t0 + self.duration * frac - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def _note(self, text: str) -> None:
        self.notes.append(f"{time.monotonic() - self.t0:.1f}s {text}")
        self.log.write(f"{_stamp()} driver: {text}\n")
        self.log.flush()

    def _run(self) -> None:
        try:
            getattr(self, "_" + self.scenario.replace("-", "_"))()
        except Exception as e:  # noqa: BLE001 - reported
            self.errors.append(f"{type(e).__name__}: {e}"[:300])

    def _move(self, groups: list[list[str]]) -> None:
        """One move of each group (the topics of one bundle) to the other broker: every bundle
        unloaded first, then every topic's new owner awaited (3 s; a bundle not moved by then
        is unloaded once more and awaited 3 s again)."""
        c = self.cluster
        t = time.monotonic()
        moves = []
        for members in groups:
            src = c.owner(members[0])
            c.unload(members[0], to=1 - src)
            self.moves += 1
            moves.append((members, src))
        for attempt in (1, 2):
            left = []
            for members, src in moves:
                waits = [_wait_owner(c, m, 1 - src, timeout=3.0) for m in members]
                if all(w is not None for w in waits):
                    self.moves_verified += 1
                    self.longest_move = max(self.longest_move, time.monotonic() - t)
                    self._note(f"{len(members)} topic(s) moved {src}->{1 - src} in {time.monotonic() - t:.2f}s"
                               + (" (unloaded twice)" if attempt == 2 else ""))
                elif attempt == 1:
                    self._note(f"{members[0].rsplit('/', 1)[-1]}: not on {1 - src} after 3 s "
                               f"(owners {[self._owner(m) for m in members]}); unloading again")
                    with contextlib.suppress(Exception):
                        c.unload(members[0], to=1 - src)
                    left.append((members, src))
                else:
                    self._note(f"{members[0].rsplit('/', 1)[-1]}: move {src}->{1 - src} NOT verified: "
                               f"owners {[self._owner(m) for m in members]}")
            moves = left

    def _owner(self, topic: str) -> int | str:
        try:
            return self.cluster.owner(topic)
        except Exception as e:  # noqa: BLE001
            return type(e).__name__

    def _late(self) -> bool:
        """Production is over by 2 s (moves were slow): the moves left are skipped."""
        if time.monotonic() > self.t0 + self.duration + 2.0:
            self._note("production over: the moves left are skipped")
            return True
        return False

    def _unload(self) -> None:
        for frac in (0.2, 0.45, 0.7):
            self._at(frac)
            if self._late():
                return
            self._move([[self.topic]])

    def _txn(self) -> None:
        groups: dict[str, list[str]] = {}
        for t in (self.topic, self.topic + "-out"):  # topics of one bundle move together
            groups.setdefault(self.cluster.bundle(t), []).append(t)
        for frac in (0.2, 0.45, 0.7):
            self._at(frac)
            if self._late():
                return
            self._move(list(groups.values()))

    def _unload_partitioned(self) -> None:
        parts = [f"{self.topic}-partition-{k}" for k in range(self.partitions)]
        groups: dict[str, list[str]] = {}
        for p in parts:
            groups.setdefault(self.cluster.bundle(p), []).append(p)
        self._note(f"bundles {sorted(groups)}; owners {[self._owner(p) for p in parts]}")
        for frac in (0.2, 0.45, 0.7):
            self._at(frac)
            if self._late():
                return
            self._move(list(groups.values()))

    def _kill(self) -> None:
        self._owner_down(lambda o: self.cluster.kill(o), "killed")

    def _restart(self) -> None:
        """A graceful stop: the owner hands its bundles over as it shuts down, so the survivor
        takes the topic over at once (no session timeout to wait for, as after kill -9)."""
        self._owner_down(self.cluster.stop_broker, "stopped")

    def _owner_down(self, down: Any, how: str) -> None:
        """Takes the topic's owner down mid-run (restarted after the run) and waits for the
        survivor to own the topic."""
        self._at(0.5)
        o = self.cluster.owner(self.topic)
        t = time.monotonic()
        down(o)
        self.killed = o
        self._note(f"broker {o} {how} in {time.monotonic() - t:.1f}s")
        w = _wait_owner(self.cluster, self.topic, 1 - o, timeout=90)
        self._note(f"owner {1 - o} after {w:.1f}s" if w is not None else "no new owner in 90 s")
        self.longest_move = time.monotonic() - t

    def _split(self) -> None:
        self._at(0.5)
        c = self.cluster
        before, owner = c.bundle(self.topic), c.owner(self.topic)
        c.split_bundle(self.topic)
        time.sleep(1.0)
        self._note(f"split {before} (owner {owner}) -> {self._bundle()} (owner {self._owner(self.topic)})")

    def _bundle(self) -> str:
        try:
            return self.cluster.bundle(self.topic)
        except Exception as e:  # noqa: BLE001
            return type(e).__name__


def one_run(cluster: Any, args: argparse.Namespace, scenario: str, client: str, k: int) -> dict[str, Any]:
    ns = f"public/scen-{uuid.uuid4().hex[:8]}"
    cluster.create_namespace(ns)
    cluster.set_deduplication(ns, True)
    cluster.set_retention(ns, -1, -1)
    topic = f"persistent://{ns}/{scenario}-{client}"
    partitions = PARTITIONS if scenario == "unload-partitioned" else 0
    if partitions:
        cluster.create_partitioned_topic(topic, partitions)
    params = {"client": client, "topic": topic, "partitions": partitions, "service_url": cluster.service_url,
              "admin_url": cluster.admin_url,
              "messages": args.messages, "rate": args.rate, "deadline": args.deadline, "quiet": args.quiet,
              "send_timeout": args.send_timeout, "ack_with_receipt": args.ack_with_receipt, "debug": args.debug,
              "scenario": scenario}
    out_dir = Path(args.out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / f"{scenario}-{client}-{k}.log"
    fault = _Fault(cluster, scenario, topic, partitions, args.messages / args.rate)
    result: dict[str, Any] = {}
    with open(log_path, "w") as log, open(log_path.with_suffix(".fault.log"), "w") as fault.log:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(params)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT)
        assert proc.stdout is not None
        watchdog = threading.Timer(args.deadline + 240, proc.kill)  # a hung worker is a crashed run
        watchdog.start()
        try:
            for line in proc.stdout:
                if line.startswith("READY"):
                    fault.start()
                elif line.startswith("RECEIVED"):
                    if fault.thread.is_alive():
                        fault.thread.join(120)
                    with contextlib.suppress(OSError):
                        proc.stdin.write("READBACK\n")
                        proc.stdin.flush()
                elif line.startswith("RESULT "):
                    result = json.loads(line[7:])
            proc.wait()
        finally:
            watchdog.cancel()
        if fault.thread.is_alive():
            fault.thread.join(120)
        if fault.killed is not None:
            t = time.monotonic()
            cluster.restart(fault.killed)
            fault._note(f"broker {fault.killed} restarted in {time.monotonic() - t:.0f}s (after the run)")
    if not result:
        result = {"crashed": f"worker exit {proc.returncode}; see {log_path.relative_to(ROOT)}"}
    result.update(scenario=scenario, client=client, run=k, topic=topic, fault_notes=fault.notes,
                  fault_errors=fault.errors, moves=fault.moves, moves_verified=fault.moves_verified,
                  longest_move=round(fault.longest_move, 2))
    return result


def run_line(r: dict[str, Any]) -> str:
    head = f"{r['scenario']:<18} {r['client']:<8} #{r['run']}: "
    if "crashed" in r:
        return head + "CRASHED " + r["crashed"] + f"; fault: {r['fault_notes']} {r['fault_errors']}"
    fails = f", send failures {r['send_failures']}" if r["send_failures"] else ""
    ab = f", acked_before {r['acked_before']}" if r["acked_before"] is not None else ""
    extra = ""
    if r["first_after_ack"]:
        extra += f" after_ack e.g. {r['first_after_ack']}"
    if r["lost_first"]:
        extra += f" lost e.g. {r['lost_first']}"
    if r.get("lost_txns"):
        extra += f" lost transactions {json.dumps(r['lost_txns'])}"
    if r["receive_errors"]:
        extra += f" receive errors {r['receive_errors'][:3]}"
    if r["readback_errors"]:
        extra += f" readback errors {r['readback_errors'][:3]}"
    if r["fault_errors"]:
        extra += f" fault errors {r['fault_errors']}"
    return (head + f"{r['receipts']}/{r['messages']} receipts, lost {r['lost']}, stored twice {r['stored_twice']}, "
            f"after_ack {r['after_ack']}, undelivered {r['undelivered']}, {r['deliveries']} deliveries, "
            f"silence {r['silence']:.2f}s (from {r['silence_from']:.1f}s){ab}{fails}, "
            f"{'complete' if r['complete'] else 'INCOMPLETE'} in {r['seconds']:.1f}s; "
            f"moves {r['moves_verified']}/{r['moves']} verified; {'; '.join(r['fault_notes'])}{extra}")


def tables(results: list[dict[str, Any]], scenarios: list[str], clients: list[str]) -> str:
    out = ["| scenario | client | runs | complete | lost | stored twice | after_ack per run | undelivered "
           "| longest silence median / max | longest move median / max | send failures | acked_before per run "
           "| moves verified |",
           "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- | --- | ---: | --- | --- |"]
    for s in scenarios:
        for c in clients:
            rs = [r for r in results if r["scenario"] == s and r["client"] == c]
            if not rs:
                continue
            ok = [r for r in rs if "crashed" not in r]
            crashed = len(rs) - len(ok)
            sil = [r["silence"] for r in ok]
            mv = [r.get("longest_move", 0.0) for r in ok]
            move = f"{statistics.median(mv):.2f} / {max(mv):.2f} s" if s != "split" else "-"
            # How much longer than the fault the consumer went without a delivery.
            beyond = [max(0.0, r["silence"] - r.get("longest_move", 0.0)) for r in ok]
            move += f" (silence beyond it {statistics.median(beyond):.2f} / {max(beyond):.2f} s)" if s != "split" else ""
            fails = sum(sum(r["send_failures"].values()) for r in ok)
            ab = ", ".join(str(r["acked_before"]) for r in ok) if c == "magnetar" else "-"
            unread = sum(1 for r in ok if r["lost"] is None)
            lost = f"{sum(r['lost'] or 0 for r in ok)}{f' ({unread} not read back)' if unread else ''}"
            twice = sum(r["stored_twice"] or 0 for r in ok)
            moves = (f"{sum(r['moves_verified'] for r in ok)}/{sum(r['moves'] for r in ok)}"
                     if s.startswith("unload") or s == "txn" else "-")
            out.append(
                f"| {s} | {c} | {len(rs)}{f' ({crashed} crashed)' if crashed else ''} "
                f"| {sum(1 for r in ok if r['complete'])} | {lost} "
                f"| {twice} | {', '.join(str(r['after_ack']) for r in ok)} "
                f"| {sum(r['undelivered'] for r in ok)} "
                f"| {statistics.median(sil):.2f} / {max(sil):.2f} s | {move} | {fails} | {ab} | {moves} |"
                if ok else f"| {s} | {c} | {len(rs)} ({crashed} crashed) | 0 |" + " - |" * 9)
    return "\n".join(out)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "?"


def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                          check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "python"], capture_output=True, text=True,
                           cwd=ROOT, check=False).stdout.strip()
    return head + ("+wt" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--client", choices=(*CLIENTS, "both"), default="both")
    ap.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--rate", type=int, default=1000, help="messages per second")
    ap.add_argument("--deadline", type=float, default=120.0, help="seconds a run may take")
    ap.add_argument("--quiet", type=float, default=2.0, help="seconds with nothing arriving that end a run")
    ap.add_argument("--send-timeout", type=float, default=60.0)
    ap.add_argument("--ack-with-receipt", action="store_true",
                    help="magnetar acks with ack_with_receipt (and batch_index_ack)")
    ap.add_argument("--debug", action="store_true", help="magnetar's DEBUG log in each run's log")
    ap.add_argument("--load-manager", choices=("modular", "extensible"), default="modular")
    ap.add_argument("--no-record", action="store_true", help="do not append to docs/resilience.md")
    ap.add_argument("--out-dir", default=str(OUT_DIR), help="the runs' logs, results.json and meta.json")
    ap.add_argument("--cluster-dir", default=None,
                    help="the cluster's conf, data and broker logs go here and stay (default: a temp dir, removed)")
    ap.add_argument("--first-run", type=int, default=1, help="the number of the first round (passes in parallel)")
    ap.add_argument("--combine", nargs="+", metavar="OUT_DIR",
                    help="no runs: record one table from the results of these passes' --out-dir")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="start no new round after this long; the record says how many rounds ran")
    args = ap.parse_args()
    if args.worker:
        worker_main(args.worker)
        return 0

    if args.combine:
        return combine(args)
    from magnetar.testing import Cluster

    clients = list(CLIENTS) if args.client == "both" else [args.client]
    out_dir = Path(args.out_dir).resolve()
    command = "python scripts/cluster_scenarios.py " + " ".join(sys.argv[1:])
    started = datetime.datetime.now(datetime.timezone.utc)
    meta: dict[str, Any] = {"command": command, "date": subprocess.run(["date"], capture_output=True,
                                                                         text=True).stdout.strip(),
                            "uptime_before": _uptime(), "commit": _commit(), "load_manager": args.load_manager,
                            "messages": args.messages, "rate": args.rate, "ack_with_receipt": args.ack_with_receipt,
                            "started": f"{started:%Y-%m-%d}"}
    print(f"{meta['date']}; {meta['uptime_before']}; {meta['commit']}", flush=True)
    results: list[dict[str, Any]] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with Cluster(brokers=2, load_manager=args.load_manager, data_dir=args.cluster_dir) as cluster:
        print(f"cluster up in {cluster.startup_seconds} s: {cluster.service_url} ({args.load_manager})", flush=True)
        for k in range(args.first_run, args.first_run + args.runs):
            if args.max_minutes is not None and time.monotonic() - t0 > args.max_minutes * 60:
                print(f"--max-minutes {args.max_minutes:g} reached: {k - args.first_run} of {args.runs} rounds ran",
                      flush=True)
                break
            for s in args.scenario:
                for c in clients:
                    if c != "magnetar" and s in MAGNETAR_ONLY:
                        continue
                    try:
                        r = one_run(cluster, args, s, c, k)
                    except Exception as e:  # noqa: BLE001 - a driver failure is one failed run
                        r = {"scenario": s, "client": c, "run": k, "crashed": f"driver: {type(e).__name__}: {e}"[:300],
                             "fault_notes": [], "fault_errors": []}
                        for i, b in enumerate(cluster.brokers):  # a kill run may have left one down
                            if not b.alive:
                                with contextlib.suppress(Exception):
                                    cluster.restart(i)
                    results.append(r)
                    print(run_line(r), flush=True)
                    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    meta.update(minutes=round((time.monotonic() - t0) / 60), uptime_after=_uptime())
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1))
    table = tables(results, args.scenario, clients)
    print()
    print(table)
    if not args.no_record:
        _record(f"{args.runs} run{'s' if args.runs != 1 else ''} each", [meta], table)
    return 0


def _pass_line(m: dict[str, Any]) -> str:
    return (f"`{m['command']}` ({m['load_manager']} load manager, {m['messages']} messages at {m['rate']}/s, "
            f"magnetar acks with {'ack_with_receipt, batch_index_ack' if m['ack_with_receipt'] else 'ack'}), "
            f"{m['minutes']} min, {m['commit']}. `date`: {m['date']}. `uptime` before: "
            f"{m['uptime_before'].split('load average:')[-1].strip()}; after: "
            f"{m['uptime_after'].split('load average:')[-1].strip()}.")


def _record(title: str, metas: list[dict[str, Any]], table: str) -> None:
    passes = "\n\n".join(_pass_line(m) for m in metas)
    with open(DOC, "a") as f:
        f.write(f"\n### {metas[0]['started']}: cluster scenarios, {title}\n\n{passes}\n\n{table}\n")
    print(f"\nappended to {DOC.relative_to(ROOT)}")


def combine(args: argparse.Namespace) -> int:
    """One table from passes that ran side by side (each on a cluster of its own)."""
    metas, results = [], []
    for d in args.combine:
        metas.append(json.loads((Path(d) / "meta.json").read_text()))
        results += json.loads((Path(d) / "results.json").read_text())
    clients = [c for c in CLIENTS if any(r["client"] == c for r in results)]
    table = tables(results, [s for s in SCENARIOS if any(r["scenario"] == s for r in results)], clients)
    print(table)
    if not args.no_record:
        _record(f"{len(metas)} passes side by side, on a cluster each", metas, table)
    return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
