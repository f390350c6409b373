"""Resolving asyncio futures from a client's dispatch thread (via call_soon_threadsafe)."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["resolve", "resolve_many"]


def resolve(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """Completes ``fut`` unless it was cancelled meanwhile."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


def resolve_many(items: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Completes many futures in one event-loop callback (the engine batches completions)."""
    for fut, value, error in items:
        if fut.done():
            continue
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)
