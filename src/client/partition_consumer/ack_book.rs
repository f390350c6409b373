//! What the application has acknowledged on one partition, kept until the broker has it.
//!
//! An ack lives here in three stages: held (recorded, not yet sent), unconfirmed (sent with a
//! request id, no `AckResponse` yet) and confirmed (forgotten). A connection that dies takes
//! its unconfirmed acks with it, so they go back to held and are sent again on the next one,
//! before its first `Flow`; the broker treats a repeated ack as harmless. A message an ack
//! covers that the broker sends again is a duplicate: [`AckBook::covers`] tells the consumer to
//! drop it on arrival (the Java client's `isDuplicate`), before the ack is confirmed and after
//! (a broker can confirm an ack and die before storing it; [`super::acked_ranges`] remembers
//! confirmed entries, and such a copy is acked again). Batch entries
//! acked a message at a time keep their bitsets across reconnects, so a partly acked entry is
//! still acked in full once its last message is.
//!
//! Pure bookkeeping: no I/O, no clock.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::protocol::pb::{command_ack::AckType, MessageIdData};

use super::super::message::MessageId;
use super::acked_ranges::AckedRanges;
pub(super) use super::acked_ranges::EntryKey;

/// Acks to send as one `CommandAck` each.
pub(super) type AckBatch = Vec<(AckType, Vec<MessageIdData>)>;

#[derive(Default)]
pub(super) struct AckBook {
    held_individual: Vec<MessageIdData>,
    held_cumulative: Option<MessageId>,
    /// Sent and not yet confirmed, by the token the actor gave the send.
    unconfirmed: HashMap<u64, AckBatch>,
    /// Whole entries acked and not yet confirmed (held or unconfirmed), with how many acks of
    /// each are outstanding.
    pending_entries: HashMap<EntryKey, u32, KeyHash>,
    /// The same for acks of part of a batch entry (batch-index acks).
    pending_partial: HashMap<EntryKey, u32, KeyHash>,
    /// The furthest cumulative ack the broker confirmed, as sent.
    cumulative_confirmed: Option<MessageId>,
    /// Whole entries whose individual acks the broker confirmed, for the consumer's life.
    acked: AckedRanges,
    /// Batch entries partly acked: bit i set = index i not yet acked.
    batches: HashMap<EntryKey, Vec<u64>, KeyHash>,
    /// The furthest cumulative ack the application made (with its batch index): everything at
    /// or before it is acked for good.
    cumulative: Option<MessageId>,
    /// The highest entry any ack here touches: arrivals beyond it need no lookup.
    highest: Option<EntryKey>,
    /// Batch-index acks: where in `held_individual` the held (unsent) ack of part of an entry
    /// is. A later ack of the same entry updates it rather than adding one: a consumer acking a
    /// batch of 1000 message by message sends one ack of it per flush, not 999.
    held_partial: HashMap<EntryKey, usize, KeyHash>,
}

