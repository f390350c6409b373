//! What a client's producers and consumers share with it: the connection pool, the options,
//! the id counters, the memory budget, and the hooks that close and probe them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::error::{Error, Result};
use super::memory::MemoryLimit;
use super::options::ClientOptions;
use super::transaction::coordinator::Coordinators;
use crate::net::failover::{self, FailoverPolicy};
use crate::net::url::ServiceUrl;
use crate::net::ConnectionPool;

/// What the client needs of a producer or consumer it follows.
pub(crate) trait Tracked: Send + Sync + 'static {
    /// Whether it is attached to its brokers; `None` once it is closed.
    fn attached(self: Arc<Self>) -> Option<bool>;
    /// Closes it (outcome aside: the client is closing).
    fn close(self: Arc<Self>) -> impl Future<Output = ()> + Send;
    /// Its periodic statistics line (`stats_interval`): the logger target and the text.
    fn stats_line(self: Arc<Self>) -> (&'static str, String);
}

/// `Tracked` for the shared state `$shared` of the handle `$handle { inner }`, through the
/// handle's own `is_closed`, `is_connected` and `close`, and `$line` for its statistics.
macro_rules! tracked_through_handle {
    ($shared:ty, $handle:ident, $line:path) => {
        impl $crate::client::shared::Tracked for $shared {
            fn attached(self: Arc<Self>) -> Option<bool> {
                let handle = $handle { inner: self };
                (!handle.is_closed()).then(|| handle.is_connected())
            }

            async fn close(self: Arc<Self>) {
                let _ = ($handle { inner: self }).close().await;
            }

            fn stats_line(self: Arc<Self>) -> (&'static str, String) {
                $line(&$handle { inner: self })
            }
        }
    };
}
pub(crate) use tracked_through_handle;

/// Closes one producer or consumer when the client closes.
type Closer = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Owned by the client; every producer, consumer and partition actor holds a reference.
pub(crate) struct ClientShared {
    pub pool: Arc<ConnectionPool>,
    pub opts: ClientOptions,
    next_producer_id: AtomicU64,
    next_consumer_id: AtomicU64,
    closed: AtomicBool,
    pub memory: MemoryLimit,
    /// The transaction coordinators, found when the first transaction needs them.
    pub coordinators: Coordinators,
    closers: Mutex<Vec<Closer>>,
    /// Whether each live producer or consumer is attached (`None` once it is gone).
    probes: Mutex<Vec<Probe>>,
    /// Statistics lines of the live producers and consumers (`None` once one is gone).
    reporters: Mutex<Vec<Reporter>>,
    stats_log_started: AtomicBool,
}

/// The client's connection state, as users observe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// No producer or consumer yet (nothing to connect).
    Idle,
    /// Some producer or consumer is (re)connecting.
    Connecting,
    /// Every producer and consumer is attached to its broker.
    Connected,
    /// `close()` was called.
    Closed,
}

impl ClientState {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ClientState::Idle => "idle",
            ClientState::Connecting => "connecting",
            ClientState::Connected => "connected",
            ClientState::Closed => "closed",
        }
    }
}

