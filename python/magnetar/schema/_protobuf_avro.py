"""The PROTOBUF definition of a Protobuf message, as the Java client registers it: the Avro
schema that avro-protobuf's ``ProtobufData.getSchema`` derives from the descriptor, in Avro's
own JSON (``Schema.toString()``), and the ``__PARSING_INFO__`` property of Java's
``ProtobufSchema`` (each field's number, name, type and label).

avro-protobuf's rules: a message is a record named like it, in the namespace of its Java
class (``java_package`` or the proto package, then the outer class name unless
``java_multiple_files``, then ``$``-joined containing messages); fields in declared order;
repeated fields are arrays (default ``[]``); a message field is ``["null", record]``; strings
carry ``"avro.java.string": "String"``; enums are enums of their value names; every other
non-required field has a default (the declared one, else 0, 0.0, false, "", the first enum
value, or null). Checked against avro-protobuf 1.11 (the broker distribution's) in
tests/test_schema_java.py.
"""

from __future__ import annotations

import json
import os
from typing import Any

_INT = {"INT32", "UINT32", "SINT32", "FIXED32", "SFIXED32"}
_LONG = {"INT64", "UINT64", "SINT64", "FIXED64", "SFIXED64"}


def _camel(s: str) -> str:
    return "".join(p[:1].upper() + p[1:].lower() for p in s.split("_"))


def _namespace(fd: Any, containing: Any) -> str:
    o = fd.GetOptions()
    p = o.java_package if o.HasField("java_package") else fd.package
    outer = ""
    if not o.java_multiple_files:
        if o.HasField("java_outer_classname"):
            outer = o.java_outer_classname
        else:
            base = os.path.basename(fd.name)
            outer = _camel(base[: base.rfind(".")])
    inner = ""
    while containing is not None:
        inner = containing.name if not inner else f"{containing.name}${inner}"
        containing = containing.containing_type
    d1 = "." if outer or inner else ""
    d2 = "$" if outer and inner else ""
    return p + d1 + outer + d2 + inner


def _type_name(f: Any) -> str:
    from google.protobuf import descriptor_pb2

    return str(descriptor_pb2.FieldDescriptorProto.Type.Name(f.type))[len("TYPE_"):]


def _field_protos(descriptor: Any) -> list[Any]:
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(proto)
    return list(proto.field)


class _Writer:
    """Avro's ``Schema.toJson``: a named type in full the first time, by name after; a
    namespace written only where it differs from the enclosing one."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def named(self, kind: str, name: str, space: str, enclosing: str | None, body: list[tuple[str, Any]]) -> Any:
        full = f"{space}.{name}" if space else name
        if full in self.seen:
            return name if space == (enclosing or "") else full
        self.seen.add(full)
        out: dict[str, Any] = {"type": kind, "name": name}
        if space != (enclosing or "") or (not space and enclosing):
            out["namespace"] = space
        out.update(body)
        return out

    def message(self, d: Any, enclosing: str | None) -> Any:
        space = _namespace(d.file, d.containing_type)
        full = f"{space}.{d.name}" if space else d.name
        if full in self.seen:
            return self.named("record", d.name, space, enclosing, [])
        labels = _field_protos(d)
        fields: list[Any] = []
        rec = self.named("record", d.name, space, enclosing, [("fields", fields)])
        for f, proto in zip(d.fields, labels):
            field: dict[str, Any] = {"name": f.name, "type": self.field_type(f, proto, space)}
            default = _default(f, proto)
            if default is not _NONE:
                field["default"] = default
            fields.append(field)
        return rec

    def enum(self, e: Any, enclosing: str | None) -> Any:
        space = _namespace(e.file, e.containing_type)
        return self.named("enum", e.name, space, enclosing, [("symbols", [v.name for v in e.values])])

    def field_type(self, f: Any, proto: Any, enclosing: str) -> Any:
        t = _type_name(f)
        if t == "BOOL":
            s: Any = "boolean"
        elif t in ("FLOAT", "DOUBLE", "BYTES"):
            s = t.lower()
        elif t == "STRING":
            s = {"type": "string", "avro.java.string": "String"}
        elif t in _INT:
            s = "int"
        elif t in _LONG:
            s = "long"
        elif t == "ENUM":
            s = self.enum(f.enum_type, enclosing)
        elif t == "MESSAGE":
            s = self.message(f.message_type, enclosing)
            if proto.label == proto.LABEL_OPTIONAL:
                s = ["null", s]
        else:
            raise ValueError(f"avro-protobuf has no Avro type for {t} fields ({f.full_name})")
        if proto.label == proto.LABEL_REPEATED:
            s = {"type": "array", "items": s}
        return s


_NONE = object()


def _default(f: Any, proto: Any) -> Any:
    if proto.label == proto.LABEL_REQUIRED:
        return _NONE
    if proto.label == proto.LABEL_REPEATED:
        return []
    t = _type_name(f)
    if f.has_default_value:
        v = f.default_value
        if t == "ENUM":
            return f.enum_type.values_by_number[v].name
        if t in ("FLOAT", "DOUBLE"):
            return float(v)
        return v.decode("latin-1") if isinstance(v, bytes) else v
    if t in ("FLOAT", "DOUBLE"):
        return 0.0  # Avro writes a float or double default as one
    if t == "BOOL":
        return False
    if t in ("STRING", "BYTES"):
        return ""
    if t == "ENUM":
        return f.enum_type.values[0].name
    if t == "MESSAGE":
        return None
    return 0


def avro_definition(descriptor: Any) -> str:
    """The Avro schema of a message descriptor, as Java's ``ProtobufData`` writes it."""
    return json.dumps(_Writer().message(descriptor, None), separators=(",", ":"), ensure_ascii=False)


def parsing_info(descriptor: Any) -> str:
    """Java ``ProtobufSchema``'s ``__PARSING_INFO__``: the fields as Jackson writes them."""
    infos = [{"number": f.number, "name": f.name, "type": _type_name(f),
              "label": proto.Label.Name(proto.label), "definition": None}
             for f, proto in zip(descriptor.fields, _field_protos(descriptor))]
    return json.dumps(infos, separators=(",", ":"), ensure_ascii=False)
