//! A partition's registration on the connection of the broker that serves its topic, and the
//! one reattach sequence producers and consumers share: look the topic up, register for its
//! frames, send the attach request (`Producer` or `Subscribe`), and, when that fails for a
//! reason that may pass, try again after a backoff.
//!
//! An attempt runs as a branch of the actor's loop ([`Link::next`]), so the actor still handles
//! its commands (a close above all) while the broker is unreachable.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::error::{Error, ErrorKind, Result};
use super::shared::ClientShared;
use super::timer::sleep_until_opt;
use crate::net::backoff::Backoff;
use crate::net::{lookup, Connection, Event, HandlerId, NetError};
use crate::protocol::commands;
use crate::protocol::frame::Frame;
use crate::protocol::pb::base_command::Type;
use crate::protocol::pb::BaseCommand;

/// Builds the attach command for a request id (again for a second attempt, when the topic
/// migrated to another cluster before the broker answered the first).
pub(crate) type AttachRequest = Arc<dyn Fn(u64) -> BaseCommand + Send + Sync>;

/// The topic's new owner as a broker named it when it closed the producer or consumer (plain
/// and TLS URLs; see [`lookup::assigned_broker`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Assigned {
    pub plain: Option<String>,
    pub tls: Option<String>,
}

impl Assigned {
    /// The owner a close names, if it names one.
    pub fn of(plain: Option<String>, tls: Option<String>) -> Option<Assigned> {
        (plain.is_some() || tls.is_some()).then_some(Assigned { plain, tls })
    }
}

type Attaching = Pin<Box<dyn Future<Output = Attempt> + Send>>;

/// How an attempt ended, and the cluster the broker said the topic migrated to, if it did
/// while the attempt waited for its answer.
struct Attempt {
    outcome: Result<Attached>,
    migrated: Option<Assigned>,
    /// The broker did not answer in time and may still be making the registration.
    abandoned: bool,
}

/// A registration that succeeded, with the broker's answer to the attach request.
struct Attached {
    conn: Connection,
    events: mpsc::UnboundedReceiver<Event>,
    reply: Frame,
    /// Events for the registration that came before the answer, handed on first.
    early: Vec<Event>,
}

/// What [`Link::next`] saw.
pub(crate) enum LinkEvent {
    /// Something from the connection; `None` once the registration is gone.
    Connection(Option<Event>),
    /// The backoff after a detach has passed: the actor starts an attempt with [`Link::reattach`].
    RetryDue,
    /// An attempt succeeded; the link is attached and this is the broker's answer.
    Attached(Box<Frame>),
    /// An attempt failed for a reason that may pass; another is due after the backoff.
    Retrying,
    /// An attempt failed for good.
    Failed(super::error::Error),
    /// The broker said the topic migrated to another cluster (PIP-188); it closes the
    /// registration next, and the reattach looks the topic up there.
    Migrated,
}

/// One producer's or consumer's registration, attached or on its way back.
pub(crate) struct Link {
    client: Arc<ClientShared>,
    topic: Arc<str>,
    id: HandlerId,
    /// Besides retriable errors, the one that means "the broker still has the old registration".
    busy: ErrorKind,
    conn: Option<Connection>,
    events: Option<mpsc::UnboundedReceiver<Event>>,
    /// Events that came with the attach answer, before `events`.
    early: VecDeque<Event>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    attaching: Option<Attaching>,
    /// Where the next attempt goes without a lookup (the new owner a close named), once.
    assigned: Option<Assigned>,
    /// The cluster the topic migrated to (PIP-188): every later lookup asks it.
    migrated: Option<Arc<Assigned>>,
    /// How long a reattach waits for the broker's answer; see [`REATTACH_PATIENCE`].
    patience: Duration,
    /// The last attempt went unanswered; see [`Link::take_abandoned`].
    abandoned: bool,
}

/// How long a consumer's reattach waits for the broker's answer (at most the operation
/// timeout) before it closes that registration and tries again under a new consumer id.
/// Why: a broker that takes a subscribe while it unloads the topic may never answer it
/// (apache/pulsar#16248; its log says "Failed to init transaction pending ack"), and refuses
/// every later subscribe under that id on that connection until it does ("Consumer that
/// failed is already present on the connection"). In the cluster's `txn` scenario such a
/// consumer stood silent for the whole 30 s operation timeout in 4 of 20 runs. A producer
/// keeps its id (its queued frames carry it), so it waits the operation timeout, and a
/// broker that answers late hands it the registration it made.
const REATTACH_PATIENCE: Duration = Duration::from_secs(5);

