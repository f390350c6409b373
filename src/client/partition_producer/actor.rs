//! The actor of one partition's producer: batches what the handle posts, writes the frames
//! the [`Encoder`] makes, keeps them pending until their receipts arrive, and writes them
//! again in order after each reattach.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;

use super::batch::{OpenBatch, TakenBatch};
use super::encode::Encoder;
use super::{Command, SharedState, Wake};
use crate::client::completion::Completion;
use crate::client::error::{Error, ErrorKind, Result};
use crate::client::link::{Assigned, AttachRequest, Link, LinkEvent};
use crate::client::message::{MessageId, OutgoingMessage};
use crate::client::options::ProducerOptions;
use crate::client::shared::ClientShared;
use crate::client::timer::{sleep_until_opt, DeadlineTimer};
use crate::net::{Event, HandlerId};
use crate::protocol::commands;
use crate::protocol::frame::Frame;
use crate::protocol::pb::{base_command::Type, ServerError};
use settle::{Failures, FlushWaiter};

mod settle;

/// The actor's ends of what it shares with the handle.
pub(super) struct Channels {
    pub rx: mpsc::UnboundedReceiver<Command>,
    pub wake: Arc<Wake>,
    pub permits: Arc<Semaphore>,
    pub state: Arc<SharedState>,
}

/// Attaches the producer of `topic` and spawns its actor.
pub(super) async fn start(
    client: Arc<ClientShared>,
    topic: String,
    partition: i32,
    opts: ProducerOptions,
    channels: Channels,
) -> Result<()> {
    let Channels {
        rx,
        wake,
        permits,
        state,
    } = channels;
    let producer_id = client.next_producer_id();
    let encoder = Encoder::new(producer_id, &opts)?;
    let batch_timer = DeadlineTimer::new(opts.batch_max_delay);
    let mut actor = Actor {
        wake,
        link: Link::new(
            client.clone(),
            Arc::from(topic.as_str()),
            HandlerId::Producer(producer_id),
        ),
        encoder,
        client,
        topic,
        partition,
        producer_id,
        user_named: opts.name.is_some(),
        next_seq: opts.initial_sequence_id.unwrap_or(0),
        opts,
        state,
        permits,
        rx,
        epoch: 0,
        topic_epoch: None,
        batch: OpenBatch::default(),
        batch_started: None,
        batch_timer,
        flush_requested: false,
        pending: VecDeque::new(),
        flush_waiters: Vec::new(),
        closing: None,
        close_failures: Failures::default(),
        close_deadline: None,
        failed: None,
    };
    let reply = actor.link.attach(actor.attach_request()).await?;
    actor.attached(&reply);
    let topic = actor.topic.clone();
    crate::client::supervisor::spawn("producer", topic, |_| {}, actor.run());
    Ok(())
}

struct InFlight {
    sequence_id: u64,
    highest_sequence_id: u64,
    frame: Bytes,
    callbacks: Vec<Completion>,
    batched: bool,
    sent_at: Instant,
    bytes: usize,
}

struct Actor {
    wake: Arc<Wake>,
    link: Link,
    encoder: Encoder,
    client: Arc<ClientShared>,
    topic: String,
    partition: i32,
    producer_id: u64,
    opts: ProducerOptions,
    user_named: bool,
    state: Arc<SharedState>,
    permits: Arc<Semaphore>,
    rx: mpsc::UnboundedReceiver<Command>,
    epoch: u64,
    /// The broker's topic epoch from the last attach, sent back on reattach so that a producer
    /// fenced meanwhile (`ExclusiveWithFencing`) is told so (`ProducerFenced`) instead of busy.
    topic_epoch: Option<u64>,
    next_seq: u64,
    batch: OpenBatch,
    batch_started: Option<Instant>,
    /// Fires when the open batch has waited `batch_max_delay`.
    batch_timer: DeadlineTimer,
    flush_requested: bool,
    pending: VecDeque<InFlight>,
    flush_waiters: Vec<FlushWaiter>,
    closing: Option<oneshot::Sender<Result<()>>>,
    /// Messages that failed after close was asked for: close reports them.
    close_failures: Failures,
    /// Pending sends still unacknowledged at this time fail, so close never hangs.
    close_deadline: Option<Instant>,
    failed: Option<Error>,
}

