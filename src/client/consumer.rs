//! The public consumer: one subscription over a topic, its partitions, a list of topics, or
//! every topic matching a pattern. All sub-consumers feed one inbox, so receiving is the same
//! whatever the consumer covers.
//!
//! This file holds the consumer, its subscription and partition discovery, receiving, seeking
//! and closing; acknowledgements, negative acks and redelivery are in [`acks`].

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use regex::Regex;
use tokio::sync::oneshot;

use super::error::{Error, ErrorKind, Result};
use super::fan_out;
use super::inbox::{Inbox, Take};
use super::message::{Message, MessageId};
use super::options::{ConsumerOptions, TopicDomains};
use super::partition_consumer::{self, Command, PartitionShared};
pub use super::partition_consumer::{ConsumerStats, SeekTarget};
use super::shared::{tracked_through_handle, ClientShared};
use super::timer;
use super::topic::TopicName;
use crate::net::lookup;

mod acks;
mod retry;

/// What a consumer subscribes to.
#[derive(Debug, Clone)]
pub enum TopicSelection {
    /// One topic (all its partitions if partitioned).
    One(String),
    /// Several topics.
    Many(Vec<String>),
    /// Every persistent topic of a namespace whose full name matches the regex.
    Pattern(String),
}

/// What all clones of a consumer share: the subscription, its partitions and their inbox.
struct ConsumerShared {
    client: Arc<ClientShared>,
    subscription: String,
    opts: ConsumerOptions,
    inbox: Arc<Inbox>,
    parts: RwLock<Vec<Arc<PartitionShared>>>,
    /// Topics (partition names) already covered.
    covered: std::sync::Mutex<HashSet<String>>,
    /// Topics as selected (partitioned topic names, not partitions), for partition discovery.
    selected: std::sync::Mutex<Vec<TopicName>>,
    pattern: Option<(String, Regex)>,
    /// Whether a selected topic is partitioned (seen by a discovery): only then can later
    /// discoveries find more to subscribe to without a pattern.
    partitioned: AtomicBool,
    closed: AtomicBool,
    /// Paused (`set_paused`, or `start_paused`): partitions found later start paused too.
    paused: AtomicBool,
    /// With `enable_retry`: the producers of the retry and dead letter topics (`reconsume_later`).
    retry: retry::RetryProducers,
}

tracked_through_handle!(ConsumerShared, Consumer, super::stats::consumer_line);

/// A consumer. Cheap to clone; clones share the consumer.
#[derive(Clone)]
pub struct Consumer {
    inner: Arc<ConsumerShared>,
}

impl Consumer {
    /// Checks `opts` and the subscription name, then creates the consumer.
    pub(crate) async fn open(
        client: Arc<ClientShared>,
        selection: TopicSelection,
        subscription: &str,
        opts: ConsumerOptions,
    ) -> Result<Consumer> {
        client.check_open()?;
        opts.validate()?;
        if subscription.is_empty() {
            return Err(Error::invalid("subscription name must not be empty"));
        }
        Consumer::create(client, selection, subscription.to_string(), opts).await
    }

