"""The intercepted twin of each producer and consumer class: the same handle, calling its
interceptors (:mod:`magnetar._interceptors`) around sends, receives and acknowledgements. A
handle is made as its twin only when interceptors are given, so the plain classes carry no
interceptor code at all (as :mod:`magnetar._traced` does for tracing)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from ._async import AsyncConsumer, AsyncProducer
from ._client import Consumer, Producer
from ._core import Message, MessageId, SendFuture
from ._interceptors import guarded, twin
from ._listener import ListenerRunner

__all__: list[str] = []


def _before_send(handle: Any, data: Any, fields: dict[str, Any]) -> Any:
    for i in handle._interceptors:
        out = guarded(i.before_send, handle, data, fields)
        data = data if out is None else out
    return data


def _after_send(handle: Any, data: Any, fields: dict[str, Any], msg_id: Any, error: BaseException | None) -> None:
    for i in handle._interceptors:
        guarded(i.on_send_acknowledgement, handle, data, fields, msg_id, error)


def _on_done(handle: Any, data: Any, fields: dict[str, Any]) -> Callable[[SendFuture], None]:
    def done(fut: SendFuture) -> None:
        error = fut.exception()
        _after_send(handle, data, fields, None if error else fut.result(), error)
    return done


def _rows(payloads: Sequence[Any], columns: dict[str, Any]) -> Iterable[tuple[Any, dict[str, Any]]]:
    """``send_many``'s columns as one message's fields per payload."""
    names = {"keys": "key", "properties": "properties", "event_times": "event_time"}
    for n, data in enumerate(payloads):
        fields = {names[c]: v[n] for c, v in columns.items() if c in names and v is not None and v[n] is not None}
        if columns.get("txn") is not None:
            fields["txn"] = columns["txn"]
        yield data, fields


@twin(Producer)
class _InterceptedProducer(Producer):
    __slots__ = ("_interceptors",)

    def send(self, data: Any, **fields: Any) -> MessageId:
        data = _before_send(self, data, fields)
        try:
            msg_id = self._core.send(data, fields or None)
        except BaseException as e:
            _after_send(self, data, fields, None, e)
            raise
        _after_send(self, data, fields, msg_id, None)
        return msg_id

    def send_async(self, data: Any, callback: Callable[[SendFuture], Any] | None = None,
                   **fields: Any) -> SendFuture:
        data = _before_send(self, data, fields)
        fut: SendFuture = self._core.send_async(data, fields or None)
        fut.add_done_callback(_on_done(self, data, fields))
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    def send_many(self, payloads: Sequence[Any], **columns: Any) -> list[MessageId]:
        # One message at a time, so each is intercepted; the receipts are awaited together.
        futures = [self.send_async(data, **fields) for data, fields in _rows(payloads, columns)]
        self._core.flush()
        return [f.result() for f in futures]


@twin(AsyncProducer)
class _InterceptedAsyncProducer(AsyncProducer):
    __slots__ = ("_interceptors",)

    async def send(self, data: Any, **fields: Any) -> MessageId:
        data = _before_send(self, data, fields)
        try:
            msg_id = await super().send(data, **fields)
        except BaseException as e:
            _after_send(self, data, fields, None, e)
            raise
        _after_send(self, data, fields, msg_id, None)
        return msg_id

    async def send_many(self, payloads: Sequence[Any], **columns: Any) -> list[MessageId]:
        import asyncio

        return list(await asyncio.gather(*(self.send(data, **fields) for data, fields in _rows(payloads, columns))))


def _consumed(handle: Any, msg: Message) -> Message:
    for i in handle._interceptors:
        out = guarded(i.before_consume, handle, msg)
        msg = msg if out is None else out
    return msg


def _acked(handle: Any, hook: str, message: Any, error: BaseException | None) -> None:
    msg_id = message.message_id if isinstance(message, Message) else message
    for i in handle._interceptors:
        guarded(getattr(i, hook), handle, msg_id, error)


class _Acks:
    """The acknowledgements of an intercepted consumer, blocking or asyncio alike."""

    __slots__ = ()
    _core: Any
    _done: Any

    def _reported(self, hook: str, call: Callable[..., Any], message: Any, *args: Any) -> Any:
        """``call(message, *args)``, then ``hook`` told how it went."""
        try:
            call(message, *args)
        except BaseException as e:
            _acked(self, hook, message, e)
            raise
        _acked(self, hook, message, None)
        return self._done

    def ack(self, message: Message | MessageId, txn: Any = None) -> Any:
        return self._reported("on_acknowledge", self._core.ack, message, txn)

    def ack_many(self, messages: Iterable[Message | MessageId]) -> Any:
        messages = list(messages)
        try:
            self._core.ack_many(messages)
        except BaseException as e:
            for m in messages:
                _acked(self, "on_acknowledge", m, e)
            raise
        for m in messages:
            _acked(self, "on_acknowledge", m, None)
        return self._done

    def ack_cumulative(self, message: Message | MessageId, txn: Any = None) -> Any:
        return self._reported("on_acknowledge_cumulative", self._core.ack_cumulative, message, txn)


@twin(Consumer)
class _InterceptedConsumer(_Acks, Consumer):
    __slots__ = ("_interceptors",)

    def __init__(self, core: Any, listener: Callable[[Message], object] | None = None,
                 listener_concurrency: int = 1) -> None:
        super().__init__(core)
        # The listener takes its messages through this handle, so they are intercepted too.
        self._runner = ListenerRunner(self, listener, listener_concurrency) if listener else None

    def receive(self, timeout: float | None = None) -> Message:
        return _consumed(self, self._core.receive(timeout))

    def receive_many(self, max_messages: int = 100, timeout: float | None = 0.1,
                     max_bytes: int | None = None) -> list[Message]:
        return [_consumed(self, m) for m in self._core.receive_many(max_messages, timeout, max_bytes)]

    def ack_with_receipt(self, message: Message | MessageId, *, cumulative: bool = False) -> None:
        hook = "on_acknowledge_cumulative" if cumulative else "on_acknowledge"
        self._reported(hook, self._core.ack_with_receipt, message, cumulative)


@twin(AsyncConsumer)
class _InterceptedAsyncConsumer(_Acks, AsyncConsumer):
    __slots__ = ("_interceptors",)

    async def receive(self, timeout: float | None = None) -> Message:
        return _consumed(self, await super().receive(timeout))

    async def receive_many(self, max_messages: int = 100, timeout: float | None = 0.1,
                           max_bytes: int | None = None) -> list[Message]:
        return [_consumed(self, m) for m in await super().receive_many(max_messages, timeout, max_bytes)]

    async def ack_with_receipt(self, message: Message | MessageId, *, cumulative: bool = False) -> None:
        hook = "on_acknowledge_cumulative" if cumulative else "on_acknowledge"
        try:
            await super().ack_with_receipt(message, cumulative=cumulative)
        except BaseException as e:
            _acked(self, hook, message, e)
            raise
        _acked(self, hook, message, None)
