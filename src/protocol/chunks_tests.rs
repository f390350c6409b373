use std::collections::HashMap;

use super::*;
use ChunkOutcome::{Duplicate, Orphan, Pending};

const LIMITS: ChunkLimits = ChunkLimits {
    max_pending: 3,
    expiry: Duration::from_secs(60),
    max_message_size: 1 << 20,
};

fn chunk<'a>(uuid: &'a str, id: i32, n: i32, total: i32, entry: u64, data: &'static [u8]) -> ChunkIn<'a> {
    ChunkIn {
        uuid,
        chunk_id: id,
        num_chunks: n,
        total_size: total,
        entry: (1, entry),
        data: Bytes::from_static(data),
    }
}

/// Pushes and expects nothing dropped.
fn push(a: &mut ChunkAssembler, c: ChunkIn<'_>) -> ChunkOutcome {
    let (outcome, dropped) = a.push(c, Instant::now());
    assert!(dropped.is_empty(), "{dropped:?}");
    outcome
}

/// Pushes each chunk in turn, expecting nothing dropped; what became of each.
fn feed<'a>(a: &mut ChunkAssembler, chunks: impl IntoIterator<Item = ChunkIn<'a>>) -> Vec<ChunkOutcome> {
    chunks.into_iter().map(|c| push(a, c)).collect()
}

/// Chunk `id` of "abcdef" sent as "ab", "cd", "ef" at entries 1, 2 and 3.
fn abcdef(id: usize) -> ChunkIn<'static> {
    chunk("u", id as i32, 3, 6, id as u64 + 1, [b"ab", b"cd", b"ef"][id])
}

fn complete(data: &'static [u8], entries: &[u64]) -> ChunkOutcome {
    ChunkOutcome::Complete {
        data: Bytes::from_static(data),
        entries: entries.iter().map(|e| (1, *e)).collect(),
    }
}

fn abandoned_at(entries: &[u64], reason: &'static str) -> ChunkOutcome {
    ChunkOutcome::Abandoned {
        entries: entries.iter().map(|e| (1, *e)).collect(),
        reason,
    }
}

#[test]
fn chunks_in_order_complete_with_every_entry() {
    let mut a = ChunkAssembler::new(LIMITS);
    assert_eq!(push(&mut a, chunk("u", 0, 3, 9, 1, b"abc")), Pending);
    assert_eq!(push(&mut a, chunk("u", 1, 3, 9, 2, b"def")), Pending);
    assert_eq!((a.pending(), a.buffered_bytes()), (1, 6));
    assert_eq!(
        push(&mut a, chunk("u", 2, 3, 9, 3, b"ghi")),
        complete(b"abcdefghi", &[1, 2, 3])
    );
    assert_eq!((a.pending(), a.buffered_bytes()), (0, 0));
    assert_eq!(a.next_deadline(), None);
}

#[test]
fn a_one_chunk_message_completes_at_once() {
    let mut a = ChunkAssembler::new(LIMITS);
    assert_eq!(push(&mut a, chunk("u", 0, 1, 3, 7, b"abc")), complete(b"abc", &[7]));
    assert_eq!(a.pending(), 0);
}

#[test]
fn interleaved_messages_complete_independently() {
    let mut a = ChunkAssembler::new(LIMITS);
    assert_eq!(push(&mut a, chunk("a", 0, 2, 4, 1, b"a0")), Pending);
    assert_eq!(push(&mut a, chunk("b", 0, 2, 4, 2, b"b0")), Pending);
    assert_eq!(push(&mut a, chunk("b", 1, 2, 4, 3, b"b1")), complete(b"b0b1", &[2, 3]));
    assert_eq!(push(&mut a, chunk("a", 1, 2, 4, 4, b"a1")), complete(b"a0a1", &[1, 4]));
}

#[test]
fn duplicates_from_a_producer_resend_are_skipped_and_the_message_completes() {
    // The Java client's own example: chunks 1 and 2 sent again after a reconnect.
    let mut a = ChunkAssembler::new(LIMITS);
    for (id, e) in [(0, 1), (1, 2), (2, 3)] {
        assert_eq!(push(&mut a, chunk("u", id, 4, 8, e, b"xx")), Pending);
    }
    assert_eq!(push(&mut a, chunk("u", 1, 4, 8, 4, b"xx")), Duplicate);
    assert_eq!(push(&mut a, chunk("u", 2, 4, 8, 5, b"xx")), Duplicate);
    assert_eq!(
        push(&mut a, chunk("u", 3, 4, 8, 6, b"xx")),
        complete(b"xxxxxxxx", &[1, 2, 3, 6])
    );
}

