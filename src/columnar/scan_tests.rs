use super::*;
use crate::columnar::read::tests::message;

fn at(ledger: i64, entry: i64, batch: i32) -> Message {
    let mut m = message(entry, None, &[], None);
    m.id = MessageId::new(ledger, entry, 0, batch);
    m
}

fn chunked(ledger: i64, first: i64, last: i64) -> Message {
    let mut m = at(ledger, last, -1);
    m.first_chunk = Some(Box::new((ledger, first)));
    m
}

#[test]
fn keeps_what_is_after_the_start_up_to_the_end() {
    let start = MessageId::new(3, 1, 0, -1);
    let end = MessageId::new(3, 4, 0, -1);
    let mut scan = RangeScan::new("t", Some(start), false, end, None);
    let msgs = [at(3, 1, -1), at(3, 2, -1), at(3, 3, -1), at(3, 4, -1), at(3, 5, -1)];
    let step = scan.step(&msgs);
    assert_eq!(
        step,
        Step {
            keep: vec![1, 2, 3],
            loss: None
        }
    );
    assert!(scan.done() && scan.reached_end());
    assert_eq!(scan.last_key(), (3, 4, -1));
}

#[test]
fn a_verified_start_must_be_reread_or_its_ledger_must_remain() {
    let start = MessageId::new(3, 1, 0, -1);
    let end = MessageId::new(9, 0, 0, -1);
    let mut ok = RangeScan::new("t", Some(start.clone()), true, end.clone(), None);
    assert_eq!(ok.step(&[at(3, 1, -1), at(3, 2, -1)]).keep, vec![1]);
    let mut gone = RangeScan::new("t", Some(start), true, end, None);
    let step = gone.step(&[at(7, 0, -1), at(7, 1, -1)]);
    assert_eq!(step.keep, vec![0, 1]);
    assert!(step
        .loss
        .unwrap()
        .contains("3:1:0:-1, which is gone (the read resumes at 7:0:0:-1)"));
}

#[test]
fn entries_missing_inside_a_ledger_are_no_loss() {
    let mut scan = RangeScan::new("t", None, false, MessageId::new(3, 9, 0, -1), None);
    let step = scan.step(&[at(3, 0, -1), at(3, 4, -1), at(3, 9, -1)]);
    assert_eq!(
        step,
        Step {
            keep: vec![0, 1, 2],
            loss: None
        }
    );
    // a chunk run may start in a hole: the scan reads on past the end, for a while
    assert!(scan.reached_end() && !scan.done());
    assert_eq!(scan.step(&[at(3, 10, -1)]).keep, Vec::<usize>::new());
    assert!(!scan.done());
    let mut later = at(3, 11, -1);
    let mut meta = (*later.metadata).clone();
    meta.publish_time += CHUNK_RUN_WINDOW_MS + 1;
    later.metadata = std::sync::Arc::new(meta);
    assert_eq!(scan.step(&[later]).keep, Vec::<usize>::new());
    assert!(scan.done(), "no chunk run lasts that long");
}

#[test]
fn a_chunk_run_that_starts_before_the_end_is_read_to_its_last_chunk() {
    // the range ends at entry 5; a chunked message has chunks at 4 and 6, and another
    // producer's message is at 5
    let mut scan = RangeScan::new(
        "t",
        Some(MessageId::new(3, 3, 0, -1)),
        false,
        MessageId::new(3, 5, 0, -1),
        None,
    );
    let step = scan.step(&[at(3, 5, -1)]);
    assert_eq!(step.keep, vec![0]);
    assert!(
        scan.reached_end() && !scan.done(),
        "entry 4 may be the first chunk of a run"
    );
    let step = scan.step(&[chunked(3, 4, 6)]);
    assert_eq!(step.keep, vec![0], "its first chunk is in the range");
    assert!(scan.done());
}

