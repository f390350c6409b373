//! Which messages of one topic partition belong to a range of message ids (exclusive start,
//! inclusive end), read in order by a reader positioned at the start, and whether the range
//! has been read completely.
//!
//! Why no plain gap check: retention deletes whole ledgers, never entries inside one, so a
//! missing entry inside a ledger is not data loss. It is a transaction or replication marker
//! (readers never see them), an entry compaction removed, or a chunk of a message reassembled
//! at its last chunk. Losses are found where they happen instead: the start of a range is
//! re-read (its ledger must still be there) and the end must be reached. An end that is a
//! message (not a position between messages) must also be delivered: a read that jumps from
//! inside the range to a later ledger skipped the rest of the end's ledger, which happens when
//! the topic is deleted (and re-created by a producer or the reader itself) during the read.
//!
//! A message reassembled from chunks belongs to the range that holds its *first* chunk (the
//! range before and the range after agree on that, whatever the reader sees), so a range
//! whose end falls inside a chunk run reads on past its end until the run completes;
//! [`Coverage`] says whether that can be the case.

use crate::client::{Message, MessageId};

/// (ledger, entry).
pub type Position = (i64, i64);

/// (ledger, entry, batch index): the order of message ids within a partition.
pub type Key = (i64, i64, i32);

/// The key of an id.
pub fn key_of(id: &MessageId) -> Key {
    (id.ledger_id, id.entry_id, id.batch_index)
}

/// A chunk run is written back to back by one producer; past the end of a range, the read
/// looks this long (publish time) for runs that started inside the range to complete.
pub const CHUNK_RUN_WINDOW_MS: u64 = 10_000;

/// Entries after a start that no message read so far accounts for (holes). A message
/// accounts for its own entry, and a chunked one for every entry from its first chunk to its
/// last (other producers' messages between them account for themselves).
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    high: Option<Position>,
    /// (ledger, first entry, last entry)
    holes: Vec<(i64, i64, i64)>,
}

impl Coverage {
    /// Nothing accounted for after `start` (None: from the beginning of the topic).
    pub fn new(start: Option<Position>) -> Coverage {
        Coverage {
            high: start,
            holes: Vec::new(),
        }
    }

    /// A message whose first chunk is at `first` and whose last (or only) entry is `last`.
    pub fn add(&mut self, first: Position, last: Position) {
        if let Some(high) = self.high {
            if first > high {
                if first.0 == high.0 {
                    if first.1 > high.1 + 1 {
                        self.holes.push((first.0, high.1 + 1, first.1 - 1));
                    }
                } else if first.1 > 0 {
                    // a new ledger: its entries before this one
                    self.holes.push((first.0, 0, first.1 - 1));
                }
            }
        }
        if !self.holes.is_empty() {
            self.fill(first, last);
        }
        if self.high.is_none_or(|h| last > h) {
            self.high = Some(last);
        }
    }

    fn fill(&mut self, first: Position, last: Position) {
        let mut out = Vec::with_capacity(self.holes.len() + 1);
        for &(ledger, lo, hi) in &self.holes {
            if (ledger, hi) < first || (ledger, lo) > last {
                out.push((ledger, lo, hi));
                continue;
            }
            if (ledger, lo) < first {
                out.push((ledger, lo, first.1 - 1));
            }
            if (ledger, hi) > last {
                out.push((ledger, last.1 + 1, hi));
            }
        }
        self.holes = out;
    }

    /// Whether an entry at or before `end` is not accounted for yet: a chunk run that started
    /// there may still complete.
    pub fn open_before(&self, end: Position) -> bool {
        if let Some(h) = self.high {
            if h.0 == end.0 && h.1 < end.1 {
                return true;
            }
        }
        self.holes.iter().any(|&(ledger, lo, _)| (ledger, lo) <= end)
    }
}

/// The state of reading one range: feed it the messages in the order read ([`RangeScan::step`]).
#[derive(Debug, Clone)]
pub struct RangeScan {
    name: String,
    start: Option<MessageId>,
    start_key: Key,
    verify: bool,
    end: MessageId,
    end_key: Key,
    end_time: Option<u64>,
    coverage: Coverage,
    past_end_since: Option<u64>,
    reached_end: bool,
    /// Whether the end is a message that must be delivered (`Some`), and if it was.
    end_delivered: Option<bool>,
    done: bool,
    last_key: Key,
}

