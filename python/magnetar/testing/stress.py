"""The unload stress of issue 11: does an acknowledged message ever come back?

A namespace with deduplication on; an Exclusive consumer (earliest) subscribed first; a
batching producer sends ``messages`` with ``send_async`` while an admin thread unloads the
topic ``unloads`` times, ``gap`` seconds apart. Then, by ``mode``:

- ``"drain"``: once every send completed, the consumer drains with ``receive_many`` + ``ack``
  (3 unloads by default);
- ``"live"``: the consumer receives and acks on its own thread while the topic is unloaded
  during production (6 unloads by default).

Each payload is its message's index. The run tracks what the application acked: any delivery
of an index it had already acked is an ``after_ack`` violation (Pulsar redelivers only
unacknowledged messages). It ends once every index was received and nothing arrived for
``quiet`` seconds, or at ``deadline``.

Used by ``tests/test_integrity.py`` (small counts) and ``scripts/stress.py`` (the issue's
30,000 messages, many runs).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Any

__all__ = ["Deliveries", "UnloadRun", "unload_run"]

NAMESPACE = "public/stress-dedup"
DEFAULT_UNLOADS = {"drain": 3, "live": 6}


@dataclasses.dataclass
class UnloadRun:
    """What one run saw."""

    mode: str
    messages: int
    topic: str
    unloads: int = 0  # unloads the broker performed
    unload_errors: int = 0
    distinct: int = 0  # distinct indexes received
    deliveries: int = 0  # messages received, repeats included
    after_ack: int = 0  # deliveries of an index the application had already acked
    first_after_ack: list[int] = dataclasses.field(default_factory=list)  # the first few of them
    send_failures: dict[str, int] = dataclasses.field(default_factory=dict)
    receive_errors: list[str] = dataclasses.field(default_factory=list)
    unexpected: int = 0  # payloads that are no index of this run
    seconds: float = 0.0

    @property
    def lost(self) -> int:
        return self.messages - self.distinct

    @property
    def ok(self) -> bool:
        return (self.lost == 0 and self.after_ack == 0 and not self.send_failures and not self.unexpected
                and not self.receive_errors)

    def line(self) -> str:
        return (f"{self.mode}: {self.messages} sent, {self.unloads} unloads, {self.distinct} distinct received "
                f"(lost {self.lost}), {self.deliveries} deliveries, {self.after_ack} delivered again after "
                f"their ack{' e.g. ' + str(self.first_after_ack) if self.first_after_ack else ''}"
                f"{', send failures ' + str(self.send_failures) if self.send_failures else ''}"
                f"{', receive errors ' + str(self.receive_errors[:3]) if self.receive_errors else ''}"
                f", {self.seconds:.1f} s -> {'ok' if self.ok else 'FAIL'}")


class Deliveries:
    """What a consumer was handed, by index (each payload is its message's index as ASCII):
    distinct indexes, deliveries with repeats, deliveries of an index the application had
    already acked (``acked`` is the application's to set), and payloads that are no index.
    One thread at a time; ``scripts/cluster_scenarios.py`` counts with it too."""

    def __init__(self, messages: int) -> None:
        self.messages = messages
        self.received = bytearray(messages)
        self.acked = bytearray(messages)
        self.distinct = 0
        self.deliveries = 0
        self.after_ack = 0
        self.first_after_ack: list[int] = []  # the first few of them
        self.unexpected = 0

    def book(self, data: bytes) -> int:
        """Books one delivery: its index, or -1 for a payload that is no index of the run."""
        self.deliveries += 1
        try:
            i = int(data)
        except ValueError:
            i = -1
        if not 0 <= i < self.messages:
            self.unexpected += 1
            return -1
        if self.acked[i]:
            self.after_ack += 1
            if len(self.first_after_ack) < 10:
                self.first_after_ack.append(i)
        if not self.received[i]:
            self.received[i] = 1
            self.distinct += 1
        return i


class _Tracker:
    """Receives, acks and classifies; one thread at a time calls :meth:`take`."""

    def __init__(self, consumer: Any, run: UnloadRun) -> None:
        self.consumer = consumer
        self.run = run
        self.seen = Deliveries(run.messages)
        self.last_message_at = time.monotonic()

    def take(self, timeout: float) -> int:
        msgs = self.consumer.receive_many(1000, timeout=timeout)
        seen = self.seen
        for m in msgs:
            i = seen.book(m.data)
            if i >= 0:
                self.consumer.ack(m)
                seen.acked[i] = 1
        run = self.run
        run.distinct, run.deliveries, run.after_ack, run.unexpected = (
            seen.distinct, seen.deliveries, seen.after_ack, seen.unexpected)
        run.first_after_ack = list(seen.first_after_ack)
        if msgs:
            self.last_message_at = time.monotonic()
        return len(msgs)

    def finished(self, quiet: float) -> bool:
        return self.run.distinct >= self.run.messages and time.monotonic() - self.last_message_at >= quiet


def unload_run(client: Any, admin: Any, *, mode: str, messages: int = 30_000, unloads: int | None = None,
               gap: float = 0.7, namespace: str = NAMESPACE, quiet: float = 3.0, deadline: float = 180.0,
               send_seconds: float | None = None) -> UnloadRun:
    """Runs the scenario once on a fresh topic of ``namespace`` (made, with deduplication on,
    if missing) and returns what it saw. ``client`` is a :class:`magnetar.Client`, ``admin`` a
    :class:`~magnetar.testing.Admin` (or Standalone) of the same broker. Production is paced
    over ``send_seconds`` (default: until just after the last unload), so the unloads land
    while it runs."""
    import magnetar

    if mode not in DEFAULT_UNLOADS:
        raise ValueError(f"mode must be one of {sorted(DEFAULT_UNLOADS)}")
    unloads = DEFAULT_UNLOADS[mode] if unloads is None else unloads
    send_seconds = unloads * gap + 0.3 if send_seconds is None else send_seconds
    admin.create_namespace(namespace)
    admin.set_deduplication(namespace, True)
    topic = f"persistent://{namespace}/unload-{mode}-{uuid.uuid4().hex[:10]}"
    run = UnloadRun(mode=mode, messages=messages, topic=topic)
    t0 = time.monotonic()
    consumer = client.subscribe(topic, "s", subscription_type=magnetar.SubscriptionType.EXCLUSIVE,
                                initial_position="earliest")
    producer = client.create_producer(topic, name=f"stress-{uuid.uuid4().hex[:8]}", batching=True,
                                      send_timeout=0, max_pending=5000)
    tracker = _Tracker(consumer, run)
    stop = threading.Event()

    def unloader() -> None:
        for k in range(unloads):
            if stop.wait(gap if k else gap / 2):
                return
            try:
                admin.unload_topic(topic)
                run.unloads += 1
            except Exception:  # noqa: BLE001 - counted; an unload refused while the topic loads
                run.unload_errors += 1

    def receiver() -> None:
        while not stop.is_set():
            try:
                tracker.take(0.2)
            except magnetar.AlreadyClosed:
                return
            except Exception as e:  # noqa: BLE001 - reported
                run.receive_errors.append(repr(e))
                time.sleep(0.1)

    threads = [threading.Thread(target=unloader, daemon=True, name="unloader")]
    if mode == "live":
        threads.append(threading.Thread(target=receiver, daemon=True, name="live receiver"))
    for t in threads:
        t.start()
    futures = []
    step = 500
    for i in range(messages):
        futures.append(producer.send_async(str(i).encode()))
        if i % step == step - 1:
            ahead = t0 + send_seconds * (i + 1) / messages - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    end = t0 + deadline
    for f in futures:
        try:
            f.result(timeout=max(0.1, end - time.monotonic()))
        except Exception as e:  # noqa: BLE001 - counted
            run.send_failures[type(e).__name__] = run.send_failures.get(type(e).__name__, 0) + 1
    threads[0].join(max(0.1, end - time.monotonic()))
    try:
        if mode == "live":
            while time.monotonic() < end and not tracker.finished(quiet):
                time.sleep(0.1)
            stop.set()
            threads[1].join(10)
        else:
            tracker.last_message_at = time.monotonic()
            while time.monotonic() < end and not tracker.finished(quiet):
                try:
                    tracker.take(0.2)
                except Exception as e:  # noqa: BLE001 - reported
                    run.receive_errors.append(repr(e))
                    time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        run.seconds = time.monotonic() - t0
        for close in (producer.close, consumer.close):
            try:
                close()
            except Exception:  # noqa: BLE001 - the run's figures are what matter here
                pass
    return run
