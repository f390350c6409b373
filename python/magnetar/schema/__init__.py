"""Schemas: typed messages that interoperate with the other Pulsar clients.

::

    from dataclasses import dataclass
    from magnetar import schema

    @dataclass
    class Order:
        id: int
        amount: float
        note: str | None = None

    producer = client.create_producer(topic, schema=schema.AvroSchema(Order))
    producer.send(Order(1, 9.5))
    consumer = client.subscribe(topic, "s", schema=schema.AvroSchema(Order))
    consumer.receive().value        # Order(id=1, amount=9.5, note=None)

See docs/schemas.md for the rule that turns classes into Avro definitions.
"""

from __future__ import annotations

from ._auto import AutoConsumeSchema, AutoProduceBytesSchema
from ._schemas import (
    AvroSchema,
    BooleanSchema,
    ByteSchema,
    BytesSchema,
    DateSchema,
    DoubleSchema,
    FloatSchema,
    IntSchema,
    JsonSchema,
    LongSchema,
    Schema,
    SchemaInfo,
    SchemaType,
    ShortSchema,
    StringSchema,
    TimeSchema,
    TimestampSchema,
)
from ._definition import record_definition
from ._keyvalue import KeyValue, KeyValueSchema
from ._protobuf import ProtobufNativeSchema, ProtobufSchema

#: Aliases by wire type name.
Int8Schema = ByteSchema
Int16Schema = ShortSchema
Int32Schema = IntSchema
Int64Schema = LongSchema

__all__ = [
    "AutoConsumeSchema", "AutoProduceBytesSchema", "AvroSchema", "BooleanSchema", "ByteSchema", "BytesSchema", "DateSchema", "DoubleSchema",
    "FloatSchema", "Int16Schema", "Int32Schema", "Int64Schema", "Int8Schema", "IntSchema",
    "JsonSchema", "KeyValue", "KeyValueSchema", "LongSchema", "ProtobufNativeSchema", "ProtobufSchema", "Schema", "SchemaInfo", "SchemaType", "ShortSchema",
    "StringSchema", "TimeSchema", "TimestampSchema", "record_definition",
]
