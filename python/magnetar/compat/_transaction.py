"""Transactions in the compatibility API. The official Python client has none; this is the Java
client's shape in the official client's style: ``client.new_transaction(timeout_ms=...)``,
``txn.commit()``/``txn.abort()``, and ``txn=`` on ``send``, ``send_async``, ``acknowledge`` and
``acknowledge_cumulative``."""

from __future__ import annotations

from typing import Any

from .. import _transaction as _native
from .exceptions import mapped

__all__ = ["Transaction", "TransactionBase", "native_txn"]


class TransactionBase:
    """What the blocking and the asyncio transactions share: the id and the state."""

    __slots__ = ("_txn",)

    def __init__(self, native: _native.TransactionHandle) -> None:
        self._txn = native

    def txn_id(self) -> tuple[int, int]:
        """``(most, least)`` significant bits of the id (Java: ``getTxnID()``)."""
        return self._txn.id

    def state(self) -> str:
        """``"OPEN"``, ``"COMMITTING"``, ``"ABORTING"``, ``"COMMITTED"``, ``"ABORTED"`` or
        ``"ERROR"`` (Java: ``getState()``)."""
        return "ERROR" if self._txn.state == "errored" else self._txn.state.upper()

    def __repr__(self) -> str:
        return f"<pulsar.{type(self).__name__} id={self.txn_id()} state={self.state()}>"


class Transaction(TransactionBase):
    """A transaction (Java: ``org.apache.pulsar.client.api.transaction.Transaction``): messages
    sent and acknowledgements made with ``txn=`` take effect when it commits, or never if it
    aborts or times out. See magnetar's docs/transactions.md."""

    __slots__ = ()
    _txn: _native.Transaction

    def commit(self) -> None:
        """Waits for the transaction's sends and acknowledgements, then commits it."""
        with mapped():
            self._txn.commit()

    def abort(self) -> None:
        """Waits for the transaction's sends and acknowledgements, then aborts it."""
        with mapped():
            self._txn.abort()


def native_txn(txn: Any) -> Any:
    """The magnetar transaction behind a ``txn=`` argument (None stays None)."""
    if txn is None or isinstance(txn, _native.TransactionHandle):
        return txn
    if isinstance(txn, TransactionBase):
        return txn._txn
    raise TypeError(f"txn must be a Transaction from client.new_transaction(), not {type(txn).__name__}")
