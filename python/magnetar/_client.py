"""The blocking API: :class:`Client`, :class:`Producer`, :class:`Consumer`, :class:`Reader`.

Every blocking call releases the GIL while it waits and can be interrupted with Ctrl-C.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import logging
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from . import _core
from ._core import Message, MessageId, SendFuture
from ._listener import ListenerRunner
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
from .exceptions import AlreadyClosed, InvalidConfiguration, TopicTerminated

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


def _event_ms(event_time: TimeLike | None) -> int | None:
    return None if event_time is None else time_ms(event_time, "event_time")


def _not_picklable(kind: str) -> None:
    raise TypeError(
        f"magnetar.{kind} cannot be pickled: it owns network connections. Pickle a "
        "magnetar.ClientConfig (or the service URL) and create the object in the process that uses it."
    )


class Producer:
    """Publishes messages to one topic (all partitions of a partitioned topic)."""

    def __init__(self, core: _core._Producer) -> None:
        self._core = core

    @property
    def topic(self) -> str:
        """The topic name."""
        return self._core.topic

    @property
    def name(self) -> str:
        """The producer name (chosen by the broker unless given)."""
        return self._core.name

    @property
    def last_sequence_id(self) -> int:
        """The highest sequence id the broker has acknowledged (-1 before the first)."""
        return self._core.last_sequence_id

    @property
    def is_connected(self) -> bool:
        """Whether the producer is attached to its broker right now."""
        return self._core.is_connected

    def send(
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
        """Sends one message and waits for the broker's receipt. The open batch goes out at
        once rather than waiting for the batching delay."""
        return self._core.send(
            data, key, properties_dict(properties), _event_ms(event_time),
            deliver_at_ms(deliver_at, deliver_after), ordering_key, sequence_id,
        )

    def send_async(
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
        callback: Callable[[SendFuture], Any] | None = None,
    ) -> SendFuture:
        """Queues one message and returns a future of its :class:`MessageId`. Blocks only when
        the pending queue is full and ``block_if_full`` is set."""
        fut = self._core.send_async(
            data, key, properties_dict(properties), _event_ms(event_time),
            deliver_at_ms(deliver_at, deliver_after), ordering_key, sequence_id,
        )
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    def send_many(
        self,
        payloads: Sequence[bytes | str | memoryview | bytearray],
        *,
        keys: Sequence[str | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_times: Sequence[TimeLike | None] | None = None,
    ) -> list[MessageId]:
        """Sends many messages in one call and waits for every receipt: the fast path.

        ``keys``, ``properties`` and ``event_times`` (datetimes or milliseconds since the epoch),
        when given, hold one entry (or None) per payload.
        """
        return self._core.send_many(payloads, *many_columns(keys, properties, event_times))

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

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception as e:  # the exception already propagating says more; keep it
            _log.warning("%s: closing after %s: %s", self.topic, exc_type.__name__, e)

    def __reduce__(self) -> Any:
        _not_picklable("Producer")

    def __repr__(self) -> str:
        return f"<magnetar.Producer topic={self.topic!r}>"


class Consumer:
    """Receives messages of a subscription. Iterate over it to receive until it is closed or
    its topics are terminated."""

    def __init__(self, core: _core._Consumer, listener: Callable[[Message], object] | None = None,
                 listener_concurrency: int = 1) -> None:
        self._core = core
        self._runner = ListenerRunner(core, listener, listener_concurrency) if listener else None

    @property
    def topics(self) -> list[str]:
        """Topic names covered (partitions listed one by one)."""
        return self._core.topics

    @property
    def subscription(self) -> str:
        """The subscription name."""
        return self._core.subscription

    @property
    def is_connected(self) -> bool:
        """Whether every sub-consumer is attached right now."""
        return self._core.is_connected

    def receive(self, timeout: float | None = None) -> Message:
        """The next message; raises :class:`~magnetar.Timeout` after ``timeout`` seconds
        (``None``: waits for ever)."""
        return self._core.receive(timeout)

    def receive_many(self, max_messages: int = 100, timeout: float | None = 0.1) -> list[Message]:
        """Up to ``max_messages``: what is queued, else what arrives within ``timeout``
        seconds (possibly nothing)."""
        return self._core.receive_many(max_messages, timeout)

    def ack(self, message: Message | MessageId) -> None:
        """Acknowledges one message (grouped and sent within ``ack_group_time``)."""
        self._core.ack(message)

    def ack_many(self, messages: Iterable[Message | MessageId]) -> None:
        """Acknowledges each message individually, in one call (the partner of
        :meth:`receive_many`); grouped and sent like :meth:`ack`."""
        self._core.ack_many(messages)

    def ack_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledges every message up to this one (not on Shared subscriptions)."""
        self._core.ack_cumulative(message)

    def ack_with_receipt(self, message: Message | MessageId, *, cumulative: bool = False) -> None:
        """Acknowledges and waits until the broker confirms it (within the operation timeout;
        :class:`~magnetar.Timeout` otherwise). Part of a batch is confirmed once the whole
        batch is acknowledged, unless ``batch_index_ack`` is on."""
        self._core.ack_with_receipt(message, cumulative)

    def nack(self, message: Message | MessageId) -> None:
        """Asks for redelivery after ``nack_redelivery_delay``."""
        self._core.nack(message)

    def redeliver_unacknowledged(self) -> None:
        """Redelivers every unacknowledged message now."""
        self._core.redeliver_unacknowledged()

    def seek(self, target: MessageId | TimeLike) -> None:
        """Moves the subscription to a message id or to a publish time."""
        self._core.seek(target if isinstance(target, MessageId) else time_ms(target, "seek target"))

    def get_last_message_id(self) -> MessageId:
        """The id of the last message of the topic (the highest over partitions)."""
        return max(self._core.last_message_ids())

    def stats(self) -> list[dict[str, Any]]:
        """The broker's statistics for this consumer, one dict per covered topic (rates,
        permits, unacked count, backlog), with the client's queued and corrupt counts."""
        return self._core.stats()

    def pause(self) -> None:
        """Stops asking the broker for more messages; queued ones stay receivable."""
        self._core.pause()

    def resume(self) -> None:
        """Undoes :meth:`pause`."""
        self._core.resume()

    def unsubscribe(self) -> None:
        """Deletes the subscription and closes the consumer."""
        self._core.unsubscribe()

    def close(self) -> None:
        """Stops the listener (waiting for running handlers), sends pending acknowledgements
        and detaches."""
        if self._runner is not None:
            self._runner.stop()
        self._core.close()

    def __iter__(self) -> Iterator[Message]:
        while True:
            try:
                yield self._core.receive(None)
            except (AlreadyClosed, TopicTerminated):
                return

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        _not_picklable("Consumer")

    def __repr__(self) -> str:
        return f"<magnetar.Consumer subscription={self.subscription!r} topics={self.topics!r}>"


