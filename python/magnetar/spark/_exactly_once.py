"""The exactly-once sink (``exactlyOnce=true``): every write task sends its rows inside a
transaction of its own and hands the transaction's id to the driver in its commit message;
the driver's commit of the job (batch) or of the micro-batch (streaming) commits them all,
resuming each by its id, and an abort aborts them.

A task that fails in Python aborts its own transaction. A task whose Python worker dies, or
whose result the driver never uses, leaves its transaction open: the coordinator aborts it at
``transactionTimeoutMs``. Either way the retried (or replayed) task writes its rows again in a
new transaction, so only one attempt's rows are ever committed. See docs/spark.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .._transaction import Transaction
from ..exceptions import PulsarError, TransactionError
from . import _workers
from ._options import SourceOptions

__all__ = ["abort_all", "commit_all", "in_transaction"]

log = logging.getLogger("magnetar.spark")

M = TypeVar("M")


def in_transaction(opts: SourceOptions, write: Callable[[Transaction], M]) -> tuple[M, tuple[int, int]]:
    """Runs one task's ``write(txn)`` inside a new transaction and returns its result with the
    transaction's id, for the driver to commit. ``write`` must have every send acknowledged
    before it returns (the driver's commit does not wait for this process). If it raises, the
    transaction is aborted here so that the retried task's rows are the only ones."""
    client = _workers.client(opts.client)
    txn = client.new_transaction(timeout=opts.transaction_timeout_ms / 1000)
    try:
        result = write(txn)
    except BaseException:
        try:
            txn.abort()
        except PulsarError as e:  # the coordinator aborts it at its timeout anyway
            log.warning("pulsar data source: aborting transaction %s of a failed task: %s", txn.id, e)
        raise
    return result, txn.id


def _ids(messages: Sequence[Any]) -> list[tuple[int, int]]:
    return [m.txn for m in messages if getattr(m, "txn", None) is not None]


def commit_all(opts: SourceOptions, messages: Sequence[Any], what: str) -> None:
    """Commits the transactions of every task's commit message (on the driver). If one cannot
    be committed (typically: it outlived ``transactionTimeoutMs`` and was aborted), the ones
    not yet committed are aborted and the error says how many were committed already."""
    ids = _ids(messages)
    client = _workers.client(opts.client)
    for i, txn_id in enumerate(ids):
        try:
            client.transaction_from_id(txn_id).commit()
        except PulsarError as e:
            _abort_ids(client, ids[i + 1:])
            partial = (f"{i} of {len(ids)} task transactions were already committed, and their rows "
                       "are visible; a replay writes them again" if i else "no task's rows were committed")
            raise TransactionError(
                f"pulsar data source: {what}: committing the transaction {txn_id} failed ({e}); {partial}. "
                f"If it timed out, raise transactionTimeoutMs above the time from a task's start to "
                f"the commit (now {opts.transaction_timeout_ms} ms)") from e
    log.info("pulsar data source: %s: committed %d task transactions", what, len(ids))


def abort_all(opts: SourceOptions, messages: Sequence[Any], what: str) -> None:
    """Aborts the transactions of the tasks that finished (on the driver); best effort: one
    that cannot be reached aborts at its timeout."""
    ids = _ids(messages)
    _abort_ids(_workers.client(opts.client), ids)
    log.warning("pulsar data source: %s aborted: %d task transactions aborted, nothing of it is visible",
                what, len(ids))


def _abort_ids(client: Any, ids: Sequence[tuple[int, int]]) -> None:
    for txn_id in ids:
        try:
            client.transaction_from_id(txn_id).abort()
        except PulsarError as e:
            log.warning("pulsar data source: aborting transaction %s: %s (it aborts at its timeout)", txn_id, e)
