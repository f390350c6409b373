"""What a write sends to a topic with a schema: an Avro or JSON schema takes the rows' columns
as its fields, a primitive schema (STRING, INT64, ...) a ``value`` of the Spark type a read
gives for it, and both are encoded in the engine (``src/columnar/schema_write.rs``,
``primitive_write.rs``) by a producer that registers the topic's schema. Every other topic
(no schema, BYTES, PROTOBUF, KEY_VALUE, ...) takes ``value`` bytes, as does a primitive-schema
topic given a binary ``value``.

The driver checks the columns against the schema of the ``topic`` option's topic before the
job starts. With the topic in a column the topics are known only as the rows arrive: each
executor process looks up each topic's schema once (:func:`topic_write_schema`) and a task
checks its columns against it before it sends any row to that topic."""

from __future__ import annotations

import difflib
import threading
from typing import Any

import pyspark.sql.types as st
from pyspark.sql.types import BinaryType, DataType, StringType, StructType

from .. import _core
from .._client import Client
from .._config import ClientConfig
from ..exceptions import InvalidConfiguration
from ._schema import TopicSchema

__all__ = ["SPARK_TYPES", "check_payload_columns", "producer_schema", "topic_write_schema", "write_schema"]

# The Spark type of a primitive schema's `value`: the one a read gives (schema_read.rs), so a
# read's rows write back unchanged. TIME reads as bytes; Spark's TIME type (4.1+) writes too.
SPARK_TYPES: dict[int, tuple[type[DataType], ...]] = {
    1: (StringType,), 5: (st.BooleanType,), 6: (st.ByteType,), 7: (st.ShortType,), 8: (st.IntegerType,),
    9: (st.LongType,), 10: (st.FloatType,), 11: (st.DoubleType,), 12: (st.DateType,),
    14: (st.TimestampType, st.TimestampNTZType),
}
if hasattr(st, "TimeType"):  # pragma: no branch
    SPARK_TYPES[13] = (st.TimeType,)
_RECORDS = (2, 4)  # JSON, AVRO
_PRIMITIVES = (1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)  # STRING ... TIMESTAMP (the engine encodes them)


def write_schema(client: Client, topic: str) -> TopicSchema | None:
    """The schema a write to ``topic`` encodes its rows with: the topic's, when it is an Avro,
    JSON or primitive one (None: rows carry their payload bytes in ``value``)."""
    info = client.get_schema(topic)
    if info is None or int(info.type) not in (*_RECORDS, *_PRIMITIVES):
        return None
    return TopicSchema(int(info.type), bytes(info.definition), {}, info.name, dict(info.properties))


# The schemas of the topics this process has written to, by client configuration and topic:
# a write naming its topics in a column asks the registry once per topic, not once per task.
_TOPIC_SCHEMAS: dict[tuple[ClientConfig, str], TopicSchema | None] = {}
_LOCK = threading.Lock()


def topic_write_schema(conf: ClientConfig, topic: str) -> TopicSchema | None:
    """:func:`write_schema` of ``topic``, looked up once per process. A schema registered
    later (a new version, a schema on a topic that had none) is seen by processes started
    after it."""
    from . import _workers

    key = (conf, topic)
    with _LOCK:
        if key in _TOPIC_SCHEMAS:
            return _TOPIC_SCHEMAS[key]
    got = write_schema(_workers.client(conf), topic)
    with _LOCK:
        return _TOPIC_SCHEMAS.setdefault(key, got)


# One schema object and one encoder per (kind, definition) in a process, so the sink's cached
# producers (keyed by their options) are shared by the tasks that write with them.
_SCHEMAS: dict[tuple[int, bytes], tuple[Any, Any]] = {}