impl Actor {
    async fn run(mut self) {
        loop {
            self.batch_timer
                .set(self.batch_started.map(|t| t + self.opts.batch_max_delay));
            let timeout_due = match self.pending.front() {
                Some(op) if !self.opts.send_timeout.is_zero() => Some(op.sent_at + self.opts.send_timeout),
                _ => None,
            };
            // With a batch open, queued messages wait for the deadline or an urgent ring.
            let lazy = !self.batch.is_empty();
            tokio::select! {
                cmd = self.rx.recv(), if !lazy => match cmd {
                    Some(cmd) => {
                        self.handle(cmd);
                        self.drain();
                    }
                    // Every handle is gone: nobody can await the pending sends, but finish them.
                    None => {
                        let (tx, _rx) = oneshot::channel();
                        self.handle(Command::Close(tx));
                    }
                },
                _ = self.wake.urgent.notified(), if lazy => self.drain(),
                ev = self.link.next() => self.on_link_event(ev),
                _ = self.batch_timer.expired() => {
                    self.drain();
                    self.flush_batch();
                }
                _ = sleep_until_opt(timeout_due) => self.fail_expired(),
                _ = sleep_until_opt(self.close_deadline) => {
                    log::warn!("{}: {} messages unacknowledged at close; failing them", self.topic, self.pending.len());
                    self.fail_all(Error::new(
                        ErrorKind::Timeout,
                        "not acknowledged by the broker before close() gave up waiting",
                    ));
                }
            }
            if self.closing.is_some() && self.batch.is_empty() && (self.pending.is_empty() || self.failed.is_some()) {
                break;
            }
        }
        self.finish_close().await;
    }

