"""The half of each handle that never waits, written once for the blocking and asyncio twins:
properties, acknowledgements, ``repr``, the pickling refusal, and building the engine's
arguments. :mod:`magnetar._client` and :mod:`magnetar._async` add only the waiting calls.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, Generic, Iterable, NoReturn, TypeVar

from . import _build, _core, telemetry
from ._columns import ArrowReads
from ._core import Message, MessageId
from ._failover import AutoClusterFailover
from ._options import ClientOptions, ClusterOptions, option_docs
from ._state import StateWatcher
from ._transaction import TransactionHandle
from .exceptions import InvalidConfiguration

if TYPE_CHECKING:
    from typing import Unpack

__all__ = ["COMPLETED", "ClientHandle", "ConsumerHandle", "ProducerHandle", "ReaderHandle", "documented"]

_log = logging.getLogger("magnetar")

F = TypeVar("F", bound=Callable[..., Any])
Done = TypeVar("Done", None, Awaitable[None])


def documented(*declarations: type) -> Callable[[F], F]:
    """Appends the declared options' documentation to a method's docstring."""
    def add(method: F) -> F:
        method.__doc__ = f"{method.__doc__ or ''}\n\n{option_docs(*declarations)}"
        return method

    return add


class _Handle:
    """What every handle shares: the engine object, no pickling, a ``repr``."""

    __slots__ = ("_core", "__weakref__")
    _core: Any

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"magnetar.{type(self).__name__} cannot be pickled: it owns network connections. Pickle "
            "a magnetar.ClientConfig (or the service URL) and create the object in the process that uses it."
        )

    def _describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<magnetar.{type(self).__name__} {self._describe()}>"


class ProducerHandle(_Handle):
    """Publishes messages to one topic (all partitions of a partitioned topic)."""

    __slots__ = ()

    def __init__(self, core: _core._Producer) -> None:
        self._core = core
        telemetry.register(self)

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

    def stats(self) -> dict[str, Any]:
        """Client-side statistics, read from the engine's counters without a round trip:
        ``pending`` (admitted, not yet settled), ``sent`` and ``sent_bytes`` (acknowledged by the
        broker), ``failed``, and ``latency_ms`` (from the write to the broker's receipt, per
        message: ``count``, ``mean``, ``p50``, ``p90``, ``p95``, ``p99``, ``p999``, ``max``,
        ``sum`` and ``buckets``, pairs of a bucket's upper bound and its count; the percentiles
        are bucket bounds, at most 19% above the true value)."""
        return _core._producer_stats(self._core)

    def _describe(self) -> str:
        return f"topic={self.topic!r}"

    def _closing_failed(self, exc_type: type[BaseException], error: Exception) -> None:
        # Used by ``__exit__`` when an exception is already propagating: it says more.
        _log.warning("%s: closing after %s: %s", self.topic, exc_type.__name__, error)


class Completed:
    """An awaitable that is already done: what the asyncio consumer's acks return, so that both
    ``consumer.ack(m)`` and ``await consumer.ack(m)`` work."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator that finishes at once

    def __repr__(self) -> str:
        return "<completed>"


COMPLETED = Completed()


class _Receiving(_Handle):
    """What consumers and readers share."""

    __slots__ = ("_arrow",)
    _arrow: ArrowReads

    def __init__(self, core: _core._Consumer) -> None:
        self._core = core
        self._arrow = ArrowReads(None)
        telemetry.register(self)

    def _made_by(self, client: _core._Client) -> None:
        """Tells the handle its client, which fetches the topic's schema for Arrow reads."""
        self._arrow = ArrowReads(client)

    @property
    def topics(self) -> list[str]:
        """Topic names covered (partitions listed one by one)."""
        return self._core.topics


