"""Schemas taken from the topic, on the real broker: AUTO_PRODUCE bytes (checked against the
topic's schema before anything is sent, passed through on a topic without one), KeyValue
SEPARATED produced, and AUTO_CONSUME of KeyValue in both encodings."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
from dataclasses import dataclass
from typing import Optional

import pytest

import magnetar
from magnetar import schema
from magnetar.testing import Standalone

TIMEOUT = 15.0


@dataclass
class Order:
    id: int
    amount: float
    note: Optional[str] = None


def test_auto_produce_checks_bytes_against_the_topics_avro_schema(client: magnetar.Client, topic: str) -> None:
    avro = schema.AvroSchema(Order)
    client.create_producer(topic, schema=avro).send(Order(1, 1.0))
    consumer = client.subscribe(topic, "s", schema=avro, initial_position="earliest")
    producer = client.create_producer(topic, schema=schema.AutoProduceBytesSchema())
    producer.send(avro.encode(Order(2, 2.5, "two")))
    bad = [b"not avro", avro.encode(Order(3, 3.0)) + b"\x00", schema.JsonSchema(Order).encode(Order(4, 4.0)), b""]
    for payload in bad:
        with pytest.raises(magnetar.SchemaEncodeError, match="topic's AVRO schema"):
            producer.send(payload)
    with pytest.raises(magnetar.SchemaEncodeError):
        producer.send_many([avro.encode(Order(5, 5.0)), b"bad"])
    with pytest.raises(magnetar.SchemaEncodeError, match="expected bytes"):
        producer.send(Order(6, 6.0))  # type: ignore[arg-type]
    producer.send(avro.encode(Order(7, 7.0)))
    got = [consumer.receive(TIMEOUT) for _ in range(3)]
    assert [m.value for m in got] == [Order(1, 1.0), Order(2, 2.5, "two"), Order(7, 7.0)], "nothing bad was sent"
    assert {m.schema_version for m in got} == {(0).to_bytes(8, "big")}, "the producer took the topic's version"
    info = client.get_schema(topic)
    assert info is not None and info.version == 0


def test_auto_produce_checks_json_strings_and_primitives(client: magnetar.Client, topic: str) -> None:
    cases = [
        (schema.JsonSchema(Order), b'{"id": 1, "amount": 2.5, "extra": true}', [b'{"id": "1", "amount": 2.5}',
                                                                               b'{"amount": 2.5}', b"{"]),
        (schema.StringSchema(), "héllo".encode(), [b"\xff\xfe"]),
        (schema.IntSchema(), (7).to_bytes(4, "big"), [b"\x00\x07", b"12345"]),
    ]
    for i, (s, good, bads) in enumerate(cases):
        t = f"{topic}-{i}"
        client.create_producer(t, schema=s)
        producer = client.create_producer(t, schema=schema.AutoProduceBytesSchema())
        for payload in bads:
            with pytest.raises(magnetar.SchemaEncodeError, match=f"topic's {s.type.name} schema"):
                producer.send(payload)
        producer.send(good)
        reader = client.create_reader(t, schema=s)
        assert reader.read_next(TIMEOUT).data == good
        assert not reader.has_message_available(), "only the good payload was sent"


def test_auto_produce_passes_bytes_on_a_topic_without_schema(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, schema=schema.AutoProduceBytesSchema())
    producer.send(b"\x00anything")
    reader = client.create_reader(topic)
    msg = reader.read_next(TIMEOUT)
    assert msg.data == b"\x00anything" and msg.schema_version is None
    assert client.get_schema(topic) is None, "nothing was registered"


def test_auto_produce_with_a_given_schema_registers_it(client: magnetar.Client, topic: str) -> None:
    avro = schema.AvroSchema(Order)
    s = schema.AutoProduceBytesSchema(avro)
    assert pickle.loads(pickle.dumps(s)).topic_schema == avro.info()
    producer = client.create_producer(topic, schema=s)
    with pytest.raises(magnetar.SchemaEncodeError):
        producer.send(b"junk")
    producer.send(avro.encode(Order(1, 1.0)))
    info = client.get_schema(topic)
    assert info is not None and info.type == schema.SchemaType.AVRO and info.definition == avro.definition


def test_auto_schemas_are_refused_on_the_wrong_side(client: magnetar.Client, topic: str) -> None:
    with pytest.raises(magnetar.InvalidConfiguration, match="producers"):
        client.subscribe(topic, "s", schema=schema.AutoProduceBytesSchema())
    with pytest.raises(magnetar.InvalidConfiguration, match="consumers"):
        client.create_producer(topic, schema=schema.AutoConsumeSchema())


def test_auto_produce_asyncio_twin(service_url: str, topic: str) -> None:
    avro = schema.AvroSchema(Order)

    async def main() -> list[object]:
        async with magnetar.AsyncClient(service_url) as client:
            await (await client.create_producer(topic, schema=avro)).send(Order(1, 1.0))
            producer = await client.create_producer(topic, schema=schema.AutoProduceBytesSchema())
            with pytest.raises(magnetar.SchemaEncodeError):
                await producer.send(b"junk")
            await producer.send(avro.encode(Order(2, 2.0)))
            consumer = await client.subscribe(topic, "s", schema=avro, initial_position="earliest")
            return [(await consumer.receive()).value for _ in range(2)]

    assert asyncio.run(main()) == [Order(1, 1.0), Order(2, 2.0)]


def test_key_value_separated_puts_the_key_in_the_message_key(client: magnetar.Client, topic: str) -> None:
    s = schema.KeyValueSchema(schema.IntSchema(), schema.JsonSchema(Order), "separated")
    producer = client.create_producer(topic, schema=s)
    producer.send((5, Order(1, 2.0)))
    producer.send_many([schema.KeyValue(6, Order(2, 3.0))])
    with pytest.raises(magnetar.SchemaEncodeError):
        producer.send((None, None))
    reader = client.create_reader(topic, schema=s)
    got = [reader.read_next(TIMEOUT) for _ in range(2)]
    assert [m.value for m in got] == [(5, Order(1, 2.0)), (6, Order(2, 3.0))]
    assert got[0].key == base64.b64encode((5).to_bytes(4, "big")).decode() and got[0]._key_b64
    assert json.loads(got[0].data) == {"id": 1, "amount": 2.0, "note": None}, "the payload is the value alone"
    info = client.get_schema(topic)
    assert info is not None and info.properties["kv.encoding.type"] == "SEPARATED"


@pytest.mark.parametrize("encoding", ["inline", "separated"])
def test_auto_consume_decodes_key_value(client: magnetar.Client, topic: str, encoding: str) -> None:
    s = schema.KeyValueSchema(schema.StringSchema(), schema.AvroSchema(Order), encoding)
    client.create_producer(topic, schema=s).send(("k", Order(1, 2.0, "n")))
    reader = client.create_reader(topic, schema=schema.AutoConsumeSchema())
    value = reader.read_next(TIMEOUT).value
    assert isinstance(value, schema.KeyValue)
    assert value == ("k", {"id": 1, "amount": 2.0, "note": "n"})


def test_auto_produce_on_a_partitioned_topic(client: magnetar.Client, broker: Standalone, topic: str) -> None:
    broker.create_partitioned_topic(topic, 2)
    avro = schema.AvroSchema(Order)
    client.create_producer(topic, schema=avro)
    producer = client.create_producer(topic, schema=schema.AutoProduceBytesSchema())
    with pytest.raises(magnetar.SchemaEncodeError):
        producer.send(b"junk")
    producer.send_many([avro.encode(Order(i, 1.0)) for i in range(4)])
    consumer = client.subscribe(topic, "s", schema=avro, initial_position="earliest")
    assert sorted(consumer.receive(TIMEOUT).value.id for _ in range(4)) == [0, 1, 2, 3]
