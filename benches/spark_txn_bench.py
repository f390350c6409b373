"""The throughput cost of the exactly-once sink: rows per second written by
``df.write.format("pulsar")`` and by a streaming copy, plain and with ``exactlyOnce=true``.

::

    python -m benches.spark_txn_bench                   # 500,000 x 100 B rows, 3 rounds
    python -m benches.spark_txn_bench --rows 100000 --rounds 1

Starts a local broker (``magnetar.testing.Standalone``, transaction coordinator on) and a
Spark ``local[2]`` session. Each round runs plain and exactly-once back to back (plain first
in odd rounds, exactly-once first in even ones), so that a change in the machine's load hits
both alike: a batch write of ``--rows`` keyed 100 B rows (a cached
DataFrame, as in ``benches.spark_bench``) into a fresh topic of ``--partitions`` partitions,
timed until ``save()`` returns (with exactlyOnce that includes the driver's commit of every
task's transaction); and a streaming copy (``readStream`` of a filled topic, ``availableNow``,
``maxMessagesPerTrigger`` so that there are several micro-batches, each committed by the
driver) into another topic. Every written topic is read back and its count checked. Prints one
line per run and a markdown table of the medians with the exactly-once/plain ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from .spark_bench import _fill, local_spark, source_frame

MODES = {"plain": {}, "exactlyOnce": {"exactlyOnce": "true"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions (and Spark tasks)")
    parser.add_argument("--batches", type=int, default=5, help="micro-batches of the streaming copy")
    args = parser.parse_args(argv)
    from benches.common import provenance

    print(provenance(), flush=True)

    import magnetar.spark as ms
    from magnetar.testing import Standalone

    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(Standalone(port=0))
        url = broker.service_url
        print(f"broker ready at {url} in {broker.startup_seconds:.1f} s", flush=True)
        spark = local_spark("magnetar-spark-txn-bench", args.partitions)
        stack.callback(ms.close_all)
        stack.callback(spark.stop)

        df = source_frame(spark, args.rows, args.partitions, "key, value")
        for mode, options in MODES.items():  # warm-up: Python workers, producers, the coordinator
            warm = min(20_000, args.rows)
            batch_write(spark, broker, url, df.limit(warm), warm, args.partitions, options)
        results: dict[tuple[str, str], list[float]] = {}
        for rnd in range(args.rounds):
            order = list(MODES.items())
            for mode, options in order if rnd % 2 == 0 else order[::-1]:
                figures = {"batch write": batch_write(spark, broker, url, df, args.rows, args.partitions, options),
                           "streaming copy": stream_copy(spark, broker, url, args.rows, args.partitions,
                                                         args.batches, options)}
                for what, rate in figures.items():
                    results.setdefault((what, mode), []).append(rate)
                print(f"round {rnd + 1} {mode}: " + ", ".join(f"{k} {v:,.0f} rows/s" for k, v in figures.items()),
                      flush=True)
        print()
        print(f"| {args.rows:,} rows x 100 B with keys, {args.partitions} partitions | plain | exactlyOnce | "
              "exactlyOnce / plain |")
        print("|---|---:|---:|---:|")
        for what in ("batch write", "streaming copy"):
            plain, eo = (statistics.median(results[(what, m)]) for m in MODES)
            label = what if what == "batch write" else f"{what} ({args.batches} micro-batches)"
            print(f"| {label} | {plain / 1000:,.0f} k rows/s | {eo / 1000:,.0f} k rows/s | {eo / plain:.2f} |")
    return 0


def _count(url: str, topic: str, partitions: int) -> int:
    import magnetar

    got = 0
    with magnetar.Client(url) as client:
        for p in range(partitions):
            reader = client.create_reader(f"{topic}-partition-{p}", receiver_queue_size=1000)
            while reader.has_message_available():
                got += len(reader.read_many(1000, timeout=1.0))
    return got


def _new_topic(admin: Any, partitions: int) -> str:
    topic = f"persistent://public/default/spark-txn-bench-{uuid.uuid4().hex[:10]}"
    admin.create_partitioned_topic(topic, partitions)
    return topic


def batch_write(spark: Any, admin: Any, url: str, df: Any, rows: int, partitions: int,
                options: dict[str, str]) -> float:
    topic = _new_topic(admin, partitions)
    w = df.write.format("pulsar").mode("append").option("service.url", url).option("topic", topic)
    for k, v in options.items():
        w = w.option(k, v)
    t0 = time.perf_counter()
    w.save()
    seconds = time.perf_counter() - t0
    if (got := _count(url, topic, partitions)) != rows:
        raise SystemExit(f"batch write {options}: wrote {rows}, read back {got}")
    return rows / seconds


def stream_copy(spark: Any, admin: Any, url: str, rows: int, partitions: int, batches: int,
                options: dict[str, str]) -> float:
    source, _ = _fill(admin, url, rows, partitions)
    out = _new_topic(admin, partitions)
    with tempfile.TemporaryDirectory() as ck:
        w = (spark.readStream.format("pulsar").option("service.url", url).option("topic", source)
             .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", str(-(-rows // batches))).load()
             .selectExpr("key", "value").writeStream.format("pulsar").option("service.url", url)
             .option("topic", out).option("checkpointLocation", ck))
        for k, v in options.items():
            w = w.option(k, v)
        t0 = time.perf_counter()
        q = w.trigger(availableNow=True).start()
        q.awaitTermination()
        seconds = time.perf_counter() - t0
        if q.exception() is not None:
            raise SystemExit(f"streaming copy {options}: {q.exception()}")
    if (got := _count(url, out, partitions)) != rows:
        raise SystemExit(f"streaming copy {options}: copied {rows}, read back {got}")
    return rows / seconds


if __name__ == "__main__":
    sys.exit(main())