#[test]
fn the_same_entry_redelivered_mid_message_is_held_not_acked() {
    let mut a = ChunkAssembler::new(LIMITS);
    assert_eq!(
        feed(&mut a, [abcdef(0), abcdef(1), abcdef(1), abcdef(2)]),
        [Pending, Pending, Pending, complete(b"abcdef", &[1, 2, 3])]
    );
}

#[test]
fn a_redelivery_from_the_first_chunk_restarts_without_reporting() {
    let mut a = ChunkAssembler::new(LIMITS);
    feed(&mut a, [abcdef(0), abcdef(1)]);
    // Resubscribed: the broker sends entries 1, 2, 3 again; 1 and 2 are not to be acked.
    assert_eq!(push(&mut a, abcdef(0)), Pending);
    assert_eq!(a.buffered_bytes(), 2);
    assert_eq!(
        feed(&mut a, [abcdef(1), abcdef(2)]),
        [Pending, complete(b"abcdef", &[1, 2, 3])]
    );
}

#[test]
fn a_producer_restart_at_another_entry_reports_the_old_attempt() {
    let mut a = ChunkAssembler::new(LIMITS);
    push(&mut a, chunk("u", 0, 2, 4, 1, b"ab"));
    let (outcome, dropped) = a.push(chunk("u", 0, 2, 4, 5, b"ab"), Instant::now());
    assert_eq!(outcome, Pending);
    assert_eq!(dropped, vec![(vec![(1, 1)], RESTARTED)]);
    assert_eq!(push(&mut a, chunk("u", 1, 2, 4, 6, b"cd")), complete(b"abcd", &[5, 6]));
}

#[test]
fn a_resend_of_a_completed_message_is_a_duplicate_but_a_redelivery_completes_again() {
    let mut a = ChunkAssembler::new(LIMITS);
    let sent = || [chunk("u", 0, 2, 6, 1, b"abc"), chunk("u", 1, 2, 6, 2, b"def")];
    assert_eq!(feed(&mut a, sent()), [Pending, complete(b"abcdef", &[1, 2])]);
    // The producer lost its connection before the receipts and sent it all again.
    let resent = [chunk("u", 0, 2, 6, 3, b"abc"), chunk("u", 1, 2, 6, 4, b"def")];
    assert_eq!(feed(&mut a, resent), [Duplicate, Duplicate]);
    assert_eq!(a.pending(), 0);
    // The broker redelivers the original (unacked) entries: the message comes again.
    assert_eq!(feed(&mut a, sent()), [Pending, complete(b"abcdef", &[1, 2])]);
}

#[test]
fn a_later_chunk_without_its_start_is_an_orphan() {
    let mut a = ChunkAssembler::new(LIMITS);
    assert_eq!(push(&mut a, chunk("u", 1, 2, 4, 1, b"cd")), Orphan);
    push(&mut a, chunk("v", 0, 2, 4, 2, b"ab"));
    push(&mut a, chunk("v", 1, 2, 4, 3, b"cd"));
    // A recently completed message is remembered: a late resend of its last chunk is a duplicate.
    assert_eq!(push(&mut a, chunk("v", 1, 2, 4, 4, b"cd")), Duplicate);
}

#[test]
fn a_gap_abandons_the_message_and_the_chunk() {
    let mut a = ChunkAssembler::new(LIMITS);
    push(&mut a, chunk("u", 0, 4, 8, 1, b"ab"));
    push(&mut a, chunk("u", 1, 4, 8, 2, b"cd"));
    assert_eq!(
        push(&mut a, chunk("u", 3, 4, 8, 4, b"gh")),
        abandoned_at(&[1, 2, 4], GAP)
    );
    assert_eq!((a.pending(), a.buffered_bytes()), (0, 0));
}

