"""Schemas that take the topic's: ``AutoConsumeSchema`` (decode each message with the schema it
was written with) and ``AutoProduceBytesSchema`` (send bytes checked against the topic's
schema)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from .. import _core
from ..exceptions import InvalidConfiguration, SchemaEncodeError
from ._keyvalue import KeyValue, separated_key, unframe
from ._schemas import (
    BooleanSchema,
    ByteSchema,
    DateSchema,
    DoubleSchema,
    FloatSchema,
    IntSchema,
    LongSchema,
    Schema,
    SchemaInfo,
    SchemaType,
    ShortSchema,
    StringSchema,
    TimeSchema,
    TimestampSchema,
)

if TYPE_CHECKING:
    from .._core import Message

__all__ = ["AutoConsumeSchema", "AutoProduceBytesSchema"]

_PRIMITIVES: dict[int, Schema[Any]] = {
    s.type: s for s in (StringSchema(), BooleanSchema(), ByteSchema(), ShortSchema(), IntSchema(), LongSchema(),
                        FloatSchema(), DoubleSchema(), DateSchema(), TimeSchema(), TimestampSchema())
}

Decoder = Callable[[bytes], Any]


def _kind_name(kind: int) -> str:
    try:
        return SchemaType(kind).name
    except ValueError:
        return str(kind)


def _side(properties: dict[str, str], side: str) -> tuple[int, dict[str, str]]:
    """The type and properties of a KeyValue schema's key or value (from its properties)."""
    name = properties.get(f"{side}.schema.type", "BYTES")
    try:
        kind = SchemaType[name]
    except KeyError:
        raise ValueError(f"unknown {side} schema type {name!r}") from None
    return kind, json.loads(properties.get(f"{side}.schema.properties") or "{}")


def decoder(kind: int, definition: bytes, properties: dict[str, str]) -> Decoder:
    """What AUTO_CONSUME decodes a payload written with this (non-KeyValue) schema with."""
    if kind == SchemaType.AVRO:
        return _core._AvroCodec(definition.decode(), {}).decode
    if kind == SchemaType.JSON:
        return json.loads
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind].decode
    if kind in (SchemaType.NONE, SchemaType.BYTES):
        return bytes
    if kind == SchemaType.PROTOBUF_NATIVE:
        from ._protobuf import native_decoder

        return native_decoder(definition)
    raise ValueError(f"AUTO_CONSUME does not decode {_kind_name(kind)} payloads")


class AutoConsumeSchema(Schema[Any]):
    """Decodes each message with the schema it was written with, as the registry has it
    (fetched once per version): Avro records to dicts (nested dicts and lists), JSON to what
    ``json.loads`` gives, strings and the primitives to their values, KeyValue (both
    encodings) to a :class:`KeyValue` of those, Protobuf-native messages to dicts, and
    messages without a schema version to bytes. Nothing is registered; it cannot encode."""

    name = "AUTO_CONSUME"

    def __init__(self) -> None:
        self._decoders: dict[tuple[int, bytes], Decoder] = {}

    def _wire(self) -> None:
        return None

    def __reduce__(self) -> tuple[Any, ...]:
        return AutoConsumeSchema, ()

    def encode(self, value: Any) -> bytes:
        raise SchemaEncodeError("AutoConsumeSchema cannot encode; give the producer a schema")

    def decode(self, data: bytes) -> Any:
        return data

    def _decoder(self, kind: int, definition: bytes, properties: dict[str, str]) -> Decoder:
        d = self._decoders.get((kind, definition))
        if d is None:
            d = self._decoders[(kind, definition)] = decoder(kind, definition, properties)
        return d

    def _decode_with(self, msg: Message) -> Any:
        writer = msg._writer_schema() if msg.schema_version else None
        if writer is None:
            return msg.data
        kind, definition, properties = writer[1], writer[2], writer[3]
        if kind != SchemaType.KEY_VALUE:
            return self._decoder(kind, definition, properties)(msg.data)
        definitions = unframe(definition)
        decoders = [self._side_decoder(properties, side, d) for side, d in zip(("key", "value"), definitions)]
        k: bytes | None
        v: bytes | None
        if properties.get("kv.encoding.type") == "SEPARATED":
            k, v = separated_key(msg), msg.data
        else:
            k, v = unframe(msg.data)
        return KeyValue(None if k is None else decoders[0](k), None if v is None else decoders[1](v))

    def _side_decoder(self, properties: dict[str, str], side: str, definition: bytes | None) -> Decoder:
        kind, props = _side(properties, side)
        return self._decoder(kind, definition or b"", props)


