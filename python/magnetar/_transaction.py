"""Transactions: :class:`Transaction` and its asyncio twin :class:`AsyncTransaction`.

Messages sent with ``txn=`` and acknowledgements made with ``txn=`` take effect together when
the transaction commits, or not at all: until then consumers do not see the messages, and if it
aborts (or times out) the messages are dropped and the acknowledged messages are delivered
again. See docs/transactions.md.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, NoReturn

from . import _core
from ._aio import call

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["AsyncTransaction", "OpeningTransaction", "Transaction", "TransactionHandle"]

_log = logging.getLogger("magnetar")


class TransactionHandle:
    """What both kinds of transaction share: the id, the state, no pickling, a ``repr``."""

    __slots__ = ("_core", "__weakref__")

    def __init__(self, core: _core._Transaction) -> None:
        self._core = core

    @property
    def id(self) -> tuple[int, int]:
        """The transaction's id, ``(most, least)`` significant bits: pass it to
        ``client.transaction_from_id`` to commit or abort the transaction from another client
        or process."""
        return self._core.id

    @property
    def state(self) -> str:
        """``"open"``, ``"committing"``, ``"aborting"``, ``"committed"``, ``"aborted"`` or
        ``"errored"`` (the coordinator could not be told; an uncommitted transaction aborts at
        its timeout)."""
        return self._core.state

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"magnetar.{type(self).__name__} cannot be pickled: pass its id (txn.id) and resume it "
            "with client.transaction_from_id(id) where it is needed."
        )

    def __repr__(self) -> str:
        return f"<magnetar.{type(self).__name__} id={self.id} state={self.state!r}>"


class Transaction(TransactionHandle):
    """A transaction of the blocking client. As a context manager it commits when the block
    ends normally and aborts when it raises (the exception then propagates)."""

    __slots__ = ()

    def commit(self) -> None:
        """Waits until every send and acknowledgement made in the transaction has completed,
        then commits it. If one of them failed the transaction is aborted instead and
        :class:`~magnetar.TransactionError` is raised; so it is for a transaction already
        committed, aborted or timed out."""
        self._core.commit()

    def abort(self) -> None:
        """Waits for the transaction's sends and acknowledgements, then aborts it: its messages
        are dropped and the messages it acknowledged are delivered again."""
        self._core.abort()

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
        elif self.state == "open":
            try:
                self.abort()
            except Exception:
                # The block's own exception is the one to see; the coordinator aborts the
                # transaction at its timeout anyway.
                _log.warning("aborting transaction %s failed", self.id, exc_info=True)


class AsyncTransaction(TransactionHandle):
    """A transaction of the asyncio client. As an async context manager it commits when the
    block ends normally and aborts when it raises (the exception then propagates)."""

    __slots__ = ()

    async def commit(self) -> None:
        """Waits until every send and acknowledgement made in the transaction has completed,
        then commits it. If one of them failed the transaction is aborted instead and
        :class:`~magnetar.TransactionError` is raised; so it is for a transaction already
        committed, aborted or timed out."""
        await call(self._core.commit)

    async def abort(self) -> None:
        """Waits for the transaction's sends and acknowledgements, then aborts it: its messages
        are dropped and the messages it acknowledged are delivered again."""
        await call(self._core.abort)

    async def __aenter__(self) -> AsyncTransaction:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if exc_type is None:
            await self.commit()
        elif self.state == "open":
            try:
                await self.abort()
            except Exception:
                _log.warning("aborting transaction %s failed", self.id, exc_info=True)


class OpeningTransaction:
    """What ``AsyncClient.new_transaction()`` returns: await it for the
    :class:`AsyncTransaction`, or use it in ``async with`` (which commits on exit and aborts on
    an exception)."""

    __slots__ = ("_open", "_txn")

    def __init__(self, open: Callable[[], Awaitable[AsyncTransaction]]) -> None:
        self._open = open
        self._txn: AsyncTransaction | None = None

    def __await__(self) -> Generator[Any, None, AsyncTransaction]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncTransaction:
        self._txn = await self._open()
        return self._txn

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._txn is not None, "__aexit__ without __aenter__"
        await self._txn.__aexit__(exc_type, exc, tb)
