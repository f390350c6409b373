"""Writes of the ``pulsar`` data source, batch and streaming: the engine reads each Arrow
batch's columns and queues its rows per topic; every receipt is awaited before a task ends
(at-least-once; with ``exactlyOnce`` inside a transaction per task, see ``_exactly_once``)."""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import uuid
from collections import deque
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import (
    BinaryType,
    DataType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

try:  # Spark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover
    _StreamWriterBase = DataSourceStreamWriter  # type: ignore[misc,assignment]

from ..exceptions import InvalidConfiguration, PulsarError
from . import _exactly_once, _workers
from ._options import SourceOptions, normalize_topic
from ._schema import TopicSchema, producer_schema

__all__ = ["WRITE_COLUMNS", "PulsarBatchWriter", "PulsarCommitMessage", "PulsarStreamWriter", "check_write_schema", "write_columns"]

log = logging.getLogger("magnetar.spark")

WRITE_COLUMNS: dict[str, tuple[type[DataType], ...]] = {
    "value": (BinaryType, StringType),
    "key": (StringType, BinaryType),
    "properties": (MapType,),
    "event_time": (TimestampType, TimestampNTZType, LongType),
    "topic": (StringType,),
}
"""The columns a write takes, with the Spark types accepted (``metadataColumns=magnetar``)."""

# The same roles under pulsar-spark's names (metadataColumns=connector).
_CONNECTOR_NAMES = {"value": "value", "key": "__key", "properties": "__messageProperties",
                    "event_time": "__eventTime", "topic": "__topic"}
# Columns of a read that the broker sets: a write cannot give them.
_READ_ONLY = {"partition", "message_id", "publish_time", "producer_name", "sequence_id", "redelivery_count",
              "__messageId", "__publishTime"}


def write_columns(opts: SourceOptions) -> dict[str, str]:
    """role -> the column name that carries it, for the options' naming."""
    if opts.metadata_columns == "connector":
        return dict(_CONNECTOR_NAMES)
    return {role: role for role in WRITE_COLUMNS}


def check_write_schema(opts: SourceOptions, schema: StructType, values: TopicSchema | None = None) -> None:
    """Every column must be one the write uses; anything else is an error before the job starts.
    With ``values`` (the topic's Avro or JSON schema), the other columns are its fields."""
    names = write_columns(opts)
    role_of = {col: role for role, col in names.items()}
    if values is not None:
        _check_encoded_columns(values, schema, role_of)
        role_of = {c: r for c, r in role_of.items() if r != "value"}
    other = "magnetar" if opts.metadata_columns == "connector" else "connector"
    other_names = set(_CONNECTOR_NAMES.values()) if other == "connector" else set(WRITE_COLUMNS)
    fields = {f.name: f.dataType for f in schema.fields}
    if values is not None:
        fields = {n: t for n, t in fields.items() if n in role_of}
    elif names["value"] not in fields:
        raise InvalidConfiguration(f"pulsar data source: a write needs a 'value' column (binary or string); "
                                   f"the columns are {list(fields)}")
    for col, t in fields.items():
        role = role_of.get(col)
        if role is None:
            if col in _READ_ONLY:
                why = "is set by the broker and cannot be written; drop it"
            elif col in other_names:
                why = f"is the column name of metadataColumns={other}; rename it or set that option"
            else:
                close = difflib.get_close_matches(col, list(role_of), n=1)
                why = (f"is not a column a write uses; did you mean {close[0]!r}?" if close
                       else f"is not a column a write uses ({', '.join(role_of)}); drop it")
            raise InvalidConfiguration(f"pulsar data source: column {col!r} {why}")
        types = WRITE_COLUMNS[role]
        if not isinstance(t, types):
            want = " or ".join(x.typeName() for x in types)
            raise InvalidConfiguration(f"pulsar data source: column {col!r} must be {want}, not {t.simpleString()}")
        if role == "properties":
            assert isinstance(t, MapType)
            if not (isinstance(t.keyType, StringType) and isinstance(t.valueType, StringType)):
                raise InvalidConfiguration(f"pulsar data source: column {col!r} must be map<string,string>, "
                                           f"not {t.simpleString()}")
    if opts.topic is None and names["topic"] not in fields:
        raise InvalidConfiguration(f"pulsar data source: option 'topic': a write needs the 'topic' option or a "
                                   f"{names['topic']!r} column")
    if opts.topics or opts.topics_pattern:
        raise InvalidConfiguration("pulsar data source: options 'topics'/'topicsPattern' are for reads; "
                                   "writes take 'topic' or a 'topic' column")


def _check_encoded_columns(values: TopicSchema, schema: StructType, role_of: dict[str, str]) -> None:
    """The non-metadata columns of a write to a topic with a record schema are its fields."""
    fields = [f.name for f in values.columns().fields]
    record = fields != ["value"]
    for f in schema.fields:
        if f.name in fields or (f.name in role_of and role_of[f.name] != "value"):
            continue
        close = difflib.get_close_matches(f.name, fields + list(role_of), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        what = f"a field of the topic's {values.type_name} schema ({', '.join(fields)})" if record else "a column a write uses"
        raise InvalidConfiguration(f"pulsar data source: column {f.name!r} is not {what}; {hint}"
                                   "drop or rename it")
    given = {f.name for f in schema.fields}
    for name in values.required_fields():
        if name not in given:
            raise InvalidConfiguration(f"pulsar data source: the topic's {values.type_name} schema needs a column "
                                       f"{name!r}: the field has no default")


class PulsarCommitMessage(WriterCommitMessage):
    """What one task sent: messages per topic."""

    def __init__(self, sent: dict[str, int], pid: int, txn: tuple[int, int] | None = None) -> None:
        self.sent = sent
        self.pid = pid
        self.txn = txn

    def __repr__(self) -> str:
        return f"PulsarCommitMessage({self.sent}, pid={self.pid}, txn={self.txn})"


# Messages a sink's producer keeps in flight unless the options set ``max_pending``: with the
# client's default (1,000) a task waits a round trip per thousand rows, which held raw sends to
# about a third of what the broker takes here; the client's memory_limit still bounds the bytes.
SINK_MAX_PENDING = 10_000

# Batches whose receipts a task leaves outstanding while it queues the next ones; beyond
# that it waits for the oldest (long done by then), so a task's memory stays bounded.
_IN_FLIGHT = 16


def _write(opts: SourceOptions, write_id: str, batches: Iterator[Any], values: TopicSchema | None = None,
           ) -> PulsarCommitMessage:
    """One task's write: plain, or inside a transaction of its own with ``exactlyOnce``."""
    if not opts.exactly_once:
        return _write_batches(opts, batches, values=values)
    msg, txn_id = _exactly_once.in_transaction(opts, write_id,
                                               lambda txn: _write_batches(opts, batches, txn, values))
    msg.txn = txn_id
    return msg


def _write_batches(opts: SourceOptions, batches: Iterator[Any], txn: Any = None,
                   values: TopicSchema | None = None) -> PulsarCommitMessage:
    """Sends every row, waiting for every receipt before returning (a failed send fails the
    task). The engine reads each batch's Arrow columns and queues its messages; the task goes
    on to the next batch while earlier receipts are outstanding. With ``txn``, every message
    is sent in that transaction."""
    import pyarrow as pa
    import pyarrow.compute as pc

    producer_kw = opts.producer_kwargs
    producer_kw.setdefault("max_pending", SINK_MAX_PENDING)
    encoder = None
    if values is not None:  # rows encoded with the topic's schema by the engine
        producer_kw["schema"], encoder = producer_schema(values)
    names = write_columns(opts)
    topic_col = names["topic"]
    sent: dict[str, int] = {}
    in_flight: deque[tuple[Any, Any]] = deque()

    def settle(p: Any, receipts: Any) -> None:
        try:
            receipts.wait()
        except PulsarError:
            _workers._forget_producer(p)  # a broken producer is rebuilt by the next task
            raise

    def send(topic: str, data: Any) -> None:
        p = _workers.producer(opts.client, topic, **producer_kw)
        try:
            receipts = p._core.send_arrow(data, names["value"], names["key"], names["properties"],
                                          names["event_time"], txn, encoder)
        except PulsarError:
            _workers._forget_producer(p)
            raise
        in_flight.append((p, receipts))
        while len(in_flight) > _IN_FLIGHT:
            settle(*in_flight.popleft())
        sent[topic] = sent.get(topic, 0) + data.num_rows

    def settle_all() -> None:
        """Waits for every receipt still outstanding; then raises the first failure."""
        failure: PulsarError | None = None
        while in_flight:
            try:
                settle(*in_flight.popleft())
            except PulsarError as e:
                failure = failure or e
        if failure is not None:
            raise failure

    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if opts.topic is not None or topic_col not in batch.schema.names:
                assert opts.topic is not None
                send(opts.topic, batch)
                continue
            col = batch.column(topic_col)
            if col.null_count:
                raise InvalidConfiguration(f"pulsar data source: a row has a null {topic_col!r} and no 'topic' "
                                           "option is set")
            for t in pc.unique(col).to_pylist():
                sub = batch.filter(pc.equal(col, pa.scalar(t, col.type)))
                send(normalize_topic(t), sub)
    except BaseException:
        with contextlib.suppress(PulsarError):  # the task fails with the first error
            settle_all()
        raise
    settle_all()
    return PulsarCommitMessage(sent, os.getpid())


def _rows_to_batches(rows: Iterator[Any], schema: StructType, size: int = 10_000) -> Iterator[Any]:
    """Rows (the non-Arrow writer interface) to Arrow batches."""
    import pyarrow as pa

    names = [f.name for f in schema.fields]
    buf: list[Any] = []

    def flush() -> Any:
        cols = {n: [r[n] for r in buf] for n in names}
        arrays = []
        for n in names:
            v = cols[n]
            if n in ("properties", "__messageProperties"):
                arrays.append(pa.array(v, type=pa.map_(pa.string(), pa.string())))
            elif n in ("event_time", "__eventTime") and v and isinstance(next((x for x in v if x is not None), 0), int):
                arrays.append(pa.array(v, type=pa.int64()))
            else:
                arrays.append(pa.array(v))
        return pa.RecordBatch.from_arrays(arrays, names=names)

    for r in rows:
        buf.append(r)
        if len(buf) >= size:
            yield flush()
            buf = []
    if buf:
        yield flush()


class PulsarBatchWriter(DataSourceArrowWriter):
    """Writes each Spark partition, the engine queueing each Arrow batch's rows per topic (keys,
    properties and event times included); every receipt is awaited before the task ends.
    At-least-once: a retried task sends its rows again; with ``exactlyOnce`` each task writes
    in a transaction that ``commit`` commits (all or nothing per job)."""

    def __init__(self, opts: SourceOptions, schema: StructType, values: TopicSchema | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.values = values
        self.write_id = uuid.uuid4().hex  # made on the driver: the same in every task

    def write(self, iterator: Iterator[Any]) -> PulsarCommitMessage:
        return _write(self.opts, self.write_id, iterator, getattr(self, "values", None))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            _exactly_once.commit_all(self.opts, messages, "write")
        total = sum(sum(m.sent.values()) for m in messages if isinstance(m, PulsarCommitMessage))
        log.info("pulsar data source: wrote %d messages", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            return _exactly_once.abort_all(self.opts, messages, "write")
        total = sum(sum(m.sent.values()) for m in messages if isinstance(m, PulsarCommitMessage))
        log.warning("pulsar data source: write aborted; %d messages of finished tasks were already "
                    "delivered (Pulsar has no transactional write here: at-least-once)", total)


class PulsarStreamWriter(_StreamWriterBase):  # type: ignore[misc,valid-type]
    """The streaming sink: each micro-batch task sends its rows and waits for every receipt
    (at-least-once: a replayed batch is sent again; with ``exactlyOnce`` the micro-batch's
    ``commit`` commits the transactions its tasks wrote in)."""

    def __init__(self, opts: SourceOptions, schema: StructType, values: TopicSchema | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.values = values
        self.write_id = uuid.uuid4().hex  # made on the driver: the same in every task

    def write(self, iterator: Iterator[Any]) -> PulsarCommitMessage:
        first = next(iterator, None)
        if first is None:
            return PulsarCommitMessage({}, os.getpid())
        import itertools

        import pyarrow as pa

        it: Iterator[Any] = itertools.chain([first], iterator)
        if not isinstance(first, pa.RecordBatch):  # the row interface of older PySpark
            it = _rows_to_batches(it, self.schema)
        return _write(self.opts, self.write_id, it, getattr(self, "values", None))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            _exactly_once.commit_all(self.opts, messages, f"batch {batchId}")
        total = sum(sum(m.sent.values()) for m in messages if isinstance(m, PulsarCommitMessage))
        log.info("pulsar data source: batch %d wrote %d messages", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            return _exactly_once.abort_all(self.opts, messages, f"batch {batchId}")
        log.warning("pulsar data source: batch %d aborted; rows already sent stay sent (at-least-once)", batchId)
