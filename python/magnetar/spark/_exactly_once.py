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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .._transaction import Transaction
from ..exceptions import PulsarError, TransactionError
from . import _workers
from ._options import SourceOptions
from ._txn_log import Entry, Record, TxnId, TxnLog

__all__ = ["abort_all", "commit_all", "in_transaction"]

log = logging.getLogger("magnetar.spark")

M = TypeVar("M")


def in_transaction(opts: SourceOptions, write_id: str,
                   write: Callable[[Transaction], M]) -> tuple[M, TxnId, float]:
    """Runs one task's ``write(txn)`` inside a new transaction and returns its result with the
    transaction's id and when it was opened (before ``NewTxn``, so no later than its
    coordinator's clock starts its timeout), for the driver to commit. ``write`` must have every send acknowledged
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
    created = time.time()
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
    return result, txn.id, created


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


# -- the driver's commit ------------------------------------------------------------------------

# Broker answers that mean a transaction is no longer open (ended, timed out, or unknown).
_ENDED_CODES = (21, 24)  # InvalidTxnStatus, TransactionNotFound
# How far the driver's clock may be ahead of the executor's that stamped a transaction's opening.
CLOCK_MARGIN_S = 5.0


@dataclass(frozen=True)
class TaskTxn:
    """One task's transaction, from its commit message."""

    partition: int
    txn: TxnId
    created: float


def task_txns(messages: Sequence[Any]) -> list[TaskTxn]:
    out = []
    for i, m in enumerate(messages):
        txn = getattr(m, "txn", None)
        if txn is None:
            continue
        partition = getattr(m, "partition", None)
        # no stamp: as if opened long ago, so that an ambiguous end counts as lost (rows rewritten)
        out.append(TaskTxn(i if partition is None else partition, tuple(txn), getattr(m, "txn_created", None) or 0.0))
    return out


def commit_all(opts: SourceOptions, messages: Sequence[Any], what: str,
               record_log: TxnLog | None = None, key: str | None = None, prune_below: int | None = None) -> None:
    """Commits the transactions of every task's commit message (on the driver).

    With ``record_log``, the commit is recorded under ``key`` first (see ``_txn_log``), and a
    commit of a key recorded before (a replayed micro-batch, a rerun batch write) commits
    nothing again: per partition, a transaction already committed stands and the new one is
    aborted; one that was recorded but not committed is committed now if it is still open;
    only where the recorded one is lost is the new one committed.

    If a commit fails, the transactions not yet committed are aborted (and recorded as lost),
    and the error says how many were committed already."""
    tasks = task_txns(messages)
    client = _workers.client(opts.client)
    if record_log is None or key is None:
        _commit_each(opts, client, None, None, tasks, what)
        return
    record = record_log.load(key)
    if record is None and not tasks:  # nothing to commit, nothing a replay could commit twice
        log.info("pulsar data source: %s: no task wrote anything", what)
        return
    if record is None:
        if prune_below is not None:
            record_log.prune(prune_below)
        record = Record(timeout_ms=opts.transaction_timeout_ms, tasks=len(messages),
                        partitions={i: [] for i in range(len(messages))})
        for t in tasks:
            record.partitions.setdefault(t.partition, []).append(Entry(t.txn, t.created))
        to_commit = tasks
    else:
        to_commit, to_abort = _replay(client, record_log, key, record, tasks, len(messages), what)
        _abort_ids(client, [t.txn for t in to_abort])
    record_log.save(key, record)
    _commit_each(opts, client, record_log, key, to_commit, what, record)


def _commit_each(opts: SourceOptions, client: Any, record_log: TxnLog | None, key: str | None,
                 tasks: Sequence[TaskTxn], what: str, record: Record | None = None) -> None:
    for i, t in enumerate(tasks):
        if record_log is not None and record is not None and key is not None:
            record_log.mark(key, record, [t.txn], "committing")
        try:
            committed = _commit_or_ended(client, t.txn)
            if not committed:
                # Only the sink ends a recorded transaction before its timeout, so one already
                # ended before then was ended by this commit (an EndTxn the engine resent after
                # a lost connection finds the first one's work done).
                committed = record_log is not None and time.time() < t.created + opts.transaction_timeout_ms / 1000 - CLOCK_MARGIN_S
            if not committed:
                raise TransactionError("the transaction had already ended (it timed out or was aborted)", code=24)
        except PulsarError as e:
            rest = [x.txn for x in tasks[i + 1:]]
            if record_log is not None and record is not None and key is not None:
                definite = isinstance(e, TransactionError) and e.code in _ENDED_CODES
                # an unknown outcome stays 'committing': the replay settles it
                record_log.mark(key, record, ([t.txn] if definite else []) + rest, "lost")
            _abort_ids(client, rest)
            partial = (f"{i} of {len(tasks)} task transactions were already committed, and their rows "
                       "are visible" if i else "no task's rows were committed")
            replay = ("; the replay commits nothing again for them" if record_log is not None
                      else "; a replay writes them again")
            raise TransactionError(
                f"pulsar data source: {what}: committing the transaction {t.txn} failed ({e}); {partial}"
                f"{replay if i else ''}. If it timed out, raise transactionTimeoutMs above the time from a "
                f"task's start to the commit (now {opts.transaction_timeout_ms} ms)") from e
        if record_log is not None and record is not None and key is not None:
            record_log.mark(key, record, [t.txn], "committed")
    log.info("pulsar data source: %s: committed %d task transactions", what, len(tasks))


