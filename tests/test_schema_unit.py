"""magnetar.schema without a broker: the definition rule, the Avro and JSON codecs (checked
against fastavro, the codec the official client uses), the primitives' Java encodings, and
errors."""

from __future__ import annotations

import datetime as dt
import enum
import io
import json
import struct
from dataclasses import dataclass, field
from typing import Any, Optional

import fastavro
import pytest
from records import V1, V2

import magnetar
from magnetar import schema


class Color(enum.Enum):
    RED = "r"
    GREEN = "g"


@dataclass
class Address:
    street: str
    zip: Optional[int] = None


@dataclass
class Order:
    id: int
    amount: float
    note: str | None = None


@dataclass
class Everything:
    flag: bool
    raw: bytes
    tags: list[str]
    counts: dict[str, int]
    home: Address
    color: Color
    at: dt.datetime
    day: dt.date
    work: Optional[Address] = None
    scores: list[float] = field(default_factory=list)


class Hinted:
    id: int
    name: str


def everything() -> Everything:
    return Everything(
        flag=True, raw=b"\x00\xff", tags=["a", "b"], counts={"x": 1, "y": -2},
        home=Address("Main St", 12345), color=Color.GREEN,
        at=dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.timezone.utc), day=dt.date(2024, 5, 6),
        work=Address("Side St"), scores=[1.5, -2.0],
    )


