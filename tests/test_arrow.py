"""Topics as Arrow record batches outside Spark, against the real broker: ``read_arrow`` and
``receive_arrow`` fill the Spark read's columns (schema fields for Avro, JSON and primitive
topics), ``ack_arrow`` acknowledges every row for good, ``send_arrow`` sends the rows of a table,
batch or pandas frame, and a reader is an Arrow C stream up to an end. Each behaviour is checked
through the blocking and the asyncio twins (the ``api`` fixture)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import uuid
from typing import Any

import pyarrow as pa
import pytest

import magnetar
from magnetar import schema
from magnetar.admin import Admin
from magnetar.testing import Standalone

from conftest import Api
from test_cli import cli, ok
from waiting import wait_until

UTC = dt.timezone.utc
WHEN = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)


def _rows(api: Api, handle: Any, method: str, n: int, **options: Any) -> pa.Table:
    """Arrow reads until ``n`` rows came (each call returns what has arrived)."""
    batches: list[pa.RecordBatch] = []
    while sum(b.num_rows for b in batches) < n:
        got = api.call(handle, method, max_rows=1000, timeout=10.0, **options)
        assert isinstance(got, pa.RecordBatch)
        assert got.num_rows, f"only {sum(b.num_rows for b in batches)} of {n} rows arrived"
        batches.append(got)
    return pa.Table.from_batches(batches)


def _send_plain(client: magnetar.Client, topic: str, n: int = 5) -> list[magnetar.MessageId]:
    with client.create_producer(topic, batching=True, batch_max_delay=0.05) as p:
        ids = p.send_many([b"v%d" % i for i in range(n)], keys=[f"k{i}" if i % 2 == 0 else None for i in range(n)],
                          properties=[{"i": str(i)} for i in range(n)], event_times=[WHEN] * n)
    return ids


def test_receive_arrow_fills_the_spark_reads_columns_and_ack_arrow_acks_every_row(api: Api, service_url: str,
                                                                                   client: magnetar.Client,
                                                                                   topic: str) -> None:
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest")
    ids = _send_plain(client, topic)
    table = _rows(api, consumer, "receive_arrow", 5)
    assert table.schema.names == ["key", "value", "topic", "partition", "message_id", "publish_time", "event_time",
                                  "properties", "producer_name", "sequence_id", "redelivery_count"]
    rows = table.to_pylist()
    assert [r["value"] for r in rows] == [b"v%d" % i for i in range(5)]
    assert [r["key"] for r in rows] == ["k0", None, "k2", None, "k4"]
    assert [r["topic"] for r in rows] == [topic] * 5
    assert [r["partition"] for r in rows] == [-1] * 5
    assert [magnetar.MessageId.deserialize(r["message_id"]) for r in rows] == ids
    assert [r["event_time"] for r in rows] == [WHEN] * 5
    assert [dict(r["properties"]) for r in rows] == [{"i": str(i)} for i in range(5)]
    # the five share a batch: each row is acked by its own index
    assert len({(i.ledger_id, i.entry_id) for i in ids}) < 5
    api.call(consumer, "ack_arrow", table)
    _expect_only_a_marker(api, client, consumer, topic)


def _expect_only_a_marker(api: Api, client: magnetar.Client, consumer: Any, topic: str, sub: str = "s") -> None:
    """Nothing acked comes again: a marker sent now is the first message the subscription gives,
    to this consumer and to the next one (which reads what the broker stored)."""
    with client.create_producer(topic, batching=False) as p:
        p.send(b"marker")
    got = api.call(consumer, "receive_arrow", max_rows=100, timeout=30.0)
    assert got.column("value").to_pylist() == [b"marker"]
    api.call(consumer, "close")
    again = api.call(api.client, "subscribe", topic, sub)
    first = api.call(again, "receive", timeout=30.0)
    assert first.data == b"marker"
    api.call(again, "close")


def test_columns_are_narrowed_and_renamed_as_the_spark_reads(api: Api, client: magnetar.Client, topic: str) -> None:
    _send_plain(client, topic, 3)
    reader = api.call(api.client, "create_reader", topic)
    table = _rows(api, reader, "read_arrow", 3, metadata_columns="connector")
    assert table.schema.names == ["value", "__key", "__topic", "__messageId", "__publishTime", "__eventTime",
                                  "__messageProperties"]
    assert table.column("__key").to_pylist() == [b"k0", None, b"k2"]
    narrow = api.call(reader, "read_arrow", timeout=0.1, columns=["value", "key"])
    assert narrow.schema.names == ["value", "key"] and narrow.num_rows == 0
    with pytest.raises(magnetar.InvalidConfiguration, match="unknown column"):
        api.call(reader, "read_arrow", columns=["nope"])
    with pytest.raises(magnetar.InvalidConfiguration, match="metadata_columns"):
        api.call(reader, "read_arrow", metadata_columns="kafka")
    with pytest.raises(TypeError, match="did you mean 'columns'"):
        api.call(reader, "read_arrow", column=["value"])
    api.call(reader, "close")


def test_ack_arrow_without_the_message_id_column_is_refused(api: Api, client: magnetar.Client, topic: str) -> None:
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest")
    _send_plain(client, topic, 2)
    table = _rows(api, consumer, "receive_arrow", 2, columns=["value"])
    with pytest.raises(magnetar.InvalidConfiguration, match="message_id"):
        api.call(consumer, "ack_arrow", table)
    api.call(consumer, "close")


@dataclasses.dataclass
class Reading:
    sensor: str
    celsius: float
    count: int


@pytest.mark.parametrize("kind", ["avro", "json"])
def test_record_schema_fields_are_columns_and_send_arrow_encodes_them(api: Api, client: magnetar.Client,
                                                                      topic: str, kind: str) -> None:
    make = schema.AvroSchema if kind == "avro" else schema.JsonSchema
    producer = api.call(api.client, "create_producer", topic, schema=make(Reading))
    reader = api.call(api.client, "create_reader", topic, schema=make(Reading))
    rows = pa.table({"sensor": ["a", "b"], "celsius": [21.5, -3.0], "count": [1, 2], "key": ["ka", "kb"]})
    ids = api.call(producer, "send_arrow", rows)
    assert len(ids) == 2 and all(isinstance(i, magnetar.MessageId) for i in ids)
    table = _rows(api, reader, "read_arrow", 2)
    assert table.schema.names[:3] == ["sensor", "celsius", "count"]
    assert "value" not in table.schema.names and "message_id" in table.schema.names
    assert table.select(["sensor", "celsius", "count", "key"]).to_pylist() == rows.to_pylist()
    bytes_only = api.call(api.client, "create_reader", topic)
    raw = _rows(api, bytes_only, "read_arrow", 2, schema_fields=False)
    assert raw.schema.field("value").type == pa.binary()
    for h in (producer, reader, bytes_only):
        api.call(h, "close")


def test_a_primitive_schema_gives_a_typed_value_column(api: Api, topic: str) -> None:
    producer = api.call(api.client, "create_producer", topic, schema=schema.StringSchema())
    reader = api.call(api.client, "create_reader", topic, schema=schema.StringSchema())
    api.call(producer, "send_arrow", pa.table({"value": ["héllo", "wörld"]}))
    table = _rows(api, reader, "read_arrow", 2)
    assert table.schema.field("value").type == pa.string()
    assert table.column("value").to_pylist() == ["héllo", "wörld"]
    api.call(producer, "close")
    api.call(reader, "close")


def test_send_arrow_round_trip_of_a_table_a_batch_and_a_pandas_frame(api: Api, client: magnetar.Client,
                                                                    topic: str) -> None:
    import pandas as pd

    producer = api.call(api.client, "create_producer", topic)
    table = pa.table({
        "value": [b"a", b"b"], "key": ["k", None],
        "properties": pa.array([[("p", "1")], []], pa.map_(pa.string(), pa.string())),
        "event_time": pa.array([WHEN, None], pa.timestamp("ms", tz="UTC")),
    })
    ids = api.call(producer, "send_arrow", table)
    ids += api.call(producer, "send_arrow", pa.record_batch({"value": [b"c"]}))
    ids += api.call(producer, "send_arrow", pd.DataFrame({"value": [b"d", b"e"], "key": ["x", "y"]}))
    ids += api.call(producer, "send_arrow", pa.table({"body": [b"f"]}), value="body", key=None)
    assert ids == sorted(ids) and len(set(ids)) == 6
    with pytest.raises(magnetar.InvalidConfiguration):
        api.call(producer, "send_arrow", pa.table({"nothing": [1]}))
    with pytest.raises(TypeError, match="send_arrow takes"):
        api.call(producer, "send_arrow", [b"x"])
    api.call(producer, "close")
    reader = client.create_reader(topic)
    msgs = [reader.read_next(timeout=30) for _ in range(6)]
    assert [m.data for m in msgs] == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert [m.message_id for m in msgs] == ids
    assert (msgs[0].key, msgs[0].properties, msgs[0].event_time) == ("k", {"p": "1"}, int(WHEN.timestamp() * 1000))
    assert (msgs[1].key, msgs[1].properties, msgs[1].event_time) == (None, {}, None)
    assert [m.key for m in msgs[3:5]] == ["x", "y"]


def test_a_partitioned_topic_gives_each_row_its_partition(api: Api, broker: Standalone, client: magnetar.Client,
                                                          topic: str) -> None:
    broker.create_partitioned_topic(topic, 3)
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest")
    with client.create_producer(topic, batching=True, batch_max_delay=0.05) as p:
        ids = p.send_many([b"%d" % i for i in range(30)], keys=[f"key-{i}" for i in range(30)])
    table = _rows(api, consumer, "receive_arrow", 30)
    by_value = {r["value"]: r for r in table.to_pylist()}
    for i, mid in enumerate(ids):
        row = by_value[b"%d" % i]
        assert row["partition"] == mid.partition and row["topic"] == topic
        assert magnetar.MessageId.deserialize(row["message_id"]) == mid
    assert len({r["partition"] for r in by_value.values()}) == 3
    api.call(consumer, "ack_arrow", table)
    _expect_only_a_marker(api, client, consumer, topic)


def test_ack_arrow_acks_survive_the_topic_moving_away(api: Api, broker: Standalone, client: magnetar.Client,
                                                      topic: str) -> None:
    """Acks given just before the broker unloads the topic (the consumer's connection to it
    drops and it re-subscribes) still hold: none of the acked rows comes again."""
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest", ack_group_time=1.0)
    _send_plain(client, topic, 20)
    table = _rows(api, consumer, "receive_arrow", 20)
    api.call(consumer, "ack_arrow", table)
    with Admin(broker.admin_url) as admin:
        admin.topics.unload(topic)
    assert wait_until(lambda: consumer.is_connected, 60), "the consumer did not re-subscribe"
    _expect_only_a_marker(api, client, consumer, topic)


def test_a_reader_is_an_arrow_stream_up_to_its_end(client: magnetar.Client, topic: str) -> None:
    ids = _send_plain(client, topic, 50)
    reader = client.create_reader(topic)
    table = pa.table(reader)  # __arrow_c_stream__: up to the last message now
    assert table.num_rows == 50
    assert table.column("value").to_pylist() == [b"v%d" % i for i in range(50)]
    with client.create_producer(topic) as p:
        p.send(b"later")
    upto = client.create_reader(topic).arrow_stream(until=ids[9], max_rows=4, columns=["value"])
    assert isinstance(upto, pa.RecordBatchReader)
    assert upto.read_all().column("value").to_pylist() == [b"v%d" % i for i in range(10)]
    empty = client.create_reader(f"persistent://public/default/empty-{uuid.uuid4().hex[:8]}")
    assert pa.table(empty).num_rows == 0


def test_the_asyncio_reader_streams_batches_up_to_its_end(service_url: str, client: magnetar.Client,
                                                           topic: str) -> None:
    _send_plain(client, topic, 12)

    async def run() -> list[bytes]:
        async with magnetar.AsyncClient(service_url) as c:
            reader = await c.create_reader(topic)
            out: list[bytes] = []
            async for batch in reader.arrow_stream(max_rows=5):
                assert batch.num_rows <= 5
                out += batch.column("value").to_pylist()
            return out

    assert asyncio.run(run()) == [b"v%d" % i for i in range(12)]


def test_a_partitioned_reader_is_not_one_stream(broker: Standalone, client: magnetar.Client, topic: str) -> None:
    broker.create_partitioned_topic(topic, 2)
    reader = client.create_reader(topic)
    with pytest.raises(magnetar.InvalidConfiguration, match="one partition"):
        reader.arrow_stream()


def test_the_cli_writes_parquet_and_an_arrow_stream(service_url: str, client: magnetar.Client, topic: str,
                                                   tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    _send_plain(client, topic, 7)
    path = tmp_path / "out.parquet"
    ok(cli("consume", topic, "-s", "lake", "--from", "earliest", "-n", "7", "--timeout", "20", "--output", "parquet",
           "--file", str(path), "--max-rows", "3", "--url", service_url))
    table = pq.read_table(path)
    assert table.column("value").to_pylist() == [b"v%d" % i for i in range(7)]
    assert table.column("key").to_pylist() == ["k0", None, "k2", None, "k4", None, "k6"]
    # consume acked what it wrote
    _expect_only_a_marker(Api.of(client), client, client.subscribe(topic, "lake"), topic, "lake")

    out = ok(cli("read", topic, "--exit-at-end", "--output", "arrow", "--url", service_url))
    stream = pa.ipc.open_stream(out).read_all()
    assert stream.column("value").to_pylist() == [b"v%d" % i for i in range(7)] + [b"marker"]


def test_a_partitioned_topic_with_a_schema_gives_its_fields(api: Api, broker: Standalone, topic: str) -> None:
    broker.create_partitioned_topic(topic, 2)
    producer = api.call(api.client, "create_producer", topic, schema=schema.AvroSchema(Reading))
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest")
    api.call(producer, "send_arrow", pa.table({"sensor": ["a", "b", "c"], "celsius": [1.0, 2.0, 3.0],
                                               "count": [1, 2, 3]}))
    table = _rows(api, consumer, "receive_arrow", 3)
    assert sorted(table.select(["sensor", "celsius", "count"]).to_pylist(), key=lambda r: r["sensor"]) == [
        {"sensor": "a", "celsius": 1.0, "count": 1}, {"sensor": "b", "celsius": 2.0, "count": 2},
        {"sensor": "c", "celsius": 3.0, "count": 3}]
    api.call(consumer, "ack_arrow", table)
    api.call(producer, "close")
    api.call(consumer, "close")
