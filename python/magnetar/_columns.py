"""Topics as Arrow record batches, outside Spark: the columns of a read (declared here for the
Spark source too), the layout a consumer or reader fills, and the Python ends of
``read_arrow``/``receive_arrow``/``ack_arrow``/``send_arrow`` shared by the blocking and asyncio
twins. The columns themselves are built in the engine (``src/columnar/``); nothing here makes
a Python object per row.

pyarrow is needed only by these calls, imported when they are first used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from . import _core
from ._core import MessageId
from ._options import ArrowColumns, MetadataColumns, resolve
from .exceptions import InvalidConfiguration, Timeout

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["METADATA_COLUMNS", "ArrowReads", "Columns", "StreamEnd", "arrow_type", "merge_columns", "metadata_schema",
           "to_arrow", "to_batch"]

METADATA_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    MetadataColumns.MAGNETAR.value: (
        ("key", "string"), ("value", "binary"), ("topic", "string"), ("partition", "int32"),
        ("message_id", "binary"), ("publish_time", "timestamp"), ("event_time", "timestamp"),
        ("properties", "properties"), ("producer_name", "string"), ("sequence_id", "int64"),
        ("redelivery_count", "int32"),
    ),
    MetadataColumns.CONNECTOR.value: (
        ("value", "binary"), ("__key", "binary"), ("__topic", "string"), ("__messageId", "binary"),
        ("__publishTime", "timestamp"), ("__eventTime", "timestamp"), ("__messageProperties", "properties"),
    ),
}
"""The metadata columns of a read in each naming: (name, kind) in order. ``timestamp`` is
microseconds in UTC (what Spark reads), ``properties`` a map of string to string."""


def arrow_type(kind: str) -> pa.DataType:
    """The Arrow type of a kind of :data:`METADATA_COLUMNS`."""
    import pyarrow as pa

    types = {"string": pa.string(), "binary": pa.binary(), "int32": pa.int32(), "int64": pa.int64(),
             "timestamp": pa.timestamp("us", tz="UTC"), "properties": pa.map_(pa.string(), pa.string())}
    return types[kind]


def metadata_schema(naming: str) -> pa.Schema:
    """The metadata columns of ``naming`` as an Arrow schema."""
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in METADATA_COLUMNS[naming]])


F = TypeVar("F")


def merge_columns(values: Sequence[F], meta: Sequence[F], name: Callable[[F], str], naming: str,
                  what: str = "the topic's schema") -> list[F]:
    """The columns of a read of a topic with a schema: the schema's columns, then the metadata
    columns other than ``value``. A field named like a metadata column is an error."""
    kept = [f for f in meta if name(f) != "value"]
    taken = {name(f) for f in kept}
    for f in values:
        if name(f) in taken:
            other = MetadataColumns.CONNECTOR.value if naming != MetadataColumns.CONNECTOR.value else MetadataColumns.MAGNETAR.value
            raise InvalidConfiguration(f"{what} has a field {name(f)!r}, which is also a metadata column; "
                                       f"set metadata_columns (metadataColumns) to {other!r} to read it")
    return list(values) + kept


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:  # pragma: no cover - pyarrow is a dependency of the Arrow calls only
        raise ImportError("magnetar's Arrow calls need pyarrow: pip install pyarrow") from None
    return pyarrow


def to_batch(got: Any) -> pa.RecordBatch:
    """The engine's ``_ArrowBatch`` as a ``pyarrow.RecordBatch`` (no copy)."""
    batch: pa.RecordBatch = _pyarrow().record_batch(got)
    return batch


def to_arrow(data: Any) -> Any:
    """What ``send_arrow`` takes, as something with ``__arrow_c_array__`` or
    ``__arrow_c_stream__``: Arrow data as it is, a pandas DataFrame through pyarrow."""
    if hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__"):
        return data
    if type(data).__name__ == "DataFrame" and hasattr(data, "to_dict"):  # pandas without importing it
        return _pyarrow().Table.from_pandas(data, preserve_index=False)
    raise TypeError(f"send_arrow takes a pyarrow Table or RecordBatch, a pandas DataFrame, or anything with "
                    f"__arrow_c_stream__ or __arrow_c_array__, not {type(data).__name__}")


class Columns(NamedTuple):
    """The columns of an Arrow read: the engine's layout and its Arrow schema."""

    layout: _core._ArrowLayout
    schema: pa.Schema


