"""Receive cost of the book a durable Exclusive or Failover consumer keeps of its received,
unacknowledged messages (``src/client/partition_consumer/owed.rs``), which Shared consumers do
not keep: ``python -m benches.owed_book [--messages N] [--rounds R] [--batching]``.

One local broker (``magnetar.testing.Standalone``); N messages of 100 bytes are produced once
(unbatched by default: one entry, so one book insert, per message, the book's worst case).
Each run is its own process that subscribes from the earliest message with a fresh
subscription, Exclusive or Shared alternately (the order flips each round), and receives and
acknowledges all N with ``receive_many`` / ``ack_many``. It reports wall-clock messages per
second and the process's CPU time (user + system, every thread) per message, from the first
message to the last ack. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid

_RUN = r"""
import json, sys, time
import magnetar
url, topic, kind, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = magnetar.Client(url)
consumer = client.subscribe(topic, "s-" + kind + "-" + sys.argv[5], subscription_type=kind,
                            initial_position="earliest")
first = consumer.receive(timeout=60)
t0, c0 = time.perf_counter(), time.process_time()
consumer.ack(first)
got = 1
while got < n:
    msgs = consumer.receive_many(max_messages=1000, timeout=10)
    if not msgs:
        raise SystemExit(f"only {got} of {n} messages came")
    consumer.ack_many(msgs)
    got += len(msgs)
t1, c1 = time.perf_counter(), time.process_time()
client.close()
print(json.dumps({"msgs_per_s": (n - 1) / (t1 - t0), "cpu_us": (c1 - c0) / (n - 1) * 1e6}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batching", action="store_true", help="produce in batches (one book entry per batch)")
    args = ap.parse_args()
    from benches.common import provenance

    print(provenance(), flush=True)
    import magnetar
    from magnetar.testing import Standalone

    rows: dict[str, list[dict[str, float]]] = {"exclusive": [], "shared": []}
    loads: list[float] = []
    with Standalone(port=0) as broker:
        topic = f"persistent://public/default/owed-book-{uuid.uuid4().hex[:8]}"
        with magnetar.Client(broker.service_url) as client:
            producer = client.create_producer(topic, batching=args.batching)
            payload = b"x" * 100
            for _ in range(args.messages):
                producer.send_async(payload)
            producer.flush()
        for r in range(args.rounds):
            for kind in ["exclusive", "shared"] if r % 2 == 0 else ["shared", "exclusive"]:
                loads.append(os.getloadavg()[0])
                out = subprocess.run([sys.executable, "-c", _RUN, broker.service_url, topic, kind,
                                      str(args.messages), str(r)], capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    raise SystemExit(f"{kind} run failed:\n{out.stderr[-3000:]}")
                rows[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"round {r + 1} {kind}: {rows[kind][-1]}", flush=True)
    print(f"\n{args.messages} messages of 100 B ({'batched' if args.batching else 'unbatched'}), {args.rounds} "
          f"rounds, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{min(loads):.1f}-{max(loads):.1f}\n")
    print("| subscription | msgs/s (median, min-max) | CPU µs/msg (median, min-max) |\n| --- | --- | --- |")
    for kind, runs in rows.items():
        rate = [x["msgs_per_s"] for x in runs]
        cpu = [x["cpu_us"] for x in runs]
        print(f"| {kind} | {statistics.median(rate):,.0f} ({min(rate):,.0f}-{max(rate):,.0f}) "
              f"| {statistics.median(cpu):.2f} ({min(cpu):.2f}-{max(cpu):.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
