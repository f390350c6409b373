"""Writes of the ``pulsar`` data source, batch and streaming: the engine reads each Arrow
batch's columns and queues its rows per topic; every receipt is awaited before a task ends
(at-least-once; with ``exactlyOnce`` inside a transaction per task, see ``_exactly_once``)."""

from __future__ import annotations

import contextlib
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
from ._schema import TopicSchema
from ._txn_log import TxnLog, checkpoint_log, local_dir
from ._write_schema import check_payload_columns, producer_schema, topic_write_schema

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


def check_write_schema(opts: SourceOptions, schema: StructType, values: TopicSchema | None = None,
                       ) -> TopicSchema | None:
    """Checks the columns before the job starts; the schema the rows are encoded with (None:
    ``value`` bytes). ``values``: the schema of the ``topic`` option's topic. With the topic in
    a column, the payload columns are checked per topic on the executors (``_write_schema``):
    here only the metadata columns, and that some column can carry a payload."""
    names = write_columns(opts)
    meta = {col: role for role, col in names.items() if role != "value"}
    fields = {f.name: f.dataType for f in schema.fields}
    for col, t in fields.items():
        role = meta.get(col)
        if role is None:
            continue
        types = WRITE_COLUMNS[role]
        if not isinstance(t, types):
            want = " or ".join(x.typeName() for x in types)
            raise InvalidConfiguration(f"pulsar data source: column {col!r} must be {want}, not {t.simpleString()}")
        if role == "properties":
            assert isinstance(t, MapType)
            if not (isinstance(t.keyType, StringType) and isinstance(t.valueType, StringType)):
                raise InvalidConfiguration(f"pulsar data source: column {col!r} must be map<string,string>, "
                                           f"not {t.simpleString()}")
    if opts.topics or opts.topics_pattern:
        raise InvalidConfiguration("pulsar data source: options 'topics'/'topicsPattern' are for reads; "
                                   "writes take 'topic' or a 'topic' column")
    if opts.topic is not None:
        return check_payload_columns(values, schema, meta, _unwritable(opts), opts.topic)
    if names["topic"] not in fields:
        raise InvalidConfiguration(f"pulsar data source: option 'topic': a write needs the 'topic' option or a "
                                   f"{names['topic']!r} column")
    # no topic's schema can make these writable: refused here rather than in the tasks
    unwritable = _unwritable(opts)
    for col in fields:
        if col not in meta and col in unwritable:
            raise InvalidConfiguration(f"pulsar data source: column {col!r} {unwritable[col]}")
    if all(col in meta for col in fields):
        raise InvalidConfiguration(f"pulsar data source: a write needs a 'value' column (or the fields of the "
                                   f"topics' record schema); the columns are {list(fields)}")
    return None


def _unwritable(opts: SourceOptions) -> dict[str, str]:
    """column -> why a write never takes it, for the options' naming."""
    other = "magnetar" if opts.metadata_columns == "connector" else "connector"
    other_names = set(_CONNECTOR_NAMES.values()) if other == "connector" else set(WRITE_COLUMNS)
    out = {col: f"is the column name of metadataColumns={other}; rename it or set that option"
           for col in other_names - set(write_columns(opts).values())}
    out.update({col: "is set by the broker and cannot be written; drop it" for col in _READ_ONLY})
    return out


class PulsarCommitMessage(WriterCommitMessage):
    """What one task sent: messages per topic."""

    def __init__(self, sent: dict[str, int], pid: int, txn: tuple[int, int] | None = None,
                 txn_created: float | None = None, partition: int | None = None) -> None:
        self.sent = sent
        self.pid = pid
        self.txn = txn
        self.txn_created = txn_created
        self.partition = partition

    def __repr__(self) -> str:
        return f"PulsarCommitMessage({self.sent}, pid={self.pid}, txn={self.txn}, partition={self.partition})"


