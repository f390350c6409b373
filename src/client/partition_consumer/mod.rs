//! The consumer of one topic partition: an actor that owns the subscription on a connection,
//! unpacks what the broker pushes into the shared [`Inbox`], and keeps the ack, negative-ack
//! and ack-timeout books.
//!
//! Permits follow the specification: the whole receiver queue is granted on (re)subscribe, and
//! more are granted once the application has taken half a queue's worth. Messages that arrived
//! on a connection that has since been replaced are dropped from the inbox (the broker
//! redelivers them), and their permits are never returned.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::error::{Error, ErrorKind, Result};
use super::events::ConsumerEvent;
use super::inbox::Inbox;
use super::link::{Assigned, AttachRequest, Link, LinkEvent};
use super::message::{Message, MessageId, OutgoingMessage};
use super::options::{ConsumerOptions, InitialPosition};
use super::producer::Producer;
use super::shared::ClientShared;
use super::timer::{now_ms, sleep_until_opt};
use super::topic::{strip_partition, topic_partition};
use super::transaction::{Op, TxnId};
use crate::net::{Connection, Event, HandlerId};
use crate::protocol::pb::{
    base_command::Type,
    command_ack::{AckType, ValidationError},
    command_subscribe::{self, SubType},
    BaseCommand, IntRange, KeySharedMeta, MessageIdData,
};
use crate::protocol::{commands, frame::Payload};

mod ack_book;
mod acked_ranges;
mod acks;
mod owed;
mod permits;
mod queries;
mod receipts;
mod receive;
mod subscribe;
mod txn_acks;

use ack_book::{AckBook, EntryKey};

use crate::protocol::chunks::{ChunkAssembler, ChunkLimits};
pub use queries::{ConsumerStats, SeekTarget};
use receive::MAX_CHUNKED_MESSAGE_SIZE;

pub(crate) enum Command {
    Flow(u32),
    Ack {
        id: MessageId,
        cumulative: bool,
    },
    AckWithReceipt {
        id: MessageId,
        cumulative: bool,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Individual acks of many messages of this partition: one channel message for a batch.
    AckMany(Vec<MessageId>),
    /// An ack inside transaction `txn`, sent at once with a request id; `op` counts it in the
    /// transaction until the broker answers.
    AckInTxn {
        id: MessageId,
        cumulative: bool,
        txn: TxnId,
        op: Op,
    },
    /// The transaction that acknowledged these aborted: have them delivered again.
    Redeliver(Vec<MessageId>),
    /// The application acked this message in a transaction ending by then at the latest.
    HoldForTxn(MessageId, Instant),
    /// Individual acks wait in [`PartitionShared::take_acks`].
    TakeAcks,
    /// The broker answered (or did not) the acks sent under `token`.
    AcksSettled {
        token: u64,
        confirmed: bool,
    },
    /// A negative ack, with the message's redelivery count (for `nack_backoff`).
    Nack(MessageId, u32),
    /// The application took a message (ack timeout on), with its redelivery count.
    Delivered(MessageId, u32),
    RedeliverAll,
    Seek(SeekTarget, oneshot::Sender<Result<()>>),
    LastMessageId(oneshot::Sender<Result<MessageId>>),
    Stats(oneshot::Sender<Result<ConsumerStats>>),
    Unsubscribe(oneshot::Sender<Result<()>>),
    Close(oneshot::Sender<Result<()>>),
    FlushAcks(oneshot::Sender<()>),
    Pause,
    Resume,
}

/// What the public consumer and the receive path share with one partition's actor.
pub(crate) struct PartitionShared {
    pub topic: Arc<str>,
    pub index: usize,
    pub tx: mpsc::UnboundedSender<Command>,
    epoch: AtomicU32,
    dequeued: AtomicU32,
    threshold: u32,
    pub connected: AtomicBool,
    pub reached_end: AtomicBool,
    pub closed: AtomicBool,
    /// Last id handed to the application (readers resume after it).
    pub last_dequeued: Mutex<Option<MessageId>>,
    track_delivered: bool,
    /// Exclusive/Failover (the owed book): the messages the application took since the actor
    /// last looked. A cumulative ack in a transaction covers what was taken, never what still
    /// waits in the queue (a copy the broker sent again may sit there behind later messages).
    taken: Option<Mutex<Vec<MessageId>>>,
    /// The highest entry queued before the last detach: a message at or below it may be held
    /// by the application and sit in the inbox again as the broker's resend. Set once the
    /// partition has reattached; see [`PartitionShared::purge_acked`].
    stale_high: Mutex<Option<EntryKey>>,
    stale_guard: AtomicBool,
    /// Individual acks not yet seen by the actor. The first one of a run sends
    /// [`Command::TakeAcks`]; the ones after it ride along, so a stream of acks costs the I/O
    /// thread one wake-up per run rather than one per ack.
    pending_acks: Mutex<Vec<MessageId>>,
    /// Exclusive/Failover: bumped by every redelivery of everything unacknowledged, sent with
    /// it and on subscribe; the broker stamps what it dispatches after it, so a message sent
    /// before (a copy of one that comes again) is dropped on arrival (the Java client's epoch).
    pub redelivery_epoch: std::sync::atomic::AtomicU64,
    /// A zero-queue consumer (`receiver_queue_size=0`): permits are asked for one at a time,
    /// when the application wants a message ([`PartitionShared::want_one`]).
    zero_queue: bool,
    /// Zero queue: a permit was asked for and its message not yet taken.
    asked: AtomicBool,
}

impl PartitionShared {
    /// Called for the messages of this partition the application took, in order.
    pub fn on_dequeue<'a>(&self, msgs: impl Iterator<Item = &'a Message>) {
        let epoch = self.epoch.load(Ordering::Acquire);
        let mut count = 0;
        let mut last = None;
        for msg in msgs {
            if msg.epoch != epoch {
                continue;
            }
            count += 1;
            if let Some(taken) = &self.taken {
                taken.lock().expect("taken lock").push(msg.id.clone());
            }
            if self.track_delivered {
                let _ = self.tx.send(Command::Delivered(msg.id.clone(), msg.redelivery_count));
            }
            last = Some(msg);
        }
        if let Some(m) = last {
            *self.last_dequeued.lock().expect("last_dequeued lock") = Some(m.id.clone());
        }
        if count > 0 {
            self.asked.store(false, Ordering::Release);
            self.return_permits(count);
        }
    }

