"""``pulsar.asyncio``: the official asyncio API on :class:`magnetar.AsyncClient`. Options and
defaults are those of ``pulsar.Client`` except that producers batch by default, as the official
asyncio producer does. Errors are :class:`PulsarException` with ``error()`` giving the ``Result``."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any, AsyncIterator

from .. import _async as _native
from .. import _build
from .._aio import call
from .. import exceptions as _nexc
from ._client import Client as _SyncClient
from ._client import _native_schema, partition_names
from ._table_view import TableView as _SyncTableView
from ._config import check_type_or_none
from ._endpoints import _fields, _not_after, _target
from ._message import Message
from ._handles import ConsumerAccessors, ProducerAccessors, ReceivingAccessors, seek_target
from ._pulsar import MessageId, Result
from ._transaction import TransactionBase, native_txn
from .exceptions import PulsarException as _CompatException
from .exceptions import translate
from .schema import Schema

__all__ = ["Client", "Consumer", "Producer", "PulsarException", "Reader", "TableView", "Transaction"]

# The official asyncio client's positional orders, which are not the blocking client's: no
# listeners, and subscribe has no pattern_auto_discovery_period.
_SUBSCRIBE_ORDER = (
    "consumer_type", "schema", "receiver_queue_size", "max_total_receiver_queue_size_across_partitions",
    "consumer_name", "unacked_messages_timeout_ms", "broker_consumer_stats_cache_time_ms",
    "negative_ack_redelivery_delay_ms", "is_read_compacted", "properties", "initial_position", "crypto_key_reader",
    "replicate_subscription_state_enabled", "max_pending_chunked_message",
    "auto_ack_oldest_chunked_message_on_queue_full", "start_message_id_inclusive", "batch_receive_policy",
    "key_shared_policy", "batch_index_ack_enabled", "regex_subscription_mode", "dead_letter_policy",
    "crypto_failure_action", "is_pattern_topic")
_READER_ORDER = (
    "schema", "receiver_queue_size", "reader_name", "subscription_role_prefix", "is_read_compacted",
    "crypto_key_reader", "start_message_id_inclusive", "crypto_failure_action")


def _named(order: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any], call: str) -> dict[str, Any]:
    """Positional arguments under their names in the official asyncio order."""
    if len(args) > len(order):
        raise TypeError(f"{call}() takes at most {len(order)} optional positional arguments ({len(args)} given)")
    for name, value in zip(order, args):
        if name in kwargs:
            raise TypeError(f"{call}() got multiple values for argument {name!r}")
        kwargs[name] = value
    return kwargs


class PulsarException(_CompatException):
    """An asyncio operation failed; ``error()`` is its :class:`~magnetar.compat.Result`."""

    def __init__(self, result: Result, msg: str = "") -> None:
        super().__init__(f"{result.name}: {msg}" if msg else result.name)
        self._result = result

    def error(self) -> Result:
        return self._result


def _set_future(future: asyncio.Future[Any], result: Result, value: Any) -> None:
    """Resolves ``future`` unless it is already done (cancelled, or resolved before)."""
    if future.done():
        return
    if result == Result.Ok:
        future.set_result(value)
    else:
        future.set_exception(PulsarException(result))


@contextlib.asynccontextmanager
async def _mapped() -> AsyncIterator[None]:
    try:
        yield
    except (_nexc.SchemaEncodeError, _nexc.SchemaDecodeError):
        raise
    except _nexc.PulsarError as e:
        compat = translate(e)
        raise PulsarException(Result.__members__.get(type(compat).__name__, Result.UnknownError), str(e)) from e
    except _CompatException as e:
        raise PulsarException(Result.__members__.get(type(e).__name__, Result.UnknownError), str(e)) from e


class Transaction(TransactionBase):
    """The asyncio twin of ``pulsar.Transaction`` (magnetar's addition): ``await
    txn.commit()``, ``await txn.abort()``."""

    __slots__ = ()
    _txn: Any

    async def commit(self) -> None:
        async with _mapped():
            await self._txn.commit()

    async def abort(self) -> None:
        async with _mapped():
            await self._txn.abort()


class Producer(ProducerAccessors):
    """Publishes; ``await send(...)`` gives the message id."""

    def __init__(self, native: _native.AsyncProducer, schema: Schema) -> None:
        self._p, self._schema = native, schema
        # Tasks with a send in flight: flush() returns once they are done, as the official one
        # (whose sends complete before its flush does).
        self._inflight: set[asyncio.Task[Any]] = set()

    async def send(self, content: Any, properties: dict[str, str] | None = None, partition_key: str | None = None,
                   ordering_key: str | None = None, sequence_id: int | None = None,
                   replication_clusters: list[str] | None = None, disable_replication: bool = False,
                   event_timestamp: int | None = None, deliver_at: int | None = None,
                   deliver_after: Any = None, *, txn: Transaction | None = None) -> MessageId:
        fields = _fields(properties, partition_key, ordering_key, sequence_id, replication_clusters,
                         disable_replication, event_timestamp, deliver_at, deliver_after)
        if txn is not None:
            fields["txn"] = native_txn(txn)
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            async with _mapped():
                return MessageId._of(await self._p.send(content, **fields))
        finally:
            self._inflight.discard(task)  # type: ignore[arg-type]

    async def flush(self) -> None:
        async with _mapped():
            await self._p.flush()
        others = self._inflight - {asyncio.current_task()}
        if others:
            await asyncio.wait(others)

    async def close(self) -> None:
        if self._p._core.closed:
            raise PulsarException(Result.AlreadyClosed, "the producer is closed")
        async with _mapped():
            await self._p.close()


class _Receiving(ReceivingAccessors):
    def __init__(self, native: Any, schema: Schema, inclusive: bool = False) -> None:
        self._c, self._schema, self._inclusive = native, schema, inclusive
        self._floor: Any = None  # see ReceivingAccessors._floor_after_seek

    async def _next(self, receive: Any) -> Message:
        async with _mapped():
            msg = await receive()
            while self._floor is not None and _not_after(msg.message_id, self._floor):
                msg = await receive()
            self._floor = None
        return Message._of(msg)

    async def seek(self, messageid: Any) -> None:
        target = seek_target(messageid)
        async with _mapped():
            await self._c.seek(target)
        self._floor = self._floor_after_seek(target)

    async def close(self) -> None:
        async with _mapped():
            await self._c.close()


class Consumer(_Receiving, ConsumerAccessors):
    """Receives; there is no receive timeout (use ``asyncio.wait_for``), as in the official API."""

    def __init__(self, native: Any, schema: Schema, inclusive: bool = False, name: str = "") -> None:
        super().__init__(native, schema, inclusive)
        self._name = name

    async def receive(self) -> Message:
        return await self._next(self._c.receive)

    async def acknowledge(self, message: Any, txn: Transaction | None = None) -> None:
        async with _mapped():
            if txn is None:
                await self._c.ack_with_receipt(_target(message))
            else:  # the transaction's commit waits for the broker's confirmation
                self._c.ack(_target(message), native_txn(txn))

    async def acknowledge_cumulative(self, message: Any, txn: Transaction | None = None) -> None:
        async with _mapped():
            if txn is None:
                await self._c.ack_with_receipt(_target(message), cumulative=True)
            else:
                self._c.ack_cumulative(_target(message), native_txn(txn))

    async def negative_acknowledge(self, message: Any) -> None:
        self._c.nack(_target(message))

    def redeliver_unacknowledged_messages(self) -> None:
        """Not a coroutine, as in the official asyncio API."""
        self._c.redeliver_unacknowledged()

    async def get_last_message_id(self) -> MessageId:
        async with _mapped():
            return MessageId._of(await self._c.get_last_message_id())

    async def unsubscribe(self) -> None:
        async with _mapped():
            await self._c.unsubscribe()


class Reader(_Receiving):
    async def read_next(self) -> Message:
        return await self._next(self._c.read_next)

    async def has_message_available(self) -> bool:
        async with _mapped():
            return await self._c.has_message_available()


class TableView(_SyncTableView):
    """``pulsar.TableView`` with a coroutine ``close`` (the official asyncio client has no table
    view; this one follows the topic on the event loop)."""

    async def close(self) -> None:  # type: ignore[override]
        async with _mapped():
            await self._v.close()  # type: ignore[attr-defined]


class Client(_SyncClient):
    """``pulsar.asyncio.Client``: ``pulsar.Client``'s options, coroutine methods."""

    def _connect(self, service_url: Any, options: dict[str, Any]) -> Any:
        try:
            return _native.AsyncClient(service_url, **options)
        except _nexc.PulsarError as e:
            raise translate(e) from e

    def create_producer(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        """As ``pulsar.Client.create_producer``, but batching by default."""
        kwargs.setdefault("batching_enabled", True)
        return super().create_producer(topic, *args, **kwargs)

    async def _new_producer(self, topic: str, schema: Schema, options: dict[str, Any]) -> Producer:
        async with _mapped():
            args, _ = _build.producer(topic, options)
            core = await call(self._client._core.create_producer, *args, router_payload=True)  # as the blocking twin
            return Producer(_native.AsyncProducer(core), schema)

    def _check_auth(self) -> None:
        if self._unreachable is not None:
            raise PulsarException(Result.ConnectError, self._unreachable)
        if self._refused is not None:
            raise PulsarException(Result.AuthenticationError, self._refused)

    def subscribe(self, topic: Any, subscription_name: str, *args: Any, **kwargs: Any) -> Any:
        """As ``pulsar.asyncio.Client.subscribe`` (no listener, its positional order);
        ``is_pattern_topic=True`` reads ``topic`` as a regular expression."""
        kwargs = _named(_SUBSCRIBE_ORDER, args, kwargs, "subscribe")
        check_type_or_none(type(None), kwargs.get("message_listener"), "message_listener")
        if kwargs.pop("is_pattern_topic", False):
            topic = re.compile(topic)
        return super().subscribe(topic, subscription_name, **kwargs)

    def create_reader(self, topic: str, start_message_id: MessageId, *args: Any, **kwargs: Any) -> Any:
        """As ``pulsar.asyncio.Client.create_reader`` (no listener, its positional order)."""
        kwargs = _named(_READER_ORDER, args, kwargs, "create_reader")
        check_type_or_none(type(None), kwargs.get("reader_listener"), "reader_listener")
        return super().create_reader(topic, start_message_id, **kwargs)

    async def _new_consumer(self, topic: Any, subscription: str, schema: Schema, options: dict[str, Any],
                            listener: Any, policy: Any) -> Consumer:
        inclusive = options.pop("start_inclusive")
        async with _mapped():
            args = _build.consumer(topic, subscription, options).args
            args[2]["start_inclusive"] = inclusive  # the engine's option, as in the blocking twin
            return Consumer(_native.AsyncConsumer(await call(self._client._core.subscribe, *args)), schema, inclusive,
                            options.get("consumer_name") or "")

    async def _new_reader(self, topic: str, start: Any, schema: Schema, options: dict[str, Any],
                          listener: Any) -> Reader:
        async with _mapped():
            return Reader(await self._client.create_reader(topic, start, **options), schema, options["start_inclusive"])

    async def _new_table_view(self, topic: str, subscription: str | None, schema: Schema) -> TableView:
        async with _mapped():
            return TableView(await self._client.create_table_view(topic, schema=_native_schema(schema),
                                                                  subscription_name=subscription), subscription, schema)

    async def new_transaction(self, timeout_ms: int = 60_000) -> Transaction:  # type: ignore[override]
        """As ``pulsar.Client.new_transaction``, awaited."""
        _SyncClient._check_timeout_ms(timeout_ms)
        async with _mapped():
            return Transaction(await self._client.new_transaction(timeout_ms / 1000))

    async def get_topic_partitions(self, topic: str) -> list[str]:  # type: ignore[override]
        async with _mapped():
            return partition_names(topic, await self._client.get_partition_count(topic))

    async def close(self) -> None:  # type: ignore[override]
        async with _mapped():
            await self._client.close()

    def shutdown(self) -> None:
        """Closes at once, without awaiting (as the official asyncio client's)."""
        try:
            self._client._core.close()
        except _nexc.PulsarError as e:
            raise translate(e) from e
