"""The blocking API: :class:`Client`, :class:`Producer`, :class:`Consumer`, :class:`Reader`.

Every blocking call releases the GIL while it waits and can be interrupted with Ctrl-C. The
half of each class that never waits lives in :mod:`magnetar._handles`, shared with the asyncio
twins.
"""

from __future__ import annotations

import atexit
import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Self, Sequence

from . import _build, _core, _interceptors
from ._core import Message, MessageId, SendFuture
from ._handles import ClientHandle, ConsumerHandle, ProducerHandle, ReaderHandle, documented
from ._listener import ListenerRunner, ReaderListener
from ._columns import ArrowReads, Columns, StreamEnd, stream_end, to_arrow, to_batch
from ._options import ArrowColumns, ArrowSendColumns, ConsumerOptions, MessageFields, SendManyColumns, ProducerOptions, ReaderOptions, Seconds, TimeLike, resolve, seek_target
from ._table_view import TableView, TableViewOptions
from ._transaction import Transaction
from .exceptions import AlreadyClosed, TopicTerminated
from .schema._schemas import SchemaInfo, schema_info, schema_version

if TYPE_CHECKING:
    import pyarrow as pa
    from typing import Unpack

__all__ = ["Client", "Consumer", "Producer", "Reader"]

_log = logging.getLogger("magnetar")

#: Seconds the interpreter's exit waits, in all, for producers that were never closed to send
#: their open batches and collect their receipts. What is still unsettled then (or failed) is
#: reported per topic as a warning on the ``magnetar`` logger. Set ``MAGNETAR_EXIT_FLUSH_TIMEOUT``
#: (seconds) or assign this attribute to change it; 0 reports without waiting, and the wait is
#: never longer than an hour.
EXIT_FLUSH_TIMEOUT: float = 10.0


def _exit_flush_timeout_from_env() -> float:
    raw = os.environ.get("MAGNETAR_EXIT_FLUSH_TIMEOUT")
    if raw is None:
        return EXIT_FLUSH_TIMEOUT
    try:
        return float(raw)
    except ValueError:
        # A typo in the environment must not make ``import magnetar`` fail.
        _log.warning("MAGNETAR_EXIT_FLUSH_TIMEOUT=%r is not a number of seconds; using %s", raw, EXIT_FLUSH_TIMEOUT)
        return EXIT_FLUSH_TIMEOUT


EXIT_FLUSH_TIMEOUT = _exit_flush_timeout_from_env()


@atexit.register
def _at_exit() -> None:
    # Also stops the engine's threads from calling into Python, which they must not do while
    # the interpreter finalizes; exit handlers registered before magnetar was imported run
    # after this one and may still use magnetar from this thread, but callbacks no longer run.
    _core._at_exit(EXIT_FLUSH_TIMEOUT)


