"""The traced twin of each handle class: the same handle, with spans around its sends and a
span for each message it takes. :mod:`magnetar.telemetry` switches live handles to their twin
when tracing is turned on (and back when it is turned off), so the plain classes carry no
tracing at all and cost nothing while it is off.

Each twin overrides only the calls that make a span: a send, or a receive. A twin keeps its plain class's name (``repr``, error messages) and adds no slots, so a
handle can change class in place.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from . import telemetry as _tm
from ._async import AsyncConsumer, AsyncProducer, AsyncReader
from ._client import Consumer, Producer, Reader
from ._core import Message, MessageId, SendFuture

__all__ = ["twin"]

_T = TypeVar("_T", bound=type)


def twin(base: type) -> Callable[[_T], _T]:
    """Registers the class it decorates as the traced form of ``base``, under ``base``'s name."""
    def register(cls: _T) -> _T:
        cls.__name__, cls.__qualname__, cls.__doc__ = base.__name__, base.__qualname__, base.__doc__
        _tm.TRACED[base] = cls
        return cls
    return register


@twin(Producer)
class _TracedProducer(Producer):
    __slots__ = ()

    def send(self, data: Any, **fields: Any) -> MessageId:
        msg_id: MessageId = _tm.send(self._core, data, fields)
        return msg_id

    def send_async(self, data: Any, callback: Callable[[SendFuture], Any] | None = None,
                   **fields: Any) -> SendFuture:
        fut: SendFuture = _tm.send_async(self._core, data, fields)
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    def send_many(self, payloads: Sequence[Any], **columns: Any) -> list[MessageId]:
        ids: list[MessageId] = _tm.send_many(self._core, payloads, columns)
        return ids


@twin(Consumer)
class _TracedConsumer(Consumer):
    __slots__ = ()

    def receive(self, timeout: float | None = None) -> Message:
        msg = super().receive(timeout)
        _tm.received(msg, self._core.subscription)
        return msg

    def receive_many(self, max_messages: int = 100, timeout: float | None = 0.1,
                     max_bytes: int | None = None) -> list[Message]:
        msgs = super().receive_many(max_messages, timeout, max_bytes)
        _tm.received_many(msgs, self._core.subscription)
        return msgs


@twin(Reader)
class _TracedReader(Reader):
    __slots__ = ()

    def read_next(self, timeout: float | None = None) -> Message:
        msg = super().read_next(timeout)
        _tm.received(msg, None)
        return msg

    def read_many(self, max_messages: int = 100, timeout: float | None = 0.1) -> list[Message]:
        msgs = super().read_many(max_messages, timeout)
        _tm.received_many(msgs, None)
        return msgs


@twin(AsyncProducer)
class _TracedAsyncProducer(AsyncProducer):
    __slots__ = ()

    async def send(self, data: Any, **fields: Any) -> MessageId:
        msg_id: MessageId = await _tm.send_awaited(self._core, data, fields)
        return msg_id

    async def send_many(self, payloads: Sequence[Any], **columns: Any) -> list[MessageId]:
        ids: list[MessageId] = await _tm.send_many_awaited(self._core, payloads, columns)
        return ids


@twin(AsyncConsumer)
class _TracedAsyncConsumer(AsyncConsumer):
    __slots__ = ()

    async def receive(self, timeout: float | None = None) -> Message:
        msg = await super().receive(timeout)
        _tm.received(msg, self._core.subscription)
        return msg

    async def receive_many(self, max_messages: int = 100, timeout: float | None = 0.1,
                           max_bytes: int | None = None) -> list[Message]:
        msgs = await super().receive_many(max_messages, timeout, max_bytes)
        _tm.received_many(msgs, self._core.subscription)
        return msgs


@twin(AsyncReader)
class _TracedAsyncReader(AsyncReader):
    __slots__ = ()

    async def read_next(self, timeout: float | None = None) -> Message:
        msg = await super().read_next(timeout)
        _tm.received(msg, None)
        return msg

    async def read_many(self, max_messages: int = 100, timeout: float | None = 0.1) -> list[Message]:
        msgs = await super().read_many(max_messages, timeout)
        _tm.received_many(msgs, None)
        return msgs
