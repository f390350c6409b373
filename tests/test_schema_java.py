"""Schemas shared with the Java client on the real broker: a Java POJO producer's Avro and JSON
schemas read by magnetar with a matching dataclass, and magnetar's read by a Java POJO
consumer. The Java side is ``tests/interop/SchemaInterop.java``, compiled at test time
against the broker distribution's jars."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from jvm import java_program

import magnetar
from magnetar import schema
from magnetar.testing import Standalone

TIMEOUT = 15.0
SOURCE = Path(__file__).with_name("interop") / "SchemaInterop.java"


@dataclass
class Order:
    id: int
    amount: float
    note: Optional[str] = None


KINDS = {"avro": schema.AvroSchema, "json": schema.JsonSchema}


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., list[str]]:
    run = java_program(tmp_path_factory.mktemp("java-schema"), SOURCE)
    return lambda *args: [line for line in run(*args) if line.startswith(("ORDER ", "PROTOBUF "))]


def registered(broker: Standalone, topic: str) -> dict[str, Any]:
    tenant, ns, name = topic.split("://", 1)[1].split("/")
    return broker.request("GET", f"/admin/v2/schemas/{tenant}/{ns}/{urllib.parse.quote(name, safe='')}/schema")


@pytest.mark.parametrize("kind", list(KINDS))
def test_java_pojo_producer_magnetar_consumer(java: Any, client: magnetar.Client, broker: Standalone, topic: str, kind: str) -> None:
    java("produce", broker.service_url, topic, kind, "2")
    reg = registered(broker, topic)
    assert reg["type"] == kind.upper() and reg["version"] == 0
    theirs = json.loads(reg["data"])
    mine = json.loads(KINDS[kind](Order).definition)
    assert theirs["name"] == mine["name"] == "Order"
    # The same fields and types as the Java POJO; Java adds a namespace and orders the fields
    # its own way (Avro resolves by name, so each reads the other's data).
    assert {f["name"]: f["type"] for f in theirs["fields"]} == {f["name"]: f["type"] for f in mine["fields"]}
    consumer = client.subscribe(topic, "s", schema=KINDS[kind](Order), initial_position="earliest")
    got = [consumer.receive(TIMEOUT) for _ in range(2)]
    assert [m.value for m in got] == [Order(0, 0.5, "n0"), Order(1, 1.5, None)]
    assert {m.schema_version for m in got} == {(0).to_bytes(8, "big")}
    # AUTO_CONSUME: Avro records to dicts of every field, JSON as json.loads reads it (Java's
    # Jackson leaves a null field out).
    auto = client.create_reader(topic, schema=schema.AutoConsumeSchema())
    second = {"id": 1, "amount": 1.5, "note": None} if kind == "avro" else {"id": 1, "amount": 1.5}
    assert [auto.read_next(TIMEOUT).value for _ in range(2)] == [{"id": 0, "amount": 0.5, "note": "n0"}, second]


@pytest.mark.parametrize("kind", list(KINDS))
def test_magnetar_producer_java_pojo_consumer(java: Any, client: magnetar.Client, broker: Standalone, topic: str, kind: str) -> None:
    producer = client.create_producer(topic, schema=KINDS[kind](Order))
    producer.send(Order(7, 7.5, "seven"))
    producer.send(Order(8, 8.5))
    assert java("consume", broker.service_url, topic, kind, "2") == ["ORDER 7 7.5 seven", "ORDER 8 8.5 -"]


@pytest.mark.parametrize("encoding", ["inline", "separated"])
def test_java_key_value_read_by_magnetar(java: Any, client: magnetar.Client, broker: Standalone, topic: str, encoding: str) -> None:
    java("produce-kv", broker.service_url, topic, encoding, "2")
    info = client.get_schema(topic)
    mine = schema.KeyValueSchema(schema.StringSchema(), schema.AvroSchema(Order), encoding)
    assert info is not None and info.type == schema.SchemaType.KEY_VALUE
    for k in ("kv.encoding.type", "key.schema.type", "key.schema.name", "value.schema.type", "key.schema.properties"):
        assert info.properties[k] == mine.properties[k], k
    consumer = client.subscribe(topic, "s", schema=mine, initial_position="earliest")
    got = [consumer.receive(TIMEOUT).value for _ in range(2)]
    assert got == [("k0", Order(0, 0.5, "n0")), ("k1", Order(1, 1.5, None))]
    assert got[0].key == "k0" and got[0].value == Order(0, 0.5, "n0")


@pytest.mark.parametrize("encoding", ["inline", "separated"])
def test_magnetar_key_value_read_by_java(java: Any, client: magnetar.Client, broker: Standalone, topic: str, encoding: str) -> None:
    """SEPARATED puts the key's encoding base64 in the message key, as Java reads it."""
    mine = schema.KeyValueSchema(schema.StringSchema(), schema.AvroSchema(Order), encoding)
    producer = client.create_producer(topic, schema=mine)
    producer.send(("k7", Order(7, 7.5, "seven")))
    producer.send(schema.KeyValue("k8", Order(8, 8.5)))
    assert java("consume-kv", broker.service_url, topic, encoding, "2") == [
        "ORDER 7 7.5 seven k7", "ORDER 8 8.5 - k8"]
    assert registered(broker, topic)["properties"]["kv.encoding.type"] == encoding.upper()


def test_protobuf_definition_is_the_java_clients(java: Any) -> None:
    """``schema.ProtobufSchema`` registers what Java's ``Schema.PROTOBUF`` does for the same
    message: avro-protobuf's Avro schema (byte for byte) and the ``__PARSING_INFO__`` property."""
    from test_schema_protobuf import Order as OrderProto

    from magnetar.schema._protobuf import definition_of

    d = definition_of(OrderProto.DESCRIPTOR)
    out = java("protobuf-avro", d["fileDescriptorSet"], d["rootFileDescriptorName"], "Order")
    mine = schema.ProtobufSchema(OrderProto)
    assert out == [f"PROTOBUF AVRO {mine.definition.decode()}",
                   f"PROTOBUF PARSING {mine.properties['__PARSING_INFO__']}"]
