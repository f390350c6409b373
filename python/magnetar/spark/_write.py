"""Writes of the ``pulsar`` data source, batch and streaming: Arrow batches sent per topic,
every receipt awaited before a task ends (at-least-once)."""

from __future__ import annotations

import logging
import os
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
from . import _workers
from ._arrow import send_arrow
from ._options import SourceOptions, normalize_topic

__all__ = ["WRITE_COLUMNS", "PulsarBatchWriter", "PulsarCommitMessage", "PulsarStreamWriter", "check_write_schema"]

log = logging.getLogger("magnetar.spark")

WRITE_COLUMNS: dict[str, tuple[type[DataType], ...]] = {
    "value": (BinaryType, StringType),
    "key": (StringType, BinaryType),
    "properties": (MapType,),
    "event_time": (TimestampType, TimestampNTZType, LongType),
    "topic": (StringType,),
}
"""The columns a write uses, with the Spark types accepted; other columns are ignored."""


def check_write_schema(opts: SourceOptions, schema: StructType) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise InvalidConfiguration(f"pulsar data source: a write needs a 'value' column (binary or string); "
                                   f"the columns are {list(fields)}")
    for name, types in WRITE_COLUMNS.items():
        t = fields.get(name)
        if t is None:
            continue
        if not isinstance(t, types):
            want = " or ".join(x.typeName() for x in types)
            raise InvalidConfiguration(f"pulsar data source: column {name!r} must be {want}, not {t.simpleString()}")
        if name == "properties":
            assert isinstance(t, MapType)
            if not (isinstance(t.keyType, StringType) and isinstance(t.valueType, StringType)):
                raise InvalidConfiguration(f"pulsar data source: column 'properties' must be map<string,string>, "
                                           f"not {t.simpleString()}")
    if opts.topic is None and "topic" not in fields:
        raise InvalidConfiguration("pulsar data source: option 'topic': a write needs the 'topic' option or a "
                                   "'topic' column")
    if opts.topics or opts.topics_pattern:
        raise InvalidConfiguration("pulsar data source: options 'topics'/'topicsPattern' are for reads; "
                                   "writes take 'topic' or a 'topic' column")


class PulsarCommitMessage(WriterCommitMessage):
    """What one task sent: messages per topic."""

    def __init__(self, sent: dict[str, int], pid: int) -> None:
        self.sent = sent
        self.pid = pid

    def __repr__(self) -> str:
        return f"PulsarCommitMessage({self.sent}, pid={self.pid})"


def _write_batches(opts: SourceOptions, batches: Iterator[Any]) -> PulsarCommitMessage:
    """Sends every row, waiting for every receipt before returning."""
    import pyarrow as pa
    import pyarrow.compute as pc

    producer_kw = opts.producer_kwargs
    sent: dict[str, int] = {}

    def send(topic: str, data: Any) -> None:
        p = _workers.producer(opts.client, topic, **producer_kw)
        try:
            send_arrow(p, data)
        except PulsarError:
            _workers._forget_producer(p)  # a broken producer is rebuilt by the next task
            raise
        sent[topic] = sent.get(topic, 0) + data.num_rows

    for batch in batches:
        if batch.num_rows == 0:
            continue
        if opts.topic is not None or "topic" not in batch.schema.names:
            assert opts.topic is not None
            send(opts.topic, batch)
            continue
        col = batch.column("topic")
        if col.null_count:
            raise InvalidConfiguration("pulsar data source: a row has a null 'topic' and no 'topic' option is set")
        for t in pc.unique(col).to_pylist():
            sub = batch.filter(pc.equal(col, pa.scalar(t, col.type)))
            send(normalize_topic(t), sub)
    return PulsarCommitMessage(sent, os.getpid())


def _rows_to_batches(rows: Iterator[Any], schema: StructType, size: int = 10_000) -> Iterator[Any]:
    """Rows (the non-Arrow writer interface) to Arrow batches."""
    import pyarrow as pa

    names = [f.name for f in schema.fields if f.name in WRITE_COLUMNS]
    buf: list[Any] = []

    def flush() -> Any:
        cols = {n: [r[n] for r in buf] for n in names}
        arrays = []
        for n in names:
            v = cols[n]
            if n == "properties":
                arrays.append(pa.array(v, type=pa.map_(pa.string(), pa.string())))
            elif n == "event_time" and v and isinstance(next((x for x in v if x is not None), 0), int):
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
    At-least-once: a retried task sends its rows again."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> PulsarCommitMessage:
        return _write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(sum(m.sent.values()) for m in messages if isinstance(m, PulsarCommitMessage))
        log.info("pulsar data source: wrote %d messages", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(sum(m.sent.values()) for m in messages if isinstance(m, PulsarCommitMessage))
        log.warning("pulsar data source: write aborted; %d messages of finished tasks were already "
                    "delivered (Pulsar has no transactional write here: at-least-once)", total)


class PulsarStreamWriter(_StreamWriterBase):  # type: ignore[misc,valid-type]
    """The streaming sink: each micro-batch task sends its rows and waits for every receipt
    (at-least-once; a replayed batch is sent again)."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> PulsarCommitMessage:
        first = next(iterator, None)
        if first is None:
            return PulsarCommitMessage({}, os.getpid())
        import itertools

        import pyarrow as pa

        it: Iterator[Any] = itertools.chain([first], iterator)
        if not isinstance(first, pa.RecordBatch):  # the row interface of older PySpark
            it = _rows_to_batches(it, self.schema)
        return _write_batches(self.opts, it)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(sum(m.sent.values()) for m in messages if isinstance(m, PulsarCommitMessage))
        log.info("pulsar data source: batch %d wrote %d messages", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("pulsar data source: batch %d aborted; rows already sent stay sent (at-least-once)", batchId)
