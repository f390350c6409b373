//! One shared connection per broker address, opened on first use and replaced once closed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::sync::RwLock;

use tokio::sync::Mutex;

use super::auth::AuthProvider;
use super::backoff::Backoff;
use super::connection::{Connection, ConnectionOptions};
use super::stats::{bump, NetCounters};
use super::tls::{TlsConnector, TlsOptions};
use super::url::ServiceUrl;
use super::NetError;

/// The connections of one client.
pub struct ConnectionPool {
    // What every cluster shares (timeouts, listener, SNI proxy); each cluster has its own
    // credentials and TLS files.
    opts: ConnectionOptions,
    // The clusters the pool can use and the one in use: one, unless the client fails over
    // between clusters (`net::failover` moves `current`) or the application switched it.
    clusters: RwLock<Clusters>,
    shut_down: AtomicBool,
    // Per-address locks so two callers wanting the same broker share one dial.
    slots: std::sync::Mutex<HashMap<String, Arc<Mutex<Option<Connection>>>>>,
    // Where to start walking the service hosts; moves on past a host that failed.
    next_host: AtomicUsize,
    /// Connections opened and failed, lookups (see `net::stats`).
    counters: NetCounters,
}

struct Clusters {
    list: Vec<Arc<Cluster>>,
    current: usize,
}

/// One cluster: its service URL, and how its brokers are dialled.
struct Cluster {
    url: ServiceUrl,
    // The pool's options with this cluster's credentials and TLS files.
    opts: ConnectionOptions,
    // Set when the URL is `pulsar+ssl://` or `https://`: then every broker of the cluster,
    // lookup targets included, is dialled with TLS.
    tls: Option<TlsConnector>,
}

impl ConnectionPool {
    /// A pool for the brokers behind `service`. Certificate and key files are read here, so
    /// a bad one fails now, even if the URL does not use TLS.
    pub fn new(service: ServiceUrl, opts: ConnectionOptions) -> Result<Self, NetError> {
        Self::for_clusters(vec![service], opts)
    }

    /// A pool for several clusters sharing `opts`, the first in use (see `net::failover`).
    pub fn for_clusters(clusters: Vec<ServiceUrl>, opts: ConnectionOptions) -> Result<Self, NetError> {
        assert!(!clusters.is_empty(), "a pool needs a service URL");
        let any_tls = clusters.iter().any(|c| c.tls);
        check_sni_proxy(&opts, any_tls)?;
        let tls = tls_connector(&opts, any_tls)?;
        let list = clusters
            .into_iter()
            .map(|url| {
                let tls = tls.clone().filter(|_| url.tls);
                Arc::new(Cluster {
                    url,
                    opts: opts.clone(),
                    tls,
                })
            })
            .collect();
        Ok(ConnectionPool {
            opts,
            clusters: RwLock::new(Clusters { list, current: 0 }),
            shut_down: AtomicBool::new(false),
            slots: Default::default(),
            next_host: AtomicUsize::new(0),
            counters: NetCounters::default(),
        })
    }

    /// Whether connections use TLS (the service URL is `pulsar+ssl://` or `https://`).
    pub fn uses_tls(&self) -> bool {
        self.cluster().url.tls
    }

    /// Whether lookups go to the web service (the service URL is `http://` or `https://`).
    pub fn uses_http(&self) -> bool {
        self.cluster().url.http
    }

    /// The TLS session maker, when the service URL in use is a TLS one.
    pub(crate) fn tls_connector(&self) -> Option<TlsConnector> {
        self.cluster().tls.clone()
    }

    /// Where the credentials of the cluster in use come from.
    pub(crate) fn auth(&self) -> Option<Arc<dyn AuthProvider>> {
        self.cluster().opts.auth.clone()
    }

    /// The cluster in use.
    fn cluster(&self) -> Arc<Cluster> {
        let clusters = self.clusters.read().expect("clusters lock");
        clusters.list[clusters.current].clone()
    }

    /// Which cluster is in use: its index in the list the pool was made with.
    pub fn current_cluster(&self) -> usize {
        self.clusters.read().expect("clusters lock").current
    }

    /// Makes cluster `index` the one in use and closes every connection, so whatever was
    /// attached to the previous cluster reconnects (and looks its topics up) on this one.
    pub fn switch_to(&self, index: usize) {
        {
            let mut clusters = self.clusters.write().expect("clusters lock");
            assert!(index < clusters.list.len(), "no cluster {index}");
            clusters.current = index;
        }
        self.next_host.store(0, Ordering::Relaxed);
        self.close_all();
    }

