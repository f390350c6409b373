"""Schemas shared with the official Python client (``pulsar-client``) on the real broker:
Avro, JSON and string, each way, on one schema version; the definition the official client's
``Record`` registers (read back over the admin API) is the one magnetar generates for the
same class, and the definition magnetar registers is the one the official client reads."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import pytest

import magnetar
from magnetar import schema
from magnetar.testing import Standalone

import pulsar  # noqa: E402 - a hard test dependency (requirements-dev.txt)
from pulsar.schema import AvroSchema, Double, JsonSchema, Long, Record, String, StringSchema

TIMEOUT = 15.0


class Order(Record):  # the official client's record
    id = Long(required=True)
    amount = Double(required=True)
    note = String(required_default=True)


@dataclass
class MOrder:  # the same record for magnetar
    id: int
    amount: float
    note: Optional[str] = None


MOrder.__name__ = "Order"

KINDS = {
    "avro": (AvroSchema, schema.AvroSchema, "AVRO"),
    "json": (JsonSchema, schema.JsonSchema, "JSON"),
}


@pytest.fixture(scope="module")
def official(service_url: str) -> Iterator[Any]:
    c = pulsar.Client(service_url, operation_timeout_seconds=30)
    yield c
    c.close()


def registered(broker: Standalone, topic: str) -> dict[str, Any]:
    tenant, ns, name = topic.split("://", 1)[1].split("/")
    return broker.request("GET", f"/admin/v2/schemas/{tenant}/{ns}/{urllib.parse.quote(name, safe='')}/schema")


def same(official_order: Any, order: MOrder) -> bool:
    return (official_order.id, official_order.amount, official_order.note) == (order.id, order.amount, order.note)


@pytest.mark.parametrize("kind", list(KINDS))
def test_official_producer_magnetar_consumer(official: Any, client: magnetar.Client, broker: Standalone, topic: str, kind: str) -> None:
    theirs, ours, type_name = KINDS[kind]
    producer = official.create_producer(topic, schema=theirs(Order))
    producer.send(Order(id=1, amount=9.5, note="n"))
    producer.send(Order(id=2, amount=0.5))
    reg = registered(broker, topic)
    assert reg["type"] == type_name and reg["version"] == 0
    mine = ours(MOrder)
    assert reg["data"].encode() == mine.definition, "magnetar generates the definition the official Record registers"
    consumer = client.subscribe(topic, "s", schema=mine, initial_position="earliest")
    got = [consumer.receive(TIMEOUT) for _ in range(2)]
    assert [m.value for m in got] == [MOrder(1, 9.5, "n"), MOrder(2, 0.5, None)]
    assert {m.schema_version for m in got} == {(0).to_bytes(8, "big")}
    # magnetar producing on the same topic is the same schema version.
    client.create_producer(topic, schema=mine).send(MOrder(3, 3.0))
    assert consumer.receive(TIMEOUT).schema_version == (0).to_bytes(8, "big")
    assert registered(broker, topic)["version"] == 0


@pytest.mark.parametrize("kind", list(KINDS))
def test_magnetar_producer_official_consumer(official: Any, client: magnetar.Client, broker: Standalone, topic: str, kind: str) -> None:
    theirs, ours, type_name = KINDS[kind]
    producer = client.create_producer(topic, schema=ours(MOrder))
    producer.send(MOrder(1, 9.5, "n"))
    producer.send(MOrder(2, 0.5))
    reg = registered(broker, topic)
    assert reg["type"] == type_name and reg["version"] == 0
    assert reg["data"].encode() == theirs(Order).schema_info().schema().encode(), "the official client's own definition"
    consumer = official.subscribe(topic, "s", schema=theirs(Order), initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(int(TIMEOUT * 1000)) for _ in range(2)]
    assert same(got[0].value(), MOrder(1, 9.5, "n")) and same(got[1].value(), MOrder(2, 0.5))
    # The official producer on the same topic finds the same version.
    official.create_producer(topic, schema=theirs(Order)).send(Order(id=3, amount=3.0))
    assert same(consumer.receive(int(TIMEOUT * 1000)).value(), MOrder(3, 3.0))
    assert registered(broker, topic)["version"] == 0
    consumer.close()


def test_string_both_ways(official: Any, client: magnetar.Client, broker: Standalone, topic: str) -> None:
    official.create_producer(topic, schema=StringSchema()).send("from official")
    reader = client.create_reader(topic, schema=schema.StringSchema())
    assert reader.read_next(TIMEOUT).value == "from official"
    client.create_producer(topic, schema=schema.StringSchema()).send("from magnetar")
    assert reader.read_next(TIMEOUT).value == "from magnetar"
    consumer = official.subscribe(topic, "s", schema=StringSchema(), initial_position=pulsar.InitialPosition.Earliest)
    assert [consumer.receive(int(TIMEOUT * 1000)).value() for _ in range(2)] == ["from official", "from magnetar"]
    assert registered(broker, topic)["type"] == "STRING"
    consumer.close()


def test_evolution_across_clients(official: Any, client: magnetar.Client, topic: str) -> None:
    """The official client writes the old record, magnetar the new one with an added optional
    field; magnetar reads both with both classes."""

    class Old(Record):
        id = Long(required=True)

    @dataclass
    class New:
        id: int
        extra: Optional[str] = None

    @dataclass
    class OldM:
        id: int

    Old.__name__ = New.__name__ = OldM.__name__ = "Rec"
    official.create_producer(topic, schema=AvroSchema(Old)).send(Old(id=1))
    client.create_producer(topic, schema=schema.AvroSchema(New)).send(New(2, "x"))
    new = client.create_reader(topic, schema=schema.AvroSchema(New))
    assert [new.read_next(TIMEOUT).value for _ in range(2)] == [New(1, None), New(2, "x")]
    old = client.create_reader(topic, schema=schema.AvroSchema(OldM))
    assert [old.read_next(TIMEOUT).value for _ in range(2)] == [OldM(1), OldM(2)]


@pytest.mark.parametrize("kind", list(KINDS))
def test_auto_produce_forwards_the_official_clients_bytes(official: Any, client: magnetar.Client, topic: str,
                                                           kind: str) -> None:
    """Bytes the official client encoded, forwarded by magnetar's AUTO_PRODUCE producer under the
    topic's schema, read by the official client; bytes that do not fit are refused."""
    theirs = KINDS[kind][0](Order)
    official.create_producer(topic, schema=theirs).send(Order(id=1, amount=1.5, note="a"))
    forwarder = client.create_producer(topic, schema=schema.AutoProduceBytesSchema())
    forwarder.send(theirs.encode(Order(id=2, amount=2.5)))
    with pytest.raises(magnetar.SchemaEncodeError):
        forwarder.send(b"\x01\x02 not a record")
    consumer = official.subscribe(topic, "s", schema=theirs, initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(int(TIMEOUT * 1000)) for _ in range(2)]
    assert same(got[0].value(), MOrder(1, 1.5, "a")) and same(got[1].value(), MOrder(2, 2.5))
    consumer.close()
