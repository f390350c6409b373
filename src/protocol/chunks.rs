//! Reassembly of chunked messages, without I/O: a message too large for one entry arrives as
//! numbered chunks, possibly interleaved with other messages, duplicated by a producer that
//! resent after a reconnect, or cut short. This follows the Java client's `ConsumerImpl` chunk
//! handling, with two differences the Java client gets wrong: duplicates never discard the
//! message in progress, and every entry that can no longer complete is handed back so the
//! consumer can ack or dead-letter it instead of leaving a hole in the subscription.
//!
//! Messages in progress are keyed by `uuid` alone, as the Java client keys them: producers build
//! it from their (broker-unique) producer name and the message's sequence id, so it already
//! names one message of one producer, and chunk metadata carries nothing else to key on.
//!
//! Memory: a message in progress holds the chunks it received and nothing more (no reservation
//! from the declared total), at most `min(total_size, max_message_size)` bytes of them, and at
//! most `max_pending` messages are in progress; so [`ChunkAssembler::buffered_bytes`] never
//! exceeds `max_pending * max_message_size`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

/// A stored entry: `(ledger_id, entry_id)`.
pub type EntryId = (u64, u64);

/// Entries of a message that can never complete, and why: the caller acks or dead-letters them.
pub type Abandonment = (Vec<EntryId>, &'static str);

/// Bounds on reassembly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLimits {
    /// Messages reassembled at once; starting one more evicts the oldest (the Java client's
    /// `maxPendingChunkedMessage`, default 10). 0 counts as 1: no limit would leave memory
    /// unbounded.
    pub max_pending: usize,
    /// How long an incomplete message may wait for its next chunks (the Java client's
    /// `expireTimeOfIncompleteChunkedMessage`, default 60 s), counted from its first chunk.
    pub expiry: Duration,
    /// The largest reassembled (still compressed) message, whatever its chunks declare.
    pub max_message_size: usize,
}

/// One chunk, as its entry's metadata describes it.
#[derive(Debug, Clone)]
pub struct ChunkIn<'a> {
    /// The message's `uuid` (`MessageMetadata.uuid`).
    pub uuid: &'a str,
    /// This chunk's index (`chunk_id`), from 0.
    pub chunk_id: i32,
    /// How many chunks the message has (`num_chunks_from_msg`).
    pub num_chunks: i32,
    /// The whole message's size in bytes (`total_chunk_msg_size`); pass -1 when absent.
    pub total_size: i32,
    /// The entry that carried this chunk.
    pub entry: EntryId,
    /// The chunk's bytes.
    pub data: Bytes,
}

/// What became of a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkOutcome {
    /// Stored; wait for more.
    Pending,
    /// The whole payload (still compressed, as the producer sent it) and every chunk's entry, in
    /// chunk order. Acking the message means acking all of them.
    Complete {
        /// The reassembled payload.
        data: Bytes,
        /// The entries of chunks `0..num_chunks`.
        entries: Vec<EntryId>,
    },
    /// A chunk already taken (its id is below the next one expected) at another entry: the caller
    /// acks this entry and skips it. (The same entry redelivered is `Pending`: it is held.)
    Duplicate,
    /// A chunk after the first with no message in progress (its start was abandoned, lost, or
    /// precedes where the subscription began): the caller acks or skips it.
    Orphan,
    /// The message can never complete (a gap, an invalid or inconsistent header, more bytes
    /// than its declared size or `max_message_size`): the caller acks or dead-letters these
    /// entries, this chunk's included.
    Abandoned {
        /// Every entry of the message received so far, this one last.
        entries: Vec<EntryId>,
        /// Why, for the log.
        reason: &'static str,
    },
}

/// A message whose chunks are still arriving.
#[derive(Debug)]
struct Partial {
    num_chunks: i32,
    total_size: i32,
    /// Chunks kept as received (sharing their frames' memory), joined once complete.
    chunks: Vec<Bytes>,
    entries: Vec<EntryId>,
    len: usize,
    started: Instant,
    /// Start order, so eviction takes the oldest even when two share an `Instant`.
    serial: u64,
}

impl Partial {
    fn next(&self) -> i32 {
        self.entries.len() as i32
    }
}

/// Reassembles chunked messages; see the module documentation for its rules and bounds.
#[derive(Debug)]
pub struct ChunkAssembler {
    limits: ChunkLimits,
    partials: HashMap<String, Partial>,
    buffered: usize,
    serial: u64,
    /// The last [`RECENTLY_COMPLETED`] messages completed, with their entries: a chunk of one of
    /// them at an entry it does not hold is a producer's resend (after a reconnect, with
    /// deduplication off) of a message already delivered.
    completed: std::collections::VecDeque<(String, Vec<EntryId>)>,
}

