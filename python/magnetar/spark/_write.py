"""Writes of the ``pulsar`` data source, batch and streaming: Arrow batches sent per topic,
every receipt awaited before a task ends (at-least-once; with ``exactlyOnce`` inside a
transaction per task, see ``_exactly_once``)."""

from __future__ import annotations

import difflib
import logging
import os
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
from ._arrow import columns_of, send_lists
from ._options import SourceOptions, normalize_topic

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


def check_write_schema(opts: SourceOptions, schema: StructType) -> None:
    """Every column must be one the write uses; anything else is an error before the job starts."""
    names = write_columns(opts)
    role_of = {col: role for role, col in names.items()}
    other = "magnetar" if opts.metadata_columns == "connector" else "connector"
    other_names = set(_CONNECTOR_NAMES.values()) if other == "connector" else set(WRITE_COLUMNS)
    fields = {f.name: f.dataType for f in schema.fields}
    if names["value"] not in fields:
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


class PulsarCommitMessage(WriterCommitMessage):
    """What one task sent: messages per topic, and with ``exactlyOnce`` the id of the
    transaction they were sent in (for the driver to commit)."""

    def __init__(self, sent: dict[str, int], pid: int, txn: tuple[int, int] | None = None) -> None:
        self.sent = sent
        self.pid = pid
        self.txn = txn

    def __repr__(self) -> str:
        return f"PulsarCommitMessage({self.sent}, pid={self.pid}, txn={self.txn})"


# Arrow batches converted but not yet acknowledged, per task: the next batch is converted
# (with the GIL) while the previous one waits for its receipts (without it).
_IN_FLIGHT = 2


def _write(opts: SourceOptions, write_id: str, batches: Iterator[Any]) -> PulsarCommitMessage:
    """One task's write: plain, or inside a transaction of its own with ``exactlyOnce``."""
    if not opts.exactly_once:
        return _write_batches(opts, batches)
    msg, txn_id = _exactly_once.in_transaction(opts, write_id, lambda txn: _write_batches(opts, batches, txn))
    msg.txn = txn_id
    return msg


def _write_batches(opts: SourceOptions, batches: Iterator[Any], txn: Any = None) -> PulsarCommitMessage:
    """Sends every row, waiting for every receipt before returning. One batch's receipts are
    awaited on a helper thread while the next batch is converted, in order per task."""
    import pyarrow as pa
    import pyarrow.compute as pc

    producer_kw = opts.producer_kwargs
    names = write_columns(opts)
    topic_col = names["topic"]
    sent: dict[str, int] = {}
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="magnetar-spark-send")
    in_flight: deque[Future[Any]] = deque()

    def send_now(p: Any, rows: tuple[Any, ...]) -> None:
        try:
            payloads, keys, props, times = rows
            send_lists(p, payloads, keys, props, times, txn=txn)
        except PulsarError:
            _workers._forget_producer(p)  # a broken producer is rebuilt by the next task
            raise

    def send(topic: str, data: Any) -> None:
        p = _workers.producer(opts.client, topic, **producer_kw)
        rows = columns_of(data, key=names["key"], properties=names["properties"], event_time=names["event_time"])
        in_flight.append(pool.submit(send_now, p, rows))
        while len(in_flight) > _IN_FLIGHT:
            in_flight.popleft().result()
        sent[topic] = sent.get(topic, 0) + data.num_rows

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
        while in_flight:
            in_flight.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
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
    """Writes each Spark partition with one ``send_many`` per Arrow batch and topic (keys,
    properties and event times included); every receipt is awaited before the task ends.
    At-least-once: a retried task sends its rows again; with ``exactlyOnce`` each task writes
    in a transaction that ``commit`` commits (all or nothing per job)."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.write_id = uuid.uuid4().hex  # made on the driver: the same in every task

    def write(self, iterator: Iterator[Any]) -> PulsarCommitMessage:
        return _write(self.opts, self.write_id, iterator)

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

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
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
        return _write(self.opts, self.write_id, it)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            _exactly_once.commit_all(self.opts, messages, f"batch {batchId}")
        total = sum(sum(m.sent.values()) for m in messages if isinstance(m, PulsarCommitMessage))
        log.info("pulsar data source: batch %d wrote %d messages", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            return _exactly_once.abort_all(self.opts, messages, f"batch {batchId}")
        log.warning("pulsar data source: batch %d aborted; rows already sent stay sent (at-least-once)", batchId)
