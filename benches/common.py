"""Shared by the orchestrator and the per-client benchmark processes (standard library only).

A client process reads a spec (JSON), sets up its client outside the measured window, then
measures one :class:`Window`: wall time, its own user+sys CPU (``getrusage(RUSAGE_SELF)``: all
threads, native I/O threads included), the broker JVM's CPU (``/proc/<pid>/stat``) and the
machine's busy share (``/proc/stat``) over exactly the same interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any, ContextManager, Iterator

# Identical settings for every client (the table).
BATCH_MAX_MESSAGES = 1000
BATCH_MAX_BYTES = 128 * 1024
BATCH_DELAY_MS = 10  # throughput runs: the C++/Python/magnetar default
LATENCY_BATCH_DELAY_MS = 1  # fixed-rate latency runs: pulsar-perf's default, so the timer does not set p50
RECEIVER_QUEUE = 1000
MAX_PENDING = 10_000  # producer pending-message limit (pulsar-perf -o), blocking when full
ASYNC_CONCURRENCY = 5_000  # asyncio: concurrent send tasks (< MAX_PENDING, so never blocks the loop)
RECEIVE_BATCH = 1000  # receive_many / batch_receive size
LATENCY_WARMUP_S = 1.0  # latency samples of the first second are dropped (as pulsar-perf does)

_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int | None) -> float | None:
    """user+sys CPU seconds of process ``pid`` (all threads) from ``/proc/<pid>/stat``."""
    if not pid:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the ")" : state(0) ... utime is field 14 of the full line -> index 11 here
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from ``/proc/stat``."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    total = sum(parts[:8])
    return float(total - idle), float(total)


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def provenance() -> str:
    """The line a bench prints before anything else: the command, the commit of the tree it ran
    from (``+dirty`` with uncommitted changes), the UTC time and the load, so that a figure copied
    into docs/ carries where it came from (issue 34: many did not)."""
    import datetime
    import subprocess

    root = Path(__file__).resolve().parent.parent

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        head += "+dirty"
    module = Path(sys.argv[0]).with_suffix("").name
    command = " ".join(["python -m benches." + module, *sys.argv[1:]])
    now = datetime.datetime.now(datetime.timezone.utc)
    loads = Path("/proc/loadavg").read_text().split()[:3]
    return f"# {command} at {head}, {now:%Y-%m-%d %H:%M} UTC, load {' '.join(loads)}"


def self_cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


class Window:
    """The measured interval of one run."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        self.started = False

    def start(self) -> None:
        self.load0 = loadavg()
        self.m0 = machine_busy()
        self.b0 = proc_cpu(self.broker_pid)
        self.u0, self.s0 = self_cpu()
        self.t0 = time.perf_counter()
        self.started = True

    def stop(self) -> dict[str, Any]:
        t1 = time.perf_counter()
        u1, s1 = self_cpu()
        b1 = proc_cpu(self.broker_pid)
        m1 = machine_busy()
        wall = t1 - self.t0
        out: dict[str, Any] = {
            "wall_s": wall,
            "cpu_user_s": u1 - self.u0,
            "cpu_sys_s": s1 - self.s0,
            "cpu_s": (u1 - self.u0) + (s1 - self.s0),
            "broker_cpu_s": None if self.b0 is None or b1 is None else b1 - self.b0,
            "machine_busy": (m1[0] - self.m0[0]) / max(1.0, m1[1] - self.m0[1]),
            "loadavg_start": self.load0,
            "loadavg_end": loadavg(),
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
        return out


def percentiles(samples: list[float], scale: float = 1e3) -> dict[str, float]:
    """p50/p99/p99.9/max of ``samples`` (seconds), in milliseconds (``scale``)."""
    if not samples:
        return {}
    s = sorted(samples)
    n = len(s)

    def q(p: float) -> float:  # nearest rank
        return s[min(n - 1, max(0, math.ceil(p * n) - 1))] * scale

    return {"p50": q(0.50), "p99": q(0.99), "p999": q(0.999), "max": s[-1] * scale,
            "mean": sum(s) / n * scale, "samples": n}


def make_payloads(n: int, size: int) -> list[bytes]:
    """``n`` distinct payloads of ``size`` bytes, built before the window starts.

    Every payload is its own ``bytes`` object (a 4-byte counter in front), so no client can
    benefit from sending the same object again.
    """
    base = bytes((65 + i % 26) for i in range(max(size, 4)))
    tail = base[4:size]
    return [i.to_bytes(4, "big") + tail if size >= 4 else base[:size] for i in range(n)]


def load_spec() -> tuple[dict[str, Any], Path]:
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: python -m {sys.argv[0]} SPEC.json OUT.json")
    return json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])