class Reader:
    """Reads a topic from a position without a durable subscription."""

    def __init__(self, core: _core._Consumer) -> None:
        self._core = core

    @property
    def topics(self) -> list[str]:
        return self._core.topics

    def read_next(self, timeout: float | None = None) -> Message:
        """The next message; raises :class:`~magnetar.Timeout` after ``timeout`` seconds."""
        return self._core.receive(timeout)

    def has_message_available(self) -> bool:
        """Whether there is a message past the last one read."""
        return self._core.has_message_available()

    def read_many(self, max_messages: int = 100, timeout: float | None = 0.1) -> list[Message]:
        """Up to ``max_messages``: what is queued, else what arrives within ``timeout``."""
        return self._core.receive_many(max_messages, timeout)

    def get_last_message_id(self) -> MessageId:
        """The id of the last message of the topic (the highest over partitions)."""
        return max(self._core.last_message_ids())

    def seek(self, target: MessageId | TimeLike) -> None:
        """Moves the reader to a message id or to a publish time."""
        self._core.seek(target if isinstance(target, MessageId) else time_ms(target, "seek target"))

    def close(self) -> None:
        self._core.close()

    def __iter__(self) -> Iterator[Message]:
        while True:
            try:
                yield self._core.receive(None)
            except (AlreadyClosed, TopicTerminated):
                return

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        _not_picklable("Reader")