impl AckBook {
    /// Books the application's ack of `id` (cumulative: of everything up to it).
    pub fn record(&mut self, id: &MessageId, cumulative: bool, batch_index_ack: bool) {
        let key = (id.ledger_id, id.entry_id);
        if !cumulative && self.acked.contains(key) {
            // Acked and confirmed before (a second ack of it, a retried receipt): nothing to
            // send, and a new bitset for its batch would wait for the rest of it for ever.
            return;
        }
        self.raise_highest(key);
        if cumulative {
            let inner_of_batch = id.batch_index >= 0 && id.batch_size > 0 && id.batch_index < id.batch_size - 1;
            let target = if inner_of_batch && !batch_index_ack {
                // The broker cannot ack part of an entry: ack up to the previous entry only.
                MessageId::new(id.ledger_id, id.entry_id - 1, id.partition, -1)
            } else {
                let mut t = id.clone();
                if !inner_of_batch {
                    t.batch_index = -1;
                }
                t
            };
            self.batches.retain(|k, _| *k > key);
            if self.held_cumulative.as_ref().is_none_or(|c| *c < target) {
                self.held_cumulative = Some(target);
            }
            let mut covered = id.clone();
            if !inner_of_batch {
                covered.batch_index = -1;
            }
            if self.cumulative.as_ref().is_none_or(|c| cumulative_before(c, &covered)) {
                self.cumulative = Some(covered);
            }
        } else if id.batch_index >= 0 && id.batch_size > 1 {
            let size = id.batch_size as usize;
            let bits = self.batches.entry(key).or_insert_with(|| full_bitset(size));
            let i = id.batch_index as usize;
            if i < size && i / 64 < bits.len() {
                bits[i / 64] &= !(1u64 << (i % 64));
            }
            if bits.iter().all(|w| *w == 0) {
                self.batches.remove(&key);
                match self.held_partial.remove(&key) {
                    // The held ack of part of it becomes the ack of all of it.
                    Some(at) => {
                        self.held_individual[at] = id.entry_data();
                        self.unpend_partial(key);
                        *self.pending_entries.entry(key).or_insert(0) += 1;
                    }
                    None => self.hold_entry(id.entry_data()),
                }
            } else if batch_index_ack {
                let ack_set = bits.iter().map(|w| *w as i64).collect();
                match self.held_partial.get(&key) {
                    Some(&at) => self.held_individual[at].ack_set = ack_set,
                    None => {
                        let mut data = id.entry_data();
                        data.ack_set = ack_set;
                        data.batch_size = Some(id.batch_size);
                        *self.pending_partial.entry(key).or_insert(0) += 1;
                        self.held_partial.insert(key, self.held_individual.len());
                        self.held_individual.push(data);
                    }
                }
            }
        } else {
            self.hold_entry(id.entry_data());
        }
    }

    /// Books an ack of a whole entry the application never saw as a message (the earlier
    /// chunks of a chunked message).
    pub fn record_entry(&mut self, entry: MessageIdData) {
        self.raise_highest((entry.ledger_id as i64, entry.entry_id as i64));
        self.hold_entry(entry);
    }

    fn hold_entry(&mut self, data: MessageIdData) {
        *self
            .pending_entries
            .entry((data.ledger_id as i64, data.entry_id as i64))
            .or_insert(0) += 1;
        self.held_individual.push(data);
    }

    fn raise_highest(&mut self, key: EntryKey) {
        if self.highest.is_none_or(|h| h < key) {
            self.highest = Some(key);
        }
    }

