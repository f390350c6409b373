"""Writes through the ``pulsar`` data source to topics with a schema, beyond the ``topic``
option's Avro/JSON topic (test_spark_schema.py): topics named in a column, each encoded with
its own schema, and the primitive schemas (STRING, INT64, ...). Against the real broker and
PySpark local[2]; what Spark writes is read back by the official ``pulsar-client`` with its
schema classes (its Python API has StringSchema, AvroSchema and JsonSchema; the other
primitives are checked byte for byte against the Java client's encoding) and by Spark."""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass
from typing import Any

import pytest
from jvm import error_text as _error_text
from jvm import new_topic as _new_topic

from magnetar import schema
from magnetar.spark import ClientConfig

T0 = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)


@dataclass
class Line:
    sku: str
    qty: int


def _write(df: Any, service_url: str, **options: str) -> None:
    w = df.write.format("pulsar").mode("append").option("service.url", service_url)
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def _read(spark: Any, service_url: str, topic: str) -> Any:
    return spark.read.format("pulsar").option("service.url", service_url).option("topic", topic).load()


def _receive_all(consumer: Any, n: int) -> list[Any]:
    return [consumer.receive(timeout_millis=20_000) for _ in range(n)]


def test_topics_in_a_column_are_encoded_with_each_ones_schema(spark: Any, service_url: str) -> None:
    import pulsar
    from pulsar.schema import AvroSchema, JsonSchema, Long, Record, String, StringSchema

    class Item(Record):
        name = String()
        n = Long()

    avro_t, json_t, str_t, raw_t = (_new_topic(s) for s in ("col-avro", "col-json", "col-str", "col-raw"))
    c = pulsar.Client(service_url)
    try:
        makes = {avro_t: AvroSchema(Item), json_t: JsonSchema(Item), str_t: StringSchema()}
        for t, s in makes.items():  # the topics' schemas, registered by the official client
            c.create_producer(t, schema=s).close()
        subs = {t: c.subscribe(t, "check", schema=s, initial_position=pulsar.InitialPosition.Earliest)
                for t, s in {**makes, raw_t: pulsar.schema.BytesSchema()}.items()}
        records = spark.createDataFrame([(t, f"k{i}", f"i{i}", i) for t in (avro_t, json_t) for i in range(3)],
                                        "topic string, key string, name string, n bigint")
        _write(records, service_url)
        _write(records.filter("n = 0").selectExpr("topic as __topic", "key as __key", "name", "n + 10 as n"),
               service_url, metadataColumns="connector")
        for t in (avro_t, json_t):
            got = sorted((m.partition_key(), m.value().name, m.value().n) for m in _receive_all(subs[t], 4))
            assert got == [("k0", "i0", 0), ("k0", "i0", 10), ("k1", "i1", 1), ("k2", "i2", 2)], t
        # A primitive schema and no schema in the same write: encoded, and bytes as they are.
        values = spark.createDataFrame([(str_t, "héllo"), (raw_t, "raw")], "topic string, value string")
        _write(values, service_url)
        s = subs[str_t].receive(timeout_millis=20_000)
        assert s.value() == "héllo" and s.schema_version()
        r = subs[raw_t].receive(timeout_millis=20_000)
        assert r.data() == b"raw" and not r.schema_version()
    finally:
        c.close()
    rows = _read(spark, service_url, avro_t).collect()
    assert sorted((r.key, r.name, r.n) for r in rows) == [("k0", "i0", 0), ("k0", "i0", 10), ("k1", "i1", 1),
                                                          ("k2", "i2", 2)]


def test_columns_that_do_not_fit_a_column_topic_fail_before_it_gets_a_row(spark: Any, service_url: str,
                                                                          conf: ClientConfig) -> None:
    avro_t, json_t, long_t = _new_topic("misfit-avro"), _new_topic("misfit-json"), _new_topic("misfit-long")
    with conf.create() as client:
        client.create_producer(avro_t, schema=schema.AvroSchema(Line)).close()
        client.create_producer(json_t, schema=schema.JsonSchema(Line)).close()
        client.create_producer(long_t, schema=schema.LongSchema()).close()
        subs = [client.subscribe(t, "check", initial_position="earliest") for t in (avro_t, json_t, long_t)]
        # One task meets both topics: neither gets a row.
        bad = spark.createDataFrame([(json_t, "a", 1), (avro_t, "b", 2)], "topic string, sku string, qtty bigint")
        with pytest.raises(Exception) as info:
            _write(bad.coalesce(1), service_url)
        text = _error_text(info.value)
        assert f"the JSON schema of {json_t}" in text and "'qtty' is not one of its fields (did you mean 'qty'?)" \
            in text and "needs a column 'qty'" in text, text
        with pytest.raises(Exception) as info:
            _write(spark.createDataFrame([(long_t, "1")], "topic string, value string"), service_url)
        text = _error_text(info.value)
        assert f"topic {long_t}, schema INT64" in text and "'value' must be bigint" in text, text
        # Without a payload column no topic can be written: refused before the job.
        with pytest.raises(Exception) as info:
            _write(spark.createDataFrame([(avro_t, "k")], "topic string, key string"), service_url)
        assert "a write needs a 'value' column" in _error_text(info.value)
        for sub in subs:
            assert sub.receive_many(10, timeout=1.0) == []


