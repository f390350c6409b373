"""The schema classes. A schema turns values into payloads (``encode``) and back
(``decode``); producers, consumers and readers take one as ``schema=``.

What runs where: the engine (Rust) announces the schema to the broker, stamps every message
with the producer's schema version and fetches writer schemas from the registry (once per
version); the encoding and decoding of values run here, one call per message
(``_encode`` on send, ``_decode_message`` on ``msg.value``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import functools
import json
import operator
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Type, TypeVar

from .. import _core
from ..exceptions import SchemaDecodeError, SchemaEncodeError
from . import _avro, _convert
from ._definition import record_definition

if TYPE_CHECKING:
    from .._core import Message

T = TypeVar("T")

__all__ = [
    "AvroSchema", "BooleanSchema", "ByteSchema", "BytesSchema", "DateSchema", "DoubleSchema",
    "FloatSchema", "IntSchema", "JsonSchema", "LongSchema", "Schema", "SchemaInfo", "SchemaType",
    "ShortSchema", "StringSchema", "TimeSchema", "TimestampSchema",
]


class SchemaType(enum.IntEnum):
    """The registry's schema types (the wire ``Schema.Type``); ``BYTES`` is client-side only."""

    BYTES = -1
    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20


@dataclass(frozen=True)
class SchemaInfo:
    """A schema as the registry stores it (:meth:`magnetar.Client.get_schema`)."""

    name: str
    type: SchemaType | int
    definition: bytes
    properties: dict[str, str] = field(default_factory=dict)
    version: int | None = None
    """The registry's version number (None when not read from the registry)."""

    @property
    def definition_json(self) -> Any:
        """The definition parsed as JSON (Avro and JSON schemas)."""
        return json.loads(self.definition)

    @classmethod
    def _from_wire(cls, t: tuple[str, int, bytes, dict[str, str], bytes]) -> SchemaInfo:
        name, kind, data, props, version = t
        try:
            kind = SchemaType(kind)
        except ValueError:
            pass
        return cls(name, kind, data, props, int.from_bytes(version, "big", signed=True) if version else None)


def schema_info(wire: tuple[str, int, bytes, dict[str, str], bytes] | None) -> SchemaInfo | None:
    """The engine's answer to ``get_schema`` as a :class:`SchemaInfo`."""
    return None if wire is None else SchemaInfo._from_wire(wire)


def schema_version(version: int | bytes | None) -> bytes | None:
    """A version number (or the registry's bytes) as the registry's 8 bytes."""
    if version is None or isinstance(version, bytes):
        return version
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"version must be an int or bytes, not {version!r}")
    return version.to_bytes(8, "big", signed=True)


def version_number(version: bytes | None) -> int | None:
    """The registry's version bytes (8, big-endian) as a number."""
    return int.from_bytes(version, "big", signed=True) if version else None


class Schema(Generic[T]):
    """Base class of the schemas."""

    type: SchemaType = SchemaType.BYTES
    name: str = "BYTES"
    definition: bytes = b""
    properties: dict[str, str] = {}

    def encode(self, value: T) -> bytes:
        """The payload of ``value``; raises :class:`~magnetar.SchemaEncodeError` when it does not fit."""
        raise NotImplementedError

    def decode(self, data: bytes) -> T:
        """The value of a payload written with this schema."""
        raise NotImplementedError

    def info(self) -> SchemaInfo:
        """What this schema registers."""
        return SchemaInfo(self.name, self.type, self.definition, dict(self.properties))

    def _wire(self) -> tuple[str, int, bytes, dict[str, str]] | None:
        if self.type == SchemaType.BYTES:
            return None
        return self.name, int(self.type), self.definition, dict(self.properties)

    def _encode(self, value: Any) -> bytes:
        try:
            return self.encode(value)
        except SchemaEncodeError:
            raise
        except (ValueError, TypeError, OverflowError, struct.error, AttributeError) as e:
            raise SchemaEncodeError(f"{type(self).__name__}: {e}") from e

    def _decode_with(self, msg: Message) -> T:
        return self.decode(msg.data)

    def _decode_message(self, msg: Message) -> T:
        try:
            return self._decode_with(msg)
        except Exception as e:
            version = version_number(msg.schema_version)
            raise SchemaDecodeError(
                f"cannot decode message {msg.message_id} of {msg.topic} (schema version {version}) "
                f"with {type(self).__name__}: {e}"
            ) from e

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class BytesSchema(Schema[bytes]):
    """Payloads as they are (the default): nothing is registered."""

    def encode(self, value: bytes) -> bytes:
        if isinstance(value, str):
            return value.encode()
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise SchemaEncodeError(f"BytesSchema: expected bytes, got {type(value).__name__}")
        return bytes(value)

    def decode(self, data: bytes) -> bytes:
        return data


