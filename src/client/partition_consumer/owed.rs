//! The messages of one partition the application took and has not acknowledged: what a
//! cumulative acknowledgement inside a transaction covers, message by message.
//!
//! The broker checks a transaction's cumulative ack only against the cursor's mark-delete
//! position and against another transaction's pending cumulative ack. An entry that is a batch
//! partly acknowledged leaves the mark-delete position before it, so a cumulative ack of
//! indexes that a committed transaction already acknowledged is accepted again (the messages
//! are then processed twice), and one that covers indexes another open transaction holds takes
//! them from it (lost if that one aborts). Individual acks are checked message by message:
//! against the cursor's deleted entries, its acknowledged batch indexes, and every open
//! transaction's pending acks (Pulsar 4.0 `PendingAckHandleImpl`). So a cumulative ack in a
//! transaction is sent as individual acks of exactly the messages it covers that the
//! application took and has not acknowledged: a stale one conflicts and its transaction aborts.
//! Taken, not merely received: after another transaction's abort the broker may send messages
//! again that then wait in the queue behind later ones, and acknowledging those would lose them.
//!
//! Only Exclusive and Failover subscriptions keep this book (cumulative acks are refused on the
//! others), and not readers. Pure bookkeeping: no I/O.

use std::collections::BTreeMap;

use crate::protocol::pb::MessageIdData;

use super::super::message::MessageId;
use super::ack_book::{full_bitset, EntryKey};

/// Entries kept at most; past it the oldest are forgotten (see [`Owed::forgotten`]).
const CAP: usize = 100_000;

/// What is owed of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owes {
    /// The entry (not a batch, or a batch of one).
    Whole,
    /// These indexes of a batch of `size` (bit set = received, not acknowledged).
    Indexes { size: i32, bits: Vec<u64> },
}

#[derive(Default)]
pub(super) struct Owed {
    entries: BTreeMap<EntryKey, Owes>,
    /// The highest entry dropped to stay within [`CAP`]: what it owed is no longer known.
    forgotten: Option<EntryKey>,
}

/// What a cumulative ack in a transaction sends.
#[derive(Debug, Default, PartialEq)]
pub(super) struct TxnAcks {
    /// Individual acks, batch entries with the acknowledged indexes cleared in `ack_set`.
    pub individual: Vec<MessageIdData>,
    /// Through this entry, what was owed is not known (more than [`CAP`] entries were owed):
    /// a cumulative ack up to it covers them, checked by entry only.
    pub cumulative: Option<MessageIdData>,
}

fn is_batch(id: &MessageId) -> bool {
    id.batch_index >= 0 && id.batch_size > 1 && id.batch_index < id.batch_size
}

impl Owed {
    /// The application took messages of entry `id` (indexes `received` of its batch).
    pub fn received(&mut self, id: &MessageId, received: impl Iterator<Item = i32>) {
        let key = (id.ledger_id, id.entry_id);
        let owes = if id.batch_size > 1 {
            let mut bits = vec![0u64; (id.batch_size as usize).div_ceil(64)];
            for i in received.filter(|i| *i >= 0 && *i < id.batch_size).map(|i| i as usize) {
                bits[i / 64] |= 1 << (i % 64);
            }
            Owes::Indexes {
                size: id.batch_size,
                bits,
            }
        } else {
            Owes::Whole
        };
        // A resend after a reconnect: the application may hold either copy, so owe both.
        if let (Some(Owes::Indexes { size, bits: had }), Owes::Indexes { size: s, bits }) =
            (self.entries.get_mut(&key), &owes)
        {
            if *size == *s {
                for (h, b) in had.iter_mut().zip(bits) {
                    *h |= *b;
                }
                return;
            }
        }
        self.entries.insert(key, owes);
        while self.entries.len() > CAP {
            if let Some((k, _)) = self.entries.pop_first() {
                self.forgotten = self.forgotten.max(Some(k));
            }
        }
    }

    /// The application acknowledged `id` (`cumulative`: everything up to it) outside a
    /// transaction.
    pub fn acked(&mut self, id: &MessageId, cumulative: bool) {
        let key = (id.ledger_id, id.entry_id);
        if cumulative {
            self.drop_before(key);
            if self.forgotten.is_some_and(|f| f <= key) {
                self.forgotten = None;
            }
        }
        let Some(owes) = self.entries.get_mut(&key) else { return };
        match owes {
            Owes::Indexes { bits, .. } if is_batch(id) => {
                let i = id.batch_index as usize;
                if cumulative {
                    clear_through(bits, i);
                } else if let Some(w) = bits.get_mut(i / 64) {
                    *w &= !(1 << (i % 64));
                }
                if bits.iter().all(|w| *w == 0) {
                    self.entries.remove(&key);
                }
            }
            _ => {
                self.entries.remove(&key);
            }
        }
    }