    fn unpend_partial(&mut self, key: EntryKey) {
        if let Some(n) = self.pending_partial.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.pending_partial.remove(&key);
            }
        }
    }

    /// Whether acks wait to be sent.
    pub fn has_held(&self) -> bool {
        !self.held_individual.is_empty() || self.held_cumulative.is_some()
    }

    /// Held individual acks: the ack-group limit counts these.
    pub fn held_len(&self) -> usize {
        self.held_individual.len()
    }

    /// Everything held, as the commands to send; they become unconfirmed with [`AckBook::sent`].
    pub fn take_held(&mut self) -> AckBatch {
        self.held_partial.clear();
        let mut out = Vec::new();
        if !self.held_individual.is_empty() {
            out.push((AckType::Individual, std::mem::take(&mut self.held_individual)));
        }
        if let Some(id) = self.held_cumulative.take() {
            out.push((AckType::Cumulative, vec![cumulative_data(&id)]));
        }
        out
    }

    /// `acks` are on their way under `token`.
    pub fn sent(&mut self, token: u64, acks: AckBatch) {
        self.unconfirmed.insert(token, acks);
    }

    /// `acks` could not be sent at all: hold them again.
    pub fn unsent(&mut self, acks: AckBatch) {
        for (kind, ids) in acks {
            match kind {
                AckType::Cumulative => {
                    for d in ids {
                        let id = MessageId::from_data(&d);
                        if self.held_cumulative.as_ref().is_none_or(|c| *c < id) {
                            self.held_cumulative = Some(id);
                        }
                    }
                }
                AckType::Individual => self.held_individual.extend(ids),
            }
        }
    }

    /// The broker answered the acks sent under `token`: confirmed, or refused (held again).
    pub fn settled(&mut self, token: u64, confirmed: bool) {
        let Some(acks) = self.unconfirmed.remove(&token) else {
            // Already moved back to held by a reconnect, or dropped by a seek.
            return;
        };
        if !confirmed {
            self.unsent(acks);
            return;
        }
        for (kind, ids) in acks {
            if kind == AckType::Cumulative {
                for d in &ids {
                    let id = MessageId::from_data(d);
                    if self.cumulative_confirmed.as_ref().is_none_or(|c| *c < id) {
                        self.cumulative_confirmed = Some(id);
                    }
                }
                continue;
            }
            for d in &ids {
                let key = (d.ledger_id as i64, d.entry_id as i64);
                if d.ack_set.is_empty() {
                    self.acked.insert(key);
                }
                let pending = if d.ack_set.is_empty() {
                    &mut self.pending_entries
                } else {
                    &mut self.pending_partial
                };
                if let Some(n) = pending.get_mut(&key) {
                    *n -= 1;
                    if *n == 0 {
                        pending.remove(&key);
                    }
                }
            }
        }
    }

    /// Whether the broker has confirmed the application's ack of `id` (`cumulative`: of
    /// everything up to it), by whichever of its sends, on whichever connection. A message of
    /// a batch is confirmed only with its whole entry, unless `batch_index_ack` sends it alone.
    pub fn confirmed(&self, id: &MessageId, cumulative: bool, batch_index_ack: bool) -> bool {
        if self
            .cumulative_confirmed
            .as_ref()
            .is_some_and(|c| position_covers(c, id))
        {
            return true;
        }
        if cumulative {
            return false;
        }
        let key = (id.ledger_id, id.entry_id);
        !(self.pending_entries.contains_key(&key)
            || self.pending_partial.contains_key(&key)
            || (!batch_index_ack && self.batches.contains_key(&key)))
    }

    /// The connection is gone, and with it any answer to what was sent on it: everything
    /// unconfirmed is held again, to be sent on the next connection.
    pub fn detached(&mut self) {
        let acks: Vec<AckBatch> = self.unconfirmed.drain().map(|(_, a)| a).collect();
        for a in acks {
            self.unsent(a);
        }
    }

    /// Whether the application already acked the message `id`: the broker sent it again
    /// before it had the ack.
    pub fn covers(&self, id: &MessageId) -> bool {
        let key = (id.ledger_id, id.entry_id);
        if self.highest.is_none_or(|h| key > h) {
            return false;
        }
        if self.acked_before(id) {
            return true;
        }
        if let Some(c) = &self.cumulative {
            if key < (c.ledger_id, c.entry_id)
                || (key == (c.ledger_id, c.entry_id) && (c.batch_index < 0 || id.batch_index <= c.batch_index))
            {
                return true;
            }
        }
        if self.pending_entries.contains_key(&key) {
            return true;
        }
        if id.batch_index >= 0 {
            if let Some(bits) = self.batches.get(&key) {
                let i = id.batch_index as usize;
                return bits.get(i / 64).is_some_and(|w| w & (1u64 << (i % 64)) == 0);
            }
        }
        false
    }

    /// Whether the broker confirmed an ack covering `id` already (and forgot it, when it sends
    /// `id` again): a whole-entry ack, or a cumulative one.
    pub fn acked_before(&self, id: &MessageId) -> bool {
        self.acked.contains((id.ledger_id, id.entry_id))
            || self
                .cumulative_confirmed
                .as_ref()
                .is_some_and(|c| position_covers(c, id))
    }

    /// Acks again what covers `id`, whose confirmed ack the broker lost.
    pub fn ack_again(&mut self, id: &MessageId) {
        if self.acked.contains((id.ledger_id, id.entry_id)) {
            self.hold_entry(id.entry_data());
        } else if let Some(c) = self.cumulative_confirmed.clone().filter(|c| position_covers(c, id)) {
            if self.held_cumulative.as_ref().is_none_or(|h| *h < c) {
                self.held_cumulative = Some(c);
            }
        }
    }

    /// A seek moves the subscription: what was acked before it may legitimately come again.
    /// Acks sent before the seek reached the broker before it (one connection, in order).
    pub fn clear(&mut self) {
        *self = AckBook::default();
    }

    /// Partly acked batch entries (for tests and stats).
    #[cfg(test)]
    pub fn partial_batches(&self) -> usize {
        self.batches.len()
    }
}

