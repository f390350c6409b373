"""Rows per second through the ``pulsar`` data source on Spark (batch write and read, streaming
read, write and copy), next to the raw client's ``send_many``/``receive_many`` rates in the same run.

::

    python -m benches.spark_bench                    # 1,000,000 x 100 B rows, 2 rounds
    python -m benches.spark_bench --rows 200000 --rounds 1

Starts a local broker (``magnetar.testing.Standalone``) and a Spark ``local[2]`` session, then for
each row shape (value only; key + value; key + value + properties + event time) and round:
writes ``--rows`` rows of 100 B into a fresh 2-partition topic with
``df.write.format("pulsar")``, reads them back with ``spark.read.format("pulsar")`` twice
(``count()``, and ``toArrow()`` of the ``value`` column into the driver) and checks the counts.
The source DataFrame is built and cached before the timed write, so the write figure is the
data source's. Then, per round, ``trigger(availableNow=True)`` streams of key + value rows: a
streaming read of a topic into the ``noop`` sink, a streaming write of the same rows from Parquet
files (Spark's file source) with ``writeStream.format("pulsar")``, and a streaming copy from topic
to topic; each with its wall-clock rate and its micro-batches' rate (Spark's
``processedRowsPerSecond``: without the per-query start). The raw client
figures send and read the same rows (100 B values with keys) with one ``Client`` in this process:
``send_many`` of 10,000 rows at a time, ``receive_many`` through a reader per partition, and the
engine's Arrow paths that the data source uses, without Spark (``send_arrow`` of 10,000-row record
batches, ``receive_arrow`` into record batches of the read schema). Prints one line per run and
markdown tables of the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid
from typing import Any

SHAPES = {
    "value only": "value",
    "key + value": "key, value",
    "key + value + properties + event_time": "key, value, properties, event_time",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions (and Spark tasks)")
    parser.add_argument("--service-url", help="use this broker (and --admin-url) instead of starting one")
    parser.add_argument("--admin-url")
    args = parser.parse_args(argv)
    from benches.common import provenance

    print(provenance(), flush=True)

    import magnetar.spark as ms
    from magnetar.testing import Admin, Standalone

    with contextlib.ExitStack() as stack:
        if args.service_url:
            service_url, admin = args.service_url, Admin(args.admin_url or "http://127.0.0.1:8080")
        else:
            broker = stack.enter_context(Standalone(port=0))
            service_url, admin = broker.service_url, broker
            print(f"broker ready at {service_url} in {broker.startup_seconds:.1f} s", flush=True)
        spark = local_spark("magnetar-spark-bench", args.partitions)
        stack.callback(ms.close_all)
        stack.callback(spark.stop)

        results: dict[str, dict[str, list[float]]] = {s: {"write": [], "count": [], "toArrow": []} for s in SHAPES}
        other: dict[str, list[float]] = {}
        warm_up(spark, admin, service_url, args.partitions)
        for rnd in range(args.rounds):
            for shape, columns in SHAPES.items():
                figures = run_once(spark, admin, service_url, args.rows, args.partitions, columns)
                for what, rate in figures.items():
                    results[shape][what].append(rate)
                print(f"round {rnd + 1} {shape}: " + ", ".join(f"{k} {v:,.0f} rows/s" for k, v in figures.items()),
                      flush=True)
            figures = {**raw_client(admin, service_url, args.rows, args.partitions),
                       **streaming(spark, admin, service_url, args.rows, args.partitions)}
            for what, rate in figures.items():
                other.setdefault(what, []).append(rate)
            print(f"round {rnd + 1} key + value: " + ", ".join(f"{k} {v:,.0f} rows/s" for k, v in figures.items()),
                  flush=True)
        print()
        print(f"| {args.rows:,} rows x 100 B, {args.partitions} partitions | batch write | batch read (`count()`) "
              "| batch read of `value` into the driver (`toArrow()`) |")
        print("|---|---:|---:|---:|")
        for shape, per in results.items():
            cells = " | ".join(f"{statistics.median(per[w]) / 1000:,.0f} k rows/s" for w in ("write", "count", "toArrow"))
            print(f"| {shape} | {cells} |")
        print()
        def k(what: str) -> str:
            return f"{statistics.median(other[what]) / 1000:,.0f} k"

        streams = ("stream read", "stream write", "stream copy")
        print(f"| {args.rows:,} rows x 100 B with keys, rows/s | " + " | ".join(streams) + " |")
        print("|---|" + "---:|" * len(streams))
        print("| wall clock, `start()` to end | " + " | ".join(k(w) for w in streams) + " |")
        print("| micro-batches (`triggerExecution`) | " + " | ".join(k(f"{w} (micro-batches)") for w in streams) + " |")
        print()
        raw = [w for w in other if not w.startswith("stream")]
        print("| same run, raw client, rows/s | " + " | ".join(raw) + " |")
        print("|---|" + "---:|" * len(raw))
        print("| rows/s | " + " | ".join(k(w) for w in raw) + " |")
    return 0


def local_spark(app: str, partitions: int) -> Any:
    """The benches' Spark session: local[2], quiet, the ``pulsar`` data source registered, its
    Python workers this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from magnetar.spark import PulsarDataSource

    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(partitions))
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(PulsarDataSource)
    return spark


