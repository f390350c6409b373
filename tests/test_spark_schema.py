"""Reads and writes of topics with a schema through the ``pulsar`` data source, as the
pulsar-spark connector has them: an Avro or JSON record's fields are columns (nested structs,
arrays, maps, logical types), a primitive schema gives a typed ``value``, schema-less topics keep
``value`` as bytes. Against the real broker and PySpark local[2]; the messages are written by
magnetar's own producers with a schema and read back by Spark (and the other way round)."""

from __future__ import annotations

import datetime as dt
import enum
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from jvm import error_text as _error_text
from jvm import new_topic as _new_topic

import magnetar
from magnetar import schema
from magnetar.spark import ClientConfig


class Kind(enum.Enum):
    A = "A"
    B = "B"


@dataclass
class Line:
    sku: str
    qty: int


@dataclass
class Order:
    id: int
    amount: float
    at: dt.datetime
    day: dt.date
    kind: Kind
    line: Line
    tags: list[str] = field(default_factory=list)
    attrs: dict[str, int] = field(default_factory=dict)
    note: str | None = None


T0 = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)


def _order(i: int) -> Order:
    return Order(id=i, amount=i + 0.5, at=T0 + dt.timedelta(seconds=i), day=dt.date(2024, 1, 1 + i),
                 kind=Kind.B if i % 2 else Kind.A, line=Line(f"s{i}", i * 10), tags=[f"t{i}", "x"],
                 attrs={"n": i}, note=None if i % 2 else f"note{i}")


def _read(spark: Any, service_url: str, topic: str, **options: str) -> Any:
    r = spark.read.format("pulsar").option("service.url", service_url).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _check_orders(rows: list[Any], n: int) -> None:
    rows = sorted(rows, key=lambda r: r.id)
    assert [r.id for r in rows] == list(range(n))
    for r in rows:
        i = r.id
        assert r.amount == i + 0.5
        assert r.at.timestamp() == (T0 + dt.timedelta(seconds=i)).timestamp()
        assert r.day == dt.date(2024, 1, 1 + i)
        assert r.kind == ("B" if i % 2 else "A")
        assert (r.line.sku, r.line.qty) == (f"s{i}", i * 10)
        assert list(r.tags) == [f"t{i}", "x"]
        assert r.attrs == {"n": i}
        assert r.note == (None if i % 2 else f"note{i}")
        assert r.key == f"k{i}"


@pytest.mark.parametrize("kind", ["avro", "json"])
def test_a_record_schema_reads_as_columns_beside_the_metadata(spark: Any, service_url: str, conf: ClientConfig,
                                                              kind: str) -> None:
    topic = _new_topic(f"rec-{kind}")
    s = schema.AvroSchema(Order) if kind == "avro" else schema.JsonSchema(Order)
    with conf.create() as client:
        p = client.create_producer(topic, schema=s)
        for i in range(6):
            p.send(_order(i), key=f"k{i}")
        p.flush()
    df = _read(spark, service_url, topic)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types["id"] == "bigint" and types["amount"] == "double"
    assert types["at"] == "timestamp" and types["day"] == "date" and types["kind"] == "string"
    assert types["line"] == "struct<sku:string,qty:bigint>"
    assert types["tags"] == "array<string>" and types["attrs"] == "map<string,bigint>"
    assert "value" not in types and types["key"] == "string" and types["message_id"] == "binary"
    assert [f.name for f in df.schema.fields][:9] == ["id", "amount", "at", "day", "kind", "line", "tags", "attrs",
                                                     "note"]
    _check_orders(df.collect(), 6)
    # The connector's metadata names work the same way.
    conn = _read(spark, service_url, topic, metadataColumns="connector")
    assert {"__key", "__topic", "__messageId", "id", "line"} <= set(conn.columns) and "value" not in conn.columns
    assert conn.filter("id = 3").select("line.qty").first()[0] == 30