    /// The application acked `ids` (`cumulative`: everything up to each): a copy of one of
    /// them that the broker resent after a reconnect, still queued, must never be handed out
    /// after the ack. Costs one atomic load until this partition has reconnected once.
    pub fn purge_acked(&self, inbox: &Inbox, ids: &[MessageId], cumulative: bool) {
        // Every acknowledgement passes here first: count it.
        inbox.counters.acked(ids.len());
        self.purge_copies(inbox, ids, cumulative);
    }

    /// Drops the queued copies of `ids` (`cumulative`: of everything up to each) that the
    /// broker resent after a reconnect.
    pub fn purge_copies(&self, inbox: &Inbox, ids: &[MessageId], cumulative: bool) {
        if !self.stale_guard.load(Ordering::Acquire) {
            return;
        }
        let Some(high) = *self.stale_high.lock().expect("stale_high lock") else {
            return;
        };
        let acked: Vec<&MessageId> = ids.iter().filter(|id| (id.ledger_id, id.entry_id) <= high).collect();
        if acked.is_empty() {
            return;
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let covered = |m: &Message| {
            acked.iter().any(|a| {
                if cumulative {
                    (m.id.ledger_id, m.id.entry_id, m.id.batch_index) <= (a.ledger_id, a.entry_id, a.batch_index)
                        || (m.id.ledger_id, m.id.entry_id) < (a.ledger_id, a.entry_id)
                } else {
                    m.id.ledger_id == a.ledger_id && m.id.entry_id == a.entry_id && m.id.batch_index == a.batch_index
                }
            })
        };
        let removed = inbox.remove_where(|m| m.origin == self.index && m.epoch == epoch && covered(m));
        if removed > 0 {
            log::debug!("{}: dropped {removed} queued copies of acked messages", self.topic);
            // Never taken: the broker's permits come back as if they had been.
            self.return_permits(removed as u32);
        }
    }

    /// Records an individual ack for the actor; see `pending_acks`. Fails once the actor is gone.
    pub fn push_ack(&self, id: MessageId) -> Result<()> {
        let mut acks = self.pending_acks.lock().expect("pending_acks lock");
        let first = acks.is_empty();
        acks.push(id);
        drop(acks);
        if first {
            self.tx.send(Command::TakeAcks).map_err(|_| Error::closed("consumer"))?;
        }
        Ok(())
    }

    pub(super) fn take_taken(&self) -> Vec<MessageId> {
        self.taken
            .as_ref()
            .map(|t| std::mem::take(&mut *t.lock().expect("taken lock")))
            .unwrap_or_default()
    }

    pub(super) fn take_acks(&self) -> Vec<MessageId> {
        std::mem::take(&mut *self.pending_acks.lock().expect("pending_acks lock"))
    }

    /// Starts a redelivery of everything unacknowledged: bumps the epoch and drops what this
    /// partition has queued (its permits come back), so the application never takes a message
    /// that is coming again. Returns the new epoch.
    pub fn start_redelivery(&self, inbox: &Inbox) -> u64 {
        let epoch = self.redelivery_epoch.fetch_add(1, Ordering::AcqRel) + 1;
        let dropped = inbox.drop_origin(self.index) as u32;
        self.return_permits(dropped);
        epoch
    }
}

/// What one partition's actor is made of: the consumer's client, subscription, options and
/// inbox, and the partition's topic and index among the consumer's parts.
pub(crate) struct Placement {
    pub client: Arc<ClientShared>,
    pub topic: String,
    pub index: usize,
    pub subscription: String,
    pub opts: ConsumerOptions,
    pub inbox: Arc<Inbox>,
    /// Start without granting permits (the consumer is paused).
    pub paused: bool,
}

/// Creates the actor for one partition and attaches it before returning.
pub(crate) async fn create(placement: Placement) -> Result<Arc<PartitionShared>> {
    let mut actor = unattached(placement);
    let shared = actor.shared.clone();
    let request = actor.subscribe_request();
    actor.link.attach(request).await?;
    if !actor.opts.durable && actor.opts.start_inclusive && actor.opts.start_message_id == Some(MessageId::LATEST) {
        // "The latest message, inclusive" is the topic's last message: the broker has no such
        // start position, so find it and move there (as the Java and C++ clients do).
        let last = actor.last_message_id().await?;
        if last.entry_id >= 0 {
            actor.seek(SeekTarget::Id(last)).await?;
        }
    }
    if actor.link.conn().is_some() {
        // Else detached by that seek: the reattach subscribes.
        actor.subscribed();
    }
    super::supervisor::spawn(
        "consumer",
        shared.topic.to_string(),
        on_panic(shared.clone(), actor.inbox.clone()),
        actor.run(),
    );
    Ok(shared)
}

/// The actor of one partition, not yet attached (`create` attaches it; unit tests drive it
/// detached, as it is between connections).
fn unattached(placement: Placement) -> Actor {
    let Placement {
        client,
        topic,
        index,
        subscription,
        opts,
        inbox,
        paused,
    } = placement;
    let (tx, rx) = mpsc::unbounded_channel();
    let queue = opts.receiver_queue_size as u32;
    let shared = Arc::new(PartitionShared {
        topic: Arc::from(topic.as_str()),
        index,
        tx,
        epoch: AtomicU32::new(0),
        dequeued: AtomicU32::new(0),
        threshold: (queue / 2).max(1),
        connected: AtomicBool::new(false),
        reached_end: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        last_dequeued: Mutex::new(None),
        track_delivered: !opts.ack_timeout.is_zero(),
        taken: owed::owes(&opts).then(|| Mutex::new(Vec::new())),
        stale_high: Mutex::new(None),
        stale_guard: AtomicBool::new(false),
        pending_acks: Mutex::new(Vec::new()),
        redelivery_epoch: Default::default(),
        zero_queue: queue == 0,
        asked: AtomicBool::new(false),
    });
    let name = opts.name.clone().unwrap_or_else(subscribe::random_name);
    let chunk_limits = ChunkLimits {
        max_pending: opts.max_pending_chunked_messages,
        expiry: opts.chunk_expiry,
        max_message_size: MAX_CHUNKED_MESSAGE_SIZE,
    };
    let consumer_id = client.next_consumer_id();
    let opts_reader = opts.crypto_key_reader.clone();
    let owed = owed::owes(&opts).then(owed::Owed::default);
    Actor {
        consumer_id,
        link: Link::new(client.clone(), shared.topic.clone(), HandlerId::Consumer(consumer_id)),
        client,
        shared,
        inbox,
        subscription,
        name,
        opts,
        rx,
        owed,
        book: AckBook::default(),
        receipts: Vec::new(),
        ack_tokens: 0,
        queued_high: None,
        acks_due: None,
        nacks: Vec::new(),
        unacked: HashMap::new(),
        paused,
        held_permits: 0,
        dlq: None,
        closing: None,
        not_before_ms: None,
        chunks: ChunkAssembler::new(chunk_limits),
        chunk_entries: HashMap::new(),
        deferred_last_ids: Vec::new(),
        deferred_stats: Vec::new(),
        crypto: crate::client::crypto::ConsumerCrypto::new(opts_reader),
        deferred_seeks: Vec::new(),
        detached_by_seek: false,
        txn_acks: Default::default(),
    }
}

/// When the actor panics, the partition counts as detached and closed, and the inbox all
/// partitions share ends with the error, so receivers (blocked or not) get it once the
/// messages already queued are taken.
fn on_panic(shared: Arc<PartitionShared>, inbox: Arc<Inbox>) -> impl FnOnce(Error) + Send {
    move |e| {
        shared.connected.store(false, Ordering::Release);
        shared.closed.store(true, Ordering::Release);
        inbox.end(e);
    }
}

struct Actor {
    client: Arc<ClientShared>,
    shared: Arc<PartitionShared>,
    inbox: Arc<Inbox>,
    subscription: String,
    name: String,
    consumer_id: u64,
    opts: ConsumerOptions,
    rx: mpsc::UnboundedReceiver<Command>,
    link: Link,
    /// The application's acks until the broker confirms them, and those it waits on.
    book: AckBook,
    receipts: Vec<receipts::Receipt>,
    /// Exclusive/Failover: what was received and not acknowledged (a cumulative ack in a
    /// transaction acknowledges exactly that); `None` for readers and Shared subscriptions.
    owed: Option<owed::Owed>,
    ack_tokens: u64,
    /// The highest entry queued for the application on the current connection.
    queued_high: Option<EntryKey>,
    acks_due: Option<Instant>,
    nacks: Vec<(Instant, MessageId)>,
    unacked: HashMap<EntryKey, (Instant, MessageId)>,
    paused: bool,
    held_permits: u32,
    dlq: Option<Producer>,
    closing: Option<(oneshot::Sender<Result<()>>, bool)>,
    /// Readers positioned by time skip what was published before this (ms since the epoch).
    not_before_ms: Option<u64>,
    /// `LastMessageId` requests that arrived while reattaching.
    deferred_last_ids: Vec<oneshot::Sender<Result<MessageId>>>,
    deferred_stats: Vec<oneshot::Sender<Result<ConsumerStats>>>,
    /// Seeks that arrived while reattaching (right after another seek, say), in order: each
    /// runs once attached, and the broker's detach after it holds back the next.
    deferred_seeks: Vec<(SeekTarget, oneshot::Sender<Result<()>>)>,
    /// Detached by a seek (the broker drops the consumer after one), until attached again:
    /// only then does a seek wait for the reattach; on a lost connection it fails at once.
    detached_by_seek: bool,
    /// Chunked messages being reassembled, by uuid.
    chunks: ChunkAssembler,
    /// Entries of delivered chunked messages, keyed by the last chunk: acking it acks all.
    chunk_entries: HashMap<EntryKey, Vec<MessageIdData>>,
    /// The key reader and the data keys unwrapped so far.
    crypto: crate::client::crypto::ConsumerCrypto,
    txn_acks: txn_acks::TxnAcks,
}

impl Actor {
    async fn run(mut self) {
        let tick = self.opts.ack_timeout.max(Duration::from_secs(1)) / 4;
        let mut ack_timer = tokio::time::interval(tick.max(Duration::from_millis(250)));
        loop {
            let nack_due = self.nacks.iter().map(|(t, _)| *t).min();
            tokio::select! {
                cmd = self.rx.recv() => match cmd {
                    Some(cmd) => self.handle(cmd).await,
                    None => self.closing = Some((oneshot::channel().0, false)),
                },
                ev = self.link.next() => self.on_link_event(ev).await,
                _ = sleep_until_opt(self.acks_due) => self.flush_acks(),
                _ = sleep_until_opt(nack_due) => self.redeliver_nacked(),
                _ = ack_timer.tick(), if !self.opts.ack_timeout.is_zero() => self.redeliver_timed_out(),
                _ = sleep_until_opt(self.chunks.next_deadline().map(Instant::from_std)) => self.expire_chunks(),
                _ = sleep_until_opt(self.txn_acks.next_deadline()) => self.expire_txn_acks(),
            }
            if self.closing.is_some() {
                break;
            }
        }
        self.finish_close().await;
    }