def write_result(out: Path, result: dict[str, Any]) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.rename(out)


def fixed_rate_schedule(n: int, rate: float, send_one: Any) -> tuple[list[float], float]:
    """Open-loop sending: message ``i`` is due at ``t0 + i / rate``; ``send_one(i)`` is called
    for every due message (catching up in bursts if the loop fell behind, never skipping).

    Returns the intended send times (perf_counter seconds) and ``t0``. Latency is then
    receipt time - intended time, which counts the client's own lateness (no coordinated
    omission).
    """
    interval = 1.0 / rate
    intended = [0.0] * n
    t0 = time.perf_counter() + 0.02
    i = 0
    sleep = time.sleep
    now_f = time.perf_counter
    while i < n:
        now = now_f()
        due = min(n, int((now - t0) / interval) + 1) if now >= t0 else 0
        if due <= i:
            # Always sleep (never spin): a spinning loop holds the GIL and would delay the
            # completion callbacks, which every client runs on another thread.
            sleep(max(0.0, t0 + i * interval - now))
            continue
        while i < due:
            intended[i] = t0 + i * interval
            send_one(i)
            i += 1
    return intended, t0


def wait_for_callbacks(done: list[float], timeout: float = 5.0) -> int:
    """Waits (up to ``timeout``) until every completion callback has run; returns how many did not."""
    deadline = time.monotonic() + timeout
    while True:
        missing = done.count(0.0)
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.05)


def latency_stats(intended: list[float], done: list[float], t0: float, warmup: float = LATENCY_WARMUP_S) -> dict[str, float]:
    cut = t0 + warmup
    lat = [d - s for s, d in zip(intended, done) if s >= cut and d > 0.0]
    return percentiles(lat)


# -- measurement loops every client runs the same way (only the client calls differ) --------


@contextlib.contextmanager
def warm_producer(client: Any, producer_kwargs: dict[str, Any], spec: dict[str, Any]) -> Iterator[Any]:
    """A producer of (blocking) ``client`` whose connection, lookup and first batch are done before
    any window starts; closed, and ``client`` with it, after."""
    producer = client.create_producer(spec["topic"], **producer_kwargs)
    producer.send(b"warm-up")
    yield producer
    producer.close()
    client.close()


