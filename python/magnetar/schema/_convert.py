"""Between generic values (what Avro decoding and ``json.loads`` give) and the application's
classes, following an Avro definition; and from objects to JSON values.

Reading follows Avro's schema resolution for records: fields are matched by name, a field
the writer did not have takes the reader's default, a field the reader does not have is
dropped. So adding an optional field keeps old and new messages readable with either class.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
from typing import Any

from ._avro import Names, _matches, _millis, resolve

__all__ = ["build", "to_json"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_DATE = _dt.date(1970, 1, 1)


def construct(cls: Any, fields: dict[str, Any]) -> Any:
    """An instance of ``cls`` with ``fields``."""
    if dataclasses.is_dataclass(cls) or hasattr(cls, "model_validate") or cls.__init__ is not object.__init__:
        return cls(**fields)
    obj = cls.__new__(cls)
    for k, v in fields.items():
        setattr(obj, k, v)
    return obj


def _kind(s: Any) -> str:
    return s if isinstance(s, str) else "union" if isinstance(s, list) else s["type"]


def _fits(value: Any, s: Any) -> bool:
    k = _kind(s)
    if k == "null":
        return value is None
    if k == "boolean":
        return isinstance(value, bool)
    if k in ("int", "long"):
        return isinstance(value, (int, _dt.date)) and not isinstance(value, bool)
    if k in ("float", "double"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if k in ("string", "enum"):
        return isinstance(value, str)
    if k in ("bytes", "fixed"):
        return isinstance(value, (bytes, str))
    if k == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def build(value: Any, schema: Any, names: Names, classes: dict[str, Any], from_json: bool = False) -> Any:
    """``value`` (generic) as the reader's ``schema`` says: records become their classes
    (dicts when no class is known), enums their members."""
    s = resolve(schema, names)
    k = _kind(s)
    if k == "union":
        if value is None and "null" in s:
            return None
        for branch in s:
            b = resolve(branch, names)
            if b != "null" and _fits(value, b):
                return build(value, b, names, classes, from_json)
        raise ValueError(f"{value!r} fits none of {s}")
    if k in ("record", "error"):
        if not isinstance(value, dict):
            raise ValueError(f"expected a record {s['name']}, got {value!r}")
        out = {}
        for f in s["fields"]:
            name = f["name"]
            if name in value:
                out[name] = build(value[name], f["type"], names, classes, from_json)
            elif "default" in f:
                out[name] = build(f["default"], f["type"], names, classes, True)
            else:
                raise ValueError(f"field {name!r} of {s['name']} is missing and has no default")
        cls = classes.get(s["name"])
        return construct(cls, out) if cls is not None else out
    if k == "enum":
        cls = classes.get(s["name"])
        return cls[value] if cls is not None else value
    if k == "array":
        return [build(v, s["items"], names, classes, from_json) for v in value]
    if k == "map":
        return {key: build(v, s["values"], names, classes, from_json) for key, v in value.items()}
    if from_json:
        logical = s.get("logicalType") if isinstance(s, dict) else None
        if logical == "timestamp-millis" and isinstance(value, int):
            return _EPOCH + _dt.timedelta(milliseconds=value)
        if logical == "date" and isinstance(value, int):
            return _EPOCH_DATE + _dt.timedelta(days=value)
        if k in ("bytes", "fixed") and isinstance(value, str):
            return base64.b64decode(value)
        if k in ("float", "double") and isinstance(value, int):
            return float(value)
    return value


def _get(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return value.get(name, _MISSING)
    return getattr(value, name, _MISSING)


_MISSING = object()


def to_json(value: Any, schema: Any, names: Names, path: str = "value") -> Any:
    """The JSON value of ``value`` under ``schema``: records as objects, enums by name, bytes
    in base64, timestamps in milliseconds and dates in days since the epoch. Raises
    ``ValueError`` naming the field that does not fit."""
    s = resolve(schema, names)
    k = _kind(s)
    if k == "union":
        for branch in s:
            if _matches(value, branch, names):
                return to_json(value, branch, names, path)
        raise ValueError(f"{path}: {value!r} fits none of {s}")
    if not _matches(value, s, names):
        raise ValueError(f"{path}: {value!r} does not fit {k}")
    if k in ("record", "error"):
        out = {}
        for f in s["fields"]:
            v = _get(value, f["name"])
            if v is _MISSING:
                if "default" not in f:
                    raise ValueError(f"{path}.{f['name']} is missing")
                out[f["name"]] = f["default"]
                continue
            out[f["name"]] = to_json(v, f["type"], names, f"{path}.{f['name']}")
        return out
    if k == "enum":
        symbol = value.name if isinstance(value, enum.Enum) else value
        if symbol not in s["symbols"]:
            raise ValueError(f"{path}: {value!r} is not one of {s['symbols']}")
        return symbol
    if k == "array":
        return [to_json(v, s["items"], names, f"{path}[{i}]") for i, v in enumerate(value)]
    if k == "map":
        return {key: to_json(v, s["values"], names, f"{path}[{key!r}]") for key, v in value.items()}
    if k in ("bytes", "fixed"):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, _dt.datetime):
        return _millis(value)
    if isinstance(value, _dt.date):
        return (value - _EPOCH_DATE).days
    return value
