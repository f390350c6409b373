"""The exactly-once sink's record of committed transactions (``_txn_log``) and how a replayed
commit reads it, without Spark or a broker: a small fake coordinator stands in for the cases a
real one cannot be made to produce in a test (a transaction that ended while its commit was in
flight, found again after its timeout). The real broker and a killed driver are in
tests/test_spark_exactly_once.py."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar.exceptions import TransactionError
from magnetar.spark import _exactly_once as eo
from magnetar.spark import _workers
from magnetar.spark._options import SourceOptions
from magnetar.spark._txn_log import Entry, Record, TxnLog, local_dir
from magnetar.spark._write import PulsarCommitMessage


class FakeCoordinator:
    """Transactions by id: "open", "committed" or "aborted"; an ended one answers
    TransactionNotFound, as Pulsar's coordinator does once it forgot it."""

    def __init__(self, **states: str) -> None:
        self.states: dict[tuple[int, int], str] = {(0, int(k[1:])): v for k, v in states.items()}
        self.commits: list[tuple[int, int]] = []

    def transaction_from_id(self, txn: tuple[int, int]) -> Any:
        coordinator = self

        class Handle:
            def _end(self, to: str) -> None:
                if coordinator.states.get(txn) != "open":
                    raise TransactionError(f"{txn}: TransactionNotFound", code=24)
                coordinator.states[txn] = to
                if to == "committed":
                    coordinator.commits.append(txn)

            def commit(self) -> None:
                self._end("committed")

            def abort(self) -> None:
                self._end("aborted")

        return Handle()


@pytest.fixture
def opts() -> SourceOptions:
    return SourceOptions.parse({"service.url": "pulsar://127.0.0.1:1", "topic": "t", "exactlyOnce": "true",
                                "transactionTimeoutMs": "60000"})


def _messages(*txns: int | None, created: float | None = None) -> list[PulsarCommitMessage]:
    stamp = time.time() if created is None else created
    return [PulsarCommitMessage({}, 1, None if t is None else (0, t), stamp, i) for i, t in enumerate(txns)]


def _use(monkeypatch: pytest.MonkeyPatch, coordinator: FakeCoordinator) -> None:
    monkeypatch.setattr(_workers, "client", lambda conf: coordinator)


def test_the_record_is_written_atomically_and_a_torn_mark_is_ignored(tmp_path: Path) -> None:
    record_log = TxnLog(tmp_path / "log")
    record = Record(timeout_ms=1000, tasks=2, partitions={0: [Entry((0, 1), 5.0)], 1: []})
    record_log.save("7", record)
    record_log.mark("7", record, [(0, 1)], "committing")
    with open(tmp_path / "log" / "7.marks", "a") as f:
        f.write("committed 0")  # the driver died while appending
    loaded = record_log.load("7")
    assert loaded is not None
    assert (loaded.tasks, loaded.partitions, loaded.state((0, 1))) == (2, record.partitions, {"committing"})
    assert sorted(p.name for p in (tmp_path / "log").iterdir()) == ["7.marks", "7.txns"]  # no temporary left
    record_log.save("8", record)
    record_log.prune(8)
    assert sorted(p.name for p in (tmp_path / "log").iterdir()) == ["8.txns"]


def test_the_record_needs_a_file_system_the_driver_mounts(tmp_path: Path) -> None:
    assert local_dir(f"file://{tmp_path}/ck", "checkpointLocation") == tmp_path / "ck"
    with pytest.raises(magnetar.InvalidConfiguration, match="'checkpointLocation'.*not on a file system"):
        local_dir("hdfs://nn:8020/ck", "checkpointLocation")


