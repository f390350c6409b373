"""Schemas against the real broker, magnetar on both ends: registration and versions, typed
send and receive (Avro, JSON, string, primitives), readers and the asyncio twins, evolution,
the broker's refusal (IncompatibleSchema), and values that do not fit either way."""

from __future__ import annotations

import asyncio
import datetime as dt
import urllib.parse
from dataclasses import dataclass
from typing import Any, Optional

import pytest
from records import V1, V2

import magnetar
from magnetar import schema
from magnetar.testing import Standalone

TIMEOUT = 15.0


@dataclass
class Order:
    id: int
    amount: float
    note: Optional[str] = None


def registered(broker: Standalone, topic: str) -> dict[str, Any]:
    """The topic's latest schema as the admin API reports it."""
    rest = topic.split("://", 1)[1]
    tenant, ns, name = rest.split("/")
    return broker.request("GET", f"/admin/v2/schemas/{tenant}/{ns}/{urllib.parse.quote(name, safe='')}/schema")


def test_avro_producer_registers_and_consumer_decodes(client: magnetar.Client, broker: Standalone, topic: str) -> None:
    s = schema.AvroSchema(Order)
    consumer = client.subscribe(topic, "s", schema=s)
    producer = client.create_producer(topic, schema=s)
    producer.send(Order(1, 9.5))
    producer.send(Order(2, 1.0, "two"))
    got = [consumer.receive(TIMEOUT) for _ in range(2)]
    assert [m.value for m in got] == [Order(1, 9.5), Order(2, 1.0, "two")]
    assert got[0].data == s.encode(Order(1, 9.5)), "msg.data stays the encoded bytes"
    assert got[0].schema_version == (0).to_bytes(8, "big")
    reg = registered(broker, topic)
    assert reg["type"] == "AVRO" and reg["version"] == 0
    assert reg["data"].encode() == s.definition
    info = client.get_schema(topic)
    assert info is not None and info.type == schema.SchemaType.AVRO and info.version == 0
    assert info.definition == s.definition
    assert client.get_schema(topic, 0) == info
    assert client.get_schema(f"{topic}-none") is None


@pytest.mark.parametrize(
    "s,value",
    [
        (schema.StringSchema(), "héllo"),
        (schema.JsonSchema(Order), Order(3, 2.5, "x")),
        (schema.IntSchema(), -7),
        (schema.DoubleSchema(), 0.25),
        (schema.BooleanSchema(), True),
        (schema.TimestampSchema(), dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc)),
    ],
    ids=lambda x: type(x).__name__ if isinstance(x, schema.Schema) else "",
)
def test_kinds_round_trip_with_a_reader(client: magnetar.Client, broker: Standalone, topic: str, s: Any, value: Any) -> None:
    producer = client.create_producer(topic, schema=s)
    producer.send(value)
    reader = client.create_reader(topic, schema=s)
    msg = reader.read_next(TIMEOUT)
    assert msg.value == value
    assert registered(broker, topic)["type"] == s.type.name


def test_bytes_is_the_default_and_registers_nothing(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, schema=schema.BytesSchema())
    consumer = client.subscribe(topic, "s")
    producer.send(b"raw")
    msg = consumer.receive(TIMEOUT)
    assert msg.value == b"raw" and msg.schema_version is None
    assert client.get_schema(topic) is None


def test_value_that_does_not_fit_raises_before_sending(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "s", schema=schema.AvroSchema(Order))
    producer = client.create_producer(topic, schema=schema.AvroSchema(Order))
    with pytest.raises(magnetar.SchemaEncodeError):
        producer.send(Order("x", 1.0))  # type: ignore[arg-type]
    with pytest.raises(magnetar.SchemaEncodeError):
        producer.send_async({"id": 1})
    with pytest.raises(magnetar.SchemaEncodeError):
        producer.send_many([Order(1, 1.0), "no"])
    producer.send(Order(4, 4.0))
    assert consumer.receive(TIMEOUT).value == Order(4, 4.0), "nothing of the refused sends went out"


def test_bad_payload_raises_on_value_and_the_consumer_goes_on(client: magnetar.Client, topic: str) -> None:
    s = schema.AvroSchema(Order)
    consumer = client.subscribe(topic, "s", schema=s)
    typed = client.create_producer(topic, schema=s)
    raw = client.create_producer(topic)
    typed.send(Order(1, 1.0))
    bad_id = raw.send(b"\xff\xff\xff")
    typed.send(Order(2, 2.0))
    first, bad, last = (consumer.receive(TIMEOUT) for _ in range(3))
    assert first.value == Order(1, 1.0)
    with pytest.raises(magnetar.SchemaDecodeError) as e:
        bad.value
    assert str(bad_id) in str(e.value) and topic in str(e.value) and "schema version None" in str(e.value)
    assert bad.data == b"\xff\xff\xff"
    consumer.ack(bad)
    assert last.value == Order(2, 2.0)