    async fn handle(&mut self, cmd: Command) {
        // Acks recorded before this command was sent come first, whatever it is.
        self.take_pending_acks();
        match cmd {
            Command::Flow(n) => self.grant(n),
            Command::Ack { id, cumulative } => self.ack(id, cumulative),
            Command::AckMany(ids) => self.ack_all(ids),
            Command::TakeAcks => {}
            Command::AcksSettled { token, confirmed } => self.acks_settled(token, confirmed),
            Command::AckWithReceipt { id, cumulative, reply } => self.ack_with_receipt(id, cumulative, reply),
            Command::Nack(id, redelivery_count) => {
                self.inbox.counters.nacked();
                self.unacked.remove(&(id.ledger_id, id.entry_id));
                let delay = match &self.opts.nack_backoff {
                    Some(b) => b.next(redelivery_count),
                    None => self.opts.nack_redelivery_delay,
                };
                self.nacks.push((Instant::now() + delay, id));
            }
            Command::Delivered(id, redelivery_count) => {
                // With a backoff, as the Java client's UnAckedMessageRedeliveryTracker: the
                // ack timeout, then the backoff's delay for the message's redelivery count.
                let extra =
                    (self.opts.ack_timeout_backoff.as_ref()).map_or(Duration::ZERO, |b| b.next(redelivery_count));
                let deadline = Instant::now() + self.opts.ack_timeout + extra;
                self.unacked
                    .entry((id.ledger_id, id.entry_id))
                    .or_insert((deadline, id));
            }
            Command::RedeliverAll => self.redeliver(Vec::new()),
            Command::AckInTxn {
                id,
                cumulative,
                txn,
                op,
            } => self.ack_in_txn(id, cumulative, txn, op),
            Command::Redeliver(ids) => self.redeliver(ids),
            Command::HoldForTxn(id, until) => self.hold_for_txn(id, until),
            Command::Seek(target, reply) => {
                if self.link.conn().is_none() && self.link.is_reattaching() && self.detached_by_seek {
                    self.deferred_seeks.push((target, reply));
                } else {
                    let _ = reply.send(self.seek(target).await);
                }
            }
            // Reattaching (after a seek, say): answer once attached.
            Command::LastMessageId(reply) if self.link.conn().is_none() && self.link.is_reattaching() => {
                self.deferred_last_ids.push(reply)
            }
            Command::LastMessageId(reply) => drop(reply.send(self.last_message_id().await)),
            // While reattaching the broker has no consumer to describe: answer once attached.
            Command::Stats(reply) if self.link.conn().is_none() && self.link.is_reattaching() => {
                self.deferred_stats.push(reply)
            }
            Command::Stats(reply) => drop(reply.send(self.stats().await)),
            Command::Unsubscribe(reply) => {
                self.flush_acks();
                let result = match self.link.conn() {
                    Some(conn) => conn
                        .request(|rid| commands::unsubscribe(self.consumer_id, rid))
                        .await
                        .map(|_| ())
                        .map_err(Error::from),
                    None => Err(Error::new(ErrorKind::Connect, "not connected; cannot unsubscribe now")),
                };
                match result {
                    Ok(()) => self.closing = Some((reply, true)),
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::Close(reply) => self.closing = Some((reply, false)),
            Command::FlushAcks(reply) => {
                self.flush_acks();
                let _ = reply.send(());
            }
            Command::Pause => self.paused = true,
            Command::Resume => {
                self.paused = false;
                let held = std::mem::take(&mut self.held_permits);
                self.grant(held);
            }
        }
    }

    fn grant(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        if self.paused {
            self.held_permits += n;
            return;
        }
        if let Some(conn) = self.link.conn() {
            let _ = conn.send_command(&commands::flow(self.consumer_id, n));
        }
    }

    fn epoch_bump(&mut self) {
        self.chunks.clear_in_progress();
        self.shared.epoch.fetch_add(1, Ordering::AcqRel);
        self.shared.dequeued.store(0, Ordering::Release);
        self.inbox.drop_origin(self.shared.index);
    }

    async fn on_event(&mut self, ev: Option<Event>) {
        match ev {
            Some(Event::Frame(f)) => match Type::try_from(f.command.r#type) {
                Ok(Type::Message) => {
                    let f = *f;
                    let cmd = f.command.message.unwrap_or_default();
                    self.on_message(cmd, f.payload.unwrap_or_default()).await;
                }
                Ok(Type::ReachedEndOfTopic) => {
                    log::info!("{}: reached the end of the topic", self.shared.topic);
                    self.shared.reached_end.store(true, Ordering::Release);
                    self.inbox.wake();
                }
                Ok(Type::CloseConsumer) => {
                    let close = f.command.close_consumer.unwrap_or_default();
                    let assigned =
                        Assigned::of(close.assigned_broker_service_url, close.assigned_broker_service_url_tls);
                    log::info!(
                        "{}: broker closed the consumer (new owner {assigned:?}); resubscribing",
                        self.shared.topic
                    );
                    self.link.go_next_to(assigned);
                    self.disconnect(Duration::ZERO);
                }
                Ok(Type::ActiveConsumerChange) => {
                    let active = f
                        .command
                        .active_consumer_change
                        .is_some_and(|c| c.is_active.unwrap_or(false));
                    if let Some(hook) = &self.opts.event_hook {
                        let topic = self.shared.topic.to_string();
                        hook.call(ConsumerEvent::ActiveChanged { topic, active });
                    }
                }
                _ => {}
            },
            Some(Event::Closed(e)) => {
                log::info!("{}: connection lost ({e}); resubscribing", self.shared.topic);
                self.detach();
                self.link.detach_after_loss();
            }
            None => self.disconnect(Duration::ZERO),
        }
    }

    /// Leaves the connection and resubscribes after `delay`. What is queued for the
    /// application goes now, not at the reattach: the broker will send all of it again, and
    /// an ack of a message taken from here in between would come too late to stop that.
    fn disconnect(&mut self, delay: Duration) {
        self.detach();
        self.link.detach(delay);
    }

    fn detach(&mut self) {
        self.shared.connected.store(false, Ordering::Release);
        self.epoch_bump();
        self.book.detached();
        if let Some(high) = self.queued_high.take() {
            let mut stale = self.shared.stale_high.lock().expect("stale_high lock");
            if stale.is_none_or(|s| s < high) {
                *stale = Some(high);
            }
            self.shared.stale_guard.store(true, Ordering::Release);
        }
    }

    async fn finish_close(mut self) {
        let (reply, unsubscribed) = self.closing.take().expect("closing set");
        self.flush_acks();
        self.shared.closed.store(true, Ordering::Release);
        let consumer_id = self.consumer_id;
        let close = (!unsubscribed).then_some(move |rid| commands::close_consumer(consumer_id, rid));
        self.link.close(close).await;
        if let Some(dlq) = self.dlq.take() {
            let _ = dlq.close().await;
        }
        self.shared.connected.store(false, Ordering::Release);
        self.fail_receipts();
        let _ = reply.send(Ok(()));
        self.rx.close();
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Seek(_, r)
                | Command::Unsubscribe(r)
                | Command::Close(r)
                | Command::AckWithReceipt { reply: r, .. } => {
                    let _ = r.send(Err(Error::closed("consumer")));
                }
                Command::LastMessageId(r) => {
                    let _ = r.send(Err(Error::closed("consumer")));
                }
                Command::Stats(r) => {
                    let _ = r.send(Err(Error::closed("consumer")));
                }
                Command::FlushAcks(r) => {
                    let _ = r.send(());
                }
                _ => {}
            }
        }
    }
}