def test_a_replay_commits_only_what_was_not_committed(opts: SourceOptions, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """First run: t1 committed, the driver dies before t2's commit. The replay (t3, t4) aborts
    t3 (its partition's t1 stands), commits t2 (still open), aborts t4."""
    fake = FakeCoordinator(t1="open", t2="open", t3="open", t4="open")
    _use(monkeypatch, fake)
    record_log = TxnLog(tmp_path)
    original = eo.commit_one

    def dies_at_second(client: Any, txn: tuple[int, int]) -> None:
        if txn == (0, 2):
            raise SystemExit("the driver died")
        original(client, txn)

    monkeypatch.setattr(eo, "commit_one", dies_at_second)
    with pytest.raises(SystemExit):
        eo.commit_all(opts, _messages(1, 2), "batch 0", record_log, "0")
    monkeypatch.setattr(eo, "commit_one", original)
    eo.commit_all(opts, _messages(3, 4), "batch 0", record_log, "0")
    assert fake.commits == [(0, 1), (0, 2)]
    assert fake.states == {(0, 1): "committed", (0, 2): "committed", (0, 3): "aborted", (0, 4): "aborted"}


@pytest.mark.parametrize("age,stands", [(0.0, True), (120.0, False)], ids=["within-timeout", "past-timeout"])
def test_a_commit_in_flight_when_the_driver_died_is_settled_by_its_age(
        opts: SourceOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        age: float, stands: bool) -> None:
    """t1's EndTxn was answered, its 'committed' mark never written; found again it answers
    TransactionNotFound. Within its timeout only that commit can have ended it: it stands.
    Past its timeout it may have timed out instead: its partition is written again, with a
    warning (the duplicate this can make is the documented limit)."""
    fake = FakeCoordinator(t1="committed", t2="open")
    _use(monkeypatch, fake)
    record_log = TxnLog(tmp_path)
    created = time.time() - age
    record = Record(timeout_ms=60_000, tasks=1, partitions={0: [Entry((0, 1), created)]})
    record_log.save("3", record)
    record_log.mark("3", record, [(0, 1)], "committing")
    with caplog.at_level(logging.WARNING, "magnetar.spark"):
        eo.commit_all(opts, _messages(2), "batch 3", record_log, "3")
    assert fake.states[(0, 2)] == ("aborted" if stands else "committed")
    assert ("its rows may appear twice" in caplog.text) is not stands
    loaded = record_log.load("3")
    assert loaded is not None and loaded.state((0, 1)) == {"committing", "committed" if stands else "lost"}


def test_a_transaction_never_sent_a_commit_and_now_gone_is_lost(opts: SourceOptions, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded, no 'committing' mark, timed out before the restart: the replay's own commits."""
    fake = FakeCoordinator(t1="aborted", t2="open")
    _use(monkeypatch, fake)
    record_log = TxnLog(tmp_path)
    record_log.save("0", Record(timeout_ms=60_000, tasks=1, partitions={0: [Entry((0, 1), time.time())]}))
    eo.commit_all(opts, _messages(2), "batch 0", record_log, "0")
    assert fake.commits == [(0, 2)]


def test_a_replay_with_other_partitions_is_refused_when_it_cannot_be_matched(
        opts: SourceOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCoordinator(t1="committed", t2="aborted", t3="open", t4="open", t5="open")
    _use(monkeypatch, fake)
    record_log = TxnLog(tmp_path)
    record = Record(timeout_ms=60_000, tasks=2, partitions={0: [Entry((0, 1), 0.0)], 1: [Entry((0, 2), 0.0)]})
    record_log.save("0", record)
    record_log.mark("0", record, [(0, 1)], "committed")
    with pytest.raises(TransactionError, match="replayed with 3 partitions, committed before with 2"):
        eo.commit_all(opts, _messages(3, 4, 5), "batch 0", record_log, "0")
    assert fake.commits == []


def test_spark_abort_after_a_failed_commit_leaves_the_one_in_flight(
        opts: SourceOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit that failed with an unknown outcome (the coordinator unreachable) stays
    'committing'; Spark's abort that follows must not abort it, or the replay's age rule would
    count an aborted transaction as committed."""
    fake = FakeCoordinator(t1="open", t2="open")
    _use(monkeypatch, fake)
    record_log = TxnLog(tmp_path)

    def unreachable(client: Any, txn: tuple[int, int]) -> None:
        raise magnetar.ConnectError("the coordinator is unreachable")

    monkeypatch.setattr(eo, "commit_one", unreachable)
    with pytest.raises(TransactionError, match="no task's rows were committed"):
        eo.commit_all(opts, _messages(1, 2), "batch 0", record_log, "0")
    eo.abort_all(opts, _messages(1, 2), "batch 0", record_log, "0")
    assert fake.states == {(0, 1): "open", (0, 2): "aborted"}
    loaded = record_log.load("0")
    assert loaded is not None and (loaded.state((0, 1)), loaded.state((0, 2))) == ({"committing"}, {"lost"})