class StringSchema(Schema[str]):
    """UTF-8 text."""

    type = SchemaType.STRING
    name = "String"

    def encode(self, value: str) -> bytes:
        if not isinstance(value, str):
            raise SchemaEncodeError(f"StringSchema: expected a str, got {type(value).__name__}")
        return value.encode()

    def decode(self, data: bytes) -> str:
        return data.decode()


class _Struct(Schema[Any]):
    """A fixed-size big-endian primitive, as the Java client encodes it."""

    _fmt: struct.Struct
    _py: tuple[type, ...] = (int,)

    def _check(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, self._py):
            raise SchemaEncodeError(f"{type(self).__name__}: expected {self._py[0].__name__}, got {value!r}")
        return value

    def encode(self, value: Any) -> bytes:
        try:
            return self._fmt.pack(self._check(value))
        except struct.error as e:
            raise SchemaEncodeError(f"{type(self).__name__}: {value!r} does not fit: {e}") from None

    def decode(self, data: bytes) -> Any:
        return self._fmt.unpack(data)[0]


class BooleanSchema(_Struct):
    type, name, _fmt = SchemaType.BOOLEAN, "Boolean", struct.Struct(">?")

    def _check(self, value: Any) -> Any:
        if not isinstance(value, bool):
            raise SchemaEncodeError(f"BooleanSchema: expected a bool, got {value!r}")
        return value

    def decode(self, data: bytes) -> bool:
        if len(data) != 1:
            raise ValueError(f"expected 1 byte, got {len(data)}")
        return data != b"\x00"


class ByteSchema(_Struct):
    type, name, _fmt = SchemaType.INT8, "INT8", struct.Struct(">b")


class ShortSchema(_Struct):
    type, name, _fmt = SchemaType.INT16, "INT16", struct.Struct(">h")


class IntSchema(_Struct):
    type, name, _fmt = SchemaType.INT32, "INT32", struct.Struct(">i")


class LongSchema(_Struct):
    type, name, _fmt = SchemaType.INT64, "INT64", struct.Struct(">q")


class FloatSchema(_Struct):
    type, name, _fmt, _py = SchemaType.FLOAT, "Float", struct.Struct(">f"), (float, int)


class DoubleSchema(_Struct):
    type, name, _fmt, _py = SchemaType.DOUBLE, "Double", struct.Struct(">d"), (float, int)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MS = struct.Struct(">q")


class TimestampSchema(Schema[_dt.datetime]):
    """A datetime as milliseconds since the epoch (8 bytes, big-endian: Java's
    ``java.sql.Timestamp``); naive datetimes are taken as UTC; decodes to an aware UTC datetime."""

    type, name = SchemaType.TIMESTAMP, "Timestamp"

    def encode(self, value: _dt.datetime) -> bytes:
        if not isinstance(value, _dt.datetime):
            raise SchemaEncodeError(f"{type(self).__name__}: expected a datetime, got {value!r}")
        return _MS.pack(_avro._millis(value))

    def decode(self, data: bytes) -> _dt.datetime:
        return _EPOCH + _dt.timedelta(milliseconds=_MS.unpack(data)[0])


class DateSchema(Schema[_dt.date]):
    """A date as the milliseconds since the epoch of its midnight UTC (8 bytes, big-endian:
    Java's ``java.util.Date``); decodes to the UTC date of the instant."""

    type, name = SchemaType.DATE, "Date"

    def encode(self, value: _dt.date) -> bytes:
        if isinstance(value, _dt.datetime):
            return _MS.pack(_avro._millis(value))
        if not isinstance(value, _dt.date):
            raise SchemaEncodeError(f"DateSchema: expected a date, got {value!r}")
        return _MS.pack((value - _dt.date(1970, 1, 1)).days * 86_400_000)

    def decode(self, data: bytes) -> _dt.date:
        return (_EPOCH + _dt.timedelta(milliseconds=_MS.unpack(data)[0])).date()


class TimeSchema(Schema[_dt.time]):
    """A time of day as milliseconds since midnight (8 bytes, big-endian: Java's ``java.sql.Time``)."""

    type, name = SchemaType.TIME, "Time"

    def encode(self, value: _dt.time) -> bytes:
        if not isinstance(value, _dt.time):
            raise SchemaEncodeError(f"TimeSchema: expected a time, got {value!r}")
        ms = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
        return _MS.pack(ms)

    def decode(self, data: bytes) -> _dt.time:
        ms = _MS.unpack(data)[0] % 86_400_000
        return (_dt.datetime.min + _dt.timedelta(milliseconds=ms)).time()


def _constructors(classes: dict[str, type]) -> dict[str, Any]:
    """What the engine's codec calls to make each named type: records with their fields as
    keyword arguments, enums with a symbol name."""
    out: dict[str, Any] = {}
    for name, cls in classes.items():
        if isinstance(cls, type) and issubclass(cls, enum.Enum):
            out[name] = functools.partial(operator.getitem, cls)
        elif dataclasses.is_dataclass(cls) or hasattr(cls, "model_validate") or cls.__init__ is not object.__init__:
            out[name] = cls
        else:
            out[name] = functools.partial(_construct_plain, cls)
    return out