    /// Subscribes to every partition of the selected topics before returning.
    async fn create(
        client: Arc<ClientShared>,
        selection: TopicSelection,
        subscription: String,
        opts: ConsumerOptions,
    ) -> Result<Consumer> {
        let mut opts = opts;
        let (mut topics, pattern) = match selection {
            TopicSelection::One(t) => (vec![TopicName::parse(&t)?], None),
            TopicSelection::Many(ts) => {
                if ts.is_empty() {
                    return Err(Error::invalid("topic list must not be empty"));
                }
                let mut v: Vec<TopicName> = Vec::new();
                for t in ts {
                    let t = TopicName::parse(&t)?;
                    if !v.contains(&t) {
                        v.push(t);
                    }
                }
                (v, None)
            }
            TopicSelection::Pattern(p) => {
                let full = if p.contains("://") {
                    p.clone()
                } else {
                    let domains = match opts.pattern_domains {
                        TopicDomains::Persistent => "persistent",
                        TopicDomains::NonPersistent => "non-persistent",
                        TopicDomains::All => "(?:persistent|non-persistent)",
                    };
                    format!("{domains}://public/default/{p}")
                };
                let regex = Regex::new(&format!("^(?:{full})$"))
                    .map_err(|e| Error::invalid(format!("invalid topic pattern: {e}")))?;
                (Vec::new(), Some((full, regex)))
            }
        };
        if opts.enable_retry {
            let Some(first) = topics.first() else {
                return Err(Error::invalid(
                    "enable_retry needs topic names: a pattern subscription has no topic to name the retry topic after",
                ));
            };
            let base = first.as_str().to_string();
            let retry = opts
                .retry_letter_topic
                .get_or_insert_with(|| format!("{base}-{subscription}-RETRY"))
                .clone();
            // As the Java client: one dead letter topic for every topic of the consumer, the
            // retry topic included, and 16 retries unless told.
            opts.dead_letter_topic
                .get_or_insert_with(|| format!("{base}-{subscription}-DLQ"));
            opts.max_redeliver_count.get_or_insert(retry::MAX_RECONSUME_TIMES);
            let retry = TopicName::parse(&retry)?;
            if !topics.contains(&retry) {
                topics.push(retry);
            }
        }
        if opts.receiver_queue_size == 0 && (pattern.is_some() || topics.len() > 1) {
            return Err(Error::invalid(
                "receiver_queue_size=0 (a zero-queue consumer) takes one topic, not a list or a pattern",
            ));
        }
        let paused = AtomicBool::new(opts.start_paused);
        let consumer = Consumer {
            inner: Arc::new(ConsumerShared {
                client: client.clone(),
                subscription,
                retry: retry::RetryProducers::default(),
                paused,
                opts,
                inbox: Arc::new(Inbox::new()),
                parts: RwLock::new(Vec::new()),
                covered: Default::default(),
                selected: std::sync::Mutex::new(topics),
                pattern,
                partitioned: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        };
        if let Err(e) = consumer.discover().await {
            let _ = consumer.close().await;
            return Err(e);
        }
        client.track(&consumer.inner);
        // Durable subscriptions follow partitions added later; a reader keeps the ones it began
        // with. A non-partitioned topic never gains partitions: no task, no periodic lookup
        // (at 10,000 consumers that was 170 lookups a second while idle; issue 31).
        let needs_discovery = consumer.inner.pattern.is_some()
            || (consumer.inner.opts.durable && consumer.inner.partitioned.load(Ordering::Acquire));
        if needs_discovery {
            timer::every(
                &consumer.inner,
                consumer.inner.opts.discovery_period,
                |inner| async move {
                    if inner.closed.load(Ordering::Acquire) {
                        return false;
                    }
                    if let Err(e) = (Consumer { inner }).discover().await {
                        log::warn!("topic discovery failed: {e}");
                    }
                    true
                },
            );
        }
        Ok(consumer)
    }

    /// Finds topics and partitions not yet covered and subscribes to them.
    async fn discover(&self) -> Result<()> {
        let inner = &self.inner;
        let mut wanted: Vec<String> = Vec::new();
        if let Some((full, regex)) = &inner.pattern {
            let rest = full.split_once("://").map_or(full.as_str(), |(_, r)| r);
            let mut it = rest.splitn(3, '/');
            let ns = match (it.next(), it.next(), it.next()) {
                (Some(t), Some(n), Some(_)) if !t.is_empty() && !n.is_empty() => format!("{t}/{n}"),
                _ => {
                    return Err(Error::invalid(format!(
                        "pattern {full:?} must name tenant/namespace literally"
                    )))
                }
            };
            for t in lookup::topics_of_namespace(&inner.client.pool, &ns, inner.opts.pattern_domains).await? {
                let base = match t.rsplit_once("-partition-") {
                    Some((b, n)) if n.parse::<u32>().is_ok() => b.to_string(),
                    _ => t.clone(),
                };
                if regex.is_match(&base) || regex.is_match(&t) {
                    wanted.push(t);
                }
            }
        } else {
            let selected = inner.selected.lock().expect("selected lock").clone();
            for t in selected {
                if t.partition().is_some() {
                    wanted.push(t.to_string());
                    continue;
                }
                let n = lookup::partition_count(&inner.client.pool, t.as_str()).await?;
                if n == 0 {
                    wanted.push(t.to_string());
                } else {
                    inner.partitioned.store(true, Ordering::Release);
                    wanted.extend((0..n).map(|i| t.partition_name(i)));
                }
            }
        }
        if inner.opts.receiver_queue_size == 0 && wanted.len() > 1 {
            return Err(Error::invalid(
                "receiver_queue_size=0 (a zero-queue consumer) takes one topic, not a partitioned one",
            ));
        }
        let mut opts = inner.opts.clone();
        if wanted.len() > 1 {
            // The Java client's maxTotalReceiverQueueSizeAcrossPartitions, shared out.
            let share = (inner.opts.max_total_receiver_queue_size / wanted.len()).max(1);
            opts.receiver_queue_size = opts.receiver_queue_size.min(share);
        }
        let fresh: Vec<String> = {
            let covered = inner.covered.lock().expect("covered lock");
            wanted.into_iter().filter(|t| !covered.contains(t)).collect()
        };
        if fresh.is_empty() || inner.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        // All at once (`fan_out`). A part's index is its place in `parts`, so only the parts
        // before the first failure are kept; the others are closed, and what they queued is
        // dropped, before their indexes go to the parts of a later discovery.
        let base = inner.parts.read().expect("parts lock").len();
        let paused = inner.paused.load(Ordering::Acquire);
        let created = fan_out::in_order(fresh.iter().enumerate().map(|(i, topic)| {
            partition_consumer::create(partition_consumer::Placement {
                client: inner.client.clone(),
                topic: topic.clone(),
                index: base + i,
                subscription: inner.subscription.clone(),
                opts: opts.clone(),
                inbox: inner.inbox.clone(),
                paused,
            })
        }))
        .await;
        if inner.closed.load(Ordering::Acquire) {
            // Closed meanwhile: `close` did not see these.
            close_all(&created.into_iter().flatten().collect::<Vec<_>>()).await;
            return Ok(());
        }
        let mut failed = None;
        let mut orphans = Vec::new();
        for (topic, part) in fresh.into_iter().zip(created) {
            match (part, &failed) {
                (Ok(part), None) => {
                    inner.parts.write().expect("parts lock").push(part);
                    inner.covered.lock().expect("covered lock").insert(topic);
                }
                (Ok(part), Some(_)) => orphans.push(part),
                (Err(e), None) => failed = Some(e),
                (Err(_), Some(_)) => {}
            }
        }
        let Some(e) = failed else { return Ok(()) };
        close_all(&orphans).await;
        for part in &orphans {
            inner.inbox.drop_origin(part.index);
        }
        Err(e)
    }

    fn parts(&self) -> Vec<Arc<PartitionShared>> {
        self.inner.parts.read().expect("parts lock").clone()
    }

    /// Topic names covered right now (partitions listed one by one).
    pub fn topics(&self) -> Vec<String> {
        self.parts().iter().map(|p| p.topic.to_string()).collect()
    }

    /// The subscription name.
    pub fn subscription(&self) -> &str {
        &self.inner.subscription
    }

    /// Whether every sub-consumer is attached right now.
    pub fn is_connected(&self) -> bool {
        self.parts().iter().all(|p| p.connected.load(Ordering::Acquire))
    }

    /// Messages waiting in the receiver queue.
    pub fn queued(&self) -> usize {
        self.inner.inbox.len()
    }

    /// Client-side statistics (`client::stats::ConsumerClientStats`).
    pub fn client_stats(&self) -> super::stats::ConsumerClientStats {
        self.inner.inbox.client_stats()
    }

    /// Messages discarded because their checksum or encoding was corrupt.
    pub fn corrupt_messages(&self) -> u64 {
        self.inner.inbox.corrupt_count()
    }

    fn end_state(&self) -> Option<Error> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Some(Error::closed("consumer"));
        }
        let parts = self.parts();
        if !parts.is_empty()
            && self.inner.pattern.is_none()
            && parts.iter().all(|p| p.reached_end.load(Ordering::Acquire))
        {
            return Some(Error::new(ErrorKind::TopicTerminated, "reached the end of the topic"));
        }
        None
    }