/// How many completed messages [`ChunkAssembler`] remembers to recognise resends: a producer
/// resends only what was unacknowledged when its connection dropped, so a resend follows the
/// original closely.
const RECENTLY_COMPLETED: usize = 64;

const INVALID: &str = "invalid chunk header (num_chunks, chunk_id or total size out of range)";
const INCONSISTENT: &str = "chunk header disagrees with the message's earlier chunks";
const TOO_LARGE: &str = "chunked message larger than max_message_size";
const OVERSIZED: &str = "chunks exceed the message's declared total size";
const UNDERSIZED: &str = "chunks add up to less than the message's declared total size";
const GAP: &str = "chunk missing: a later chunk arrived before it";
pub const EVICTED: &str = "too many chunked messages in progress; the oldest was dropped";
/// The reason reported for a message replaced by its own chunk 0 at another entry: a producer's
/// resend, not corruption, so the consumer acks those entries without counting them as corrupt.
pub const RESTARTED: &str = "message restarted from its first chunk at another entry";
const EXPIRED: &str = "chunked message incomplete past its expiry";

impl ChunkAssembler {
    /// An assembler with nothing in progress.
    pub fn new(limits: ChunkLimits) -> Self {
        ChunkAssembler {
            limits,
            partials: HashMap::new(),
            buffered: 0,
            serial: 0,
            completed: std::collections::VecDeque::new(),
        }
    }

    /// Takes one chunk. Returns what became of it, and the messages dropped to make room for it
    /// or replaced by it (their entries are to be acked or dead-lettered like `Abandoned`).
    ///
    /// Chunk 0 of a message already in progress restarts it. When it arrives at the entry that
    /// started the old attempt, it is the broker redelivering after a resubscribe: the old
    /// entries are coming again and nothing is reported. At another entry, the producer resent
    /// the message after a reconnect, and the old attempt's entries are reported, since nothing
    /// else would ever ack them.
    pub fn push(&mut self, chunk: ChunkIn<'_>, now: Instant) -> (ChunkOutcome, Vec<Abandonment>) {
        let mut dropped = Vec::new();
        let valid = chunk.num_chunks > 0 && (0..chunk.num_chunks).contains(&chunk.chunk_id) && chunk.total_size >= 0;
        if !valid {
            return (self.abandon(chunk.uuid, chunk.entry, INVALID), dropped);
        }
        let total = chunk.total_size as usize;
        if !self.partials.contains_key(chunk.uuid) || chunk.chunk_id == 0 {
            let resend = self
                .completed
                .iter()
                .any(|(uuid, entries)| uuid == chunk.uuid && !entries.contains(&chunk.entry));
            if resend {
                return (ChunkOutcome::Duplicate, dropped);
            }
        }
        if chunk.chunk_id == 0 {
            if let Some(old) = self.take(chunk.uuid) {
                if old.entries.first() != Some(&chunk.entry) {
                    dropped.push((old.entries, RESTARTED));
                }
            }
            if total > self.limits.max_message_size {
                return (abandoned(vec![chunk.entry], TOO_LARGE), dropped);
            }
            if chunk.data.len() > total {
                return (abandoned(vec![chunk.entry], OVERSIZED), dropped);
            }
            if chunk.num_chunks == 1 {
                let outcome = if chunk.data.len() == total {
                    self.remember(chunk.uuid, vec![chunk.entry]);
                    ChunkOutcome::Complete {
                        data: chunk.data,
                        entries: vec![chunk.entry],
                    }
                } else {
                    abandoned(vec![chunk.entry], UNDERSIZED)
                };
                return (outcome, dropped);
            }
            while self.partials.len() >= self.limits.max_pending.max(1) {
                dropped.push((self.evict_oldest(), EVICTED));
            }
            self.serial += 1;
            self.buffered += chunk.data.len();
            self.partials.insert(
                chunk.uuid.to_owned(),
                Partial {
                    num_chunks: chunk.num_chunks,
                    total_size: chunk.total_size,
                    len: chunk.data.len(),
                    chunks: vec![chunk.data],
                    entries: vec![chunk.entry],
                    started: now,
                    serial: self.serial,
                },
            );
            return (ChunkOutcome::Pending, dropped);
        }
        let Some(partial) = self.partials.get_mut(chunk.uuid) else {
            return (ChunkOutcome::Orphan, dropped);
        };
        if partial.num_chunks != chunk.num_chunks || partial.total_size != chunk.total_size {
            return (self.abandon(chunk.uuid, chunk.entry, INCONSISTENT), dropped);
        }
        if chunk.chunk_id < partial.next() {
            // The very entry this message already holds, redelivered: acking it now would ack
            // part of a message not yet delivered, and completing the message acks it anyway.
            if partial.entries[chunk.chunk_id as usize] == chunk.entry {
                return (ChunkOutcome::Pending, dropped);
            }
            return (ChunkOutcome::Duplicate, dropped);
        }
        if chunk.chunk_id > partial.next() {
            return (self.abandon(chunk.uuid, chunk.entry, GAP), dropped);
        }
        // `total` is at most `max_message_size`: checked when chunk 0 was taken.
        if partial.len + chunk.data.len() > total {
            return (self.abandon(chunk.uuid, chunk.entry, OVERSIZED), dropped);
        }
        partial.len += chunk.data.len();
        partial.chunks.push(chunk.data);
        partial.entries.push(chunk.entry);
        self.buffered += partial.chunks.last().map_or(0, Bytes::len);
        if chunk.chunk_id + 1 < chunk.num_chunks {
            return (ChunkOutcome::Pending, dropped);
        }
        let done = self.take(chunk.uuid).expect("in progress");
        if done.len != total {
            return (abandoned(done.entries, UNDERSIZED), dropped);
        }
        let mut data = BytesMut::with_capacity(done.len);
        for part in &done.chunks {
            data.extend_from_slice(part);
        }
        self.remember(chunk.uuid, done.entries.clone());
        let outcome = ChunkOutcome::Complete {
            data: data.freeze(),
            entries: done.entries,
        };
        (outcome, dropped)
    }

