//! The producer of one topic partition: an actor that owns the open batch, the queue of sent
//! but unacknowledged messages, and the registration on a connection.
//!
//! Every message sent stays in `pending` (with its encoded frame) until its receipt arrives.
//! When the connection is lost the actor attaches again, with backoff, and writes `pending`
//! again in order with the original sequence ids, so deduplication can drop what the broker
//! already stored and nothing is lost.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;

use super::batch::{OpenBatch, TakenBatch};
use super::completion::{Completion, SlotRun};
use super::error::{Error, ErrorKind, Result};
use super::inner::ClientInner;
use super::message::{MessageId, OutgoingMessage};
use super::options::ProducerOptions;
use super::timer::DeadlineTimer;
use super::util::{next_event, now_ms, sleep_until_opt};
use crate::net::backoff::Backoff;
use crate::net::{Connection, Event, HandlerId};
use crate::protocol::pb::{base_command::Type, CompressionType, MessageMetadata, ServerError};
use crate::protocol::{commands, compression, frame};

mod attach;
mod settle;
mod wake;

use attach::{attach, attach_done, Attached, Attaching};
use settle::{Failures, FlushWaiter};
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

/// State readable without a round trip to the actor.
pub(crate) struct SharedState {
    pub name: Mutex<String>,
    pub closed: AtomicBool,
    pub connected: AtomicBool,
    pub max_message_size: AtomicUsize,
    pub last_sequence_id: AtomicI64,
}

/// Handle to the actor of one partition.
pub(crate) struct PartitionProducer {
    pub tx: mpsc::UnboundedSender<Command>,
    pub wake: Arc<Wake>,
    pub permits: Arc<Semaphore>,
    pub state: Arc<SharedState>,
}

