"""Arrow reads and sends outside Spark beside the per-message paths, in one process:

::

    python -m benches.arrow_bench                      # 200,000 rows of 100 B, 3 rounds
    python -m benches.arrow_bench --n 1000000 --rounds 5 --service-url pulsar://127.0.0.1:6650

Each round fills a fresh topic with ``send_many`` (one untimed pass), then measures, each on
its own subscription from the earliest message, in an order that rotates between rounds:

- ``receive_arrow``: ``consumer.receive_arrow(max_rows=10_000)`` until every row came, and
  ``ack_arrow`` of each batch (the Arrow path a job uses);
- ``receive_arrow (no ack)``: the same without acks, to tell the two apart;
- ``receive_many (no ack)``: the engine's raw batch receive, 1,000 ``Message`` objects a call;
- ``receive+ack``: the per-message path, ``receive()`` and ``ack(msg)`` for every message;

and the sends, each to a fresh topic (batching 1000 messages / 128 KiB / 10 ms):

- ``send_arrow``: ``producer.send_arrow(table)`` of the rows as one 100,000-row-batched table;
- ``send_many``: ``producer.send_many(payloads)`` of the same rows.

CPU is this process's user+sys time (``getrusage``) around the loop, all its threads: the
engine's I/O threads included. The payloads are built before the measured window. The table
gives rows/s and µs CPU per row, medians over the rounds, with the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from benches import common

PAYLOAD = 100
ARROW_ROWS = 10_000


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _measure(n: int, run: Callable[[], int]) -> dict[str, float]:
    c0, t0 = _cpu(), time.perf_counter()
    got = run()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if got != n:
        raise SystemExit(f"expected {n} rows, got {got}")
    return {"rate": n / wall, "cpu_us": cpu / n * 1e6}


def _fill(client: Any, topic: str, payloads: list[bytes]) -> None:
    with client.create_producer(topic, **_producer()) as p:
        for i in range(0, len(payloads), 100_000):
            p.send_many(payloads[i:i + 100_000])


def _producer() -> dict[str, Any]:
    return {"batching": True, "batch_max_messages": common.BATCH_MAX_MESSAGES,
            "batch_max_bytes": common.BATCH_MAX_BYTES, "batch_max_delay": common.BATCH_DELAY_MS / 1000,
            "max_pending": common.MAX_PENDING, "block_if_full": True}


def _subscribe(client: Any, topic: str) -> Any:
    return client.subscribe(topic, f"s-{uuid.uuid4().hex[:8]}", initial_position="earliest",
                            receiver_queue_size=10_000)


def read_arrow(client: Any, topic: str, n: int, ack: bool = True) -> int:
    consumer = _subscribe(client, topic)
    got = 0
    while got < n:
        batch = consumer.receive_arrow(max_rows=ARROW_ROWS, timeout=10.0)
        if not batch.num_rows:
            break
        if ack:
            consumer.ack_arrow(batch)
        got += batch.num_rows
    consumer.close()
    return got


def read_many(client: Any, topic: str, n: int) -> int:
    consumer = _subscribe(client, topic)
    got = 0
    while got < n:
        msgs = consumer.receive_many(max_messages=common.RECEIVE_BATCH, timeout=10.0)
        if not msgs:
            break
        got += len(msgs)
    consumer.close()
    return got


def read_each(client: Any, topic: str, n: int) -> int:
    consumer = _subscribe(client, topic)
    receive, ack = consumer.receive, consumer.ack
    for _ in range(n):
        ack(receive(timeout=10.0))
    consumer.close()
    return n


def send_arrow(client: Any, table: Any) -> int:
    with client.create_producer(f"persistent://public/default/arrow-send-{uuid.uuid4().hex[:10]}",
                                **_producer()) as p:
        return len(p.send_arrow(table))


def send_many(client: Any, payloads: list[bytes]) -> int:
    with client.create_producer(f"persistent://public/default/many-send-{uuid.uuid4().hex[:10]}",
                                **_producer()) as p:
        return len(p.send_many(payloads))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.arrow_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000, help="rows per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--service-url", default=None, help="use the broker at this URL instead of starting one")
    args = ap.parse_args(argv)
    print(common.provenance(), flush=True)

    import pyarrow as pa

    import magnetar
    from magnetar.testing.standalone import Standalone

    broker = None
    if args.service_url is None:
        broker = Standalone(port=0)
        broker.start()
    url = args.service_url or broker.service_url
    payloads = common.make_payloads(args.n, PAYLOAD)
    table = pa.table({"value": pa.array(payloads, pa.binary())})
    results: dict[str, list[dict[str, float]]] = {}
    loads = [common.loadavg()]
    try:
        with magnetar.Client(url, operation_timeout=60.0) as client:
            _fill(client, f"persistent://public/default/warm-{uuid.uuid4().hex[:8]}", payloads[:10_000])
            for rnd in range(args.rounds):
                topic = f"persistent://public/default/arrow-bench-{uuid.uuid4().hex[:10]}"
                _fill(client, topic, payloads)
                runs: list[tuple[str, Callable[[], int]]] = [
                    ("receive_arrow + ack_arrow", lambda: read_arrow(client, topic, args.n)),
                    ("receive_arrow (no ack)", lambda: read_arrow(client, topic, args.n, ack=False)),
                    ("receive_many (no ack)", lambda: read_many(client, topic, args.n)),
                    ("receive + ack", lambda: read_each(client, topic, args.n)),
                    ("send_arrow", lambda: send_arrow(client, table)),
                    ("send_many", lambda: send_many(client, payloads)),
                ]
                shift = rnd % len(runs)
                for name, run in runs[shift:] + runs[:shift]:
                    r = _measure(args.n, run)
                    results.setdefault(name, []).append(r)
                    print(f"round {rnd} {name}: {r['rate']:,.0f} rows/s, {r['cpu_us']:.2f} µs CPU/row, "
                          f"load {common.loadavg():.2f}", flush=True)
                loads.append(common.loadavg())
    finally:
        if broker is not None:
            broker.stop()
    print()
    print(f"{args.n:,} rows of {PAYLOAD} B, {args.rounds} rounds (medians), {os.cpu_count()} CPUs, "
          f"load average {min(loads):.2f}-{max(loads):.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print()
    print("| path | rows/s | µs CPU/row |")
    print("|---|---:|---:|")
    for name, rs in results.items():
        rate = statistics.median(r["rate"] for r in rs)
        cpu = statistics.median(r["cpu_us"] for r in rs)
        print(f"| {name} | {rate:,.0f} | {cpu:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