    /// Replaces the clusters with `service`, whose brokers take `auth` and `tls` (the rest of
    /// the pool's options stay), and closes every connection as `switch_to` does. Nothing is
    /// dialled here: the TLS files are read, and a bad one leaves the pool as it was.
    pub fn replace_cluster(
        &self,
        service: ServiceUrl,
        auth: Option<Arc<dyn AuthProvider>>,
        tls: TlsOptions,
    ) -> Result<(), NetError> {
        let opts = ConnectionOptions {
            auth,
            tls,
            ..self.opts.clone()
        };
        check_sni_proxy(&opts, service.tls)?;
        let cluster = Arc::new(Cluster {
            tls: tls_connector(&opts, service.tls)?,
            url: service,
            opts,
        });
        *self.clusters.write().expect("clusters lock") = Clusters {
            list: vec![cluster],
            current: 0,
        };
        self.next_host.store(0, Ordering::Relaxed);
        self.close_all();
        Ok(())
    }

    /// Whether any host of cluster `index` answers within `timeout`: accepts a TCP
    /// connection, as the C++ client probes, or through an SNI proxy (which accepts every
    /// connection itself) completes a TLS handshake, which only the cluster behind the name can.
    pub(crate) async fn reachable(&self, index: usize, timeout: Duration) -> bool {
        let cluster = self.clusters.read().expect("clusters lock").list[index].clone();
        for host in &cluster.url.hosts {
            let probe = async {
                let tcp = self.opts.dial(host, cluster.url.tls).await?;
                match cluster.tls.as_ref().filter(|_| self.opts.sni_proxy.is_some()) {
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

    /// The connection settings every cluster shares (its credentials and TLS files aside:
    /// see `auth` and `tls_connector`).
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
        let cluster = self.cluster();
        let conn = Connection::connect(dial, &cluster.opts, cluster.tls.as_ref(), proxy_to)
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
            let hosts = self.cluster().url.hosts.clone();
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

/// An SNI proxy routes TLS connections only.
fn check_sni_proxy(opts: &ConnectionOptions, tls: bool) -> Result<(), NetError> {
    if opts.sni_proxy.is_some() && !tls {
        return Err(NetError::TlsConfig(
            "an SNI proxy routes TLS connections: the service URL must be pulsar+ssl:// or https://".into(),
        ));
    }
    Ok(())
}

/// The TLS session maker of `opts` when `tls` is used; its files are read even when it is not,
/// so a bad one fails now.
fn tls_connector(opts: &ConnectionOptions, tls: bool) -> Result<Option<TlsConnector>, NetError> {
    if tls || opts.tls.names_files() {
        Ok(Some(TlsConnector::new(&opts.tls)?).filter(|_| tls))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use tokio::net::TcpListener;

    use super::*;

    /// Accepts (and drops) connections, counting them.
    async fn counting_listener() -> (ServiceUrl, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = ServiceUrl::parse(&format!("pulsar://{}", listener.local_addr().unwrap())).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while listener.accept().await.is_ok() {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        });
        (url, count)
    }

    #[tokio::test]
    async fn a_replaced_cluster_is_dialled_only_when_a_connection_is_needed() {
        let (first, first_dials) = counting_listener().await;
        let (second, second_dials) = counting_listener().await;
        let opts = ConnectionOptions {
            connect_timeout: Duration::from_millis(200),
            ..Default::default()
        };
        let pool = ConnectionPool::new(first, opts).unwrap();
        pool.replace_cluster(second, None, TlsOptions::default()).unwrap();
        let opened = |c: &AtomicU64| c.load(Ordering::SeqCst);
        assert_eq!(opened(&pool.counters().connections_opened), 0);
        assert_eq!(opened(&pool.counters().connections_failed), 0);
        assert_eq!(pool.current_cluster(), 0);

        // The listener drops the connection before the handshake: the dial fails, but it went
        // to the new cluster.
        assert!(pool.get_service().await.is_err());
        assert!(second_dials.load(Ordering::SeqCst) >= 1);
        assert_eq!(first_dials.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_bad_trust_file_leaves_the_cluster_as_it_was() {
        let first = ServiceUrl::parse("pulsar://127.0.0.1:6650").unwrap();
        let pool = ConnectionPool::new(first, ConnectionOptions::default()).unwrap();
        let tls = TlsOptions {
            trust_certs_file: Some("/no/such/ca.pem".into()),
            ..Default::default()
        };
        let second = ServiceUrl::parse("pulsar+ssl://127.0.0.1:6651").unwrap();
        assert!(pool.replace_cluster(second, None, tls).is_err());
        assert!(!pool.uses_tls());
        assert_eq!(pool.cluster().url.hosts, ["127.0.0.1:6650"]);
    }
}
