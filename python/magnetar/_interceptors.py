"""Interceptors and the consumer event listener: the application's hooks into what producers
and consumers do, as the Java client's ``ProducerInterceptor``, ``ConsumerInterceptor`` and
``ConsumerEventListener``.

Subclass the protocol class and override what you need; every method has a no-op default. A
hook that raises is logged on the ``magnetar`` logger and never breaks the send, receive or
acknowledgement it watches. A producer or consumer made without interceptors runs none of this
code: the intercepted forms (:mod:`magnetar._intercepted`) are chosen once, at creation.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ._core import MessageId
from .exceptions import InvalidConfiguration

__all__ = ["ConsumerEventListener", "ConsumerInterceptor", "ConsumerHooks", "ProducerInterceptor", "make", "twin"]

_T = TypeVar("_T", bound=type)

#: The intercepted twin of each handle class (filled in by :mod:`magnetar._intercepted`).
INTERCEPTED: dict[type, type] = {}

_log = logging.getLogger("magnetar")


class ProducerInterceptor:
    """Sees every message a producer sends, and its outcome (Java's ``ProducerInterceptor``).

    Called for ``send``, ``send_async`` and ``send_many`` of the blocking and asyncio
    producers; several interceptors run in the order given, each seeing what the one before
    returned.
    """

    def before_send(self, producer: Any, data: Any, fields: dict[str, Any]) -> Any:
        """Called before the message is queued, on the sending thread: returns the payload to
        send (``data`` itself to keep it). ``fields`` holds the message's keyword arguments
        (``key``, ``properties``...) and may be changed in place."""
        return data

    def on_send_acknowledgement(self, producer: Any, data: Any, fields: Mapping[str, Any],
                                message_id: Any, error: BaseException | None) -> None:
        """Called once the broker acknowledged the message (``message_id``) or its send failed
        (``error``, with ``message_id`` None); ``data`` and ``fields`` are what was sent."""


class ConsumerInterceptor:
    """Sees every message a consumer hands out and what becomes of it (Java's
    ``ConsumerInterceptor``)."""

    def before_consume(self, consumer: Any, message: Any) -> Any:
        """Called before a message is returned by ``receive``/``receive_many`` or given to the
        listener: returns the message to hand out (``message`` itself to keep it)."""
        return message

    def on_acknowledge(self, consumer: Any, message_id: Any, error: BaseException | None) -> None:
        """Called for each individual acknowledgement (``ack``, ``ack_many``,
        ``ack_with_receipt``), with the error when it was refused."""

    def on_acknowledge_cumulative(self, consumer: Any, message_id: Any, error: BaseException | None) -> None:
        """Called for each cumulative acknowledgement."""

    def on_negative_acks_send(self, consumer: Any, message_ids: Sequence[Any]) -> None:
        """Called when negatively acknowledged messages are asked for again, once their
        redelivery delay ended (not when ``nack`` is called)."""

    def on_ack_timeout_send(self, consumer: Any, message_ids: Sequence[Any]) -> None:
        """Called when messages not acknowledged within ``ack_timeout`` are asked for again."""


class ConsumerEventListener:
    """Told which consumer of a Failover subscription the broker dispatches to (Java's
    ``ConsumerEventListener``). ``partition`` is the partition index, -1 for a topic that is
    not partitioned. Called on the client's dispatch thread."""

    def became_active(self, consumer: Any, partition: int) -> None:
        """This consumer now receives the messages of ``partition``."""

    def became_inactive(self, consumer: Any, partition: int) -> None:
        """Another consumer now receives the messages of ``partition``."""


def check(items: Any, kind: type, option: str) -> tuple[Any, ...]:
    """The interceptors of an option as a tuple (empty when None), or a clear error."""
    if items is None:
        return ()
    out = (items,) if isinstance(items, kind) or not isinstance(items, Sequence) else tuple(items)
    for i in out:
        if not isinstance(i, kind):
            raise InvalidConfiguration(f"{option} must be a list of magnetar.{kind.__name__} objects, not {i!r}")
    return out


def guarded(hook: Any, *args: Any) -> Any:
    """Calls one hook; an exception is logged and gives None."""
    try:
        return hook(*args)
    except Exception:
        _log.exception("interceptor %s raised; ignored", getattr(hook, "__qualname__", hook))
        return None


def twin(base: type) -> Callable[[_T], _T]:
    """Registers the class it decorates as the intercepted form of ``base``, under its name."""
    def register(cls: _T) -> _T:
        cls.__name__, cls.__qualname__, cls.__doc__ = base.__name__, base.__qualname__, base.__doc__
        INTERCEPTED[base] = cls
        return cls
    return register


def make(base: type, interceptors: tuple[Any, ...], core: Any, *args: Any) -> Any:
    """A ``base`` handle of ``core``: its intercepted twin when there are interceptors."""
    if not interceptors:
        return base(core, *args)
    cls: Any = INTERCEPTED[base]
    handle = cls.__new__(cls)
    handle._interceptors = interceptors
    cls.__init__(handle, core, *args)
    return handle


_PARTITION = re.compile(r"-partition-(\d+)$")


class ConsumerHooks:
    """The engine's consumer events (``event_hook``) turned into interceptor and event
    listener calls. Events that arrive before the handle exists (the broker names the active
    consumer as it subscribes) wait for :meth:`bind`."""

    def __init__(self, interceptors: tuple[Any, ...], listener: ConsumerEventListener | None) -> None:
        self._interceptors, self._listener = interceptors, listener
        self._lock = threading.RLock()
        self._handle: Callable[[], Any] | None = None
        self._early: list[tuple[str, str | None, list[MessageId] | None]] = []

    def bind(self, handle: Any) -> Any:
        """Delivers the events held so far to ``handle``, and every later one."""
        with self._lock:
            # A weak reference: the engine holds this hook, and the handle holds the engine.
            self._handle = weakref.ref(handle)
            early, self._early = self._early, []
            for event in early:
                self._deliver(handle, *event)
        return handle

    def __call__(self, kind: str, topic: str | None, ids: list[MessageId] | None) -> None:
        with self._lock:
            if self._handle is None:
                self._early.append((kind, topic, ids))
                return
            handle = self._handle()
            if handle is not None:
                self._deliver(handle, kind, topic, ids)

    def _deliver(self, handle: Any, kind: str, topic: str | None, ids: list[MessageId] | None) -> None:
        if kind in ("active", "inactive"):
            if self._listener is not None:
                m = _PARTITION.search(topic or "")
                partition = int(m.group(1)) if m else -1
                hook = self._listener.became_active if kind == "active" else self._listener.became_inactive
                guarded(hook, handle, partition)
            return
        name = "on_negative_acks_send" if kind == "nacks_sent" else "on_ack_timeout_send"
        for i in self._interceptors:
            guarded(getattr(i, name), handle, list(ids or ()))
