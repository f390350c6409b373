//! The client of the brokers' transaction coordinators (TCs).
//!
//! A cluster runs one coordinator per partition of [`ASSIGN_TOPIC`]: coordinator `i` lives on
//! the broker that owns partition `i`, so finding it is a topic lookup, and the session with
//! it opens with `TcClientConnect` on that broker's connection. A transaction belongs to the
//! coordinator that created it (its id's most significant bits), so every later request about
//! it goes there.
//!
//! Right after a broker starts its coordinators may not be loaded yet: they answer
//! `TransactionCoordinatorNotFound` or `ServiceNotReady`, or the assign topic has no partitions
//! yet. Those answers, and lost connections and timeouts, are retried with backoff until the
//! operation timeout is spent; anything else fails at once as a transaction error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::client::error::{Error, ErrorKind, Result};
use crate::net::backoff::Backoff;
use crate::net::{lookup, Connection, ConnectionPool, NetError};
use crate::protocol::commands::{self, TxnBits};
use crate::protocol::frame::Frame;
use crate::protocol::pb::{BaseCommand, ServerError, TxnAction};

/// The partitioned topic whose partitions place the coordinators on brokers.
pub const ASSIGN_TOPIC: &str = "persistent://pulsar/system/transaction_coordinator_assign";

/// One coordinator's session: the connection `TcClientConnect` succeeded on.
type Slot = Arc<Mutex<Option<Connection>>>;

/// The coordinators of one client, found on first use.
#[derive(Default)]
pub(crate) struct Coordinators {
    /// One slot per coordinator, index = coordinator id; empty until the count is known.
    slots: Mutex<Vec<Slot>>,
    /// Round robin of new transactions over the coordinators.
    next: AtomicUsize,
}

/// Why one attempt failed, and whether another may succeed.
struct Attempt {
    error: Error,
    retry: bool,
}

impl From<NetError> for Attempt {
    fn from(e: NetError) -> Self {
        let retry = match &e {
            NetError::Server { code, .. } => retriable_code(*code),
            other => matches!(
                other,
                NetError::Connect { .. } | NetError::Io(_) | NetError::Closed(_) | NetError::Timeout(_)
            ),
        };
        Attempt { error: e.into(), retry }
    }
}

/// Codes a coordinator that is still loading (or moved) answers with.
fn retriable_code(code: ServerError) -> bool {
    matches!(
        code,
        ServerError::TransactionCoordinatorNotFound | ServerError::ServiceNotReady | ServerError::TooManyRequests
    )
}

impl Coordinators {
    /// A new transaction with `ttl` (after which the coordinator aborts it), on the next
    /// coordinator in turn.
    pub async fn new_txn(&self, pool: &ConnectionPool, ttl: Duration) -> Result<TxnBits> {
        let ttl_ms = ttl.as_millis().clamp(1, u64::MAX as u128) as u64;
        let deadline = Instant::now() + pool.options().operation_timeout;
        // The coordinator is chosen once, on the first attempt that knows how many there are.
        let picked = std::sync::OnceLock::new();
        let picked = &picked;
        let frame = self
            .retrying(deadline, "new transaction", |this| async move {
                let count = this.count(pool).await?;
                let tc = *picked.get_or_init(|| (this.next.fetch_add(1, Ordering::Relaxed) % count) as u64);
                this.request(pool, tc, deadline, move |rid| commands::new_txn(rid, tc, ttl_ms))
                    .await
            })
            .await?;
        let r = frame
            .command
            .new_txn_response
            .ok_or_else(|| Error::transaction("the coordinator's NewTxnResponse has no body"))?;
        match (r.txnid_most_bits, r.txnid_least_bits) {
            (Some(most), Some(least)) => Ok((most, least)),
            _ => Err(Error::transaction(
                "the coordinator's NewTxnResponse carries no transaction id",
            )),
        }
    }

    /// Opens (or finds open) a session with every coordinator; their connections, by id.
    pub(super) async fn open_all(&self, pool: &ConnectionPool, deadline: Instant) -> Result<Vec<Connection>> {
        self.retrying(deadline, "reaching the transaction coordinators", |this| async move {
            let count = this.count(pool).await?;
            let mut conns = Vec::with_capacity(count);
            for tc in 0..count as u64 {
                conns.push(this.session(pool, tc, deadline).await?);
            }
            Ok(conns)
        })
        .await
    }

    /// Checks that the coordinator of `txn` can be reached (a resumed transaction).
    pub async fn reach(&self, pool: &ConnectionPool, txn: TxnBits) -> Result<()> {
        let deadline = Instant::now() + pool.options().operation_timeout;
        self.retrying(deadline, "reaching the transaction's coordinator", |this| async move {
            let count = this.count(pool).await?;
            if txn.0 as usize >= count {
                return Err(Attempt {
                    error: Error::transaction(format!(
                        "transaction ({}, {}) names coordinator {}, but there are {count}",
                        txn.0, txn.1, txn.0
                    )),
                    retry: false,
                });
            }
            this.session(pool, txn.0, deadline).await.map(|_| ())
        })
        .await
    }

    /// Registers `partition` (a topic partition's full name) as produced to by `txn`.
    pub async fn add_partition(&self, pool: &ConnectionPool, txn: TxnBits, partition: &str) -> Result<()> {
        let what = format!("adding {partition} to the transaction");
        self.on_txn(pool, txn, &what, |rid| {
            commands::add_partition_to_txn(rid, txn, vec![partition.to_string()])
        })
        .await
    }