impl Link {
    /// A detached link for the producer or consumer `id` of `topic`.
    pub fn new(client: Arc<ClientShared>, topic: Arc<str>, id: HandlerId) -> Link {
        let busy = match id {
            HandlerId::Producer(_) => ErrorKind::ProducerBusy,
            HandlerId::Consumer(_) => ErrorKind::ConsumerBusy,
            // Links attach producers and consumers only; a watcher is never refused as busy.
            HandlerId::Watcher(_) => ErrorKind::Connect,
        };
        let timeout = client.opts.connection.operation_timeout;
        let patience = match id {
            HandlerId::Consumer(_) => timeout.min(REATTACH_PATIENCE),
            _ => timeout,
        };
        Link {
            backoff: Backoff::new(client.opts.initial_backoff, client.opts.max_backoff),
            client,
            topic,
            id,
            busy,
            conn: None,
            events: None,
            early: VecDeque::new(),
            retry_at: None,
            attaching: None,
            assigned: None,
            migrated: None,
            patience,
            abandoned: false,
        }
    }

    /// Whether the last attempt went unanswered (and was closed on the broker): the next must
    /// go under a new id ([`Link::renew`]). Consumers only.
    pub fn take_abandoned(&mut self) -> bool {
        std::mem::take(&mut self.abandoned)
    }

    /// Attaches as `id` from now on.
    pub fn renew(&mut self, id: HandlerId) {
        self.id = id;
    }

    /// Attaches now and waits for it (creating a producer or consumer fails fast).
    pub async fn attach(&mut self, request: AttachRequest) -> Result<Frame> {
        let patience = self.client.opts.connection.operation_timeout;
        let mut attempt = attach(
            self.client.clone(),
            self.topic.clone(),
            self.id,
            None,
            None,
            request.clone(),
            patience,
        )
        .await;
        if attempt.migrated.is_some() {
            // Created on a cluster the topic has left: create it in the new one.
            self.note_migration(attempt.migrated.take());
            let migrated = self.migrated.clone();
            attempt = attach(
                self.client.clone(),
                self.topic.clone(),
                self.id,
                None,
                migrated,
                request,
                patience,
            )
            .await;
        }
        Ok(self.install(attempt.outcome?))
    }

    /// Starts another attempt; [`Link::next`] reports how it ends.
    pub fn reattach(&mut self, request: AttachRequest) {
        self.retry_at = None;
        self.attaching = Some(Box::pin(attach(
            self.client.clone(),
            self.topic.clone(),
            self.id,
            self.assigned.take(),
            self.migrated.clone(),
            request,
            self.patience,
        )));
    }

    /// The broker closed the registration naming the topic's new owner: the next attempt goes
    /// there without a lookup (and looks up as usual if that fails).
    pub fn go_next_to(&mut self, assigned: Option<Assigned>) {
        self.assigned = assigned;
    }

    /// Leaves the connection (if any) and makes the next attempt due after `delay`.
    pub fn detach(&mut self, delay: Duration) {
        if let Some(conn) = self.conn.take() {
            conn.unregister(self.id);
        }
        self.events = None;
        self.early.clear();
        self.retry_at = Some(Instant::now() + delay);
    }

    /// Like [`Link::detach`], after a lost connection: the next attempt waits out the backoff.
    pub fn detach_after_loss(&mut self) {
        let delay = self.backoff.next_delay();
        self.detach(delay);
    }

    /// Gives up reattaching (a closing producer with nothing left to wait for).
    pub fn stop_retrying(&mut self) {
        self.attaching = None;
        self.retry_at = None;
    }

    /// The connection while attached.
    pub fn conn(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// Takes the connection for a final close; the link stays detached for good.
    pub fn take_conn(&mut self) -> Option<Connection> {
        self.events = None;
        self.early.clear();
        self.stop_retrying();
        self.conn.take()
    }

    /// Whether an attempt is running or due.
    pub fn is_reattaching(&self) -> bool {
        self.attaching.is_some() || self.retry_at.is_some()
    }

    /// Detaches for good: asks the broker to drop the registration with `close` (when given),
    /// then stops routing its frames.
    pub async fn close(&mut self, close: Option<impl FnOnce(u64) -> BaseCommand>) {
        if let Some(conn) = self.take_conn() {
            if let Some(close) = close {
                let _ = conn.request(close).await;
            }
            conn.unregister(self.id);
        }
    }

    /// Waits for the connection's next event, the retry deadline, or the attempt's outcome.
    pub async fn next(&mut self) -> LinkEvent {
        if let Some(ev) = self.early.pop_front() {
            return self.on_event(Some(ev));
        }
        let attempt = tokio::select! {
            ev = next_event(&mut self.events) => return self.on_event(ev),
            _ = sleep_until_opt(self.retry_at) => {
                self.retry_at = None;
                return LinkEvent::RetryDue;
            }
            attempt = attach_done(&mut self.attaching) => attempt,
        };
        self.attaching = None;
        self.abandoned = attempt.abandoned;
        if attempt.migrated.is_some() {
            self.note_migration(attempt.migrated);
            self.retry_at = Some(Instant::now());
            return LinkEvent::Migrated;
        }
        match attempt.outcome {
            Ok(a) => LinkEvent::Attached(Box::new(self.install(a))),
            // Fenced is for good: a newer exclusive producer owns the topic.
            Err(e) if e.is_retriable() || (e.kind() == self.busy && !e.is_fenced()) => {
                let delay = self.backoff.next_delay();
                log::info!("{}: reattach failed ({e}); retrying in {delay:?}", self.topic);
                self.retry_at = Some(Instant::now() + delay);
                LinkEvent::Retrying
            }
            Err(e) => LinkEvent::Failed(e),
        }
    }

    fn on_event(&mut self, ev: Option<Event>) -> LinkEvent {
        match ev {
            Some(Event::Frame(f)) if f.command.r#type == Type::TopicMigrated as i32 => {
                self.note_migration(migrated_to(&f));
                LinkEvent::Migrated
            }
            ev => LinkEvent::Connection(ev),
        }
    }

