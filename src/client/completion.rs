//! How a producer reports the outcome of each message: a boxed callback (one per message, for
//! `send_async` and single sends), or a slot in a shared table (for `send_many`, where boxing a
//! callback per message would cost more than the rest of the send).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::error::Result;
use super::message::MessageId;

/// Called once with the outcome of a send.
pub type SendCallback = Box<dyn FnOnce(Result<MessageId>) + Send + 'static>;

/// Where the outcome of one message goes.
pub enum Completion {
    /// Call this.
    Callback(SendCallback),
    /// Fill slot `usize` of this table.
    Slot(Arc<Slots>, usize),
}

impl Completion {
    /// Delivers the outcome.
    pub fn complete(self, result: Result<MessageId>) {
        match self {
            Completion::Callback(f) => f(result),
            Completion::Slot(slots, i) => slots.fill(i, result),
        }
    }
}

impl From<SendCallback> for Completion {
    fn from(f: SendCallback) -> Self {
        Completion::Callback(f)
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