def _commit_or_ended(client: Any, txn: TxnId) -> bool:
    """Commits ``txn``: True if this call committed it, False if it had already ended (the
    broker cannot say how); other failures (the coordinator unreachable, ...) raise."""
    try:
        commit_one(client, txn)
        return True
    except TransactionError as e:
        if e.code in _ENDED_CODES:
            return False
        raise


def commit_one(client: Any, txn: TxnId) -> None:
    """One ``EndTxn(commit)`` (a function of its own so that tests can stop a driver between two)."""
    client.transaction_from_id(txn).commit()


def _replay(client: Any, record_log: TxnLog, key: str, record: Record, tasks: list[TaskTxn], n: int,
            what: str) -> tuple[list[TaskTxn], list[TaskTxn]]:
    """Settles the recorded transactions of a commit that began before, and returns the new
    transactions to commit and to abort. ``record`` gets the ones to commit."""
    done = {p for p, entries in record.partitions.items()
            if entries and _settle(client, record_log, key, record, entries, what)}
    recorded = {p for p, entries in record.partitions.items() if entries}
    log.warning("pulsar data source: %s began its commit before (this is a replay, or a rerun of its writeId): "
                "%d of its %d recorded task transactions stand; committing only the rest", what, len(done),
                len(recorded))
    if n != record.tasks:
        # Partitions are matched by their index: with another partitioning they cannot be.
        if done and done != recorded:
            raise TransactionError(
                f"pulsar data source: {what}: replayed with {n} partitions, committed before with {record.tasks} "
                f"of which {len(done)} (and not {len(recorded - done)} more): the rows cannot be matched to "
                "commit each once. Replay it with the same partitioning")
        if done:
            return [], tasks
        record.tasks, record.partitions = n, {i: [] for i in range(n)}
    to_commit, to_abort = [], []
    for t in tasks:
        if t.partition in done:
            to_abort.append(t)
        else:
            record.partitions.setdefault(t.partition, []).append(Entry(t.txn, t.created))
            to_commit.append(t)
    return to_commit, to_abort


def _settle(client: Any, record_log: TxnLog, key: str, record: Record, entries: list[Entry], what: str) -> bool:
    """Whether one of a partition's recorded transactions is committed, committing the last
    one if it is still open."""
    if any("committed" in record.state(e.txn) for e in entries):
        return True
    deadline_ms = record.timeout_ms
    for e in entries:
        before = set(record.state(e.txn))
        if "lost" in before:
            continue
        record_log.mark(key, record, [e.txn], "committing")
        if _commit_or_ended(client, e.txn):
            log.info("pulsar data source: %s: committed transaction %s left open by the dead driver", what, e.txn)
        elif "committing" not in before:  # no commit of it was ever sent: it timed out
            record_log.mark(key, record, [e.txn], "lost")
            continue
        elif time.time() >= e.created + deadline_ms / 1000 - CLOCK_MARGIN_S:
            # The dead driver was committing it; it has ended, and it could also have timed
            # out by now: the broker cannot tell which. Rows written twice beat rows lost.
            log.warning("pulsar data source: %s: transaction %s was being committed when the driver died and has "
                        "ended, committed or timed out (past its timeout, Pulsar cannot tell); its partition is "
                        "written again, so its rows may appear twice", what, e.txn)
            record_log.mark(key, record, [e.txn], "lost")
            continue
        record_log.mark(key, record, [e.txn], "committed")
        return True
    return False


def abort_all(opts: SourceOptions, messages: Sequence[Any], what: str,
              record_log: TxnLog | None = None, key: str | None = None) -> None:
    """Aborts the transactions of the tasks that finished (on the driver); best effort: one
    that cannot be reached aborts at its timeout. A recorded transaction whose commit was sent
    is left for the replay to settle (Spark aborts after a commit that failed part way)."""
    ids = [t.txn for t in task_txns(messages)]
    record = record_log.load(key) if record_log is not None and key is not None else None
    if record_log is not None and record is not None and key is not None:
        recorded = record.txns()
        ids = [t for t in ids if not {"committing", "committed"} & record.state(t)]
        record_log.mark(key, record, [t for t in ids if t in recorded and "lost" not in record.state(t)], "lost")
    left = len(task_txns(messages)) - len(ids)
    _abort_ids(_workers.client(opts.client), ids)
    log.warning("pulsar data source: %s aborted: %d task transactions aborted%s", what, len(ids),
                f", {left} whose commit was sent left for the replay to settle" if left else "")


def _abort_ids(client: Any, ids: Sequence[TxnId]) -> None:
    for txn_id in ids:
        try:
            client.transaction_from_id(txn_id).abort()
        except PulsarError as e:
            log.warning("pulsar data source: aborting transaction %s: %s (it aborts at its timeout)", txn_id, e)
