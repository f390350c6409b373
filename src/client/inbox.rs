//! The receiver queue a consumer's partitions fill and the application drains.
//!
//! Taking a message is one pop under a lock, so a receive that is cancelled or times out can
//! never lose a message: either it popped the message and returns it, or the message stays.
//! Blocking callers wait on a condition variable (with the GIL released); async callers on a
//! tokio `Notify`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::error::Error;
use super::message::Message;

struct State {
    queue: VecDeque<Message>,
    /// Set when no message can ever arrive again (closed, or every partition terminated).
    ended: Option<Error>,
}

pub(crate) struct Inbox {
    state: Mutex<State>,
    cond: Condvar,
    notify: Notify,
    corrupt: AtomicU64,
    /// The consumer's client-side counters (`client::stats`).
    pub counters: super::stats::ConsumerCounters,
}

/// Outcome of a non-blocking take.
// Returned by value once per take and never stored, so its size costs nothing; boxing the
// message would allocate once per message on the receive path.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Take {
    Message(Message),
    Empty,
    Ended(Error),
}

impl Inbox {
    pub fn new() -> Self {
        Inbox {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                ended: None,
            }),
            cond: Condvar::new(),
            notify: Notify::new(),
            corrupt: AtomicU64::new(0),
            counters: Default::default(),
        }
    }

    /// Counts a message discarded as corrupt.
    pub fn count_corrupt(&self) {
        self.corrupt.fetch_add(1, Ordering::Relaxed);
    }

    /// Messages discarded as corrupt so far.
    pub fn corrupt_count(&self) -> u64 {
        self.corrupt.load(Ordering::Relaxed)
    }

    /// The consumer's client-side statistics, with what is queued now.
    pub fn client_stats(&self) -> super::stats::ConsumerClientStats {
        let mut s = self.counters.snapshot();
        s.queued = self.len() as u64;
        s.corrupt = self.corrupt_count();
        s
    }

    /// Wakes every waiter so it re-checks the consumer's state (end of topic, close).
    pub fn wake(&self) {
        self.cond.notify_all();
        self.notify.notify_waiters();
        self.notify.notify_one();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push_many(&self, msgs: impl IntoIterator<Item = Message>) {
        let mut st = self.lock();
        let before = st.queue.len();
        st.queue.extend(msgs);
        let added = st.queue.len() - before;
        drop(st);
        if added > 0 {
            self.cond.notify_all();
            self.notify.notify_waiters();
            self.notify.notify_one();
        }
    }

    /// Drops queued messages from one partition (its connection was replaced), returning how
    /// many were dropped.
    pub fn drop_origin(&self, origin: usize) -> usize {
        self.remove_where(|m| m.origin == origin)
    }

    /// The batch indexes (-1: not a batch) of the queued messages `pick` picks.
    pub fn queued_indexes(&self, mut pick: impl FnMut(&Message) -> bool) -> Vec<i32> {
        self.lock()
            .queue
            .iter()
            .filter(|m| pick(m))
            .map(|m| m.id.batch_index)
            .collect()
    }

    /// Drops the queued messages `drop` picks, returning how many.
    pub fn remove_where(&self, mut drop: impl FnMut(&Message) -> bool) -> usize {
        let mut st = self.lock();
        let before = st.queue.len();
        st.queue.retain(|m| !drop(m));
        before - st.queue.len()
    }

    pub fn end(&self, why: Error) {
        let mut st = self.lock();
        if st.ended.is_none() {
            st.ended = Some(why);
        }
        drop(st);
        self.cond.notify_all();
        self.notify.notify_waiters();
        self.notify.notify_one();
    }

    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn try_take(&self) -> Take {
        let mut st = self.lock();
        match st.queue.pop_front() {
            Some(m) => {
                self.counters.received(m.payload.len(), m.redelivery_count);
                Take::Message(m)
            }
            None => match &st.ended {
                Some(e) => Take::Ended(e.clone()),
                None => Take::Empty,
            },
        }
    }

    /// Up to `max` messages without waiting, of at most `max_bytes` payload bytes together
    /// (the first message always: one larger than the limit is not stuck for ever).
    pub fn take_many(&self, max: usize, max_bytes: usize) -> (Vec<Message>, Option<Error>) {
        let mut st = self.lock();
        let mut n = 0;
        let mut bytes = 0usize;
        for m in st.queue.iter().take(max) {
            bytes = bytes.saturating_add(m.payload.len());
            if n > 0 && bytes > max_bytes {
                break;
            }
            n += 1;
        }
        let msgs: Vec<Message> = st.queue.drain(..n).collect();
        for m in &msgs {
            self.counters.received(m.payload.len(), m.redelivery_count);
        }
        let ended = if msgs.is_empty() { st.ended.clone() } else { None };
        (msgs, ended)
    }

    /// Waits (blocking the thread) until a message arrives, the inbox ends, or `until` passes.
    pub fn wait_blocking(&self, until: Instant) {
        let st = self.lock();
        if !st.queue.is_empty() || st.ended.is_some() {
            return;
        }
        let now = Instant::now();
        if until <= now {
            return;
        }
        let _ = self.cond.wait_timeout(st, until - now);
    }

    /// Waits (async) until a message may be available or the inbox ends.
    pub async fn wait(&self) {
        // Registered before the check, so a push between the check and the await still wakes us.
        let notified = self.notify.notified();
        {
            let st = self.lock();
            if !st.queue.is_empty() || st.ended.is_some() {
                return;
            }
        }
        notified.await;
    }
}

/// How long a blocking wait sleeps before the caller checks for signals (Ctrl-C).
pub(crate) const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(100);