/// Whether cumulative position `a` is strictly before `b` (a batch index of -1 = whole entry).
fn cumulative_before(a: &MessageId, b: &MessageId) -> bool {
    let whole = |i: i32| if i < 0 { i32::MAX } else { i };
    (a.ledger_id, a.entry_id, whole(a.batch_index)) < (b.ledger_id, b.entry_id, whole(b.batch_index))
}

/// Whether a cumulative ack through `c` (as sent: a batch index only with batch-index acks)
/// covers the message `id`.
fn position_covers(c: &MessageId, id: &MessageId) -> bool {
    let (through, at) = ((c.ledger_id, c.entry_id), (id.ledger_id, id.entry_id));
    through > at || (through == at && (c.batch_index < 0 || (id.batch_index >= 0 && id.batch_index <= c.batch_index)))
}

/// The `MessageIdData` of a cumulative ack through `id`. Through a message inside a batch
/// (batch-index acks only) it names the entry with the indexes after it still set: without
/// them the broker would take the whole entry, and the batch's later messages with it.
fn cumulative_data(id: &MessageId) -> MessageIdData {
    let mut d = id.entry_data();
    if id.batch_index >= 0 && id.batch_size > 0 {
        let mut bits = full_bitset(id.batch_size as usize);
        for i in 0..=(id.batch_index as usize).min(id.batch_size as usize - 1) {
            bits[i / 64] &= !(1u64 << (i % 64));
        }
        d.ack_set = bits.iter().map(|w| *w as i64).collect();
        d.batch_size = Some(id.batch_size);
        d.batch_index = Some(id.batch_index);
    }
    d
}

pub(super) fn full_bitset(size: usize) -> Vec<u64> {
    let mut bits = vec![u64::MAX; size.div_ceil(64)];
    if size % 64 != 0 {
        *bits.last_mut().expect("non-empty") = (1u64 << (size % 64)) - 1;
    }
    bits
}

/// Entry keys are two small integers chosen by the broker, not by an attacker who gains from
/// collisions; a multiply-rotate hash is several times cheaper than SipHash on the ack path.
#[derive(Default)]
pub(super) struct EntryHasher(u64);