def test_incompatible_schema_is_refused_with_the_brokers_message(client: magnetar.Client, topic: str) -> None:
    @dataclass
    class Other:
        name: str

    Other.__name__ = "Order"
    client.create_producer(topic, schema=schema.AvroSchema(Order)).send(Order(1, 1.0))
    with pytest.raises(magnetar.IncompatibleSchema) as e:
        client.create_producer(topic, schema=schema.AvroSchema(Other))
    assert e.value.code == 18 and "ncompatible" in str(e.value)


def test_evolution_old_and_new_messages_with_both_classes(client: magnetar.Client, broker: Standalone, topic: str) -> None:
    client.create_producer(topic, schema=schema.AvroSchema(V1)).send(V1(1))
    client.create_producer(topic, schema=schema.AvroSchema(V2)).send(V2(2, "x"))
    assert registered(broker, topic)["version"] == 1
    new = client.create_reader(topic, schema=schema.AvroSchema(V2))
    old = client.create_reader(topic, schema=schema.AvroSchema(V1))
    got_new = [new.read_next(TIMEOUT) for _ in range(2)]
    assert [m.value for m in got_new] == [V2(1, None), V2(2, "x")]
    assert [m.schema_version for m in got_new] == [(0).to_bytes(8, "big"), (1).to_bytes(8, "big")]
    assert [old.read_next(TIMEOUT).value for _ in range(2)] == [V1(1), V1(2)]


def test_asyncio_twins_take_the_same_schema_objects(service_url: str, topic: str) -> None:
    async def main() -> list[Any]:
        async with magnetar.AsyncClient(service_url) as c:
            s = schema.JsonSchema(Order)
            consumer = await c.subscribe(topic, "s", schema=s)
            producer = await c.create_producer(topic, schema=s)
            await producer.send(Order(5, 5.0))
            reader = await c.create_reader(topic, schema=s)
            info = await c.get_schema(topic)
            assert info is not None and info.type == schema.SchemaType.JSON
            return [(await consumer.receive()).value, (await reader.read_next()).value]

    assert asyncio.run(asyncio.wait_for(main(), 60)) == [Order(5, 5.0), Order(5, 5.0)]


def test_consumers_send_their_schema_on_subscribe(client: magnetar.Client, topic: str) -> None:
    @dataclass
    class Other:
        name: str

    Other.__name__ = "Order"
    consumer = client.subscribe(topic, "s", schema=schema.AvroSchema(Order))
    info = client.get_schema(topic)
    assert info is not None and info.definition == schema.AvroSchema(Order).definition, "registered by the subscribe"
    with pytest.raises(magnetar.IncompatibleSchema):
        client.subscribe(topic, "other", schema=schema.AvroSchema(Other))
    with pytest.raises(magnetar.IncompatibleSchema):
        client.create_reader(topic, schema=schema.AvroSchema(Other))
    consumer.close()


def test_auto_consume_decodes_each_message_with_its_writer_schema(client: magnetar.Client, topic: str) -> None:
    @dataclass
    class V2:
        id: int
        amount: float
        note: Optional[str] = None
        extra: Optional[list[int]] = None

    V2.__name__ = "Order"
    client.create_producer(topic, schema=schema.AvroSchema(Order)).send(Order(1, 1.5))
    client.create_producer(topic, schema=schema.AvroSchema(V2)).send(V2(2, 2.5, "x", [1, 2]))
    client.create_producer(topic).send(b"raw")
    reader = client.create_reader(topic, schema=schema.AutoConsumeSchema())
    assert [reader.read_next(TIMEOUT).value for _ in range(3)] == [
        {"id": 1, "amount": 1.5, "note": None},
        {"id": 2, "amount": 2.5, "note": "x", "extra": [1, 2]},
        b"raw",
    ]
    other = topic + "-json"
    client.create_producer(other, schema=schema.JsonSchema(Order)).send(Order(3, 3.5))
    client.create_producer(other + "-int", schema=schema.IntSchema()).send(42)
    consumer = client.subscribe([other, other + "-int"], "s", schema=schema.AutoConsumeSchema(), initial_position="earliest")
    got = sorted((consumer.receive(TIMEOUT).value for _ in range(2)), key=lambda v: isinstance(v, dict))
    assert got == [42, {"id": 3, "amount": 3.5, "note": None}]


def test_key_value_inline_round_trip(client: magnetar.Client, topic: str) -> None:
    s = schema.KeyValueSchema(schema.StringSchema(), schema.JsonSchema(Order))
    client.create_producer(topic, schema=s).send(("k", Order(1, 2.0)))
    client.create_producer(topic, schema=s).send(schema.KeyValue(None, Order(2, 3.0)))
    reader = client.create_reader(topic, schema=s)
    assert [reader.read_next(TIMEOUT).value for _ in range(2)] == [("k", Order(1, 2.0)), (None, Order(2, 3.0))]
    info = client.get_schema(topic)
    assert info is not None and info.type == schema.SchemaType.KEY_VALUE and info.definition == s.definition
