"""The official client's schema classes on magnetar's schemas (and its engine's Avro codec):
``BytesSchema``, ``StringSchema``, ``JsonSchema(Record)`` and ``AvroSchema(Record | None,
schema_definition)``."""

from __future__ import annotations

import base64
import json
from enum import Enum
from typing import Any

from ... import _core
from ...schema import _schemas as _native
from ...schema._schemas import Schema, SchemaType
from .._pulsar import SchemaInfo
from .definition import Array, CustomEnum, Map, Record

__all__ = ["AvroSchema", "BytesSchema", "JsonSchema", "ProtobufNativeSchema", "Schema", "StringSchema"]


def _info(schema: Schema) -> SchemaInfo:
    i = schema.info()
    kind = SchemaType.NONE if i.type == SchemaType.BYTES else SchemaType(i.type)
    return SchemaInfo(kind, i.name, i.definition, i.properties)


class BytesSchema(_native.BytesSchema):
    """Raw bytes (nothing registered)."""

    def schema_info(self) -> SchemaInfo:
        return _info(self)


class StringSchema(_native.StringSchema):
    """UTF-8 strings."""

    def schema_info(self) -> SchemaInfo:
        return _info(self)


class ProtobufNativeSchema(Schema[Any]):
    """Protocol Buffers messages of one generated class, registered with its file descriptors."""

    type, name = SchemaType.PROTOBUF_NATIVE, "PROTOBUF_NATIVE"

    def __init__(self, message_cls: Any) -> None:
        from google.protobuf import descriptor_pb2  # type: ignore[import-untyped,unused-ignore]
        from google.protobuf.message import Message as _PbMessage  # type: ignore[import-untyped,unused-ignore]

        if not (isinstance(message_cls, type) and issubclass(message_cls, _PbMessage)):
            raise TypeError(f"ProtobufNativeSchema takes a protobuf message class, not {message_cls!r}")
        cls: Any = message_cls
        self._cls = cls
        descriptor = cls.DESCRIPTOR
        files = descriptor_pb2.FileDescriptorSet()
        seen: set[str] = set()

        def add(fd: Any) -> None:
            if fd.name in seen:
                return
            seen.add(fd.name)
            for dep in fd.dependencies:
                add(dep)
            fd.CopyToProto(files.file.add())

        add(descriptor.file)
        self.definition = json.dumps({
            "fileDescriptorSet": base64.b64encode(files.SerializeToString()).decode(),
            "rootMessageTypeName": descriptor.full_name,
            "rootFileDescriptorName": descriptor.file.name,
        }).encode()

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, self._cls):
            raise TypeError(f"expected a {self._cls.__name__}, not {type(value).__name__}")
        return bytes(value.SerializeToString())

    def decode(self, data: bytes) -> Any:
        return self._cls.FromString(data)

    def schema_info(self) -> SchemaInfo:
        return _info(self)


def _classes(record_cls: type[Record], out: dict[str, Any]) -> dict[str, Any]:
    """Every record and enum class a record class's definition names, by name."""
    out.setdefault(record_cls.__name__, record_cls)
    for field in record_cls._fields.values():
        _field_classes(field, out)
    return out


def _field_classes(field: Any, out: dict[str, Any]) -> None:
    if isinstance(field, Record):
        if type(field).__name__ not in out:
            _classes(type(field), out)
    elif isinstance(field, CustomEnum):
        out.setdefault(field.enum_type.__name__, field.enum_type)
    elif isinstance(field, Array):
        _field_classes(field.array_type, out)
    elif isinstance(field, Map):
        _field_classes(field.value_type, out)
    elif isinstance(field, type) and issubclass(field, Record):
        _classes(field, out)


class _RecordSchema:
    """What JSON and Avro record schemas share: the definition from the record class, values
    checked to be of that class (TypeError otherwise, as in the official client)."""

    _record_cls: Any
    definition: bytes

    def _setup(self, record_cls: Any) -> None:
        self._record_cls = record_cls
        if record_cls is not None:
            classes = _classes(record_cls, {})
            ctors = {name: (cls if isinstance(cls, type) and issubclass(cls, Record) else _enum_ctor(cls))
                     for name, cls in classes.items()}
            self._classes = classes
            self._codec = _core._AvroCodec(self.definition.decode(), ctors)

    def _check(self, value: Any) -> Any:
        if self._record_cls is not None and not isinstance(value, self._record_cls):
            raise TypeError(f"Invalid record obj of type {type(value)} - expected type is {self._record_cls}")
        return value

    def schema_info(self) -> SchemaInfo:
        return _info(self)  # type: ignore[arg-type]


def _enum_ctor(cls: type[Enum]) -> Any:
    return lambda symbol: cls[symbol]


class JsonSchema(_RecordSchema, _native.JsonSchema):
    """JSON payloads of a :class:`Record` class."""

    def __init__(self, record_cls: type[Record]) -> None:
        if not (isinstance(record_cls, type) and issubclass(record_cls, Record)):
            raise TypeError("JsonSchema takes a Record class")
        _native.JsonSchema.__init__(self, None, record_cls.schema())
        self._setup(record_cls)

    def encode(self, value: Any) -> bytes:
        return self._codec.encode_json(self._check(value))

    def decode(self, data: bytes) -> Any:
        return self._codec.decode_json(data)


class AvroSchema(_RecordSchema, _native.AvroSchema):
    """Avro payloads of a :class:`Record` class, or of an explicit definition (dicts)."""

    def __init__(self, record_cls: type[Record] | None, schema_definition: dict[str, Any] | None = None) -> None:
        if record_cls is None and schema_definition is None:
            raise AssertionError("The param record_cls and schema_definition shouldn't be both None")
        if record_cls is not None and not (isinstance(record_cls, type) and issubclass(record_cls, Record)):
            raise TypeError("AvroSchema takes a Record class")
        definition = record_cls.schema() if record_cls is not None else schema_definition
        _native.AvroSchema.__init__(self, None, definition)
        self._setup(record_cls)

    def encode(self, value: Any) -> bytes:
        if self._record_cls is None and not isinstance(value, dict):
            raise TypeError(f"Invalid type {type(value)} - expected a dict")
        return self._codec.encode(self._check(value))


__all__ += ["SchemaType"]