def test_definition_follows_the_rule() -> None:
    d = json.loads(schema.AvroSchema(Order).definition)
    assert d == {
        "type": "record", "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "amount", "type": "double"},
            {"name": "note", "default": None, "type": ["null", "string"]},
        ],
    }
    d = json.loads(schema.AvroSchema(Everything, namespace="com.example").definition)
    assert d["namespace"] == "com.example"
    types = {f["name"]: f["type"] for f in d["fields"]}
    assert [f["name"] for f in d["fields"]] == ["flag", "raw", "tags", "counts", "home", "color", "at", "day", "work", "scores"]
    assert types["flag"] == "boolean" and types["raw"] == "bytes"
    assert types["tags"] == {"type": "array", "items": "string"}
    assert types["counts"] == {"type": "map", "values": "long"}
    assert types["home"]["type"] == "record" and types["home"]["name"] == "Address"
    assert types["color"] == {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
    assert types["at"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert types["day"] == {"type": "int", "logicalType": "date"}
    assert types["work"] == ["null", "Address"], "a record used again is named, not redefined"
    fastavro.parse_schema(d)  # a valid Avro schema


def test_plain_class_with_hints_and_pydantic() -> None:
    d = json.loads(schema.JsonSchema(Hinted).definition)
    assert d == {"type": "record", "name": "Hinted", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
    import pydantic  # requirements-dev.txt

    class Model(pydantic.BaseModel):
        id: int
        note: Optional[str] = None

    d = json.loads(schema.AvroSchema(Model).definition)
    assert d["fields"] == [{"name": "id", "type": "long"}, {"name": "note", "default": None, "type": ["null", "string"]}]
    s = schema.AvroSchema(Model)
    assert s.decode(s.encode(Model(id=3))) == Model(id=3)


def test_avro_round_trip_and_fastavro_agree() -> None:
    s = schema.AvroSchema(Everything)
    value = everything()
    data = s.encode(value)
    assert s.decode(data) == value
    parsed = fastavro.parse_schema(json.loads(s.definition))
    theirs: Any = fastavro.schemaless_reader(io.BytesIO(data), parsed)
    assert theirs["home"] == {"street": "Main St", "zip": 12345}
    assert theirs["color"] == "GREEN" and theirs["at"] == value.at and theirs["day"] == value.day
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, theirs)
    assert buf.getvalue() == data, "byte-identical with fastavro's encoding"


def test_json_round_trip() -> None:
    s = schema.JsonSchema(Everything)
    value = everything()
    doc = json.loads(s.encode(value))
    assert doc["color"] == "GREEN" and doc["home"] == {"street": "Main St", "zip": 12345}
    assert doc["at"] == int(value.at.timestamp() * 1000)
    assert s.decode(s.encode(value)) == value
    assert schema.JsonSchema(Order).decode(b'{"id": 1, "amount": 2}') == Order(1, 2.0)


def test_explicit_definition_decodes_to_dicts() -> None:
    s = schema.AvroSchema(definition=schema.AvroSchema(Order).definition.decode())
    assert s.decode(s.encode({"id": 1, "amount": 2.5})) == {"id": 1, "amount": 2.5, "note": None}


def test_values_that_do_not_fit_raise_before_sending() -> None:
    s = schema.AvroSchema(Order)
    with pytest.raises(magnetar.SchemaEncodeError, match="id"):
        s._encode(Order("one", 1.0))  # type: ignore[arg-type]
    with pytest.raises(magnetar.SchemaEncodeError):
        s._encode("not an order")
    with pytest.raises(magnetar.SchemaEncodeError, match="amount"):
        schema.JsonSchema(Order)._encode(Order(1, "x"))  # type: ignore[arg-type]
    with pytest.raises(magnetar.SchemaEncodeError):
        schema.IntSchema()._encode(2**40)
    assert issubclass(magnetar.SchemaEncodeError, magnetar.PulsarError)
    assert issubclass(magnetar.SchemaDecodeError, magnetar.PulsarError)
    assert issubclass(magnetar.IncompatibleSchema, magnetar.PulsarError)


def test_primitives_encode_as_java_does() -> None:
    cases = [
        (schema.BooleanSchema(), True, b"\x01"),
        (schema.ByteSchema(), -2, b"\xfe"),
        (schema.ShortSchema(), 258, b"\x01\x02"),
        (schema.IntSchema(), -1, b"\xff\xff\xff\xff"),
        (schema.LongSchema(), 1, b"\x00" * 7 + b"\x01"),
        (schema.FloatSchema(), 1.5, struct.pack(">f", 1.5)),
        (schema.DoubleSchema(), 1.5, struct.pack(">d", 1.5)),
        (schema.StringSchema(), "héllo", "héllo".encode()),
        (schema.TimestampSchema(), dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc), struct.pack(">q", 1000)),
        (schema.DateSchema(), dt.date(1970, 1, 2), struct.pack(">q", 86_400_000)),
        (schema.TimeSchema(), dt.time(0, 0, 2), struct.pack(">q", 2000)),
    ]
    for s, value, wire in cases:
        assert s.encode(value) == wire, s
        assert s.decode(wire) == value, s
    assert [s.type.value for s, _, _ in cases] == [5, 6, 7, 8, 9, 10, 11, 1, 14, 12, 13]


def test_evolution_resolves_by_field_name() -> None:
    old, new = schema.AvroSchema(V1), schema.AvroSchema(V2)
    from magnetar.schema import _avro, _convert
    w = json.loads(old.definition)
    generic = _avro.decode(old.encode(V1(7)), w, _avro.names_of(w))
    assert _convert.build(generic, new.schema, new._names, new._classes) == V2(7, None)
    assert schema.JsonSchema(V2).decode(schema.JsonSchema(V1).encode(V1(7))) == V2(7, None)
    assert schema.JsonSchema(V1).decode(schema.JsonSchema(V2).encode(V2(7, "x"))) == V1(7)


def test_engine_codec_matches_the_python_reference() -> None:
    """AvroSchema and JsonSchema encode in the engine (one call per message); the pure-Python
    codec in magnetar.schema._avro is the reference they must agree with byte for byte."""
    from magnetar.schema import _avro, _convert

    for value in (everything(), Everything(False, b"", [], {}, Address(""), Color.RED,
                                           dt.datetime(1969, 12, 31, 23, 59, 59), dt.date(1900, 1, 1))):
        s = schema.AvroSchema(Everything)
        ref = bytearray()
        _avro.encode(value, s.schema, s._names, ref)
        assert s.encode(value) == bytes(ref)
        generic = _avro.decode(bytes(ref), s.schema, s._names)
        assert s.decode(bytes(ref)) == _convert.build(generic, s.schema, s._names, s._classes)
        j = schema.JsonSchema(Everything)
        assert json.loads(j.encode(value)) == _convert.to_json(value, j.schema, j._names)
        assert j.decode(j.encode(value)) == s.decode(s.encode(value))


def test_engine_codec_refuses_bad_data() -> None:
    s = schema.AvroSchema(Order)
    good = s.encode(Order(1, 2.0, "x"))
    for bad in (good[:-1], good + b"\x00", b"\xff" * 12):
        with pytest.raises(ValueError):
            s.decode(bad)
    with pytest.raises(ValueError):
        schema.JsonSchema(Order).decode(b'{"amount": 1.0}')
    with pytest.raises(ValueError):
        schema.JsonSchema(Order).decode(b"not json")


def test_schemas_pickle() -> None:
    import pickle

    for s in (schema.AvroSchema(Order), schema.JsonSchema(Everything, namespace="n"), schema.StringSchema(),
              schema.AvroSchema(definition=schema.AvroSchema(Order).definition), schema.AutoConsumeSchema(),
              schema.IntSchema(), schema.KeyValueSchema(schema.StringSchema(), schema.AvroSchema(Order)),
              schema.KeyValueSchema(schema.IntSchema(), schema.JsonSchema(Order), "separated"),
              schema.AutoProduceBytesSchema(), schema.AutoProduceBytesSchema(schema.AvroSchema(Order))):
        back = pickle.loads(pickle.dumps(s))
        assert type(back) is type(s) and back.definition == s.definition and back.type == s.type
    s = schema.AvroSchema(Order)
    assert pickle.loads(pickle.dumps(s)).decode(s.encode(Order(1, 2.0))) == Order(1, 2.0)


def test_key_value_separated_encodes_the_value_and_a_base64_key() -> None:
    s = schema.KeyValueSchema(schema.IntSchema(), schema.StringSchema(), "separated")
    assert s.encode((1, "v")) == b"v", "the payload is the value's encoding, as Java's encode gives"
    assert s._encode((1, "v")) == (b"v", "AAAAAQ==")
    assert s._encode(schema.KeyValue(None, "v")) == (b"v", None)
    with pytest.raises(magnetar.SchemaEncodeError):
        s._encode((1, None))
    with pytest.raises(magnetar.SchemaEncodeError):
        s._encode("not a pair")


def test_auto_produce_checks_without_a_broker() -> None:
    avro = schema.AvroSchema(Order)
    s = schema.AutoProduceBytesSchema(avro)
    good = avro.encode(Order(1, 2.0))
    assert s._encode(good) == good
    for bad in (b"", good + b"x", b"\xff" * 3):
        with pytest.raises(magnetar.SchemaEncodeError, match="AVRO"):
            s._encode(bad)
    kv = schema.KeyValueSchema(schema.IntSchema(), schema.JsonSchema(Order))
    checked = schema.AutoProduceBytesSchema(kv)
    assert checked._encode(kv.encode((1, Order(1, 2.0))))
    with pytest.raises(magnetar.SchemaEncodeError):
        checked._encode(kv.encode((1, Order(1, 2.0)))[:-1])
    assert schema.AutoProduceBytesSchema()._encode(b"anything") == b"anything"
    broken = schema.SchemaInfo("x", schema.SchemaType.AVRO, b'{"type": "nope"}')
    with pytest.raises(magnetar.InvalidConfiguration, match="cannot check"):
        schema.AutoProduceBytesSchema()._bind(broken)
    assert schema.AutoProduceBytesSchema()._wire() is None
