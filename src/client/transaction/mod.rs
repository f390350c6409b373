//! Transactions: messages produced and acknowledgements made inside one take effect together
//! at commit, or not at all.
//!
//! A [`Transaction`] counts the sends and acks registered in it ([`Transaction::begin_op`]);
//! commit and abort first refuse new ones, then wait for those still running. Before a
//! transaction's first send to a partition (first ack on a subscription) the coordinator is
//! told ([`Transaction::when_registered`]); sends that arrive while that request is out wait
//! in a queue and go on in their order once it is answered, so registering never reorders a
//! producer's messages.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::error::{Error, Result};
use super::shared::ClientShared;
use crate::net::backoff::Backoff;
use crate::net::{Event, HandlerId};
use crate::protocol::commands::TxnBits;
use crate::protocol::pb::TxnAction;

pub(crate) mod coordinator;

/// A transaction's id: the coordinator's id in the most significant bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnId {
    /// Most significant bits: the id of the coordinator that owns the transaction.
    pub most: u64,
    /// Least significant bits: the transaction's number at its coordinator.
    pub least: u64,
}

impl TxnId {
    /// The id as the wire carries it.
    pub fn bits(self) -> TxnBits {
        (self.most, self.least)
    }
}

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.most, self.least)
    }
}

/// Where a transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// Sends and acks can join it.
    Open,
    /// `commit` was called; waiting for its operations, then for the coordinator.
    Committing,
    /// `abort` was called (or a failed operation made commit abort).
    Aborting,
    /// Committed: its messages are visible, its acks stand.
    Committed,
    /// Aborted: its messages are dropped, its acks undone.
    Aborted,
    /// The coordinator refused to end it or could not be reached: its outcome is the
    /// coordinator's (a transaction that is not committed aborts at its timeout).
    Errored,
}

impl TxnState {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Open => "open",
            TxnState::Committing => "committing",
            TxnState::Aborting => "aborting",
            TxnState::Committed => "committed",
            TxnState::Aborted => "aborted",
            TxnState::Errored => "errored",
        }
    }
}

/// What a transaction tells the coordinator about before using it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// A topic partition it produces to (full name).
    Partition(String),
    /// A subscription of a topic partition it acknowledges on.
    Subscription { topic: String, subscription: String },
}

/// Work waiting for its scope to be registered; gets the registration's outcome.
pub(crate) type Deferred = Box<dyn FnOnce(Result<()>) + Send>;

enum Gate {
    Registered,
    Waiting(Vec<Deferred>),
    Failed(Error),
}

/// Runs when the transaction has ended: given whether it committed (consumers redeliver what
/// an aborted one acknowledged).
pub(crate) type EndHook = Box<dyn FnOnce(bool) + Send>;

struct Phase {
    state: TxnState,
    /// Operations begun and not yet finished.
    running: usize,
    /// The first operation that failed: commit then aborts.
    failed: Option<Error>,
}

struct TxnShared {
    id: TxnId,
    client: Arc<ClientShared>,
    /// Registration requests start from sends made on the caller's thread.
    runtime: tokio::runtime::Handle,
    /// When the coordinator aborts it, if this client opened it.
    expires: Option<Instant>,
    phase: Mutex<Phase>,
    idle: Notify,
    gates: Mutex<HashMap<Scope, Gate>>,
    on_end: Mutex<Vec<EndHook>>,
}

/// A transaction. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct Transaction {
    inner: Arc<TxnShared>,
}

impl fmt::Debug for Transaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Transaction{} {}", self.inner.id, self.state().name())
    }
}

impl Transaction {
    /// Opens a transaction that the coordinator aborts after `timeout` unless it is ended first.
    pub(crate) async fn open(client: Arc<ClientShared>, timeout: Duration) -> Result<Transaction> {
        client.check_open()?;
        if timeout.is_zero() {
            return Err(Error::invalid("a transaction's timeout must be positive"));
        }
        let started = Instant::now();
        let (most, least) = client.coordinators.new_txn(&client.pool, timeout).await?;
        log::debug!("opened transaction ({most}, {least})");
        Ok(Self::with_id(client, TxnId { most, least }, Some(started + timeout)))
    }