    /// Registers `subscription` of `topic` as acknowledged on by `txn`.
    pub async fn add_subscription(
        &self,
        pool: &ConnectionPool,
        txn: TxnBits,
        topic: &str,
        subscription: &str,
    ) -> Result<()> {
        let what = format!("adding subscription {subscription} of {topic} to the transaction");
        self.on_txn(pool, txn, &what, |rid| {
            commands::add_subscription_to_txn(rid, txn, topic, subscription)
        })
        .await
    }

    /// Commits or aborts `txn`.
    pub async fn end(&self, pool: &ConnectionPool, txn: TxnBits, action: TxnAction) -> Result<()> {
        let what = match action {
            TxnAction::Commit => "commit",
            TxnAction::Abort => "abort",
        };
        self.on_txn(pool, txn, what, |rid| commands::end_txn(rid, txn, action))
            .await
    }

    /// A request about `txn` to its coordinator, retried as the module says.
    async fn on_txn(
        &self,
        pool: &ConnectionPool,
        txn: TxnBits,
        what: &str,
        build: impl Fn(u64) -> BaseCommand + Clone,
    ) -> Result<()> {
        let deadline = Instant::now() + pool.options().operation_timeout;
        self.retrying(deadline, what, |this| {
            let build = build.clone();
            async move {
                this.count(pool).await?;
                this.request(pool, txn.0, deadline, build).await
            }
        })
        .await
        .map(|_| ())
    }

    /// Runs `attempt` until it succeeds, fails for good, or the next try would pass `deadline`.
    async fn retrying<'a, T, F, Fut>(&'a self, deadline: Instant, what: &str, mut attempt: F) -> Result<T>
    where
        F: FnMut(&'a Self) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, Attempt>>,
    {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        loop {
            match attempt(self).await {
                Ok(v) => return Ok(v),
                Err(Attempt { error, retry }) => {
                    let delay = backoff.next_delay();
                    if !retry || Instant::now() + delay >= deadline {
                        return Err(if error.kind() == ErrorKind::Transaction {
                            error.into_transaction(what)
                        } else {
                            error.into_transaction(&format!("{what} failed"))
                        });
                    }
                    log::debug!("{what}: {error}; retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// How many coordinators the cluster runs. An assign topic without partitions (not created
    /// yet, right after the broker started) is retried, and never remembered.
    async fn count(&self, pool: &ConnectionPool) -> std::result::Result<usize, Attempt> {
        let mut slots = self.slots.lock().await;
        if slots.is_empty() {
            let n = lookup::partition_count(pool, ASSIGN_TOPIC).await?;
            if n == 0 {
                return Err(Attempt {
                    error: Error::transaction(format!(
                        "{ASSIGN_TOPIC} has no partitions: the broker's transaction coordinator is not \
                         ready or not enabled (transactionCoordinatorEnabled=true)"
                    )),
                    retry: true,
                });
            }
            slots.extend((0..n).map(|_| Slot::default()));
        }
        Ok(slots.len())
    }

    /// The connection of coordinator `tc`, opening its session if there is none.
    async fn session(
        &self,
        pool: &ConnectionPool,
        tc: u64,
        deadline: Instant,
    ) -> std::result::Result<Connection, Attempt> {
        let slot = self
            .slots
            .lock()
            .await
            .get(tc as usize)
            .cloned()
            .ok_or_else(|| Attempt {
                error: Error::transaction(format!("no transaction coordinator {tc}")),
                retry: false,
            })?;
        let mut slot = slot.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(conn.clone());
        }
        let conn = lookup::lookup_topic(pool, &format!("{ASSIGN_TOPIC}-partition-{tc}")).await?;
        exchange(&conn, deadline, |rid| commands::tc_client_connect(rid, tc)).await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// One request to coordinator `tc`; a connection that failed or a coordinator that moved
    /// is forgotten, so the next attempt looks it up again.
    async fn request(
        &self,
        pool: &ConnectionPool,
        tc: u64,
        deadline: Instant,
        build: impl FnOnce(u64) -> BaseCommand,
    ) -> std::result::Result<Frame, Attempt> {
        let conn = self.session(pool, tc, deadline).await?;
        let result = exchange(&conn, deadline, build).await;
        if let Err(Attempt { retry: true, .. }) = &result {
            if let Some(slot) = self.slots.lock().await.get(tc as usize) {
                *slot.lock().await = None;
            }
        }
        result
    }
}

/// Sends one request and reads the error its answer may carry in its own body.
async fn exchange(
    conn: &Connection,
    deadline: Instant,
    build: impl FnOnce(u64) -> BaseCommand,
) -> std::result::Result<Frame, Attempt> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    let frame = conn
        .request_with_timeout(left.min(conn.operation_timeout()), build)
        .await?;
    match commands::txn_response_error(&frame.command) {
        None => Ok(frame),
        Some((code, message)) => Err(NetError::refused(Some(code), Some(message), "").into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loading_coordinator_is_retried_and_a_refusal_is_not() {
        let not_found = NetError::Server {
            code: ServerError::TransactionCoordinatorNotFound,
            message: String::new(),
        };
        assert!(Attempt::from(not_found).retry);
        assert!(Attempt::from(NetError::Timeout("request")).retry);
        let refused = Attempt::from(NetError::Server {
            code: ServerError::InvalidTxnStatus,
            message: "committed".into(),
        });
        assert!(!refused.retry);
        assert_eq!(refused.error.kind(), ErrorKind::Transaction);
    }
}
