//! The client-wide budget of bytes held in pending messages, shared by all its producers.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// A client-wide budget of bytes in pending messages.
pub(crate) struct MemoryLimit {
    limit: usize,
    used: AtomicUsize,
    freed: Notify,
}

impl MemoryLimit {
    pub fn new(limit: usize) -> Self {
        MemoryLimit {
            limit,
            used: AtomicUsize::new(0),
            freed: Notify::new(),
        }
    }

    /// Takes `n` bytes if they fit; one message may overshoot an empty budget so a message
    /// larger than the limit still goes out alone.
    pub fn try_reserve(&self, n: usize) -> bool {
        if self.limit == 0 {
            return true;
        }
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            if cur > 0 && cur + n > self.limit {
                return false;
            }
            match self
                .used
                .compare_exchange_weak(cur, cur + n, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    pub async fn reserve(&self, n: usize) {
        loop {
            let freed = self.freed.notified();
            if self.try_reserve(n) {
                return;
            }
            freed.await;
        }
    }

    pub fn release(&self, n: usize) {
        if self.limit == 0 || n == 0 {
            return;
        }
        self.used.fetch_sub(n, Ordering::AcqRel);
        self.freed.notify_waiters();
    }
}
