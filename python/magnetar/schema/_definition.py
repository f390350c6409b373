"""Avro definitions generated from Python classes, by one rule (docs/schemas.md):

record name = the class's ``__name__``, no namespace unless given, fields in declared order,
``int`` → long, ``float`` → double, ``str`` → string, ``bytes`` → bytes, ``bool`` → boolean,
``Optional[T]`` → ``["null", T]`` with default null, ``list[T]`` → array, ``dict[str, T]`` →
map, a nested class → a nested record (by name after its first use), an ``enum.Enum`` → enum
(symbols are the member names), ``datetime`` → long timestamp-millis, ``date`` → int date.

Classes are dataclasses, pydantic models, or plain classes with type hints. A field's key
order (name, default, type) is the one the official Python client writes, and the definition
is serialized as it does (``json.dumps(d, indent=True)``), so the same record registers the
same bytes.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import types
import typing
from typing import Any

__all__ = ["record_definition", "fields_of"]

_SIMPLE = {int: "long", float: "double", str: "string", bytes: "bytes", bool: "boolean"}
_NO_DEFAULT = object()


def _is_pydantic(cls: type) -> bool:
    return isinstance(getattr(cls, "model_fields", None), dict) and hasattr(cls, "model_validate")


def fields_of(cls: type) -> list[tuple[str, Any, Any]]:
    """``(name, type, default)`` of each field of ``cls`` in declared order (default
    ``_NO_DEFAULT`` when there is none)."""
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = _NO_DEFAULT
            out.append((f.name, hints[f.name], default))
        return out
    if _is_pydantic(cls):
        out = []
        for name, info in cls.model_fields.items():  # type: ignore[attr-defined]
            default = _NO_DEFAULT if info.is_required() else info.get_default(call_default_factory=True)
            out.append((name, info.annotation, default))
        return out
    hints = typing.get_type_hints(cls)
    if not hints:
        raise TypeError(f"{cls.__name__} has no type hints to make a schema from")
    return [(name, t, getattr(cls, name, _NO_DEFAULT)) for name, t in hints.items() if not name.startswith("_")]


def _optional_of(t: Any) -> Any:
    """``T`` when ``t`` is ``Optional[T]`` / ``T | None``, else None."""
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(t)) == 2:
            return args[0]
        raise TypeError(f"unions other than Optional[T] are not supported: {t}")
    return None


def _default_json(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    if isinstance(value, _dt.datetime) or isinstance(value, _dt.date):
        raise TypeError("datetime and date defaults are not supported in schemas")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _default_json(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, list):
        return [_default_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _default_json(v) for k, v in value.items()}
    return value


class _Builder:
    def __init__(self, namespace: str | None) -> None:
        self.namespace = namespace
        self.defined: set[str] = set()
        self.classes: dict[str, type] = {}

    def type_of(self, t: Any) -> Any:
        inner = _optional_of(t)
        if inner is not None:
            return ["null", self.type_of(inner)]
        if t in _SIMPLE:
            return _SIMPLE[t]
        if t is _dt.datetime:
            return {"type": "long", "logicalType": "timestamp-millis"}
        if t is _dt.date:
            return {"type": "int", "logicalType": "date"}
        origin, args = typing.get_origin(t), typing.get_args(t)
        if origin in (list, typing.List, tuple) or t is list:
            if not args:
                raise TypeError("a list field needs its item type: list[T]")
            return {"type": "array", "items": self.type_of(args[0])}
        if origin in (dict, typing.Dict) or t is dict:
            if len(args) != 2 or args[0] is not str:
                raise TypeError("a dict field must be dict[str, T]")
            return {"type": "map", "values": self.type_of(args[1])}
        if isinstance(t, type) and issubclass(t, enum.Enum):
            if t.__name__ in self.defined:
                return t.__name__
            self.defined.add(t.__name__)
            self.classes[t.__name__] = t
            return {"type": "enum", "name": t.__name__, "symbols": [m.name for m in t]}
        if isinstance(t, type):
            return self.record(t)
        raise TypeError(f"no schema type for {t!r}")

    def record(self, cls: type) -> Any:
        name = cls.__name__
        if name in self.defined:
            return name
        self.defined.add(name)
        self.classes[name] = cls
        d: dict[str, Any] = {"type": "record", "name": name}
        if self.namespace is not None:
            d["namespace"] = self.namespace
        fields = []
        for fname, ftype, default in fields_of(cls):
            avro = self.type_of(ftype)
            if isinstance(avro, list) and default is _NO_DEFAULT:
                default = None
            if default is _NO_DEFAULT:
                fields.append({"name": fname, "type": avro})
            else:
                fields.append({"name": fname, "default": _default_json(default), "type": avro})
        d["fields"] = fields
        return d


def record_definition(cls: type, namespace: str | None = None) -> tuple[dict[str, Any], dict[str, type]]:
    """The Avro record definition of ``cls`` and the classes of its named types by name."""
    b = _Builder(namespace)
    d = b.record(cls)
    return d, b.classes
