"""Avro binary encoding and decoding of one datum against a parsed Avro schema.

Encoding takes the application's objects directly (dataclasses, pydantic models, plain
objects or dicts for records; enum members or symbol names for enums; datetimes and dates for
the timestamp-millis and date logical types) and raises ``ValueError`` naming the field that
does not fit. Decoding gives generic values: dicts for records, symbol names for enums,
datetimes and dates for the logical types; :mod:`._convert` turns them into classes.
"""

from __future__ import annotations

import datetime as _dt
import enum
import struct
from typing import Any

__all__ = ["Names", "encode", "decode", "names_of"]

Names = dict[str, Any]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_DATE = _dt.date(1970, 1, 1)
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


def names_of(schema: Any, names: Names | None = None, namespace: str | None = None) -> Names:
    """Every named type (record, enum, fixed) of ``schema`` by full and short name."""
    names = {} if names is None else names
    if isinstance(schema, list):
        for s in schema:
            names_of(s, names, namespace)
    elif isinstance(schema, dict):
        t = schema.get("type")
        if t in ("record", "error", "enum", "fixed"):
            ns = schema.get("namespace", namespace)
            name = schema["name"]
            full = name if "." in name or not ns else f"{ns}.{name}"
            names[full] = schema
            names.setdefault(name.rsplit(".", 1)[-1], schema)
            for f in schema.get("fields", ()):
                names_of(f["type"], names, ns)
        elif t == "array":
            names_of(schema["items"], names, namespace)
        elif t == "map":
            names_of(schema["values"], names, namespace)
        elif isinstance(t, (dict, list)):
            names_of(t, names, namespace)
    return names


def resolve(schema: Any, names: Names) -> Any:
    """A named reference replaced by its definition."""
    while isinstance(schema, str) and schema not in _PRIMITIVES:
        try:
            schema = names[schema]
        except KeyError:
            raise ValueError(f"unknown Avro type {schema!r}") from None
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return resolve(schema["type"], names)
    if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES and "logicalType" not in schema:
        return schema["type"]
    return schema


def _long(out: bytearray, n: int) -> None:
    n = (n << 1) ^ (n >> 63)
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _field(value: Any, name: str, default: Any) -> Any:
    if isinstance(value, dict):
        return value.get(name, default)
    return getattr(value, name, default)


_MISSING = object()


def _matches(value: Any, schema: Any, names: Names) -> bool:
    s = resolve(schema, names)
    t = s if isinstance(s, str) else s.get("type") if isinstance(s, dict) else "union"
    logical = s.get("logicalType") if isinstance(s, dict) else None
    if t == "null":
        return value is None
    if t == "boolean":
        return isinstance(value, bool)
    if logical == "timestamp-millis":
        return isinstance(value, _dt.datetime) or _is_int(value)
    if logical == "date":
        return (isinstance(value, _dt.date) and not isinstance(value, _dt.datetime)) or _is_int(value)
    if t in ("int", "long"):
        return _is_int(value)
    if t in ("float", "double"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "string":
        return isinstance(value, str)
    if t in ("bytes", "fixed"):
        return isinstance(value, (bytes, bytearray, memoryview))
    if t == "enum":
        return isinstance(value, enum.Enum) or isinstance(value, str)
    if t == "array":
        return isinstance(value, (list, tuple))
    if t == "map":
        return isinstance(value, dict)
    if t in ("record", "error"):
        return value is not None and not isinstance(value, (str, bytes, int, float, list))
    return False


def encode(value: Any, schema: Any, names: Names, out: bytearray, path: str = "value") -> None:
    """Appends the Avro binary encoding of ``value`` to ``out``."""
    s = resolve(schema, names)
    if isinstance(s, list):
        for i, branch in enumerate(s):
            if _matches(value, branch, names):
                _long(out, i)
                encode(value, branch, names, out, path)
                return
        raise ValueError(f"{path}: {value!r} fits none of {s}")
    t = s if isinstance(s, str) else s["type"]
    logical = None if isinstance(s, str) else s.get("logicalType")
    if t == "null":
        if value is not None:
            raise ValueError(f"{path}: expected None, got {value!r}")
    elif t == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"{path}: expected a bool, got {value!r}")
        out.append(1 if value else 0)
    elif t in ("int", "long"):
        if logical == "timestamp-millis" and isinstance(value, _dt.datetime):
            value = _millis(value)
        elif logical == "date" and isinstance(value, _dt.date):
            value = (value - _EPOCH_DATE).days
        if not _is_int(value):
            raise ValueError(f"{path}: expected an int, got {value!r}")
        bits = 31 if t == "int" else 63
        if not -(1 << bits) <= value < (1 << bits):
            raise ValueError(f"{path}: {value} is out of range for Avro {t}")
        _long(out, value)
    elif t in ("float", "double"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"{path}: expected a float, got {value!r}")
        out += (_F32 if t == "float" else _F64).pack(value)
    elif t == "string":
        if not isinstance(value, str):
            raise ValueError(f"{path}: expected a str, got {value!r}")
        b = value.encode()
        _long(out, len(b))
        out += b
    elif t == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ValueError(f"{path}: expected bytes, got {value!r}")
        _long(out, len(value))
        out += value
    elif t == "fixed":
        if not isinstance(value, (bytes, bytearray)) or len(value) != s["size"]:
            raise ValueError(f"{path}: expected {s['size']} bytes, got {value!r}")
        out += value
    elif t == "enum":
        symbol = value.name if isinstance(value, enum.Enum) else value
        try:
            _long(out, s["symbols"].index(symbol))
        except ValueError:
            raise ValueError(f"{path}: {value!r} is not one of {s['symbols']}") from None
    elif t == "array":
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{path}: expected a list, got {value!r}")
        if value:
            _long(out, len(value))
            for i, item in enumerate(value):
                encode(item, s["items"], names, out, f"{path}[{i}]")
        out.append(0)
    elif t == "map":
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected a dict, got {value!r}")
        if value:
            _long(out, len(value))
            for k, v in value.items():
                if not isinstance(k, str):
                    raise ValueError(f"{path}: map keys must be str, got {k!r}")
                kb = k.encode()
                _long(out, len(kb))
                out += kb
                encode(v, s["values"], names, out, f"{path}[{k!r}]")
        out.append(0)
    elif t in ("record", "error"):
        if not _matches(value, s, names):
            raise ValueError(f"{path}: expected a {s['name']}, got {value!r}")
        for f in s["fields"]:
            v = _field(value, f["name"], _MISSING)
            if v is _MISSING:
                if "default" not in f:
                    raise ValueError(f"{path}.{f['name']} is missing")
                v = f["default"]
            encode(v, f["type"], names, out, f"{path}.{f['name']}")
    else:
        raise ValueError(f"{path}: unsupported Avro type {t!r}")