def checker(info: SchemaInfo | None) -> Callable[[bytes], None] | None:
    """What checks a payload against the topic's schema ``info`` before it is sent (None:
    nothing to check). Avro and JSON are checked by the engine without building values."""
    if info is None:
        return None
    kind, definition = info.type, info.definition
    if kind == SchemaType.AVRO:
        return _core._AvroCodec(definition.decode(), {}).check
    if kind == SchemaType.JSON:
        try:
            return _core._AvroCodec(definition.decode(), {}).check_json
        except ValueError:
            # Not an Avro definition (a JSON Schema document): the payload must be JSON.
            return json.loads
    if kind == SchemaType.STRING:
        return _utf8
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind].decode
    if kind == SchemaType.KEY_VALUE:
        key_def, value_def = unframe(definition)
        sides = []
        for side, d in (("key", key_def), ("value", value_def)):
            k, props = _side(info.properties, side)
            sides.append(checker(SchemaInfo(side, k, d or b"", props)))
        if info.properties.get("kv.encoding.type") == "SEPARATED":
            return sides[1]

        def check_inline(data: bytes) -> None:
            for part, check in zip(unframe(data), sides):
                if part is not None and check is not None:
                    check(part)

        return check_inline
    return None


def _utf8(data: bytes) -> None:
    data.decode()


class AutoProduceBytesSchema(Schema[bytes]):
    """Bytes already encoded, checked against the topic's schema before they are sent.

    ``create_producer(topic, schema=AutoProduceBytesSchema())`` fetches the topic's schema from
    the registry and registers the producer with it (so its messages carry that schema's
    version); ``send`` takes bytes and raises :class:`~magnetar.SchemaEncodeError`, before
    anything is sent, when they do not decode with it (Avro, JSON, KeyValue, strings and the
    primitives are checked; Protobuf payloads pass as they are). On a topic without a schema the
    bytes pass through. ``AutoProduceBytesSchema(schema)`` checks against (and registers)
    ``schema`` instead of the topic's."""

    name = "AUTO_PRODUCE"

    def __init__(self, schema: Schema[Any] | None = None) -> None:
        if schema is not None and not isinstance(schema, Schema):
            raise TypeError(f"schema must be a magnetar.schema object, not {schema!r}")
        self._user = schema
        self._target: SchemaInfo | None = None
        self._bound = False
        self._check: Callable[[bytes], Any] | None = None
        if schema is not None and schema.type != SchemaType.BYTES:
            self._set(schema.info())
        elif schema is not None:
            self._bound = True

    def _set(self, info: SchemaInfo | None) -> None:
        self._target, self._bound = info, True
        try:
            self._check = checker(info)
        except ValueError as e:
            raise InvalidConfiguration(f"AutoProduceBytesSchema cannot check payloads against the topic's "
                                       f"schema: {e}") from e

    def _bind(self, info: SchemaInfo | None) -> AutoProduceBytesSchema:
        """A copy checking against the topic's schema ``info`` (None: the topic has none)."""
        out = AutoProduceBytesSchema()
        out._set(info)
        return out

    @property
    def topic_schema(self) -> SchemaInfo | None:
        """The schema payloads are checked against (None: the topic has none, or not yet fetched)."""
        return self._target

    def _wire(self) -> tuple[str, int, bytes, dict[str, str]] | None:
        t = self._target
        if t is None or t.type in (SchemaType.NONE, SchemaType.BYTES):
            return None
        return t.name, int(t.type), t.definition, dict(t.properties)

    def __reduce__(self) -> tuple[Any, ...]:
        return _restore, (self._user, self._target, self._bound)

    def encode(self, value: bytes) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise SchemaEncodeError(f"AutoProduceBytesSchema: expected bytes, got {type(value).__name__}")
        data = bytes(value)
        if self._check is not None:
            try:
                self._check(data)
            except Exception as e:
                kind = _kind_name(self._target.type) if self._target is not None else "?"
                raise SchemaEncodeError(f"AutoProduceBytesSchema: the payload does not fit the topic's "
                                        f"{kind} schema: {e}") from e
        return data

    def decode(self, data: bytes) -> bytes:
        return data

    def __repr__(self) -> str:
        return f"AutoProduceBytesSchema({self._user!r})" if self._user is not None else "AutoProduceBytesSchema()"


def _restore(user: Schema[Any] | None, target: SchemaInfo | None, bound: bool) -> AutoProduceBytesSchema:
    out = AutoProduceBytesSchema(user)
    if bound and user is None:
        out._set(target)
    return out