    /// Whether the application took `id` and has not acknowledged it.
    pub fn holds(&self, id: &MessageId) -> bool {
        match self.entries.get(&(id.ledger_id, id.entry_id)) {
            Some(Owes::Indexes { bits, .. }) if is_batch(id) => {
                let i = id.batch_index as usize;
                bits.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Everything is delivered again (a redelivery of all unacknowledged messages, a seek):
    /// what comes is owed anew.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.forgotten = None;
    }

    /// A cumulative ack of `target` in a transaction: what it covers, taken off the book (the
    /// transaction holds it now; if it aborts, everything is delivered again and owed anew).
    /// The target itself is always acknowledged: the application says it processed it, and if
    /// another ack already took it, the broker refuses this one.
    pub fn take_through(&mut self, target: &MessageId) -> TxnAcks {
        let key = (target.ledger_id, target.entry_id);
        let later = self.drop_before(key);
        let mut out = TxnAcks::default();
        for (k, owes) in later {
            out.individual.push(ack_of(k, &owes, target.partition));
        }
        if let Some(f) = self.forgotten.filter(|f| *f < key) {
            out.cumulative = Some(entry_data(f, target.partition));
            self.forgotten = None;
        }
        let mut last = match self.entries.remove(&key) {
            Some(Owes::Indexes { size, bits }) if is_batch(target) && size == target.batch_size => bits,
            _ if is_batch(target) => vec![0u64; (target.batch_size as usize).div_ceil(64)],
            _ => {
                out.individual.push(entry_data(key, target.partition));
                return out;
            }
        };
        let i = target.batch_index as usize;
        last[i / 64] |= 1 << (i % 64);
        let mut rest = last.clone();
        clear_through(&mut rest, i);
        keep_only_through(&mut last, i);
        out.individual.push(ack_of(
            key,
            &Owes::Indexes {
                size: target.batch_size,
                bits: last,
            },
            target.partition,
        ));
        if rest.iter().any(|w| *w != 0) {
            self.entries.insert(
                key,
                Owes::Indexes {
                    size: target.batch_size,
                    bits: rest,
                },
            );
        }
        out
    }

    /// Takes off every entry before `key`; returns them in order.
    fn drop_before(&mut self, key: EntryKey) -> BTreeMap<EntryKey, Owes> {
        let rest = self.entries.split_off(&key);
        std::mem::replace(&mut self.entries, rest)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

fn entry_data(key: EntryKey, partition: i32) -> MessageIdData {
    MessageIdData {
        ledger_id: key.0 as u64,
        entry_id: key.1 as u64,
        partition: (partition >= 0).then_some(partition),
        ..Default::default()
    }
}

/// The individual ack of what `owes`: a batch by its ack set (bit set = not acknowledged), so
/// the broker checks each index against those already acknowledged or held by a transaction.
fn ack_of(key: EntryKey, owes: &Owes, partition: i32) -> MessageIdData {
    let mut data = entry_data(key, partition);
    if let Owes::Indexes { size, bits } = owes {
        let unacked: Vec<i64> = full_bitset(*size as usize)
            .iter()
            .zip(bits)
            .map(|(full, owed)| (full & !owed) as i64)
            .collect();
        data.ack_set = unacked;
        data.batch_size = Some(*size);
    }
    data
}

/// Clears bits `0..=i`.
fn clear_through(bits: &mut [u64], i: usize) {
    for (w, word) in bits.iter_mut().enumerate() {
        let lo = w * 64;
        if i >= lo + 63 {
            *word = 0;
        } else if i >= lo {
            *word &= !((1u64 << (i - lo + 1)) - 1);
        }
    }
}

/// Clears every bit after `i`.
fn keep_only_through(bits: &mut [u64], i: usize) {
    for (w, word) in bits.iter_mut().enumerate() {
        let lo = w * 64;
        if lo > i {
            *word = 0;
        } else if i < lo + 63 {
            *word &= (1u64 << (i - lo + 1)) - 1;
        }
    }
}

/// Whether the consumer keeps the owed book: Exclusive and Failover subscriptions, where a
/// cumulative ack in a transaction is sent as individual acks of what it covers.
pub(super) fn owes(opts: &crate::client::options::ConsumerOptions) -> bool {
    use crate::protocol::pb::command_subscribe::SubType;
    opts.durable && !matches!(opts.sub_type, SubType::Shared | SubType::KeyShared)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entry: i64, index: i32, size: i32) -> MessageId {
        let mut m = MessageId::new(1, entry, -1, index);
        m.batch_size = size;
        m
    }

    fn acked_indexes(d: &MessageIdData) -> Vec<usize> {
        let size = d.batch_size.unwrap_or(0) as usize;
        (0..size)
            .filter(|i| (d.ack_set[i / 64] as u64) & (1 << (i % 64)) == 0)
            .collect()
    }

    #[test]
    fn a_cumulative_ack_inside_a_batch_acks_the_received_indexes_up_to_it() {
        let mut owed = Owed::default();
        // Indexes 0-2 were acknowledged before this consumer got the entry.
        owed.received(&id(5, 3, 10), 3..10);
        let acks = owed.take_through(&id(5, 6, 10));
        assert_eq!(acks.cumulative, None);
        assert_eq!(acks.individual.len(), 1);
        assert_eq!(
            (acks.individual[0].entry_id, acked_indexes(&acks.individual[0])),
            (5, vec![3, 4, 5, 6])
        );
        // The next transaction owes only what follows.
        let acks = owed.take_through(&id(5, 9, 10));
        assert_eq!(acked_indexes(&acks.individual[0]), vec![7, 8, 9]);
        assert_eq!(owed.len(), 0);
    }

    #[test]
    fn earlier_entries_are_acked_whole_or_by_their_remaining_indexes() {
        let mut owed = Owed::default();
        owed.received(&id(3, -1, 0), std::iter::empty());
        owed.received(&id(4, 0, 4), 0..4);
        owed.acked(&id(4, 0, 4), false);
        owed.acked(&id(4, 1, 4), false);
        owed.received(&id(5, 0, 4), 0..4);
        owed.received(&id(6, 0, 4), 0..4);
        let acks = owed.take_through(&id(5, 0, 4));
        let got: Vec<(u64, Option<Vec<usize>>)> = acks
            .individual
            .iter()
            .map(|d| (d.entry_id, d.batch_size.map(|_| acked_indexes(d))))
            .collect();
        assert_eq!(got, vec![(3, None), (4, Some(vec![2, 3])), (5, Some(vec![0]))]);
        assert_eq!(owed.len(), 2);
    }

    #[test]
    fn the_target_is_acked_even_when_not_owed() {
        let mut owed = Owed::default();
        owed.received(&id(5, 0, 4), 2..4);
        owed.clear();
        let acks = owed.take_through(&id(5, 1, 4));
        assert_eq!(acked_indexes(&acks.individual[0]), vec![1]);
        let acks = owed.take_through(&id(7, -1, 0));
        assert_eq!(acks.individual, vec![entry_data((1, 7), -1)]);
    }

    #[test]
    fn a_resend_owes_the_indexes_of_both_copies() {
        let mut owed = Owed::default();
        owed.received(&id(5, 0, 8), 0..8);
        // Resent after a reconnect, with 0-3 acknowledged meanwhile by someone else: the
        // application may have processed them from the first copy, so they are still acked.
        owed.received(&id(5, 4, 8), 4..8);
        assert_eq!(
            acked_indexes(&owed.take_through(&id(5, 5, 8)).individual[0]),
            (0..6).collect::<Vec<_>>()
        );
    }

    #[test]
    fn plain_acks_settle_what_is_owed() {
        let mut owed = Owed::default();
        owed.received(&id(5, 0, 3), 0..3);
        owed.received(&id(6, -1, 0), std::iter::empty());
        owed.acked(&id(5, 1, 3), false);
        owed.acked(&id(6, -1, 0), false);
        let acks = owed.take_through(&id(5, 2, 3));
        assert_eq!(acks.individual.len(), 1);
        assert_eq!(acked_indexes(&acks.individual[0]), vec![0, 2]);
        assert_eq!(owed.len(), 0);
    }

    #[test]
    fn batches_past_64_messages_and_out_of_range_indexes() {
        let mut owed = Owed::default();
        owed.received(&id(5, 0, 130), (0..130).chain([200, -1]));
        let acks = owed.take_through(&id(5, 64, 130));
        assert_eq!(acked_indexes(&acks.individual[0]), (0..65).collect::<Vec<_>>());
        let acks = owed.take_through(&id(5, 129, 130));
        assert_eq!(acked_indexes(&acks.individual[0]), (65..130).collect::<Vec<_>>());
        assert_eq!(owed.len(), 0);
    }

    #[test]
    fn past_the_cap_the_forgotten_entries_are_acked_cumulatively() {
        let mut owed = Owed::default();
        for e in 0..(CAP as i64 + 2) {
            owed.received(&id(e, -1, 0), std::iter::empty());
        }
        assert_eq!(owed.len(), CAP);
        let acks = owed.take_through(&id(CAP as i64 + 1, -1, 0));
        assert_eq!(acks.cumulative, Some(entry_data((1, 1), -1)));
        assert_eq!(acks.individual.len(), CAP);
        assert_eq!(owed.take_through(&id(CAP as i64 + 5, -1, 0)).cumulative, None);
    }
}