class ArrowReads:
    """A consumer's or reader's Arrow layouts, one per set of column options, made once: the
    topic's schema is fetched (through the client the handle was made by) the first time."""

    __slots__ = ("_client", "_layouts")

    def __init__(self, client: _core._Client | None) -> None:
        self._client = client
        self._layouts: dict[tuple[Any, ...], Columns] = {}

    @staticmethod
    def key(options: Mapping[str, Any]) -> tuple[Any, ...]:
        """The options checked against their declaration, as a cache key."""
        o = resolve(ArrowColumns, options, "read_arrow")
        columns = o["columns"]
        if columns is not None:
            if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
                raise InvalidConfiguration(f"columns must be a list of column names, not {columns!r}")
            columns = tuple(columns)
        return (MetadataColumns(o["metadata_columns"]).value, bool(o["schema_fields"]), columns)

    @property
    def client(self) -> _core._Client | None:
        return self._client

    def cached(self, key: tuple[Any, ...]) -> Columns | None:
        return self._layouts.get(key)

    def schema_topics(self, key: tuple[Any, ...], topics: Sequence[str]) -> list[str]:
        """The topics whose schema a layout of ``key`` needs (none without schema fields): one
        name per topic, a partition's for a partitioned topic (whose own name the registry
        lookup does not find)."""
        if not key[1]:
            return []
        if self._client is None:
            raise InvalidConfiguration("this consumer was not made by a magnetar Client: pass schema_fields=False")
        one: dict[str, str] = {}
        for t in sorted(topics):
            one.setdefault(_base(t), t)
        return list(one.values())

    def make(self, key: tuple[Any, ...], topics: Sequence[str], schemas: dict[str, Any]) -> Columns:
        """The layout of ``key`` for a handle of ``topics``, given the wire schemas of
        :meth:`schema_topics` (``Client.get_schema``'s engine answer, or None)."""
        pa = _pyarrow()
        naming, _, columns = key
        first = sorted({_base(t) for t in topics})[0] if topics else ""
        values = None
        if schemas:
            distinct = {None if s is None else (s[1], bytes(s[2])) for s in schemas.values()}
            if len(distinct) > 1:
                raise InvalidConfiguration(f"the topics have different schemas ({sorted(schemas)}): read them "
                                           "separately, or pass schema_fields=False to read every payload as bytes")
            wire = next(iter(schemas.values()))
            if wire is not None:
                topic = sorted(schemas)[0]
                values = _core._ValueSchema.of(wire[1], bytes(wire[2]), bytes(wire[4] or b""), self._client, topic)
        meta = list(metadata_schema(naming))
        fields = meta if values is None else merge_columns(list(pa.schema(values)), meta, lambda f: f.name, naming,
                                                           f"the schema of {first}")
        if columns is not None:
            by_name = {f.name: f for f in fields}
            unknown = [c for c in columns if c not in by_name]
            if unknown:
                raise InvalidConfiguration(f"unknown column(s) {unknown}: the columns are {list(by_name)} "
                                           f"(metadata_columns={naming!r})")
            fields = [by_name[c] for c in columns]
        schema = pa.schema(fields)
        made = Columns(_core._ArrowLayout(schema, first, -1, values, per_message=True), schema)
        self._layouts[key] = made
        return made


class StreamEnd:
    """Where a reader's Arrow stream ends: at ``end`` (a message id, included), kept by the
    engine's range scan (``src/columnar/scan.rs``), or sooner when the topic has nothing more
    (the end message is gone). ``timeout`` bounds the wait for a message that must come."""

    def __init__(self, topics: Sequence[str], end: Any, timeout: float | None) -> None:
        if len(topics) != 1:
            raise InvalidConfiguration(f"an Arrow stream reads one partition, and this reader reads {len(topics)}: "
                                       "read each partition with a reader of its own (topic-partition-N)")
        if not isinstance(end, MessageId):
            raise InvalidConfiguration(f"until must be 'now' or a MessageId, not {end!r}")
        self.name = topics[0]
        self.scan = None if end.ledger_id < 0 else _core._RangeScan(self.name, None, False, end)
        self.timeout = timeout
        self._deadline = self._next_deadline()

    def _next_deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    @property
    def done(self) -> bool:
        return self.scan is None or self.scan.done

    def took(self, got: Any) -> pa.RecordBatch | None:
        """The rows of one receive (None: none to yield)."""
        if got.messages_read:
            self._deadline = self._next_deadline()
        return to_batch(got) if got.num_rows else None

    def idle(self, available: bool) -> bool:
        """After a receive that got nothing: whether to go on (``available``: the reader's
        ``has_message_available()``); raises :class:`~magnetar.Timeout` past the wait."""
        if not available:
            return False
        if self._deadline is not None and time.monotonic() > self._deadline:
            assert self.scan is not None
            raise Timeout(f"no message from {self.name} within {self.timeout} s (read up to {self.scan.last_key})")
        return True


def stream_end(until: Any, last: Callable[[], Any]) -> Any:
    """The end id of ``until`` (``"now"``: ``last()``, the topic's last message id)."""
    if isinstance(until, str) and until == "now":
        return last()
    return until


def _base(topic: str) -> str:
    """A partition's topic (``t`` of ``t-partition-3``)."""
    head, sep, tail = topic.rpartition("-partition-")
    return head if sep and tail.isdigit() else topic

