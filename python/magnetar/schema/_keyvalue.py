"""``KeyValueSchema``: a key and a value with a schema each, as the Java client encodes them.

The registered definition is the two schemas' definitions, each behind its length as a 4-byte
big-endian int, with the properties ``key.schema.{name,type,properties}``,
``value.schema.{name,type,properties}`` and ``kv.encoding.type``. INLINE payloads are the two
encodings in the same framing (length -1 for None); with SEPARATED the key's encoding travels
base64 in the message key (flagged ``partition_key_b64_encoded``) and the payload is the value.
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


def separated_key(msg: Message) -> bytes | None:
    """The key's encoding of a SEPARATED message: the base64 key decoded, or a plain key's
    UTF-8 bytes (as the Java client reads one)."""
    if msg.key is None:
        return None
    return base64.b64decode(msg.key) if msg._key_b64 else msg.key.encode()


def unframe(data: bytes) -> tuple[bytes | None, bytes | None]:
    """The key's and the value's parts of an INLINE payload or a KeyValue definition."""
    return _unframe(data)


class KeyValueSchema(Schema[KeyValue]):
    """``KeyValueSchema(StringSchema(), AvroSchema(Order))``: ``send((key, value))`` (or a
    :class:`KeyValue`), ``msg.value`` is a :class:`KeyValue`. ``encoding`` is ``"inline"``
    (both in the payload) or ``"separated"`` (the key's encoding base64 in the message key,
    which then routes the message; the payload is the value's encoding)."""

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

    @staticmethod
    def _pair(value: Any) -> tuple[Any, Any]:
        if isinstance(value, tuple) and len(value) == 2:
            return value[0], value[1]
        try:
            return value.key, value.value
        except AttributeError:
            raise SchemaEncodeError(f"KeyValueSchema: expected a (key, value) pair, got {type(value).__name__}") \
                from None

    def encode(self, value: Any) -> bytes:
        """The payload: with SEPARATED, the value's encoding only (as Java's ``encode``)."""
        k, v = self._pair(value)
        if self.encoding == "SEPARATED":
            return self._separated_value(v)
        return _frame(None if k is None else self.key_schema._encode(k),
                      None if v is None else self.value_schema._encode(v))

    def _separated_value(self, v: Any) -> bytes:
        if v is None:
            raise SchemaEncodeError("KeyValueSchema: a SEPARATED value cannot be None")
        return self.value_schema._encode(v)

    def _encode(self, value: Any) -> Any:
        if self.encoding != "SEPARATED":
            return super()._encode(value)
        # The payload and the message key (base64 of the key's encoding), which the engine
        # stamps with partition_key_b64_encoded.
        k, v = self._pair(value)
        payload = self._separated_value(v)
        key = None if k is None else base64.b64encode(self.key_schema._encode(k)).decode()
        return payload, key

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
            k, v = separated_key(msg), msg.data
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
