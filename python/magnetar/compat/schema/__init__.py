"""``pulsar.schema``: the official client's record classes and schemas, on magnetar's schemas.
Records produce the same Avro definitions as the official client's, so both register the same
schema on a topic."""

from __future__ import annotations

from .definition import (Array, Boolean, Bytes, CustomEnum, Double, Field, Float, Integer, Long, Map, Null,
                         Record, String)
from .schema import AvroSchema, BytesSchema, JsonSchema, ProtobufNativeSchema, Schema, SchemaType, StringSchema

__all__ = ["Array", "AvroSchema", "Boolean", "Bytes", "BytesSchema", "CustomEnum", "Double", "Field", "Float",
           "Integer", "JsonSchema", "Long", "Map", "Null", "ProtobufNativeSchema", "Record", "Schema", "SchemaType", "String",
           "StringSchema"]