    fn taken(&self, msgs: &[Message]) {
        let parts = self.inner.parts.read().expect("parts lock");
        if parts.len() == 1 {
            parts[0].on_dequeue(msgs.iter());
            return;
        }
        let mut origins: Vec<usize> = msgs.iter().map(|m| m.origin).collect();
        origins.sort_unstable();
        origins.dedup();
        for origin in origins {
            if let Some(part) = parts.get(origin) {
                part.on_dequeue(msgs.iter().filter(|m| m.origin == origin));
            }
        }
    }

    /// A message if one is queued, without waiting.
    pub fn try_receive(&self) -> Result<Option<Message>> {
        match self.inner.inbox.try_take() {
            Take::Message(m) => {
                self.taken(std::slice::from_ref(&m));
                Ok(Some(m))
            }
            Take::Ended(e) => Err(e),
            Take::Empty => match self.end_state() {
                Some(e) => Err(e),
                None => {
                    self.ask_for_one();
                    Ok(None)
                }
            },
        }
    }

    /// A zero-queue consumer asks the broker for one message when the application wants one
    /// and none is queued (once until it comes: the Java client's ZeroQueueConsumerImpl).
    fn ask_for_one(&self) {
        if self.inner.opts.receiver_queue_size == 0 {
            if let Some(p) = self.parts().first() {
                p.want_one();
            }
        }
    }

