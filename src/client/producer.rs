//! The public producer: one topic, or every partition of a partitioned topic behind a router.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};

use tokio::sync::oneshot;

use super::completion::{Completion, SendCallback, SlotRun, Slots};
use super::error::{Error, Result};
use super::fan_out;
use super::message::{MessageId, OutgoingMessage};
use super::options::{HashingScheme, ProducerOptions, RoutingMode};
use super::partition_producer::{Command, PartitionProducer};
use super::shared::{tracked_through_handle, ClientShared};
use super::timer::{self, now_ms};
use super::topic::TopicName;
use super::transaction::Scope;
use crate::net::lookup;
use crate::protocol::hash;

/// Chooses a partition for a message: `(message, partition count) -> index`.
pub type Router = Arc<dyn Fn(&OutgoingMessage, usize) -> Result<usize> + Send + Sync>;

/// A send that could not be queued without waiting; gives the message back. Boxed in the
/// `Err` so the common `Ok` of `try_enqueue` stays a word wide.
pub struct WouldBlock(pub OutgoingMessage, pub Completion);

/// What all clones of a producer share: its partitions and how messages are routed to them.
struct ProducerShared {
    client: Arc<ClientShared>,
    topic: TopicName,
    opts: ProducerOptions,
    parts: RwLock<Vec<Arc<PartitionProducer>>>,
    partitioned: bool,
    round_robin: AtomicUsize,
    router: RwLock<Option<Router>>,
}

tracked_through_handle!(ProducerShared, Producer, super::stats::producer_line);

/// A producer. Cheap to clone; clones share the producer.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<ProducerShared>,
}