#[test]
fn invalid_headers_are_abandoned_with_any_message_in_progress() {
    let mut a = ChunkAssembler::new(LIMITS);
    for (id, n, total) in [
        (0, 0, 4),
        (2, 2, 4),
        (-1, 2, 4),
        (0, -3, 4),
        (0, 2, -1),
        (i32::MAX, i32::MIN, 0),
    ] {
        assert_eq!(
            push(&mut a, chunk("u", id, n, total, 9, b"ab")),
            abandoned_at(&[9], INVALID)
        );
    }
    push(&mut a, chunk("u", 0, 2, 4, 1, b"ab"));
    assert_eq!(
        push(&mut a, chunk("u", 5, 2, 4, 2, b"cd")),
        abandoned_at(&[1, 2], INVALID)
    );
    assert_eq!(a.pending(), 0);
}

#[test]
fn headers_must_agree_across_a_message() {
    let mut a = ChunkAssembler::new(LIMITS);
    // The second chunk changes the chunk count, then the total size.
    for (num_chunks, total, entry) in [(4, 6, 2), (3, 7, 4)] {
        push(&mut a, chunk("u", 0, 3, 6, entry - 1, b"ab"));
        assert_eq!(
            push(&mut a, chunk("u", 1, num_chunks, total, entry, b"cd")),
            abandoned_at(&[entry - 1, entry], INCONSISTENT)
        );
    }
}

#[test]
fn assembled_bytes_never_exceed_the_declared_total() {
    let mut a = ChunkAssembler::new(LIMITS);
    assert_eq!(
        push(&mut a, chunk("u", 0, 2, 2, 1, b"abc")),
        abandoned_at(&[1], OVERSIZED)
    );
    // "ab" + "cd" against a declared total of 3, then of 5 (short when the last chunk arrives).
    for (total, entry, reason) in [(3, 2, OVERSIZED), (5, 4, UNDERSIZED)] {
        push(&mut a, chunk("u", 0, 2, total, entry, b"ab"));
        assert_eq!(
            push(&mut a, chunk("u", 1, 2, total, entry + 1, b"cd")),
            abandoned_at(&[entry, entry + 1], reason)
        );
    }
    assert_eq!(
        push(&mut a, chunk("u", 0, 1, 5, 6, b"ab")),
        abandoned_at(&[6], UNDERSIZED)
    );
}

#[test]
fn a_declared_total_over_the_limit_is_refused_at_the_first_chunk() {
    let mut a = ChunkAssembler::new(ChunkLimits {
        max_message_size: 10,
        ..LIMITS
    });
    // i32::MAX declared: refused before anything is stored or reserved.
    assert_eq!(
        push(&mut a, chunk("u", 0, 2, i32::MAX, 1, b"ab")),
        abandoned_at(&[1], TOO_LARGE)
    );
    assert_eq!(
        push(&mut a, chunk("u", 0, 2, 11, 2, b"ab")),
        abandoned_at(&[2], TOO_LARGE)
    );
    assert_eq!(push(&mut a, chunk("u", 1, 2, 11, 3, b"ab")), Orphan);
    assert_eq!(
        feed(
            &mut a,
            [chunk("u", 0, 2, 10, 4, b"abcde"), chunk("u", 1, 2, 10, 5, b"fghij")]
        ),
        [Pending, complete(b"abcdefghij", &[4, 5])]
    );
}

#[test]
fn starting_one_message_too_many_evicts_the_oldest() {
    let mut a = ChunkAssembler::new(LIMITS);
    let now = Instant::now();
    for (i, uuid) in ["a", "b", "c"].into_iter().enumerate() {
        let (o, d) = a.push(chunk(uuid, 0, 2, 4, i as u64, b"ab"), now);
        assert_eq!((o, d.len()), (Pending, 0));
    }
    let (outcome, dropped) = a.push(chunk("d", 0, 2, 4, 3, b"ab"), now);
    assert_eq!(outcome, Pending);
    assert_eq!(dropped, vec![(vec![(1, 0)], EVICTED)]);
    assert_eq!((a.pending(), a.buffered_bytes()), (3, 6));
    assert_eq!(push(&mut a, chunk("a", 1, 2, 4, 4, b"cd")), Orphan);
    // Chunks of messages in progress never evict anything.
    assert_eq!(push(&mut a, chunk("b", 1, 2, 4, 5, b"cd")), complete(b"abcd", &[1, 5]));
}

