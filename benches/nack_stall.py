"""A Shared consumer of batched input that negatively acknowledges one message in a thousand:
does it keep the rate of one that acknowledges everything? ``python -m benches.nack_stall
[--messages N] [--nack-every K] [--nack-delay S] [--rounds R]``.

One local broker (``magnetar.testing.Standalone``, the packaged configuration: it has
``acknowledgmentAtBatchIndexLevelEnabled=true`` and the default
``maxUnackedMessagesPerConsumer=50000``). N messages of 100 bytes are produced once, in
batches of up to 1000. Each run subscribes from the earliest message with a fresh Shared
subscription and receives with ``receive_many``, acknowledging everything (``plain``) or
negatively acknowledging every K-th message and acknowledging the rest (``nack``, with
``batch_index_ack`` off and on). A run ends when every message has been received once (the
negatively acknowledged ones coming back after the nack delay are not waited for); it reports
the time from the first message to the last first delivery, and messages per second. A first,
unmeasured plain run warms the broker's cache; the order of the cases flips every round.

Without batch-index acknowledgement a batch with a nacked message stays unacknowledged whole
until the nacked message comes back and is acknowledged: the broker counts all of its messages
as unacknowledged by the consumer and stops dispatching to it at
``maxUnackedMessagesPerConsumer``, so the run stalls for the nack delay. Results:
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from typing import Any


def run(url: str, topic: str, n: int, nack_every: int, nack_delay: float, batch_index_ack: bool) -> dict[str, Any]:
    import magnetar

    sub = f"s-{uuid.uuid4().hex[:8]}"
    with magnetar.Client(url) as client:
        consumer = client.subscribe(topic, sub, subscription_type="shared", initial_position="earliest",
                                    nack_redelivery_delay=nack_delay, batch_index_ack=batch_index_ack)
        seen: set[tuple[int, int, int]] = set()
        nacked = 0
        t0 = None
        deadline = time.monotonic() + nack_delay * 3 + 120
        while len(seen) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(seen)} of {n} messages came")
            msgs = consumer.receive_many(max_messages=1000, timeout=1.0)
            if t0 is None and msgs:
                t0 = time.perf_counter()
            acks = []
            for m in msgs:
                mid = m.message_id
                key = (mid.ledger_id, mid.entry_id, mid.batch_index)
                if m.redelivery_count == 0 and key not in seen:
                    seen.add(key)
                    if nack_every and len(seen) % nack_every == 0:
                        consumer.nack(m)
                        nacked += 1
                        continue
                acks.append(m)
            consumer.ack_many(acks)
        elapsed = time.perf_counter() - (t0 or time.perf_counter())
        consumer.unsubscribe()
    return {"seconds": elapsed, "msgs_per_s": n / elapsed if elapsed else float("inf"), "nacked": nacked}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--nack-every", type=int, default=1000)
    ap.add_argument("--nack-delay", type=float, default=60.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--skip-stall", action="store_true", help="leave out the nack run without batch-index acks")
    args = ap.parse_args()
    from benches.common import provenance

    print(provenance(), flush=True)
    import magnetar
    from magnetar.testing import Standalone

    cases = [("plain", 0, False), ("nack, batch_index_ack=True", args.nack_every, True)]
    if not args.skip_stall:
        cases.append(("nack, batch_index_ack=False", args.nack_every, False))
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in cases}
    loads = []
    with Standalone(port=0) as broker:
        topic = f"persistent://public/default/nack-stall-{uuid.uuid4().hex[:8]}"
        with magnetar.Client(broker.service_url) as client:
            with client.create_producer(topic, batch_max_messages=1000) as producer:
                producer.send_many([os.urandom(100) for _ in range(args.messages)])
        # Unmeasured: the first read of the topic comes from the bookie, later ones from the
        # broker's cache.
        run(broker.service_url, topic, args.messages, 0, args.nack_delay, False)
        for r in range(args.rounds):
            for name, every, bia in (cases if r % 2 == 0 else cases[::-1]):
                loads.append(os.getloadavg()[0])
                r = run(broker.service_url, topic, args.messages, every, args.nack_delay, bia)
                rows[name].append(r)
                print(json.dumps({"case": name, **r}), flush=True)
    print(f"\n{args.messages} messages, batches of up to 1000, nack 1 in {args.nack_every}, "
          f"nack_redelivery_delay={args.nack_delay} s, {args.rounds} round(s), "
          f"load average {min(loads):.2f}-{max(loads):.2f}")
    print(f"{'case':32} {'seconds (median)':>18} {'msgs/s (median)':>16}")
    for name, rs in rows.items():
        s = statistics.median(r["seconds"] for r in rs)
        print(f"{name:32} {s:18.2f} {args.messages / s:16,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
