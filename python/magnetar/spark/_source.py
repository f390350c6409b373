"""The ``pulsar`` Python data source and its batch and streaming reads (writes: ``_write``)."""

from __future__ import annotations

import difflib
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

try:  # Spark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older PySpark: no admission control, no AvailableNow hook
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

from .._client import Client, Consumer, Reader
from .._columns import METADATA_COLUMNS
from .._options import MetadataColumns
from .._core import MessageId
from ..exceptions import InvalidConfiguration, PulsarError, Timeout
from . import _workers
from ._options import (
    EARLIEST,
    PartitionRef,
    SourceOptions,
    decode_id,
    encode_id,
    id_key,
)
from ._read import (
    PulsarSplit,
    _data_loss,
    first_id_at,
    has_message_available,
    last_message_id,
    predecessor,
    read_split,
    resolve_partitions,
    split_range,
)
from ._schema import TopicSchema, fetch_topic_schema, rows_schema
from ._write import WRITE_COLUMNS, PulsarBatchWriter, PulsarStreamWriter, check_write_schema
from ._write_schema import write_schema

__all__ = ["CONNECTOR_SCHEMA", "READ_SCHEMA", "WRITE_COLUMNS", "PulsarDataSource"]

log = logging.getLogger("magnetar.spark")

# The Spark type of each kind of metadata column (declared with the columns, for every Arrow
# read, in magnetar._columns).
_SPARK_KINDS = {"string": StringType(), "binary": BinaryType(), "int32": IntegerType(), "int64": LongType(),
                "timestamp": TimestampType(), "properties": MapType(StringType(), StringType())}


def _metadata_struct(naming: str) -> StructType:
    return StructType([StructField(name, _SPARK_KINDS[kind]) for name, kind in METADATA_COLUMNS[naming]])


READ_SCHEMA = _metadata_struct(MetadataColumns.MAGNETAR.value)
"""The rows of a read (``metadataColumns=magnetar``, the default)."""

CONNECTOR_SCHEMA = _metadata_struct(MetadataColumns.CONNECTOR.value)
"""The rows of a read with ``metadataColumns=connector``: pulsar-spark's names and types."""


def read_schema(opts: SourceOptions) -> StructType:
    return CONNECTOR_SCHEMA if opts.metadata_columns == "connector" else READ_SCHEMA



def _arrow_schema(schema: StructType) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def topic_schema(opts: SourceOptions) -> TopicSchema | None:
    """The topics' schema the payloads are decoded with (None: they stay bytes)."""
    if opts.allow_different_topic_schemas:
        return None
    client = _workers.client(opts.client)
    return fetch_topic_schema(client, opts, resolve_partitions(client, opts, check_exists=False))


def _write_values(opts: SourceOptions, schema: StructType) -> TopicSchema | None:
    """The schema a write to the ``topic`` option's topic encodes its rows with, once the
    columns are checked against it (None: ``value`` bytes; a topic named in a column is
    checked on the executors)."""
    ts = None
    if opts.topic is not None and not opts.topics and not opts.topics_pattern:
        ts = write_schema(_workers.client(opts.client), opts.topic)
    return check_write_schema(opts, schema, ts)