    /// Waits for the next message. Cancelling the returned future loses nothing.
    pub async fn receive(&self) -> Result<Message> {
        loop {
            if let Some(m) = self.try_receive()? {
                return Ok(m);
            }
            self.inner.inbox.wait().await;
        }
    }

    /// Blocks the thread until a message arrives or `deadline` passes (`Ok(None)`), calling
    /// `interrupted` between short waits so the caller can abort (Ctrl-C).
    pub fn receive_blocking(
        &self,
        deadline: Option<Instant>,
        mut interrupted: impl FnMut() -> Result<()>,
    ) -> Result<Option<Message>> {
        loop {
            if let Some(m) = self.try_receive()? {
                return Ok(Some(m));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| d <= now) {
                return Ok(None);
            }
            let slice = now + super::inbox::SIGNAL_CHECK_INTERVAL;
            self.inner.inbox.wait_blocking(deadline.map_or(slice, |d| d.min(slice)));
            interrupted()?;
        }
    }

    /// Up to `max` queued messages, without waiting.
    pub fn try_receive_many(&self, max: usize) -> Result<Vec<Message>> {
        self.try_receive_many_within(max, usize::MAX)
    }

    /// Up to `max` queued messages of at most `max_bytes` payload bytes together (at least one
    /// when any is queued), without waiting.
    pub fn try_receive_many_within(&self, max: usize, max_bytes: usize) -> Result<Vec<Message>> {
        let (msgs, ended) = self.inner.inbox.take_many(max, max_bytes);
        if msgs.is_empty() {
            if let Some(e) = ended.or_else(|| self.end_state()) {
                return Err(e);
            }
            self.ask_for_one();
        }
        self.taken(&msgs);
        Ok(msgs)
    }

    fn part_for(&self, id: &MessageId) -> Result<Arc<PartitionShared>> {
        // Read in place: every ack comes here, and cloning the list cost a 100-partition
        // consumer 30 % of its receive-and-ack CPU (benches/scale_messages.py, issue 31).
        let parts = self.inner.parts.read().expect("parts lock");
        if parts.len() == 1 {
            return Ok(parts[0].clone());
        }
        if let Some(t) = &id.topic {
            // One partitioned topic lists its partitions in order: the one the id names first.
            let by_index = usize::try_from(id.partition).ok().and_then(|i| parts.get(i));
            if let Some(p) = by_index.filter(|p| p.topic == *t) {
                return Ok(p.clone());
            }
            if let Some(p) = parts.iter().find(|p| p.topic == *t) {
                return Ok(p.clone());
            }
        }
        if id.partition >= 0 {
            let suffix = format!("-partition-{}", id.partition);
            let matching: Vec<_> = parts.iter().filter(|p| p.topic.ends_with(&suffix)).collect();
            if matching.len() == 1 {
                return Ok(matching[0].clone());
            }
        }
        Err(Error::invalid(format!(
            "message id {id} does not say which of this consumer's topics it belongs to"
        )))
    }

    /// Stops (`true`) or restarts (`false`) granting permits; queued messages stay available.
    pub fn set_paused(&self, paused: bool) {
        self.inner.paused.store(paused, Ordering::Release);
        for p in self.parts() {
            let _ = p.tx.send(if paused { Command::Pause } else { Command::Resume });
        }
    }

