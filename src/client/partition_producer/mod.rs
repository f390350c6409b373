//! The producer of one topic partition: an actor ([`actor`]) that owns the open batch, the queue
//! of sent but unacknowledged messages, and the registration on a connection, and the handle
//! the public producer holds, which admits messages (a pending slot and client memory each)
//! before they reach the actor.
//!
//! Every message sent stays pending (with its encoded frame) until its receipt arrives. When
//! the connection is lost the actor attaches again, with backoff, and writes the pending
//! frames again in order with the original sequence ids, so deduplication can drop what the
//! broker already stored and nothing is lost.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, Semaphore, TryAcquireError};

use super::completion::{Completion, SlotRun};
use super::error::{Error, ErrorKind, Result};
use super::message::OutgoingMessage;
use super::options::ProducerOptions;
use super::shared::ClientShared;
use crate::protocol::frame;

mod actor;
mod batch;
mod encode;
mod wake;

pub(crate) use wake::Wake;

pub(crate) enum Command {
    Send {
        msg: OutgoingMessage,
        done: Completion,
        flush: bool,
    },
    /// Consecutive messages of one `send_many`, each completing the next slot of `run`.
    SendRun {
        msgs: Vec<OutgoingMessage>,
        run: SlotRun,
        flush: bool,
    },
    Flush(oneshot::Sender<Result<()>>),
    Close(oneshot::Sender<Result<()>>),
}

impl Command {
    /// Answers a command that will never be handled: sends fail with `e` once `release` has
    /// been given back the (messages, bytes) they held; flushes and closes succeed.
    fn refuse(self, e: &Error, release: impl FnOnce(usize, usize)) {
        match self {
            Command::Send { msg, done, .. } => {
                release(1, msg.footprint());
                done.complete(Err(e.clone()));
            }
            Command::SendRun { msgs, mut run, .. } => {
                release(msgs.len(), msgs.iter().map(OutgoingMessage::footprint).sum());
                run.fail_rest(e);
            }
            Command::Flush(r) | Command::Close(r) => {
                let _ = r.send(Ok(()));
            }
        }
    }
}

/// State readable without a round trip to the actor.
pub(crate) struct SharedState {
    pub name: Mutex<String>,
    pub closed: AtomicBool,
    pub connected: AtomicBool,
    pub max_message_size: AtomicUsize,
    pub last_sequence_id: AtomicI64,
    /// Sent, failed, bytes and receipt latency (`client::stats`).
    pub counters: crate::client::stats::ProducerCounters,
}

/// Why a message was not admitted.
pub(crate) enum Refusal {
    Closed,
    /// Every pending slot is taken.
    QueueFull,
    /// The client's memory budget is spent.
    MemoryFull,
}

impl Refusal {
    pub fn is_full(&self) -> bool {
        !matches!(self, Refusal::Closed)
    }

    pub fn into_error(self) -> Error {
        match self {
            Refusal::Closed => Error::closed("producer"),
            Refusal::QueueFull => Error::new(
                ErrorKind::ProducerQueueFull,
                "producer queue is full (max_pending reached)",
            ),
            Refusal::MemoryFull => Error::new(ErrorKind::ProducerQueueFull, "client memory limit reached"),
        }
    }
}

/// Handle to the actor of one partition. A message is admitted (a pending slot and its bytes
/// of client memory taken) before it is posted; the actor gives both back once it settles.
pub(crate) struct PartitionProducer {
    tx: mpsc::UnboundedSender<Command>,
    wake: Arc<Wake>,
    permits: Arc<Semaphore>,
    state: Arc<SharedState>,
    client: Arc<ClientShared>,
    opts: ProducerOptions,
    topic: String,
}

