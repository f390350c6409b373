//! Settling pending messages: receipts complete them in order, timeouts and fatal errors fail
//! them, and flushes and the close learn what failed while they waited (a flush that returned
//! normally after a send failed would tell the application its data is safe when it is not).

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Actor;
use crate::client::completion::Completion;
use crate::client::error::{Error, ErrorKind, Result};
use crate::client::message::MessageId;

impl Actor {
    /// Completes the message at the front of `pending` (a receipt for anything else means the
    /// broker and this producer disagree: start over on a new connection).
    pub(super) fn on_receipt(&mut self, seq: u64, id: Option<MessageId>) {
        let Some(front) = self.pending.front() else {
            log::debug!("{}: receipt for {seq} with nothing pending", self.topic);
            return;
        };
        if seq < front.sequence_id {
            log::debug!("{}: late receipt for {seq}", self.topic);
            return;
        }
        if seq > front.sequence_id {
            log::warn!(
                "{}: receipt for {seq} while {} is pending; resending",
                self.topic,
                front.sequence_id
            );
            self.disconnect(Duration::ZERO);
            return;
        }
        let op = self.pending.pop_front().expect("front exists");
        let mut base = id.unwrap_or(MessageId::new(-1, -1, -1, -1));
        base.partition = self.partition;
        base.topic = None;
        let n = op.callbacks.len();
        self.release(n, op.bytes);
        self.state.counters.settled(n, op.bytes, op.sent_at.elapsed());
        let highest = op.highest_sequence_id as i64;
        self.state.last_sequence_id.fetch_max(highest, Ordering::Relaxed);
        for (i, done) in op.callbacks.into_iter().enumerate() {
            let mut id = base.clone();
            if op.batched {
                id.batch_index = i as i32;
                id.batch_size = n as i32;
            }
            done.complete(Ok(id));
        }
        self.complete_flushers();
    }

    pub(super) fn fail_expired(&mut self) {
        let now = Instant::now();
        let mut failed = 0;
        let timed_out = Error::new(ErrorKind::Timeout, format!("send to {} timed out", self.topic));
        while let Some(op) = self.pending.front() {
            if op.sent_at + self.opts.send_timeout > now {
                break;
            }
            let op = self.pending.pop_front().expect("front exists");
            failed += op.callbacks.len();
            self.fail_settled(op.sequence_id, op.callbacks, op.bytes, &timed_out);
        }
        if failed > 0 {
            log::warn!("{}: {failed} messages timed out", self.topic);
        }
        self.complete_flushers();
    }

    pub(super) fn fail_all(&mut self, e: Error) {
        // The first failure is the one to report (close after a terminated topic says so).
        if self.failed.is_none() {
            self.failed = Some(e.clone());
        }
        self.flush_batch();
        while let Some(op) = self.pending.pop_front() {
            self.fail_settled(op.sequence_id, op.callbacks, op.bytes, &e);
        }
        self.complete_flushers();
    }

    /// Fails the messages of one send (numbered from `seq`), and tells the flushes and the
    /// close that wait for them.
    pub(super) fn fail_settled(&mut self, seq: u64, callbacks: Vec<Completion>, bytes: usize, e: &Error) {
        let n = callbacks.len();
        self.release(n, bytes);
        self.state.counters.failed(n);
        if n > 0 {
            for w in self.flush_waiters.iter_mut().filter(|w| seq <= w.watermark) {
                w.failures.note(n, e);
            }
            if self.closing.is_some() {
                self.close_failures.note(n, e);
            }
        }
        for done in callbacks {
            done.complete(Err(e.clone()));
        }
    }

    pub(super) fn complete_flushers(&mut self) {
        let front = self.pending.front().map(|op| op.sequence_id);
        let waiters = std::mem::take(&mut self.flush_waiters);
        for w in waiters {
            if front.is_some_and(|f| f <= w.watermark) {
                self.flush_waiters.push(w);
            } else {
                w.finish();
            }
        }
    }
}

/// Messages that failed while someone waited for them.
#[derive(Default)]
pub(super) struct Failures {
    count: usize,
    first: Option<Error>,
}

impl Failures {
    /// Counts `n` messages that failed with `e`.
    pub fn note(&mut self, n: usize, e: &Error) {
        self.count += n;
        if self.first.is_none() {
            self.first = Some(e.clone());
        }
    }

    /// `Ok` when nothing failed; otherwise an error saying how many messages `who` waited for
    /// failed, of the first failure's kind (and broker code).
    pub fn outcome(&mut self, who: &str) -> Result<()> {
        let Some(first) = self.first.take() else {
            return Ok(());
        };
        let message = format!(
            "{} message(s) that {who} waited for failed; the first: {}",
            std::mem::take(&mut self.count),
            first.message()
        );
        Err(summary_error(&first, message))
    }
}

/// An error carrying `first`'s class and broker code with a new message. A closed producer is
/// reported as a plain failure: `AlreadyClosed` from `close()` would read as "closed twice" to
/// code that ignores exactly that.
fn summary_error(first: &Error, message: String) -> Error {
    if let Some(code) = first.server_code() {
        return Error::from_code(code, &message);
    }
    let kind = match first.kind() {
        ErrorKind::AlreadyClosed => ErrorKind::Other,
        k => k,
    };
    Error::new(kind, message)
}

/// A flush waiting for every message up to `watermark` (a sequence id) to settle.
pub(super) struct FlushWaiter {
    pub watermark: u64,
    pub failures: Failures,
    reply: oneshot::Sender<Result<()>>,
}

impl FlushWaiter {
    pub fn new(watermark: u64, reply: oneshot::Sender<Result<()>>) -> Self {
        FlushWaiter {
            watermark,
            failures: Failures::default(),
            reply,
        }
    }

    /// Answers the flush.
    pub fn finish(mut self) {
        let _ = self.reply.send(self.failures.outcome("flush()"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::pb::ServerError;

    #[test]
    fn nothing_failed_is_ok() {
        assert!(Failures::default().outcome("flush()").is_ok());
    }

    #[test]
    fn failures_are_counted_and_keep_the_first_kind() {
        let mut f = Failures::default();
        f.note(3, &Error::timeout("send"));
        f.note(2, &Error::closed("producer"));
        let e = f.outcome("flush()").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert!(
            e.message().starts_with("5 message(s) that flush() waited for failed"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn a_closed_producer_is_not_reported_as_already_closed() {
        let mut f = Failures::default();
        f.note(1, &Error::closed("producer"));
        assert_eq!(f.outcome("close()").unwrap_err().kind(), ErrorKind::Other);
    }

    #[test]
    fn the_broker_code_is_kept() {
        let mut f = Failures::default();
        f.note(1, &Error::from_server(ServerError::TopicTerminatedError, "terminated"));
        let e = f.outcome("close()").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TopicTerminated);
        assert_eq!(e.server_code(), Some(ServerError::TopicTerminatedError as i32));
    }
}
