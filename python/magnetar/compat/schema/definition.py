"""The official client's record classes: ``Record`` with typed field declarations, each of
which checks values and writes its part of the Avro definition."""

from __future__ import annotations

from enum import Enum, EnumMeta
from typing import Any

__all__ = ["Array", "Boolean", "Bytes", "CustomEnum", "Double", "Field", "Float", "Integer", "Long", "Map", "Null",
           "Record", "String"]


class Field:
    """A typed field of a :class:`Record`; ``required=False`` makes it nullable."""

    def __init__(self, default: Any = None, required: bool = False, required_default: bool = False) -> None:
        if default is not None:
            default = self.validate_type("default", default)
        self._default, self._required, self._required_default = default, required, required_default

    def type(self) -> Any:
        raise NotImplementedError

    def python_type(self) -> Any:
        raise NotImplementedError

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, self.python_type()) or (self.python_type() is int and isinstance(val, bool)):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected: {self.python_type()}")
        return val

    def schema(self) -> Any:
        return self.type()

    def schema_info(self, defined_names: set[str]) -> Any:
        return self.schema()

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default

    def required(self) -> bool:
        return self._required


class Null(Field):
    def type(self) -> str:
        return "null"

    def python_type(self) -> Any:
        return type(None)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is not None:
            raise TypeError(f"Field '{name}' is of type Null and accepts only None")
        return None


class Boolean(Field):
    def type(self) -> str:
        return "boolean"

    def python_type(self) -> Any:
        return bool

    def default(self) -> Any:
        return self._default if self._default is not None else False


class Integer(Field):
    def type(self) -> str:
        return "int"

    def python_type(self) -> Any:
        return int


class Long(Integer):
    def type(self) -> str:
        return "long"


class Float(Field):
    def type(self) -> str:
        return "float"

    def python_type(self) -> Any:
        return float

    def validate_type(self, name: str, val: Any) -> Any:
        if isinstance(val, int) and not isinstance(val, bool):
            val = float(val)  # promotion, as Avro does
        return super().validate_type(name, val)


class Double(Float):
    def type(self) -> str:
        return "double"


class Bytes(Field):
    def type(self) -> str:
        return "bytes"

    def python_type(self) -> Any:
        return bytes

    def validate_type(self, name: str, val: Any) -> Any:
        if isinstance(val, str):
            val = val.encode("utf-8")
        return super().validate_type(name, val)


class String(Field):
    def type(self) -> str:
        return "string"

    def python_type(self) -> Any:
        return str

    def validate_type(self, name: str, val: Any) -> Any:
        if isinstance(val, bytes):
            val = val.decode("utf-8")
        return super().validate_type(name, val)