/// A reference to a producer that does not keep it alive.
#[derive(Clone)]
pub struct WeakProducer(Weak<ProducerShared>);

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
    /// Checks `opts` and the topic name, then creates the producer (see [`Producer::create`]).
    pub(crate) async fn open(client: Arc<ClientShared>, topic: &str, opts: ProducerOptions) -> Result<Producer> {
        client.check_open()?;
        opts.validate()?;
        let topic = TopicName::parse(topic)?;
        // Boxed: a consumer's actor awaits this when it makes its dead-letter producer, and
        // the whole creation (a producer actor's state among it) would otherwise be laid out
        // inside every consumer's future, dead letters or not (issue 31).
        Box::pin(Producer::create(client, topic, opts)).await
    }

    /// Looks the topic up and attaches to each of its partitions before returning.
    async fn create(client: Arc<ClientShared>, topic: TopicName, mut opts: ProducerOptions) -> Result<Producer> {
        let partitions = lookup::partition_count(&client.pool, topic.as_str()).await?;
        if let (Some(across), true) = (opts.max_pending_across_partitions, partitions > 0) {
            opts.max_pending = opts.max_pending.min((across / partitions as usize).max(1));
        }
        let mut parts = Vec::new();
        if partitions == 0 {
            parts.push(Arc::new(
                PartitionProducer::create(client.clone(), topic.to_string(), -1, opts.clone()).await?,
            ));
        } else {
            // All partitions at once (`fan_out`); if any fails, the others are closed.
            let created =
                fan_out::in_order((0..partitions).map(|i| {
                    PartitionProducer::create(client.clone(), topic.partition_name(i), i as i32, opts.clone())
                }))
                .await;
            let mut failed = None;
            for p in created {
                match p {
                    Ok(p) => parts.push(Arc::new(p)),
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
            if let Some(e) = failed {
                for p in parts {
                    p.ask(Command::Close);
                }
                return Err(e);
            }
        }
        let producer = Producer {
            inner: Arc::new(ProducerShared {
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
        client.track(&producer.inner);
        Ok(producer)
    }

    /// Adds producers for partitions created after this producer, checking periodically.
    fn watch_partitions(&self) {
        timer::every(
            &self.inner,
            self.inner.opts.partitions_update_interval,
            |inner| async move {
                let producer = Producer { inner };
                if producer.is_closed() || producer.inner.client.is_closed() {
                    return false;
                }
                producer.add_new_partitions().await;
                true
            },
        );
    }

    /// Attaches to the partitions the topic has gained since the last check; a failed check is
    /// retried at the next one.
    async fn add_new_partitions(&self) {
        let inner = &self.inner;
        let known = inner.parts.read().expect("parts lock").len() as u32;
        let count = match lookup::partition_count(&inner.client.pool, inner.topic.as_str()).await {
            Ok(n) => n,
            Err(e) => {
                log::debug!("{}: partition check failed: {e}", inner.topic);
                return;
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

    /// The topic as given (the partitioned topic's name for a partitioned producer).
    pub fn topic(&self) -> &str {
        self.inner.topic.as_str()
    }

    /// The producer's name (assigned by the broker unless set). Partitions share it when set.
    pub fn name(&self) -> String {
        self.parts()[0].name()
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
        self.parts().iter().map(|p| p.last_sequence_id()).max().unwrap_or(-1)
    }

    /// Whether every partition is attached to a broker right now.
    pub fn is_connected(&self) -> bool {
        self.parts().iter().all(|p| p.is_connected())
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.parts().iter().any(|p| p.is_closed())
    }

    /// A reference that does not keep the producer alive.
    pub fn downgrade(&self) -> WeakProducer {
        WeakProducer(Arc::downgrade(&self.inner))
    }

    /// Messages accepted and not yet settled (queued, batched, or awaiting their receipt).
    pub fn unsettled(&self) -> usize {
        self.parts().iter().map(|p| p.unsettled()).sum()
    }

    /// Client-side statistics, added up over partitions.
    pub fn stats(&self) -> super::stats::ProducerStats {
        let mut all = super::stats::ProducerStats::default();
        for p in self.parts().iter() {
            all.merge(p.stats());
        }
        all
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

    /// Queues `msg` if a pending slot and memory are free right now; `done` gets the outcome.
    /// `flush` asks for the open batch to go out as soon as the producer is idle.
    pub fn try_enqueue(
        &self,
        msg: OutgoingMessage,
        flush: bool,
        done: impl Into<Completion>,
    ) -> std::result::Result<(), Box<WouldBlock>> {
        let done: Completion = done.into();
        if msg.txn.is_some() {
            self.enqueue_in_txn(msg, flush, done);
            return Ok(());
        }
        let part = match self.choose(&msg).and_then(|p| p.check(&msg).map(|()| p)) {
            Ok(p) => p,
            Err(e) => {
                done.complete(Err(e));
                return Ok(());
            }
        };
        match part.try_admit(&msg) {
            Ok(()) => part.post(msg, flush, done),
            Err(refusal) if refusal.is_full() && self.inner.opts.block_if_full => {
                return Err(Box::new(WouldBlock(msg, done)));
            }
            Err(refusal) => done.complete(Err(refusal.into_error())),
        }
        Ok(())
    }

    /// Queues a message of a transaction: counted in it until its receipt, and held back, in
    /// order, until the transaction has registered the partition with its coordinator.
    fn enqueue_in_txn(&self, msg: OutgoingMessage, flush: bool, done: Completion) {
        let txn = msg.txn.clone().expect("a transactional message");
        let part = match self.choose(&msg).and_then(|p| p.check(&msg).map(|()| p)) {
            Ok(p) => p,
            Err(e) => return done.complete(Err(e)),
        };
        let op = match txn.begin_op() {
            Ok(op) => op,
            Err(e) => return done.complete(Err(e)),
        };
        let counted: SendCallback = Box::new(move |r| {
            op.finish(&r);
            done.complete(r);
        });
        let done = Completion::from(counted);
        let block = self.inner.opts.block_if_full;
        let runtime = txn.runtime();
        let scope = Scope::Partition(part.topic().to_string());
        txn.when_registered(
            scope,
            Box::new(move |registered| {
                if let Err(e) = registered {
                    return done.complete(Err(e));
                }
                match part.try_admit(&msg) {
                    Ok(()) => part.post(msg, flush, done),
                    Err(refusal) if refusal.is_full() && block => {
                        // Waiting for room must not hold up the transaction's other work.
                        runtime.spawn(async move {
                            match part.admit(&msg).await {
                                Ok(()) => part.post(msg, flush, done),
                                Err(e) => done.complete(Err(e)),
                            }
                        });
                    }
                    Err(refusal) => done.complete(Err(refusal.into_error())),
                }
            }),
        );
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
        match part.admit(&msg).await {
            Ok(()) => part.post(msg, flush, done),
            Err(e) => done.complete(Err(e)),
        }
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
        self.enqueue_many(msgs).await.wait().await
    }

    /// Queues every message in order (flushing after the last), waiting for room as
    /// [`Producer::send_many`] does, and returns once all are queued: their outcomes arrive in
    /// the [`Receipts`], so a caller can queue its next messages while these are in flight.
    pub async fn enqueue_many(&self, msgs: Vec<OutgoingMessage>) -> Receipts {
        let n = msgs.len();
        let slots = Slots::new(n);
        // A transaction's messages wait for its partition registration one by one; the runs
        // path hands messages straight to the partition.
        let in_txn = msgs.iter().any(|m| m.txn.is_some());
        match self.sole_partition().filter(|_| !in_txn) {
            Some(part) => self.send_runs(&part, msgs, &slots).await,
            None => {
                for (i, msg) in msgs.into_iter().enumerate() {
                    self.enqueue(msg, i + 1 == n, Completion::slot(slots.clone(), i)).await;
                }
            }
        }
        Receipts(slots)
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
        let mut msgs = msgs.into_iter().enumerate().peekable();
        while msgs.peek().is_some() {
            let free = part.free_slots().min(msgs.len());
            let want = if free == 0 && self.inner.opts.block_if_full {
                1
            } else {
                free
            };
            if want == 0 || !part.take_slots(want).await {
                break;
            }
            let mut granted = want;
            let mut run = Vec::with_capacity(want);
            let (mut first, mut bytes) = (0, 0);
            while granted > 0 {
                let Some((_, msg)) = msgs.peek() else { break };
                if let Err(e) = part.check(msg) {
                    let (i, _) = msgs.next().expect("peeked");
                    granted -= 1;
                    part.release(1, 0);
                    slots.fill(i, Err(e));
                    // Runs fill consecutive slots: the refused one ends this run.
                    let ended = std::mem::take(&mut run);
                    let slot_run = SlotRun::new(slots.clone(), first, ended.len());
                    part.post_run(ended, slot_run, std::mem::take(&mut bytes), false);
                    continue;
                }
                if !part.try_reserve_memory(msg.footprint()) {
                    break;
                }
                let (i, msg) = msgs.next().expect("peeked");
                if run.is_empty() {
                    first = i;
                }
                bytes += msg.footprint();
                run.push(msg);
                granted -= 1;
            }
            part.release(granted, 0);
            let last = msgs.peek().is_none();
            let slot_run = SlotRun::new(slots.clone(), first, run.len());
            part.post_run(run, slot_run, bytes, last);
            if granted > 0 {
                break;
            }
        }
        while let Some((i, msg)) = msgs.next() {
            let last = msgs.peek().is_none();
            self.enqueue(msg, last, Completion::slot(slots.clone(), i)).await;
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
            match p.ask(&make) {
                Some(rx) => replies.push(rx),
                None if closed_is_error && result.is_ok() => result = Err(Error::closed("producer")),
                None => {}
            }
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

/// The outcomes of messages queued by [`Producer::enqueue_many`], in order.
pub struct Receipts(Arc<Slots>);

impl Receipts {
    /// Waits for every outcome.
    pub async fn wait(self) -> Vec<Result<MessageId>> {
        self.0.wait().await
    }
}