impl Hasher for EntryHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type KeyHash = BuildHasherDefault<EntryHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entry: i64, index: i32, size: i32) -> MessageId {
        let mut m = MessageId::new(7, entry, -1, index);
        m.batch_size = size;
        m
    }

    /// A book that has recorded a whole-entry ack of each `(entry, cumulative)`.
    fn acked(entries: &[(i64, bool)]) -> AckBook {
        let mut book = AckBook::default();
        for &(entry, cumulative) in entries {
            book.record(&id(entry, -1, 0), cumulative, false);
        }
        book
    }

    /// Sends what the book holds as request `request_id`.
    fn send_held(book: &mut AckBook, request_id: u64) {
        let acks = book.take_held();
        book.sent(request_id, acks);
    }

    #[test]
    fn bitsets_cover_exactly_the_batch() {
        assert_eq!(full_bitset(3), vec![0b111]);
        assert_eq!(full_bitset(64), vec![u64::MAX]);
        assert_eq!(full_bitset(65), vec![u64::MAX, 1]);
    }

    #[test]
    fn an_ack_covers_its_message_before_and_after_it_is_confirmed() {
        let mut book = acked(&[(1, false)]);
        assert!(book.covers(&id(1, -1, 0)));
        assert!(!book.covers(&id(2, -1, 0)));
        let acks = book.take_held();
        assert_eq!(acks.len(), 1);
        book.sent(1, acks);
        assert!(book.covers(&id(1, -1, 0)), "sent but unconfirmed still covers");
        assert!(!book.acked_before(&id(1, -1, 0)));
        book.settled(1, true);
        assert!(book.covers(&id(1, -1, 0)), "confirmed: covered for good");
        assert!(book.acked_before(&id(1, -1, 0)));
        assert!(!book.has_held());
    }

    #[test]
    fn unconfirmed_acks_are_held_again_when_the_connection_goes() {
        let mut book = acked(&[(1, false), (3, true)]);
        send_held(&mut book, 9);
        assert!(!book.has_held());
        book.detached();
        let again = book.take_held();
        assert_eq!(again.len(), 2, "individual and cumulative both resent: {again:?}");
        // The answer to the old connection's request arrives late: ignored.
        book.settled(9, true);
        assert!(book.covers(&id(1, -1, 0)));
    }

    #[test]
    fn refused_acks_are_held_again() {
        let mut book = acked(&[(1, false)]);
        send_held(&mut book, 1);
        book.settled(1, false);
        assert!(book.has_held());
        assert!(book.covers(&id(1, -1, 0)));
    }

    #[test]
    fn cumulative_ack_covers_everything_before_it_for_good() {
        let mut book = AckBook::default();
        book.record(&id(5, 2, 4), true, false);
        assert!(book.covers(&id(4, 3, 4)));
        assert!(book.covers(&id(5, 0, 4)));
        assert!(book.covers(&id(5, 2, 4)));
        assert!(!book.covers(&id(5, 3, 4)));
        // Only the entries before the partly acked one go to the broker.
        let acks = book.take_held();
        assert_eq!(acks[0].0, AckType::Cumulative);
        assert_eq!(acks[0].1[0].entry_id, 4);
        book.sent(1, acks);
        book.settled(1, true);
        assert!(book.covers(&id(3, -1, 0)), "cumulative coverage survives confirmation");
    }

    #[test]
    fn a_partly_acked_batch_is_acked_whole_after_reconnects() {
        let mut book = AckBook::default();
        book.record(&id(1, 0, 3), false, false);
        book.record(&id(1, 2, 3), false, false);
        assert!(!book.has_held(), "nothing to send until the whole entry is acked");
        book.detached();
        assert_eq!(book.partial_batches(), 1, "bitset survives the reconnect");
        assert!(book.covers(&id(1, 0, 3)));
        assert!(!book.covers(&id(1, 1, 3)));
        book.record(&id(1, 1, 3), false, false);
        let acks = book.take_held();
        assert_eq!(acks[0].1.len(), 1);
        assert!(acks[0].1[0].ack_set.is_empty(), "whole-entry ack");
    }

    #[test]
    fn batch_index_acks_send_the_remaining_bits() {
        let mut book = AckBook::default();
        book.record(&id(1, 1, 3), false, true);
        let acks = book.take_held();
        assert_eq!(acks[0].1[0].ack_set, vec![0b101]);
        assert!(book.covers(&id(1, 1, 3)));
    }

    #[test]
    fn out_of_range_batch_index_is_harmless() {
        let mut book = AckBook::default();
        book.record(&id(1, 90, 3), false, false);
        book.record(&id(1, i32::MAX, 3), false, false);
        assert!(!book.covers(&id(1, 0, 3)));
    }

    #[test]
    fn seek_forgets_everything() {
        let mut book = acked(&[(5, true), (9, false)]);
        send_held(&mut book, 1);
        book.clear();
        assert!(!book.covers(&id(1, -1, 0)));
        assert!(!book.covers(&id(9, -1, 0)));
        book.detached();
        assert!(!book.has_held());
    }
    #[test]
    fn a_batch_message_is_confirmed_only_with_its_whole_entry() {
        let mut book = AckBook::default();
        book.record(&id(1, 0, 2), false, false);
        send_held(&mut book, 1);
        book.settled(1, true);
        assert!(
            !book.confirmed(&id(1, 0, 2), false, false),
            "nothing was sent for half a batch"
        );
        book.record(&id(1, 1, 2), false, false);
        send_held(&mut book, 2);
        assert!(!book.confirmed(&id(1, 0, 2), false, false), "sent, not yet confirmed");
        book.settled(2, true);
        assert!(book.confirmed(&id(1, 0, 2), false, false));
        assert!(book.confirmed(&id(1, 1, 2), false, false));
    }

    #[test]
    fn a_batch_index_ack_is_confirmed_alone() {
        let mut book = AckBook::default();
        book.record(&id(1, 0, 2), false, true);
        assert!(!book.confirmed(&id(1, 0, 2), false, true));
        send_held(&mut book, 1);
        book.settled(1, true);
        assert!(book.confirmed(&id(1, 0, 2), false, true));
    }

    #[test]
    fn a_confirmation_after_a_reconnect_counts_and_the_lost_answer_does_not() {
        let mut book = acked(&[(1, false)]);
        send_held(&mut book, 1);
        book.detached();
        assert!(!book.confirmed(&id(1, -1, 0), false, false));
        send_held(&mut book, 2);
        book.settled(1, true); // the old connection's answer, after it was given up: ignored
        assert!(!book.confirmed(&id(1, -1, 0), false, false));
        book.settled(2, true);
        assert!(book.confirmed(&id(1, -1, 0), false, false));
    }

    #[test]
    fn a_cumulative_receipt_waits_for_an_ack_that_covers_the_message() {
        let mut book = AckBook::default();
        book.record(&id(5, 1, 3), true, false); // inside a batch: goes up to entry 4 only
        send_held(&mut book, 1);
        book.settled(1, true);
        assert!(book.confirmed(&id(4, -1, 0), true, false));
        assert!(!book.confirmed(&id(5, 1, 3), true, false));
        book.record(&id(5, 2, 3), true, false);
        send_held(&mut book, 2);
        book.settled(2, true);
        assert!(book.confirmed(&id(5, 1, 3), true, false));
    }

    #[test]
    fn a_cumulative_batch_index_ack_leaves_the_later_indexes_unacked() {
        let mut book = AckBook::default();
        book.record(&id(5, 1, 4), true, true);
        let acks = book.take_held();
        let (kind, ids) = &acks[0];
        assert_eq!(*kind, AckType::Cumulative);
        assert_eq!(ids[0].ack_set, vec![0b1100], "indexes 2 and 3 still unacked");
        assert_eq!(ids[0].batch_size, Some(4));
        book.sent(1, acks);
        book.settled(1, true);
        assert!(book.confirmed(&id(5, 1, 4), true, true));
        assert!(!book.confirmed(&id(5, 2, 4), true, true));
    }

    #[test]
    fn a_confirmed_ack_covers_its_entry_for_good_and_can_be_sent_again() {
        let mut book = acked(&[(1, false)]);
        send_held(&mut book, 1);
        book.settled(1, true);
        assert!(book.covers(&id(1, -1, 0)) && book.acked_before(&id(1, -1, 0)));
        assert!(!book.has_held());
        book.ack_again(&id(1, -1, 0));
        let acks = book.take_held();
        assert_eq!(acks.len(), 1);
        assert_eq!(acks[0].1[0].entry_id, 1);
        book.clear();
        assert!(
            !book.covers(&id(1, -1, 0)),
            "a seek forgets it: the entry may come again"
        );
    }

    #[test]
    fn acking_again_a_message_of_a_confirmed_batch_is_confirmed_at_once() {
        let mut book = AckBook::default();
        book.record(&id(1, 0, 2), false, false);
        book.record(&id(1, 1, 2), false, false);
        send_held(&mut book, 1);
        book.settled(1, true);
        book.record(&id(1, 0, 2), false, false);
        assert!(!book.has_held(), "nothing to send");
        assert!(book.confirmed(&id(1, 0, 2), false, false));
    }

    #[test]
    fn batch_index_acks_of_one_entry_go_as_one_until_sent() {
        let mut book = AckBook::default();
        for i in 0..3 {
            book.record(&id(1, i, 4), false, true);
        }
        assert_eq!(book.held_len(), 1, "one ack of the entry, updated");
        let acks = book.take_held();
        assert_eq!(acks[0].1[0].ack_set, vec![0b1000]);
        book.sent(1, acks);
        book.record(&id(1, 3, 4), false, true);
        let acks = book.take_held();
        assert!(acks[0].1[0].ack_set.is_empty(), "the last index acks the whole entry");
        book.sent(2, acks);
        book.settled(1, true);
        book.settled(2, true);
        assert!(book.confirmed(&id(1, 0, 4), false, true) && book.acked_before(&id(1, 2, 4)));

        for i in 0..4 {
            book.record(&id(2, i, 4), false, true);
        }
        let acks = book.take_held();
        assert_eq!(acks[0].1.len(), 1, "completed before sending: one whole-entry ack");
        assert!(acks[0].1[0].ack_set.is_empty());
        book.sent(3, acks);
        book.settled(3, true);
        assert!(book.confirmed(&id(2, 1, 4), false, true));
    }
}