    /// Drops the messages whose first chunk came `expiry` or longer before `now`, returning
    /// their entries, oldest first.
    pub fn expire(&mut self, now: Instant) -> Vec<Abandonment> {
        let expiry = self.limits.expiry;
        let mut stale: Vec<(u64, String)> = self
            .partials
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.started) >= expiry)
            .map(|(uuid, p)| (p.serial, uuid.clone()))
            .collect();
        stale.sort_unstable();
        stale
            .into_iter()
            .filter_map(|(_, uuid)| self.take(&uuid))
            .map(|p| (p.entries, EXPIRED))
            .collect()
    }

    /// When the oldest message in progress expires; `None` when nothing is in progress, or
    /// when the expiry is too far off to name (it never comes; a deadline in the past would
    /// have the caller spin).
    pub fn next_deadline(&self) -> Option<Instant> {
        let oldest = self.partials.values().map(|p| p.started).min()?;
        oldest.checked_add(self.limits.expiry)
    }

    /// Forgets every message in progress without reporting it (after a seek, the broker
    /// delivers from the new position and none of them will continue).
    pub fn clear(&mut self) {
        self.partials.clear();
        self.completed.clear();
        self.buffered = 0;
    }

    /// Forgets the messages in progress but not the recently completed ones (after a
    /// reconnect: the broker redelivers from the first unacked chunk, and a producer's resend
    /// of a completed message may still follow).
    pub fn clear_in_progress(&mut self) {
        self.partials.clear();
        self.buffered = 0;
    }

    fn remember(&mut self, uuid: &str, entries: Vec<EntryId>) {
        if self.completed.len() >= RECENTLY_COMPLETED {
            self.completed.pop_front();
        }
        self.completed.push_back((uuid.to_owned(), entries));
    }

    /// Messages in progress.
    pub fn pending(&self) -> usize {
        self.partials.len()
    }

    /// Bytes held by messages in progress.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    fn take(&mut self, uuid: &str) -> Option<Partial> {
        let p = self.partials.remove(uuid)?;
        self.buffered -= p.len;
        Some(p)
    }

    /// Ends the message `uuid` (if in progress) together with the chunk at `entry`.
    fn abandon(&mut self, uuid: &str, entry: EntryId, reason: &'static str) -> ChunkOutcome {
        let mut entries = self.take(uuid).map(|p| p.entries).unwrap_or_default();
        entries.push(entry);
        abandoned(entries, reason)
    }

    fn evict_oldest(&mut self) -> Vec<EntryId> {
        let oldest = self
            .partials
            .iter()
            .min_by_key(|(_, p)| p.serial)
            .map(|(uuid, _)| uuid.clone())
            .expect("called with messages in progress");
        self.take(&oldest).expect("present").entries
    }
}

fn abandoned(entries: Vec<EntryId>, reason: &'static str) -> ChunkOutcome {
    ChunkOutcome::Abandoned { entries, reason }
}

#[cfg(test)]
#[path = "chunks_tests.rs"]
mod tests;