def _fill(admin: Any, service_url: str, rows: int, partitions: int) -> tuple[str, float]:
    """A new topic with ``rows`` keyed 100 B messages sent by the raw client; the send rate."""
    import magnetar

    topic = f"persistent://public/default/spark-bench-{uuid.uuid4().hex[:10]}"
    admin.create_partitioned_topic(topic, partitions)
    values = [b"%010d" % i + b"x" * 90 for i in range(10_000)]
    keys = [f"k{i % 1000}" for i in range(10_000)]
    with magnetar.Client(service_url) as client:
        producer = client.create_producer(topic)
        t0 = time.perf_counter()
        for start in range(0, rows, 10_000):
            n = min(10_000, rows - start)
            producer.send_many(values[:n], keys=keys[:n])
        rate = rows / (time.perf_counter() - t0)
    return topic, rate


def raw_client(admin: Any, service_url: str, rows: int, partitions: int) -> dict[str, float]:
    """The client alone: ``send_many`` into a topic, then ``receive_many`` of it back; and the
    engine's Arrow paths the data source uses, without Spark: ``receive_arrow`` of the same
    topic into record batches of the read schema, ``send_arrow`` of 10,000-row record batches
    into another topic."""
    import pyarrow as pa

    import magnetar
    from magnetar import _core
    from magnetar.spark._source import READ_SCHEMA, _arrow_schema

    topic, send_rate = _fill(admin, service_url, rows, partitions)
    with magnetar.Client(service_url) as client:
        readers = [client.create_reader(f"{topic}-partition-{p}", receiver_queue_size=1000) for p in range(partitions)]
        got = 0
        t0 = time.perf_counter()
        for reader in readers:
            while reader.has_message_available():
                got += len(reader.read_many(1000, timeout=1.0))
        recv_rate = got / (time.perf_counter() - t0)
        if got != rows:
            raise SystemExit(f"raw client: sent {rows}, read {got}")

        schema = _arrow_schema(READ_SCHEMA)
        readers = [client.create_reader(f"{topic}-partition-{p}", receiver_queue_size=10_000) for p in range(partitions)]
        got = 0
        t0 = time.perf_counter()
        for p, reader in enumerate(readers):
            layout = _core._ArrowLayout(schema, topic, p)
            while reader.has_message_available():
                got += pa.record_batch(reader._core.receive_arrow(layout, 10_000, 1.0)).num_rows
        arrow_recv_rate = got / (time.perf_counter() - t0)
        if got != rows:
            raise SystemExit(f"receive_arrow: sent {rows}, read {got}")

        out = f"persistent://public/default/spark-bench-{uuid.uuid4().hex[:10]}"
        admin.create_partitioned_topic(out, partitions)
        batch = pa.record_batch({"key": [f"k{i % 1000}" for i in range(10_000)],
                                 "value": [b"%010d" % i + b"x" * 90 for i in range(10_000)]})
        producer = client.create_producer(out)
        t0 = time.perf_counter()
        pending = [producer._core.send_arrow(batch[: min(10_000, rows - start)], key="key")
                   for start in range(0, rows, 10_000)]
        sent = sum(r.wait() for r in pending)
        arrow_send_rate = sent / (time.perf_counter() - t0)
        producer.close()
    return {"send_many": send_rate, "receive_many": recv_rate, "send_arrow": arrow_send_rate,
            "receive_arrow": arrow_recv_rate}


