"""The engine's Arrow columns, against the real broker: messages received straight into the
columns of a record batch (``_Consumer.receive_arrow``, with and without a range scan) and the
rows of an Arrow batch or table sent without a Python object per row
(``_Producer.send_arrow``). These are what the ``pulsar`` data source reads and writes with."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

import magnetar
from magnetar import _core
from magnetar.spark._source import CONNECTOR_SCHEMA, READ_SCHEMA, _arrow_schema

UTC = dt.timezone.utc


def _send_rows(client: magnetar.Client, topic: str) -> list[magnetar.MessageId]:
    producer = client.create_producer(topic, batching=False)
    when = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    ids = [
        producer.send(b"v0", key="k0", properties={"a": "1", "b": "2"}, event_time=when),
        producer.send(b"v1"),
        producer.send(b"v2", key="k2"),
    ]
    producer.close()
    return ids


def _receive_all(reader: magnetar.Reader, layout: Any, scan: Any) -> pa.Table:
    """Receives until ``scan``'s range is complete."""
    batches: list[pa.RecordBatch] = []
    while not scan.done:
        got = reader._core.receive_arrow(layout, 100, 10.0, scan)
        assert got.messages_read, "the range did not complete"
        batches.append(pa.record_batch(got))
    return pa.Table.from_batches(batches)


def test_receive_arrow_fills_every_column_of_the_read_schema(client: magnetar.Client, topic: str) -> None:
    ids = _send_rows(client, topic)
    schema = _arrow_schema(READ_SCHEMA)
    layout = _core._ArrowLayout(schema, topic, -1)
    reader = client.create_reader(topic)
    batches: list[pa.RecordBatch] = []
    while sum(b.num_rows for b in batches) < 3:  # a call returns what has arrived
        got = reader._core.receive_arrow(layout, 10, 10.0)
        assert got.messages_read, "the messages did not arrive"
        batches.append(pa.record_batch(got))
    reader.close()
    batch = pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    assert batch.schema.equals(schema), batch.schema
    rows = batch.to_pylist()
    assert [r["value"] for r in rows] == [b"v0", b"v1", b"v2"]
    assert [r["key"] for r in rows] == ["k0", None, "k2"]
    assert [r["topic"] for r in rows] == [topic] * 3
    assert [r["partition"] for r in rows] == [-1] * 3
    assert [magnetar.MessageId.deserialize(r["message_id"]) for r in rows] == ids
    assert rows[0]["event_time"] == dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    assert rows[1]["event_time"] is None and rows[2]["event_time"] is None
    assert all(r["publish_time"].tzinfo is not None for r in rows)
    assert rows[0]["properties"] == [("a", "1"), ("b", "2")]
    assert rows[1]["properties"] == []  # an empty map, not null
    assert len({r["producer_name"] for r in rows}) == 1
    assert [r["sequence_id"] for r in rows] == [0, 1, 2]
    assert [r["redelivery_count"] for r in rows] == [0, 0, 0]


def test_receive_arrow_with_connector_names_and_a_range_scan(client: magnetar.Client, topic: str) -> None:
    ids = _send_rows(client, topic)
    schema = _arrow_schema(CONNECTOR_SCHEMA)
    layout = _core._ArrowLayout(schema, topic, 3)  # as if it were partition 3
    reader = client.create_reader(topic, start=ids[0], start_inclusive=True)
    # (ids[0], ids[1]]: the start is re-read to verify it, then skipped
    scan = _core._RangeScan(topic, ids[0], True, ids[1])
    table = _receive_all(reader, layout, scan)
    reader.close()
    assert scan.done and scan.reached_end
    assert scan.last_key == (ids[1].ledger_id, ids[1].entry_id, ids[1].batch_index)
    assert table.schema.equals(schema)
    assert table.column("value").to_pylist() == [b"v1"]
    assert table.column("__key").to_pylist() == [None]
    assert table.column("__topic").to_pylist() == [f"{topic}-partition-3"]
    assert table.column("__messageProperties").to_pylist() == [[]]


def test_a_range_whose_start_is_gone_reports_the_loss(client: magnetar.Client, topic: str) -> None:
    ids = _send_rows(client, topic)
    layout = _core._ArrowLayout(_arrow_schema(READ_SCHEMA), topic, -1)
    gone = magnetar.MessageId(ids[0].ledger_id - 1, 0, -1, -1)  # a ledger before the topic's first
    reader = client.create_reader(topic, start=gone, start_inclusive=True)
    scan = _core._RangeScan(topic, gone, True, ids[2])
    got = reader._core.receive_arrow(layout, 100, 5.0, scan)
    reader.close()
    assert got.loss is not None and "which is gone" in got.loss
    assert got.num_rows >= 1