def producer_schema(ts: TopicSchema) -> tuple[Any, Any]:
    """(the ``magnetar.schema`` object a sink's producer registers, the engine's encoder):
    the topic's own definition, so the producer attaches to its version."""
    key = (ts.kind, ts.definition)
    got = _SCHEMAS.get(key)
    if got is None:
        from .. import schema as s

        classes: dict[int, Any] = {1: s.StringSchema, 5: s.BooleanSchema, 6: s.ByteSchema, 7: s.ShortSchema,
                                   8: s.IntSchema, 9: s.LongSchema, 10: s.FloatSchema, 11: s.DoubleSchema,
                                   12: s.DateSchema, 13: s.TimeSchema, 14: s.TimestampSchema}
        if ts.kind in _RECORDS:
            cls = s.AvroSchema if ts.kind == 4 else s.JsonSchema
            obj = cls(definition=ts.definition, properties=ts.properties)
        else:
            obj = classes[ts.kind]()
        got = (obj, _core._ValueEncoder.of(ts.kind, ts.definition))
        _SCHEMAS[key] = got
    return got


def check_payload_columns(ts: TopicSchema | None, schema: StructType, metadata: dict[str, str],
                          unwritable: dict[str, str], topic: str) -> TopicSchema | None:
    """The schema the rows of ``schema`` are encoded with for ``topic`` (None: ``value`` bytes),
    or an error naming the topic, its schema and the columns that do not fit. ``metadata``:
    column -> role of the naming's metadata columns (not payload); ``unwritable``: column ->
    why no write takes it."""
    payload = {f.name: f.dataType for f in schema.fields if f.name not in metadata}
    if ts is not None and ts.kind in _RECORDS:
        fields = [f.name for f in ts.columns().fields]
        if fields != ["value"]:
            _check_record(ts, payload, topic, fields, list(metadata))
            return ts
    where = f"topic {topic}, schema {ts.type_name}" if ts is not None else f"topic {topic}, no schema"
    for col in payload:
        if col != "value":
            why = unwritable.get(col)
            if why is None:
                close = difflib.get_close_matches(col, ["value", *metadata], n=1)
                why = (f"is not a column a write uses; did you mean {close[0]!r}?" if close
                       else f"is not a column a write uses ({', '.join(['value', *metadata])}); drop it")
            raise InvalidConfiguration(f"pulsar data source: column {col!r} {why} ({where})")
    t = payload.get("value")
    if t is None:
        raise InvalidConfiguration(f"pulsar data source: a write needs a 'value' column ({where}); "
                                   f"the columns are {[f.name for f in schema.fields]}")
    if ts is not None and ts.kind in _RECORDS:
        return ts  # a non-record Avro/JSON schema: the engine checks the value's type per row
    if isinstance(t, BinaryType):
        return None  # the user's bytes, sent as they are
    if ts is not None and ts.kind in _PRIMITIVES:
        types = SPARK_TYPES.get(ts.kind, ())
        if isinstance(t, types):
            return ts
        want = " or ".join(x().simpleString() for x in types) or "binary"
        raise InvalidConfiguration(f"pulsar data source: column 'value' must be {want} ({where}; or binary: bytes "
                                   f"sent as they are), not {t.simpleString()}")
    if not isinstance(t, StringType):
        raise InvalidConfiguration(f"pulsar data source: column 'value' must be binary or string ({where}), "
                                   f"not {t.simpleString()}")
    return None


def _check_record(ts: TopicSchema, payload: dict[str, DataType], topic: str, fields: list[str],
                  metadata: list[str]) -> None:
    """The payload columns are fields of the record, and every field without a default has one."""
    problems = []
    for col in payload:
        if col not in fields:
            close = difflib.get_close_matches(col, fields + metadata, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"column {col!r} is not one of its fields{hint}")
    missing = [name for name in ts.required_fields() if name not in payload]
    if missing:
        problems.append(f"it needs a column {missing[0]!r}: the field has no default" if len(missing) == 1 else
                        f"it needs columns {', '.join(repr(m) for m in missing)}: the fields have no default")
    if problems:
        raise InvalidConfiguration(f"pulsar data source: the columns do not fit the {ts.type_name} schema of {topic}: "
                                   f"{'; '.join(problems)}; its fields are {', '.join(fields)}")
