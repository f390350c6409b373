"""Data loss in the ``pulsar`` data source: no false alarms (chunked messages, transaction
markers, micro-batches ending inside a batch entry) and no missed losses (ledgers deleted by
retention, a topic deleted between micro-batches or during a read). Against the real broker and
PySpark local[2]; the coverage rules alone are checked with crafted entries in the engine's unit
tests."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from jvm import error_text as _error_text
from jvm import new_topic as _new_topic
from waiting import wait_until

from magnetar.spark import ClientConfig
from magnetar.testing import AdminError


# The coverage rules alone, with crafted entries (markers, interleaved chunks), are unit tests of
# the engine's range scan: src/columnar/scan_tests.rs.


# -- on the broker ---------------------------------------------------------------------------


def _read(spark: Any, service_url: str, topic: str, **options: str) -> Any:
    r = spark.read.format("pulsar").option("service.url", service_url).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_chunked_messages_no_false_loss_and_splits_keep_chunk_runs(
        spark: Any, service_url: str, conf: ClientConfig) -> None:
    topic = _new_topic("chunks")
    big1, big2 = os.urandom(6 * 1024 * 1024), os.urandom(6 * 1024 * 1024)  # over the broker's 5 MB: 2 chunks each
    with conf.create() as client:
        producer = client.create_producer(topic, chunking=True, batching=False)
        ids = [producer.send(p) for p in (b"a", big1, b"b", big2, b"c")]
    assert ids[1].entry_id == ids[0].entry_id + 2 and ids[3].entry_id == ids[2].entry_id + 2  # ids are last chunks
    want = sorted(hashlib.sha256(p).hexdigest() for p in (b"a", big1, b"b", big2, b"c"))
    for options in ({}, {"maxEntriesPerSplit": "2"}):  # splits of 2 entries cut both chunk runs
        df = _read(spark, service_url, topic, **options)
        if options:
            assert df.rdd.getNumPartitions() >= 3
        rows = df.selectExpr("sha2(value, 256) as h").collect()
        assert sorted(r.h for r in rows) == want, options


def test_a_micro_batch_ending_inside_a_batch_entry_keeps_the_entry(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, tmp_path: Path) -> None:
    topic = _new_topic("inbatch")
    with conf.create() as client:
        client.create_producer(topic, batching=False).send(b"single")
        batched = client.create_producer(topic, batch_max_messages=10, batch_max_delay=5.0)
        ids = batched.send_many([b"m%d" % i for i in range(10)])
    assert len({(i.ledger_id, i.entry_id) for i in ids}) == 1  # one entry of 10 messages
    sub = f"inbatch-{uuid.uuid4().hex[:6]}"
    q = (spark.readStream.format("pulsar").option("service.url", service_url).option("topic", topic)
         .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "3")
         .option("subscriptionName", sub).load().selectExpr("cast(value as string) as v")
         .writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    assert spark.read.parquet(str(tmp_path / "out")).count() == 11
    # Batches ended inside the entry and were committed: the subscription stays before the
    # entry, so the rest of it is still kept by the broker.
    cursor = broker.request("GET", f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/internalStats")
    mark = cursor["cursors"][sub]["markDeletePosition"]
    assert mark == f"{ids[0].ledger_id}:{ids[0].entry_id - 1}", mark


def _stream(spark: Any, service_url: str, topic: str, out: Path, ck: Path, fail: str) -> Any:
    return (spark.readStream.format("pulsar").option("service.url", service_url).option("topic", topic)
            .option("startingOffsets", "earliest").option("failOnDataLoss", fail)
            .option("subscriptionName", f"loss-{ck.name}").option("pollTimeoutMs", "20000").load()
            .selectExpr("cast(value as string) as v")
            .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
            .trigger(availableNow=True).start())


def _first_run_then(spark: Any, service_url: str, conf: ClientConfig, tmp_path: Path, lose: Any) -> tuple[Any, ...]:
    """A stream reads A; then ``lose(topic, producer)`` removes messages; then C is sent."""
    topic = _new_topic("lost")
    out, ck = tmp_path / "out", tmp_path / "ck"
    with conf.create() as client:
        client.create_producer(topic, batching=False).send_many([b"a1", b"a2", b"a3"])
    q = _stream(spark, service_url, topic, out, ck, "true")
    assert q.awaitTermination(120) and q.exception() is None
    lose(topic)
    with conf.create() as client:
        client.create_producer(topic, batching=False).send_many([b"c1", b"c2"])
    return topic, out, ck


def _check_loss_is_reported_then_skipped(spark: Any, service_url: str, topic: str, out: Path, ck: Path) -> None:
    spare = ck.parent / "ck-copy"
    shutil.copytree(ck, spare)
    q = _stream(spark, service_url, topic, out, ck, "true")
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    assert "data loss" in _error_text(info.value) and "is gone" in _error_text(info.value)
    q = _stream(spark, service_url, topic, out, spare, "false")
    assert q.awaitTermination(120) and q.exception() is None
    assert sorted(r.v for r in spark.read.parquet(str(out)).collect()) == ["a1", "a2", "a3", "c1", "c2"]


def test_ledgers_deleted_by_retention_are_data_loss(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, tmp_path: Path) -> None:
    def trim(topic: str) -> None:
        with conf.create() as client:
            client.create_producer(topic, batching=False).send_many([b"b1", b"b2"])
        broker.unload_topic(topic)  # the next messages go to a new ledger
        # Retention's effect: every ledger but the current one deleted (cursors moved past them).
        broker.request("DELETE", f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/truncate")

    topic, out, ck = _first_run_then(spark, service_url, conf, tmp_path, trim)
    _check_loss_is_reported_then_skipped(spark, service_url, topic, out, ck)


def test_a_topic_deleted_between_micro_batches_is_data_loss(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, tmp_path: Path) -> None:
    def delete(topic: str) -> None:
        with conf.create() as client:
            client.create_producer(topic, batching=False).send(b"b1")
        broker.delete_topic(topic, force=True)  # re-created by the next producer

    topic, out, ck = _first_run_then(spark, service_url, conf, tmp_path, delete)
    _check_loss_is_reported_then_skipped(spark, service_url, topic, out, ck)


def test_compacted_read_has_no_false_loss(spark: Any, service_url: str, broker: Any, conf: ClientConfig) -> None:
    topic = _new_topic("compacted")
    with conf.create() as client:
        producer = client.create_producer(topic, batching=False)
        for i in range(6):
            producer.send(b"v%d" % i, key=f"k{i % 2}")
    name = topic.rsplit("/", 1)[1]
    broker.request("PUT", f"/admin/v2/persistent/public/default/{name}/compaction")
    assert wait_until(lambda: broker.request("GET", f"/admin/v2/persistent/public/default/{name}/compaction")
                      .get("status") == "SUCCESS", timeout=60), "compaction did not finish"
    rows = _read(spark, service_url, topic, **{"pulsar.reader.readCompacted": "true"}).collect()
    assert sorted(bytes(r.value) for r in rows) == [b"v4", b"v5"]


# -- a topic deleted during a read ----------------------------------------------------------

# The reads below run in a namespace whose broker dispatches RATE messages a second, so reading
# DELETED_ROWS takes DELETED_ROWS / RATE seconds: the test sees the read under way (the reader's
# subscription has received messages) and deletes the topic long before the read could end.
DELETED_ROWS, RATE = 3000, 100


@pytest.fixture(scope="module")
def slow_ns(broker: Any) -> str:
    ns = f"public/slow-{uuid.uuid4().hex[:8]}"
    broker.create_namespace(ns)
    broker.request("POST", f"/admin/v2/namespaces/{ns}/dispatchRate",
                   {"dispatchThrottlingRateInMsg": RATE, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1})
    return ns


def _filled_slow_topic(conf: ClientConfig, ns: str) -> str:
    topic = f"persistent://{ns}/deleted-{uuid.uuid4().hex[:8]}"
    with conf.create() as client:
        client.create_producer(topic, batching=False).send_many([b"m%d" % i for i in range(DELETED_ROWS)])
    return topic


def _reading(broker: Any, topic: str) -> bool:
    """Whether a reader (a non-durable subscription) of ``topic`` has received messages."""
    try:
        subs = broker.topic_stats(topic).get("subscriptions", {})
    except AdminError:
        return False
    return any(not s.get("isDurable", True) and s.get("msgOutCounter", 0) > 0 for s in subs.values())


def _delete_while_reading(broker: Any, topic: str) -> None:
    assert wait_until(lambda: _reading(broker, topic), timeout=120), "the read did not start"
    broker.delete_topic(topic, force=True)


@pytest.mark.timeout(600)  # Spark jobs on the shared machine
@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_topic_deleted_during_a_batch_read(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, slow_ns: str, fail: str) -> None:
    topic = _filled_slow_topic(conf, slow_ns)
    got: dict[str, Any] = {}

    def count() -> None:
        try:
            got["rows"] = _read(spark, service_url, topic, failOnDataLoss=fail, pollTimeoutMs="20000").count()
        except Exception as e:  # noqa: BLE001 - checked below
            got["error"] = _error_text(e)

    reading = threading.Thread(target=count, daemon=True)
    reading.start()
    _delete_while_reading(broker, topic)
    reading.join(180)
    assert not reading.is_alive(), "the read did not end after the topic was deleted"
    if fail == "true":
        assert "rows" not in got
        assert "data loss" in got["error"] and topic in got["error"], got["error"]
    else:  # the split ends where the topic went, with the rows read before
        assert "error" not in got, got.get("error")
        assert 0 < got["rows"] < DELETED_ROWS


@pytest.mark.timeout(600)  # Spark jobs on the shared machine
@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_topic_deleted_during_a_micro_batch(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, slow_ns: str, tmp_path: Path,
        fail: str) -> None:
    topic = _filled_slow_topic(conf, slow_ns)
    out = tmp_path / "out"
    q = (spark.readStream.format("pulsar").option("service.url", service_url).option("topic", topic)
         .option("startingOffsets", "earliest").option("failOnDataLoss", fail).option("pollTimeoutMs", "20000")
         .load().selectExpr("cast(value as string) as v")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="1 second").start())
    try:
        _delete_while_reading(broker, topic)
        with conf.create() as client:  # re-creates the topic, which the query goes on reading
            client.create_producer(topic, batching=False).send_many([b"after1", b"after2"])
        if fail == "true":
            with pytest.raises(Exception) as info:
                q.awaitTermination(180)
            assert "data loss" in _error_text(info.value) and topic in _error_text(info.value)
            return

        def values() -> list[str]:
            try:
                return [r.v for r in spark.read.parquet(str(out)).collect()]
            except Exception:  # noqa: BLE001 - no output file yet
                return []

        assert wait_until(lambda: {"after1", "after2"} <= set(values()), timeout=180), q.exception()
        assert q.isActive and q.exception() is None
        assert len(values()) < DELETED_ROWS + 2  # what was deleted before it was read is lost
    finally:
        q.stop()


# -- transaction markers last on a partition -------------------------------------------------


@pytest.mark.timeout(600)  # Spark jobs on the shared machine
def test_transaction_markers_last_on_the_partitions_are_no_end_and_no_loss(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, tmp_path: Path) -> None:
    """A transaction's end writes a commit or abort marker into every partition it wrote to,
    which no reader receives. With markers as the last entries of both partitions, batch and
    streaming reads (failOnDataLoss=true) end at the last committed message, without waiting
    for the marker, timing out, reporting a loss, or showing an aborted message."""
    topic = _new_topic("txn-markers")
    broker.create_partitioned_topic(topic, 2)
    parts = [f"{topic}-partition-{p}" for p in range(2)]
    out, ck = tmp_path / "out", tmp_path / "ck"
    want: list[str] = []

    def reads_end_at(last: dict[str, Any], stored_after: int) -> None:
        """Both partitions end with ``stored_after`` entries no reader receives after ``last``."""
        with conf.create() as client:
            for part, mid in last.items():
                path = f"/admin/v2/persistent/public/default/{part.rsplit('/', 1)[1]}/internalStats"
                stored = f"{mid.ledger_id}:{mid.entry_id + stored_after}"
                assert wait_until(lambda: broker.request("GET", path)["lastConfirmedEntry"] == stored, timeout=30)
                # The broker's last message id skips them (Pulsar >= 3.3; older brokers gave the
                # marker's position, which no read ever reaches).
                got = client.create_reader(part, start=mid).get_last_message_id()
                assert (got.ledger_id, got.entry_id) == (mid.ledger_id, mid.entry_id)
        rows = _read(spark, service_url, topic, failOnDataLoss="true", pollTimeoutMs="20000").collect()
        assert sorted(bytes(r.value).decode() for r in rows) == sorted(want)
        q = _stream(spark, service_url, topic, out, ck, "true")  # continues from the last run's offsets
        assert q.awaitTermination(120) and q.exception() is None
        assert sorted(r.v for r in spark.read.parquet(str(out)).collect()) == sorted(want)

    with conf.create() as client:
        producers = [client.create_producer(p, batching=False) for p in parts]
        for i, p in enumerate(producers):
            p.send_many([b"plain%d-%d" % (i, n) for n in range(3)])
            want += [f"plain{i}-{n}" for n in range(3)]
        txn = client.new_transaction(timeout=60)
        committed = {parts[i]: p.send_many([b"c%d-%d" % (i, n) for n in range(2)], txn=txn)[-1]
                     for i, p in enumerate(producers)}
        txn.commit()
        want += [f"c{i}-{n}" for i in range(2) for n in range(2)]
    reads_end_at(committed, 1)  # the commit marker

    with conf.create() as client:
        txn = client.new_transaction(timeout=60)
        for i, part in enumerate(parts):
            client.create_producer(part, batching=False).send(b"aborted%d" % i, txn=txn)
        txn.abort()
    reads_end_at(committed, 3)  # the commit marker, an aborted message, the abort marker

    with conf.create() as client:  # messages after the markers: reads go over them
        for i, part in enumerate(parts):
            client.create_producer(part, batching=False).send(b"after%d" % i)
            want.append(f"after{i}")
    rows = _read(spark, service_url, topic, failOnDataLoss="true", pollTimeoutMs="20000").collect()
    assert sorted(bytes(r.value).decode() for r in rows) == sorted(want)
    q = _stream(spark, service_url, topic, out, ck, "true")
    assert q.awaitTermination(120) and q.exception() is None
    assert sorted(r.v for r in spark.read.parquet(str(out)).collect()) == sorted(want)
