"""A batch pipeline on Spark: read a Pulsar topic, transform, write to another topic.

Starts its own local Pulsar broker (magnetar.testing.Standalone) and a local Spark session,
so it runs as-is::

    pip install pyspark pyarrow "pandas<3"
    python examples/spark_pipeline.py [--events 50000] [--service-url pulsar://host:6650]

Steps:
  1. executors produce raw JSON events with mapInArrow (one magnetar client per worker
     process, built from a picklable magnetar.ClientConfig);
  2. read the raw topic with the `pulsar` data source, parse and filter the events;
  3. write the result to a second topic with the data source (key, value, properties);
  4. read the second topic back and check it.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import magnetar.spark as ms
from magnetar.spark import ClientConfig

from _spark_local import local_broker, local_spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--service-url", help="use this broker instead of starting one")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        service_url, _ = local_broker(stack, args.service_url)
        run(service_url, args.events)


def run(service_url: str, n: int) -> None:
    spark = local_spark("magnetar-pipeline")
    from pyspark.sql import functions as F

    run_id = uuid.uuid4().hex[:8]
    raw, clean = f"raw-events-{run_id}", f"clean-events-{run_id}"
    conf = ClientConfig(service_url)  # picklable: this is what the executors get

    # 1. Produce from the executors.
    def produce(batches: Iterator[Any]) -> Iterator[Any]:
        import os

        import pyarrow as pa

        producer = ms.producer(conf, raw)  # this worker process's producer
        rows = 0
        for batch in batches:
            rows += len(ms.send_arrow(producer, batch))  # one call, waits for every receipt
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "rows": [rows]})

    events = spark.range(n, numPartitions=4).selectExpr(
        "cast(id % 100 as string) as key",
        "to_json(named_struct('id', id, 'user', concat('u', cast(id % 100 as string)), "
        "'amount', round(rand(7) * 100, 2), 'kind', element_at(array('view', 'buy', 'refund'), "
        "cast(id % 3 as int) + 1))) as value",
    )
    t0 = time.perf_counter()
    pids = {r.pid for r in events.mapInArrow(produce, "pid long, rows long").collect()}
    print(f"1. produced {n:,} raw events from worker processes {sorted(pids)} "
          f"in {time.perf_counter() - t0:.1f} s")

    # 2. Read and transform.
    schema = "id long, user string, amount double, kind string"
    source = (spark.read.format("pulsar").option("service_url", service_url).option("topic", raw).load())
    parsed = source.select("key", "message_id", F.from_json(F.col("value").cast("string"), schema).alias("e"))
    purchases = (parsed.where("e.kind = 'buy'")
                 .select(F.col("e.user").alias("key"),
                         F.to_json(F.struct(F.col("e.id").alias("id"), F.col("e.amount").alias("amount"),
                                            F.upper("e.kind").alias("kind"))).alias("value"),
                         F.create_map(F.lit("source_id"), F.hex("message_id"),
                                      F.lit("pipeline"), F.lit("spark_pipeline.py")).alias("properties")))

    # 3. Write to the second topic.
    t0 = time.perf_counter()
    (purchases.write.format("pulsar").mode("append")
     .option("service_url", service_url).option("topic", clean)
     .option("producer.compression", "lz4").save())
    print(f"2-3. read, filtered and wrote the purchases in {time.perf_counter() - t0:.1f} s")

    # 4. Check.
    back = spark.read.format("pulsar").option("service_url", service_url).option("topic", clean).load()
    expected = sum(1 for i in range(n) if i % 3 == 1)
    got = back.count()
    print(f"4. {clean}: {got:,} purchase events (expected {expected:,})")
    back.selectExpr("key", "cast(value as string) as value", "properties['source_id'] as source_id").show(5, False)
    top = (back.select(F.col("key").alias("user"),
                       F.get_json_object(F.col("value").cast("string"), "$.amount").cast("double").alias("amount"))
           .groupBy("user").agg(F.round(F.sum("amount"), 2).alias("total")).orderBy(F.desc("total")).limit(3))
    top.show()
    spark.stop()
    if got != expected:
        raise SystemExit(f"expected {expected} events, got {got}")
    print("ok")


if __name__ == "__main__":
    main()
