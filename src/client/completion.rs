//! How a producer reports the outcome of each message: a boxed callback (one per message, for
//! `send_async` and single sends), or a slot in a shared table (for `send_many`, where boxing a
//! callback per message would cost more than the rest of the send).
//!
//! A completion that is dropped without being completed reports an error: if a producer's actor
//! dies (a panic) while it holds messages, their senders, flushes and `send_many` calls wake with
//! that error rather than waiting forever.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::error::{Error, ErrorKind, Result};
use super::message::MessageId;

/// Called once with the outcome of a send.
pub type SendCallback = Box<dyn FnOnce(Result<MessageId>) + Send + 'static>;

/// Where the outcome of one message goes; completes with an error if dropped unused.
pub struct Completion(Target);

enum Target {
    Callback(SendCallback),
    Slot(Arc<Slots>, usize),
    /// Already completed.
    Spent,
}

impl Completion {
    /// Fills slot `i` of `slots`.
    pub fn slot(slots: Arc<Slots>, i: usize) -> Self {
        Completion(Target::Slot(slots, i))
    }

    /// Delivers the outcome.
    pub fn complete(mut self, result: Result<MessageId>) {
        self.deliver(result);
    }

    fn deliver(&mut self, result: Result<MessageId>) {
        match std::mem::replace(&mut self.0, Target::Spent) {
            Target::Callback(f) => f(result),
            Target::Slot(slots, i) => slots.fill(i, result),
            Target::Spent => {}
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if !matches!(self.0, Target::Spent) {
            self.deliver(Err(abandoned()));
        }
    }
}

/// The error of a message whose producer stopped without settling it.
pub(crate) fn abandoned() -> Error {
    Error::new(
        ErrorKind::Other,
        "internal error: the producer stopped before this message was settled (see the magnetar log)",
    )
}

impl From<SendCallback> for Completion {
    fn from(f: SendCallback) -> Self {
        Completion(Target::Callback(f))
    }
}

/// Consecutive slots `next..end` of one table, for a run of messages handed over as one
/// command. Slots never handed out as completions are failed when the run is dropped.
pub struct SlotRun {
    slots: Arc<Slots>,
    next: usize,
    end: usize,
}

impl SlotRun {
    /// Slots `first..first + len` of `slots`.
    pub fn new(slots: Arc<Slots>, first: usize, len: usize) -> Self {
        SlotRun {
            slots,
            next: first,
            end: first + len,
        }
    }

    /// The completion of the next message of the run.
    pub fn next_completion(&mut self) -> Completion {
        debug_assert!(self.next < self.end, "more messages than slots in a run");
        let i = self.next;
        self.next += 1;
        Completion::slot(self.slots.clone(), i)
    }

    /// Fails every slot not yet handed out.
    pub fn fail_rest(&mut self, e: &Error) {
        for i in self.next..self.end {
            self.slots.fill(i, Err(e.clone()));
        }
        self.next = self.end;
    }
}

impl Drop for SlotRun {
    fn drop(&mut self) {
        if self.next < self.end {
            self.fail_rest(&abandoned());
        }
    }
}

/// Outcomes of a group of messages, in order, with a wake-up once all are in.
pub struct Slots {
    results: Mutex<Vec<Option<Result<MessageId>>>>,
    remaining: AtomicUsize,
    all_done: Notify,
}

impl Slots {
    /// A table for `n` messages.
    pub fn new(n: usize) -> Arc<Slots> {
        Arc::new(Slots {
            results: Mutex::new(vec![None; n]),
            remaining: AtomicUsize::new(n),
            all_done: Notify::new(),
        })
    }

    /// Records the outcome of message `i` (the first outcome wins).
    pub fn fill(&self, i: usize, result: Result<MessageId>) {
        let first = {
            let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
            let slot = &mut results[i];
            let first = slot.is_none();
            *slot = Some(result);
            first
        };
        if first && self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.all_done.notify_one();
        }
    }

    /// Waits for every outcome.
    pub async fn wait(&self) -> Vec<Result<MessageId>> {
        while self.remaining.load(Ordering::Acquire) > 0 {
            let notified = self.all_done.notified();
            if self.remaining.load(Ordering::Acquire) == 0 {
                break;
            }
            notified.await;
        }
        let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
        results.drain(..).map(|r| r.expect("every slot filled")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording() -> (Completion, std::sync::mpsc::Receiver<Result<MessageId>>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let cb: SendCallback = Box::new(move |r| {
            let _ = tx.send(r);
        });
        (cb.into(), rx)
    }

    #[test]
    fn a_dropped_completion_reports_an_error_once() {
        let (done, outcomes) = recording();
        drop(done);
        let e = outcomes.recv().unwrap().unwrap_err();
        assert!(e.message().contains("stopped before"), "{}", e.message());
        assert!(outcomes.try_recv().is_err(), "completed twice");
    }

    #[test]
    fn a_completed_completion_is_not_completed_again_on_drop() {
        let (done, outcomes) = recording();
        done.complete(Ok(MessageId::new(1, 2, -1, -1)));
        assert!(outcomes.recv().unwrap().is_ok());
        assert!(outcomes.try_recv().is_err(), "completed twice");
    }

    #[tokio::test]
    async fn a_dropped_run_fails_the_slots_it_did_not_hand_out() {
        let slots = Slots::new(3);
        let mut run = SlotRun::new(slots.clone(), 0, 3);
        run.next_completion().complete(Ok(MessageId::new(1, 1, -1, -1)));
        let second = run.next_completion();
        drop(run);
        drop(second);
        let outcomes = slots.wait().await;
        assert!(outcomes[0].is_ok());
        assert!(outcomes[1].is_err() && outcomes[2].is_err());
    }
}
