"""asyncio glue: calling an engine operation with a future, and resolving futures from a
client's dispatch thread (via ``call_soon_threadsafe``)."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from . import _core

__all__ = ["call", "resolve_many"]


def call(operation: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
    """Starts one of the engine's waiting operations with an asyncio future (its ``future=``
    argument) and returns the future."""
    fut = asyncio.get_running_loop().create_future()
    operation(*args, **kwargs, future=fut)
    return fut


def resolve_many(items: list[tuple[asyncio.Future[Any], Any, BaseException | None]],
                 completers: list[tuple[asyncio.Future[Any], Callable[[asyncio.Future[Any]], None]]]) -> None:
    """Completes futures in one event-loop callback (the engine batches completions); one
    cancelled meanwhile is left alone. A completer completes its future itself, on this thread
    (an asyncio receive takes its message here, so a cancelled one takes nothing)."""
    for fut, value, error in items:
        if fut.done():
            continue
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)
    for fut, complete in completers:
        if not fut.done():
            complete(fut)


_core._register_asyncio(resolve_many)