def _check_read_schema(opts: SourceOptions, schema: StructType, ts: TopicSchema | None = None) -> None:
    known = {f.name: f.dataType for f in rows_schema(read_schema(opts), ts, opts.metadata_columns).fields}
    for f in schema.fields:
        if f.name not in known:
            close = difflib.get_close_matches(f.name, list(known), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InvalidConfiguration(f"pulsar data source: unknown column {f.name!r} in the given schema; {hint}"
                                       f"the columns are {list(known)} (metadataColumns={opts.metadata_columns})")
        if f.dataType != known[f.name]:
            raise InvalidConfiguration(f"pulsar data source: column {f.name!r} must be {known[f.name].simpleString()}, "
                                       f"not {f.dataType.simpleString()}")


class PulsarDataSource(DataSource):
    """Apache Pulsar as a Spark data source, format ``pulsar``.

    ::

        spark.dataSource.register(PulsarDataSource)
        df = (spark.read.format("pulsar").option("service_url", "pulsar://localhost:6650")
              .option("topic", "events").load())

    See ``docs/spark.md`` for the options, the row schema and the delivery guarantees.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.pulsar_options = SourceOptions.parse(options)

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def schema(self) -> StructType:
        # Called by spark.read/readStream ... load(): check what can be checked before a
        # batch or a stream is chosen, so bad options fail at load() (and, with admin_url,
        # a topic that does not exist).
        opts = self.pulsar_options
        opts.check_read(streaming=None)
        if opts.admin_url and not opts.topics_pattern and not opts.waiting_for_non_existed_topic:
            from ._read import check_topics_exist

            check_topics_exist(opts)
        return rows_schema(read_schema(opts), topic_schema(opts), opts.metadata_columns)

    def reader(self, schema: StructType) -> PulsarBatchReader:
        self.pulsar_options.check_read(streaming=False)
        ts = topic_schema(self.pulsar_options)
        _check_read_schema(self.pulsar_options, schema, ts)
        return PulsarBatchReader(self.pulsar_options, schema, ts)

    def streamReader(self, schema: StructType) -> PulsarStreamReader:
        self.pulsar_options.check_read(streaming=True)
        ts = topic_schema(self.pulsar_options)
        _check_read_schema(self.pulsar_options, schema, ts)
        return PulsarStreamReader(self.pulsar_options, schema, ts)

    def writer(self, schema: StructType, overwrite: bool) -> PulsarBatchWriter:
        if overwrite:
            raise InvalidConfiguration("pulsar data source: a Pulsar topic is append-only; use mode('append')")
        return PulsarBatchWriter(self.pulsar_options, schema, _write_values(self.pulsar_options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> PulsarStreamWriter:
        if overwrite:
            raise InvalidConfiguration("pulsar data source: a Pulsar topic is append-only; use outputMode('append')")
        self.pulsar_options.check_stream_write()
        return PulsarStreamWriter(self.pulsar_options, schema, _write_values(self.pulsar_options, schema))


# -- batch read -----------------------------------------------------------------------------


def _resolve_spec(spec: Any, ref: PartitionRef, last: MessageId, default: str, *, start: bool = False) -> MessageId:
    """The position an offsets option gives ``ref``. Ids are inclusive at both ends, as in the
    connector and Spark's Kafka source, so a starting id becomes the exclusive position just
    before it (Spark's own checkpointed offsets are exclusive starts)."""
    if isinstance(spec, dict):
        v = spec.get(ref.topic, {}).get(ref.index, default)
    else:
        v = spec or default
    if v == "earliest":
        return EARLIEST
    if v == "latest":
        return last
    assert isinstance(v, MessageId)
    return predecessor(v) if start else v


class PulsarBatchReader(DataSourceReader):
    """Reads every topic partition between two positions, resolved when Spark plans the
    query: one Spark partition per topic partition (more with ``maxEntriesPerSplit``)."""

    def __init__(self, opts: SourceOptions, schema: StructType, values: TopicSchema | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.values = values
        self.splits = self._plan()

    def _plan(self) -> list[PulsarSplit]:
        opts = self.opts
        client = _workers.client(opts.client)
        timeout = opts.poll_timeout_ms / 1000.0
        splits: list[PulsarSplit] = []
        for ref in resolve_partitions(client, opts):
            last = last_message_id(client, ref)
            start = _resolve_spec(opts.starting_offsets, ref, last, "earliest", start=True)
            end = _resolve_spec(opts.ending_offsets, ref, last, "latest")
            if opts.starting_time is not None:
                first = first_id_at(client, ref, opts.starting_time, timeout)
                if first is None:
                    continue
                start = predecessor(first)
            if opts.ending_time is not None:
                first = first_id_at(client, ref, opts.ending_time, timeout)
                if first is not None and id_key(predecessor(first)) < id_key(end):
                    end = predecessor(first)
            if id_key(end) <= id_key(start):
                continue
            if opts.max_entries_per_split and start.ledger_id < 0:  # to split, know where it starts
                first = first_id_at(client, ref, 0, timeout)
                if first is None:
                    continue
                start = predecessor(first)
            splits.extend(split_range(ref, start, end, opts.max_entries_per_split))
        return splits

    def partitions(self) -> Sequence[InputPartition]:
        return list(self.splits)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, PulsarSplit):  # Spark's one placeholder partition when there are none
            return iter(())
        return read_split(self.opts, _arrow_schema(self.schema), partition, getattr(self, "values", None))


# -- streaming read -------------------------------------------------------------------------


def _decode_offsets(offsets: dict[str, Any] | None) -> dict[PartitionRef, MessageId]:
    out: dict[PartitionRef, MessageId] = {}
    for topic, parts in (offsets or {}).items():
        for p, v in parts.items():
            mid = decode_id(v, "offset")
            if not isinstance(mid, MessageId):
                raise InvalidConfiguration(f"pulsar data source: unresolved offset {v!r} for {topic} {p}")
            out[PartitionRef(topic, int(p))] = mid
    return out


def _encode_offsets(ids: dict[PartitionRef, str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for ref in sorted(ids):
        out.setdefault(ref.topic, {})[str(ref.index)] = ids[ref]
    return out


def _raw_offsets(offsets: dict[str, Any] | None) -> dict[PartitionRef, str]:
    return {PartitionRef(t, int(p)): v for t, parts in (offsets or {}).items() for p, v in parts.items()}


_T = TypeVar("_T")
_R = TypeVar("_R")


def _each(fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """``[fn(x) for x in items]``, the calls made at once: the driver's per-partition requests
    (subscribe, last message id, unsubscribe) are round trips that release the GIL, and made
    one after the other they grow a trigger's planning with the partition count."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(len(items), 16), thread_name_prefix="magnetar-spark") as pool:
        return list(pool.map(fn, items))


class _Cursor:
    """A driver-side reader of one partition that counts messages and bytes, for admission
    control: it finds the id of the N-th message (or the one that reaches a byte budget) after
    a position."""

    def __init__(self, client: Client, ref: PartitionRef, after: MessageId, opts: SourceOptions) -> None:
        self.ref = ref
        self.reader: Reader = client.create_reader(ref.name, start=after, start_inclusive=False,
                                                   receiver_queue_size=1000)
        self.position = id_key(after)
        self.pending: list[tuple[MessageId, int]] = []  # read but beyond the last limit
        self.poll = opts.poll_timeout_ms / 1000.0

    def advance(self, n: float, max_bytes: float, limit: MessageId) -> tuple[MessageId | None, int, int, bool]:
        """Moves over up to ``n`` messages and about ``max_bytes`` of payload (always at least
        one message), not beyond ``limit``: (last id, count, bytes, reached limit)."""
        limit_key = id_key(limit)
        last: MessageId | None = None
        count = size = 0
        deadline = time.monotonic() + self.poll
        while count < n and size < max_bytes and self.position < limit_key:
            if self.pending:
                ids, self.pending = self.pending, []
            else:
                msgs = self.reader.read_many(int(min(1000, max(n - count, 1))), timeout=0.2)
                if not msgs:
                    if time.monotonic() > deadline:
                        raise Timeout(f"pulsar data source: {self.ref.name}: messages up to {limit} were not "
                                      f"delivered within pollTimeoutMs")
                    if not has_message_available(self.reader, self.poll):
                        break
                    continue
                deadline = time.monotonic() + self.poll
                ids = [(m.message_id, len(m)) for m in msgs]
            for i, (mid, nbytes) in enumerate(ids):
                k = id_key(mid)
                if k <= self.position:
                    continue
                if k > limit_key or count >= n or (count and size + nbytes > max_bytes):
                    self.pending = ids[i:]  # kept for the next call
                    return last, count, size, self.position >= limit_key
                self.position = k
                last = mid
                count += 1
                size += nbytes
        return last, count, size, self.position >= limit_key

    def close(self) -> None:
        try:
            self.reader.close()
        except PulsarError:
            pass


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    # Spark sends a second SIGTERM while stopping the worker factory: ignored, so that it
    # cannot cut the first one's stop() short (stop() is bounded by the operation timeout)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def _stop_on_sigterm() -> None:
    """Lets ``stop()`` run when Spark ends the source's process.

    Spark runs a stream reader in a Python process of its own and, when the query stops, ends
    that process with SIGTERM (``PythonStreamingSourceRunner.stop`` destroys the worker; no stop
    call is sent over its socket). Python's default SIGTERM exits without running the runner's
    ``finally: reader.stop()``, which would leave the query's durable subscriptions, and the
    backlog they keep, on the broker for good. As an exception, SIGTERM unwinds through that
    ``finally``. Only the main thread can set handlers; a handler someone else set is kept."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches between message-id offsets ``{topic: {partition: hex id}}``.

    Offsets name the last message of a range (exclusive start, inclusive end), so a batch
    replayed from the checkpoint reads exactly the same messages. A durable subscription per
    topic partition (``subscriptionName``, or ``<subscriptionPrefix>-<uuid>`` removed when the
    query stops) is moved to each committed end, so the broker keeps what Spark has not
    processed yet.
    """

    def __init__(self, opts: SourceOptions, schema: StructType, values: TopicSchema | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.values = values
        self.subscription = opts.subscription_name or f"{opts.subscription_prefix}-{uuid.uuid4().hex[:12]}"
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._client: Client | None = None
        self._subs: dict[PartitionRef, Consumer] = {}
        self._cursors: dict[PartitionRef, _Cursor] = {}
        self._target: dict[PartitionRef, MessageId] | None = None
        self._reported: dict[PartitionRef, str] | None = None

    # Only the options travel to the executors, never connections.
    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "schema": self.schema, "subscription": self.subscription, "values": self.values}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = self.opts.client.create()
        return self._client

    def _partitions(self) -> list[PartitionRef]:
        return resolve_partitions(self.client, self.opts, check_exists=False)

    def _latest(self, refs: list[PartitionRef]) -> dict[PartitionRef, MessageId]:
        """The last message id of every partition, asked of the durable subscription's
        consumers that stay open (no reader opened and closed per partition per trigger), all
        partitions at once."""
        self._ensure_subscriptions(refs, {})
        return dict(zip(refs, _each(lambda ref: self._subs[ref].get_last_message_id(), refs)))

    # -- offsets --------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        opts = self.opts
        refs = resolve_partitions(self.client, opts)
        latest = self._latest(refs)
        out: dict[PartitionRef, str] = {}
        for ref in refs:
            spec = opts.starting_offsets if opts.starting_offsets is not None else "latest"
            start = _resolve_spec(spec, ref, latest[ref], "earliest", start=True)
            if opts.starting_time is not None:
                first = first_id_at(self.client, ref, opts.starting_time, opts.poll_timeout_ms / 1000.0)
                start = predecessor(first) if first is not None else latest[ref]
            out[ref] = encode_id(start, ref.index)
        return _encode_offsets(out)

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_messages_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest(self._partitions())

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if start is None:  # the pre-4.2 protocol: no start, no limit
            start = self.initialOffset()
        refs = self._partitions()
        raw = _raw_offsets(start)
        starts = _decode_offsets(start)
        for ref in refs:
            if ref not in starts:  # a partition added since the last batch: read it all
                starts[ref], raw[ref] = EARLIEST, encode_id(EARLIEST, ref.index)
        self._ensure_subscriptions(refs, starts)
        latest = self._latest(refs)
        self._reported = {ref: encode_id(latest[ref], ref.index) for ref in refs}
        if self._target is not None:
            latest = {ref: min(latest[ref], self._target.get(ref, starts[ref]), key=id_key) for ref in refs}
        ends: dict[PartitionRef, str] = dict(raw)
        avail: dict[PartitionRef, MessageId] = {}
        for ref in refs:
            if id_key(latest[ref]) < id_key(starts[ref]):
                _data_loss(self.opts, f"{ref.name}: its last message {latest[ref]} is before the offset "
                                      f"{starts[ref]} (was the topic deleted and re-created?)")
                ends[ref] = encode_id(latest[ref], ref.index)  # partitions() will read it from the start
            elif id_key(latest[ref]) > id_key(starts[ref]):
                avail[ref] = latest[ref]
        max_rows = getattr(limit, "max_rows", None)
        max_bytes = self.opts.max_bytes_per_trigger
        if (max_rows is not None or max_bytes is not None) and avail:
            budget = (max_rows if max_rows is not None else float("inf"),
                      max_bytes if max_bytes is not None else float("inf"))
            for ref, mid in self._admit(starts, avail, budget).items():
                ends[ref] = encode_id(mid, ref.index)
        else:
            for ref, mid in avail.items():
                ends[ref] = encode_id(mid, ref.index)
        return _encode_offsets(ends)

    def _admit(self, starts: dict[PartitionRef, MessageId], avail: dict[PartitionRef, MessageId],
               budget: tuple[float, float]) -> dict[PartitionRef, MessageId]:
        """Ends that cover at most ``budget`` (messages, payload bytes), shared fairly between
        partitions; every partition with messages moves by at least one while bytes remain."""
        rows, nbytes = budget
        ends: dict[PartitionRef, MessageId] = {}
        candidates = sorted(avail)
        while rows > 0 and nbytes > 0 and candidates:
            row_share = max(1, rows // len(candidates)) if rows != float("inf") else rows
            byte_share = max(1, nbytes // len(candidates)) if nbytes != float("inf") else nbytes
            still = []
            for ref in candidates:
                if rows <= 0 or nbytes <= 0:
                    break
                pos = ends.get(ref, starts[ref])
                cur = self._cursors.get(ref)
                if cur is None or cur.position != id_key(pos):
                    if cur is not None:
                        cur.close()
                    cur = self._cursors[ref] = _Cursor(self.client, ref, pos, self.opts)
                last, count, size, reached = cur.advance(min(row_share, rows), min(byte_share, nbytes), avail[ref])
                if last is not None:
                    ends[ref] = last
                    rows -= count
                    nbytes -= size
                if not reached and count > 0:
                    still.append(ref)
            candidates = still
        return ends

    def reportLatestOffset(self) -> dict | None:
        return None if self._reported is None else _encode_offsets(self._reported)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        starts = _decode_offsets(start)
        splits: list[PulsarSplit] = []
        for ref, e in sorted(_decode_offsets(end).items()):
            s = starts.get(ref, EARLIEST)
            if id_key(e) < id_key(s):  # data loss accepted in latestOffset: read what is there now
                s = EARLIEST
            if id_key(e) <= id_key(s):
                continue
            if self.opts.max_entries_per_split and s.ledger_id < 0:
                first = first_id_at(self.client, ref, 0, self.opts.poll_timeout_ms / 1000.0)
                if first is not None:
                    s = predecessor(first)
            splits.extend(split_range(ref, s, e, self.opts.max_entries_per_split))
        return splits

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, PulsarSplit):  # Spark's one placeholder partition when there are none
            return iter(())
        return read_split(self.opts, _arrow_schema(self.schema), partition, getattr(self, "values", None))

    # -- the durable subscriptions ---------------------------------------------------------

    def _ensure_subscriptions(self, refs: list[PartitionRef], starts: dict[PartitionRef, MessageId]) -> None:
        def subscribe(ref: PartitionRef) -> Consumer:
            consumer = self.client.subscribe(
                ref.name, self.subscription, subscription_type="failover", initial_position="earliest",
                receiver_queue_size=1, consumer_name=f"spark-{os.getpid()}")
            # Recorded at once, not when every subscribe is done: a SIGTERM that stops the query
            # while these run raises in the main thread, which then never stored what they made,
            # and stop() left those subscriptions on the broker (seen once in the suite,
            # test_stopped_queries_remove_the_subscriptions_they_made). The executor's exit waits
            # for these threads before stop() runs.
            self._subs[ref] = consumer
            consumer.pause()  # only holds the position; never receives
            start = starts.get(ref, EARLIEST)
            if start.ledger_id >= 0:
                self._ack(consumer, start)
            return consumer

        new = [ref for ref in refs if ref not in self._subs]
        if new:
            _stop_on_sigterm()
        _each(subscribe, new)

    @staticmethod
    def _ack(consumer: Consumer, mid: MessageId) -> None:
        """Moves the subscription to just before the entry of ``mid``: the next batch starts
        inside that entry when ``mid`` is not its last message (acking ``mid`` would release
        the whole entry), and it re-reads ``mid`` to check that nothing before the range was
        deleted. An end at a ledger's first entry leaves the subscription where it is."""
        if mid.entry_id >= 1:
            consumer.ack_cumulative(MessageId(mid.ledger_id, mid.entry_id - 1, -1, -1))

    def commit(self, end: dict) -> None:
        ends = _decode_offsets(end)
        self._ensure_subscriptions(sorted(ends), {})
        for ref, mid in ends.items():
            if mid.ledger_id >= 0:
                try:
                    self._ack(self._subs[ref], mid)
                except PulsarError as e:  # the checkpoint is the source of truth; log and go on
                    log.warning("pulsar data source: could not move subscription %s of %s to %s: %s",
                                self.subscription, ref.name, mid, e)

    def stop(self) -> None:
        for cur in self._cursors.values():
            cur.close()
        self._cursors.clear()
        def release(consumer: Consumer) -> None:
            try:
                if self.opts.subscription_name is None:
                    consumer.unsubscribe()
                else:
                    consumer.close()
            except PulsarError as e:
                log.warning("pulsar data source: closing subscription %s: %s", self.subscription, e)

        _each(release, list(self._subs.values()))
        self._subs.clear()
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None