class Client:
    """A connection to a Pulsar cluster, shared by its producers, consumers and readers.

    ``service_url`` is ``pulsar://host:port``, or several hosts
    (``pulsar://h1:6650,h2:6650``) tried in turn; ``pulsar+ssl://host:6651`` connects with TLS,
    and lookups then follow the brokers' TLS URLs. Options are validated at once
    (:class:`~magnetar.InvalidConfiguration`); nothing connects until a producer, consumer or
    reader is created.

    Durations, here and in every method (``create_producer``, ``subscribe``, ``receive``,
    ``SendFuture.result``, ``deliver_after``), are seconds (int or float) or a
    ``datetime.timedelta``. ``None``, ``float("inf")`` and anything over 2**31 seconds mean no
    limit: a timeout waits for ever, ``send_timeout`` and ``ack_timeout`` are off,
    ``keepalive_interval`` sends no pings, ``partitions_update_interval`` and
    ``discovery_period`` never look again. Delays that would then never end refuse it with
    :class:`~magnetar.InvalidConfiguration`: ``batch_max_delay`` (use ``batching=False``),
    ``ack_group_time`` (use 0), ``nack_redelivery_delay``, ``initial_backoff``, ``max_backoff``
    and ``deliver_after``. A negative or NaN duration is always
    :class:`~magnetar.InvalidConfiguration`.

    TLS options (named as in the official ``pulsar-client``; used with ``pulsar+ssl://``):

    Args:
        tls_trust_certs_file_path: PEM file of the CA certificates that sign the brokers'
            certificates. Default: the Mozilla root programme (``webpki-roots``). A missing or
            unreadable file raises :class:`~magnetar.InvalidConfiguration` here.
        tls_allow_insecure_connection: accept any broker certificate. The connection is
            encrypted but the broker is not authenticated; for tests only.
        tls_validate_hostname: require the broker's certificate to name the host of the URL
            (a DNS or IP subject alternative name). On by default (the official client has it
            off, so any certificate from a trusted CA passes for any broker); ``False`` checks
            the chain only, for brokers reached by a name their certificates do not list.
        tls_certificate_file_path: PEM client certificate (chain) presented to brokers that
            ask for one (mutual TLS); needs ``tls_private_key_file_path``.
        tls_private_key_file_path: PEM private key (PKCS#8, PKCS#1 or SEC1) of
            ``tls_certificate_file_path``.

    A broker whose certificate is refused makes ``create_producer``/``subscribe`` raise
    :class:`~magnetar.ConnectError` with the reason (for example ``UnknownIssuer``, or
    ``certificate not valid for name``).
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

    def create_producer(
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
    ) -> Producer:
        """Creates a producer; the topic is looked up and the producer attached before this
        returns, so a missing topic or a refused permission raises here."""
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
        return Producer(self._core.create_producer(topic, opts, router))

    def subscribe(
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
        listener: Callable[[Message], object] | None = None,
        listener_concurrency: int = 1,
    ) -> Consumer:
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
        if listener is not None and not callable(listener):
            raise InvalidConfiguration("listener must be a callable taking a Message")
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
        core = self._core.subscribe(topic if isinstance(topic, str) else list(topic), subscription, opts, pattern)
        return Consumer(core, listener, listener_concurrency)

    def create_reader(
        self,
        topic: str,
        start: MessageId | TimeLike = MessageId.earliest,
        *,
        start_inclusive: bool = False,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        read_compacted: bool = False,
    ) -> Reader:
        """A reader of ``topic`` starting at a message id (``MessageId.earliest`` /
        ``MessageId.latest`` / an id) or at a publish time."""
        start_id, at_time = reader_start(start)
        opts = consumer_options(
            # As the Java reader does: the broker honours the start id with "latest", and
            # "earliest" only for the earliest sentinel.
            "exclusive", "earliest" if start_id == MessageId.earliest else "latest", consumer_name=reader_name, receiver_queue_size=receiver_queue_size,
            durable=False, start_message_id=start_id, start_inclusive=start_inclusive,
            read_compacted=read_compacted,
        )
        core = self._core.subscribe(topic, f"reader-{os.urandom(5).hex()}", opts, False)
        if at_time is not None:
            core.seek(at_time)
        return Reader(core)

    def get_partition_count(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0 for a non-partitioned topic)."""
        return self._core.partition_count(topic)

    def close(self) -> None:
        """Closes every producer, consumer and reader, then the connections. Does not raise
        for producers whose pending messages failed: each is logged as a warning on the
        ``magnetar`` logger (close a producer itself to have it raise)."""
        self._core.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        _not_picklable("Client")

    def __repr__(self) -> str:
        return f"<magnetar.Client {self.service_url!r}>"
