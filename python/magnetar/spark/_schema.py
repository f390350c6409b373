"""The topic's schema in the rows of a read, as pulsar-spark has it: a topic with an Avro or
JSON record schema gives one column per field, a primitive schema (STRING, INT64, ...) a
typed ``value`` column, beside the metadata columns; schema-less topics (and every topic with
``allowDifferentTopicSchemas=true``) keep ``value`` as bytes. The payloads are decoded in the
engine (``src/columnar/schema_read.rs``) straight into the Arrow columns; this module only
fetches the schema on the driver and names the columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.types import StructType

from .. import _core
from .._client import Client
from .._columns import merge_columns
from ..exceptions import InvalidConfiguration
from ._options import PartitionRef, SourceOptions

__all__ = ["TopicSchema", "fetch_topic_schema", "rows_schema"]

# Wire numbers of the schema types whose payloads stay bytes (NONE; BYTES is not on the wire).
_NAMES = {0: "NONE", 1: "STRING", 2: "JSON", 3: "PROTOBUF", 4: "AVRO", 5: "BOOLEAN", 6: "INT8", 7: "INT16",
          8: "INT32", 9: "INT64", 10: "FLOAT", 11: "DOUBLE", 12: "DATE", 13: "TIME", 14: "TIMESTAMP",
          15: "KEY_VALUE", 20: "PROTOBUF_NATIVE"}


@dataclass(frozen=True)
class TopicSchema:
    """The schema the rows of a read are decoded with: wire type, definition, and the version
    it has on each topic (the reader's version; messages of other versions are resolved to it)."""

    kind: int
    definition: bytes
    versions: dict[str, bytes] = field(default_factory=dict, compare=False)
    name: str = field(default="", compare=False)
    properties: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def type_name(self) -> str:
        return _NAMES.get(self.kind, str(self.kind))

    def engine(self, client: Client | None = None, topic: str = "") -> Any:
        """The engine's ``_ValueSchema`` (None: payloads stay bytes); with ``client``, it fetches
        the writer schemas of other versions of ``topic``."""
        base = topic.split("-partition-")[0] if "-partition-" in topic else topic
        version = self.versions.get(base, b"")
        return _core._ValueSchema.of(self.kind, self.definition, version,
                                     None if client is None else client._core, topic)

    def required_fields(self) -> list[str]:
        """The root record's fields that a write must give: no default, no null."""
        import json

        d = json.loads(self.definition)
        if not isinstance(d, dict) or d.get("type") != "record":
            return []
        return [f["name"] for f in d.get("fields", []) if "default" not in f
                and not (isinstance(f.get("type"), list) and "null" in f["type"])]

    def columns(self) -> StructType:
        """The Spark columns of the decoded payload."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import from_arrow_schema

        values = self.engine()
        if values is None:
            return StructType([])
        return from_arrow_schema(pa.schema(values))


def fetch_topic_schema(client: Client, opts: SourceOptions, refs: list[PartitionRef]) -> TopicSchema | None:
    """The topics' common schema (None: payloads stay bytes), as the connector decides it:
    with ``allowDifferentTopicSchemas=true`` none; otherwise the topics must share one."""
    if opts.allow_different_topic_schemas:
        return None
    found: dict[str, TopicSchema | None] = {}
    for ref in refs:
        if ref.topic in found:
            continue
        info = client.get_schema(ref.name)
        if info is None:
            found[ref.topic] = None
            continue
        version = b"" if info.version is None else info.version.to_bytes(8, "big", signed=True)
        found[ref.topic] = TopicSchema(int(info.type), bytes(info.definition), {ref.topic: version}, info.name,
                                       dict(info.properties))
    distinct = {(s.kind, s.definition) if s else None for s in found.values()}
    if len(distinct) > 1:
        listed = ", ".join(f"{t}: {s.type_name if s else 'none'}" for t, s in sorted(found.items()))
        raise InvalidConfiguration(
            f"pulsar data source: the topics to read have different schemas ({listed}); read them "
            "separately, or set allowDifferentTopicSchemas=true to read every payload as bytes")
    schemas = [s for s in found.values() if s is not None]
    if not schemas:
        return None
    first = schemas[0]
    merged = TopicSchema(first.kind, first.definition, {t: v for s in schemas for t, v in s.versions.items()})
    return merged if merged.engine() is not None else None


def rows_schema(base: StructType, ts: TopicSchema | None, metadata_columns: str) -> StructType:
    """The rows of a read: the schema's columns, then the metadata columns of ``base`` (the
    schema-less rows) other than ``value``. A field named like a metadata column is an error."""
    if ts is None:
        return base
    try:
        fields = merge_columns(ts.columns().fields, base.fields, lambda f: f.name, metadata_columns)
    except InvalidConfiguration as e:
        raise InvalidConfiguration(f"pulsar data source: {e}") from None
    return StructType(fields)
