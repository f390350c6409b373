"""Which entries of a range the messages read so far account for, so that a range never ends
inside a chunked message.

Why not a gap check: retention deletes whole ledgers, never entries inside one, so a missing
entry inside a ledger is not data loss. It is a transaction or replication marker (readers
never see them), an entry compaction removed, or a chunk of a message reassembled at its last
chunk. Losses are found where they happen instead: the start of a range is re-read (its ledger
must still be there) and the end must be reached.

What a range must account for: a message reassembled from chunks belongs to the range that
holds its *first* chunk (both the range before and the range after agree on that, whatever
the reader sees), so a range whose end falls inside a chunk run reads on past its end until
the run completes. The holes tracked here say whether that can be the case.
"""

from __future__ import annotations

__all__ = ["Coverage", "Position"]

Position = tuple[int, int]  # (ledger, entry)


class Coverage:
    """Entries after ``start`` that no message read so far accounts for (``holes``). A
    message accounts for its own entry, and a chunked one for every entry from its first
    chunk to its last (other producers' messages between them account for themselves)."""

    def __init__(self, start: Position | None) -> None:
        self.high = start
        self.holes: list[tuple[int, int, int]] = []  # (ledger, first entry, last entry)

    def add(self, first: Position, last: Position) -> None:
        high = self.high
        if high is not None and first > high:
            if first[0] == high[0]:
                if first[1] > high[1] + 1:
                    self.holes.append((first[0], high[1] + 1, first[1] - 1))
            elif first[1] > 0:  # a new ledger: its entries before this one
                self.holes.append((first[0], 0, first[1] - 1))
        if self.holes:
            self._fill(first, last)
        if high is None or last > high:
            self.high = last

    def _fill(self, first: Position, last: Position) -> None:
        out = []
        for ledger, lo, hi in self.holes:
            if (ledger, hi) < first or (ledger, lo) > last:
                out.append((ledger, lo, hi))
                continue
            if (ledger, lo) < first:
                out.append((ledger, lo, first[1] - 1))
            if (ledger, hi) > last:
                out.append((ledger, last[1] + 1, hi))
        self.holes = out

    def open_before(self, end: Position) -> bool:
        """Whether an entry at or before ``end`` is not accounted for yet: a chunk run that
        started there may still complete."""
        if self.high is not None and self.high[0] == end[0] and self.high[1] < end[1]:
            return True
        return any((ledger, lo) <= end for ledger, lo, _ in self.holes)
