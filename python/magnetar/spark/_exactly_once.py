"""The exactly-once sink (``exactlyOnce=true``): every write task sends its rows inside a
transaction of its own and hands the transaction's id to the driver in its commit message;
the driver's commit of the job (batch) or of the micro-batch (streaming) commits them all,
resuming each by its id, and an abort aborts them.

A task that fails in Python aborts its own transaction. A failed attempt that could not (its
Python worker was killed, or Spark cut its input short) leaves its transaction open: the next
attempt of that task on the same machine aborts it, and otherwise the coordinator does at
``transactionTimeoutMs``, as it does for the transactions of a driver that died before
committing. Either way the retried (or replayed) task writes its rows again in a new
transaction, so only one attempt's rows are ever committed. See docs/spark.md.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .._transaction import Transaction
from ..exceptions import PulsarError, TransactionError
from . import _workers
from ._options import SourceOptions

__all__ = ["abort_all", "commit_all", "in_transaction"]

log = logging.getLogger("magnetar.spark")

M = TypeVar("M")


def in_transaction(opts: SourceOptions, write_id: str,
                   write: Callable[[Transaction], M]) -> tuple[M, tuple[int, int]]:
    """Runs one task's ``write(txn)`` inside a new transaction and returns its result with the
    transaction's id, for the driver to commit. ``write`` must have every send acknowledged
    before it returns (the driver's commit does not wait for this process). If it raises, the
    transaction is aborted here so that the retried task's rows are the only ones.

    ``write_id`` names the write (one per job, or per run of a streaming query): the task
    records its transaction under it on this machine, and a later attempt of the same task
    that runs here aborts it at once. That covers an attempt whose Python worker was killed
    (nothing ran in it to abort) and one whose input Spark cut short (it ended as if its
    partition were done, but its task failed): their transactions would otherwise stay open
    until their timeout, holding back readers of the partitions they wrote to."""
    client = _workers.client(opts.client)
    record = _attempt_record(write_id, opts.transaction_timeout_ms)
    if record is not None:
        _abort_earlier_attempt(client, record)
    txn = client.new_transaction(timeout=opts.transaction_timeout_ms / 1000)
    if record is not None:
        _write_record(record, txn.id)
    try:
        result = write(txn)
    except BaseException:
        try:
            txn.abort()
        except PulsarError as e:  # the coordinator aborts it at its timeout anyway
            log.warning("pulsar data source: aborting transaction %s of a failed task: %s", txn.id, e)
        if record is not None:
            record.unlink(missing_ok=True)
        raise
    return result, txn.id


_RECORDS = Path(tempfile.gettempdir()) / "magnetar-spark-txn"
_swept: set[str] = set()


def _attempt_record(write_id: str, timeout_ms: int) -> Path | None:
    """Where this task's transaction is recorded on this machine (None outside a task)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None
    if write_id not in _swept:
        _swept.add(write_id)
        _sweep(max(2 * timeout_ms / 1000, 3600.0))
    return _RECORDS / f"{write_id}-{ctx.stageId()}-{ctx.partitionId()}"


def _sweep(older_than: float) -> None:
    """Removes the records of finished writes (their transactions ended long ago), once per
    write in each worker process."""
    now = time.time()
    try:
        for f in _RECORDS.iterdir():
            if now - f.stat().st_mtime > older_than:
                f.unlink(missing_ok=True)
    except OSError:
        pass


def _abort_earlier_attempt(client: Any, record: Path) -> None:
    try:
        most, least = (int(x) for x in record.read_text().split())
    except (OSError, ValueError):
        return
    try:
        client.transaction_from_id((most, least)).abort()
        log.info("pulsar data source: aborted transaction %s of an earlier attempt of this task", (most, least))
    except PulsarError as e:  # already ended (or timed out)
        log.info("pulsar data source: transaction %s of an earlier attempt: %s", (most, least), e)
    record.unlink(missing_ok=True)


def _write_record(record: Path, txn_id: tuple[int, int]) -> None:
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f"{record.name}.{os.getpid()}")
        tmp.write_text(f"{txn_id[0]} {txn_id[1]}")
        tmp.replace(record)
    except OSError as e:  # only the early abort is lost: the transaction still times out
        log.warning("pulsar data source: cannot record transaction %s in %s: %s", txn_id, record, e)


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
