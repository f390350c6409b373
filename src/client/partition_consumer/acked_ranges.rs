//! The entries whose acks the broker confirmed, kept for the consumer's life as ranges of
//! entry ids per ledger. A broker confirms an ack before it stores it (the cursor is persisted
//! at most once a second), so a broker killed in between sends the entry again to whoever
//! subscribes next: this consumer knows it acked the entry and drops the copy instead of
//! handing it to the application twice (and acks it again, so the broker stores it this time).
//!
//! Memory is bounded by ranges, not ids: acks of consecutive entries merge. Past
//! [`MAX_RANGES`] the lowest ranges are forgotten first (the oldest acks, least likely to come
//! back). Pure bookkeeping: no I/O, no clock.

use std::collections::BTreeMap;

/// `(ledger, entry)`: one stored entry (a whole batch).
pub(super) type EntryKey = (i64, i64);

/// Ranges kept per partition before the oldest are forgotten: about 4 MB at most.
pub(super) const MAX_RANGES: usize = 100_000;

#[derive(Default)]
pub(super) struct AckedRanges {
    /// `(ledger, first entry)` -> last entry, inclusive; ranges never touch or overlap.
    ranges: BTreeMap<EntryKey, i64>,
}

impl AckedRanges {
    /// Adds one confirmed entry.
    pub fn insert(&mut self, (ledger, entry): EntryKey) {
        if self.contains((ledger, entry)) {
            return;
        }
        let mut first = entry;
        let mut last = entry;
        // The range ending right before it, in the same ledger.
        if let Some((&(l, start), &end)) = self.ranges.range(..(ledger, entry)).next_back() {
            if l == ledger && end == entry - 1 {
                first = start;
                self.ranges.remove(&(l, start));
            }
        }
        // The range starting right after it.
        if let Some(end) = self.ranges.remove(&(ledger, entry + 1)) {
            last = end;
        }
        self.ranges.insert((ledger, first), last);
        while self.ranges.len() > MAX_RANGES {
            self.ranges.pop_first();
        }
    }

    /// Whether the entry was confirmed.
    pub fn contains(&self, (ledger, entry): EntryKey) -> bool {
        self.ranges
            .range(..=(ledger, entry))
            .next_back()
            .is_some_and(|(&(l, _), &end)| l == ledger && entry <= end)
    }

    /// How many ranges are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_entries_merge_into_one_range() {
        let mut r = AckedRanges::default();
        for e in [3, 1, 2, 5, 4] {
            r.insert((7, e));
        }
        assert_eq!(r.len(), 1);
        assert!((1..=5).all(|e| r.contains((7, e))));
        assert!(!r.contains((7, 0)) && !r.contains((7, 6)) && !r.contains((8, 3)));
    }

    #[test]
    fn ledgers_do_not_merge_and_gaps_stay_gaps() {
        let mut r = AckedRanges::default();
        r.insert((7, 9));
        r.insert((8, 0));
        r.insert((8, 2));
        assert_eq!(r.len(), 3);
        assert!(!r.contains((8, 1)));
        r.insert((8, 1));
        assert_eq!(r.len(), 2);
        r.insert((8, 1));
        assert_eq!(r.len(), 2, "inserting twice changes nothing");
    }

    #[test]
    fn past_the_limit_the_oldest_ranges_go() {
        let mut r = AckedRanges::default();
        for e in 0..(MAX_RANGES as i64 + 10) {
            r.insert((1, e * 2)); // never adjacent: one range each
        }
        assert_eq!(r.len(), MAX_RANGES);
        assert!(!r.contains((1, 0)), "the lowest went first");
        assert!(r.contains((1, (MAX_RANGES as i64 + 9) * 2)));
    }
}
