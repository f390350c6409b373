"""Data loss in the ``pulsar`` data source: no false alarms (chunked messages, markers,
micro-batches ending inside a batch entry) and no missed losses (ledgers deleted by retention, a
topic deleted during a query). Against the real broker and PySpark local[2]; the coverage rules
alone are checked with crafted entries (markers cannot be produced by a client)."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from jvm import error_text as _error_text
from jvm import new_topic as _new_topic
from waiting import wait_until

from magnetar.spark import ClientConfig


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
