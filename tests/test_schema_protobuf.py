"""Protobuf-native schemas on the real broker: magnetar's PROTOBUF_NATIVE definition is the one
the official Python client registers (same bytes, same version), messages pass both ways
between the two clients, and AUTO_CONSUME decodes them with the registry's descriptor.

The message class is built from a FileDescriptorProto here (what ``protoc`` would generate a
module for), so the tests need no compiler."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import magnetar
from magnetar import schema
from magnetar.testing import Standalone

import pulsar  # noqa: E402 - a hard test dependency (requirements-dev.txt)
from pulsar.schema import ProtobufNativeSchema as OfficialProtobufNative

TIMEOUT = 15.0
F = descriptor_pb2.FieldDescriptorProto


def _order_class() -> Any:
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/orders.proto", package="shop", syntax="proto3")
    kind = fdp.enum_type.add(name="Kind")
    kind.value.add(name="RETAIL", number=0)
    kind.value.add(name="BULK", number=1)
    order = fdp.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    order.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.field.add(name="amount", number=2, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    order.field.add(name="note", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="kind", number=4, type=F.TYPE_ENUM, type_name=".shop.Kind", label=F.LABEL_OPTIONAL)
    order.field.add(name="lines", number=5, type=F.TYPE_MESSAGE, type_name=".shop.Order.Line",
                    label=F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


Order = _order_class()


def order(i: int) -> Any:
    o = Order(id=i, amount=i + 0.5, note=f"n{i}", kind=i % 2)
    o.lines.add(sku=f"s{i}", qty=i)
    return o


@pytest.fixture(scope="module")
def official(service_url: str) -> Iterator[Any]:
    c = pulsar.Client(service_url, operation_timeout_seconds=30)
    yield c
    c.close()


def registered(broker: Standalone, topic: str) -> dict[str, Any]:
    tenant, ns, name = topic.split("://", 1)[1].split("/")
    return broker.request("GET", f"/admin/v2/schemas/{tenant}/{ns}/{urllib.parse.quote(name, safe='')}/schema")


def test_definition_is_the_official_clients() -> None:
    mine = schema.ProtobufNativeSchema(Order)
    theirs = OfficialProtobufNative(Order).schema_info()
    assert mine.definition == theirs.schema().encode()
    assert mine.decode(mine.encode(order(3))) == order(3)
    with pytest.raises(magnetar.SchemaEncodeError, match="expected a Order"):
        mine.encode(b"raw")
    with pytest.raises(TypeError):
        schema.ProtobufNativeSchema(dict)


def test_magnetar_to_official_and_back(official: Any, client: magnetar.Client, broker: Standalone, topic: str) -> None:
    mine = schema.ProtobufNativeSchema(Order)
    client.create_producer(topic, schema=mine).send(order(1))
    reg = registered(broker, topic)
    assert reg["type"] == "PROTOBUF_NATIVE" and reg["version"] == 0
    consumer = official.subscribe(topic, "s", schema=OfficialProtobufNative(Order),
                                  initial_position=pulsar.InitialPosition.Earliest)
    assert consumer.receive(int(TIMEOUT * 1000)).value() == order(1)
    official.create_producer(topic, schema=OfficialProtobufNative(Order)).send(order(2))
    assert registered(broker, topic)["version"] == 0, "the official client found the same version"
    reader = client.create_reader(topic, schema=mine)
    got = [reader.read_next(TIMEOUT) for _ in range(2)]
    assert [m.value for m in got] == [order(1), order(2)]
    assert {m.schema_version for m in got} == {(0).to_bytes(8, "big")}
    consumer.close()


def test_auto_consume_decodes_with_the_registrys_descriptor(client: magnetar.Client, topic: str) -> None:
    client.create_producer(topic, schema=schema.ProtobufNativeSchema(Order)).send(order(1))
    client.create_producer(topic, schema=schema.ProtobufNativeSchema(Order)).send(Order(id=2))
    reader = client.create_reader(topic, schema=schema.AutoConsumeSchema())
    assert [reader.read_next(TIMEOUT).value for _ in range(2)] == [
        {"id": 1, "amount": 1.5, "note": "n1", "kind": "BULK", "lines": [{"sku": "s1", "qty": 1}]},
        {"id": 2, "amount": 0.0, "note": "", "kind": "RETAIL", "lines": []},
    ]


def test_protobuf_avro_described_round_trip(client: magnetar.Client, broker: Standalone, topic: str) -> None:
    """PROTOBUF (the Avro-described type; its definition is checked against Java's in
    tests/test_schema_java.py): registered, sent and read back as the class."""
    mine = schema.ProtobufSchema(Order)
    client.create_producer(topic, schema=mine).send(order(4))
    reg = registered(broker, topic)
    assert reg["type"] == "PROTOBUF" and reg["data"].encode() == mine.definition
    assert reg["properties"]["__PARSING_INFO__"] == mine.properties["__PARSING_INFO__"]
    reader = client.create_reader(topic, schema=mine)
    assert reader.read_next(TIMEOUT).value == order(4)
    auto = client.create_reader(topic, schema=schema.AutoConsumeSchema())
    with pytest.raises(magnetar.SchemaDecodeError, match="does not decode PROTOBUF"):
        auto.read_next(TIMEOUT).value
