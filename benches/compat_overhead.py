"""CPU per message of magnetar.compat against magnetar's own API, side by side:
``python -m benches.compat_overhead [--messages N] [--rounds R]``.

Each run is its own process on one local broker (``magnetar.testing.Standalone``), alternating
native and compat, round after round. A run produces N 100-byte messages with ``send_async``
(batching on and a blocking pending queue of 1,000 in both: the same engine work), flushes, then receives and acknowledges them one
by one; the process's CPU time (user + system, every thread) is divided by N. What the compat
layer adds per call on top of the engine (a Python frame with its checks; its Message and
MessageId are engine objects) is what this measures. Results: docs/compat.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid

_RUN = r"""
import json, sys, time, os
api, url, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
payload = b"x" * 100
if api == "native":
    import magnetar
    client = magnetar.Client(url)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer = client.create_producer(topic, batching=True)
    t0 = time.process_time()
    for _ in range(n):
        producer.send_async(payload)
    producer.flush()
    t1 = time.process_time()
    for _ in range(n):
        consumer.ack(consumer.receive(30.0))
else:
    import magnetar.compat as pulsar
    client = pulsar.Client(url)
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=True, block_if_queue_full=True)
    t0 = time.process_time()
    for _ in range(n):
        producer.send_async(payload, None)
    producer.flush()
    t1 = time.process_time()
    for _ in range(n):
        consumer.acknowledge(consumer.receive(30000))
t2 = time.process_time()
client.close()
print(json.dumps({"produce_us": (t1 - t0) / n * 1e6, "consume_us": (t2 - t1) / n * 1e6}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from benches.common import provenance

    print(provenance(), flush=True)
    from magnetar.testing import Standalone

    rows: dict[str, list[dict[str, float]]] = {"native": [], "compat": []}
    with Standalone(port=0) as broker:
        for r in range(args.rounds):
            order = ["native", "compat"] if r % 2 == 0 else ["compat", "native"]
            for api in order:
                topic = f"compat-overhead-{uuid.uuid4().hex[:8]}"
                out = subprocess.run([sys.executable, "-c", _RUN, api, broker.service_url, topic,
                                      str(args.messages)], capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    raise SystemExit(f"{api} run failed:\n{out.stderr[-3000:]}")
                rows[api].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"round {r + 1} {api}: {rows[api][-1]}", flush=True)
    print(f"\n{args.messages} messages of 100 B, {args.rounds} rounds, median CPU µs per message "
          f"({time.strftime('%Y-%m-%d', time.gmtime())})\n")
    print("| | native | compat | compat / native |\n| --- | --- | --- | --- |")
    for what, label in (("produce_us", "produce (send_async, flush)"), ("consume_us", "consume (receive, ack)")):
        n = statistics.median(x[what] for x in rows["native"])
        c = statistics.median(x[what] for x in rows["compat"])
        print(f"| {label} | {n:.2f} | {c:.2f} | {c / n:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