    /// Handles everything queued, then flushes if any of it asked for a flush, so a burst of
    /// sends that each ask for one still travels as full batches.
    fn drain(&mut self) {
        self.wake.reset();
        loop {
            match self.rx.try_recv() {
                Ok(cmd) => self.handle(cmd),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    if self.closing.is_none() {
                        let (tx, _rx) = oneshot::channel();
                        self.handle(Command::Close(tx));
                    }
                    break;
                }
            }
        }
        if std::mem::take(&mut self.flush_requested) {
            self.flush_batch();
        }
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Send { msg, done, flush } => self.send(msg, done, flush),
            Command::SendRun { msgs, mut run, flush } => {
                let last = msgs.len().saturating_sub(1);
                for (i, msg) in msgs.into_iter().enumerate() {
                    self.send(msg, run.next_completion(), flush && i == last);
                }
            }
            Command::Flush(reply) => {
                if let Some(e) = &self.failed {
                    let _ = reply.send(Err(e.clone()));
                    return;
                }
                // Waiting from before the batch goes out, so a batch that fails to encode counts.
                self.flush_waiters.push(FlushWaiter::new(u64::MAX, reply));
                self.flush_batch();
                let last = self.pending.back().map_or(0, |op| op.sequence_id);
                if let Some(w) = self.flush_waiters.last_mut() {
                    w.watermark = last;
                }
                self.complete_flushers();
            }
            Command::Close(reply) => {
                self.state.closed.store(true, Ordering::Release);
                self.closing = Some(reply);
                self.flush_batch();
                if self.link.conn().is_none() {
                    // Not attached: nothing pending can be acknowledged any more.
                    self.link.stop_retrying();
                    self.fail_all(Error::closed("producer"));
                } else {
                    let wait = if self.opts.send_timeout.is_zero() {
                        self.client.opts.connection.operation_timeout
                    } else {
                        self.opts.send_timeout
                    };
                    self.close_deadline = Some(Instant::now() + wait);
                }
            }
        }
    }

    fn send(&mut self, msg: OutgoingMessage, done: Completion, flush: bool) {
        if let Some(e) = &self.failed {
            self.release(1, msg.footprint());
            done.complete(Err(e.clone()));
            return;
        }
        let batchable =
            self.opts.batching && msg.deliver_at.is_none() && msg.payload.len() <= self.opts.batch_max_bytes;
        if batchable {
            // Key-based batches are numbered when they are cut, so ids rise batch after batch.
            let seq = if self.opts.key_based_batching {
                0
            } else {
                self.take_sequence_id(&msg)
            };
            if self.batch.other_txn(&msg)
                || self
                    .batch
                    .would_overflow(&msg, self.opts.batch_max_messages, self.opts.batch_max_bytes)
            {
                self.flush_batch();
            }
            if self.batch.is_empty() {
                self.batch_started = Some(Instant::now());
            }
            self.batch.push(msg, seq, done);
            self.flush_requested |= flush;
            if self.batch.len() >= self.opts.batch_max_messages || self.batch.bytes >= self.opts.batch_max_bytes {
                self.flush_batch();
            }
        } else {
            // Keep publish order: whatever is batched goes first (and takes its ids first).
            self.flush_batch();
            let seq = self.take_sequence_id(&msg);
            self.send_single(msg, seq, done);
        }
    }

    fn take_sequence_id(&mut self, msg: &OutgoingMessage) -> u64 {
        let seq = msg.sequence_id.unwrap_or(self.next_seq);
        self.next_seq = self.next_seq.max(seq + 1);
        seq
    }

    fn name(&self) -> String {
        self.state.name.lock().expect("name lock").clone()
    }

    /// Sends one message on its own, in one frame or, chunked, in several that share its
    /// sequence id: only the last chunk's receipt completes the send.
    fn send_single(&mut self, msg: OutgoingMessage, seq: u64, done: Completion) {
        let bytes = msg.footprint();
        let max = self.state.max_message_size.load(Ordering::Relaxed);
        let name = self.name();
        let frames = match self.encoder.single(name, &msg, seq, max) {
            Ok(frames) => frames,
            Err(e) => return self.fail_settled(seq, vec![done], bytes, &e),
        };
        let last = frames.len() - 1;
        let mut done = Some(done);
        for (i, frame) in frames.into_iter().enumerate() {
            let is_last = i == last;
            self.dispatch(InFlight {
                sequence_id: seq,
                highest_sequence_id: seq,
                frame,
                callbacks: if is_last {
                    done.take().into_iter().collect()
                } else {
                    Vec::new()
                },
                batched: false,
                sent_at: Instant::now(),
                bytes: if is_last { bytes } else { 0 },
            });
        }
    }

    fn flush_batch(&mut self) {
        self.batch_started = None;
        if self.batch.is_empty() {
            return;
        }
        if self.opts.key_based_batching {
            for (taken, key, ordering) in self.batch.take_by_key(&mut self.next_seq) {
                self.send_batch(taken, key, ordering);
            }
        } else {
            let taken = self.batch.take();
            self.send_batch(taken, None, None);
        }
    }

    fn send_batch(&mut self, taken: TakenBatch, key: Option<String>, ordering_key: Option<Vec<u8>>) {
        let name = self.name();
        let frame = self.encoder.batch(name, &taken, key, ordering_key);
        let TakenBatch {
            first_seq,
            last_seq,
            callbacks,
            bytes,
            ..
        } = taken;
        match frame {
            Ok(frame) => self.dispatch(InFlight {
                sequence_id: first_seq,
                highest_sequence_id: last_seq.max(first_seq),
                frame,
                callbacks,
                batched: true,
                sent_at: Instant::now(),
                bytes,
            }),
            Err(e) => self.fail_settled(first_seq, callbacks, bytes, &e),
        }
    }

    fn dispatch(&mut self, op: InFlight) {
        if let Some(conn) = self.link.conn() {
            // A failed write means the connection is going away; `pending` resends it.
            let _ = conn.write(op.frame.clone());
        }
        self.pending.push_back(op);
    }

    fn release(&self, messages: usize, bytes: usize) {
        self.permits.add_permits(messages);
        self.client.memory.release(bytes);
    }

    fn on_link_event(&mut self, ev: LinkEvent) {
        match ev {
            LinkEvent::Connection(ev) => self.on_event(ev),
            LinkEvent::RetryDue => self.reconnect(),
            LinkEvent::Attached(reply) => {
                self.attached(&reply);
                log::info!(
                    "{}: producer reattached; resending {} pending",
                    self.topic,
                    self.pending.len()
                );
                if let Some(conn) = self.link.conn() {
                    for op in &self.pending {
                        let _ = conn.write(op.frame.clone());
                    }
                }
            }
            // The broker closes the producer next; the reattach goes to the other cluster.
            LinkEvent::Retrying | LinkEvent::Migrated => {}
            LinkEvent::Failed(e) => {
                log::error!("{}: producer cannot reattach: {e}", self.topic);
                self.fail_all(e);
            }
        }
    }

    fn on_event(&mut self, ev: Option<Event>) {
        match ev {
            Some(Event::Frame(f)) => match Type::try_from(f.command.r#type) {
                Ok(Type::SendReceipt) => {
                    let r = f.command.send_receipt.unwrap_or_default();
                    self.on_receipt(r.sequence_id, r.message_id.as_ref().map(MessageId::from_data));
                }
                Ok(Type::SendError) => {
                    let e = f.command.send_error.unwrap_or_default();
                    let code = ServerError::from_code(e.error);
                    log::warn!(
                        "{}: send error {code:?} for sequence {}: {}",
                        self.topic,
                        e.sequence_id,
                        e.message
                    );
                    if matches!(code, ServerError::TopicTerminatedError | ServerError::ProducerFenced) {
                        self.fail_all(Error::from_server(code, &e.message));
                    } else {
                        // The broker's state for this producer is unknown: start over on a new
                        // connection, resending everything pending.
                        self.disconnect(Duration::ZERO);
                    }
                }
                Ok(Type::CloseProducer) => {
                    let close = f.command.close_producer.unwrap_or_default();
                    let assigned =
                        Assigned::of(close.assigned_broker_service_url, close.assigned_broker_service_url_tls);
                    log::info!(
                        "{}: broker closed the producer (new owner {assigned:?}); reconnecting",
                        self.topic
                    );
                    self.link.go_next_to(assigned);
                    self.disconnect(Duration::ZERO);
                }
                _ => {}
            },
            Some(Event::Closed(e)) => {
                log::info!("{}: connection lost ({e}); reconnecting", self.topic);
                self.state.connected.store(false, Ordering::Release);
                self.link.detach_after_loss();
            }
            None => self.disconnect(Duration::ZERO),
        }
    }

    fn disconnect(&mut self, delay: Duration) {
        self.link.detach(delay);
        self.state.connected.store(false, Ordering::Release);
    }

    /// Starts attaching again.
    fn reconnect(&mut self) {
        if self.client.is_closed() && self.closing.is_none() {
            self.fail_all(Error::closed("client"));
            return;
        }
        let request = self.attach_request();
        self.link.reattach(request);
    }

    /// The `Producer` command under the current name and epoch.
    fn attach_request(&self) -> AttachRequest {
        let (topic, producer_id, name) = (self.topic.clone(), self.producer_id, self.name());
        let (user_named, epoch, topic_epoch) = (self.user_named, self.epoch, self.topic_epoch);
        let (access_mode, properties) = (
            self.opts.access_mode as i32,
            commands::key_values(&self.opts.properties),
        );
        let schema = self.opts.schema.as_ref().map(|s| s.to_pb());
        let initial_subscription = self.opts.initial_subscription.clone();
        Arc::new(move |rid| {
            let mut cmd = commands::producer(&topic, producer_id, rid);
            let p = cmd.producer.as_mut().expect("producer body");
            p.producer_name = (!name.is_empty()).then(|| name.clone());
            p.user_provided_producer_name = Some(user_named);
            p.epoch = Some(epoch);
            p.topic_epoch = topic_epoch;
            p.producer_access_mode = Some(access_mode);
            p.metadata = properties.clone();
            p.schema = schema.clone();
            p.initial_subscription_name = initial_subscription.clone();
            cmd
        })
    }

    /// Takes over a successful attach: the broker's name for the producer, its last stored
    /// sequence id (first attach only), and the connection's message size limit.
    fn attached(&mut self, reply: &Frame) {
        let ok = reply.command.producer_success.clone().unwrap_or_default();
        *self.state.name.lock().expect("name lock") = ok.producer_name;
        self.encoder.schema_version = ok.schema_version.filter(|v| !v.is_empty());
        self.topic_epoch = ok.topic_epoch.or(self.topic_epoch);
        if self.epoch == 0 && self.opts.initial_sequence_id.is_none() {
            if let Some(last) = ok.last_sequence_id.filter(|s| *s >= 0) {
                self.next_seq = self.next_seq.max(last as u64 + 1);
                self.state.last_sequence_id.store(last, Ordering::Relaxed);
            }
        }
        self.epoch += 1;
        if let Some(conn) = self.link.conn() {
            self.state
                .max_message_size
                .store(conn.max_message_size(), Ordering::Relaxed);
        }
        self.state.connected.store(true, Ordering::Release);
    }

    async fn finish_close(mut self) {
        self.state.closed.store(true, Ordering::Release);
        let producer_id = self.producer_id;
        self.link
            .close(Some(|rid| commands::close_producer(producer_id, rid)))
            .await;
        self.state.connected.store(false, Ordering::Release);
        let result = match (self.close_failures.outcome("close()"), &self.failed) {
            (Err(e), _) => {
                log::warn!("{}: {e}", self.topic);
                Err(e)
            }
            (Ok(()), Some(e)) if e.kind() != ErrorKind::AlreadyClosed => Err(e.clone()),
            (Ok(()), _) => Ok(()),
        };
        self.complete_flushers();
        if let Some(reply) = self.closing.take() {
            let _ = reply.send(result);
        }
        // Anything that raced with close fails clearly instead of hanging.
        self.rx.close();
        let closed = Error::closed("producer");
        while let Ok(cmd) = self.rx.try_recv() {
            cmd.refuse(&closed, |n, b| self.release(n, b));
        }
    }
}

impl Drop for Actor {
    /// After a normal close nothing is left here. After a panic the actor still holds messages:
    /// dropping them fails their sends (the completion guards), and their memory and pending
    /// slots are handed back so blocked senders wake and the client's other producers go on.
    fn drop(&mut self) {
        self.state.closed.store(true, Ordering::Release);
        self.state.connected.store(false, Ordering::Release);
        self.permits.close();
        let mut bytes = self.batch.bytes + self.pending.iter().map(|op| op.bytes).sum::<usize>();
        self.rx.close();
        while let Ok(cmd) = self.rx.try_recv() {
            match &cmd {
                Command::Send { msg, .. } => bytes += msg.footprint(),
                Command::SendRun { msgs, .. } => bytes += msgs.iter().map(|m| m.footprint()).sum::<usize>(),
                Command::Flush(_) | Command::Close(_) => {}
            }
        }
        self.client.memory.release(bytes);
        if let Some(conn) = self.link.take_conn() {
            // The broker would keep the producer (and its name) registered on this connection.
            conn.unregister(HandlerId::Producer(self.producer_id));
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let id = self.producer_id;
                rt.spawn(async move {
                    let _ = conn.request(|rid| commands::close_producer(id, rid)).await;
                });
            }
        }
    }
}