def streaming(spark: Any, admin: Any, service_url: str, rows: int, partitions: int) -> dict[str, float]:
    """``availableNow`` streams over ``rows`` keyed rows: a read of a filled topic into ``noop``,
    a write of Parquet files into a topic (Spark's file source, so the sink is what is timed),
    and a copy from topic to topic. Each gives two rates: the wall clock from ``start()`` to the
    query's end, and the micro-batches' own (rows over Spark's ``triggerExecution`` durations,
    i.e. its ``processedRowsPerSecond``), which leaves out the per-query start: Spark starts a
    Python process for a Python source on every query start."""
    import tempfile

    topic, _ = _fill(admin, service_url, rows, partitions)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as files:
        frame = source_frame(spark, rows, partitions, "key, value")
        frame.write.mode("overwrite").parquet(files)
        frame.unpersist()
        for what in ("stream read", "stream write", "stream copy"):
            out = f"persistent://public/default/spark-bench-{uuid.uuid4().hex[:10]}"
            admin.create_partitioned_topic(out, partitions)
            if what == "stream write":
                df = spark.readStream.schema("key string, value binary").parquet(files)
            else:
                df = (spark.readStream.format("pulsar").option("service.url", service_url).option("topic", topic)
                      .option("startingOffsets", "earliest").load())
            if what == "stream read":
                writer = df.writeStream.format("noop")
            else:
                writer = (df.selectExpr("key", "value").writeStream.format("pulsar")
                          .option("service.url", service_url).option("topic", out))
            with tempfile.TemporaryDirectory() as ck:
                t0 = time.perf_counter()
                q = writer.option("checkpointLocation", ck).trigger(availableNow=True).start()
                q.awaitTermination()
                seconds = time.perf_counter() - t0
            progress = q.recentProgress
            read = sum(p["numInputRows"] for p in progress)
            if read != rows:
                raise SystemExit(f"{what}: read {read} of {rows} rows")
            figures[what] = rows / seconds
            figures[f"{what} (micro-batches)"] = rows / (sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000)
    return figures


def source_frame(spark: Any, rows: int, partitions: int, columns: str) -> Any:
    """``rows`` rows of a 100 B value (and the other columns), cached before anything is timed."""
    from pyspark.sql import functions as F

    df = spark.range(rows, numPartitions=partitions).select(
        F.concat(F.lpad(F.col("id").cast("string"), 10, "0"), F.lit("x" * 90)).cast("binary").alias("value"),
        F.concat(F.lit("k"), (F.col("id") % 1000).cast("string")).alias("key"),
        F.create_map(F.lit("i"), F.col("id").cast("string")).alias("properties"),
        F.timestamp_millis(F.lit(1_700_000_000_000) + F.col("id")).alias("event_time"),
    ).selectExpr(*[c.strip() for c in columns.split(",")])
    df = df.cache()
    assert df.count() == rows
    return df


def run_once(spark: Any, admin: Any, service_url: str, rows: int, partitions: int, columns: str) -> dict[str, float]:
    topic = f"persistent://public/default/spark-bench-{uuid.uuid4().hex[:10]}"
    admin.create_partitioned_topic(topic, partitions)
    df = source_frame(spark, rows, partitions, columns)
    try:
        t0 = time.perf_counter()
        df.write.format("pulsar").mode("append").option("service.url", service_url).option("topic", topic).save()
        write_s = time.perf_counter() - t0

        reader = spark.read.format("pulsar").option("service.url", service_url).option("topic", topic)
        t0 = time.perf_counter()
        counted = reader.load().count()
        count_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        table = reader.load().select("value").toArrow()
        arrow_s = time.perf_counter() - t0
        if counted != rows or table.num_rows != rows:
            raise SystemExit(f"count mismatch: wrote {rows}, count() {counted}, toArrow() {table.num_rows}")
        return {"write": rows / write_s, "count": rows / count_s, "toArrow": rows / arrow_s}
    finally:
        df.unpersist()
        with contextlib.suppress(Exception):
            admin.request("DELETE", f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/partitions?force=true")


def warm_up(spark: Any, admin: Any, service_url: str, partitions: int) -> None:
    """Starts the Python workers and loads the data source once, outside the timed runs."""
    run_once(spark, admin, service_url, 20_000, partitions, "key, value")


if __name__ == "__main__":
    sys.exit(main())
