"""The PySpark integration against the real broker and PySpark local[2]: the ``pulsar`` data
source (batch and streaming, reads and writes) and producing from executors.

One SparkSession for the module. pyspark and pyarrow are hard test dependencies
(requirements-dev.txt): without them this module fails to import, it is never skipped.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from jvm import error_text as _error_text
from jvm import new_topic as _new_topic
from waiting import wait_until

import magnetar
import magnetar.spark as ms
from magnetar.spark import ClientConfig

# The proof writes and reads back 200,000 rows; MAGNETAR_SPARK_ROWS overrides it.
BATCH_ROWS = int(os.environ.get("MAGNETAR_SPARK_ROWS", "200000"))


def _read(spark: Any, service_url: str, topic: str, **options: str) -> Any:
    r = spark.read.format("pulsar").option("service_url", service_url).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


# -- ClientConfig and the per-process client (no Spark) ---------------------------------------


def test_client_config_pickles_and_builds_clients(service_url: str, topic: str) -> None:
    token = magnetar.Authentication("token", "t0k3n")
    conf = ClientConfig(service_url, operation_timeout=7.5, authentication=token)
    assert (conf.auth_method, conf.auth_data) == ("token", b"t0k3n")
    assert "t0k3n" not in repr(conf)
    again = pickle.loads(pickle.dumps(conf))
    assert again == conf and hash(again) == hash(conf)
    assert again.authentication.method == "token" and again.authentication.data == b"t0k3n"
    assert conf.replace(operation_timeout=1.0).operation_timeout == 1.0
    assert conf.replace(operation_timeout=1.0).auth_method == "token"
    with pytest.raises(magnetar.InvalidConfiguration):
        ClientConfig(service_url, operation_timeout="soon")  # type: ignore[arg-type]
    with pytest.raises(magnetar.InvalidConfiguration):
        ClientConfig("")

    plain = ClientConfig(service_url, operation_timeout=20.0)
    with plain.create() as client:
        producer = client.create_producer(topic)
        producer.send(b"via ClientConfig.create")
        producer.close()


def test_clients_refuse_to_pickle_with_a_pointer_to_client_config(service_url: str, topic: str) -> None:
    from pyspark import cloudpickle

    conf = ClientConfig(service_url)
    client = ms.client(conf)
    producer = ms.producer(conf, topic)
    for obj in (client, producer):
        with pytest.raises(TypeError, match="ClientConfig"):
            pickle.dumps(obj)
        with pytest.raises(TypeError, match="ClientConfig"):
            cloudpickle.dumps(lambda obj=obj: obj)  # what Spark does to a UDF's closure
    cloudpickle.dumps(lambda: ms.client(conf))  # the config travels fine


def test_one_client_per_process_and_a_fresh_one_after_fork(service_url: str, topic: str) -> None:
    import multiprocessing as mp

    conf = ClientConfig(service_url, operation_timeout=20.0)
    parent_client = ms.client(conf)
    assert ms.client(conf) is parent_client
    assert ms.client(ClientConfig(service_url, operation_timeout=20.0)) is parent_client  # equal configs
    parent_producer = ms.producer(conf, topic)
    assert ms.producer(conf, topic) is parent_producer
    parent_producer.send(b"before fork")

    def child(q: Any) -> None:
        c = ms.client(conf)
        mid = ms.producer(conf, topic).send(b"from child")
        q.put((os.getpid(), c is parent_client, ms.process_stats(), str(mid)))

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=child, args=(q,))
    proc.start()
    pid, same, stats, _ = q.get(timeout=60)
    proc.join(30)
    assert proc.exitcode == 0
    assert pid != os.getpid() and not same
    assert stats["pid"] == pid and stats["clients_created"] == 1
    parent_producer.send(b"after fork")  # the parent's connections are untouched
    assert ms.client(conf) is parent_client

    with conf.create() as c:
        reader = c.create_reader(topic)
        got = set()
        while reader.has_message_available():
            got.add(reader.read_next(timeout=10).data)
    assert got == {b"before fork", b"from child", b"after fork"}


def test_send_arrow_and_pandas(service_url: str, topic: str) -> None:
    import datetime as dt

    import pandas as pd

    conf = ClientConfig(service_url, operation_timeout=20.0)
    producer = ms.producer(conf, topic)
    plain = pa.RecordBatch.from_pydict({"key": ["a", None], "value": [b"1", b"2"], "ignored": [1, 2]})
    ids = ms.send_arrow(producer, plain)
    assert len(ids) == 2 and ids == sorted(ids)
    t = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)
    rich = pa.table({
        "value": pa.array(["x", "y"]),
        "properties": pa.array([{"p": "1"}, None], type=pa.map_(pa.string(), pa.string())),
        "event_time": pa.array([t, None], type=pa.timestamp("us", tz="UTC")),
    })
    assert len(ms.send_arrow(producer, rich)) == 2
    frame = pd.DataFrame({"value": [b"p1", b"p2"], "key": ["k1", "k2"], "properties": [{"q": "2"}, None]})
    assert len(ms.send_arrow(producer, frame)) == 2
    with pytest.raises(magnetar.InvalidConfiguration, match="value"):
        ms.send_arrow(producer, pa.RecordBatch.from_pydict({"key": ["k"]}))

    with conf.create() as c:
        reader = c.create_reader(topic)
        msgs = [reader.read_next(timeout=10) for _ in range(6)]
    assert [m.data for m in msgs] == [b"1", b"2", b"x", b"y", b"p1", b"p2"]
    assert [m.key for m in msgs] == ["a", None, None, None, "k1", "k2"]
    assert msgs[2].properties == {"p": "1"} and msgs[2].event_time == int(t.timestamp() * 1000)
    assert msgs[3].properties == {} and not msgs[3].event_time
    assert msgs[4].properties == {"q": "2"}


# -- batch write and read ---------------------------------------------------------------------


def test_batch_write_then_read_back_identical_multiset(spark: Any, service_url: str, broker: Any) -> None:
    topic = _new_topic("batch")
    broker.create_partitioned_topic(topic, 2)
    n = BATCH_ROWS
    df = spark.range(n, numPartitions=2).selectExpr(
        "cast(id as string) as key",
        "concat('value-', cast(id as string), repeat('x', 80)) as value",
        "map('i', cast(id as string), 'mod7', cast(id % 7 as string)) as properties",
    )
    # Warm up (the session's first jobs start the Python workers) so the timings below are
    # about moving rows.
    warm = _new_topic("warm")
    spark.range(10).selectExpr("cast(id as string) as value").write.format("pulsar").mode("append") \
        .option("service_url", service_url).option("topic", warm).save()
    assert _read(spark, service_url, warm).count() == 10

    t0 = time.perf_counter()
    df.write.format("pulsar").mode("append").option("service_url", service_url).option("topic", topic).save()
    write_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    back = _read(spark, service_url, topic).toArrow()  # every column, through Arrow to the driver
    read_s = time.perf_counter() - t0
    print(f"\n{n:,} rows: batch write {write_s:.1f} s ({n / write_s:,.0f} rows/s), "
          f"batch read {read_s:.1f} s ({n / read_s:,.0f} rows/s) [includes Spark job overhead]")
    assert back.num_rows == n

    from collections import Counter

    want = Counter((str(i), b"value-%d" % i + b"x" * 80, (("i", str(i)), ("mod7", str(i % 7)))) for i in range(n))
    got = Counter(zip(back.column("key").to_pylist(), back.column("value").to_pylist(),
                      (tuple(sorted(p)) for p in back.column("properties").to_pylist())))
    assert got == want
    assert set(back.column("partition").to_pylist()) == {0, 1}
    assert len(set(back.column("message_id").to_pylist())) == n
    assert back.column("publish_time").null_count == 0
    assert set(back.column("redelivery_count").to_pylist()) == {0}
    assert back.column("topic").unique().to_pylist() == [topic]


def test_four_partitions_offsets_per_partition(spark: Any, service_url: str, broker: Any) -> None:
    import json

    topic = _new_topic("four")
    broker.create_partitioned_topic(topic, 4)
    n = 4000
    (spark.range(n, numPartitions=2).selectExpr("cast(id as string) as key", "cast(id as string) as value")
     .write.format("pulsar").mode("append").option("service_url", service_url).option("topic", topic)
     .option("producer.batch_max_messages", "50").save())

    full = _read(spark, service_url, topic).select("key", "partition", "message_id").collect()
    assert len(full) == n
    by_part: dict[int, list[Any]] = {}
    for r in full:
        by_part.setdefault(r.partition, []).append(r)
    assert sorted(by_part) == [0, 1, 2, 3]
    assert all(len(v) > 100 for v in by_part.values())

    # Offsets per partition: from the 11th message up to the 100th, both inclusive (a user's
    # ids are inclusive, as in the connector and Spark's Kafka source).
    def ids_in_order(rows: list[Any]) -> list[Any]:
        return sorted(magnetar.MessageId.deserialize(bytes(r.message_id)) for r in rows)

    start, end, want = {}, {}, set()
    for p, rows in by_part.items():
        ordered = ids_in_order(rows)
        start[str(p)] = ordered[10].serialize().hex()
        end[str(p)] = ordered[99].serialize().hex()
        want |= {bytes(i.serialize()) for i in ordered[10:100]}
    part = _read(spark, service_url, topic, startingOffsets=json.dumps({topic: start}),
                 endingOffsets=json.dumps({topic: end}))
    rows = part.select("message_id", "partition").collect()
    assert len(rows) == 4 * 90
    got = {bytes(magnetar.MessageId.deserialize(bytes(r.message_id)).serialize()) for r in rows}
    assert got == want

    # Splitting a partition into several Spark partitions (50-message entries, 10 per split).
    split = _read(spark, service_url, topic, maxEntriesPerSplit="10")
    assert split.rdd.getNumPartitions() > 4
    assert split.count() == n
    assert split.select("key").distinct().count() == n


def test_batch_read_by_publish_time(spark: Any, service_url: str, conf: ClientConfig) -> None:
    topic = _new_topic("time")
    producer = ms.producer(conf, topic)
    producer.send_many([b"early-%d" % i for i in range(5)])
    time.sleep(0.3)
    middle = int(time.time() * 1000)
    time.sleep(0.3)
    producer.send_many([b"mid-%d" % i for i in range(5)])
    time.sleep(0.3)
    late = int(time.time() * 1000)
    time.sleep(0.3)
    producer.send_many([b"late-%d" % i for i in range(5)])
    rows = _read(spark, service_url, topic, startingTime=str(middle), endingTime=str(late)).collect()
    assert sorted(bytes(r.value) for r in rows) == [b"mid-%d" % i for i in range(5)]


def test_per_row_topic_event_time_and_string_values(spark: Any, service_url: str, conf: ClientConfig) -> None:
    a, b = _new_topic("route-a"), _new_topic("route-b")
    df = spark.createDataFrame(
        [(a, "k1", "v1", 1_700_000_000_123), (b, "k2", "v2", None), (a, "k3", "v3", None)],
        "topic string, key string, value string, ms long",
    ).selectExpr("topic", "key", "value", "timestamp_millis(ms) as event_time")
    df.write.format("pulsar").mode("append").option("service_url", service_url).save()
    ra = _read(spark, service_url, a).orderBy("key").collect()
    rb = _read(spark, service_url, b).collect()
    assert [(r.key, bytes(r.value)) for r in ra] == [("k1", b"v1"), ("k3", b"v3")]
    assert [(r.key, bytes(r.value)) for r in rb] == [("k2", b"v2")]
    assert int(ra[0].event_time.timestamp() * 1000) == 1_700_000_000_123
    assert ra[1].event_time is None and ra[0].topic == a


# -- options that fail at planning time -------------------------------------------------------


def test_bad_options_fail_at_load_naming_the_option(spark: Any, service_url: str, broker: Any) -> None:
    topic = _new_topic("opts")
    broker.create_topic(topic)
    cases = [
        (spark.read.format("pulsar").option("topic", topic), "service.url"),
        (spark.read.format("pulsar").option("service_url", service_url).option("topic", topic)
         .option("startingOffsets", '{"' + topic + '": {"0": '), "startingOffsets"),
        (spark.read.format("pulsar").option("service_url", service_url).option("topic", topic)
         .option("endingOffsets", '{"' + topic + '": {"0": "not-an-id!"}}'), "endingOffsets"),
        (spark.read.format("pulsar").option("service_url", service_url).option("admin_url", broker.admin_url)
         .option("topic", _new_topic("missing")), "topic"),
        (spark.read.format("pulsar").option("service_url", service_url), "topic"),
        (spark.read.format("pulsar").option("service_url", service_url).option("topic", topic)
         .option("maxMessagesPerTriger", "5"), "maxMessagesPerTriger"),
    ]
    for reader, option in cases:
        with pytest.raises(Exception) as info:
            reader.load()
        text = _error_text(info.value)
        assert f"option '{option}'" in text or f"option '{option.lower()}'" in text, text
    with pytest.raises(Exception) as info:
        _read(spark, service_url, _new_topic("missing"), admin_url=broker.admin_url).count()
    assert "does not exist" in _error_text(info.value)
    with pytest.raises(Exception) as info:
        (spark.range(1).selectExpr("cast(id as string) as key").write.format("pulsar").mode("append")
         .option("service_url", service_url).option("topic", topic).save())
    assert "'value' column" in _error_text(info.value)


def test_missing_range_end_is_reported_as_data_loss(spark: Any, service_url: str, conf: ClientConfig) -> None:
    import json

    topic = _new_topic("loss")
    ids = ms.producer(conf, topic).send_many([b"a", b"b", b"c"])
    beyond = magnetar.MessageId(ids[-1].ledger_id, ids[-1].entry_id + 5, -1, -1)
    ending = json.dumps({topic: {"-1": beyond.serialize().hex()}})
    with pytest.raises(Exception) as info:
        _read(spark, service_url, topic, endingOffsets=ending, pollTimeoutMs="5000").count()
    assert "data loss" in _error_text(info.value)
    assert _read(spark, service_url, topic, endingOffsets=ending, failOnDataLoss="false").count() == 3


# -- streaming --------------------------------------------------------------------------------


class _KeepProducing:
    """Sends numbered messages from a thread until stopped."""

    def __init__(self, conf: ClientConfig, topic: str, per_tick: int = 25, tick: float = 0.05) -> None:
        self.client = conf.create()
        self.producer = self.client.create_producer(topic)
        self.sent = 0
        self.per_tick, self.tick = per_tick, tick
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop_event.is_set():
                n0 = self.sent
                keys = [str(i) for i in range(n0, n0 + self.per_tick)]
                self.producer.send_many([k.encode() for k in keys], keys=keys)
                self.sent += self.per_tick
                time.sleep(self.tick)
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def stop(self) -> int:
        self.stop_event.set()
        self.thread.join(30)
        self.producer.close()
        self.client.close()
        if self.error:
            raise self.error
        return self.sent


def test_streaming_available_now_restarts_from_checkpoint_exactly_once(
        spark: Any, service_url: str, broker: Any, tmp_path: Path, conf: ClientConfig) -> None:
    topic = _new_topic("stream")
    broker.create_partitioned_topic(topic, 2)
    sub = "spark-exactly-once"
    out, ck = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(**trigger: Any) -> Any:
        return (spark.readStream.format("pulsar").option("service_url", service_url).option("topic", topic)
                .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "1000")
                .option("subscriptionName", sub).load()
                .selectExpr("key", "cast(value as string) as value", "partition", "message_id")
                .writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
                .trigger(**trigger).start())

    def run_available_now() -> list[int]:
        q = start(availableNow=True)
        assert q.awaitTermination(180), "availableNow query did not finish"
        assert q.exception() is None, q.exception()
        return [p["numInputRows"] for p in q.recentProgress]

    # ~200 messages/s while the query is started, stopped and restarted three times.
    producing = _KeepProducing(conf, topic, per_tick=10, tick=0.05)
    try:
        assert wait_until(lambda: producing.sent >= 200, 60), "the producer did not get going"
        first = run_available_now()
        assert sum(first) > 0 and max(first) <= 1000

        # A continuous query stopped in the middle of its work, then restarted from the checkpoint.
        q = start(processingTime="200 milliseconds")
        assert wait_until(lambda: len([p for p in q.recentProgress if p["numInputRows"]]) >= 2, 120, 0.2), \
            "the continuous query read nothing"
        q.stop()
        assert q.exception() is None

        run_available_now()
    finally:
        total = producing.stop()
    run_available_now()  # catches up with everything sent

    got = spark.read.parquet(out)
    assert got.count() == total, "lost or duplicated messages"
    assert got.select("key").distinct().count() == total
    assert {int(r.key) for r in got.select("key").collect()} == set(range(total))
    assert {r.partition for r in got.select("partition").distinct().collect()} == {0, 1}

    # The durable subscription exists on every partition and was moved forward by commit().
    # (commit() runs one batch late, so up to the last batch may still be in the backlog.)
    backlog = 0
    for p in range(2):
        subs = broker.topic_stats(f"{topic}-partition-{p}")["subscriptions"]
        assert sub in subs, subs.keys()
        backlog += subs[sub]["msgBacklog"]
    print(f"\nstream: {total} messages, subscription backlog after the last run: {backlog}")
    assert backlog <= 2 * 1000 and backlog < total, (backlog, total)


def test_streaming_write_from_a_stream(spark: Any, service_url: str, conf: ClientConfig, tmp_path: Path) -> None:
    source, sink = _new_topic("src"), _new_topic("dst")
    ms.producer(conf, source).send_many([b"m%d" % i for i in range(300)], keys=[str(i) for i in range(300)])
    q = (spark.readStream.format("pulsar").option("service_url", service_url).option("topic", source)
         .option("startingOffsets", "earliest").load()
         .selectExpr("key", "concat(cast(value as string), '!') as value",
                     "map('from', hex(message_id)) as properties")
         .writeStream.format("pulsar").option("service_url", service_url).option("topic", sink)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    rows = _read(spark, service_url, sink).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(b"m%d!" % i for i in range(300))
    assert all("from" in r.properties for r in rows)


def test_stopped_queries_remove_the_subscriptions_they_made(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, tmp_path: Path) -> None:
    """Without ``subscriptionName`` a query makes its own durable subscriptions, which keep the
    backlog it has not processed; when it stops they go, or the broker would keep every
    message of the topic for good. Spark ends the source's process with SIGTERM (twice), not
    with a stop call."""
    topic = _new_topic("own-subs")
    broker.create_partitioned_topic(topic, 2)
    ms.producer(conf, topic).send_many([b"m%d" % i for i in range(100)], keys=[str(i) for i in range(100)])

    def subscriptions() -> list[str]:
        return [s for p in range(2) for s in broker.topic_stats(f"{topic}-partition-{p}")["subscriptions"]]

    def query(ck: str, **trigger: Any) -> Any:
        return (spark.readStream.format("pulsar").option("service_url", service_url).option("topic", topic)
                .option("startingOffsets", "earliest").load()
                .writeStream.format("noop").option("checkpointLocation", str(tmp_path / ck)).trigger(**trigger).start())

    q = query("once", availableNow=True)
    assert q.awaitTermination(120) and q.exception() is None
    assert sum(p["numInputRows"] for p in q.recentProgress) == 100
    assert wait_until(lambda: not subscriptions(), 30), subscriptions()

    q = query("running", processingTime="100 milliseconds")
    assert wait_until(lambda: len(subscriptions()) == 2, 60), "the running query has no subscriptions"
    q.stop()
    assert q.exception() is None
    assert wait_until(lambda: not subscriptions(), 30), subscriptions()


# -- executors producing ----------------------------------------------------------------------


def test_map_in_arrow_produces_with_one_client_per_worker_process(
        spark: Any, service_url: str, broker: Any) -> None:
    topic = _new_topic("executors")
    broker.create_partitioned_topic(topic, 4)
    conf = ClientConfig(service_url, operation_timeout=20.0)  # the only thing the closure carries

    def produce(batches: Iterator[Any]) -> Iterator[Any]:
        import os

        import magnetar.spark as ms
        import pyarrow as pa

        client = ms.client(conf)
        producer = ms.producer(conf, topic)
        sent = 0
        for batch in batches:
            sent += len(ms.send_arrow(producer, batch))
        stats = ms.process_stats()
        yield pa.RecordBatch.from_pydict({
            "pid": [os.getpid()], "client_id": [id(client)], "clients_created": [stats["clients_created"]],
            "rows": [sent],
        })

    schema = "pid long, client_id long, clients_created long, rows long"
    rows_per_job, jobs = 20_000, 2
    reports = []
    for job in range(jobs):
        df = spark.range(job * rows_per_job, (job + 1) * rows_per_job, numPartitions=8).selectExpr(
            "cast(id as string) as key", "concat('e', cast(id as string)) as value")
        reports += df.mapInArrow(produce, schema).collect()

    assert sum(r.rows for r in reports) == rows_per_job * jobs
    clients_by_pid: dict[int, set[int]] = {}
    created_by_pid: dict[int, set[int]] = {}
    for r in reports:
        clients_by_pid.setdefault(r.pid, set()).add(r.client_id)
        created_by_pid.setdefault(r.pid, set()).add(r.clients_created)
    print(f"\nworker pids: {sorted(clients_by_pid)}, tasks: {len(reports)}")
    assert os.getpid() not in clients_by_pid  # produced on the workers, not the driver
    assert len(clients_by_pid) < len(reports)  # workers were reused across tasks and jobs
    for pid, ids in clients_by_pid.items():
        assert len(ids) == 1, f"worker {pid} built {len(ids)} clients"
        assert len(created_by_pid[pid]) == 1, f"worker {pid} created clients between tasks"

    back = _read(spark, service_url, topic)
    assert back.count() == rows_per_job * jobs
    assert back.select("value").distinct().count() == rows_per_job * jobs
    assert back.select("partition").distinct().count() == 4


def test_python_udf_sends_per_row(spark: Any, service_url: str) -> None:
    from pyspark.sql.functions import udf

    topic = _new_topic("udf")
    conf = ClientConfig(service_url, operation_timeout=20.0)

    @udf("string")
    def send(value):  # type: ignore[no-untyped-def]  # (no hints: Spark would read them as a pandas UDF)
        import magnetar.spark as ms

        return str(ms.producer(conf, topic).send(value.encode()))

    ids = [r.id for r in spark.range(200, numPartitions=4).selectExpr("cast(id as string) as v")
           .select(send("v").alias("id")).collect()]
    assert len(set(ids)) == 200
    assert _read(spark, service_url, topic).count() == 200


def test_a_closure_over_a_client_fails_with_a_clear_error(spark: Any, service_url: str) -> None:
    client = ms.client(ClientConfig(service_url))

    def uses_client(batches: Iterator[Any]) -> Iterator[Any]:
        client.get_partition_count("x")
        yield from batches

    with pytest.raises(Exception) as info:
        spark.range(1).mapInArrow(uses_client, "id long").collect()
    assert "cannot be pickled" in _error_text(info.value)
