//! Runs each partition actor under watch.
//!
//! An actor that panics leaves its callers waiting on things only it could settle. tokio would
//! catch the panic and drop the task silently; the supervisor instead logs it, tells the
//! actor's owner (`on_panic`: a consumer ends its inbox, so blocked receivers wake with the
//! error), and then drops the actor, whose completion guards and reply channels fail every send,
//! flush and acknowledgement it still held.
//!
//! Tests can make a running actor panic through [`inject_panic`], which works only in a process
//! started with `MAGNETAR_TEST_HOOKS=1`.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::error::{Error, ErrorKind};

/// Spawns the actor of the `kind` ("producer", "consumer") of `topic`. If it panics,
/// `on_panic` gets an error describing the panic before the actor's state is dropped.
pub(crate) fn spawn<F>(
    kind: &'static str,
    topic: impl Into<String>,
    on_panic: impl FnOnce(Error) + Send + 'static,
    actor: F,
) where
    F: Future<Output = ()> + Send + 'static,
{
    let topic = topic.into();
    // The actor's future is boxed once, here, and the task holds only the box: captured by
    // value in the task's async block, it was laid out there and again in the box (twice
    // more with the test-hook branch), about 200 KB per consumer instead of 70 (issue 31).
    let actor: Watched = match hooks::register(&topic) {
        Some(trigger) => Box::pin(async move {
            tokio::pin!(actor);
            tokio::select! {
                () = &mut actor => {}
                () = trigger.notified() => panic!("panic injected by a test"),
            }
        }),
        None => Box::pin(actor),
    };
    tokio::spawn(async move {
        let Err((panic, actor)) = CatchUnwind(Some(actor)).await else {
            return;
        };
        let what = panic_message(&*panic);
        log::error!("the {kind} of {topic} panicked ({what}); failing the operations it held");
        on_panic(Error::new(
            ErrorKind::Other,
            format!("internal error: the {kind} of {topic} stopped after a panic ({what})"),
        ));
        if catch_unwind(AssertUnwindSafe(move || drop(actor))).is_err() {
            log::error!("the {kind} of {topic} panicked again while being dropped");
        }
    });
}

/// An actor's future, boxed.
type Watched = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Polls the inner future with panics caught; on a panic, hands back the payload and the
/// future itself, so the caller decides when the actor's state is dropped.
struct CatchUnwind(Option<Watched>);

type Panic = Box<dyn std::any::Any + Send>;

impl Future for CatchUnwind {
    type Output = Result<(), (Panic, Watched)>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut().expect("polled after it finished").as_mut();
        match catch_unwind(AssertUnwindSafe(move || inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(())) => Poll::Ready(Ok(())),
            // A panicked future must not be polled again: it is handed over whole.
            Err(panic) => Poll::Ready(Err((panic, self.0.take().expect("present")))),
        }
    }
}

/// The text of a panic payload (`panic!` with a literal or a formatted message).
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string())
}

/// Makes every actor of `topic` panic; returns how many there were. Fails unless the process
/// was started with `MAGNETAR_TEST_HOOKS=1`.
#[cfg_attr(not(feature = "python"), allow(dead_code))]
pub fn inject_panic(topic: &str) -> Result<usize, Error> {
    hooks::trigger(topic)
}

mod hooks {
    use std::sync::{Arc, Mutex, OnceLock, Weak};

    use tokio::sync::Notify;

    use crate::client::error::Error;

    fn enabled() -> bool {
        static ENABLED: OnceLock<bool> = OnceLock::new();
        *ENABLED.get_or_init(|| std::env::var_os("MAGNETAR_TEST_HOOKS").is_some_and(|v| v == "1"))
    }

    static ACTORS: Mutex<Vec<(String, Weak<Notify>)>> = Mutex::new(Vec::new());

    /// A trigger for the actor about to start, when hooks are on.
    pub fn register(topic: &str) -> Option<Arc<Notify>> {
        if !enabled() {
            return None;
        }
        let trigger = Arc::new(Notify::new());
        let mut actors = ACTORS.lock().unwrap_or_else(|e| e.into_inner());
        actors.retain(|(_, t)| t.strong_count() > 0);
        actors.push((topic.to_string(), Arc::downgrade(&trigger)));
        Some(trigger)
    }

