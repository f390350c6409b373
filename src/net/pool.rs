//! One shared connection per broker address, opened on first use and replaced once closed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::backoff::Backoff;
use super::connection::{Connection, ConnectionOptions};
use super::stats::{bump, NetCounters};
use super::tls::TlsConnector;
use super::url::ServiceUrl;
use super::NetError;

/// The connections of one client.
pub struct ConnectionPool {
    opts: ConnectionOptions,
    // The service URL of each cluster (one, unless the client fails over between clusters)
    // and the one in use (`net::failover` moves it).
    clusters: Vec<ServiceUrl>,
    current: AtomicUsize,
    shut_down: AtomicBool,
    // Set when a cluster's URL is `pulsar+ssl://` or `https://`; used for the clusters whose URL
    // is: then every broker, lookup targets included, is dialled with TLS.
    tls: Option<TlsConnector>,
    // Per-address locks so two callers wanting the same broker share one dial.
    slots: std::sync::Mutex<HashMap<String, Arc<Mutex<Option<Connection>>>>>,
    // Where to start walking the service hosts; moves on past a host that failed.
    next_host: AtomicUsize,
    /// Connections opened and failed, lookups (see `net::stats`).
    counters: NetCounters,
}

impl ConnectionPool {
    /// A pool for the brokers behind `service`. Certificate and key files are read here, so
    /// a bad one fails now, even if the URL does not use TLS.
    pub fn new(service: ServiceUrl, opts: ConnectionOptions) -> Result<Self, NetError> {
        Self::for_clusters(vec![service], opts)
    }

    /// A pool for several clusters, the first in use (see `net::failover`).
    pub fn for_clusters(clusters: Vec<ServiceUrl>, opts: ConnectionOptions) -> Result<Self, NetError> {
        assert!(!clusters.is_empty(), "a pool needs a service URL");
        let any_tls = clusters.iter().any(|c| c.tls);
        if opts.sni_proxy.is_some() && !any_tls {
            return Err(NetError::TlsConfig(
                "an SNI proxy routes TLS connections: the service URL must be pulsar+ssl:// or https://".into(),
            ));
        }
        let tls = if any_tls || opts.tls.names_files() {
            Some(TlsConnector::new(&opts.tls)?)
        } else {
            None
        };
        Ok(ConnectionPool {
            tls: tls.filter(|_| any_tls),
            opts,
            clusters,
            current: AtomicUsize::new(0),
            shut_down: AtomicBool::new(false),
            slots: Default::default(),
            next_host: AtomicUsize::new(0),
            counters: NetCounters::default(),
        })
    }

    /// Whether connections use TLS (the service URL is `pulsar+ssl://` or `https://`).
    pub fn uses_tls(&self) -> bool {
        self.service().tls
    }

    /// Whether lookups go to the web service (the service URL is `http://` or `https://`).
    pub fn uses_http(&self) -> bool {
        self.service().http
    }

    /// The TLS session maker, when the service URL in use is a TLS one.
    pub(crate) fn tls_connector(&self) -> Option<&TlsConnector> {
        self.tls.as_ref().filter(|_| self.uses_tls())
    }

    /// The service URL in use.
    fn service(&self) -> &ServiceUrl {
        &self.clusters[self.current_cluster()]
    }

    /// Which cluster is in use: its index in the list the pool was made with.
    pub fn current_cluster(&self) -> usize {
        self.current.load(Ordering::Acquire)
    }

    /// Makes cluster `index` the one in use and closes every connection, so whatever was
    /// attached to the previous cluster reconnects (and looks its topics up) on this one.
    pub fn switch_to(&self, index: usize) {
        assert!(index < self.clusters.len(), "no cluster {index}");
        self.current.store(index, Ordering::Release);
        self.next_host.store(0, Ordering::Relaxed);
        self.close_all();
    }

    /// Whether any host of `service` answers within `timeout`: accepts a TCP connection, as
    /// the C++ client probes, or through an SNI proxy (which accepts every connection itself)
    /// completes a TLS handshake, which only the cluster behind the name can.
    pub(crate) async fn reachable(&self, service: &ServiceUrl, timeout: Duration) -> bool {
        for host in &service.hosts {
            let probe = async {
                let tcp = self.opts.dial(host, service.tls).await?;
                match self
                    .tls
                    .as_ref()
                    .filter(|_| service.tls && self.opts.sni_proxy.is_some())
                {
                    Some(tls) => tls.connect(host, tcp).await.map(drop),
                    None => Ok(()),
                }
            };
            if let Ok(Ok(())) = tokio::time::timeout(timeout, probe).await {
                return true;
            }
        }
        false
    }

