"""``magnetar perf produce|consume``: load and measure, as ``pulsar-perf`` does: a line a second
(refreshed in place on a terminal) and a summary at the end, or one JSON object with ``--json``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

import magnetar
from magnetar._options import ConsumerOptions, ProducerOptions

from ._common import add_client_arguments, given_options, open_client, positive_float, positive_int
from .consume import CONSUMER_FLAGS, CONSUMER_SKIPPED

__all__ = ["register", "Meter", "percentile"]

EXAMPLES = """examples:
  magnetar perf produce my-topic --count 100000 --size 1024
  magnetar perf produce my-topic --duration 30 --rate 5000 --compression zstd --json
  magnetar perf consume my-topic -s perf --from earliest --count 100000
"""

REPORT_EVERY = 1.0
MB = 1_000_000


def register(commands: Any) -> None:
    p = commands.add_parser("perf", help="measure throughput and latency",
                            description="Load a topic and measure.", epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    modes = p.add_subparsers(dest="mode", metavar="MODE", required=True)

    produce = modes.add_parser("produce", usage="%(prog)s [options] TOPIC", epilog=EXAMPLES,
                               help="send as fast as possible (or at --rate): rate, MB/s, send latency",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_common(produce)
    produce.add_argument("--size", type=positive_int, default=1024, metavar="BYTES",
                         help="payload size (default: 1024)")
    produce.add_argument("--rate", type=positive_float, metavar="N", help="send at most N messages a second")
    add_client_arguments(produce, (ProducerOptions, "producer"))
    produce.set_defaults(run=run_produce)

    consume = modes.add_parser("consume", usage="%(prog)s [options] TOPIC", epilog=EXAMPLES,
                               help="receive and ack: rate, MB/s, end-to-end latency from publish time",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_common(consume)
    consume.add_argument("-s", "--subscription", default="magnetar-perf", metavar="SUB",
                         help="subscription name (default: magnetar-perf)")
    add_client_arguments(consume, (ConsumerOptions, "consumer"), skip=CONSUMER_SKIPPED, extra_flags=CONSUMER_FLAGS)
    consume.set_defaults(run=run_consume)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-n", "--count", type=positive_int, metavar="N", help="stop after N messages")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help="stop after this long")
    p.add_argument("--json", action="store_true", help="print only a JSON summary at the end")


def percentile(ordered: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of sorted values, nearest rank; None when empty."""
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass
class Meter:
    """Counts and latencies (seconds), added from any thread, read per interval and in total."""

    started: float = field(default_factory=time.monotonic)
    messages: int = 0
    bytes: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    _window: list[float] = field(default_factory=list)
    _window_messages: int = 0
    _window_bytes: int = 0
    _window_started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, size: int, latency: float | None) -> None:
        with self._lock:
            self.messages += 1
            self.bytes += size
            self._window_messages += 1
            self._window_bytes += size
            if latency is not None:
                self.latencies.append(latency)
                self._window.append(latency)

    def fail(self) -> None:
        with self._lock:
            self.failed += 1

    def wait_for(self, settled: int, timeout: float) -> None:
        """Waits until ``settled`` messages are counted: send callbacks run on the client's
        dispatch thread, and may still be running when ``flush`` returns."""
        deadline = time.monotonic() + timeout
        while self.messages + self.failed < settled and time.monotonic() < deadline:
            time.sleep(0.01)

    def window(self) -> dict[str, Any]:
        """The figures since the last call."""
        with self._lock:
            now = time.monotonic()
            seconds = max(now - self._window_started, 1e-9)
            out = _figures(self._window_messages, self._window_bytes, seconds, sorted(self._window))
            self._window, self._window_messages, self._window_bytes, self._window_started = [], 0, 0, now
        return out

    def summary(self) -> dict[str, Any]:
        with self._lock:
            seconds = max(time.monotonic() - self.started, 1e-9)
            out = _figures(self.messages, self.bytes, seconds, sorted(self.latencies))
        out.update(messages=self.messages, bytes=self.bytes, failed=self.failed, seconds=round(seconds, 3))
        return out


def _figures(messages: int, size: int, seconds: float, ordered: list[float]) -> dict[str, Any]:
    def ms(q: float) -> float | None:
        value = percentile(ordered, q)
        return None if value is None else round(value * 1000, 3)

    return {"msg_per_s": round(messages / seconds, 1), "mb_per_s": round(size / seconds / MB, 3),
            "latency_ms": {"p50": ms(0.5), "p95": ms(0.95), "p99": ms(0.99), "max": ms(1.0)}}