#[test]
fn a_chunk_run_that_starts_after_the_end_belongs_to_the_next_range() {
    let mut scan = RangeScan::new("t", None, false, MessageId::new(3, 5, 0, -1), None);
    let step = scan.step(&[at(3, 4, -1), chunked(3, 6, 8)]);
    assert_eq!(step.keep, vec![0]);
    assert!(scan.reached_end());
}

#[test]
fn batch_indexes_order_inside_an_entry() {
    let start = MessageId::new(3, 2, 0, 1);
    let end = MessageId::new(3, 2, 0, 3);
    let mut scan = RangeScan::new("t", Some(start), false, end, None);
    let msgs = [at(3, 2, 0), at(3, 2, 1), at(3, 2, 2), at(3, 2, 3), at(3, 2, 4)];
    assert_eq!(scan.step(&msgs).keep, vec![2, 3]);
    assert!(scan.done());
}

#[test]
fn an_end_time_stops_the_range() {
    let mut scan = RangeScan::new("t", None, false, MessageId::new(3, 9, 0, -1), Some(1_700_000_000_123));
    assert_eq!(scan.step(&[at(3, 0, -1)]).keep, Vec::<usize>::new());
    assert!(scan.done() && !scan.reached_end());
}

#[test]
fn coverage_of_interleaved_chunks_and_markers() {
    let mut c = Coverage::new(Some((7, 0)));
    c.add((7, 1), (7, 1)); // a message
    c.add((7, 3), (7, 3)); // another producer's message between the chunks at 2 and 4
    assert!(c.open_before((7, 3))); // entry 2: a chunk run may still complete
    c.add((7, 2), (7, 4)); // the chunked message, first chunk 2, last 4
    assert!(!c.open_before((7, 4)) && c.holes.is_empty());
    c.add((7, 6), (7, 6)); // entry 5 is a transaction marker: never delivered
    assert!(c.open_before((7, 5)) && !c.open_before((7, 4)));
    c.add((9, 0), (9, 0)); // a new ledger from its first entry
    assert_eq!(c.holes, vec![(7, 5, 5)]);
    c.add((11, 2), (11, 2)); // a new ledger whose first entries are markers
    assert_eq!(c.holes, vec![(7, 5, 5), (11, 0, 1)]);
    c.add((11, 0), (11, 3)); // a chunked message spanning them
    assert_eq!(c.holes, vec![(7, 5, 5)]);
    assert!(!Coverage::new(Some((3, 4))).open_before((3, 4)));
    assert!(Coverage::new(Some((3, 4))).open_before((3, 5)));
}

#[test]
fn a_read_that_jumps_to_a_later_ledger_without_its_end_message_is_a_loss() {
    let end = MessageId::new(3, 9, 0, -1);
    // the topic deleted at entry 4 and re-created: the next message is in a new ledger
    let mut scan =
        RangeScan::new("t", Some(MessageId::new(3, 1, 0, -1)), false, end.clone(), None).expect_end_message(true);
    let step = scan.step(&[at(3, 2, -1), at(3, 3, -1), at(3, 4, -1), at(7, 0, -1), at(7, 1, -1)]);
    assert_eq!(step.keep, vec![0, 1, 2]);
    assert!(step
        .loss
        .as_deref()
        .is_some_and(|l| l.contains("t: the read went from (3, 4, -1) to 7:0")));
    assert!(scan.done());

    // the end delivered, then a later ledger: complete, no loss
    let mut ok =
        RangeScan::new("t", Some(MessageId::new(3, 1, 0, -1)), false, end.clone(), None).expect_end_message(true);
    assert_eq!(ok.step(&[at(3, 8, -1), at(3, 9, -1), at(7, 0, -1)]).loss, None);
    // a made-up end (a split boundary) may be skipped with markers after it
    let mut boundary = RangeScan::new("t", Some(MessageId::new(3, 1, 0, -1)), false, end, None);
    assert_eq!(boundary.step(&[at(3, 2, -1), at(3, 3, -1), at(7, 0, -1)]).loss, None);
    assert!(boundary.done());
}