    pub fn trigger(topic: &str) -> Result<usize, Error> {
        if !enabled() {
            return Err(Error::invalid(
                "test hooks are off (start the process with MAGNETAR_TEST_HOOKS=1)",
            ));
        }
        let actors = ACTORS.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        for (t, trigger) in actors.iter() {
            if t == topic || t.starts_with(&format!("{topic}-partition-")) {
                if let Some(trigger) = trigger.upgrade() {
                    // A stored permit: the panic happens even if the actor is busy right now.
                    trigger.notify_one();
                    n += 1;
                }
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::{mpsc, oneshot};

    use super::*;
    use crate::client::completion::{Completion, SendCallback, SlotRun, Slots};
    use crate::client::error::Result;
    use crate::client::inbox::{Inbox, Take};

    /// What a minimal actor is asked to hold (as a producer holds sends and a consumer holds
    /// receipts), or to do.
    enum Cmd {
        Hold(Completion),
        HoldRun(SlotRun),
        Ask(oneshot::Sender<Result<()>>),
        Panic,
    }

    async fn minimal_actor(mut rx: mpsc::UnboundedReceiver<Cmd>) {
        let mut held = Vec::new();
        let mut runs = Vec::new();
        let mut asks = Vec::new();
        while let Some(cmd) = rx.recv().await {
            match cmd {
                Cmd::Hold(c) => held.push(c),
                Cmd::HoldRun(r) => runs.push(r),
                Cmd::Ask(reply) => asks.push(reply),
                Cmd::Panic => panic!("deliberate: {} held", held.len() + runs.len() + asks.len()),
            }
        }
    }

    /// Guards a test against hanging forever on the very bug it tests (not a timing check).
    async fn settled<T>(what: &str, f: impl Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(30), f)
            .await
            .unwrap_or_else(|_| panic!("{what} never settled"))
    }

    #[tokio::test]
    async fn a_panicking_actor_fails_everything_it_held_and_ends_the_inbox() {
        let inbox = Arc::new(Inbox::new());
        let (tx, rx) = mpsc::unbounded_channel();
        let ended = inbox.clone();
        spawn("consumer", "t", move |e| ended.end(e), minimal_actor(rx));

        let receiver = {
            let inbox = inbox.clone();
            tokio::spawn(async move {
                inbox.wait().await;
                inbox.try_take()
            })
        };
        let (sent_tx, sent) = oneshot::channel();
        let cb: SendCallback = Box::new(move |r| {
            let _ = sent_tx.send(r);
        });
        let slots = Slots::new(3);
        let (ask_tx, asked) = oneshot::channel();
        tx.send(Cmd::Hold(cb.into())).unwrap();
        tx.send(Cmd::Hold(Completion::slot(slots.clone(), 0))).unwrap();
        tx.send(Cmd::HoldRun(SlotRun::new(slots.clone(), 1, 2))).unwrap();
        tx.send(Cmd::Ask(ask_tx)).unwrap();
        tx.send(Cmd::Panic).unwrap();

        let e = settled("the held send", sent).await.unwrap().unwrap_err();
        assert!(e.message().contains("stopped before"), "{}", e.message());
        let outcomes = settled("the held send_many", slots.wait()).await;
        assert!(outcomes.iter().all(|r| r.is_err()), "{outcomes:?}");
        assert!(settled("the held request", asked).await.is_err());
        match settled("the blocked receive", receiver).await.unwrap() {
            Take::Ended(e) => {
                assert!(
                    e.message().contains("panic") && e.message().contains("4 held"),
                    "{}",
                    e.message()
                )
            }
            _ => panic!("the inbox did not end"),
        }
        assert!(tx.send(Cmd::Panic).is_err(), "the actor's channel is still open");
    }

    #[tokio::test]
    async fn an_actor_that_ends_normally_does_not_call_on_panic() {
        let (tx, rx) = mpsc::unbounded_channel::<Cmd>();
        let (called_tx, called) = oneshot::channel::<()>();
        let (done_tx, done) = oneshot::channel::<()>();
        spawn(
            "producer",
            "t",
            move |_| {
                let _ = called_tx.send(());
            },
            async move {
                minimal_actor(rx).await;
                let _ = done_tx.send(());
            },
        );
        drop(tx);
        settled("the actor", done).await.unwrap();
        assert!(
            settled("on_panic's sender", called).await.is_err(),
            "on_panic was called"
        );
    }
}
