"""`receive` + `ack` CPU per message, magnetar beside the official client (issue 31).

    python -m benches.receive_path                  # 100,000 x 100 B, 3 rounds (~2 min)
    python -m benches.receive_path --attach DATA_DIR --rounds 5

Each run is one process that produces its own topic full (batches of 1000, outside the measured
window), then takes every message with a blocking ``receive`` and acks it, one by one, reading
its payload; receiver queue 1000. The window is the receive loop: user+sys CPU of the process
(all threads) per message. Runs alternate between the clients; the median of each client's runs
and the median of the per-round ratios are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

SIZE = 100


def _payloads(n: int) -> list[bytes]:
    return [i.to_bytes(8, "big") + b"x" * (SIZE - 8) for i in range(n)]


def run_magnetar(url: str, n: int) -> float:
    import magnetar

    from benches.common import self_cpu

    with magnetar.Client(url) as client:
        topic = f"persistent://public/default/recv-m-{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(topic, "s", initial_position="earliest", receiver_queue_size=1000)
        producer = client.create_producer(topic, batch_max_messages=1000, batch_max_bytes=128 * 1024)
        producer.send_many(_payloads(n))
        producer.flush()
        receive, ack = consumer.receive, consumer.ack
        u0, s0 = self_cpu()
        for _ in range(n):
            m = receive(timeout=30)
            len(m.data)
            ack(m)
        u1, s1 = self_cpu()
    return 1e6 * (u1 - u0 + s1 - s0) / n


def run_official(url: str, n: int) -> float:
    import pulsar

    from benches.common import self_cpu

    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    topic = f"persistent://public/default/recv-o-{uuid.uuid4().hex[:8]}"
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest,
                                receiver_queue_size=1000)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_allowed_size_in_bytes=128 * 1024, max_pending_messages=10_000,
                                      block_if_queue_full=True)
    for p in _payloads(n):
        producer.send_async(p, None)
    producer.flush()
    receive, ack = consumer.receive, consumer.acknowledge
    u0, s0 = self_cpu()
    for _ in range(n):
        m = receive(30_000)
        len(m.data())
        ack(m)
    u1, s1 = self_cpu()
    client.close()
    return 1e6 * (u1 - u0 + s1 - s0) / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=3, metavar=("CLIENT", "URL", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--attach", help="use a broker started with `python -m magnetar.testing.standalone --data-dir DIR start`")
    args = ap.parse_args(argv)
    if args.child:
        client, url, n = args.child
        us = (run_magnetar if client == "magnetar" else run_official)(url, int(n))
        print(json.dumps({"us": us}))
        return 0

    from benches.common import provenance

    print(provenance(), flush=True)
    from magnetar.testing.standalone import Standalone

    broker = Standalone.attach(args.attach) if args.attach else Standalone(port=0)
    if broker is None:
        raise SystemExit(f"no broker running in {args.attach}")
    if not args.attach:
        broker.start()
    runs: dict[str, list[float]] = {"magnetar": [], "official": []}
    try:
        for r in range(args.rounds):
            order = ["magnetar", "official"] if r % 2 == 0 else ["official", "magnetar"]
            for name in order:
                load = Path("/proc/loadavg").read_text().split()[0]
                p = subprocess.run([sys.executable, "-m", "benches.receive_path", "--child", name, broker.service_url,
                                    str(args.messages)], capture_output=True, text=True, timeout=600,
                                   cwd=Path(__file__).resolve().parent.parent)
                if p.returncode != 0:
                    print(f"{name} failed: {p.stderr[-1000:]}", flush=True)
                    return 1
                us = json.loads(p.stdout.strip().splitlines()[-1])["us"]
                runs[name].append(us)
                print(f"round {r + 1} {name}: {us:.2f} CPU us/msg (load {load})", flush=True)
    finally:
        if not args.attach:
            broker.stop()
    ratios = [m / o for m, o in zip(runs["magnetar"], runs["official"])]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: magnetar {statistics.median(runs['magnetar']):.2f}, "
          f"official {statistics.median(runs['official']):.2f} CPU us/msg; ratio median "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