# Messages a sink's producer keeps in flight unless the options set ``max_pending``: with the
# client's default (1,000) a task waits a round trip per thousand rows, which held raw sends to
# about a third of what the broker takes here; the client's memory_limit still bounds the bytes.
SINK_MAX_PENDING = 10_000

# Batches whose receipts a task leaves outstanding while it queues the next ones; beyond
# that it waits for the oldest (long done by then), so a task's memory stays bounded.
_IN_FLIGHT = 16


def _write(opts: SourceOptions, write_id: str, batches: Iterator[Any], values: TopicSchema | None = None,
           schema: StructType | None = None) -> PulsarCommitMessage:
    """One task's write: plain, or inside a transaction of its own with ``exactlyOnce``."""
    if not opts.exactly_once:
        return _write_batches(opts, batches, values=values, schema=schema)
    msg, txn_id, created = _exactly_once.in_transaction(
        opts, write_id, lambda txn: _write_batches(opts, batches, txn, values, schema))
    msg.txn, msg.txn_created, msg.partition = txn_id, created, _partition_id()
    return msg


def _partition_id() -> int | None:
    """The task's Spark partition, which a replay of its micro-batch writes again."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return None if ctx is None else ctx.partitionId()


def _write_batches(opts: SourceOptions, batches: Iterator[Any], txn: Any = None,
                   values: TopicSchema | None = None, schema: StructType | None = None) -> PulsarCommitMessage:
    """Sends every row, waiting for every receipt before returning (a failed send fails the
    task). The engine reads each batch's Arrow columns and queues its messages; the task goes
    on to the next batch while earlier receipts are outstanding. With ``txn``, every message
    is sent in that transaction. ``values`` is the ``topic`` option's schema (checked on the
    driver); a topic named in a column is checked against its own (``schema``: the rows')
    before anything is sent to it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = write_columns(opts)
    topic_col = names["topic"]
    sent: dict[str, int] = {}
    in_flight: deque[tuple[Any, Any]] = deque()
    # topic -> (the producer's options, the engine's encoder, the schema's name for errors)
    plans: dict[str, tuple[dict[str, Any], Any, str]] = {}

    def plan(ts: TopicSchema | None) -> tuple[dict[str, Any], Any, str]:
        kw = opts.producer_kwargs
        kw.setdefault("max_pending", SINK_MAX_PENDING)
        encoder = None
        if ts is not None:  # rows encoded with the topic's schema by the engine
            kw["schema"], encoder = producer_schema(ts)
        return kw, encoder, ts.type_name if ts is not None else ""

    def column_topic(topic: str) -> None:
        """The plan of a topic named in a column: its schema, and columns that fit it."""
        if topic not in plans:
            ts = topic_write_schema(opts.client, topic)
            assert schema is not None
            meta = {col: role for role, col in names.items() if role != "value"}
            plans[topic] = plan(check_payload_columns(ts, schema, meta, _unwritable(opts), topic))

    def settle(p: Any, receipts: Any) -> None:
        try:
            receipts.wait()
        except PulsarError:
            _workers._forget_producer(p)  # a broken producer is rebuilt by the next task
            raise

    def send(topic: str, data: Any) -> None:
        producer_kw, encoder, kind = plans[topic]
        p = _workers.producer(opts.client, topic, **producer_kw)
        try:
            receipts = p._core.send_arrow(data, names["value"], names["key"], names["properties"],
                                          names["event_time"], txn, encoder)
        except InvalidConfiguration as e:  # rows that do not fit the schema: the producer is fine
            if encoder is None:
                raise
            raise InvalidConfiguration(f"pulsar data source: writing to {topic} with its {kind} schema: {e}") from e
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
                if opts.topic not in plans:
                    plans[opts.topic] = plan(values)
                send(opts.topic, batch)
                continue
            col = batch.column(topic_col)
            if col.null_count:
                raise InvalidConfiguration(f"pulsar data source: a row has a null {topic_col!r} and no 'topic' "
                                           "option is set")
            topics = [(t, normalize_topic(t)) for t in pc.unique(col).to_pylist()]
            for _, topic in topics:  # every topic of the batch checked before any row is sent
                column_topic(topic)
            for t, topic in topics:
                send(topic, batch.filter(pc.equal(col, pa.scalar(t, col.type))))
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


class _Writer:
    """What the batch and the streaming writer are made with, on the driver: the options, the
    rows' Spark schema, the topic's value schema, and the id that names this write in every
    task."""

    def __init__(self, opts: SourceOptions, schema: StructType, values: TopicSchema | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.values = values
        self.write_id = uuid.uuid4().hex  # made on the driver: the same in every task


def _sent(messages: list[WriterCommitMessage | None]) -> int:
    """Messages the tasks that finished sent, as their commit messages count them."""
    return sum(sum(m.sent.values()) for m in messages if isinstance(m, PulsarCommitMessage))


class PulsarBatchWriter(_Writer, DataSourceArrowWriter):
    """Writes each Spark partition, the engine queueing each Arrow batch's rows per topic (keys,
    properties and event times included); every receipt is awaited before the task ends.
    At-least-once: a retried task sends its rows again; with ``exactlyOnce`` each task writes
    in a transaction that ``commit`` commits (all or nothing per job)."""

    def write(self, iterator: Iterator[Any]) -> PulsarCommitMessage:
        return _write(self.opts, self.write_id, iterator, getattr(self, "values", None), self.schema)

    def _what(self) -> str:
        return "write" if self.opts.write_id is None else f"write {self.opts.write_id!r}"

    def _record(self) -> tuple[TxnLog | None, str | None]:
        """Where the committed transactions are recorded (with ``writeId``), and under what key."""
        if self.opts.write_id is None or self.opts.write_log is None:
            return None, None
        return TxnLog(local_dir(self.opts.write_log, "writeLog")), self.opts.write_id

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            _exactly_once.commit_all(self.opts, messages, self._what(), *self._record())
        log.info("pulsar data source: wrote %d messages", _sent(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            return _exactly_once.abort_all(self.opts, messages, self._what(), *self._record())
        log.warning("pulsar data source: write aborted; %d messages of finished tasks were already "
                    "delivered (Pulsar has no transactional write here: at-least-once)", _sent(messages))


class PulsarStreamWriter(_Writer, _StreamWriterBase):  # type: ignore[misc,valid-type]
    """The streaming sink: each micro-batch task sends its rows and waits for every receipt
    (at-least-once: a replayed batch is sent again; with ``exactlyOnce`` the micro-batch's
    ``commit`` commits the transactions its tasks wrote in)."""

    def write(self, iterator: Iterator[Any]) -> PulsarCommitMessage:
        first = next(iterator, None)
        if first is None:
            return PulsarCommitMessage({}, os.getpid())
        import itertools

        import pyarrow as pa

        it: Iterator[Any] = itertools.chain([first], iterator)
        if not isinstance(first, pa.RecordBatch):  # the row interface of older PySpark
            it = _rows_to_batches(it, self.schema)
        return _write(self.opts, self.write_id, it, getattr(self, "values", None), self.schema)

    def _record(self, batch_id: int) -> tuple[TxnLog | None, str | None]:
        """The checkpoint's record of the micro-batches' committed transactions (the commit
        runs in a Python process of its own, which learns the checkpoint from the options)."""
        if self.opts.checkpoint_location is None:  # (refused when the query starts)
            return None, None
        return checkpoint_log(self.opts.checkpoint_location), str(batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            _exactly_once.commit_all(self.opts, messages, f"batch {batchId}", *self._record(batchId),
                                     prune_below=batchId)
        log.info("pulsar data source: batch %d wrote %d messages", batchId, _sent(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            return _exactly_once.abort_all(self.opts, messages, f"batch {batchId}", *self._record(batchId))
        log.warning("pulsar data source: batch %d aborted; rows already sent stay sent (at-least-once)", batchId)