async def send_from_tasks(client: Any, producer_kwargs: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """``await producer.send(p)`` for every payload from ``spec["concurrency"]`` tasks, then
    ``await producer.flush()``, inside a window; the producer is created (and warmed up) on the
    asyncio ``client`` first, and both are closed after."""
    payloads = make_payloads(spec["n"], spec["size"])
    w = Window(spec["broker_pid"])
    producer = await client.create_producer(spec["topic"], **producer_kwargs)
    await producer.send(b"warm-up")
    k = spec["concurrency"]
    slices = [payloads[j::k] for j in range(k)]
    send = producer.send

    # The asyncio paths can be 10-100x slower than the others: a time cap keeps a run bounded
    # (the rates stay valid; the count check then uses what was sent).
    deadline = time.monotonic() + (spec.get("async_max_seconds") or 1e9)
    mono = time.monotonic

    async def worker(chunk: list[bytes]) -> int:
        done = 0
        for p in chunk:
            await send(p)
            done += 1
            if mono() > deadline:
                break
        return done

    w.start()
    counts = await asyncio.gather(*(worker(s) for s in slices), return_exceptions=True)
    await producer.flush()
    res = w.stop()
    await producer.close()
    await client.close()
    sent = sum(c for c in counts if isinstance(c, int))
    failed = sum(1 for c in counts if not isinstance(c, int))
    return {**res, "sent": sent, "errors": failed, "extra_messages": 1, "capped": sent < len(payloads)}


def consume_blocking(client: Any, consumer_kwargs: dict[str, Any], spec: dict[str, Any],
                     loops: dict[str, Any]) -> dict[str, Any]:
    """Subscribes on (blocking) ``client``, then runs ``loops[spec["api"]](consumer, spec)`` inside
    a window: the client's own receive-and-ack loop for that API, which returns (messages,
    payload bytes). The consumer and ``client`` are closed after."""
    loop = loops.get(spec["api"])
    if loop is None:
        raise SystemExit(f"unknown consume api {spec['api']!r}")
    consumer = client.subscribe(spec["topic"], spec["subscription"], **consumer_kwargs)
    w = Window(spec["broker_pid"])
    w.start()
    got, nbytes = loop(consumer, spec)
    res = w.stop()
    consumer.close()
    client.close()
    return {**res, "received": got, "bytes": nbytes}


async def consume_async(client: Any, consumer_kwargs: dict[str, Any], spec: dict[str, Any], loop: Any) -> dict[str, Any]:
    """Subscribes on the asyncio ``client``, then runs ``await loop(consumer, n, deadline)`` inside
    a window: the client's own receive-and-ack loop, which returns (messages, payload bytes) and
    stops at ``n`` messages or, checking now and then, after ``deadline`` (as in
    :func:`send_from_tasks`)."""
    n = spec["n"]
    w = Window(spec["broker_pid"])
    consumer = await client.subscribe(spec["topic"], spec["subscription"], **consumer_kwargs)
    deadline = time.monotonic() + (spec.get("async_max_seconds") or 1e9)
    w.start()
    got, nbytes = await loop(consumer, n, deadline)
    res = w.stop()
    await consumer.close()
    await client.close()
    return {**res, "received": got, "bytes": nbytes, "capped": got < n}


def time_each_send(warm_producer: ContextManager[Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Blocking ``send(p)`` on the producer ``warm_producer`` opens, one after another, each timed,
    until done or ``spec["max_seconds"]``."""
    payloads = make_payloads(spec["n"], spec["size"])
    n, cap = len(payloads), spec.get("max_seconds") or 1e9
    lat: list[float] = []
    now, append = time.perf_counter, lat.append
    w = Window(spec["broker_pid"])
    with warm_producer as producer:
        send = producer.send
        w.start()
        deadline = now() + cap
        for i, p in enumerate(payloads):
            t = now()
            send(p)
            append(now() - t)
            if i % 100 == 99 and now() > deadline:
                break
        res = w.stop()
    return {**res, "sent": len(lat), "errors": 0, "extra_messages": 1, "capped": len(lat) < n,
            "latency_ms": percentiles(lat)}


class FixedRate:
    """One open-loop latency run: ``spec["rate"] * spec["duration"]`` payloads, sent at
    ``spec["rate"]`` (:func:`fixed_rate_schedule`), whose completion callbacks report to
    :meth:`completed`."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        n = int(spec["rate"] * spec["duration"])
        self.payloads = make_payloads(n, spec["size"])
        self.done = [0.0] * n  # receipt times, 0.0 until the callback ran
        self.errors = 0

    def completed(self, i: int, ok: bool) -> None:
        """What message ``i``'s completion callback calls, first thing."""
        self.done[i] = time.perf_counter()
        if not ok:
            self.errors += 1

    def measure(self, send_one: Any, flush: Any) -> dict[str, Any]:
        """Calls ``send_one(i)`` for every message at its due time, then ``flush()``, inside a window."""
        n = len(self.done)
        w = Window(self.spec["broker_pid"])
        w.start()
        intended, t0 = fixed_rate_schedule(n, self.spec["rate"], send_one)
        flush()
        res = w.stop()
        missing = wait_for_callbacks(self.done)
        errors = self.errors + missing
        return {**res, "sent": n - errors, "errors": errors, "extra_messages": 1,
                "latency_ms": latency_stats(intended, self.done, t0)}


def measure_idle(receive: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """CPU of a connected, idle client over ``spec["duration"]`` seconds, with an application
    thread parked in ``receive()`` as an idle consumer would have."""
    threading.Thread(target=_swallow_errors, args=(receive,), daemon=True).start()
    time.sleep(1.0)
    w = Window(spec["broker_pid"])
    w.start()
    time.sleep(spec["duration"])
    res = w.stop()
    return {**res, "cpu_percent_of_core": 100.0 * res["cpu_s"] / res["wall_s"]}


def _swallow_errors(fn: Any) -> None:
    # The parked receive() ends with an error when the client closes; that is expected.
    try:
        fn()
    except Exception:
        pass