class _Receiving:
    """What blocking consumers and readers share beyond the handle."""

    __slots__ = ()
    _core: _core._Consumer
    _arrow: ArrowReads

    def _arrow_columns(self, options: Mapping[str, Any]) -> Columns:
        """The columns of an Arrow read with ``options`` (the topic's schema fetched once)."""
        key = self._arrow.key(options)
        made = self._arrow.cached(key)
        if made is None:
            topics = self._core.topics
            client = self._arrow.client
            wanted = self._arrow.schema_topics(key, topics)
            made = self._arrow.make(key, topics, {t: client.get_schema(t, None) for t in wanted} if client else {})
        return made

    def _receive_arrow(self, max_rows: int, timeout: float | None, options: Mapping[str, Any]) -> pa.RecordBatch:
        return to_batch(self._core.receive_arrow(self._arrow_columns(options).layout, max_rows, timeout))

    def close(self) -> None:
        raise NotImplementedError

    def _next(self, timeout: float | None) -> Message:
        raise NotImplementedError

    def seek(self, target: MessageId | TimeLike) -> None:
        """Moves to a message id or to a publish time."""
        self._core.seek(seek_target(target))

    def get_last_message_id(self) -> MessageId:
        """The id of the last message of the topic (the highest over partitions)."""
        return max(self._core.last_message_ids())

    def get_last_message_ids(self) -> list[MessageId]:
        """The id of the last message of each partition (each topic of a multi-topic
        consumer), in partition order; one for a plain topic."""
        ids: list[MessageId] = self._core.last_message_ids()
        return ids

    def __iter__(self) -> Iterator[Message]:
        while True:
            try:
                msg = self._next(None)
            except (AlreadyClosed, TopicTerminated):
                return
            yield msg

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Producer(ProducerHandle):
    __doc__ = ProducerHandle.__doc__
    __slots__ = ()

    @documented(MessageFields)
    def send(self, data: Any, **fields: Unpack[MessageFields]) -> MessageId:
        """Sends one message and waits for the broker's receipt. The open batch goes out at
        once rather than waiting for the batching delay. ``data=None`` sends a null value (a tombstone: on a
        compacted topic it deletes its ``key``; consumers see ``msg.null_value``)."""
        return self._core.send(data, fields or None)

    def send_async(
        self,
        data: Any,
        callback: Callable[[SendFuture], Any] | None = None,
        **fields: Unpack[MessageFields],
    ) -> SendFuture:
        """Queues one message and returns a future of its :class:`MessageId`; ``callback``
        (``callback(future)``) runs on the client's dispatch thread once it completes. Blocks
        only when the pending queue is full and ``block_if_full`` is set. Takes the keyword
        arguments of :meth:`send`."""
        fut: SendFuture = self._core.send_async(data, fields or None)
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    def send_many(self, payloads: Sequence[Any],
                  **columns: Unpack[SendManyColumns]) -> list[MessageId]:
        """Sends many messages in one call and waits for every receipt: the fast path.

        ``keys``, ``properties`` and ``event_times`` (datetimes or milliseconds since the epoch),
        when given, hold one entry (or None) per payload; ``txn`` sends them all inside a
        transaction.
        """
        return self._core.send_many(payloads, **columns)

    @documented(ArrowSendColumns)
    def send_arrow(self, data: Any, **columns: Unpack[ArrowSendColumns]) -> list[MessageId]:
        """Sends every row of ``data`` (a ``pyarrow.Table`` or ``RecordBatch``, anything with
        ``__arrow_c_stream__`` or ``__arrow_c_array__``, or a pandas DataFrame) and waits for
        every receipt; returns the message ids in row order. The messages are built from the
        columns in the engine, without a Python object per row; the first failure raises, with
        how many failed (delivery is at-least-once: other rows may have been sent). On a
        producer with a schema, the rows are encoded with it (see ``value``)."""
        o = resolve(ArrowSendColumns, columns, "send_arrow")
        ids: list[MessageId] = self._core.send_arrow_ids(to_arrow(data), o["value"], o["key"], o["properties"],
                                                         o["event_time"], o["txn"])
        return ids

    def flush(self) -> None:
        """Sends open batches now and waits until every message sent so far is acknowledged.

        Raises if any of those messages failed (timed out, refused by the broker, lost with
        the producer): the first failure's class, with how many failed. Raises
        :class:`~magnetar.AlreadyClosed` once the producer is closed.
        """
        self._core.flush()

    def close(self) -> None:
        """Sends what is pending, waits for it (up to the send timeout), and detaches.

        The producer is closed either way. If messages pending at close failed (not
        acknowledged before the send timeout, or refused), this raises afterwards with how many
        and the first failure, so a closed producer never hides lost messages; each of those
        messages' futures carries its own error too. Closing again does nothing.
        """
        self._core.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception as e:
            self._closing_failed(exc_type, e)


class Consumer(_Receiving, ConsumerHandle[None]):
    """Receives messages of a subscription. Iterate over it to receive until it is closed or
    its topics are terminated."""

    __slots__ = ("_runner",)
    _done = None

    def __init__(self, core: _core._Consumer, listener: Callable[[Message], object] | None = None,
                 listener_concurrency: int = 1) -> None:
        super().__init__(core)
        self._runner = ListenerRunner(core, listener, listener_concurrency) if listener else None

    def receive(self, timeout: float | None = None) -> Message:
        """The next message; raises :class:`~magnetar.Timeout` after ``timeout`` seconds
        (``None``: waits for ever)."""
        return self._core.receive(timeout)

    def receive_many(self, max_messages: int = 100, timeout: float | None = 0.1,
                     max_bytes: int | None = None) -> list[Message]:
        """Up to ``max_messages`` of at most ``max_bytes`` payload bytes together (the first
        message in any case; None: no byte limit): what is queued, else what arrives within
        ``timeout`` seconds (possibly nothing)."""
        msgs: list[Message] = self._core.receive_many(max_messages, timeout, max_bytes)
        return msgs

    @documented(ArrowColumns)
    def receive_arrow(self, max_rows: int = 10_000, timeout: float | None = 0.1,
                      **columns: Unpack[ArrowColumns]) -> pa.RecordBatch:
        """Up to ``max_rows`` messages as one ``pyarrow.RecordBatch``, with the columns of the
        Spark source's rows (see docs/arrow.md): what is queued, else what arrives within
        ``timeout`` seconds (an empty batch when nothing does). Built in the engine without a
        Python object per message. Acknowledge the rows with :meth:`ack_arrow`."""
        return self._receive_arrow(max_rows, timeout, columns)

    def _next(self, timeout: float | None) -> Message:
        return self.receive(timeout)

    def ack_with_receipt(self, message: Message | MessageId, *, cumulative: bool = False) -> None:
        """Acknowledges and waits until the broker confirms it (within the operation timeout;
        :class:`~magnetar.Timeout` otherwise). Part of a batch is confirmed once the whole
        batch is acknowledged, unless ``batch_index_ack`` is on."""
        self._core.ack_with_receipt(message, cumulative)

    def reconsume_later(self, message: Message, delay: Seconds = 0.0,
                        properties: Mapping[str, str] | None = None) -> None:
        """Has ``message`` come again after ``delay`` seconds through the retry letter topic
        (the consumer needs ``enable_retry=True``): a copy with ``properties`` added and the
        Java client's retry properties (``RECONSUMETIMES``, ``DELAY_TIME``, ``REAL_TOPIC``,
        ``ORIGIN_MESSAGE_ID``) is published there, delivered after the delay, and the message is
        acknowledged. Once retried ``max_redeliver_count`` times it goes to the dead letter topic
        instead. Waits for the broker's receipt; if the publish fails the message is redelivered
        and the error raised."""
        self._core.reconsume_later(message, delay, properties)

    def stats(self) -> list[dict[str, Any]]:
        """The broker's statistics for this consumer, one dict per covered topic (rates,
        permits, unacked count, backlog), with the client's queued and corrupt counts, and
        under ``"client"`` this consumer's own counters (the same in every entry): ``received``,
        ``received_bytes``, ``redelivered``, ``acked``, ``nacked``, ``dead_lettered``,
        ``acked_before`` (sent again by the broker after it confirmed their acks: dropped),
        ``queued``, ``corrupt``."""
        return self._core.stats()

    def unsubscribe(self) -> None:
        """Deletes the subscription and closes the consumer."""
        self._core.unsubscribe()

    def close(self) -> None:
        """Stops the listener (waiting for running handlers), sends pending acknowledgements
        and detaches."""
        if self._runner is not None:
            self._runner.stop()
        self._core.close()