#[test]
fn max_pending_zero_still_bounds_memory() {
    let mut a = ChunkAssembler::new(ChunkLimits {
        max_pending: 0,
        ..LIMITS
    });
    push(&mut a, chunk("a", 0, 2, 4, 1, b"ab"));
    let (_, dropped) = a.push(chunk("b", 0, 2, 4, 2, b"ab"), Instant::now());
    assert_eq!(dropped, vec![(vec![(1, 1)], EVICTED)]);
    assert_eq!(a.pending(), 1);
}

#[test]
fn incomplete_messages_expire_oldest_first() {
    let mut a = ChunkAssembler::new(LIMITS);
    let t0 = Instant::now();
    a.push(chunk("a", 0, 3, 6, 1, b"ab"), t0);
    a.push(chunk("a", 1, 3, 6, 2, b"cd"), t0 + Duration::from_secs(30));
    a.push(chunk("b", 0, 2, 4, 3, b"ab"), t0 + Duration::from_secs(10));
    assert_eq!(a.next_deadline(), Some(t0 + Duration::from_secs(60)));
    assert!(a.expire(t0 + Duration::from_secs(59)).is_empty());
    assert_eq!(
        a.expire(t0 + Duration::from_secs(60)),
        vec![(vec![(1, 1), (1, 2)], EXPIRED)]
    );
    assert_eq!(a.next_deadline(), Some(t0 + Duration::from_secs(70)));
    assert_eq!(a.expire(t0 + Duration::from_secs(3600)), vec![(vec![(1, 3)], EXPIRED)]);
    assert_eq!((a.pending(), a.buffered_bytes(), a.next_deadline()), (0, 0, None));
}

#[test]
fn clear_forgets_everything_in_progress() {
    let mut a = ChunkAssembler::new(LIMITS);
    push(&mut a, chunk("a", 0, 2, 4, 1, b"ab"));
    push(&mut a, chunk("b", 0, 2, 4, 2, b"ab"));
    a.clear();
    assert_eq!((a.pending(), a.buffered_bytes(), a.next_deadline()), (0, 0, None));
    assert_eq!(push(&mut a, chunk("a", 1, 2, 4, 3, b"cd")), Orphan);
}

