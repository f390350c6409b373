"""The exactly-once sink's durable record of what each commit committed (``exactlyOnce=true``).

One record per commit key (a micro-batch's id, or a batch write's ``writeId``) in a directory
on the driver's file system: ``<key>.txns`` lists, per Spark partition, the transactions that
were ever about to be committed for it, and ``<key>.marks`` says, line by line, what happened
to each of them. The list is replaced atomically (temporary file, fsync, rename, fsync of the
directory) before any of its transactions is committed; a mark is appended and fsynced:

- ``committing <most> <least>`` before the transaction's ``EndTxn(commit)`` is sent,
- ``committed <most> <least>`` once the coordinator answered it,
- ``lost <most> <least>`` once it is known that it will never be committed (it was aborted,
  it timed out, or a replay chose another transaction for its partition).

So a transaction that is not in a list was never committed by the sink, and one with no
``committing`` mark was not either. See ``_exactly_once`` for how a replay reads them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..exceptions import InvalidConfiguration

__all__ = ["CHECKPOINT_SUBDIR", "Entry", "Record", "TxnId", "TxnLog", "checkpoint_log", "local_dir"]

# Inside the query's checkpoint: deleting the checkpoint (which restarts batch ids at 0) deletes
# the record with it, so a new query can never mistake an old query's batch for its own.
CHECKPOINT_SUBDIR = "magnetar-pulsar-sink"

TxnId = tuple[int, int]
MARKS = ("committing", "committed", "lost")
_KEY = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


@dataclass
class Entry:
    """One transaction of a partition: its id and when its task opened it (the task's clock,
    seconds since the epoch), which bounds when its coordinator may time it out."""

    txn: TxnId
    created: float


@dataclass
class Record:
    """A commit's record: per partition, its transactions in the order they were recorded
    (at most the last one can be unresolved: a replay records a new one only once the
    earlier ones are lost), and the marks of every transaction."""

    timeout_ms: int
    tasks: int
    partitions: dict[int, list[Entry]] = field(default_factory=dict)
    marks: dict[TxnId, set[str]] = field(default_factory=dict)

    def state(self, txn: TxnId) -> set[str]:
        return self.marks.get(txn, set())

    def txns(self) -> set[TxnId]:
        return {e.txn for entries in self.partitions.values() for e in entries}


def local_dir(location: str, option: str) -> Path:
    """A directory on the driver's file system, from a path or a ``file:`` URI. Other schemes
    (``hdfs://``, ``s3a://``, ...) are refused: the record needs an atomic rename and fsync,
    which the driver's Python process can only do on a file system it mounts."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:  # (a Windows drive letter is not a scheme)
        raise InvalidConfiguration(
            f"pulsar data source: option '{option}': {location!r} is not on a file system the driver mounts; "
            "exactlyOnce keeps its record of committed transactions there and needs a local or mounted "
            "(e.g. NFS) path")
    return Path(location)


def checkpoint_log(checkpoint: str) -> TxnLog:
    return TxnLog(local_dir(checkpoint, "checkpointLocation") / CHECKPOINT_SUBDIR)


class TxnLog:
    """A directory of records, one per commit key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __repr__(self) -> str:
        return f"TxnLog({str(self.directory)!r})"

    def _path(self, key: str, suffix: str) -> Path:
        if not _KEY.match(key):
            raise InvalidConfiguration(f"pulsar data source: {key!r} cannot name a commit record "
                                       "(letters, digits, '.', '_' and '-' only)")
        return self.directory / f"{key}.{suffix}"

    def load(self, key: str) -> Record | None:
        """The record of ``key`` (None if no commit of it ever began)."""
        path = self._path(key, "txns")
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # written atomically: a damaged one is not ours to guess at
            raise OSError(f"pulsar data source: the exactly-once record {path} cannot be read: {e}") from e
        record = Record(timeout_ms=int(doc["timeout_ms"]), tasks=int(doc["tasks"]),
                        partitions={int(p): [Entry((int(e["txn"][0]), int(e["txn"][1])), float(e["created"]))
                                             for e in entries]
                                    for p, entries in doc["partitions"].items()})
        try:
            lines = self._path(key, "marks").read_text().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            parts = line.split()
            # a torn last line (the driver died while appending it) is as if never written
            if len(parts) == 3 and parts[0] in MARKS and all(p.lstrip("-").isdigit() for p in parts[1:]):
                record.marks.setdefault((int(parts[1]), int(parts[2])), set()).add(parts[0])
        return record

    def save(self, key: str, record: Record) -> None:
        """Replaces the list of ``key``'s transactions, atomically and durably."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(key, "txns")
        doc = {"timeout_ms": record.timeout_ms, "tasks": record.tasks,
               "partitions": {str(p): [{"txn": list(e.txn), "created": e.created} for e in entries]
                              for p, entries in sorted(record.partitions.items())}}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._sync_dir()

    def mark(self, key: str, record: Record, txns: Sequence[TxnId], state: str) -> None:
        """Appends ``state`` for each of ``txns`` durably (one fsync for them all)."""
        if not txns:
            return
        assert state in MARKS
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(key, "marks")
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, "".join(f"{state} {t[0]} {t[1]}\n" for t in txns).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            self._sync_dir()
        for t in txns:
            record.marks.setdefault(t, set()).add(state)

    def prune(self, below: int) -> None:
        """Removes the records of the micro-batches before ``below``: Spark runs a micro-batch
        only once the one before it is in its commit log, so none of them is replayed again."""
        try:
            names = [p for p in self.directory.iterdir() if p.suffix in (".txns", ".marks")]
        except FileNotFoundError:
            return
        for p in names:
            if p.stem.isdigit() and int(p.stem) < below:
                p.unlink(missing_ok=True)

    def _sync_dir(self) -> None:
        # the rename (or the new file) is durable only once its directory entry is
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