    /// Stops the failover watcher (the client is closing).
    pub fn shut_down(&self) {
        self.shut_down.store(true, Ordering::Release);
    }

    /// Whether `shut_down` was called.
    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    /// The connection settings.
    pub fn options(&self) -> &ConnectionOptions {
        &self.opts
    }

    /// The open connection to `addr`, dialling it if there is none.
    pub async fn get(&self, addr: &str) -> Result<Connection, NetError> {
        self.get_via(addr, None).await
    }

    /// The open connection to the broker `addr`, through the Pulsar proxy `proxy` when given
    /// (a lookup answered `proxyThroughServiceUrl`): the socket goes to the proxy and
    /// `Connect` names the broker, as the Java and C++ clients do.
    pub async fn get_via(&self, addr: &str, proxy: Option<&str>) -> Result<Connection, NetError> {
        let key = match proxy {
            Some(p) => format!("{addr} via {p}"),
            None => addr.to_string(),
        };
        let slot = {
            let mut slots = self.slots.lock().expect("pool lock");
            slots.entry(key).or_default().clone()
        };
        let mut slot = slot.lock().await;
        if let Some(conn) = slot.as_ref() {
            if !conn.is_closed() {
                return Ok(conn.clone());
            }
        }
        let (dial, proxy_to) = match proxy {
            Some(p) => (p, Some(addr)),
            None => (addr, None),
        };
        let conn = Connection::connect(dial, &self.opts, self.tls_connector(), proxy_to)
            .await
            .inspect_err(|_| bump(&self.counters.connections_failed))?;
        bump(&self.counters.connections_opened);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// A connection to any host of the (binary) service URL, trying them in turn.
    pub async fn get_service(&self) -> Result<Connection, NetError> {
        self.on_service_hosts(|host| async move { self.get(&host).await }).await
    }

    /// `attempt` on the hosts of the service URL in turn until one succeeds; a round through
    /// every host that fails backs off before the next, until the connect timeout's budget is
    /// spent. A failure that retrying cannot mend (a refused credential) ends it at once.
    pub(crate) async fn on_service_hosts<T, F, Fut>(&self, mut attempt: F) -> Result<T, NetError>
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = Result<T, NetError>>,
    {
        let deadline = tokio::time::Instant::now() + self.opts.connect_timeout;
        let mut backoff = Backoff::default_reconnect();
        loop {
            // Read each round: a failover may have switched clusters meanwhile.
            let hosts = self.service().hosts.clone();
            let mut last_err = None;
            for _ in 0..hosts.len() {
                let i = self.next_host.load(Ordering::Relaxed) % hosts.len();
                match attempt(hosts[i].clone()).await {
                    Ok(c) => return Ok(c),
                    Err(e) => {
                        if !e.is_retriable() {
                            return Err(e);
                        }
                        log::warn!("cannot reach {}: {e}", hosts[i]);
                        self.next_host.fetch_add(1, Ordering::Relaxed);
                        last_err = Some(e);
                    }
                }
            }
            let delay = backoff.next_delay();
            if tokio::time::Instant::now() + delay >= deadline {
                return Err(last_err.expect("at least one host"));
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// The pool's counters.
    pub fn counters(&self) -> &NetCounters {
        &self.counters
    }

    /// Connections open now (a slot busy dialling counts as open).
    pub fn open_connections(&self) -> u64 {
        let slots = self.slots.lock().expect("pool lock");
        let open = slots.values().filter(|slot| match slot.try_lock() {
            Ok(guard) => guard.as_ref().is_some_and(|c| !c.is_closed()),
            Err(_) => true,
        });
        open.count() as u64
    }

    /// Closes every connection.
    pub fn close_all(&self) {
        let slots = std::mem::take(&mut *self.slots.lock().expect("pool lock"));
        for (_, slot) in slots {
            if let Ok(guard) = slot.try_lock() {
                if let Some(c) = guard.as_ref() {
                    c.close();
                }
            }
        }
    }
}
