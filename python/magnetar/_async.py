"""The asyncio API: :class:`AsyncClient` and its producers, consumers and readers.

The same engine and the same semantics as the blocking API, whose non-waiting half
(:mod:`magnetar._handles`) they share; each waiting call returns an awaitable resolved from the
client's dispatch thread. Cancelling a ``receive()`` never loses a message: messages are only
taken from the queue by the coroutine that returns them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Mapping, Self, Sequence

from . import _build, _core, _interceptors
from ._aio import call
from ._core import Message, MessageId
from ._handles import COMPLETED, ClientHandle, ConsumerHandle, ProducerHandle, ReaderHandle, documented
from ._listener import AsyncListenerRunner, AsyncReaderListener
from ._columns import ArrowReads, Columns, StreamEnd, stream_end, to_arrow, to_batch
from ._options import ArrowColumns, ArrowSendColumns, ConsumerOptions, MessageFields, ProducerOptions, ReaderOptions, Seconds, SendManyColumns, TimeLike, resolve, seek_target
from ._table_view import AsyncTableView, TableViewOptions
from ._transaction import AsyncTransaction, OpeningTransaction
from .exceptions import AlreadyClosed, Timeout, TopicTerminated
from .schema._schemas import SchemaInfo, schema_info, schema_version

if TYPE_CHECKING:
    import pyarrow as pa
    from typing import Unpack

__all__ = ["AsyncClient", "AsyncConsumer", "AsyncProducer", "AsyncReader"]


class AsyncProducer(ProducerHandle):
    __doc__ = ProducerHandle.__doc__
    __slots__ = ()

    @documented(MessageFields)
    async def send(self, data: Any, **fields: Unpack[MessageFields]) -> MessageId:
        """Sends one message and returns its id once the broker acknowledged it. Concurrent
        sends share batches. ``data=None`` sends a null value (a tombstone: on a
        compacted topic it deletes its ``key``; consumers see ``msg.null_value``)."""
        return await call(self._core.send, data, fields or None)

    async def send_many(self, payloads: Sequence[Any],
                        **columns: Unpack[SendManyColumns]) -> list[MessageId]:
        """Sends many messages and returns every id: the fast path.

        ``keys``, ``properties`` and ``event_times`` (datetimes or milliseconds since the epoch),
        when given, hold one entry (or None) per payload; ``txn`` sends them all inside a
        transaction.
        """
        return await call(self._core.send_many, payloads, **columns)

    @documented(ArrowSendColumns)
    async def send_arrow(self, data: Any, **columns: Unpack[ArrowSendColumns]) -> list[MessageId]:
        """Sends every row of ``data`` and returns the message ids in row order once every
        receipt is in (see :meth:`magnetar.Producer.send_arrow`)."""
        o = resolve(ArrowSendColumns, columns, "send_arrow")
        return await call(self._core.send_arrow_ids, to_arrow(data), o["value"], o["key"], o["properties"],
                          o["event_time"], o["txn"])

    async def flush(self) -> None:
        """Sends open batches now and waits until every message sent so far is acknowledged.
        Raises if any of those messages failed (the first failure's class, with a count), or
        :class:`~magnetar.AlreadyClosed` once the producer is closed."""
        await call(self._core.flush)

    async def close(self) -> None:
        """Sends what is pending, waits for it (up to the send timeout), and detaches. The
        producer is closed either way; raises afterwards if messages pending at close failed."""
        await call(self._core.close)

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            await self.close()
            return
        try:
            await self.close()
        except Exception as e:
            self._closing_failed(exc_type, e)


class _AsyncReceiving:
    """Receiving without blocking the event loop, shared by consumers and readers."""

    __slots__ = ()
    _core: Any
    _arrow: ArrowReads

    async def _arrow_columns(self, options: Mapping[str, Any]) -> Columns:
        """The columns of an Arrow read with ``options`` (the topic's schema fetched once)."""
        key = self._arrow.key(options)
        made = self._arrow.cached(key)
        if made is None:
            topics = self._core.topics
            client = self._arrow.client
            schemas = {}
            if client is not None:
                for t in self._arrow.schema_topics(key, topics):
                    schemas[t] = await call(client.get_schema, t, None)
            made = self._arrow.make(key, topics, schemas)
        return made

    async def _receive_arrow(self, max_rows: int, timeout: float | None, options: Mapping[str, Any]) -> pa.RecordBatch:
        made = await self._arrow_columns(options)
        return to_batch(await call(self._core.receive_arrow, made.layout, max_rows, timeout))

    def _next(self) -> Awaitable[Message]:
        """The next ``receive`` (or ``read_next``) of ``async for``: the coroutine itself, so
        iterating adds no frame of its own."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def seek(self, target: MessageId | TimeLike) -> None:
        """Moves to a message id or to a publish time."""
        await call(self._core.seek, seek_target(target))

    async def get_last_message_id(self) -> MessageId:
        """The id of the last message of the topic (the highest over partitions)."""
        return max(await call(self._core.last_message_ids))

    async def get_last_message_ids(self) -> list[MessageId]:
        """The id of the last message of each partition (see
        :meth:`magnetar.Consumer.get_last_message_ids`)."""
        ids: list[MessageId] = await call(self._core.last_message_ids)
        return ids

    async def _iterate(self) -> AsyncIterator[Message]:
        while True:
            try:
                yield await self._next()
            except (AlreadyClosed, TopicTerminated):
                return

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncConsumer(_AsyncReceiving, ConsumerHandle[Awaitable[None]]):
    """Receives messages of a subscription; iterate over it with ``async for``. The
    acknowledgements act at once and return an awaitable that is already done."""

    __slots__ = ("_runner",)
    _done = COMPLETED

    def __init__(self, core: _core._Consumer, listener: Callable[[Message], Awaitable[object]] | None = None,
                 listener_concurrency: int = 1) -> None:
        super().__init__(core)
        self._runner = AsyncListenerRunner(self, listener, listener_concurrency) if listener else None

    async def receive(self, timeout: float | None = None) -> Message:
        """The next message; raises :class:`~magnetar.Timeout` after ``timeout`` seconds
        (``None``: waits for ever). Cancelling it takes nothing: the message it would have
        returned stays first in the queue."""
        msg: Message | None = self._core.try_receive(timeout)  # no future when one is queued
        return msg if msg is not None else await call(self._core.receive, timeout)

    async def receive_many(self, max_messages: int = 100, timeout: float | None = 0.1,
                           max_bytes: int | None = None) -> list[Message]:
        """Up to ``max_messages`` of at most ``max_bytes`` payload bytes together: what is
        queued, else what arrives within ``timeout`` (see :meth:`magnetar.Consumer.receive_many`)."""
        msgs: list[Message] = self._core.try_receive_many(max_messages, timeout, max_bytes)
        return msgs if msgs else await call(self._core.receive_many, max_messages, timeout, max_bytes)

    @documented(ArrowColumns)
    async def receive_arrow(self, max_rows: int = 10_000, timeout: float | None = 0.1,
                            **columns: Unpack[ArrowColumns]) -> pa.RecordBatch:
        """Up to ``max_rows`` messages as one ``pyarrow.RecordBatch``: what is queued, else what
        arrives within ``timeout`` (an empty batch when nothing does); see
        :meth:`magnetar.Consumer.receive_arrow`. Cancelling it takes nothing."""
        return await self._receive_arrow(max_rows, timeout, columns)

    def _next(self) -> Awaitable[Message]:
        return self.receive()

    async def ack_with_receipt(self, message: Message | MessageId, *, cumulative: bool = False) -> None:
        """Acknowledges and returns once the broker confirms it (see
        :meth:`magnetar.Consumer.ack_with_receipt`)."""
        await call(self._core.ack_with_receipt, message, cumulative)

    async def reconsume_later(self, message: Message, delay: Seconds = 0.0,
                              properties: Mapping[str, str] | None = None) -> None:
        """Has ``message`` come again after ``delay`` seconds through the retry letter topic,
        as :meth:`magnetar.Consumer.reconsume_later`."""
        await call(self._core.reconsume_later, message, delay, properties)

    async def stats(self) -> list[dict[str, Any]]:
        """The broker's statistics per covered topic (see :meth:`magnetar.Consumer.stats`)."""
        return await call(self._core.stats)

    async def unsubscribe(self) -> None:
        """Deletes the subscription and closes the consumer."""
        await call(self._core.unsubscribe)

    async def close(self) -> None:
        """Stops the listener (waiting for running handlers), sends pending acknowledgements
        and detaches."""
        if self._runner is not None:
            await self._runner.stop()
        await call(self._core.close)


class AsyncReader(_AsyncReceiving, ReaderHandle):
    __doc__ = ReaderHandle.__doc__
    __slots__ = ("_listener",)

    def __init__(self, core: _core._Consumer, listener: Callable[[Message], Awaitable[object]] | None = None) -> None:
        super().__init__(core)
        self._listener = AsyncReaderListener(self, listener) if listener else None

    async def read_next(self, timeout: float | None = None) -> Message:
        """The next message; raises :class:`~magnetar.Timeout` after ``timeout`` seconds."""
        msg: Message | None = self._core.try_receive(timeout)
        return msg if msg is not None else await call(self._core.receive, timeout)

    async def read_many(self, max_messages: int = 100, timeout: float | None = 0.1) -> list[Message]:
        """Up to ``max_messages``: what is queued, else what arrives within ``timeout``."""
        msgs: list[Message] = self._core.try_receive_many(max_messages, timeout)
        return msgs if msgs else await call(self._core.receive_many, max_messages, timeout)

    @documented(ArrowColumns)
    async def read_arrow(self, max_rows: int = 10_000, timeout: float | None = 0.1,
                         **columns: Unpack[ArrowColumns]) -> pa.RecordBatch:
        """Up to ``max_rows`` messages as one ``pyarrow.RecordBatch`` (see
        :meth:`magnetar.Consumer.receive_arrow`)."""
        return await self._receive_arrow(max_rows, timeout, columns)

    @documented(ArrowColumns)
    def arrow_stream(self, until: MessageId | str = "now", max_rows: int = 10_000, timeout: float | None = 10.0,
                     **columns: Unpack[ArrowColumns]) -> AsyncIterator[pa.RecordBatch]:
        """The record batches from the reader's position up to ``until``, as
        :meth:`magnetar.Reader.arrow_stream` reads them, iterated with ``async for``."""
        return self._stream(until, max_rows, timeout, columns)

    async def _stream(self, until: MessageId | str, max_rows: int, timeout: float | None,
                      columns: Mapping[str, Any]) -> AsyncIterator[pa.RecordBatch]:
        made = await self._arrow_columns(columns)
        last = await self.get_last_message_id() if until == "now" else None
        end = StreamEnd(self._core.topics, stream_end(until, lambda: last), timeout)
        while not end.done:
            got = await call(self._core.receive_arrow, made.layout, max_rows, 0.2, end.scan)
            batch = end.took(got)
            if batch is not None:
                yield batch
            elif not got.messages_read and not end.idle(await self.has_message_available()):
                return

    def _next(self) -> Awaitable[Message]:
        return self.read_next()

    async def has_message_available(self) -> bool:
        """Whether there is a message past the last one read."""
        return await call(self._core.has_message_available)

    async def close(self) -> None:
        """Stops the listener and detaches the reader."""
        if self._listener is not None:
            await self._listener.stop()
        await call(self._core.close)


class AsyncClient(ClientHandle):
    __doc__ = ClientHandle.__doc__

    @documented(ProducerOptions)
    async def create_producer(self, topic: str, **options: Unpack[ProducerOptions]) -> AsyncProducer:
        """Creates a producer; the topic is looked up and the producer attached before this
        returns, so a missing topic or a refused permission raises here."""
        args, interceptors = _build.producer(topic, options)
        if _build.needs_topic_schema(args[3]):
            args = (*args[:3], args[3]._bind(await self.get_schema(topic)))
        return _interceptors.make(AsyncProducer, interceptors, await call(self._core.create_producer, *args))

    @documented(ConsumerOptions)
    async def subscribe(self, topic: str | Sequence[str], subscription: str,
                        **options: Unpack[ConsumerOptions]) -> AsyncConsumer:
        """As :meth:`magnetar.Client.subscribe`; a ``listener`` here is a coroutine function,
        run as up to ``listener_concurrency`` tasks, in order per key."""
        s = _build.consumer(topic, subscription, options)
        core = await call(self._core.subscribe, *s.args, **s.engine_kwargs)
        handle = _interceptors.make(AsyncConsumer, s.interceptors, core, s.listener, s.concurrency)
        handle._made_by(self._core)
        return s.hooks.bind(handle) if s.hooks is not None else handle

    @documented(ReaderOptions)
    async def create_reader(self, topic: str, start: MessageId | TimeLike = MessageId.earliest,
                            **options: Unpack[ReaderOptions]) -> AsyncReader:
        """A reader of ``topic`` starting at a message id (``MessageId.earliest`` /
        ``MessageId.latest`` / an id) or at a publish time."""
        args, at_time, listener = _build.reader(topic, start, options)
        core = await call(self._core.subscribe, *args)
        if at_time is not None:
            await call(core.seek, at_time)
        reader = AsyncReader(core, listener)
        reader._made_by(self._core)
        return reader

    @documented(TableViewOptions)
    async def create_table_view(self, topic: str, **options: Unpack[TableViewOptions]) -> AsyncTableView:
        """An :class:`AsyncTableView` of ``topic``: the latest value of each key, read from the
        compacted view over all partitions and loaded to the end before this returns, then
        kept up to date on a task of the running event loop. Null values (tombstones) and
        empty payloads remove their key."""
        return await AsyncTableView._open(self.create_reader, topic, **options)

    def new_transaction(self, timeout: Seconds = 60.0) -> OpeningTransaction:
        """Opens a transaction; its coordinator aborts it ``timeout`` seconds from now unless
        it is committed or aborted first. Await it (``txn = await client.new_transaction()``)
        or use it in ``async with`` (commits when the block ends, aborts if it raises). Right
        after a broker starts, this waits (up to ``operation_timeout``) for its transaction
        coordinator to be ready."""
        async def open() -> AsyncTransaction:
            return AsyncTransaction(await call(self._core.new_transaction, timeout))

        return OpeningTransaction(open)

    async def transaction_from_id(self, id: tuple[int, int]) -> AsyncTransaction:
        """The open transaction with this id (``txn.id``), opened by any client in any
        process: commit or abort it here. Its sends and acknowledgements made elsewhere are
        already with the broker; only those made through this object are waited for."""
        most, least = id
        return AsyncTransaction(await call(self._core.transaction_from_id, most, least))

    async def get_partition_count(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0 for a non-partitioned topic)."""
        return await call(self._core.partition_count, topic)

    async def get_topics_of_namespace(self, namespace: str) -> list[str]:
        """The persistent topics of ``namespace`` (``"tenant/namespace"``), each partition of a
        partitioned topic under its own name (``...-partition-N``), as the broker lists them."""
        return await call(self._core.topics_of_namespace, namespace)

    async def get_schema(self, topic: str, version: int | bytes | None = None) -> SchemaInfo | None:
        """The registry's schema of ``topic`` (its latest, or ``version``), or None when the
        topic has none."""
        return schema_info(await call(self._core.get_schema, topic, schema_version(version)))

    async def close(self) -> None:
        """Closes every producer, consumer and reader, then the connections; failed pending
        messages of producers are logged as warnings, as :meth:`magnetar.Client.close` does."""
        await call(self._core.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
