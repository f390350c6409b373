"""``KeyValueSchema``: a key and a value with a schema each, as the Java client encodes them.

The registered definition is the two schemas' definitions, each behind its length as a 4-byte
big-endian int, with the properties ``key.schema.{name,type,properties}``,
``value.schema.{name,type,properties}`` and ``kv.encoding.type``. INLINE payloads are the two
encodings in the same framing (length -1 for None); with SEPARATED the key travels base64 in
the message key and the payload is the value (magnetar reads SEPARATED; it produces INLINE).
"""

from __future__ import annotations

import base64
import json
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

from ..exceptions import SchemaEncodeError
from ._schemas import AvroSchema, Schema, SchemaType

if TYPE_CHECKING:
    from .._core import Message

__all__ = ["KeyValue", "KeyValueSchema"]

_LEN = struct.Struct(">i")


class KeyValue(NamedTuple):
    """A decoded key/value pair."""

    key: Any
    value: Any


def _frame(a: bytes | None, b: bytes | None) -> bytes:
    out = bytearray()
    for part in (a, b):
        if part is None:
            out += _LEN.pack(-1)
        else:
            out += _LEN.pack(len(part)) + part
    return bytes(out)


def _unframe(data: bytes) -> tuple[bytes | None, bytes | None]:
    parts: list[bytes | None] = []
    pos = 0
    for _ in range(2):
        (n,) = _LEN.unpack_from(data, pos)
        pos += 4
        if n < 0:
            parts.append(None)
            continue
        if pos + n > len(data):
            raise ValueError("truncated key/value data")
        parts.append(bytes(data[pos:pos + n]))
        pos += n
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes left over after the key/value")
    return parts[0], parts[1]


class KeyValueSchema(Schema[KeyValue]):
    """``KeyValueSchema(StringSchema(), AvroSchema(Order))``: ``send((key, value))`` (or a
    :class:`KeyValue`), ``msg.value`` is a :class:`KeyValue`. ``encoding`` is ``"inline"``
    (both in the payload; the only one magnetar produces) or ``"separated"`` (read only)."""

    type, name = SchemaType.KEY_VALUE, "KeyValue"

    def __init__(self, key: Schema[Any], value: Schema[Any], encoding: str = "inline") -> None:
        if encoding.upper() not in ("INLINE", "SEPARATED"):
            raise ValueError("encoding must be 'inline' or 'separated'")
        self.key_schema, self.value_schema, self.encoding = key, value, encoding.upper()
        self.definition = _frame(key.definition, value.definition)
        self.properties = {"kv.encoding.type": self.encoding}
        for side, s in (("key", key), ("value", value)):
            self.properties[f"{side}.schema.name"] = s.name
            self.properties[f"{side}.schema.type"] = SchemaType(s.type).name
            self.properties[f"{side}.schema.properties"] = json.dumps(s.properties)

    def __reduce__(self) -> tuple[Any, ...]:
        return KeyValueSchema, (self.key_schema, self.value_schema, self.encoding.lower())

    def encode(self, value: Any) -> bytes:
        if self.encoding != "INLINE":
            raise SchemaEncodeError("magnetar produces KeyValue INLINE only")
        if isinstance(value, tuple) and len(value) == 2:
            k, v = value
        else:
            k, v = getattr(value, "key"), getattr(value, "value")
        return _frame(None if k is None else self.key_schema._encode(k),
                      None if v is None else self.value_schema._encode(v))

    def decode(self, data: bytes) -> KeyValue:
        k, v = _unframe(data) if self.encoding == "INLINE" else (None, data)
        return KeyValue(None if k is None else self.key_schema.decode(k),
                        None if v is None else self.value_schema.decode(v))

    def _decode_with(self, msg: Message) -> KeyValue:
        writer = msg._writer_schema() if msg.schema_version else None
        encoding = writer[3].get("kv.encoding.type", self.encoding) if writer else self.encoding
        k: bytes | None
        v: bytes | None
        if encoding == "SEPARATED":
            k, v = (base64.b64decode(msg.key) if msg.key is not None else None), msg.data
        else:
            k, v = _unframe(msg.data)
        writers = _unframe(writer[2]) if writer and writer[1] == SchemaType.KEY_VALUE else (None, None)
        return KeyValue(self._side(self.key_schema, k, writers[0]), self._side(self.value_schema, v, writers[1]))

    @staticmethod
    def _side(s: Schema[Any], data: bytes | None, writer: bytes | None) -> Any:
        if data is None:
            return None
        if isinstance(s, AvroSchema) and writer:
            return s._decode_as(data, writer)
        return s.decode(data)

    def __repr__(self) -> str:
        return f"KeyValueSchema({self.key_schema!r}, {self.value_schema!r}, {self.encoding.lower()!r})"