def _millis(t: _dt.datetime) -> int:
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    delta = t - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def long(self) -> int:
        n = shift = 0
        data, pos = self.data, self.pos
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")
        self.pos = pos
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated Avro data")
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b


def decode(data: bytes, schema: Any, names: Names) -> Any:
    """The generic value of ``data`` written with ``schema``; raises ``ValueError`` on bad or
    left-over bytes."""
    r = _Reader(data)
    try:
        value = _read(r, schema, names)
    except IndexError:
        raise ValueError("truncated Avro data") from None
    if r.pos != len(r.data):
        raise ValueError(f"{len(r.data) - r.pos} bytes left over after the Avro datum")
    return value


def _read(r: _Reader, schema: Any, names: Names) -> Any:
    s = resolve(schema, names)
    if isinstance(s, list):
        i = r.long()
        if not 0 <= i < len(s):
            raise ValueError(f"union branch {i} out of range")
        return _read(r, s[i], names)
    t = s if isinstance(s, str) else s["type"]
    if t == "null":
        return None
    if t == "boolean":
        b = r.take(1)[0]
        if b > 1:
            raise ValueError(f"bad boolean byte {b}")
        return b == 1
    if t in ("int", "long"):
        n = r.long()
        logical = None if isinstance(s, str) else s.get("logicalType")
        if logical == "timestamp-millis":
            return _EPOCH + _dt.timedelta(milliseconds=n)
        if logical == "date":
            return _EPOCH_DATE + _dt.timedelta(days=n)
        return n
    if t == "float":
        return _F32.unpack(r.take(4))[0]
    if t == "double":
        return _F64.unpack(r.take(8))[0]
    if t == "string":
        return r.take(r.long()).decode()
    if t == "bytes":
        return r.take(r.long())
    if t == "fixed":
        return r.take(s["size"])
    if t == "enum":
        i = r.long()
        if not 0 <= i < len(s["symbols"]):
            raise ValueError(f"enum index {i} out of range")
        return s["symbols"][i]
    if t == "array":
        items: list[Any] = []
        while n := r.long():
            if n < 0:
                r.long()
                n = -n
            items.extend(_read(r, s["items"], names) for _ in range(n))
        return items
    if t == "map":
        m: dict[str, Any] = {}
        while n := r.long():
            if n < 0:
                r.long()
                n = -n
            for _ in range(n):
                k = r.take(r.long()).decode()
                m[k] = _read(r, s["values"], names)
        return m
    if t in ("record", "error"):
        return {f["name"]: _read(r, f["type"], names) for f in s["fields"]}
    raise ValueError(f"unsupported Avro type {t!r}")