class Reader(_Receiving, ReaderHandle):
    __doc__ = ReaderHandle.__doc__
    __slots__ = ("_listener",)

    def __init__(self, core: _core._Consumer, listener: Callable[[Message], object] | None = None) -> None:
        super().__init__(core)
        self._listener = ReaderListener(self, listener) if listener else None

    def read_next(self, timeout: float | None = None) -> Message:
        """The next message; raises :class:`~magnetar.Timeout` after ``timeout`` seconds."""
        return self._core.receive(timeout)

    def read_many(self, max_messages: int = 100, timeout: float | None = 0.1) -> list[Message]:
        """Up to ``max_messages``: what is queued, else what arrives within ``timeout``."""
        msgs: list[Message] = self._core.receive_many(max_messages, timeout)
        return msgs

    @documented(ArrowColumns)
    def read_arrow(self, max_rows: int = 10_000, timeout: float | None = 0.1,
                   **columns: Unpack[ArrowColumns]) -> pa.RecordBatch:
        """Up to ``max_rows`` messages as one ``pyarrow.RecordBatch`` (see
        :meth:`magnetar.Consumer.receive_arrow`)."""
        return self._receive_arrow(max_rows, timeout, columns)

    @documented(ArrowColumns)
    def arrow_stream(self, until: MessageId | str = "now", max_rows: int = 10_000, timeout: float | None = 10.0,
                     **columns: Unpack[ArrowColumns]) -> pa.RecordBatchReader:
        """The messages from the reader's position up to ``until`` (``"now"``: the topic's last
        message when this is called; or a message id, included) as a ``pyarrow.RecordBatchReader``
        of batches of up to ``max_rows``. The reader must read one partition (a plain topic, or
        one partition of a partitioned one). ``timeout``: the longest wait for a message that
        must come (:class:`~magnetar.Timeout`). ``reader.__arrow_c_stream__`` is this stream
        up to now, so ``pyarrow.table(reader)``, ``polars.DataFrame(reader)`` and DuckDB's
        ``select ... from reader`` take a topic directly (``polars.from_arrow`` takes the
        ``RecordBatchReader`` this returns)."""
        import pyarrow

        made = self._arrow_columns(columns)
        end = StreamEnd(self._core.topics, stream_end(until, self.get_last_message_id), timeout)
        core = self._core

        def batches() -> Iterator[pa.RecordBatch]:
            while not end.done:
                got = core.receive_arrow(made.layout, max_rows, 0.2, end.scan)
                batch = end.took(got)
                if batch is not None:
                    yield batch
                elif not got.messages_read and not end.idle(core.has_message_available()):
                    return

        return pyarrow.RecordBatchReader.from_batches(made.schema, batches())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule stream protocol: :meth:`arrow_stream` up to now."""
        return self.arrow_stream().__arrow_c_stream__(requested_schema)

    def _next(self, timeout: float | None) -> Message:
        return self.read_next(timeout)

    def has_message_available(self) -> bool:
        """Whether there is a message past the last one read."""
        return self._core.has_message_available()

    def close(self) -> None:
        """Stops the listener (waiting for a running handler) and detaches the reader."""
        if self._listener is not None:
            self._listener.stop()
        self._core.close()


class Client(ClientHandle):
    __doc__ = ClientHandle.__doc__

    @documented(ProducerOptions)
    def create_producer(self, topic: str, **options: Unpack[ProducerOptions]) -> Producer:
        """Creates a producer; the topic is looked up and the producer attached before this
        returns, so a missing topic or a refused permission raises here."""
        args, interceptors = _build.producer(topic, options)
        if _build.needs_topic_schema(args[3]):
            args = (*args[:3], args[3]._bind(self.get_schema(topic)))
        return _interceptors.make(Producer, interceptors, self._core.create_producer(*args))

    @documented(ConsumerOptions)
    def subscribe(self, topic: str | Sequence[str], subscription: str, **options: Unpack[ConsumerOptions]) -> Consumer:
        """Subscribes to a topic, a list of topics, or (``pattern=True``) every topic matching
        a regular expression; attaches before returning.

        With ``listener``, messages are pushed to ``listener(msg)`` on up to
        ``listener_concurrency`` threads, in order per key; a message is acked when the listener
        returns and negatively acked (redelivered, dead-lettered after ``max_redeliver_count``)
        when it raises.

        A message that cannot be read (bad checksum, corrupt batch or compression) never stops
        the consumer: it is dead-lettered when ``dead_letter_topic`` or ``max_redeliver_count``
        is set, else acked and counted in ``stats()``; the messages after it are delivered.
        A chunked message still incomplete after ``chunk_expiry`` seconds (``None``: never),
        or the oldest beyond ``max_pending_chunked_messages`` in progress, is given up and
        its chunks acked."""
        s = _build.consumer(topic, subscription, options)
        handle = _interceptors.make(Consumer, s.interceptors, self._core.subscribe(*s.args, **s.engine_kwargs),
                                    s.listener, s.concurrency)
        handle._made_by(self._core)
        return s.hooks.bind(handle) if s.hooks is not None else handle

    @documented(ReaderOptions)
    def create_reader(self, topic: str, start: MessageId | TimeLike = MessageId.earliest,
                      **options: Unpack[ReaderOptions]) -> Reader:
        """A reader of ``topic`` starting at a message id (``MessageId.earliest`` /
        ``MessageId.latest`` / an id) or at a publish time."""
        args, at_time, listener = _build.reader(topic, start, options)
        core = self._core.subscribe(*args)
        if at_time is not None:
            core.seek(at_time)
        reader = Reader(core, listener)
        reader._made_by(self._core)
        return reader

    @documented(TableViewOptions)
    def create_table_view(self, topic: str, **options: Unpack[TableViewOptions]) -> TableView:
        """A :class:`TableView` of ``topic``: the latest value of each key, read from the
        compacted view over all partitions and loaded to the end before this returns, then
        kept up to date on a thread of its own. Null values (tombstones) and empty payloads
        remove their key."""
        return TableView(self.create_reader, topic, **options)

    def new_transaction(self, timeout: Seconds = 60.0) -> Transaction:
        """Opens a transaction; its coordinator aborts it ``timeout`` seconds from now unless
        it is committed or aborted first. As a context manager it commits when the block ends
        and aborts if the block raises. Right after a broker starts, this waits (up to
        ``operation_timeout``) for its transaction coordinator to be ready."""
        return Transaction(self._core.new_transaction(timeout))

    def transaction_from_id(self, id: tuple[int, int]) -> Transaction:
        """The open transaction with this id (``txn.id``), opened by any client in any
        process: commit or abort it here. Its sends and acknowledgements made elsewhere are
        already with the broker; only those made through this object are waited for."""
        most, least = id
        return Transaction(self._core.transaction_from_id(most, least))

    def get_partition_count(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0 for a non-partitioned topic)."""
        return self._core.partition_count(topic)

    def get_topics_of_namespace(self, namespace: str) -> list[str]:
        """The persistent topics of ``namespace`` (``"tenant/namespace"``), each partition of a
        partitioned topic under its own name (``...-partition-N``), as the broker lists them."""
        return self._core.topics_of_namespace(namespace)

    def get_schema(self, topic: str, version: int | bytes | None = None) -> SchemaInfo | None:
        """The registry's schema of ``topic`` (its latest, or ``version``), or None when the
        topic has none."""
        return schema_info(self._core.get_schema(topic, schema_version(version)))

    def close(self) -> None:
        """Closes every producer, consumer and reader, then the connections. Does not raise
        for producers whose pending messages failed: each is logged as a warning on the
        ``magnetar`` logger (close a producer itself to have it raise)."""
        self._core.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
