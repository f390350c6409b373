//! The client: a connection pool plus the id counters and limits its producers and consumers
//! share.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::consumer::{Consumer, TopicSelection};
use super::error::{Error, Result};
use super::options::{ClientOptions, ConsumerOptions, ProducerOptions};
use super::producer::Producer;
use super::topic::TopicName;
use crate::net::url::ServiceUrl;
use crate::net::{lookup, ConnectionPool};

/// Closes one producer or consumer when the client closes.
pub(crate) type Closer = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

pub(crate) struct ClientInner {
    pub pool: ConnectionPool,
    pub opts: ClientOptions,
    next_producer_id: AtomicU64,
    next_consumer_id: AtomicU64,
    closed: AtomicBool,
    pub memory: super::producer::MemoryLimit,
    closers: Mutex<Vec<Closer>>,
    /// Whether each live producer or consumer is attached (`None` once it is gone).
    probes: Mutex<Vec<Probe>>,
}

/// Reports whether one producer or consumer is attached, or `None` once it is dropped.
pub(crate) type Probe = Box<dyn Fn() -> Option<bool> + Send>;

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

impl ClientInner {
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

    /// Registers how to tell whether a producer or consumer is attached.
    pub fn add_probe(&self, probe: Probe) {
        self.probes.lock().expect("probes lock").push(probe);
    }

    /// Registers what to do to a producer or consumer when the client closes.
    pub fn on_close(&self, f: Closer) {
        self.closers.lock().expect("closers lock").push(f);
    }
}

/// A Pulsar client: shares connections among its producers and consumers.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

impl Client {
    /// A client for `service_url` (`pulsar://host:port[,host:port]`, or `pulsar+ssl://` for
    /// TLS). Nothing connects until a producer, consumer or lookup needs it, but TLS files are
    /// read now.
    pub fn new(service_url: &str, opts: ClientOptions) -> Result<Client> {
        let service = ServiceUrl::parse(service_url)?;
        let pool = ConnectionPool::new(service, opts.connection.clone())?;
        let memory = super::producer::MemoryLimit::new(opts.memory_limit);
        Ok(Client {
            inner: Arc::new(ClientInner {
                pool,
                opts,
                next_producer_id: AtomicU64::new(0),
                next_consumer_id: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                memory,
                closers: Mutex::new(Vec::new()),
                probes: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Creates a producer; looks the topic up and attaches before returning.
    pub async fn create_producer(&self, topic: &str, opts: ProducerOptions) -> Result<Producer> {
        self.inner.check_open()?;
        opts.validate()?;
        let topic = TopicName::parse(topic)?;
        Producer::create(self.inner.clone(), topic, opts).await
    }

    /// Subscribes to one topic, a list, or a pattern; attaches before returning.
    pub async fn subscribe(
        &self,
        topics: TopicSelection,
        subscription: &str,
        opts: ConsumerOptions,
    ) -> Result<Consumer> {
        self.inner.check_open()?;
        opts.validate()?;
        if subscription.is_empty() {
            return Err(Error::invalid("subscription name must not be empty"));
        }
        Consumer::create(self.inner.clone(), topics, subscription.to_string(), opts).await
    }

    /// Number of partitions of `topic` (0 when not partitioned).
    pub async fn partition_count(&self, topic: &str) -> Result<u32> {
        self.inner.check_open()?;
        let topic = TopicName::parse(topic)?;
        Ok(lookup::partition_count(&self.inner.pool, topic.as_str()).await?)
    }

    /// Closes every producer and consumer, then the connections. Idempotent.
    pub async fn close(&self) {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let closers = std::mem::take(&mut *self.inner.closers.lock().expect("closers lock"));
        // Close everything at once: each close is bounded, and one slow topic must not make
        // the others wait.
        let handles: Vec<_> = closers.into_iter().map(|close| tokio::spawn(close())).collect();
        for h in handles {
            let _ = h.await;
        }
        self.inner.pool.close_all();
    }

    /// The connection state: closed, idle (nothing created yet), connecting (some producer or
    /// consumer is reattaching), or connected.
    pub fn state(&self) -> ClientState {
        if self.inner.is_closed() {
            return ClientState::Closed;
        }
        let mut probes = self.inner.probes.lock().expect("probes lock");
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

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}