impl PartitionProducer {
    /// Attaches to `topic` and starts the actor.
    pub async fn create(
        client: Arc<ClientShared>,
        topic: String,
        partition: i32,
        opts: ProducerOptions,
    ) -> Result<PartitionProducer> {
        let permits = Arc::new(Semaphore::new(opts.max_pending));
        let state = Arc::new(SharedState {
            name: Mutex::new(opts.name.clone().unwrap_or_default()),
            closed: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            max_message_size: AtomicUsize::new(frame::DEFAULT_MAX_MESSAGE_SIZE),
            last_sequence_id: AtomicI64::new(-1),
            counters: Default::default(),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let wake = Arc::new(Wake::default());
        actor::start(
            client.clone(),
            topic.clone(),
            partition,
            opts.clone(),
            actor::Channels {
                rx,
                wake: wake.clone(),
                permits: permits.clone(),
                state: state.clone(),
            },
        )
        .await?;
        Ok(PartitionProducer {
            tx,
            wake,
            permits,
            state,
            client,
            opts,
            topic,
        })
    }

    /// The partition's full topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn name(&self) -> String {
        self.state.name.lock().expect("name lock").clone()
    }

    pub fn last_sequence_id(&self) -> i64 {
        self.state.last_sequence_id.load(Ordering::Relaxed)
    }

    pub fn is_connected(&self) -> bool {
        self.state.connected.load(Ordering::Acquire)
    }

    pub fn is_closed(&self) -> bool {
        self.state.closed.load(Ordering::Acquire)
    }

    /// This partition's client-side statistics.
    pub fn stats(&self) -> crate::client::stats::ProducerStats {
        let mut s = self.state.counters.snapshot();
        s.pending = self.unsettled() as u64;
        s
    }

    /// Messages admitted and not yet settled.
    pub fn unsettled(&self) -> usize {
        self.opts.max_pending.saturating_sub(self.permits.available_permits())
    }

    /// Pending slots free right now.
    pub fn free_slots(&self) -> usize {
        self.permits.available_permits()
    }

    /// Whether `msg` may go out here at all: the producer and client are open and the message
    /// fits the broker's limit (or will be chunked).
    pub fn check(&self, msg: &OutgoingMessage) -> Result<()> {
        if self.is_closed() {
            return Err(Error::closed("producer"));
        }
        self.client.check_open()?;
        let max = self.state.max_message_size.load(Ordering::Relaxed);
        if msg.payload.len() > max && !self.opts.chunking {
            return Err(Error::new(
                ErrorKind::MessageTooLarge,
                format!(
                    "message of {} bytes exceeds the broker's limit of {max} bytes",
                    msg.payload.len()
                ),
            ));
        }
        Ok(())
    }

    /// Admits `msg` if a pending slot and its memory are free right now.
    pub fn try_admit(&self, msg: &OutgoingMessage) -> std::result::Result<(), Refusal> {
        match self.permits.try_acquire() {
            Ok(p) => p.forget(),
            Err(TryAcquireError::Closed) => return Err(Refusal::Closed),
            Err(TryAcquireError::NoPermits) => return Err(Refusal::QueueFull),
        }
        if !self.client.memory.try_reserve(msg.footprint()) {
            self.release(1, 0);
            return Err(Refusal::MemoryFull);
        }
        Ok(())
    }

    /// Admits `msg`, waiting for a pending slot and then for memory; checks it again after
    /// the wait.
    pub async fn admit(&self, msg: &OutgoingMessage) -> Result<()> {
        match self.permits.acquire().await {
            Ok(p) => p.forget(),
            Err(_) => return Err(Error::closed("producer")),
        }
        self.client.memory.reserve(msg.footprint()).await;
        if let Err(e) = self.check(msg) {
            self.release(1, msg.footprint());
            return Err(e);
        }
        Ok(())
    }

    /// Takes `n` pending slots, waiting for them; `false` once the producer is closed.
    pub async fn take_slots(&self, n: usize) -> bool {
        let Ok(n) = u32::try_from(n) else { return false };
        self.permits.acquire_many(n).await.map(|p| p.forget()).is_ok()
    }

    /// Takes `bytes` of client memory if they fit right now.
    pub fn try_reserve_memory(&self, bytes: usize) -> bool {
        self.client.memory.try_reserve(bytes)
    }

    /// Gives back `messages` pending slots and `bytes` of client memory.
    pub fn release(&self, messages: usize, bytes: usize) {
        self.permits.add_permits(messages);
        self.client.memory.release(bytes);
    }

    /// Hands an admitted message to the actor. `flush` sends the open batch once it is in.
    pub fn post(&self, msg: OutgoingMessage, flush: bool, done: Completion) {
        let bytes = msg.footprint();
        let urgent = flush || self.cannot_wait_in_batch(&msg);
        self.post_command(Command::Send { msg, done, flush }, 1, bytes, urgent);
    }

    /// Hands admitted messages (slots `run` of a `send_many`) to the actor in one command;
    /// `bytes` is their memory.
    pub fn post_run(&self, msgs: Vec<OutgoingMessage>, run: SlotRun, bytes: usize, flush: bool) {
        if msgs.is_empty() {
            return;
        }
        let count = msgs.len();
        let urgent = flush || msgs.iter().any(|m| self.cannot_wait_in_batch(m));
        self.post_command(Command::SendRun { msgs, run, flush }, count, bytes, urgent);
    }

    fn post_command(&self, cmd: Command, count: usize, bytes: usize, urgent: bool) {
        match self.tx.send(cmd) {
            Ok(()) => self.wake.queued(
                count,
                bytes,
                urgent,
                self.opts.batch_max_messages,
                self.opts.batch_max_bytes,
            ),
            Err(refused) => refused.0.refuse(&Error::closed("producer"), |n, b| self.release(n, b)),
        }
    }

    /// Whether the actor must see `msg` at once rather than when the open batch is due: it
    /// goes out on its own (no batching, a delivery time, too big for a batch).
    fn cannot_wait_in_batch(&self, msg: &OutgoingMessage) -> bool {
        let o = &self.opts;
        !o.batching || msg.deliver_at.is_some() || msg.payload.len() > o.batch_max_bytes
    }

    /// Asks the actor for a flush or a close, waking it at once; `None` once it is gone.
    pub fn ask(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<()>>) -> Command,
    ) -> Option<oneshot::Receiver<Result<()>>> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).ok()?;
        self.wake.urgent.notify_one();
        Some(rx)
    }
}
