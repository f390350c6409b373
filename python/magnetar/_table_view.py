"""Table views: the latest value of each key of a (compacted) topic, kept up to date.

A table view reads the topic's compacted view from the start with a reader over all its
partitions, loads it to the end before the constructor returns, then follows new messages. A
message whose value is null (``send(None)``, a tombstone) or empty removes its key, as in the
Java client. :class:`TableView` follows on a thread of its own; :class:`AsyncTableView` on a
task of the event loop. Both are read-only mappings (``view[key]``, ``view.get(key)``,
``len(view)``, ``key in view``, iteration over a snapshot of the keys).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import Annotated, Any, Awaitable, Callable, Iterator, Protocol, TypedDict, Union

from ._core import Message, MessageId
from ._options import Opt, resolve
from .exceptions import AlreadyClosed, InvalidConfiguration, Timeout, TopicTerminated
from .schema import Schema

__all__ = ["AsyncTableView", "TableView", "TableViewOptions"]

_log = logging.getLogger("magnetar")

#: Seconds the initial load waits for a message the broker says is there before it gives up and
#: returns the view as read so far (the follower goes on reading): never a hang.
LOAD_STALL_TIMEOUT = 30.0

Listener = Callable[[str, Any], object]
"""``listener(key, value)``: called for every message the view takes in after it was
registered, in order; ``value`` is None when the message removed the key."""


class TableViewOptions(TypedDict, total=False):
    """Keyword options of ``create_table_view``."""

    schema: Annotated[Union[Schema[Any], None], Opt(None, "A :mod:`magnetar.schema` object the values decode with (default: bytes).")]
    receiver_queue_size: Annotated[int, Opt(1000, "Messages fetched ahead of the view.", aliases=("receiverQueueSize",))]
    subscription_name: Annotated[Union[str, None], Opt(None, "The subscription name of the view's reader instead of a random one.", aliases=("subscriptionName",))]


# The views are given the client's ``create_reader`` and see the reader it makes only by its
# shape, so that this module stays below the clients that make views (no import of either).
class _Reader(Protocol):
    def has_message_available(self) -> bool: ...
    def read_next(self, timeout: float | None = None) -> Message: ...
    def close(self) -> None: ...


class _AsyncReader(Protocol):
    async def has_message_available(self) -> bool: ...
    async def read_next(self, timeout: float | None = None) -> Message: ...
    async def close(self) -> None: ...


def _reader_options(options: Mapping[str, Any]) -> dict[str, Any]:
    opts = resolve(TableViewOptions, options, "create_table_view")
    return {"read_compacted": True, **opts}


class _View(Mapping[str, Any]):
    """What both views share: the table, the listeners, and taking in one message."""

    def __init__(self, topic: str) -> None:
        self._topic = topic
        self._table: dict[str, Any] = {}
        self._listeners: list[Listener] = []
        # Guards the table and the listener list against the follower: a reader sees a whole
        # update or none of it, and a listener registered in for_each_and_listen misses nothing.
        self._lock = threading.Lock()

    def _take(self, msg: Message) -> None:
        key = msg.key
        if key is None:
            return  # a message without a key has no place in a key/value view
        value = None if msg.null_value or len(msg) == 0 else msg.value
        with self._lock:
            if value is None:
                self._table.pop(key, None)
            else:
                self._table[key] = value
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(key, value)
            except Exception:
                _log.exception("table view listener raised (topic %s)", self._topic)

    def _stalled(self) -> None:
        _log.warning("table view of %s: the broker announced a message that did not come within %s s; "
                     "the view starts with %d keys and goes on following", self._topic, LOAD_STALL_TIMEOUT,
                     len(self._table))

    @property
    def topic(self) -> str:
        """The topic the view follows."""
        return self._topic

    def __getitem__(self, key: str) -> Any:
        with self._lock:
            return self._table[key]

    def __len__(self) -> int:
        return len(self._table)

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._table))

    def __contains__(self, key: object) -> bool:
        return key in self._table

    def for_each(self, action: Listener) -> None:
        """Calls ``action(key, value)`` for each entry now in the view."""
        with self._lock:
            items = list(self._table.items())
        for key, value in items:
            action(key, value)

    def listen(self, listener: Listener) -> None:
        """Calls ``listener(key, value)`` for every later message, on the thread (or the event
        loop) that follows the topic; ``value`` is None when the key was removed."""
        if not callable(listener):
            raise InvalidConfiguration("a table view listener must be a callable (key, value)")
        with self._lock:
            self._listeners.append(listener)

    def for_each_and_listen(self, listener: Listener) -> None:
        """:meth:`for_each`, then :meth:`listen`, with no message taken in between."""
        if not callable(listener):
            raise InvalidConfiguration("a table view listener must be a callable (key, value)")
        with self._lock:
            items = list(self._table.items())
            self._listeners.append(listener)
        for key, value in items:
            listener(key, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(topic={self._topic!r}, {len(self._table)} keys)"

    def __reduce__(self) -> Any:
        raise TypeError(f"a {type(self).__name__} cannot be pickled: it holds a live reader")

    __hash__ = None  # type: ignore[assignment]  # a live, changing mapping


class TableView(_View):
    """The latest value of each key of a topic, followed on a thread of its own. Made by
    :meth:`magnetar.Client.create_table_view`; close it (or use ``with``) when done."""

    def __init__(self, create_reader: Callable[..., _Reader], topic: str, **options: Any) -> None:
        super().__init__(topic)
        self._reader = create_reader(topic, MessageId.earliest, **_reader_options(options))
        try:
            while self._reader.has_message_available():
                self._take(self._reader.read_next(LOAD_STALL_TIMEOUT))
        except Timeout:
            self._stalled()
        except BaseException:
            self._reader.close()
            raise
        self._thread = threading.Thread(target=self._follow, name=f"magnetar-table-view-{topic}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while True:
            try:
                msg = self._reader.read_next()
            except (AlreadyClosed, TopicTerminated):
                return
            except Exception:
                _log.exception("table view of %s stopped following", self._topic)
                return
            self._take(msg)

    def close(self) -> None:
        """Stops following the topic; the view keeps what it holds."""
        self._reader.close()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> TableView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTableView(_View):
    """:class:`TableView`'s asyncio twin: made by ``await client.create_table_view(...)``,
    followed on a task of the event loop (listeners run there); ``await view.close()``."""

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self._reader: _AsyncReader | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def _open(cls, create_reader: Callable[..., Awaitable[_AsyncReader]], topic: str,
                    **options: Any) -> AsyncTableView:
        view = cls(topic)
        reader = await create_reader(topic, MessageId.earliest, **_reader_options(options))
        try:
            while await reader.has_message_available():
                view._take(await reader.read_next(LOAD_STALL_TIMEOUT))
        except Timeout:
            view._stalled()
        except BaseException:
            await reader.close()
            raise
        view._reader = reader
        view._task = asyncio.get_running_loop().create_task(view._follow(reader))
        return view

    async def _follow(self, reader: _AsyncReader) -> None:
        while True:
            try:
                msg = await reader.read_next()
            except (AlreadyClosed, TopicTerminated):
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("table view of %s stopped following", self._topic)
                return
            self._take(msg)

    async def close(self) -> None:
        """Stops following the topic; the view keeps what it holds."""
        if self._reader is not None:
            await self._reader.close()
        if self._task is not None and self._task is not asyncio.current_task():
            await asyncio.gather(self._task, return_exceptions=True)

    async def __aenter__(self) -> AsyncTableView:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