    /// A handle to the open transaction `id`, made by this or another process; checks that
    /// its coordinator can be reached.
    pub(crate) async fn resume(client: Arc<ClientShared>, id: TxnId) -> Result<Transaction> {
        client.check_open()?;
        client.coordinators.reach(&client.pool, id.bits()).await?;
        Ok(Self::with_id(client, id, None))
    }

    /// A transaction with id `(most, least)` of a client that never connects (unit tests).
    #[cfg(test)]
    pub(crate) fn detached(most: u64, least: u64) -> Transaction {
        let client = ClientShared::new("pulsar://127.0.0.1:1", Default::default()).expect("a valid URL");
        Self::with_id(Arc::new(client), TxnId { most, least }, None)
    }

    /// How many sends and acks are running, and the first failure among those finished.
    #[cfg(test)]
    pub(crate) fn ops(&self) -> (usize, Option<Error>) {
        let phase = self.phase();
        (phase.running, phase.failed.clone())
    }

    fn with_id(client: Arc<ClientShared>, id: TxnId, expires: Option<Instant>) -> Transaction {
        Transaction {
            inner: Arc::new(TxnShared {
                id,
                client,
                runtime: tokio::runtime::Handle::current(),
                expires,
                phase: Mutex::new(Phase {
                    state: TxnState::Open,
                    running: 0,
                    failed: None,
                }),
                idle: Notify::new(),
                gates: Mutex::new(HashMap::new()),
                on_end: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The transaction's id.
    pub fn id(&self) -> TxnId {
        self.inner.id
    }

    /// The runtime the transaction's background work runs on.
    pub(crate) fn runtime(&self) -> tokio::runtime::Handle {
        self.inner.runtime.clone()
    }

    /// When the coordinator aborts the transaction if it has not ended, when known (not for a
    /// transaction resumed from its id).
    pub(crate) fn expires(&self) -> Option<Instant> {
        self.inner.expires
    }

    /// Where the transaction stands.
    pub fn state(&self) -> TxnState {
        self.phase().state
    }

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.inner.phase.lock().expect("transaction phase lock")
    }

    /// Counts one send or ack in the transaction until the returned [`Op`] is finished;
    /// refused unless the transaction is open.
    pub(crate) fn begin_op(&self) -> Result<Op> {
        let mut phase = self.phase();
        if phase.state != TxnState::Open {
            return Err(self.not_open(phase.state));
        }
        if self.inner.expires.is_some_and(|t| Instant::now() >= t) {
            return Err(Error::transaction(format!(
                "transaction {} has timed out: its coordinator aborts it",
                self.inner.id
            )));
        }
        phase.running += 1;
        Ok(Op {
            txn: Some(self.clone()),
        })
    }

    fn not_open(&self, state: TxnState) -> Error {
        Error::transaction(format!(
            "transaction {} is {}: it takes no more sends or acknowledgements",
            self.inner.id,
            state.name()
        ))
    }

    fn finish_op(&self, outcome: std::result::Result<(), &Error>) {
        let mut phase = self.phase();
        phase.running -= 1;
        if let Err(e) = outcome {
            phase.failed.get_or_insert_with(|| e.clone());
        }
        if phase.running == 0 {
            self.inner.idle.notify_waiters();
        }
    }

    /// Runs `then` once `scope` is registered with the coordinator (at once if it is), or
    /// with the error that registering it met. Deferred work runs in the order it came.
    pub(crate) fn when_registered(&self, scope: Scope, then: Deferred) {
        let mut gates = self.inner.gates.lock().expect("transaction gates lock");
        match gates.get_mut(&scope) {
            Some(Gate::Registered) => then(Ok(())),
            Some(Gate::Failed(e)) => then(Err(e.clone())),
            Some(Gate::Waiting(queue)) => queue.push(then),
            None => {
                gates.insert(scope.clone(), Gate::Waiting(vec![then]));
                let txn = self.clone();
                self.inner.runtime.spawn(async move {
                    let outcome = txn.register(&scope).await;
                    let mut gates = txn.inner.gates.lock().expect("transaction gates lock");
                    let next = match &outcome {
                        Ok(()) => Gate::Registered,
                        Err(e) => Gate::Failed(e.clone()),
                    };
                    if let Some(Gate::Waiting(queue)) = gates.insert(scope, next) {
                        // Under the lock, so work arriving now queues behind these.
                        for then in queue {
                            then(outcome.clone());
                        }
                    }
                });
            }
        }
    }

    async fn register(&self, scope: &Scope) -> Result<()> {
        let c = &self.inner.client;
        let id = self.inner.id.bits();
        match scope {
            Scope::Partition(topic) => c.coordinators.add_partition(&c.pool, id, topic).await,
            Scope::Subscription { topic, subscription } => {
                c.coordinators.add_subscription(&c.pool, id, topic, subscription).await
            }
        }
    }

    /// Runs `hook` when the transaction ends committed (`true`) or aborted (`false`).
    pub(crate) fn on_end(&self, hook: EndHook) {
        self.inner.on_end.lock().expect("end hooks lock").push(hook);
    }

    /// Waits for every send and ack registered in the transaction, then commits it. If one of
    /// them failed, the transaction is aborted instead and the error says which, with the
    /// broker's code of that failure (`TransactionConflict` for an ack of a message acked
    /// already), so the caller can tell a conflict from a lost connection without parsing text.
    pub async fn commit(&self) -> Result<()> {
        self.begin_end(TxnState::Committing)?;
        if let Some(failed) = self.wait_for_ops().await {
            let aborted = self.end(TxnAction::Abort).await;
            return Err(failed.into_transaction(&format!(
                "transaction {} was aborted{}: an operation in it failed",
                self.inner.id,
                if aborted.is_ok() { "" } else { " (or times out)" },
            )));
        }
        self.end(TxnAction::Commit).await
    }

    /// Waits for every send and ack registered in the transaction, then aborts it.
    pub async fn abort(&self) -> Result<()> {
        self.begin_end(TxnState::Aborting)?;
        self.wait_for_ops().await;
        self.end(TxnAction::Abort).await
    }

    fn begin_end(&self, next: TxnState) -> Result<()> {
        let mut phase = self.phase();
        match phase.state {
            TxnState::Open => {
                phase.state = next;
                Ok(())
            }
            state => Err(Error::transaction(format!(
                "transaction {} is {}: it cannot be {} again",
                self.inner.id,
                state.name(),
                if next == TxnState::Committing {
                    "committed"
                } else {
                    "aborted"
                }
            ))),
        }
    }

    /// Waits until no operation runs; the first failure among them, if any.
    async fn wait_for_ops(&self) -> Option<Error> {
        loop {
            let idle = self.inner.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            {
                let phase = self.phase();
                if phase.running == 0 {
                    return phase.failed.clone();
                }
            }
            idle.await;
        }
    }

    async fn end(&self, action: TxnAction) -> Result<()> {
        let c = &self.inner.client;
        let outcome = c.coordinators.end(&c.pool, self.inner.id.bits(), action).await;
        let state = match (&outcome, action) {
            (Ok(()), TxnAction::Commit) => TxnState::Committed,
            (Ok(()), TxnAction::Abort) => TxnState::Aborted,
            (Err(_), _) => TxnState::Errored,
        };
        self.phase().state = state;
        if matches!(state, TxnState::Committed | TxnState::Aborted) {
            let hooks = std::mem::take(&mut *self.inner.on_end.lock().expect("end hooks lock"));
            for hook in hooks {
                hook(state == TxnState::Committed);
            }
        }
        outcome
    }
}

/// One send or ack counted in a transaction; finishing it (or dropping it) uncounts it.
pub(crate) struct Op {
    txn: Option<Transaction>,
}

impl Op {
    /// The operation completed with `outcome`; a failure makes the transaction's commit abort.
    pub fn finish<T>(mut self, outcome: &Result<T>) {
        if let Some(txn) = self.txn.take() {
            txn.finish_op(outcome.as_ref().map(|_| ()));
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if let Some(txn) = self.txn.take() {
            txn.finish_op(Err(&Error::transaction(
                "a send or acknowledgement of the transaction was abandoned (its producer or consumer closed)",
            )));
        }
    }
}

// Here rather than in `coordinator`: it follows the client's shared state, which holds the
// coordinators, so `coordinator` stays below that state.
/// Keeps a session open with every coordinator while the client lives (`enable_transaction`,
/// the Java client's `enableTransaction`), reopening one as soon as its connection is lost.
///
/// Why: a broker loads a coordinator only when a client opens a session with it, and only a
/// loaded coordinator aborts its transactions that timed out. After a broker restart, the
/// transactions a crashed process left open keep holding the messages they acknowledged
/// (the broker recovers their pending acks) until some client talks to their coordinator;
/// a consumer whose input is all held that way receives nothing, so it never opens a
/// transaction itself, and waits for ever. Seen in the kill -9 loop with broker kills.
pub(crate) async fn keep_coordinators_connected(client: Weak<ClientShared>) {
    let mut backoff = None;
    loop {
        let Some(c) = client.upgrade().filter(|c| !c.is_closed()) else {
            return;
        };
        let backoff = backoff.get_or_insert_with(|| Backoff::new(c.opts.initial_backoff, c.opts.max_backoff));
        let deadline = Instant::now() + c.pool.options().operation_timeout;
        let sessions = c.coordinators.open_all(&c.pool, deadline).await;
        drop(c); // held only while connecting: waiting below must not keep the client alive
        match sessions {
            Ok(conns) => {
                let mut lost = tokio::task::JoinSet::new();
                for (tc, conn) in conns.iter().enumerate() {
                    if let Ok(mut events) = conn.register(HandlerId::Watcher(tc as u64)) {
                        // A watcher is sent nothing but the close.
                        lost.spawn(async move { while let Some(Event::Frame(_)) = events.recv().await {} });
                    }
                }
                log::debug!("sessions open with {} transaction coordinators", conns.len());
                if !lost.is_empty() {
                    backoff.reset();
                }
                // Nor may it keep the connections open: a client dropped without close()
                // drops its pool, whose connections then close and end this wait.
                drop(conns);
                if lost.join_next().await.is_none() {
                    // Every connection closed before it could be watched: not a tight loop.
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
            Err(e) => {
                let wait = backoff.next_delay();
                log::warn!("cannot reach the transaction coordinators ({e}); trying again in {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::options::ClientOptions;
    use crate::protocol::pb::ServerError;

    fn txn() -> Transaction {
        let mut opts = ClientOptions::default();
        opts.connection.connect_timeout = Duration::from_millis(100);
        opts.connection.operation_timeout = Duration::from_millis(300);
        let client = Arc::new(ClientShared::new("pulsar://127.0.0.1:1", opts).unwrap());
        Transaction::with_id(client, TxnId { most: 0, least: 7 }, None)
    }

    #[tokio::test]
    async fn ending_refuses_new_operations_and_waits_for_running_ones() {
        let t = txn();
        let op = t.begin_op().unwrap();
        t.begin_end(TxnState::Committing).unwrap();
        let refused = t.begin_op().err().unwrap();
        assert_eq!(refused.kind(), crate::client::ErrorKind::Transaction);
        let waiting = tokio::spawn({
            let t = t.clone();
            async move { t.wait_for_ops().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        op.finish(&Err::<(), _>(Error::timeout("send")));
        let failed = waiting.await.unwrap().expect("the failure is reported");
        assert!(failed.message().contains("send timed out"));
        assert!(t.begin_end(TxnState::Aborting).is_err());
    }

    #[tokio::test]
    async fn a_commit_that_aborts_keeps_the_code_of_the_failed_operation() {
        let t = txn();
        let op = t.begin_op().unwrap();
        op.finish(&Err::<(), _>(Error::from_server(
            ServerError::TransactionConflict,
            "the message was acknowledged already",
        )));
        // The abort cannot reach a coordinator here; the error is still the ack's.
        let e = t.commit().await.unwrap_err();
        assert_eq!(e.kind(), crate::client::ErrorKind::Transaction);
        assert_eq!(e.server_code(), Some(ServerError::TransactionConflict as i32));
        assert!(
            e.message().contains("an operation in it failed: TransactionConflict"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn deferred_work_waits_for_its_registration_in_order() {
        let t = txn();
        // Nothing listens on port 1: registration fails, and everything queued learns it.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            let tx = tx.clone();
            t.when_registered(
                Scope::Partition("persistent://public/default/t".into()),
                Box::new(move |r| {
                    let _ = tx.send((i, r.is_ok()));
                }),
            );
        }
        for i in 0..3 {
            assert_eq!(rx.recv().await, Some((i, false)));
        }
    }
}