impl PartitionProducer {
    /// Attaches to `topic` and starts the actor.
    pub async fn create(
        client: Arc<ClientInner>,
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
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let wake = Arc::new(Wake::default());
        let mut actor = Actor {
            wake: wake.clone(),
            producer_id: client.next_producer_id(),
            backoff: Backoff::new(client.opts.initial_backoff, client.opts.max_backoff),
            client,
            topic,
            partition,
            user_named: opts.name.is_some(),
            next_seq: opts.initial_sequence_id.unwrap_or(0),
            opts,
            state: state.clone(),
            permits: permits.clone(),
            rx,
            conn: None,
            events: None,
            epoch: 0,
            batch: OpenBatch::default(),
            batch_started: None,
            batch_timer: DeadlineTimer::new(),
            flush_requested: false,
            pending: VecDeque::new(),
            flush_waiters: Vec::new(),
            retry_at: None,
            closing: None,
            close_failures: Failures::default(),
            close_deadline: None,
            attaching: None,
            failed: None,
        };
        let first = attach(
            actor.client.clone(),
            actor.topic.clone(),
            actor.producer_id,
            actor.opts.name.clone().unwrap_or_default(),
            actor.user_named,
            0,
            actor.opts.clone(),
        )
        .await?;
        actor.apply(first);
        super::supervisor::spawn("producer", actor.topic.clone(), |_| {}, actor.run());
        Ok(PartitionProducer {
            tx,
            wake,
            permits,
            state,
        })
    }
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
    client: Arc<ClientInner>,
    topic: String,
    partition: i32,
    producer_id: u64,
    opts: ProducerOptions,
    user_named: bool,
    state: Arc<SharedState>,
    permits: Arc<Semaphore>,
    rx: mpsc::UnboundedReceiver<Command>,
    conn: Option<Connection>,
    events: Option<mpsc::UnboundedReceiver<Event>>,
    epoch: u64,
    next_seq: u64,
    batch: OpenBatch,
    batch_started: Option<Instant>,
    /// Fires when the open batch has waited `batch_max_delay`.
    batch_timer: DeadlineTimer,
    flush_requested: bool,
    pending: VecDeque<InFlight>,
    flush_waiters: Vec<FlushWaiter>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    closing: Option<oneshot::Sender<Result<()>>>,
    /// Messages that failed after close was asked for: close reports them.
    close_failures: Failures,
    /// Pending sends still unacknowledged at this time fail, so close never hangs.
    close_deadline: Option<Instant>,
    attaching: Option<Attaching>,
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
                ev = next_event(&mut self.events) => self.on_event(ev),
                _ = self.batch_timer.expired() => {
                    self.drain();
                    self.flush_batch();
                }
                _ = sleep_until_opt(timeout_due) => self.fail_expired(),
                _ = sleep_until_opt(self.retry_at) => self.reconnect(),
                attached = attach_done(&mut self.attaching) => self.on_attach_result(attached),
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
                if self.conn.is_none() {
                    // Not attached: nothing pending can be acknowledged any more.
                    self.attaching = None;
                    self.retry_at = None;
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
            if self
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

    fn metadata(&self, sequence_id: u64) -> MessageMetadata {
        MessageMetadata {
            producer_name: self.state.name.lock().expect("name lock").clone(),
            sequence_id,
            publish_time: now_ms(),
            ..Default::default()
        }
    }

    fn send_single(&mut self, msg: OutgoingMessage, seq: u64, done: Completion) {
        let mut meta = self.metadata(seq);
        meta.partition_key = msg.key.clone();
        meta.ordering_key = msg.ordering_key.clone().map(Into::into);
        meta.properties = commands::key_values(&msg.properties);
        meta.event_time = msg.event_time;
        meta.deliver_at_time = msg.deliver_at;
        meta.replicate_to = msg.replication_clusters.clone();
        let bytes = msg.footprint();
        let payload = match self.compress(&msg.payload, &mut meta) {
            Ok(p) => p,
            Err(e) => return self.fail_settled(seq, vec![done], bytes, &e),
        };
        let max = self.state.max_message_size.load(Ordering::Relaxed);
        if self.opts.chunking && payload.len() > max {
            return self.send_chunks(meta, &payload, seq, done, bytes, max);
        }
        let cmd = commands::send(self.producer_id, seq, 1);
        let mut buf = BytesMut::new();
        frame::encode_payload_command(&cmd, &meta, &payload, &mut buf);
        self.dispatch(InFlight {
            sequence_id: seq,
            highest_sequence_id: seq,
            frame: buf.freeze(),
            callbacks: vec![done],
            batched: false,
            sent_at: Instant::now(),
            bytes,
        });
    }

    /// Splits a (compressed) payload larger than the broker's limit into chunks that share the
    /// sequence id and a uuid; consumers reassemble them. Only the last chunk's receipt
    /// completes the send.
    fn send_chunks(
        &mut self,
        meta: MessageMetadata,
        payload: &[u8],
        seq: u64,
        done: Completion,
        bytes: usize,
        max: usize,
    ) {
        // Leave room for the metadata, as the broker's limit covers the whole entry.
        let chunk_size = max.saturating_sub(meta.encoded_len() + 64).max(1024);
        let total = payload.len();
        let count = total.div_ceil(chunk_size);
        let uuid = format!("{}-{}", meta.producer_name, seq);
        let mut done = Some(done);
        for i in 0..count {
            let mut m = meta.clone();
            m.uuid = Some(uuid.clone());
            m.num_chunks_from_msg = Some(count as i32);
            m.total_chunk_msg_size = Some(total as i32);
            m.chunk_id = Some(i as i32);
            let mut cmd = commands::send(self.producer_id, seq, 1);
            if let Some(s) = cmd.send.as_mut() {
                s.is_chunk = Some(true);
            }
            let mut buf = BytesMut::new();
            let part = &payload[i * chunk_size..((i + 1) * chunk_size).min(total)];
            frame::encode_payload_command(&cmd, &m, part, &mut buf);
            let last = i + 1 == count;
            self.dispatch(InFlight {
                sequence_id: seq,
                highest_sequence_id: seq,
                frame: buf.freeze(),
                callbacks: if last {
                    done.take().into_iter().collect()
                } else {
                    Vec::new()
                },
                batched: false,
                sent_at: Instant::now(),
                bytes: if last { bytes } else { 0 },
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
        let TakenBatch {
            payload,
            first_seq,
            last_seq,
            callbacks,
            bytes,
        } = taken;
        let n = callbacks.len();
        let mut meta = self.metadata(first_seq);
        meta.num_messages_in_batch = Some(n as i32);
        // Key_Shared dispatch reads the entry's key: a key-based batch carries its key.
        meta.partition_key = key;
        meta.ordering_key = ordering_key.map(Into::into);
        if last_seq != first_seq {
            meta.highest_sequence_id = Some(last_seq);
        }
        let payload = match self.compress(&payload, &mut meta) {
            Ok(p) => p,
            Err(e) => return self.fail_settled(first_seq, callbacks, bytes, &e),
        };
        let mut cmd = commands::send(self.producer_id, first_seq, n as i32);
        if last_seq != first_seq {
            if let Some(s) = cmd.send.as_mut() {
                s.highest_sequence_id = Some(last_seq);
            }
        }
        let mut buf = BytesMut::new();
        frame::encode_payload_command(&cmd, &meta, &payload, &mut buf);
        self.dispatch(InFlight {
            sequence_id: first_seq,
            highest_sequence_id: last_seq.max(first_seq),
            frame: buf.freeze(),
            callbacks,
            batched: true,
            sent_at: Instant::now(),
            bytes,
        });
    }

    fn compress<'a>(&self, data: &'a [u8], meta: &mut MessageMetadata) -> Result<std::borrow::Cow<'a, [u8]>> {
        if self.opts.compression == CompressionType::None {
            return Ok(std::borrow::Cow::Borrowed(data));
        }
        meta.compression = Some(self.opts.compression as i32);
        meta.uncompressed_size = Some(data.len() as u32);
        Ok(std::borrow::Cow::Owned(compression::compress(
            self.opts.compression,
            data,
        )?))
    }

    fn dispatch(&mut self, op: InFlight) {
        if let Some(conn) = &self.conn {
            // A failed write means the connection is going away; `pending` resends it.
            let _ = conn.write(op.frame.clone());
        }
        self.pending.push_back(op);
    }

    fn release(&self, messages: usize, bytes: usize) {
        self.permits.add_permits(messages);
        self.client.memory.release(bytes);
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
                    let code = ServerError::try_from(e.error).unwrap_or(ServerError::UnknownError);
                    log::warn!(
                        "{}: send error {code:?} for sequence {}: {}",
                        self.topic,
                        e.sequence_id,
                        e.message
                    );
                    if code == ServerError::TopicTerminatedError {
                        self.fail_all(Error::from_server(code, &e.message));
                    } else {
                        // The broker's state for this producer is unknown: start over on a new
                        // connection, resending everything pending.
                        self.disconnect(Duration::ZERO);
                    }
                }
                Ok(Type::CloseProducer) => {
                    log::info!("{}: broker closed the producer; reconnecting", self.topic);
                    self.disconnect(Duration::ZERO);
                }
                _ => {}
            },
            Some(Event::Closed(e)) => {
                log::info!("{}: connection lost ({e}); reconnecting", self.topic);
                self.conn = None;
                self.events = None;
                self.state.connected.store(false, Ordering::Release);
                self.retry_at = Some(Instant::now() + self.backoff.next_delay());
            }
            None => {
                self.events = None;
                self.disconnect(Duration::ZERO);
            }
        }
    }

    fn on_receipt(&mut self, seq: u64, id: Option<MessageId>) {
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

    fn fail_expired(&mut self) {
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

    fn fail_all(&mut self, e: Error) {
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
    fn fail_settled(&mut self, seq: u64, callbacks: Vec<Completion>, bytes: usize, e: &Error) {
        let n = callbacks.len();
        self.release(n, bytes);
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

    fn complete_flushers(&mut self) {
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

    fn disconnect(&mut self, delay: Duration) {
        if let Some(conn) = self.conn.take() {
            conn.unregister(HandlerId::Producer(self.producer_id));
        }
        self.events = None;
        self.state.connected.store(false, Ordering::Release);
        self.retry_at = Some(Instant::now() + delay);
    }

    /// Starts attaching again; the attempt runs as a branch of the actor's loop, so commands
    /// (a close above all) are still handled while it waits on the network.
    fn reconnect(&mut self) {
        self.retry_at = None;
        if self.client.is_closed() && self.closing.is_none() {
            self.fail_all(Error::closed("client"));
            return;
        }
        let name = self.state.name.lock().expect("name lock").clone();
        self.attaching = Some(Box::pin(attach(
            self.client.clone(),
            self.topic.clone(),
            self.producer_id,
            name,
            self.user_named,
            self.epoch,
            self.opts.clone(),
        )));
    }

    fn on_attach_result(&mut self, result: Result<Attached>) {
        self.attaching = None;
        match result {
            Ok(a) => {
                self.apply(a);
                log::info!(
                    "{}: producer reattached; resending {} pending",
                    self.topic,
                    self.pending.len()
                );
                if let Some(conn) = &self.conn {
                    for op in &self.pending {
                        let _ = conn.write(op.frame.clone());
                    }
                }
            }
            Err(e) if e.is_retriable() || e.kind() == ErrorKind::ProducerBusy => {
                let delay = self.backoff.next_delay();
                log::info!("{}: reconnect failed ({e}); retrying in {delay:?}", self.topic);
                self.retry_at = Some(Instant::now() + delay);
            }
            Err(e) => {
                log::error!("{}: producer cannot reattach: {e}", self.topic);
                self.fail_all(e);
            }
        }
    }

    /// Takes over a successful attach.
    fn apply(&mut self, a: Attached) {
        *self.state.name.lock().expect("name lock") = a.name;
        if self.epoch == 0 && self.opts.initial_sequence_id.is_none() {
            if let Some(last) = a.last_sequence_id.filter(|s| *s >= 0) {
                self.next_seq = self.next_seq.max(last as u64 + 1);
                self.state.last_sequence_id.store(last, Ordering::Relaxed);
            }
        }
        self.epoch += 1;
        self.state
            .max_message_size
            .store(a.conn.max_message_size(), Ordering::Relaxed);
        self.state.connected.store(true, Ordering::Release);
        self.backoff.reset();
        self.conn = Some(a.conn);
        self.events = Some(a.events);
    }

    async fn finish_close(mut self) {
        self.state.closed.store(true, Ordering::Release);
        if let Some(conn) = self.conn.take() {
            let _ = conn
                .request(|rid| commands::close_producer(self.producer_id, rid))
                .await;
            conn.unregister(HandlerId::Producer(self.producer_id));
        }
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
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Send { msg, done, .. } => {
                    self.release(1, msg.footprint());
                    done.complete(Err(Error::closed("producer")));
                }
                Command::SendRun { msgs, mut run, .. } => {
                    for msg in msgs {
                        self.release(1, msg.footprint());
                    }
                    run.fail_rest(&Error::closed("producer"));
                }
                Command::Flush(r) | Command::Close(r) => {
                    let _ = r.send(Ok(()));
                }
            }
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
        if let Some(conn) = self.conn.take() {
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
