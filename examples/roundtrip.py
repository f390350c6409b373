"""Round trip through a local real broker: start it, send and receive 100,000 messages
with magnetar, print the throughput, stop the broker.

    python examples/roundtrip.py [--messages N] [--size BYTES]
"""

from __future__ import annotations

import argparse
import os
import time

import magnetar
from magnetar.testing import Standalone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    args = parser.parse_args()
    n, size = args.messages, args.size

    started = time.perf_counter()
    with Standalone(port=0) as broker:
        print(f"broker ready at {broker.service_url} in {time.perf_counter() - started:.1f} s")
        topic = f"roundtrip-{os.getpid()}-{int(time.time())}"
        payloads = [i.to_bytes(8, "big") + b"x" * max(0, size - 8) for i in range(n)]
        with magnetar.Client(broker.service_url) as client:
            consumer = client.subscribe(topic, "roundtrip", initial_position="earliest")
            producer = client.create_producer(topic)

            t0 = time.perf_counter()
            chunk = 10_000
            for i in range(0, n, chunk):
                producer.send_many(payloads[i:i + chunk])
            sent_s = time.perf_counter() - t0
            print(f"sent     {n:>9,} x {size} B in {sent_s:6.2f} s  = {n / sent_s:>12,.0f} msg/s")

            t0 = time.perf_counter()
            received = 0
            seen = bytearray(n)
            while received < n:
                batch = consumer.receive_many(1000, timeout=10.0)
                if not batch:
                    raise SystemExit(f"only {received} of {n} messages arrived")
                for msg in batch:
                    seen[int.from_bytes(msg.data[:8], "big")] = 1
                consumer.ack_cumulative(batch[-1])
                received += len(batch)
            recv_s = time.perf_counter() - t0
            print(f"received {received:>9,} x {size} B in {recv_s:6.2f} s  = {received / recv_s:>12,.0f} msg/s")
            missing = n - sum(seen)
            if missing:
                raise SystemExit(f"{missing} messages missing")
            print(f"all {n:,} messages received exactly as sent")
            producer.close()
            consumer.close()


if __name__ == "__main__":
    main()