def test_layouts_refuse_unknown_columns_and_wrong_types() -> None:
    with pytest.raises(magnetar.InvalidConfiguration, match="unknown column \"vaule\""):
        _core._ArrowLayout(pa.schema([("vaule", pa.binary())]), "t", 0)
    with pytest.raises(magnetar.InvalidConfiguration, match="must be int32, not Int64"):
        _core._ArrowLayout(pa.schema([("partition", pa.int64())]), "t", 0)
    with pytest.raises(TypeError, match="__arrow_c_schema__"):
        _core._ArrowLayout(["value"], "t", 0)


def test_send_arrow_sends_every_row_with_its_columns(client: magnetar.Client, topic: str) -> None:
    when = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    batch = pa.record_batch({
        "value": pa.array([b"a", b"bb", b"ccc"]),
        "key": pa.array(["k", None, "m"]),
        "properties": pa.array([{"p": "1"}, None, {"q": None}], type=pa.map_(pa.string(), pa.string())),
        "event_time": pa.array([when, None, None], type=pa.timestamp("us", tz="UTC")),
        "ignored": pa.array([1, 2, 3]),
    })
    table = pa.table({"value": pa.array(["x", "y"]), "event_time": pa.array([1_700_000_000_000, None], type=pa.int64())})
    producer = client.create_producer(topic)
    first = producer._core.send_arrow(batch, "value", "key", "properties", "event_time")
    second = producer._core.send_arrow(table, "value", "key", "properties", "event_time")
    assert (len(first), len(second)) == (3, 2)
    assert second.wait() == 2 and first.wait() == 3
    assert first.wait() == 3  # the outcome is kept
    producer.close()
    reader = client.create_reader(topic)
    msgs = [reader.read_next(timeout=10) for _ in range(5)]
    reader.close()
    assert [m.data for m in msgs] == [b"a", b"bb", b"ccc", b"x", b"y"]
    assert [m.key for m in msgs] == ["k", None, "m", None, None]
    assert [m.properties for m in msgs] == [{"p": "1"}, {}, {"q": ""}, {}, {}]
    assert msgs[0].event_time == 1714979289123  # truncated to milliseconds
    assert [m.event_time for m in msgs[1:]] == [None, None, 1_700_000_000_000, None]


def test_send_arrow_refuses_bad_columns_before_sending(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    cases = [
        (pa.record_batch({"key": ["k"]}), magnetar.InvalidConfiguration, "no \"value\" column"),
        (pa.record_batch({"value": [1]}), magnetar.InvalidConfiguration, "must be binary or string, not Int64"),
        (pa.record_batch({"value": [b"a", None]}), magnetar.InvalidConfiguration, "1 null value"),
        (pa.record_batch({"value": [b"a"], "key": [1.5]}), magnetar.InvalidConfiguration, "must be string or binary"),
        (pa.record_batch({"value": [b"a"], "event_time": ["noon"]}), magnetar.InvalidConfiguration,
         "must be a timestamp or milliseconds"),
        (pa.record_batch({"value": [b"a"], "properties": [{"k": 1}]}), magnetar.InvalidConfiguration,
         "must be map<string, string>"),
        (pa.array([b"a"]), magnetar.InvalidConfiguration, "expected a record batch"),
        ([b"a"], TypeError, "__arrow_c_array__ or __arrow_c_stream__"),
    ]
    for data, error, text in cases:
        with pytest.raises(error, match=text):
            producer._core.send_arrow(data, "value", "key", "properties", "event_time")
    producer.close()
    reader = client.create_reader(topic)
    assert not reader.has_message_available()
    reader.close()


def test_send_arrow_in_a_transaction_counts_only_once_committed(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    aborted = client.new_transaction(timeout=60)
    assert producer._core.send_arrow(pa.record_batch({"value": [b"a1", b"a2"]}), txn=aborted).wait() == 2
    aborted.abort()
    committed = client.new_transaction(timeout=60)
    producer._core.send_arrow(pa.record_batch({"value": [b"c1", b"c2"]}), txn=committed).wait()
    committed.commit()
    producer.send(b"after")
    assert [consumer.receive(timeout=10).data for _ in range(3)] == [b"c1", b"c2", b"after"]
    consumer.close()
    producer.close()