def _rebuild(kind: Any, record_cls: Any, definition: Any, namespace: Any, properties: Any) -> Any:
    return kind(record_cls, definition, namespace=namespace, properties=properties)


def _construct_plain(cls: type, **fields: Any) -> Any:
    return _convert.construct(cls, fields)


class _Record(Schema[Any]):
    """A record schema with an Avro definition, from a class or an explicit definition."""

    def __init__(self, record_cls: type | None = None, definition: str | bytes | dict[str, Any] | None = None,
                 *, namespace: str | None = None, properties: dict[str, str] | None = None) -> None:
        if record_cls is None and definition is None:
            raise TypeError(f"{type(self).__name__} needs a class or a definition")
        self._args = (record_cls, definition, namespace, properties)
        classes: dict[str, type] = {}
        if definition is None:
            assert record_cls is not None
            parsed, classes = record_definition(record_cls, namespace)
            # Serialized as the official Python client does, so the same record registers the same bytes.
            text = json.dumps(parsed, indent=True)
        elif isinstance(definition, dict):
            parsed, text = definition, json.dumps(definition, indent=True)
        else:
            text = definition.decode() if isinstance(definition, bytes) else definition
            parsed = json.loads(text)
        if record_cls is not None and isinstance(parsed, dict) and "name" in parsed:
            classes.setdefault(parsed["name"], record_cls)
        self.record_cls = record_cls
        self.schema = parsed
        self.definition = text.encode()
        self.properties = dict(properties or {})
        self._names = _avro.names_of(parsed)
        self._classes = classes
        # Encoding and decoding run in the engine: one call per message.
        self._codec = _core._AvroCodec(text, _constructors(classes))

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable (Spark UDFs, multiprocessing): rebuilt from the arguments; the class
        # travels by reference, as pickle takes classes.
        record_cls, definition, namespace, properties = self._args
        return _rebuild, (type(self), record_cls, definition, namespace, properties)

    def __repr__(self) -> str:
        what = self.record_cls.__name__ if self.record_cls is not None else "definition"
        return f"{type(self).__name__}({what})"

    def _checked(self, value: Any) -> Any:
        """``value`` if it is one of this schema's records (or a dict of one); raises before
        anything is sent otherwise."""
        if self.record_cls is not None and not isinstance(value, (self.record_cls, dict)):
            raise SchemaEncodeError(
                f"{type(self).__name__}: expected a {self.record_cls.__name__}, got {type(value).__name__}")
        return value


class AvroSchema(_Record):
    """Avro binary payloads. ``AvroSchema(Order)`` generates the definition from a dataclass,
    pydantic model or class with type hints (see docs/schemas.md); ``AvroSchema(definition=...)``
    takes an Avro definition (str, bytes or dict) and decodes to dicts. Messages written with
    another version of the topic's schema are read with that writer schema, resolved to this one."""

    type, name = SchemaType.AVRO, "AVRO"

    def __init__(self, record_cls: Type[Any] | None = None, definition: str | bytes | dict[str, Any] | None = None,
                 *, namespace: str | None = None, properties: dict[str, str] | None = None) -> None:
        super().__init__(record_cls, definition, namespace=namespace, properties=properties)
        self._writers: dict[bytes, tuple[Any, _avro.Names, Any]] = {}

    def encode(self, value: Any) -> bytes:
        return self._codec.encode(self._checked(value))

    def decode(self, data: bytes) -> Any:
        return self._codec.decode(data)

    def _decode_with(self, msg: Message) -> Any:
        writer = msg._writer_schema() if msg.schema_version else None
        if writer is None or writer[1] != SchemaType.AVRO:
            return self.decode(msg.data)
        return self._decode_as(msg.data, writer[2])

    def _decode_as(self, data: bytes, writer: bytes) -> Any:
        """``data`` written with the Avro definition ``writer``, as this schema's values."""
        if writer == self.definition:
            return self.decode(data)
        parsed = self._writers.get(writer)
        if parsed is None:
            w = json.loads(writer)
            parsed = self._writers[writer] = (w, _avro.names_of(w), _core._AvroCodec(writer.decode(), {}))
        # Decoded with the writer's schema to generic values, then resolved to this one's classes.
        generic = parsed[2].decode(data)
        return _convert.build(generic, self.schema, self._names, self._classes)


class JsonSchema(_Record):
    """JSON payloads, registered (as every Pulsar client does) with an Avro record definition.
    Records are JSON objects, enums their member names, bytes base64, datetimes milliseconds
    and dates days since the epoch."""

    type, name = SchemaType.JSON, "JSON"

    def encode(self, value: Any) -> bytes:
        return self._codec.encode_json(self._checked(value))

    def decode(self, data: bytes) -> Any:
        return self._codec.decode_json(data)