/// Reports whether one producer or consumer is attached, or `None` once it is dropped.
type Probe = Box<dyn Fn() -> Option<bool> + Send>;
/// One producer's or consumer's statistics line, or `None` once it is dropped.
type Reporter = Box<dyn Fn() -> Option<(&'static str, String)> + Send>;

impl ClientShared {
    /// The shared state of a client for `service_url`; reads TLS files, connects nothing.
    /// With failover options it starts the watcher that probes the clusters, which needs to
    /// be called within the tokio runtime.
    pub fn new(service_url: &str, opts: ClientOptions) -> Result<ClientShared> {
        let service = ServiceUrl::parse(service_url)?;
        let pool = match &opts.failover {
            None => Arc::new(ConnectionPool::new(service, opts.connection.clone())?),
            Some(f) => {
                if f.secondaries.is_empty() {
                    return Err(Error::invalid(
                        "cluster failover needs at least one secondary service URL",
                    ));
                }
                if f.check_interval.is_zero() {
                    return Err(Error::invalid("the failover check interval must be positive"));
                }
                let secondaries = f
                    .secondaries
                    .iter()
                    .map(|u| ServiceUrl::parse(u))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let policy = FailoverPolicy {
                    secondaries: secondaries.clone(),
                    check_interval: f.check_interval,
                    failover_delay: f.failover_delay,
                    switch_back_delay: f.switch_back_delay,
                };
                let runtime = tokio::runtime::Handle::try_current()
                    .map_err(|_| Error::invalid("a failover client must be made within the tokio runtime"))?;
                let mut clusters = vec![service.clone()];
                clusters.extend(secondaries);
                let pool = Arc::new(ConnectionPool::for_clusters(clusters, opts.connection.clone())?);
                runtime.spawn(failover::watch(Arc::downgrade(&pool), service, policy));
                pool
            }
        };
        let memory = MemoryLimit::new(opts.memory_limit);
        Ok(ClientShared {
            pool,
            opts,
            next_producer_id: AtomicU64::new(0),
            next_consumer_id: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            memory,
            coordinators: Default::default(),
            closers: Mutex::new(Vec::new()),
            probes: Mutex::new(Vec::new()),
            reporters: Mutex::new(Vec::new()),
            stats_log_started: AtomicBool::new(false),
        })
    }

    pub fn next_producer_id(&self) -> u64 {
        self.next_producer_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn next_consumer_id(&self) -> u64 {
        self.next_consumer_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(Error::closed("client"))
        } else {
            Ok(())
        }
    }

    /// Follows a producer or consumer, without keeping it alive: the client's state counts
    /// whether it is attached, and closing the client closes it.
    pub fn track<T: Tracked>(self: &Arc<Self>, handle: &Arc<T>) {
        let weak = Arc::downgrade(handle);
        let reporter: Reporter = Box::new(move || weak.upgrade().map(T::stats_line));
        self.reporters.lock().expect("reporters lock").push(reporter);
        let every = self.opts.stats_interval;
        if !every.is_zero() && !self.stats_log_started.swap(true, Ordering::AcqRel) {
            tokio::spawn(log_periodically(Arc::downgrade(self), every));
        }
        let probe = Arc::downgrade(handle);
        let probe: Probe = Box::new(move || probe.upgrade().and_then(T::attached));
        self.probes.lock().expect("probes lock").push(probe);
        let weak = Arc::downgrade(handle);
        let closer: Closer = Box::new(move || {
            Box::pin(async move {
                if let Some(handle) = weak.upgrade() {
                    handle.close().await;
                }
            })
        });
        self.closers.lock().expect("closers lock").push(closer);
    }

    /// Logs one statistics line per live producer and consumer (at info level).
    pub fn log_stats(&self) {
        let mut reporters = self.reporters.lock().expect("reporters lock");
        reporters.retain(|r| match r() {
            Some((target, line)) => {
                log::info!(target: target, "{line}");
                true
            }
            None => false,
        });
    }

    /// Closes every producer and consumer, then the connections. Idempotent.
    pub async fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let closers = std::mem::take(&mut *self.closers.lock().expect("closers lock"));
        // Close everything at once: each close is bounded, and one slow topic must not make
        // the others wait.
        let handles: Vec<_> = closers.into_iter().map(|close| tokio::spawn(close())).collect();
        for h in handles {
            let _ = h.await;
        }
        self.pool.shut_down();
        self.pool.close_all();
    }

    /// Closed, idle (nothing created yet), connecting (some producer or consumer is
    /// reattaching), or connected.
    pub fn state(&self) -> ClientState {
        if self.is_closed() {
            return ClientState::Closed;
        }
        let mut probes = self.probes.lock().expect("probes lock");
        let mut seen = false;
        let mut all = true;
        probes.retain(|p| match p() {
            Some(up) => {
                seen = true;
                all &= up;
                true
            }
            None => false,
        });
        match (seen, all) {
            (false, _) => ClientState::Idle,
            (true, true) => ClientState::Connected,
            (true, false) => ClientState::Connecting,
        }
    }
}

/// Logs every producer's and consumer's line each `every` until the client is gone or closed.
async fn log_periodically(client: Weak<ClientShared>, every: Duration) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match client.upgrade() {
            Some(c) if !c.is_closed() => c.log_stats(),
            _ => return,
        }
    }
}
