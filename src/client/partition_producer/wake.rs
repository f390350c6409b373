//! Waking a producer's actor only when queued messages need it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How callers wake the actor. While a batch is open the actor does not watch its channel,
/// so queuing a message costs no thread wake-up; callers ring `urgent` only when the batch is
/// full or a message must go out now (a blocking send, a delayed or oversized message, a
/// flush, a close). Without this, every `send_async` would wake the I/O thread.
#[derive(Default)]
pub(crate) struct Wake {
    queued: AtomicUsize,
    queued_bytes: AtomicUsize,
    pub urgent: tokio::sync::Notify,
}

impl Wake {
    /// Notes queued messages; rings when they need prompt handling.
    pub fn queued(&self, messages: usize, bytes: usize, urgent: bool, max_messages: usize, max_bytes: usize) {
        let n = self.queued.fetch_add(messages, Ordering::AcqRel) + messages;
        let b = self.queued_bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if urgent || n >= max_messages || b >= max_bytes {
            self.urgent.notify_one();
        }
    }

    pub(super) fn reset(&self) {
        self.queued.store(0, Ordering::Release);
        self.queued_bytes.store(0, Ordering::Release);
    }
}