def test_primitive_and_schema_less_topics(spark: Any, service_url: str, conf: ClientConfig) -> None:
    strings, longs, raw = _new_topic("str"), _new_topic("long"), _new_topic("raw")
    with conf.create() as client:
        client.create_producer(strings, schema=schema.StringSchema()).send("héllo")
        client.create_producer(longs, schema=schema.LongSchema()).send(-42)
        client.create_producer(raw).send(b"\x00bytes")
    s = _read(spark, service_url, strings)
    assert s.schema["value"].dataType.simpleString() == "string" and s.first().value == "héllo"
    n = _read(spark, service_url, longs)
    assert n.schema["value"].dataType.simpleString() == "bigint" and n.first().value == -42
    b = _read(spark, service_url, raw)
    assert b.schema["value"].dataType.simpleString() == "binary" and bytes(b.first().value) == b"\x00bytes"
    # Topics of different schemas: an error naming them, or every payload as bytes when allowed.
    with pytest.raises(Exception) as info:
        (spark.read.format("pulsar").option("service.url", service_url).option("topics", f"{strings},{longs}")
         .load())
    assert "different schemas" in _error_text(info.value) and "allowDifferentTopicSchemas" in _error_text(info.value)
    both = (spark.read.format("pulsar").option("service.url", service_url).option("topics", f"{strings},{longs}")
            .option("allowDifferentTopicSchemas", "true").load())
    assert sorted(bytes(r.value) for r in both.collect()) == sorted([b"h\xc3\xa9llo", (-42).to_bytes(8, "big",
                                                                                                    signed=True)])


def test_older_versions_resolve_to_the_latest_schema(spark: Any, service_url: str, conf: ClientConfig) -> None:
    topic = _new_topic("evolve")
    v0 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"},
                                                      {"name": "old", "type": "string", "default": ""}]}
    v1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"},
                                                      {"name": "b", "type": "string", "default": "dflt"}]}
    with conf.create() as client:
        client.create_producer(topic, schema=schema.AvroSchema(definition=json.dumps(v0))).send({"a": 1, "old": "x"})
        client.create_producer(topic, schema=schema.AvroSchema(definition=json.dumps(v1))).send({"a": 2, "b": "y"})
        info = client.get_schema(topic)
        assert info is not None and info.version == 1
    df = _read(spark, service_url, topic)
    assert df.columns[:2] == ["a", "b"] and "old" not in df.columns
    assert sorted((r.a, r.b) for r in df.collect()) == [(1, "dflt"), (2, "y")]


def test_a_payload_that_does_not_decode_fails_the_read_naming_it(spark: Any, service_url: str,
                                                                 conf: ClientConfig) -> None:
    topic = _new_topic("bad")
    with conf.create() as client:
        client.create_producer(topic, schema=schema.AvroSchema(Line)).send(Line("a", 1))
        bad = client.create_producer(topic).send(b"\xff\xff\xff")  # no schema: the broker takes any bytes
    with pytest.raises(Exception) as info:
        _read(spark, service_url, topic).collect()
    text = _error_text(info.value)
    # the task fails with the engine's SchemaDecodeError, which names the message and its version
    bad_id = f"{bad.ledger_id}:{bad.entry_id}:{bad.partition}:{bad.batch_index}"
    assert "SchemaDecodeError" in text, text
    assert f"message {bad_id} of {topic} (schema version " in text, text
    assert "does not decode with the topic's schema" in text, text


def test_unknown_columns_of_a_given_schema_fail_before_the_job(spark: Any, service_url: str,
                                                               conf: ClientConfig) -> None:
    topic = _new_topic("given")
    with conf.create() as client:
        client.create_producer(topic, schema=schema.AvroSchema(Line)).send(Line("a", 1))
    rows = (spark.read.format("pulsar").schema("sku string, qty bigint, key string")
            .option("service.url", service_url).option("topic", topic).load().collect())
    assert [(r.sku, r.qty, r.key) for r in rows] == [("a", 1, None)]
    with pytest.raises(Exception) as info:
        (spark.read.format("pulsar").schema("skus string").option("service.url", service_url)
         .option("topic", topic).load().collect())
    assert "did you mean 'sku'" in _error_text(info.value)
    with pytest.raises(Exception) as info:
        (spark.read.format("pulsar").schema("qty string").option("service.url", service_url)
         .option("topic", topic).load().collect())
    assert "'qty' must be bigint" in _error_text(info.value)


def test_magnetar_reads_what_the_schema_topic_holds(conf: ClientConfig) -> None:
    """The topics above hold what any schema-aware consumer reads (a guard that the producers
    wrote real Avro, so the Spark reads decode interoperable data)."""
    topic = _new_topic("guard")
    with conf.create() as client:
        client.create_producer(topic, schema=schema.AvroSchema(Order)).send(_order(1))
        msg = client.create_reader(topic, schema=schema.AutoConsumeSchema()).read_next(timeout=10)
        assert msg.value["line"] == {"sku": "s1", "qty": 10}
        assert isinstance(msg, magnetar.Message)