def _line(figures: dict[str, Any], latency_name: str) -> str:
    lat = figures["latency_ms"]
    text = f"{figures['msg_per_s']:>11,.1f} msg/s {figures['mb_per_s']:>9.3f} MB/s"
    if lat["p50"] is not None:
        text += f"   {latency_name} ms p50 {lat['p50']:.2f} p99 {lat['p99']:.2f} max {lat['max']:.2f}"
    return text


class Reporter:
    """The line a second: rewritten in place on a terminal, one line per interval otherwise;
    nothing with ``--json``."""

    def __init__(self, meter: Meter, latency_name: str, quiet: bool, stream: IO[str]) -> None:
        self.meter, self.latency_name, self.stream = meter, latency_name, stream
        self.enabled = not quiet
        self.in_place = stream.isatty()
        self.next_report = time.monotonic() + REPORT_EVERY

    def tick(self) -> None:
        if time.monotonic() < self.next_report:
            return
        self.next_report += REPORT_EVERY
        line = _line(self.meter.window(), self.latency_name)
        if self.enabled:
            # \x1b[K clears what a longer previous line left behind.
            self.stream.write(f"\r{line}\x1b[K" if self.in_place else line + "\n")
            self.stream.flush()

    def finish(self, summary: dict[str, Any], as_json: bool, out: IO[str]) -> None:
        if self.enabled and self.in_place:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        if as_json:
            print(json.dumps(summary), file=out)
            return
        extra = f", {summary['failed']} failed" if summary.get("failed") else ""
        print(f"{summary['messages']:,} messages, {summary['bytes'] / MB:,.1f} MB in {summary['seconds']:.2f} s"
              f"{extra}:\n{_line(summary, self.latency_name)}", file=out)
        lat = summary["latency_ms"]
        if lat["p50"] is not None:
            print(f"{self.latency_name} latency ms: p50 {lat['p50']:.2f}  p95 {lat['p95']:.2f}  "
                  f"p99 {lat['p99']:.2f}  max {lat['max']:.2f}", file=out)


def _should_stop(args: argparse.Namespace, meter: Meter, done: int) -> bool:
    if args.count is not None and done >= args.count:
        return True
    return args.duration is not None and time.monotonic() - meter.started >= args.duration


def run_produce(args: argparse.Namespace) -> int:
    payload = os.urandom(args.size)  # random, so compression cannot flatter the figures
    meter = Meter()
    reporter = Reporter(meter, "send", args.json, sys.stderr)

    def settled(sent_at: float) -> Any:
        def record(future: magnetar.SendFuture) -> None:
            if future.exception() is None:
                meter.add(args.size, time.perf_counter() - sent_at)
            else:
                meter.fail()
        return record

    with open_client(args) as client:
        with client.create_producer(args.topic, **given_options(args, ProducerOptions)) as producer:
            meter.started = time.monotonic()
            sent = 0
            try:
                while not _should_stop(args, meter, sent):
                    if args.rate is not None:
                        delay = meter.started + sent / args.rate - time.monotonic()
                        if delay > 0:
                            time.sleep(min(delay, REPORT_EVERY))
                            reporter.tick()
                            continue
                    producer.send_async(payload).add_done_callback(settled(time.perf_counter()))
                    sent += 1
                    if sent % 256 == 0 or args.rate is not None:
                        reporter.tick()
            except KeyboardInterrupt:
                pass  # Ctrl-C ends the run; what was sent still counts
            try:
                producer.flush()
            except magnetar.PulsarError:
                pass  # counted as failures by the callbacks
            meter.wait_for(sent, timeout=10.0)
    summary = meter.summary()
    reporter.finish(summary, args.json, sys.stdout)
    return 1 if summary["failed"] else 0


def run_consume(args: argparse.Namespace) -> int:
    meter = Meter()
    reporter = Reporter(meter, "end-to-end", args.json, sys.stderr)
    options = given_options(args, ConsumerOptions, skip=CONSUMER_SKIPPED)
    with open_client(args) as client:
        with client.subscribe(args.topic, args.subscription, **options) as consumer:
            meter.started = time.monotonic()
            received = 0
            try:
                while not _should_stop(args, meter, received):
                    wanted = 1000 if args.count is None else min(1000, args.count - received)
                    batch = consumer.receive_many(max_messages=wanted, timeout=0.1)
                    now_ms = time.time() * 1000
                    for msg in batch:
                        meter.add(len(msg), max(0.0, now_ms - msg.publish_time) / 1000)
                    consumer.ack_many(batch)
                    received += len(batch)
                    reporter.tick()
            except KeyboardInterrupt:
                pass
    summary = meter.summary()
    reporter.finish(summary, args.json, sys.stdout)
    return 0