class CustomEnum(Field):
    """A field holding members of ``enum_type`` (also given as names or values)."""

    def __init__(self, enum_type: EnumMeta, default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        if not issubclass(enum_type, Enum):
            raise ValueError(f"{enum_type} is not a valid Enum type")
        self.enum_type = enum_type
        self.values = {m.value: m for m in enum_type}
        super().__init__(default, required, required_default)

    def type(self) -> str:
        return "enum"

    def python_type(self) -> Any:
        return self.enum_type

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if isinstance(val, self.enum_type):
            return val
        if isinstance(val, str) and not isinstance(val, Enum) and val in self.enum_type.__members__:
            return self.enum_type[val]
        if not isinstance(val, Enum) and val in self.values:
            return self.values[val]
        raise TypeError(f"Invalid enum value '{val}' for field '{name}'")

    def schema_info(self, defined_names: set[str]) -> Any:
        name = self.enum_type.__name__
        if name in defined_names:
            return name
        defined_names.add(name)
        return {"type": "enum", "name": name, "symbols": [m.name for m in self.enum_type]}

    def schema(self) -> Any:
        return self.schema_info(set())


class Array(Field):
    def __init__(self, array_type: Field, default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        self.array_type = array_type
        super().__init__(default, required, required_default)

    def type(self) -> str:
        return "array"

    def python_type(self) -> Any:
        return list

    def validate_type(self, name: str, val: Any) -> Any:
        val = super().validate_type(name, val)
        if val is not None:
            for x in val:
                if not isinstance(x, self.array_type.python_type()):
                    raise TypeError(f"Array field {name} items should all be of type {self.array_type.type()}")
        return val

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "array", "items": _item_schema(self.array_type, defined_names)}

    def schema(self) -> Any:
        return self.schema_info(set())


class Map(Field):
    def __init__(self, value_type: Field, default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        self.value_type = value_type
        super().__init__(default, required, required_default)

    def type(self) -> str:
        return "map"

    def python_type(self) -> Any:
        return dict

    def validate_type(self, name: str, val: Any) -> Any:
        val = super().validate_type(name, val)
        if val is not None:
            for k, v in val.items():
                if not isinstance(k, str):
                    raise TypeError(f"Map field '{name}' keys should all be of type string")
                if not isinstance(v, self.value_type.python_type()):
                    raise TypeError(f"Map field '{name}' values should all be of type {self.value_type.type()}")
        return val

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "map", "values": _item_schema(self.value_type, defined_names)}

    def schema(self) -> Any:
        return self.schema_info(set())


def _item_schema(field: Any, defined_names: set[str]) -> Any:
    if isinstance(field, type) and issubclass(field, Record):
        return field.schema_info(defined_names)
    if isinstance(field, Record):
        return type(field).schema_info(defined_names)
    return field.schema_info(defined_names)


class RecordMeta(type):
    """Collects a record class's field declarations (in order, or sorted with ``_sorted_fields``)."""

    def __new__(mcs, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> Any:
        fields: dict[str, Any] = {}
        for base in bases:
            fields.update(getattr(base, "_fields", {}))
        for key, value in attrs.items():
            if key.startswith("_"):
                continue
            if isinstance(value, Field) or ("Record" in globals() and isinstance(value, Record)):
                fields[key] = value
            elif isinstance(value, type) and "Record" in globals() and issubclass(value, Record):
                fields[key] = value()
            elif isinstance(value, EnumMeta):
                fields[key] = CustomEnum(value)
        if attrs.get("_sorted_fields", False):
            fields = dict(sorted(fields.items()))
        attrs["_fields"] = fields
        for key in fields:
            attrs.pop(key, None)
        return super().__new__(mcs, name, bases, attrs)


class Record(metaclass=RecordMeta):
    """A record: declare fields as class attributes (``a = Integer()``, ``c = SubRecord``,
    ``d = MyEnum``); ``schema()`` is its Avro definition."""

    _fields: dict[str, Any] = {}
    _sorted_fields = False
    _avro_namespace: str | None = None
    _default: Any
    _required: bool
    _required_default: bool

    def __init__(self, default: Any = None, required_default: bool = False, required: bool = False,
                 *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "_default", default)
        object.__setattr__(self, "_required_default", required_default)
        object.__setattr__(self, "_required", required)
        for k in kwargs:
            if k not in self._fields:
                raise AttributeError(f"Cannot set undeclared field {k} on record")
        for name, field in self._fields.items():
            value = field.validate_type(name, kwargs[name]) if name in kwargs else field.default()
            object.__setattr__(self, name, value)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return cls.schema_info(set())

    @classmethod
    def schema_info(cls, defined_names: set[str]) -> Any:
        name = cls.__name__
        full = f"{cls._avro_namespace}.{name}" if cls._avro_namespace else name
        if full in defined_names:
            return full
        defined_names.add(full)
        schema: dict[str, Any] = {"type": "record", "name": name, "fields": []}
        if cls._avro_namespace is not None:
            schema["namespace"] = cls._avro_namespace
        for fname, field in cls._fields.items():
            info = _item_schema(field, defined_names)
            ftype = info if field._required else ["null", info]
            entry: dict[str, Any] = {"name": fname, "type": ftype}
            if field.required_default():
                entry["default"] = _default_json(field.default())
            schema["fields"].append(entry)
        return schema

    # A record declared as a field of another record.
    def type(self) -> str:
        return "record"

    def python_type(self) -> Any:
        return type(self)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, type(self)):
            raise TypeError(f"Invalid type '{type(val)}' for sub-record field '{name}'. Expected: {type(self)}")
        return val

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default

    def required(self) -> bool:
        return self._required

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in self._fields:
            raise AttributeError(f"Cannot set undeclared field {key} on record")
        object.__setattr__(self, key, self._fields[key].validate_type(key, value))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        return all(getattr(self, k) == getattr(other, k) for k in self._fields)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return id(self)

    def __str__(self) -> str:
        return str({k: getattr(self, k) for k in self._fields})

    __repr__ = __str__


def _default_json(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value