    async fn each<T>(&self, make: impl Fn(oneshot::Sender<Result<T>>) -> Command) -> Result<Vec<T>> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::closed("consumer"));
        }
        let mut out = Vec::new();
        for p in self.parts() {
            let (tx, rx) = oneshot::channel();
            p.tx.send(make(tx)).map_err(|_| Error::closed("consumer"))?;
            out.push(rx.await.map_err(|_| Error::closed("consumer"))??);
        }
        Ok(out)
    }

    /// Moves the subscription to a message id (the id's partition when partitioned) or a time.
    pub async fn seek(&self, target: SeekTarget) -> Result<()> {
        match &target {
            SeekTarget::Id(id) if self.parts().len() > 1 && *id != MessageId::EARLIEST && *id != MessageId::LATEST => {
                let part = self.part_for(id)?;
                let (tx, rx) = oneshot::channel();
                part.tx
                    .send(Command::Seek(target.clone(), tx))
                    .map_err(|_| Error::closed("consumer"))?;
                rx.await.map_err(|_| Error::closed("consumer"))?
            }
            _ => self.each(|tx| Command::Seek(target.clone(), tx)).await.map(|_| ()),
        }
    }

    /// The id of the last message in each covered topic (waiting, within the operation
    /// timeout, for a sub-consumer that is reattaching).
    pub async fn last_message_ids(&self) -> Result<Vec<MessageId>> {
        let timeout = self.inner.client.opts.connection.operation_timeout;
        tokio::time::timeout(timeout, self.each(Command::LastMessageId))
            .await
            .map_err(|_| Error::timeout("get last message id"))?
    }

    /// The broker's statistics for each covered topic.
    pub async fn stats(&self) -> Result<Vec<ConsumerStats>> {
        self.each(Command::Stats).await
    }

    /// Sends grouped acknowledgements now.
    pub async fn flush_acks(&self) {
        for p in self.parts() {
            let (tx, rx) = oneshot::channel();
            if p.tx.send(Command::FlushAcks(tx)).is_ok() {
                let _ = rx.await;
            }
        }
    }

    /// Deletes the subscription (and closes the consumer).
    pub async fn unsubscribe(&self) -> Result<()> {
        self.each(Command::Unsubscribe).await?;
        self.inner.closed.store(true, Ordering::Release);
        self.inner.inbox.end(Error::closed("consumer"));
        Ok(())
    }

    /// Flushes acknowledgements and detaches. Idempotent.
    pub async fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        close_all(&self.parts()).await;
        self.inner.retry.close().await;
        self.inner.inbox.end(Error::closed("consumer"));
        Ok(())
    }

    /// Resolves once a message may be available or the consumer ended (takes nothing, so
    /// cancelling it loses nothing).
    pub async fn wait_for_message(&self) {
        if self.inner.inbox.len() > 0 || self.end_state().is_some() {
            return;
        }
        self.inner.inbox.wait().await;
    }

    /// Whether a message is queued or the broker has messages past the last one taken
    /// (readers use this to know when they caught up).
    pub async fn has_message_available(&self) -> Result<bool> {
        if self.inner.inbox.len() > 0 {
            return Ok(true);
        }
        let lasts = self.last_message_ids().await?;
        for (part, last) in self.parts().iter().zip(lasts) {
            if last.entry_id < 0 {
                continue;
            }
            let taken = part.last_dequeued.lock().expect("last_dequeued lock").clone();
            let more = match taken {
                Some(t) => {
                    (last.ledger_id, last.entry_id) > (t.ledger_id, t.entry_id)
                        || (last.ledger_id, last.entry_id) == (t.ledger_id, t.entry_id)
                            && last.batch_index > t.batch_index
                }
                None => match &self.inner.opts.start_message_id {
                    Some(start) if !self.inner.opts.durable => {
                        if *start == MessageId::LATEST {
                            // Inclusive, the reader starts at the last message (there is one).
                            self.inner.opts.start_inclusive
                        } else if self.inner.opts.start_inclusive {
                            (last.ledger_id, last.entry_id) >= (start.ledger_id, start.entry_id)
                        } else {
                            (last.ledger_id, last.entry_id) > (start.ledger_id, start.entry_id)
                        }
                    }
                    _ => true,
                },
            };
            if more {
                return Ok(true);
            }
        }
        Ok(self.inner.inbox.len() > 0)
    }

    /// Whether `close` or `unsubscribe` was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }
}

/// Closes `parts` and waits until each is closed; all are asked first, so the close round
/// trips overlap (a consumer of 1,000 partitions closed them one after another).
async fn close_all(parts: &[Arc<PartitionShared>]) {
    let replies: Vec<_> = parts
        .iter()
        .filter_map(|p| {
            let (tx, rx) = oneshot::channel();
            p.tx.send(Command::Close(tx)).ok().map(|()| rx)
        })
        .collect();
    for rx in replies {
        let _ = rx.await;
    }
}
