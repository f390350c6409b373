"""The asyncio API: :class:`AsyncClient` and its producers, consumers and readers.

The same engine and the same semantics as the blocking API; each call returns an awaitable
resolved from the client's dispatch thread. Cancelling a ``receive()`` never loses a message:
messages are only taken from the queue by the coroutine that returns them.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import os
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence

from . import _core
from ._core import Message, MessageId
from ._listener import AsyncListenerRunner
from ._state import StateWatcher
from ._options import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_OPERATION_TIMEOUT,
    Authentication,
    SubscriptionType,
    TimeLike,
    check_topic,
    client_options,
    consumer_options,
    deliver_at_ms,
    many_columns,
    producer_options,
    properties_dict,
    reader_start,
    time_ms,
)
from ._config import tls_options
from .exceptions import AlreadyClosed, InvalidConfiguration, Timeout, TopicTerminated

__all__ = ["AsyncClient", "AsyncConsumer", "AsyncProducer", "AsyncReader"]

_log = logging.getLogger("magnetar")


def _call(method: Callable[..., None], *args: Any) -> "asyncio.Future[Any]":
    fut = asyncio.get_running_loop().create_future()
    method(fut, *args)
    return fut


def _event_ms(event_time: TimeLike | None) -> int | None:
    return None if event_time is None else time_ms(event_time, "event_time")


class AsyncProducer:
    """Publishes messages to one topic; the asyncio twin of :class:`magnetar.Producer`."""

    def __init__(self, core: _core._Producer) -> None:
        self._core = core

    @property
    def topic(self) -> str:
        return self._core.topic

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def last_sequence_id(self) -> int:
        return self._core.last_sequence_id

    @property
    def is_connected(self) -> bool:
        return self._core.is_connected

    async def send(
        self,
        data: bytes | str | memoryview | bytearray,
        *,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: TimeLike | None = None,
        deliver_after: float | _dt.timedelta | None = None,
        deliver_at: TimeLike | None = None,
        ordering_key: bytes | str | None = None,
        sequence_id: int | None = None,
    ) -> MessageId:
        """Sends one message and returns its id once the broker acknowledged it. Concurrent
        sends share batches."""
        return await _call(
            self._core.aio_send, data, key, properties_dict(properties), _event_ms(event_time),
            deliver_at_ms(deliver_at, deliver_after), ordering_key, sequence_id,
        )

    async def send_many(
        self,
        payloads: Sequence[bytes | str | memoryview | bytearray],
        *,
        keys: Sequence[str | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_times: Sequence[TimeLike | None] | None = None,
    ) -> list[MessageId]:
        """Sends many messages and returns every id: the fast path.

        ``keys``, ``properties`` and ``event_times`` (datetimes or milliseconds since the epoch),
        when given, hold one entry (or None) per payload.
        """
        return await _call(self._core.aio_send_many, payloads, *many_columns(keys, properties, event_times))

    async def flush(self) -> None:
        """Sends open batches now and waits until every message sent so far is acknowledged.
        Raises if any of those messages failed (the first failure's class, with a count), or
        :class:`~magnetar.AlreadyClosed` once the producer is closed."""
        await _call(self._core.aio_flush)

    async def close(self) -> None:
        """Sends what is pending, waits for it (up to the send timeout), and detaches. The
        producer is closed either way; raises afterwards if messages pending at close failed."""
        await _call(self._core.aio_close)

    async def __aenter__(self) -> "AsyncProducer":
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            await self.close()
            return
        try:
            await self.close()
        except Exception as e:  # the exception already propagating says more; keep it
            _log.warning("%s: closing after %s: %s", self.topic, exc_type.__name__, e)


class AsyncConsumer:
    """Receives messages of a subscription; the asyncio twin of :class:`magnetar.Consumer`."""

    def __init__(self, core: _core._Consumer) -> None:
        self._core = core
        self._runner: AsyncListenerRunner | None = None

    @property
    def topics(self) -> list[str]:
        return self._core.topics

    @property
    def subscription(self) -> str:
        return self._core.subscription

    @property
    def is_connected(self) -> bool:
        return self._core.is_connected

    async def receive(self, timeout: float | None = None) -> Message:
        """The next message; raises :class:`~magnetar.Timeout` after ``timeout`` seconds
        (``None``: waits for ever)."""
        timeout = _core._duration_seconds(timeout, "timeout")
        msg = self._core.try_receive()
        if msg is not None:
            return msg
        if timeout is None:
            return await self._receive_forever()
        try:
            return await asyncio.wait_for(self._receive_forever(), timeout)
        except asyncio.TimeoutError:
            raise Timeout("no message received within the timeout") from None

    async def _receive_forever(self) -> Message:
        while True:
            msg = self._core.try_receive()
            if msg is not None:
                return msg
            await _call(self._core.aio_wait)

    async def receive_many(self, max_messages: int = 100, timeout: float | None = 0.1) -> list[Message]:
        """Up to ``max_messages``: what is queued, else what arrives within ``timeout``."""
        timeout = _core._duration_seconds(timeout, "timeout")
        msgs = self._core.receive_many(max_messages, 0.0)
        if msgs:
            return msgs
        try:
            first = await self.receive(timeout)
        except Timeout:
            return []
        return [first, *self._core.receive_many(max_messages - 1, 0.0)] if max_messages > 1 else [first]

    def ack(self, message: Message | MessageId) -> None:
        """Acknowledges one message (never blocks)."""
        self._core.ack(message)

    def ack_many(self, messages: Iterable[Message | MessageId]) -> None:
        """Acknowledges each message individually, in one call (never blocks)."""
        self._core.ack_many(messages)

    def ack_cumulative(self, message: Message | MessageId) -> None:
        self._core.ack_cumulative(message)

    async def ack_with_receipt(self, message: Message | MessageId, *, cumulative: bool = False) -> None:
        """Acknowledges and returns once the broker confirms it."""
        await _call(self._core.aio_ack_with_receipt, message, cumulative)

    def nack(self, message: Message | MessageId) -> None:
        self._core.nack(message)

    def redeliver_unacknowledged(self) -> None:
        self._core.redeliver_unacknowledged()

    async def stats(self) -> list[dict[str, Any]]:
        """The broker's statistics per covered topic (see :meth:`magnetar.Consumer.stats`)."""
        return await asyncio.to_thread(self._core.stats)

    def pause(self) -> None:
        self._core.pause()

    def resume(self) -> None:
        self._core.resume()

    async def seek(self, target: MessageId | TimeLike) -> None:
        await _call(self._core.aio_seek, target if isinstance(target, MessageId) else time_ms(target, "seek target"))

    async def get_last_message_id(self) -> MessageId:
        return max(await _call(self._core.aio_last_message_ids))

    async def unsubscribe(self) -> None:
        await _call(self._core.aio_unsubscribe)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.stop()
        await _call(self._core.aio_close)

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        while True:
            try:
                yield await self._receive_forever()
            except (AlreadyClosed, TopicTerminated):
                return

    async def __aenter__(self) -> "AsyncConsumer":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncReader:
    """Reads a topic from a position; the asyncio twin of :class:`magnetar.Reader`."""

    def __init__(self, core: _core._Consumer) -> None:
        self._consumer = AsyncConsumer(core)
        self._core = core

    async def read_next(self, timeout: float | None = None) -> Message:
        return await self._consumer.receive(timeout)

    async def has_message_available(self) -> bool:
        return await _call(self._core.aio_has_message_available)

    async def read_many(self, max_messages: int = 100, timeout: float | None = 0.1) -> list[Message]:
        return await self._consumer.receive_many(max_messages, timeout)

    async def get_last_message_id(self) -> MessageId:
        return await self._consumer.get_last_message_id()

    async def seek(self, target: MessageId | TimeLike) -> None:
        await self._consumer.seek(target)

    async def close(self) -> None:
        await self._consumer.close()

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._consumer._iterate()

    async def __aenter__(self) -> "AsyncReader":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncClient:
    """The asyncio twin of :class:`magnetar.Client`, with the same options; durations read the
    same way (``None``, ``inf`` or over 2**31 s: no limit; negative or NaN:
    :class:`~magnetar.InvalidConfiguration`).

    Args:
        tls_trust_certs_file_path: PEM file of the CA certificates that sign the brokers'
            certificates (``pulsar+ssl://``); default: the Mozilla roots.
        tls_allow_insecure_connection: accept any broker certificate (tests only).
        tls_validate_hostname: require the certificate to name the host of the URL (default
            True; ``False`` checks the chain only).
        tls_certificate_file_path: PEM client certificate for mutual TLS.
        tls_private_key_file_path: PEM private key of ``tls_certificate_file_path``.
    """

    def __init__(
        self,
        service_url: str,
        *,
        operation_timeout: float | None = DEFAULT_OPERATION_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        keepalive_interval: float | None = DEFAULT_KEEPALIVE_INTERVAL,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        authentication: Authentication | None = None,
        initial_backoff: float = 0.1,
        max_backoff: float = 60.0,
        on_state_change: Callable[[str], object] | None = None,
        tls_trust_certs_file_path: str | os.PathLike[str] | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = True,
        tls_certificate_file_path: str | os.PathLike[str] | None = None,
        tls_private_key_file_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self._core = _core._Client(
            service_url,
            client_options(operation_timeout, connect_timeout, keepalive_interval, memory_limit,
                           authentication, initial_backoff, max_backoff)
            | tls_options(tls_trust_certs_file_path, tls_allow_insecure_connection, tls_validate_hostname,
                          tls_certificate_file_path, tls_private_key_file_path),
        )
        self.service_url = service_url
        if on_state_change is not None and not callable(on_state_change):
            raise InvalidConfiguration("on_state_change must be a callable taking the state name")
        self._watcher = StateWatcher(self._core, on_state_change) if on_state_change else None

    @property
    def state(self) -> str:
        """``"idle"`` (nothing created yet), ``"connecting"`` (some producer or consumer is
        (re)connecting), ``"connected"`` or ``"closed"``."""
        return self._core.state

    async def create_producer(
        self,
        topic: str,
        *,
        name: str | None = None,
        batching: bool = True,
        batch_max_messages: int = 1000,
        batch_max_bytes: int = 128 * 1024,
        batch_max_delay: float = 0.01,
        compression: str | None = None,
        max_pending: int = 1000,
        block_if_full: bool = True,
        send_timeout: float | None = 30.0,
        initial_sequence_id: int | None = None,
        access_mode: str = "shared",
        chunking: bool = False,
        properties: Mapping[str, str] | None = None,
        routing_mode: str = "round_robin",
        hashing_scheme: str = "java_string",
        router: Callable[[str | None, int], int] | None = None,
        batching_type: str = "default",
        partitions_update_interval: float | None = 60.0,
    ) -> AsyncProducer:
        opts = producer_options(
            name=name, batching=batching, batch_max_messages=batch_max_messages,
            batch_max_bytes=batch_max_bytes, batch_max_delay=batch_max_delay, compression=compression,
            max_pending=max_pending, block_if_full=block_if_full, send_timeout=send_timeout,
            initial_sequence_id=initial_sequence_id, access_mode=access_mode, chunking=chunking,
            properties=properties_dict(properties), routing_mode=routing_mode, hashing_scheme=hashing_scheme,
            batching_type=batching_type, partitions_update_interval=partitions_update_interval,
        )
        if router is not None and not callable(router):
            raise InvalidConfiguration("router must be a callable (key, num_partitions) -> partition")
        return AsyncProducer(await _call(self._core.aio_create_producer, topic, opts, router))

    async def subscribe(
        self,
        topic: str | Sequence[str],
        subscription: str,
        *,
        subscription_type: SubscriptionType | str = SubscriptionType.EXCLUSIVE,
        initial_position: str = "latest",
        pattern: bool = False,
        consumer_name: str | None = None,
        receiver_queue_size: int = 1000,
        nack_redelivery_delay: float = 60.0,
        ack_timeout: float | None = 0.0,
        ack_group_time: float = 0.1,
        ack_group_max: int = 1000,
        batch_index_ack: bool = False,
        read_compacted: bool = False,
        subscription_properties: Mapping[str, str] | None = None,
        properties: Mapping[str, str] | None = None,
        priority_level: int = 0,
        discovery_period: float | None = 60.0,
        max_redeliver_count: int | None = None,
        dead_letter_topic: str | None = None,
        chunk_expiry: float | None = 60.0,
        max_pending_chunked_messages: int = 10,
        listener: Callable[[Message], Awaitable[object]] | None = None,
        listener_concurrency: int = 1,
    ) -> AsyncConsumer:
        """As :meth:`magnetar.Client.subscribe`; a ``listener`` here is a coroutine function,
        run as up to ``listener_concurrency`` tasks, in order per key."""
        if listener is not None and not callable(listener):
            raise InvalidConfiguration("listener must be a coroutine function taking a Message")
        if isinstance(listener_concurrency, bool) or not isinstance(listener_concurrency, int) or listener_concurrency < 1:
            raise InvalidConfiguration("listener_concurrency must be an int >= 1")
        check_topic(topic)
        opts = consumer_options(
            subscription_type, initial_position, consumer_name=consumer_name,
            receiver_queue_size=receiver_queue_size, nack_redelivery_delay=nack_redelivery_delay,
            ack_timeout=ack_timeout, ack_group_time=ack_group_time, ack_group_max=ack_group_max,
            batch_index_ack=batch_index_ack, read_compacted=read_compacted,
            subscription_properties=properties_dict(subscription_properties),
            properties=properties_dict(properties), priority_level=priority_level,
            discovery_period=discovery_period, max_redeliver_count=max_redeliver_count,
            dead_letter_topic=dead_letter_topic, chunk_expiry=chunk_expiry,
            max_pending_chunked_messages=max_pending_chunked_messages,
        )
        topics = topic if isinstance(topic, str) else list(topic)
        consumer = AsyncConsumer(await _call(self._core.aio_subscribe, topics, subscription, opts, pattern))
        if listener is not None:
            consumer._runner = AsyncListenerRunner(consumer, listener, listener_concurrency)
        return consumer

    async def create_reader(
        self,
        topic: str,
        start: MessageId | TimeLike = MessageId.earliest,
        *,
        start_inclusive: bool = False,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        read_compacted: bool = False,
    ) -> AsyncReader:
        start_id, at_time = reader_start(start)
        opts = consumer_options(
            # As the Java reader does: the broker honours the start id with "latest", and
            # "earliest" only for the earliest sentinel.
            "exclusive", "earliest" if start_id == MessageId.earliest else "latest", consumer_name=reader_name, receiver_queue_size=receiver_queue_size,
            durable=False, start_message_id=start_id, start_inclusive=start_inclusive,
            read_compacted=read_compacted,
        )
        core = await _call(self._core.aio_subscribe, topic, f"reader-{os.urandom(5).hex()}", opts, False)
        if at_time is not None:
            await _call(core.aio_seek, at_time)
        return AsyncReader(core)

    async def close(self) -> None:
        """Closes every producer, consumer and reader, then the connections; failed pending
        messages of producers are logged as warnings, as :meth:`magnetar.Client.close` does."""
        await _call(self._core.aio_close)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