# (magnetar's schema, the Spark type, values with a null, the payload a Java client writes)
_MS = struct.Struct(">q")
PRIMITIVES: list[tuple[Any, str, list[Any], Any]] = [
    (schema.StringSchema(), "string", ["héllo", "", None], str.encode),
    (schema.BooleanSchema(), "boolean", [True, False, None], lambda v: bytes([v])),
    (schema.ByteSchema(), "tinyint", [-128, 7, None], struct.Struct(">b").pack),
    (schema.ShortSchema(), "smallint", [-2, 300, None], struct.Struct(">h").pack),
    (schema.IntSchema(), "int", [-(2**31), 5, None], struct.Struct(">i").pack),
    (schema.LongSchema(), "bigint", [-42, 2**40, None], _MS.pack),
    (schema.FloatSchema(), "float", [1.5, -0.25, None], struct.Struct(">f").pack),
    (schema.DoubleSchema(), "double", [1e300, -0.5, None], struct.Struct(">d").pack),
    (schema.DateSchema(), "date", [dt.date(2024, 1, 2), dt.date(1969, 12, 31), None],
     lambda v: _MS.pack((v - dt.date(1970, 1, 1)).days * 86_400_000)),
    (schema.TimestampSchema(), "timestamp", [T0, dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=dt.UTC), None],
     lambda v: _MS.pack(round(v.timestamp() * 1000))),
    (schema.TimeSchema(), "time", [dt.time(7, 8, 9, 123000), dt.time(0, 0), None],
     lambda v: _MS.pack(((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000)),
]


def test_a_primitive_schema_encodes_value_as_pulsar_does(spark: Any, service_url: str, conf: ClientConfig) -> None:
    import pulsar

    topics = {s.type.name: _new_topic(f"prim-{s.type.name.lower()}") for s, *_ in PRIMITIVES}
    with conf.create() as client:
        for s, *_ in PRIMITIVES:
            client.create_producer(topics[s.type.name], schema=s).close()
    for s, spark_type, values, _ in PRIMITIVES:
        df = spark.createDataFrame([(f"k{i}", v) for i, v in enumerate(values)], f"key string, value {spark_type}")
        _write(df, service_url, topic=topics[s.type.name])
    c = pulsar.Client(service_url)
    try:
        for s, _, values, java in PRIMITIVES:
            topic = topics[s.type.name]
            official = pulsar.schema.StringSchema() if s.type.name == "STRING" else pulsar.schema.BytesSchema()
            sub = c.subscribe(topic, "check", schema=official, initial_position=pulsar.InitialPosition.Earliest)
            got = {m.partition_key(): m for m in _receive_all(sub, len(values))}
            for i, v in enumerate(values):
                m = got[f"k{i}"]
                assert m.schema_version(), s  # the producer registered the topic's schema
                if v is None:
                    assert m.has_null_value() and m.data() == b"", s
                else:
                    assert not m.has_null_value() and m.data() == java(v), (s, v)
                    if s.type.name == "STRING":
                        assert m.value() == v
    finally:
        c.close()
    with conf.create() as client:
        for s, *_ in PRIMITIVES:  # the topic's own version: no new one registered
            info = client.get_schema(topics[s.type.name])
            assert info is not None and info.version == 0, s
    # Read, written back to a topic of the same schema, read again: the same rows.
    first = _read(spark, service_url, topics["INT64"]).select("key", "value")
    again = _new_topic("prim-again")
    with conf.create() as client:
        client.create_producer(again, schema=schema.LongSchema()).close()
    _write(first, service_url, topic=again)
    back = sorted(_read(spark, service_url, again).select("key", "value").collect())
    assert back == sorted(first.collect()) and [r.value for r in back] == [-42, 2**40, None]


def test_a_binary_value_goes_as_it_is_and_another_type_is_refused(spark: Any, service_url: str,
                                                                 conf: ClientConfig) -> None:
    import pulsar

    topic = _new_topic("prim-bin")
    with conf.create() as client:
        client.create_producer(topic, schema=schema.LongSchema()).close()
    with pytest.raises(Exception) as info:
        _write(spark.createDataFrame([("1",)], "value string"), service_url, topic=topic)
    text = _error_text(info.value)
    assert f"topic {topic}, schema INT64" in text and "'value' must be bigint" in text, text
    _write(spark.createDataFrame([(b"\x00\x01",)], "value binary"), service_url, topic=topic)
    c = pulsar.Client(service_url)
    try:
        sub = c.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
        m = sub.receive(timeout_millis=20_000)
        assert m.data() == b"\x00\x01" and not m.schema_version()  # the user's bytes, no schema attached
    finally:
        c.close()


def test_a_process_asks_the_registry_once_per_topic(conf: ClientConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    from magnetar.spark import _workers, _write_schema

    topic = _new_topic("cache")
    with conf.create() as client:
        client.create_producer(topic, schema=schema.DoubleSchema()).close()
    asked: list[str] = []
    real = _workers.client

    class Counting:
        def __init__(self, c: Any) -> None:
            self.c = c

        def get_schema(self, t: str) -> Any:
            asked.append(t)
            return self.c.get_schema(t)

    monkeypatch.setattr(_workers, "client", lambda conf: Counting(real(conf)))
    first = _write_schema.topic_write_schema(conf, topic)
    assert first is not None and first.type_name == "DOUBLE"
    assert _write_schema.topic_write_schema(conf, topic) is first
    assert asked == [topic]
