"""Rows per second through the ``pulsar`` data source on a Spark standalone cluster (a master and
two workers of one core each on this machine, tests/spark_cluster.py, executors in a virtualenv
with the wheel installed by pip) beside ``local[2]``, with the same broker in the same run.

::

    python -m benches.spark_cluster_bench --rows 300000 --rounds 3

Per round and per master: a batch write of ``--rows`` key + value rows of 100 B into a fresh
2-partition topic, a batch read ``count()``, a batch read of ``value`` into the driver
(``toArrow()``), and an ``availableNow`` streaming read of the topic into the ``noop`` sink
(wall clock from ``start()``). The workloads are benches/spark_bench.py's. Prints one line per
run and a markdown table of the medians."""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from benches.spark_bench import _fill, local_spark, run_once, warm_up  # noqa: E402


def stream_read(spark: Any, admin: Any, service_url: str, rows: int, partitions: int) -> float:
    """The wall clock of an ``availableNow`` read into ``noop``. On a loaded machine the driver's
    JVM can give up on the streaming source's Python process (it waits 10 s, fixed, for it to
    connect back): such a query is run again from scratch, and the failure printed."""
    topic, _ = _fill(admin, service_url, rows, partitions)
    for attempt in range(3):
        with tempfile.TemporaryDirectory() as ck:
            t0 = time.perf_counter()
            q = (spark.readStream.format("pulsar").option("service.url", service_url).option("topic", topic)
                 .option("startingOffsets", "earliest").load()
                 .writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start())
            try:
                q.awaitTermination()
            except Exception as e:
                if "failed to connect back" not in str(e) or attempt == 2:
                    raise
                print(f"stream read attempt {attempt + 1}: the Python runner did not connect back in 10 s; again",
                      flush=True)
                continue
            seconds = time.perf_counter() - t0
            break
    read = sum(p["numInputRows"] for p in q.recentProgress)
    if read != rows:
        raise SystemExit(f"stream read: {read} of {rows} rows")
    return rows / seconds


def measure(spark: Any, admin: Any, service_url: str, rows: int, rounds: int, partitions: int,
            label: str) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"write": [], "count": [], "toArrow": [], "stream read": []}
    warm_up(spark, admin, service_url, partitions)
    for rnd in range(rounds):
        figures = run_once(spark, admin, service_url, rows, partitions, "key, value")
        figures["stream read"] = stream_read(spark, admin, service_url, rows, partitions)
        for k, v in figures.items():
            results[k].append(v)
        print(f"{label} round {rnd + 1}: " + ", ".join(f"{k} {v:,.0f} rows/s" for k, v in figures.items()),
              flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--masters", default="cluster,local", help="local, cluster or both (comma-separated)")
    args = parser.parse_args(argv)
    from benches.common import provenance

    print(provenance(), flush=True)

    import magnetar.spark as ms
    from magnetar.testing import Standalone
    from spark_cluster import SparkCluster, cached_executor_venv, cluster_session, wait_executors

    table: dict[str, dict[str, list[float]]] = {}
    with Standalone(port=0) as broker:
        service_url = broker.service_url
        for master in args.masters.split(","):
            with contextlib.ExitStack() as stack:
                if master == "local":
                    spark = local_spark("magnetar-cluster-bench", args.partitions)
                    label = "local[2]"
                else:
                    python = cached_executor_venv()
                    cluster = stack.enter_context(SparkCluster(workers=2, cores_per_worker=1, memory="1g",
                                                               python=python))
                    spark = cluster_session(cluster, "magnetar-cluster-bench", executor_memory="768m")
                    wait_executors(spark, 2)
                    label = "standalone, 2 workers x 1 core"
                stack.callback(ms.close_all)
                stack.callback(spark.stop)
                table[label] = measure(spark, broker, service_url, args.rows, args.rounds, args.partitions, label)
            os.environ.pop("PYSPARK_PYTHON", None)

    print()
    print(f"| {args.rows:,} rows x 100 B, key + value, medians of {args.rounds} | batch write | batch read "
          "(`count()`) | batch read of `value` (`toArrow()`) | stream read (`availableNow`, wall clock) |")
    print("|---|---:|---:|---:|---:|")
    for label, r in table.items():
        print(f"| {label} | " + " | ".join(f"{statistics.median(r[k]) / 1000:,.0f} k rows/s"
                                          for k in ("write", "count", "toArrow", "stream read")) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
