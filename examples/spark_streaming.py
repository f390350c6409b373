"""A checkpointed Structured Streaming job on a Pulsar topic, stopped and restarted.

Starts its own local Pulsar broker and a local Spark session, so it runs as-is::

    pip install pyspark pyarrow "pandas<3"
    python examples/spark_streaming.py [--runs 2] [--service-url pulsar://host:6650]

A thread keeps producing numbered events (about 200 per second) to a 3-partition topic. The streaming job reads the
topic with the `pulsar` data source (`maxMessagesPerTrigger`, a durable subscription that pins
the unprocessed backlog), enriches the events, and writes them both to Parquet files and to a
second Pulsar topic, with a checkpoint. It runs as `Trigger.AvailableNow` several times while the
producer goes on — each run resumes from the checkpoint — and a last time after the producer
stops. At the end every event is in the Parquet output exactly once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
import time
import uuid

import magnetar
from magnetar.spark import ClientConfig
from magnetar.testing import Admin

from _spark_local import local_broker, local_spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="query runs while the producer is running")
    parser.add_argument("--service-url", help="use this broker instead of starting one")
    parser.add_argument("--admin-url", help="its admin URL (to create the partitioned topic)")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        service_url, broker = local_broker(stack, args.service_url)
        admin: Admin | None = broker
        if broker is None and args.admin_url:
            admin = Admin(args.admin_url)
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="magnetar-stream-"))
        run(service_url, admin, workdir, args.runs)


class Producing:
    """Sends numbered events from a thread until stopped."""

    def __init__(self, conf: ClientConfig, topic: str) -> None:
        self.client = conf.create()
        self.producer = self.client.create_producer(topic)
        self.sent = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        while not self.stopped.is_set():
            keys = [str(i) for i in range(self.sent, self.sent + 20)]
            self.producer.send_many([f'{{"n": {k}, "ts": {time.time():.3f}}}'.encode() for k in keys], keys=keys)
            self.sent += len(keys)
            time.sleep(0.1)

    def stop(self) -> int:
        self.stopped.set()
        self.thread.join()
        self.producer.close()
        self.client.close()
        return self.sent


def run(service_url: str, admin: Admin | None, workdir: str, runs: int) -> None:
    spark = local_spark("magnetar-streaming")

    run_id = uuid.uuid4().hex[:8]
    topic = f"persistent://public/default/clicks-{run_id}"
    enriched = f"persistent://public/default/clicks-enriched-{run_id}"
    if admin is not None:
        admin.create_partitioned_topic(topic, 3)
    out, checkpoint = os.path.join(workdir, "out"), os.path.join(workdir, "checkpoint")

    def start_query(sink: str):  # type: ignore[no-untyped-def]
        events = (spark.readStream.format("pulsar")
                  .option("service_url", service_url)
                  .option("topic", topic)
                  .option("startingOffsets", "earliest")
                  .option("maxMessagesPerTrigger", "2000")
                  .option("subscriptionName", f"clicks-job-{sink}-{run_id}")
                  .load()
                  .selectExpr("key", "cast(value as string) as json", "partition", "hex(message_id) as id",
                              "publish_time"))
        if sink == "parquet":
            writer = events.writeStream.format("parquet").option("path", out)
        else:
            writer = (events.selectExpr("key", "json as value",
                                        "map('source_partition', cast(partition as string), 'source_id', id) as properties")
                      .writeStream.format("pulsar").option("service_url", service_url).option("topic", enriched))
        return (writer.option("checkpointLocation", os.path.join(checkpoint, sink))
                .trigger(availableNow=True).start())

    def run_once(label: str) -> None:
        t0 = time.perf_counter()
        queries = [start_query("parquet"), start_query("pulsar")]
        for q in queries:
            q.awaitTermination()
            if q.exception():
                raise SystemExit(f"query failed: {q.exception()}")
        rows = [p["numInputRows"] for p in queries[0].recentProgress]
        print(f"{label}: {len(rows)} micro-batches, {sum(rows):,} events, {time.perf_counter() - t0:.1f} s")

    producing = Producing(ClientConfig(service_url), topic)
    try:
        time.sleep(2.0)
        for i in range(1, runs + 1):
            run_once(f"run {i} (producer running, restarted from the checkpoint)" if i > 1 else "run 1 (producer running)")
            time.sleep(1.0)
    finally:
        total = producing.stop()
    print(f"producer stopped after {total:,} events")
    run_once("last run (catching up)")

    result = spark.read.parquet(out)
    got, distinct = result.count(), result.select("key").distinct().count()
    print(f"parquet output: {got:,} rows, {distinct:,} distinct events, of {total:,} sent")
    result.groupBy("partition").count().orderBy("partition").show()
    with magnetar.Client(service_url) as client:
        reader = client.create_reader(enriched)
        forwarded = 0
        while reader.has_message_available():
            reader.read_next(timeout=10)
            forwarded += 1
    print(f"{enriched}: {forwarded:,} events forwarded (at-least-once: duplicates possible after a failure)")
    spark.stop()
    if got != total or distinct != total:
        raise SystemExit("the Parquet output is not exactly the events sent")
    print("ok: every event exactly once in the Parquet output")


if __name__ == "__main__":
    main()
