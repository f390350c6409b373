"""The traced twins of the compat endpoints (see :mod:`magnetar._traced`): their per-message
calls go through the native handles, whose own twins trace them, instead of the engine's compat
fast paths, which trace nothing."""

from __future__ import annotations

from typing import Any, Callable

from .._traced import twin
from ._endpoints import Consumer, Producer, Reader
from ._message import Message
from ._pulsar import Result

__all__: list[str] = []


@twin(Producer)
class _TracedProducer(Producer):
    __slots__ = ()

    def _send_async(self, content: Any, callback: Callable[[Result, Any], Any] | None,
                    fields: dict[str, Any] | None) -> None:
        self._native_send_async(content, callback, fields)


@twin(Consumer)
class _TracedConsumer(Consumer):
    __slots__ = ()

    def receive(self, timeout_millis: int | None = None) -> Message:
        return self._native_receive(timeout_millis)

    def _receive(self, timeout_millis: int | None) -> Message:
        return self._native_receive(timeout_millis)


@twin(Reader)
class _TracedReader(Reader):
    __slots__ = ()

    def _receive(self, timeout_millis: int | None) -> Message:
        return self._native_receive(timeout_millis)
