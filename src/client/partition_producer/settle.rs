//! What a flush or a close is told when messages it waited for failed: a flush that returned
//! normally after a send failed would tell the application its data is safe when it is not.

use tokio::sync::oneshot;

use crate::client::error::{Error, ErrorKind, Result};
use crate::protocol::pb::ServerError;

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
        return Error::from_server(
            ServerError::try_from(code).unwrap_or(ServerError::UnknownError),
            &message,
        );
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
