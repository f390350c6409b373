"""Where the CPU goes when the ``pulsar`` data source reads and writes: CPU seconds per million
rows of each process this run starts (the broker, Spark's JVM, Spark's Python workers, this
driver), beside the wall-clock rate. On a shared machine the wall-clock rate says how much CPU the
run was given; the CPU split says what each row costs, and so what bounds the rate.

::

    python -m benches.spark_cpu                    # 1,000,000 x 100 B rows, 2 partitions
    python -m benches.spark_cpu --rows 200000

Only descendants of this process are counted (Linux ``/proc``), so other brokers and Spark
jobs on the machine are left out. Python workers are counted while they live (Spark reuses
them); the JVM and broker are long-lived.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds (user + system, with reaped children) of this process's descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    info: dict[int, tuple[int, str, float]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{d}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        info[int(d)] = (int(st[1]), cmd, sum(int(x) for x in st[11:15]) / tick)
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _, _) in info.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    out: dict[str, float] = {}
    for pid in mine:
        _, cmd, cpu = info[pid]
        if pid == os.getpid():
            kind = "driver"
        elif "java" in cmd and "spark" in cmd.lower():
            kind = "Spark JVM"
        elif "java" in cmd:
            kind = "broker"
        elif "python" in cmd:
            kind = "Python workers"
        else:
            kind = "other"
        out[kind] = out.get(kind, 0.0) + cpu
    return out


def measure(label: str, rows: int, fn: Callable[[], Any]) -> None:
    before = cpu_by_kind()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    after = cpu_by_kind()
    per_m = {k: (after.get(k, 0.0) - before.get(k, 0.0)) * 1_000_000 / rows for k in after}
    total = sum(v for v in per_m.values() if v > 0)
    cells = " | ".join(f"{per_m.get(k, 0.0):.2f}" for k in ("broker", "Spark JVM", "Python workers", "driver"))
    print(f"| {label} | {rows / wall / 1000:,.0f} k | {cells} | {total:.2f} |", flush=True)


def _stream_read(spark: Any, url: str, topic: str, rows: int) -> None:
    """One ``availableNow`` query over the topic. The Python process Spark starts for the
    source's driver side exits with the query, so its CPU is counted in the JVM's (its parent's
    reaped children)."""
    import tempfile

    df = (spark.readStream.format("pulsar").option("service.url", url).option("topic", topic)
          .option("startingOffsets", "earliest").load())
    with tempfile.TemporaryDirectory() as ck:
        q = df.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
    read = sum(p["numInputRows"] for p in q.recentProgress)
    if read != rows:
        raise SystemExit(f"stream read: {read} of {rows} rows")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args(argv)
    from benches.common import provenance

    print(provenance(), flush=True)
    import magnetar.spark as ms
    from magnetar.testing import Standalone

    from .spark_bench import _fill, local_spark, source_frame, warm_up

    with Standalone(port=0) as broker:
        spark = local_spark("magnetar-spark-cpu", args.partitions)
        try:
            warm_up(spark, broker, broker.service_url, args.partitions)
            url, rows = broker.service_url, args.rows
            print(f"| {rows:,} rows x 100 B | rows/s (wall) | broker | Spark JVM | Python workers | driver "
                  "| all |  (CPU s per million rows)")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for columns in ("value", "key, value", "key, value, properties, event_time"):
                df = source_frame(spark, rows, args.partitions, columns)
                out = f"persistent://public/default/spark-cpu-{uuid.uuid4().hex[:10]}"
                broker.create_partitioned_topic(out, args.partitions)
                writer = (df.write.format("pulsar").mode("append").option("service.url", url)
                          .option("topic", out))
                measure(f"write {columns}", rows, writer.save)
                df.unpersist()
            topic, _ = _fill(broker, url, rows, args.partitions)
            reader = spark.read.format("pulsar").option("service.url", url).option("topic", topic)
            reader.load().count()  # the read tasks' workers started, the topic's ledgers warm
            measure("read, count()", rows, lambda: reader.load().count())
            measure("read, toArrow() of value", rows, lambda: reader.load().select("value").toArrow())
            measure("stream read (availableNow into noop)", rows, lambda: _stream_read(spark, url, topic, rows))
        finally:
            ms.close_all()
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
