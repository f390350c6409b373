"""What the blocking and asyncio handles of the compatibility API share: the accessors that
never wait, and the reading of a seek target (as :mod:`magnetar._handles` does for the native
twins). The classes that wait (``send``, ``receive``, ``seek``...) stay in each world's module."""

from __future__ import annotations

from typing import Any

from .._core import MessageId as _NativeId
from ._pulsar import MessageId

__all__ = ["ConsumerAccessors", "ProducerAccessors", "ReceivingAccessors", "seek_target"]


class ProducerAccessors:
    """``topic()``, ``producer_name()``, ``last_sequence_id()``, ``is_connected()`` of a
    producer whose native handle is ``_p``."""

    __slots__ = ()
    _p: Any

    def topic(self) -> str:
        return self._p.topic  # type: ignore[no-any-return]

    def producer_name(self) -> str:
        return self._p.name  # type: ignore[no-any-return]

    def last_sequence_id(self) -> int:
        return self._p.last_sequence_id  # type: ignore[no-any-return]

    def is_connected(self) -> bool:
        return self._p.is_connected  # type: ignore[no-any-return]


class ReceivingAccessors:
    """What consumers and readers (native handle ``_c``) share: ``topic()``, ``is_connected()``
    and what a seek leaves behind."""

    __slots__ = ()
    _c: Any
    _inclusive: bool

    def topic(self) -> str:
        topics = self._c.topics
        return topics[0] if len(topics) == 1 else ",".join(topics)  # type: ignore[no-any-return]

    def is_connected(self) -> bool:
        return not self._c._core.closed and self._c._core.is_connected  # type: ignore[no-any-return]

    def _floor_after_seek(self, target: Any) -> _NativeId | None:
        # After a seek to a message id, messages up to it are skipped unless the consumer or
        # reader includes its start (start_message_id_inclusive), as in the official client.
        special = isinstance(target, int) or target in (_NativeId.earliest, _NativeId.latest)
        return None if self._inclusive or special else target


class ConsumerAccessors(ReceivingAccessors):
    """``subscription_name()`` and ``consumer_name()`` (``_name``) of a consumer."""

    __slots__ = ()
    _name: str

    def subscription_name(self) -> str:
        return self._c.subscription  # type: ignore[no-any-return]

    def consumer_name(self) -> str:
        return self._name


def seek_target(messageid: Any) -> Any:
    """What the engine's seek takes for the official ``seek`` argument: a message id (official or
    native) or a publish time in milliseconds."""
    if isinstance(messageid, MessageId):
        return messageid._id
    if isinstance(messageid, (_NativeId, int)) and not isinstance(messageid, bool):
        return messageid
    raise ValueError(f"invalid seek_arg type {type(messageid)}")
