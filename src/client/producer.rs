//! The public producer: one topic, or every partition of a partitioned topic behind a router.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};

use tokio::sync::{oneshot, Notify, TryAcquireError};

use super::completion::{Completion, SlotRun, Slots};
use super::error::{Error, ErrorKind, Result};
use super::inner::ClientInner;
use super::message::{MessageId, OutgoingMessage};
use super::options::{HashingScheme, ProducerOptions, RoutingMode};
use super::partition_producer::{Command, PartitionProducer};
use super::topic::TopicName;
use super::util::now_ms;
use crate::net::lookup;
use crate::protocol::hash;

/// Chooses a partition for a message: `(message, partition count) -> index`.
pub type Router = Arc<dyn Fn(&OutgoingMessage, usize) -> Result<usize> + Send + Sync>;

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

/// A send that could not be queued without waiting; gives the message back. Boxed in the
/// `Err` so the common `Ok` of `try_enqueue` stays a word wide.
pub struct WouldBlock(pub OutgoingMessage, pub Completion);

struct Inner {
    client: Arc<ClientInner>,
    topic: TopicName,
    opts: ProducerOptions,
    parts: RwLock<Vec<Arc<PartitionProducer>>>,
    partitioned: bool,
    round_robin: AtomicUsize,
    router: RwLock<Option<Router>>,
}

/// A producer. Cheap to clone; clones share the producer.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

/// A reference to a producer that does not keep it alive.
#[derive(Clone)]
pub struct WeakProducer(Weak<Inner>);

impl WeakProducer {
    /// The producer, if it is still alive.
    pub fn upgrade(&self) -> Option<Producer> {
        self.0.upgrade().map(|inner| Producer { inner })
    }

    /// Whether the producer is still alive (without making a reference that could end up
    /// being its last).
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}

impl Producer {
    pub(crate) async fn create(client: Arc<ClientInner>, topic: TopicName, opts: ProducerOptions) -> Result<Producer> {
        let partitions = lookup::partition_count(&client.pool, topic.as_str()).await?;
        let mut parts = Vec::new();
        if partitions == 0 {
            parts.push(Arc::new(
                PartitionProducer::create(client.clone(), topic.to_string(), -1, opts.clone()).await?,
            ));
        } else {
            for i in 0..partitions {
                let p =
                    PartitionProducer::create(client.clone(), topic.partition_name(i), i as i32, opts.clone()).await;
                match p {
                    Ok(p) => parts.push(Arc::new(p)),
                    Err(e) => {
                        for p in parts {
                            let (tx, _rx) = oneshot::channel();
                            let _ = p.tx.send(Command::Close(tx));
                        }
                        return Err(e);
                    }
                }
            }
        }
        let producer = Producer {
            inner: Arc::new(Inner {
                client: client.clone(),
                topic,
                opts,
                parts: RwLock::new(parts),
                partitioned: partitions > 0,
                round_robin: AtomicUsize::new(now_ms() as usize),
                router: RwLock::new(None),
            }),
        };
        if partitions > 0 {
            producer.watch_partitions();
        }
        let probe = Arc::downgrade(&producer.inner);
        client.add_probe(Box::new(move || {
            probe
                .upgrade()
                .map(|inner| Producer { inner })
                .filter(|p| !p.is_closed())
                .map(|p| p.is_connected())
        }));
        let weak = Arc::downgrade(&producer.inner);
        client.on_close(Box::new(move || {
            Box::pin(async move {
                if let Some(inner) = weak.upgrade() {
                    let _ = (Producer { inner }).close().await;
                }
            })
        }));
        Ok(producer)
    }