    fn note_migration(&mut self, to: Option<Assigned>) {
        if let Some(to) = to {
            log::info!(
                "{}: the topic migrated to another cluster ({to:?}); looking it up there",
                self.topic
            );
            self.migrated = Some(Arc::new(to));
        }
    }

    fn install(&mut self, a: Attached) -> Frame {
        self.backoff.reset();
        self.conn = Some(a.conn);
        self.events = Some(a.events);
        self.early = a.early.into();
        a.reply
    }
}

/// Looks the topic up (in the cluster it `migrated` to, if it did; or goes to the broker a close
/// `assigned`), registers `id` on the
/// connection that serves it, and sends the attach request, waiting `patience` for the answer;
/// on failure nothing stays registered.
async fn attach(
    client: Arc<ClientShared>,
    topic: Arc<str>,
    id: HandlerId,
    assigned: Option<Assigned>,
    migrated: Option<Arc<Assigned>>,
    request: AttachRequest,
    patience: Duration,
) -> Attempt {
    let direct = match &assigned {
        Some(a) => match lookup::assigned_broker(&client.pool, a.plain.as_deref(), a.tls.as_deref()).await {
            Ok(conn) => Some(conn),
            Err(e) => {
                log::info!("{topic}: the assigned broker {a:?} is not reachable ({e}); looking the topic up");
                None
            }
        },
        None => None,
    };
    let looked_up = match (direct, migrated) {
        (Some(conn), _) => Ok(conn),
        (None, Some(m)) => lookup::lookup_topic_in(&client.pool, m.plain.as_deref(), m.tls.as_deref(), &topic).await,
        (None, None) => lookup::lookup_topic(&client.pool, &topic).await,
    };
    let conn = match looked_up {
        Ok(conn) => conn,
        Err(e) => {
            return Attempt {
                outcome: Err(e.into()),
                migrated: None,
                abandoned: false,
            }
        }
    };
    let mut events = match conn.register(id) {
        Ok(events) => events,
        Err(e) => {
            return Attempt {
                outcome: Err(e.into()),
                migrated: None,
                abandoned: false,
            }
        }
    };
    // A broker whose topic migrated answers the attach request with `TopicMigrated` for the
    // registration (and closes it) instead of a reply: waiting for the reply would take the
    // whole operation timeout.
    let mut early = Vec::new();
    let mut events_open = true;
    let outcome = {
        let request = conn.request_with_timeout(patience, |rid| request(rid));
        tokio::pin!(request);
        loop {
            tokio::select! {
                reply = &mut request => break reply,
                ev = events.recv(), if events_open => match ev {
                    Some(Event::Frame(f)) if f.command.r#type == Type::TopicMigrated as i32 => {
                        conn.unregister(id);
                        let e = Error::new(ErrorKind::Connect, "the topic migrated to another cluster");
                        return Attempt { outcome: Err(e), migrated: migrated_to(&f), abandoned: false };
                    }
                    Some(ev) => early.push(ev),
                    None => events_open = false,
                },
            }
        }
    };
    match outcome {
        Ok(reply) => Attempt {
            outcome: Ok(Attached {
                conn,
                events,
                reply,
                early,
            }),
            migrated: None,
            abandoned: false,
        },
        Err(e) => {
            // Only a consumer goes on under a new id; a producer waits for the late answer.
            let abandoned = match (&e, id) {
                (NetError::Timeout(_), HandlerId::Consumer(c)) => {
                    // Should the broker finish the subscribe after all, it must not keep a
                    // consumer of ours that nothing reads (an Exclusive one would refuse every
                    // later attempt).
                    drop(conn.send_request(|rid| commands::close_consumer(c, rid)));
                    true
                }
                _ => false,
            };
            conn.unregister(id);
            Attempt {
                outcome: Err(e.into()),
                migrated: None,
                abandoned,
            }
        }
    }
}

/// The cluster a `TopicMigrated` frame names.
fn migrated_to(f: &Frame) -> Option<Assigned> {
    let m = f.command.topic_migrated.clone().unwrap_or_default();
    Assigned::of(m.broker_service_url, m.broker_service_url_tls)
}

async fn attach_done(f: &mut Option<Attaching>) -> Attempt {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// The next event from a connection registration, or never when there is none.
async fn next_event(events: &mut Option<mpsc::UnboundedReceiver<Event>>) -> Option<Event> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