class ConsumerHandle(_Receiving, Generic[Done]):
    """Receives messages of a subscription."""

    __slots__ = ()
    _done: Done
    """What the acknowledgements return: None, or an awaitable that is already done."""

    @property
    def subscription(self) -> str:
        """The subscription name."""
        return self._core.subscription

    @property
    def is_connected(self) -> bool:
        """Whether every sub-consumer is attached right now."""
        return self._core.is_connected

    def _describe(self) -> str:
        return f"subscription={self.subscription!r} topics={self.topics!r}"

    def ack(self, message: Message | MessageId, txn: TransactionHandle | None = None) -> Done:
        """Acknowledges one message (grouped and sent within ``ack_group_time``). Never waits;
        on the asyncio consumer it returns an already-completed awaitable, so ``await
        consumer.ack(m)`` works too.

        With ``txn`` the acknowledgement is part of the transaction: sent at once, it takes
        effect when the transaction commits, and the message is delivered again if it aborts.
        The transaction's commit waits for the broker to confirm it."""
        self._core.ack(message, txn)
        return self._done

    def ack_many(self, messages: Iterable[Message | MessageId]) -> Done:
        """Acknowledges each message individually, in one call (the partner of
        ``receive_many``); grouped and sent like :meth:`ack`."""
        self._core.ack_many(messages)
        return self._done

    def ack_cumulative(self, message: Message | MessageId, txn: TransactionHandle | None = None) -> Done:
        """Acknowledges every message up to this one (not on Shared subscriptions); with
        ``txn``, as part of the transaction (see :meth:`ack`)."""
        self._core.ack_cumulative(message, txn)
        return self._done

    def ack_arrow(self, data: Any) -> Done:
        """Acknowledges every row of ``data``, a record batch (or table) of ``receive_arrow``:
        each message of its message id column (``message_id`` or ``__messageId``)
        individually, a batched message by its own index, grouped and sent like :meth:`ack`
        and routed to its partition (by the ``__topic``, or ``topic`` and ``partition``,
        columns when the data has them). Never waits."""
        self._core.ack_arrow(data)
        return self._done

    def nack(self, message: Message | MessageId) -> Done:
        """Asks for redelivery after ``nack_redelivery_delay``."""
        self._core.nack(message)
        return self._done

    def redeliver_unacknowledged(self) -> None:
        """Redelivers every unacknowledged message now."""
        self._core.redeliver_unacknowledged()

    def pause(self) -> None:
        """Stops asking the broker for more messages; queued ones stay receivable."""
        self._core.pause()

    def resume(self) -> None:
        """Undoes :meth:`pause`."""
        self._core.resume()


class ReaderHandle(_Receiving):
    """Reads a topic from a position without a durable subscription."""

    __slots__ = ()

    def _describe(self) -> str:
        return f"topics={self.topics!r}"


class ClientHandle(_Handle):
    """A connection to a Pulsar cluster, shared by its producers, consumers and readers.

    ``service_url`` is ``pulsar://host:port``, or several hosts
    (``pulsar://h1:6650,h2:6650``) tried in turn; ``pulsar+ssl://host:6651`` connects with TLS,
    and lookups then follow the brokers' TLS URLs. ``http://host:8080`` or ``https://host:8443``
    (a broker's web service) makes lookups go to the admin REST API. An
    :class:`~magnetar.AutoClusterFailover` in its place moves the client between clusters.
    Options are validated at once (:class:`~magnetar.InvalidConfiguration`); nothing connects
    until a producer, consumer or reader is created. A broker whose certificate is refused makes ``create_producer``/
    ``subscribe`` raise :class:`~magnetar.ConnectError` with the reason (for example
    ``UnknownIssuer``, or ``certificate not valid for name``).

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
    """

    def __init__(self, service_url: str | AutoClusterFailover, **options: Unpack[ClientOptions]) -> None:
        engine, on_state_change = _build.client(options)
        self._options = {k: v for k, v in options.items() if k != "on_state_change"}
        if isinstance(service_url, AutoClusterFailover):
            self._urls = service_url.urls
            self._core = _core._Client(service_url.primary, engine, service_url._engine())
        else:
            self._urls = (service_url,)
            self._core = _core._Client(service_url, engine)
        self._watcher = StateWatcher(self._core, on_state_change) if on_state_change else None
        telemetry.register(self)

    @property
    def service_url(self) -> str:
        """The service URL in use: the one given, or with :class:`~magnetar.AutoClusterFailover`
        the URL of the cluster the client is on now."""
        return self._urls[self._core.current_cluster]

    def switch_service(self, service_url: str, **options: Unpack[ClusterOptions]) -> None:
        """Moves the client to the cluster at ``service_url``, with the credentials
        (``authentication``) and the trust file (``tls_trust_certs_file_path``) given for it;
        what is not given stays as the client was made (``authentication=None`` means none).

        Every connection closes, and producers, consumers and readers reconnect on the new
        cluster, where producers resend their pending messages in order. Nothing is dialled
        here, so a switch alone never connects. A bad URL or trust file raises
        :class:`~magnetar.InvalidConfiguration` and leaves the client where it was; a client
        made with :class:`~magnetar.AutoClusterFailover` picks its cluster itself and refuses
        this. ``service_url`` then names the new cluster.
        """
        if not isinstance(service_url, str):
            raise InvalidConfiguration(f"service_url must be a str, not {service_url!r}")
        self._core.switch_service(service_url, _build.cluster(self._options, options))
        self._urls = (service_url,)

    @property
    def state(self) -> str:
        """``"idle"`` (nothing created yet), ``"connecting"`` (some producer or consumer is
        (re)connecting), ``"connected"`` or ``"closed"``."""
        return self._core.state

    def stats(self) -> dict[str, Any]:
        """Connection and lookup statistics: ``connections_opened``, ``connections_closed``,
        ``connections_failed``, ``connections_open``, ``lookups``, ``lookups_failed``,
        ``lookup_duration_ms`` (as ``Producer.stats()['latency_ms']``), ``metadata_lookups`` and
        ``metadata_lookups_failed``."""
        return _core._client_stats(self._core)

    def _describe(self) -> str:
        return repr(self.service_url)


ClientHandle.__doc__ = f"{ClientHandle.__doc__}\n{option_docs(ClientOptions)}"