    /// Adds producers for partitions created after this producer, checking periodically.
    fn watch_partitions(&self) {
        let weak = Arc::downgrade(&self.inner);
        let period = self.inner.opts.partitions_update_interval;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(inner) = weak.upgrade() else { return };
                let producer = Producer { inner };
                if producer.is_closed() || producer.inner.client.is_closed() {
                    return;
                }
                let inner = &producer.inner;
                let known = inner.parts.read().expect("parts lock").len() as u32;
                let count = match lookup::partition_count(&inner.client.pool, inner.topic.as_str()).await {
                    Ok(n) => n,
                    Err(e) => {
                        log::debug!("{}: partition check failed: {e}", inner.topic);
                        continue;
                    }
                };
                for i in known..count {
                    let name = inner.topic.partition_name(i);
                    match PartitionProducer::create(inner.client.clone(), name, i as i32, inner.opts.clone()).await {
                        Ok(p) => {
                            log::info!("{}: producing to new partition {i}", inner.topic);
                            inner.parts.write().expect("parts lock").push(Arc::new(p));
                        }
                        Err(e) => {
                            log::warn!("{}: cannot attach to new partition {i}: {e}", inner.topic);
                            break;
                        }
                    }
                }
            }
        });
    }

    /// The topic as given (the partitioned topic's name for a partitioned producer).
    pub fn topic(&self) -> &str {
        self.inner.topic.as_str()
    }

    /// The producer's name (assigned by the broker unless set). Partitions share it when set.
    pub fn name(&self) -> String {
        self.parts()[0].state.name.lock().expect("name lock").clone()
    }

    /// Number of partitions (0 for a non-partitioned topic).
    pub fn partitions(&self) -> usize {
        if self.inner.partitioned {
            self.parts().len()
        } else {
            0
        }
    }

    /// The highest sequence id acknowledged by the broker (-1 before the first).
    pub fn last_sequence_id(&self) -> i64 {
        self.parts()
            .iter()
            .map(|p| p.state.last_sequence_id.load(Ordering::Relaxed))
            .max()
            .unwrap_or(-1)
    }

    /// Whether every partition is attached to a broker right now.
    pub fn is_connected(&self) -> bool {
        self.parts().iter().all(|p| p.state.connected.load(Ordering::Acquire))
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.parts().iter().any(|p| p.state.closed.load(Ordering::Acquire))
    }

    /// A reference that does not keep the producer alive.
    pub fn downgrade(&self) -> WeakProducer {
        WeakProducer(Arc::downgrade(&self.inner))
    }

    /// Messages accepted and not yet settled (queued, batched, or awaiting their receipt).
    pub fn unsettled(&self) -> usize {
        let max = self.inner.opts.max_pending;
        self.parts()
            .iter()
            .map(|p| max.saturating_sub(p.permits.available_permits()))
            .sum()
    }

    /// Whether a send waits when the pending queue is full (rather than failing).
    pub fn blocks_if_full(&self) -> bool {
        self.inner.opts.block_if_full
    }

    /// Sets a custom partition router for keyless and keyed messages alike.
    pub fn set_router(&self, router: Option<Router>) {
        *self.inner.router.write().expect("router lock") = router;
    }

    fn parts(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<PartitionProducer>>> {
        self.inner.parts.read().expect("parts lock")
    }

    fn choose(&self, msg: &OutgoingMessage) -> Result<Arc<PartitionProducer>> {
        let router = self.inner.router.read().expect("router lock").clone();
        if let Some(route) = router {
            // Never call into Python while holding the partitions lock.
            let parts = self.parts().clone();
            let n = parts.len();
            let i = route(msg, n)?;
            return parts
                .get(i)
                .cloned()
                .ok_or_else(|| Error::invalid(format!("router chose partition {i} of {n}")));
        }
        let parts = self.parts();
        let n = parts.len();
        if n == 1 {
            return Ok(parts[0].clone());
        }
        let i = if let Some(key) = msg.key.as_deref() {
            // Like the Java routers: only the partition key routes; an ordering key does not.
            let h = match self.inner.opts.hashing_scheme {
                HashingScheme::JavaString => hash::java_string_hash(key),
                HashingScheme::Murmur3 => hash::murmur3_32_hash(key.as_bytes()),
            };
            h as usize % n
        } else {
            match self.inner.opts.routing_mode {
                RoutingMode::SinglePartition => self.inner.round_robin.load(Ordering::Relaxed) % n,
                // With batching, stay on one partition for a batch window so batches fill up.
                RoutingMode::RoundRobin if self.inner.opts.batching => {
                    let window = self.inner.opts.batch_max_delay.as_millis().max(1) as usize;
                    (self.inner.round_robin.load(Ordering::Relaxed) + now_ms() as usize / window) % n
                }
                RoutingMode::RoundRobin => self.inner.round_robin.fetch_add(1, Ordering::Relaxed) % n,
            }
        };
        Ok(parts[i].clone())
    }

    fn check(&self, part: &PartitionProducer, msg: &OutgoingMessage) -> Result<()> {
        if part.state.closed.load(Ordering::Acquire) {
            return Err(Error::closed("producer"));
        }
        self.inner.client.check_open()?;
        let max = part.state.max_message_size.load(Ordering::Relaxed);
        if msg.payload.len() > max && !self.inner.opts.chunking {
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

    /// Queues `msg` if a pending slot and memory are free right now; `done` gets the outcome.
    /// `flush` asks for the open batch to go out as soon as the producer is idle.
    pub fn try_enqueue(
        &self,
        msg: OutgoingMessage,
        flush: bool,
        done: impl Into<Completion>,
    ) -> std::result::Result<(), Box<WouldBlock>> {
        let done: Completion = done.into();
        let part = match self.choose(&msg).and_then(|p| self.check(&p, &msg).map(|()| p)) {
            Ok(p) => p,
            Err(e) => {
                done.complete(Err(e));
                return Ok(());
            }
        };
        match part.permits.try_acquire() {
            Ok(p) => p.forget(),
            Err(TryAcquireError::Closed) => {
                done.complete(Err(Error::closed("producer")));
                return Ok(());
            }
            Err(TryAcquireError::NoPermits) => {
                if self.inner.opts.block_if_full {
                    return Err(Box::new(WouldBlock(msg, done)));
                }
                done.complete(Err(Error::new(
                    ErrorKind::ProducerQueueFull,
                    "producer queue is full (max_pending reached)",
                )));
                return Ok(());
            }
        }
        if !self.inner.client.memory.try_reserve(msg.footprint()) {
            part.permits.add_permits(1);
            if self.inner.opts.block_if_full {
                return Err(Box::new(WouldBlock(msg, done)));
            }
            done.complete(Err(Error::new(
                ErrorKind::ProducerQueueFull,
                "client memory limit reached",
            )));
            return Ok(());
        }
        self.post(&part, msg, flush, done);
        Ok(())
    }

    /// Queues `msg`, waiting for a pending slot and memory when the producer blocks if full.
    pub async fn enqueue(&self, msg: OutgoingMessage, flush: bool, done: impl Into<Completion>) {
        let (msg, done) = match self.try_enqueue(msg, flush, done) {
            Ok(()) => return,
            Err(blocked) => (blocked.0, blocked.1),
        };
        let part = match self.choose(&msg) {
            Ok(p) => p,
            Err(e) => return done.complete(Err(e)),
        };
        match part.permits.acquire().await {
            Ok(p) => p.forget(),
            Err(_) => return done.complete(Err(Error::closed("producer"))),
        }
        self.inner.client.memory.reserve(msg.footprint()).await;
        if let Err(e) = self.check(&part, &msg) {
            part.permits.add_permits(1);
            self.inner.client.memory.release(msg.footprint());
            return done.complete(Err(e));
        }
        self.post(&part, msg, flush, done);
    }

    fn post(&self, part: &PartitionProducer, msg: OutgoingMessage, flush: bool, done: Completion) {
        let o = &self.inner.opts;
        let bytes = msg.footprint();
        let urgent = flush || self.cannot_wait_in_batch(&msg);
        let sent = part.tx.send(Command::Send { msg, done, flush });
        if sent.is_ok() {
            part.wake
                .queued(1, bytes, urgent, o.batch_max_messages, o.batch_max_bytes);
        }
        if let Err(mpsc_err) = sent {
            if let Command::Send { msg, done, .. } = mpsc_err.0 {
                part.permits.add_permits(1);
                self.inner.client.memory.release(msg.footprint());
                done.complete(Err(Error::closed("producer")));
            }
        }
    }

    /// Whether the actor must see `msg` at once rather than when the open batch is due: it
    /// goes out on its own (no batching, a delivery time, too big for a batch).
    fn cannot_wait_in_batch(&self, msg: &OutgoingMessage) -> bool {
        let o = &self.inner.opts;
        !o.batching || msg.deliver_at.is_some() || msg.payload.len() > o.batch_max_bytes
    }

    /// Sends `msg` and waits for the broker's receipt; the open batch goes out at once.
    pub async fn send(&self, msg: OutgoingMessage) -> Result<MessageId> {
        self.send_with(msg, true).await
    }

    /// Sends `msg` and waits for its receipt. `flush` sends the open batch at once (a blocking
    /// caller wants that); without it, concurrent senders share batches (asyncio wants that).
    pub async fn send_with(&self, msg: OutgoingMessage, flush: bool) -> Result<MessageId> {
        let (tx, rx) = oneshot::channel();
        let done: super::completion::SendCallback = Box::new(move |r| {
            let _ = tx.send(r);
        });
        self.enqueue(msg, flush, done).await;
        rx.await.unwrap_or_else(|_| Err(Error::closed("producer")))
    }

    /// Sends every message (flushing after the last) and returns their outcomes in order.
    pub async fn send_many(&self, msgs: Vec<OutgoingMessage>) -> Vec<Result<MessageId>> {
        let n = msgs.len();
        let slots = Slots::new(n);
        match self.sole_partition() {
            Some(part) => self.send_runs(&part, msgs, &slots).await,
            None => {
                for (i, msg) in msgs.into_iter().enumerate() {
                    self.enqueue(msg, i + 1 == n, Completion::slot(slots.clone(), i)).await;
                }
            }
        }
        slots.wait().await
    }

    /// The only partition, when nothing but it can be chosen (one partition, no router).
    fn sole_partition(&self) -> Option<Arc<PartitionProducer>> {
        if self.inner.router.read().expect("router lock").is_some() {
            return None;
        }
        let parts = self.parts();
        (parts.len() == 1).then(|| parts[0].clone())
    }

    /// Hands `msgs` to one partition in runs of as many as there are free pending slots, one
    /// command per run rather than one per message: per message, the command channel and
    /// its wake-up bookkeeping cost more than the batching itself. When slots cannot be had
    /// (a full queue that must not block, a closed producer) or memory runs short, the rest
    /// goes the per-message way, which waits and reports exactly as `send_async` does.
    async fn send_runs(&self, part: &PartitionProducer, msgs: Vec<OutgoingMessage>, slots: &Arc<Slots>) {
        let o = &self.inner.opts;
        let memory = &self.inner.client.memory;
        let mut msgs = msgs.into_iter().enumerate().peekable();
        while msgs.peek().is_some() {
            let free = part.permits.available_permits().min(msgs.len());
            let want = if free == 0 && o.block_if_full { 1 } else { free };
            let Ok(want_u32) = u32::try_from(want) else { break };
            if want == 0 || part.permits.acquire_many(want_u32).await.map(|p| p.forget()).is_err() {
                break;
            }
            let mut granted = want;
            let mut run = Vec::with_capacity(want);
            let (mut first, mut bytes, mut urgent) = (0, 0, false);
            while granted > 0 {
                let Some((_, msg)) = msgs.peek() else { break };
                if let Err(e) = self.check(part, msg) {
                    let (i, _) = msgs.next().expect("peeked");
                    granted -= 1;
                    part.permits.add_permits(1);
                    slots.fill(i, Err(e));
                    // Runs fill consecutive slots: the refused one ends this run.
                    self.post_run(part, std::mem::take(&mut run), first, slots, bytes, false, urgent);
                    (bytes, urgent) = (0, false);
                    continue;
                }
                if !memory.try_reserve(msg.footprint()) {
                    break;
                }
                let (i, msg) = msgs.next().expect("peeked");
                if run.is_empty() {
                    first = i;
                }
                bytes += msg.footprint();
                urgent |= self.cannot_wait_in_batch(&msg);
                run.push(msg);
                granted -= 1;
            }
            part.permits.add_permits(granted);
            let last = msgs.peek().is_none();
            self.post_run(part, run, first, slots, bytes, last, urgent);
            if granted > 0 {
                break;
            }
        }
        while let Some((i, msg)) = msgs.next() {
            let last = msgs.peek().is_none();
            self.enqueue(msg, last, Completion::slot(slots.clone(), i)).await;
        }
    }

    /// Posts one run (slots `first..`); `flush` sends the open batch once it is in, `urgent`
    /// wakes the actor for messages that cannot wait in a batch.
    #[allow(clippy::too_many_arguments)]
    fn post_run(
        &self,
        part: &PartitionProducer,
        msgs: Vec<OutgoingMessage>,
        first: usize,
        slots: &Arc<Slots>,
        bytes: usize,
        flush: bool,
        urgent: bool,
    ) {
        if msgs.is_empty() {
            return;
        }
        let o = &self.inner.opts;
        let count = msgs.len();
        let run = Command::SendRun {
            run: SlotRun::new(slots.clone(), first, count),
            msgs,
            flush,
        };
        match part.tx.send(run) {
            Ok(()) => part
                .wake
                .queued(count, bytes, flush || urgent, o.batch_max_messages, o.batch_max_bytes),
            Err(refused) => {
                if let Command::SendRun { msgs, mut run, .. } = refused.0 {
                    part.permits.add_permits(msgs.len());
                    self.inner.client.memory.release(bytes);
                    run.fail_rest(&Error::closed("producer"));
                }
            }
        }
    }

    /// Sends the open batches now and waits until every message sent so far is acknowledged;
    /// fails if any of those messages failed, or if the producer is closed.
    pub async fn flush(&self) -> Result<()> {
        self.on_every_partition(Command::Flush, true).await
    }

    /// Flushes, waits for pending messages (up to the send timeout), and detaches. Fails, once
    /// closed, if messages pending at close failed (timed out, or could not be sent).
    pub async fn close(&self) -> Result<()> {
        self.on_every_partition(Command::Close, false).await
    }

    /// Asks every partition at once and waits for all of them; the first error wins. A
    /// partition whose actor is gone is closed (an error when `closed_is_error`); one that
    /// went away without answering stopped abnormally, which is always an error.
    async fn on_every_partition(
        &self,
        make: impl Fn(oneshot::Sender<Result<()>>) -> Command,
        closed_is_error: bool,
    ) -> Result<()> {
        let parts: Vec<_> = self.parts().clone();
        let mut replies = Vec::with_capacity(parts.len());
        let mut result = Ok(());
        for p in parts {
            let (tx, rx) = oneshot::channel();
            if p.tx.send(make(tx)).is_err() {
                if closed_is_error && result.is_ok() {
                    result = Err(Error::closed("producer"));
                }
                continue;
            }
            p.wake.urgent.notify_one();
            replies.push(rx);
        }
        for rx in replies {
            let outcome = rx.await.unwrap_or_else(|_| Err(super::completion::abandoned()));
            if result.is_ok() {
                result = outcome;
            }
        }
        result
    }
}
