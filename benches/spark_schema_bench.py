"""Rows per second of a Spark batch read of a topic with an Avro record schema (its fields
decoded into columns by the engine) next to the schema-less read of the same payloads (``value``
as bytes), same row count, same bytes per message.

::

    python -m benches.spark_schema_bench --rows 200000

Starts a local broker (``magnetar.testing.Standalone``) and a Spark ``local[2]`` session, fills
two 2-partition topics with ``--rows`` messages each: one through a producer with
``AvroSchema(Reading)`` (5 fields: long, string, double, timestamp-millis, nullable string), the
other through a producer without schema sending the same Avro-encoded bytes. Then, per round,
reads each with ``spark.read.format("pulsar")`` twice: into the ``noop`` sink (every column
built in the Python workers and handed to the JVM, nothing collected) and ``toArrow()`` of the
payload columns (the five fields, or ``value``) into the driver. Prints one line per run and a
markdown table of the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from benches.spark_bench import local_spark

FIELDS = ["id", "sensor", "value", "at", "note"]


@dataclass
class Reading:
    id: int
    sensor: str
    value: float
    at: dt.datetime
    note: str | None = None


T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def _reading(i: int) -> Reading:
    return Reading(i, f"sensor-{i % 500:04d}", i * 0.25, T0 + dt.timedelta(milliseconds=i),
                   None if i % 3 else f"note {i}")


def fill(admin: Any, service_url: str, rows: int, partitions: int) -> tuple[str, str]:
    """Two new topics of ``rows`` messages: one with the Avro schema, one schema-less with the
    same bytes."""
    import magnetar
    from magnetar import schema

    avro = schema.AvroSchema(Reading)
    topics = (f"persistent://public/default/spark-schema-bench-avro-{uuid.uuid4().hex[:8]}",
              f"persistent://public/default/spark-schema-bench-raw-{uuid.uuid4().hex[:8]}")
    for t in topics:
        admin.create_partitioned_topic(t, partitions)
    with magnetar.Client(service_url) as client:
        typed = client.create_producer(topics[0], schema=avro)
        raw = client.create_producer(topics[1])
        for start in range(0, rows, 10_000):
            batch = [_reading(i) for i in range(start, min(rows, start + 10_000))]
            typed.send_many(batch)
            raw.send_many([avro.encode(r) for r in batch])
    return topics


def read_once(spark: Any, service_url: str, topic: str, columns: list[str], rows: int) -> dict[str, float]:
    reader = spark.read.format("pulsar").option("service.url", service_url).option("topic", topic)
    t0 = time.perf_counter()
    reader.load().select(*columns).write.format("noop").mode("overwrite").save()
    noop_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    table = reader.load().select(*columns).toArrow()
    arrow_s = time.perf_counter() - t0
    if table.num_rows != rows:
        raise SystemExit(f"{topic}: read {table.num_rows} rows, not {rows}")
    return {"noop": rows / noop_s, "toArrow": rows / arrow_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions (and Spark tasks)")
    args = parser.parse_args(argv)
    from benches.common import provenance

    print(provenance(), flush=True)

    import magnetar.spark as ms
    from magnetar.testing import Standalone

    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(Standalone(port=0))
        print(f"broker ready at {broker.service_url} in {broker.startup_seconds:.1f} s", flush=True)
        spark = local_spark("magnetar-spark-schema-bench", args.partitions)
        stack.callback(ms.close_all)
        stack.callback(spark.stop)
        avro_topic, raw_topic = fill(broker, broker.service_url, args.rows, args.partitions)
        cases = {"Avro schema, 5 columns": (avro_topic, FIELDS), "schema-less, `value` bytes": (raw_topic, ["value"])}
        # Python workers started and the data source loaded outside the timed runs
        for topic, columns in cases.values():
            read_once(spark, broker.service_url, topic, columns, args.rows)
        results: dict[str, dict[str, list[float]]] = {c: {"noop": [], "toArrow": []} for c in cases}
        for rnd in range(args.rounds):
            for case, (topic, columns) in cases.items():
                figures = read_once(spark, broker.service_url, topic, columns, args.rows)
                for what, rate in figures.items():
                    results[case][what].append(rate)
                print(f"round {rnd + 1} {case}: " + ", ".join(f"{k} {v:,.0f} rows/s" for k, v in figures.items()),
                      flush=True)
        print()
        print(f"| {args.rows:,} rows, {args.partitions} partitions | batch read into `noop` | "
              "batch read into the driver (`toArrow()`) |")
        print("|---|---:|---:|")
        for case, per in results.items():
            cells = " | ".join(f"{statistics.median(per[w]) / 1000:,.0f} k rows/s" for w in ("noop", "toArrow"))
            print(f"| {case} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
