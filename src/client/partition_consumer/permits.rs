//! The broker's permits for one partition: the whole receiver queue on (re)subscribe (see
//! `subscribe.rs`), then more once the application has taken half a queue's worth; or, for a
//! zero-queue consumer, one at a time when the application wants a message.

use super::*;

impl PartitionShared {
    /// Zero queue: the application wants a message and none is queued. Asks the broker for
    /// one, unless a permit is already out.
    pub fn want_one(&self) {
        if self.zero_queue && !self.asked.swap(true, Ordering::AcqRel) {
            let _ = self.tx.send(Command::Flow(1));
        }
    }

    /// `n` messages left the queue (taken, or dropped without being taken): their permits
    /// go back to the broker once half a queue's worth has gathered.
    pub(super) fn return_permits(&self, n: u32) {
        if self.zero_queue {
            // Never refilled ahead of the application: `want_one` asks for each message.
            return;
        }
        // Saturating: a hostile entry may declare up to i32::MAX messages.
        let before = self
            .dequeued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| Some(d.saturating_add(n)))
            .unwrap_or(0);
        let total = before.saturating_add(n);
        if total >= self.threshold {
            let granted = self.dequeued.swap(0, Ordering::AcqRel);
            if granted > 0 {
                let _ = self.tx.send(Command::Flow(granted));
            }
        }
    }
}
