"""Start time and peak memory of a magnetar.testing.Cluster, over several starts.

    python scripts/cluster_startup.py --runs 3 [--brokers 2] [--load-manager modular]

Each run starts a cluster, sends and receives 10,000 messages through its multi-host URL
(if magnetar's engine is installed) and stops it. Memory is the resident set of every process
this script started (ZooKeeper, the bookie, the brokers and the one-off
``initialize-cluster-metadata`` JVM), summed, sampled every 0.2 s; the peak is the largest sum.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

from magnetar.testing import Cluster


def _descendants_rss_kib(root: int) -> int:
    """The summed VmRSS of every live descendant of ``root``."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid, ppid = int(entry.name), int(fields.get("PPid", "0"))
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, todo = 0, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


class _PeakSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kib = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.2):
            self.peak_kib = max(self.peak_kib, _descendants_rss_kib(os.getpid()))

    def stop(self) -> None:
        self._done.set()
        self.join()


def _round_trip(service_url: str, n: int) -> float | None:
    try:
        import magnetar
    except ImportError:
        return None
    t0 = time.monotonic()
    with magnetar.Client(service_url) as client:
        consumer = client.subscribe("persistent://public/default/startup-measure", "s", initial_position="earliest")
        client.create_producer("persistent://public/default/startup-measure").send_many([b"x" * 100] * n)
        got = 0
        while got < n:
            got += len(consumer.receive_many(n - got, timeout=10))
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=2)
    parser.add_argument("--load-manager", default="modular", choices=("modular", "extensible"))
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    for run in range(1, args.runs + 1):
        sampler = _PeakSampler()
        sampler.start()
        cluster = Cluster(brokers=args.brokers, load_manager=args.load_manager)
        try:
            cluster.start()
            ready_kib = cluster.rss_bytes() >> 10
            trip = _round_trip(cluster.service_url, args.messages)
        finally:
            cluster.stop()
            sampler.stop()
        trip_text = f"{trip:.1f} s" if trip is not None else "skipped"
        print(f"run {run}: up in {cluster.startup_seconds:.1f} s; RSS when up {ready_kib / 1024:.0f} MiB, "
              f"peak {sampler.peak_kib / 1024:.0f} MiB; {args.messages} messages round trip {trip_text}",
              flush=True)


if __name__ == "__main__":
    main()