@pytest.mark.parametrize("kind", ["avro", "json"])
def test_a_write_encodes_the_columns_with_the_topic_schema(spark: Any, service_url: str, conf: ClientConfig,
                                                           kind: str) -> None:
    topic = _new_topic(f"w-{kind}")
    s = schema.AvroSchema(Line) if kind == "avro" else schema.JsonSchema(Line)
    with conf.create() as client:
        client.create_producer(topic, schema=s).close()  # the topic's schema, registered
        consumer = client.subscribe(topic, "check", schema=s, initial_position="earliest")
        df = spark.createDataFrame([(f"k{i}", f"s{i}", i) for i in range(20)], "key string, sku string, qty bigint")
        df.write.format("pulsar").mode("append").option("service.url", service_url).option("topic", topic).save()
        got = {}
        for _ in range(20):
            m = consumer.receive(timeout=20)
            got[m.key] = m.value
            assert m.schema_version == (0).to_bytes(8, "big")  # the topic's version, no new one
        assert got == {f"k{i}": Line(f"s{i}", i) for i in range(20)}
        # Read back by Spark as columns.
        rows = _read(spark, service_url, topic).collect()
        assert sorted((r.key, r.sku, r.qty) for r in rows) == sorted((f"k{i}", f"s{i}", i) for i in range(20))
        # A column that is no field, or a field without its column, fails before anything is sent.
        with pytest.raises(Exception) as info:
            (df.withColumnRenamed("qty", "qtty").write.format("pulsar").mode("append")
             .option("service.url", service_url).option("topic", topic).save())
        assert "did you mean 'qty'" in _error_text(info.value), _error_text(info.value)
        with pytest.raises(Exception) as info:
            (df.select("key", "sku").write.format("pulsar").mode("append")
             .option("service.url", service_url).option("topic", topic).save())
        assert "needs a column 'qty'" in _error_text(info.value), _error_text(info.value)
        assert consumer.receive_many(100, timeout=1.0) == []


def test_the_official_clients_avro_and_json_read_as_columns(spark: Any, service_url: str) -> None:
    import pulsar
    from pulsar.schema import AvroSchema, Array, Double, JsonSchema, Long, Record, String

    class Item(Record):
        name = String()
        n = Long()
        price = Double()
        tags = Array(String())

    for make, stem in ((AvroSchema, "off-avro"), (JsonSchema, "off-json")):
        topic = _new_topic(stem)
        c = pulsar.Client(service_url)
        try:
            p = c.create_producer(topic, schema=make(Item))
            for i in range(3):
                p.send(Item(name=f"i{i}", n=i, price=i / 2, tags=["a"] * i))
        finally:
            c.close()
        rows = sorted(_read(spark, service_url, topic).collect(), key=lambda r: r.n)
        assert [(r.name, r.n, r.price, list(r.tags)) for r in rows] == [(f"i{i}", i, i / 2, ["a"] * i)
                                                                        for i in range(3)], stem


@pytest.mark.parametrize("kind", ["avro", "json"])
def test_a_union_of_several_types_reads_as_members(spark: Any, service_url: str, conf: ClientConfig,
                                                   kind: str) -> None:
    # Spark's Avro mapping for both encodings: member0 (string), member1 (long), the one written set
    definition = {"type": "record", "name": "U", "fields": [
        {"name": "id", "type": "long"}, {"name": "u", "type": ["null", "string", "long"], "default": None}]}
    make = schema.AvroSchema if kind == "avro" else schema.JsonSchema
    topic = _new_topic(f"union-{kind}")
    with conf.create() as client:
        producer = client.create_producer(topic, schema=make(definition=definition))
        for i, u in enumerate(["a", 5, None]):
            producer.send({"id": i, "u": u})
    df = _read(spark, service_url, topic)
    assert df.schema["u"].dataType.simpleString() == "struct<member0:string,member1:bigint>"
    rows = sorted(df.collect(), key=lambda r: r.id)
    assert [None if r.u is None else (r.u.member0, r.u.member1) for r in rows] == [("a", None), (None, 5), None]
