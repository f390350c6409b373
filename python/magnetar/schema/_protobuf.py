"""Protobuf messages of the user's generated classes, in two registry types:

- ``ProtobufNativeSchema``: PROTOBUF_NATIVE, with the definition the Java client
  (``ProtobufNativeSchemaUtils``) and the official Python client register: a JSON object with
  the base64 ``FileDescriptorSet`` of the message's file and its imports, the root message's
  full name and its file's name.
- ``ProtobufSchema``: PROTOBUF, with the definition the Java client's ``Schema.PROTOBUF``
  registers: the Avro schema avro-protobuf's ``ProtobufData`` derives from the descriptor
  (``_protobuf_avro.py``), and the ``__PARSING_INFO__`` property.

Encoding and decoding are the generated class's ``SerializeToString`` / ``FromString`` (the
``protobuf`` package). AUTO_CONSUME decodes PROTOBUF_NATIVE payloads with the descriptor from
the registry, to dicts.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Callable

from ..exceptions import SchemaEncodeError
from ._schemas import Schema, SchemaType

__all__ = ["ProtobufNativeSchema", "ProtobufSchema"]


def _protobuf() -> Any:
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("Protobuf schemas need the protobuf package: pip install protobuf") from None
    return descriptor_pb2, descriptor_pool, message, message_factory


def definition_of(descriptor: Any) -> dict[str, str]:
    """The PROTOBUF_NATIVE definition of a message descriptor: its file and every file it
    imports (imports first), as ``protoc --include_imports --descriptor_set_out`` gives."""
    descriptor_pb2 = _protobuf()[0]
    files = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(fd: Any) -> None:
        if fd.name in seen:
            return
        for dep in fd.dependencies:
            add(dep)
        seen.add(fd.name)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        files.file.append(proto)

    add(descriptor.file)
    return {
        "fileDescriptorSet": base64.b64encode(files.SerializeToString()).decode(),
        "rootMessageTypeName": descriptor.full_name,
        "rootFileDescriptorName": descriptor.file.name,
    }


def _is_message_class(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, _protobuf()[2].Message)


class ProtobufNativeSchema(Schema[Any]):
    """``ProtobufNativeSchema(OrderProto)``: messages of a generated Protobuf class, in their
    own binary encoding; ``msg.value`` is an instance of the class."""

    type, name = SchemaType.PROTOBUF_NATIVE, "PROTOBUF_NATIVE"

    def __init__(self, record_cls: Any, *, properties: dict[str, str] | None = None) -> None:
        if not _is_message_class(record_cls):
            raise TypeError(f"ProtobufNativeSchema takes a generated protobuf message class, not {record_cls!r}")
        self.record_cls: Any = record_cls
        # Serialized as the official Python client does, so both register the same bytes.
        self.definition = json.dumps(definition_of(self.record_cls.DESCRIPTOR), indent=True).encode()
        self.properties = dict(properties or {})

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (self.record_cls, self.properties)

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, self.record_cls):
            raise SchemaEncodeError(
                f"ProtobufNativeSchema: expected a {self.record_cls.__name__}, got {type(value).__name__}")
        out: bytes = value.SerializeToString()
        return out

    def decode(self, data: bytes) -> Any:
        return self.record_cls.FromString(data)

    def __repr__(self) -> str:
        return f"ProtobufNativeSchema({self.record_cls.__name__})"


def _rebuild(record_cls: Any, properties: dict[str, str]) -> ProtobufNativeSchema:
    return ProtobufNativeSchema(record_cls, properties=properties)


class ProtobufSchema(ProtobufNativeSchema):
    """``ProtobufSchema(OrderProto)``: messages of a generated Protobuf class in their binary
    encoding, registered as PROTOBUF the way the Java client's ``Schema.PROTOBUF`` registers
    them (an Avro definition derived from the descriptor, and the field list as the
    ``__PARSING_INFO__`` property), so both share a schema version."""

    type, name = SchemaType.PROTOBUF, "PROTOBUF"

    def __init__(self, record_cls: Any, *, properties: dict[str, str] | None = None) -> None:
        super().__init__(record_cls, properties=properties)
        from ._protobuf_avro import avro_definition, parsing_info

        descriptor = self.record_cls.DESCRIPTOR
        self.definition = avro_definition(descriptor).encode()
        self.properties = {**self.properties, "__PARSING_INFO__": parsing_info(descriptor)}
        self._given = dict(properties or {})

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_avro, (self.record_cls, self._given)

    def __repr__(self) -> str:
        return f"ProtobufSchema({self.record_cls.__name__})"


def _rebuild_avro(record_cls: Any, properties: dict[str, str]) -> ProtobufSchema:
    return ProtobufSchema(record_cls, properties=properties)


def message_class(definition: bytes | str | dict[str, str]) -> Any:
    """The message class a PROTOBUF_NATIVE definition describes, built from its descriptors."""
    descriptor_pb2, descriptor_pool, _, message_factory = _protobuf()
    d = definition if isinstance(definition, dict) else json.loads(definition)
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(d["fileDescriptorSet"]))
    pool = descriptor_pool.DescriptorPool()
    pending = {f.name: f for f in files.file}

    def add(name: str) -> None:
        proto = pending.pop(name, None)
        if proto is None:
            return
        for dep in proto.dependency:
            add(dep)
        pool.Add(proto)

    for name in list(pending):
        add(name)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(d["rootMessageTypeName"]))


def native_decoder(definition: bytes) -> Callable[[bytes], Any]:
    """AUTO_CONSUME's decoder of PROTOBUF_NATIVE payloads: to dicts by field name (nested
    messages to dicts, or None when unset; repeated fields to lists; maps to dicts; enums to
    their value names)."""
    cls = message_class(definition)
    return lambda data: to_dict(cls.FromString(data))


def _repeated(f: Any) -> bool:
    is_repeated = getattr(f, "is_repeated", None)
    return bool(is_repeated) if is_repeated is not None else f.label == f.LABEL_REPEATED


def _scalar(f: Any, v: Any) -> Any:
    if f.message_type is not None:
        return to_dict(v)
    if f.enum_type is not None:
        ev = f.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else v
    return v


def to_dict(msg: Any) -> dict[str, Any]:
    """A Protobuf message as a dict by field name (every field, defaults included)."""
    out: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        v = getattr(msg, f.name)
        mt = f.message_type
        if mt is not None and mt.GetOptions().map_entry:
            vf = mt.fields_by_name["value"]
            out[f.name] = {k: _scalar(vf, x) for k, x in v.items()}
        elif _repeated(f):
            out[f.name] = [_scalar(f, x) for x in v]
        elif mt is not None and not msg.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _scalar(f, v)
    return out