/// What one step found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Indexes of the messages that belong to the range.
    pub keep: Vec<usize>,
    /// Messages of the range are gone (the caller fails or logs, per its `failOnDataLoss`).
    pub loss: Option<String>,
}

impl RangeScan {
    /// The range of partition `name` after `start` (None: from `start_time`, positioned by
    /// the reader) up to `end`, stopping at the first message published at `end_time` or
    /// later. With `verify`, the reader starts *at* `start` (inclusive) and the first message
    /// must be `start` itself or in its ledger; else retention or a deleted topic removed
    /// messages of the range.
    pub fn new(name: &str, start: Option<MessageId>, verify: bool, end: MessageId, end_time: Option<u64>) -> RangeScan {
        let (start_key, coverage) = match &start {
            Some(s) => (
                key_of(s),
                Coverage::new((s.ledger_id >= 0).then_some((s.ledger_id, s.entry_id))),
            ),
            None => ((-2, -2, -2), Coverage::new(None)),
        };
        RangeScan {
            name: name.to_string(),
            verify: verify && start.is_some(),
            start,
            start_key,
            end_key: key_of(&end),
            end,
            end_time,
            coverage,
            past_end_since: None,
            reached_end: false,
            end_delivered: None,
            done: false,
            last_key: start_key,
        }
    }

    /// Makes the end a message the read must deliver: reaching a later ledger without it is
    /// data loss. Not for made-up ends (split boundaries) or compacted reads, which skip
    /// superseded messages legitimately.
    pub fn expect_end_message(mut self, expect: bool) -> RangeScan {
        self.end_delivered = expect.then_some(false);
        self
    }

    /// Whether the range is complete (or over: past `end_time`); later messages are not in it.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Whether a message at or after the end was read.
    pub fn reached_end(&self) -> bool {
        self.reached_end
    }

    /// The key of the last message kept (the start's before any).
    pub fn last_key(&self) -> Key {
        self.last_key
    }

    /// The end of the range.
    pub fn end(&self) -> &MessageId {
        &self.end
    }

    /// The messages of `msgs` (the next ones read, in order) that belong to the range.
    pub fn step<M: std::borrow::Borrow<Message>>(&mut self, msgs: &[M]) -> Step {
        let mut step = Step::default();
        let end_pos = (self.end.ledger_id, self.end.entry_id);
        for (i, m) in msgs.iter().enumerate() {
            if self.done {
                break;
            }
            let m = m.borrow();
            let id = &m.id;
            let k = key_of(id);
            if k < self.start_key || (k == self.start_key && !self.verify) {
                continue;
            }
            if self.verify {
                // the first message at or after the start
                self.verify = false;
                if k == self.start_key {
                    continue;
                }
                if let Some(start) = &self.start {
                    if id.ledger_id != start.ledger_id {
                        step.loss = Some(format!(
                            "{}: the range starts after {start}, which is gone (the read resumes at {id}): \
                             retention or a deleted topic removed messages of the range",
                            self.name
                        ));
                    }
                }
            }
            let pos = (id.ledger_id, id.entry_id);
            if pos == end_pos {
                self.end_delivered = self.end_delivered.map(|_| true);
            } else if self.end_delivered == Some(false) && id.ledger_id > end_pos.0 && !self.reached_end {
                self.end_delivered = Some(true); // reported once
                step.loss.get_or_insert_with(|| {
                    format!(
                        "{}: the read went from {:?} to {id} without reaching the end of its range {}: \
                         the rest of its ledger is gone (was the topic deleted during the read?)",
                        self.name, self.last_key, self.end
                    )
                });
            }
            let first = m.first_chunk.as_deref().copied();
            self.coverage.add(first.unwrap_or(pos), pos);
            let published = m.publish_time();
            if self.end_time.is_some_and(|t| published >= t) {
                self.done = true;
                break;
            }
            let first_key = first.map_or(k, |(l, e)| (l, e, -1));
            if first_key <= self.end_key {
                if first_key > self.start_key {
                    step.keep.push(i);
                    self.last_key = k;
                }
            } else if self.past_end_since.is_none() {
                self.past_end_since = Some(published);
            }
            if k >= self.end_key {
                self.reached_end = true;
                if !self.coverage.open_before(end_pos) {
                    self.done = true;
                } else if self
                    .past_end_since
                    .is_some_and(|since| published.saturating_sub(since) > CHUNK_RUN_WINDOW_MS)
                {
                    // whatever is still open there is not a chunk run of this range
                    self.done = true;
                }
            }
        }
        step
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