mod model {
    //! Random interleavings of chunk streams, as producers resending, brokers redelivering and
    //! lost entries would make them.
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// The message's next chunk, at a new entry.
        Next(usize),
        /// A chunk already sent, sent again at a new entry (a producer resend).
        Resend(usize, usize),
        /// The chunk the cursor is at is lost.
        Lose(usize),
        /// Everything sent of the message's current attempt, again at the same entries.
        Redeliver(usize),
        /// The next chunk with a wrong total size.
        Corrupt(usize),
        /// Time passes; incomplete messages may expire.
        Tick(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..4usize).prop_map(Op::Next),
            1 => (0..4usize, 0..8usize).prop_map(|(m, k)| Op::Resend(m, k)),
            1 => (0..4usize).prop_map(Op::Lose),
            1 => (0..4usize).prop_map(Op::Redeliver),
            1 => (0..4usize).prop_map(Op::Corrupt),
            1 => (0..40u64).prop_map(Op::Tick),
        ]
    }

    struct Msg {
        uuid: String,
        payload: Bytes,
        parts: Vec<Bytes>,
        sent: Vec<(i32, EntryId)>,
        cursor: usize,
    }

    fn msg(i: usize, payload: Vec<u8>, cut: usize) -> Msg {
        let payload = Bytes::from(payload);
        let size = cut.max(1);
        let parts: Vec<Bytes> = if payload.is_empty() {
            vec![Bytes::new()]
        } else {
            (0..payload.len())
                .step_by(size)
                .map(|at| payload.slice(at..(at + size).min(payload.len())))
                .collect()
        };
        Msg {
            uuid: format!("p-{i}"),
            payload,
            parts,
            sent: Vec::new(),
            cursor: 0,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn interleavings_never_yield_a_wrong_payload_nor_exceed_the_bounds(
            payloads in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..40), 1..16usize), 1..4),
            ops in proptest::collection::vec(op(), 0..80),
            max_pending in 0..4usize,
            max_message_size in 8..48usize,
        ) {
            let limits = ChunkLimits { max_pending, expiry: Duration::from_secs(60), max_message_size };
            let mut a = ChunkAssembler::new(limits);
            let mut msgs: Vec<Msg> = payloads.into_iter().enumerate().map(|(i, (p, cut))| msg(i, p, cut)).collect();
            let t0 = Instant::now();
            let mut now = t0;
            let mut next_entry = 0u64;
            // How often each entry was pushed, and how often it was handed back.
            let mut pushed: HashMap<EntryId, usize> = HashMap::new();
            let mut reported: HashMap<EntryId, usize> = HashMap::new();
            let report = |entries: &[EntryId], reported: &mut HashMap<EntryId, usize>| {
                for e in entries {
                    *reported.entry(*e).or_default() += 1;
                }
            };
            for op in ops {
                let mut pushes: Vec<(usize, i32, EntryId, i32)> = Vec::new();
                let mut fresh = || { next_entry += 1; (1u64, next_entry) };
                match op {
                    Op::Next(m) | Op::Corrupt(m) => {
                        let Some(x) = msgs.get_mut(m) else { continue };
                        if x.cursor >= x.parts.len() {
                            x.cursor = 0;
                            x.sent.clear();
                        }
                        let e = fresh();
                        let skew = if matches!(op, Op::Corrupt(_)) { 1 } else { 0 };
                        pushes.push((m, x.cursor as i32, e, skew));
                        x.sent.push((x.cursor as i32, e));
                        x.cursor += 1;
                    }
                    Op::Resend(m, k) => {
                        let Some(x) = msgs.get_mut(m) else { continue };
                        if x.sent.is_empty() { continue }
                        let id = x.sent[k % x.sent.len()].0;
                        let e = fresh();
                        pushes.push((m, id, e, 0));
                        if id == 0 {
                            x.sent = vec![(0, e)];
                            x.cursor = 1;
                        }
                    }
                    Op::Lose(m) => {
                        if let Some(x) = msgs.get_mut(m) { x.cursor += 1 }
                    }
                    Op::Redeliver(m) => {
                        let Some(x) = msgs.get(m) else { continue };
                        pushes.extend(x.sent.iter().map(|(id, e)| (m, *id, *e, 0)));
                    }
                    Op::Tick(secs) => {
                        now += Duration::from_secs(secs);
                        for (entries, _) in a.expire(now) {
                            report(&entries, &mut reported);
                        }
                    }
                }
                for (m, id, e, skew) in pushes {
                    let x = &msgs[m];
                    let Some(part) = x.parts.get(id as usize) else { continue };
                    *pushed.entry(e).or_default() += 1;
                    let (outcome, dropped) = a.push(
                        ChunkIn {
                            uuid: &x.uuid,
                            chunk_id: id,
                            num_chunks: x.parts.len() as i32,
                            total_size: x.payload.len() as i32 + skew,
                            entry: e,
                            data: part.clone(),
                        },
                        now,
                    );
                    for (entries, _) in &dropped {
                        report(entries, &mut reported);
                    }
                    match outcome {
                        ChunkOutcome::Complete { data, entries } => {
                            prop_assert_eq!(&data, &x.payload);
                            prop_assert!(data.len() <= max_message_size);
                            prop_assert_eq!(entries.len(), x.parts.len());
                            prop_assert_eq!(entries.last(), Some(&e));
                            report(&entries, &mut reported);
                        }
                        ChunkOutcome::Abandoned { entries, .. } => {
                            prop_assert_eq!(entries.last(), Some(&e));
                            report(&entries, &mut reported);
                        }
                        Duplicate | Orphan => report(&[e], &mut reported),
                        Pending => {}
                    }
                    prop_assert!(a.pending() <= max_pending.max(1));
                    prop_assert!(a.buffered_bytes() <= a.pending() * max_message_size);
                }
            }
            for (entries, _) in a.expire(now + Duration::from_secs(3600)) {
                report(&entries, &mut reported);
            }
            prop_assert_eq!((a.pending(), a.buffered_bytes()), (0, 0));
            // No holes: every entry comes back to the caller; one pushed once comes back once.
            for (e, n) in &pushed {
                let back = reported.get(e).copied().unwrap_or(0);
                prop_assert!(back >= 1, "entry {:?} pushed {} times, never handed back", e, n);
                if *n == 1 {
                    prop_assert_eq!(back, 1, "entry {:?} pushed once", e);
                }
            }
        }
    }
}
