"""How long a producer and a consumer take to follow a topic moved to the other broker of a
two-broker cluster (magnetar.testing.Cluster): from the unload's start until a message sent
after it has been received, and how many lookups the client made for it.

    python -m benches.cluster_transfer --moves 10 [--load-manager extensible|modular]

With the extensible load manager the closing broker names the new owner; the client goes
straight there. Prints one line per move and the median.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import magnetar
from magnetar.testing import Cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=10)
    parser.add_argument("--load-manager", default="extensible", choices=("extensible", "modular"))
    args = parser.parse_args()
    from benches.common import provenance

    print(provenance(), flush=True)
    with Cluster(brokers=2, load_manager=args.load_manager) as cluster:
        topic = f"persistent://public/default/transfer-{uuid.uuid4().hex[:8]}"
        with magnetar.Client(cluster.service_url, operation_timeout=30.0) as client:
            consumer = client.subscribe(topic, "s", initial_position="earliest")
            producer = client.create_producer(topic, batching=False)
            producer.send(b"warm-up")
            consumer.ack(consumer.receive(timeout=30))
            times, lookups = [], []
            for i in range(args.moves):
                source = cluster.owner(topic)
                before = client.stats()["lookups"]
                t0 = time.monotonic()
                cluster.unload(topic, to=1 - source)
                producer.send(b"%d" % i)
                msg = consumer.receive(timeout=60)
                took = time.monotonic() - t0
                consumer.ack(msg)
                times.append(took)
                lookups.append(client.stats()["lookups"] - before)
                print(f"move {i + 1}: broker {source} -> {1 - source}, {took * 1000:.0f} ms from the unload to "
                      f"the next message received, {lookups[-1]} lookups", flush=True)
    print(f"{args.load_manager}: median {statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}), lookups per move {sorted(set(lookups))}, "
          f"magnetar from {magnetar.__file__}")


if __name__ == "__main__":
    main()
