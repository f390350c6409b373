//! One shared connection per broker address, opened on first use and replaced once closed.
//!
//! The cluster behind the pool can change (`switch_to` for failover, `replace_cluster` for an
//! application's switch), and so can the whole set of connections (`close_all`). Each change
//! starts a new generation; an operation pins the generation it starts in ([`ClusterView`]) and
//! uses that cluster's hosts, credentials and TLS files throughout, so a lookup answered by
//! one cluster is never followed with the next one's credentials, and a dial that completes
//! after the change is closed rather than handed out.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

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
    // Lock order: `clusters`, then `slots`, then a slot's `conn`; none is held across an await.
    clusters: RwLock<Clusters>,
    shut_down: AtomicBool,
    // The connections of the current generation, by address.
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    // Where to start walking the service hosts; moves on past a host that failed.
    next_host: AtomicUsize,
    /// Connections opened and failed, lookups (see `net::stats`).
    counters: NetCounters,
}

struct Clusters {
    list: Vec<Arc<Cluster>>,
    current: usize,
    // Bumped by every switch and by `close_all`; `slots` holds this generation's connections.
    generation: u64,
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

/// The connection to one address.
#[derive(Default)]
struct Slot {
    // Held while dialling, so two callers wanting the same broker share one dial.
    dial: tokio::sync::Mutex<()>,
    // Never held across an await, so `close_all` can always reach the connection.
    conn: Mutex<Option<Connection>>,
}

impl Slot {
    fn open(&self) -> Option<Connection> {
        self.conn.lock().expect("slot lock").clone().filter(|c| !c.is_closed())
    }
}

/// The cluster in use when an operation began, and the generation it belonged to. Every step
/// of the operation (a lookup, its redirects, the dial of the broker it names) goes to this
/// cluster with its credentials, and fails as a closed connection (retriable: the caller looks
/// up again) once the pool has moved on.
#[derive(Clone)]
pub struct ClusterView {
    generation: u64,
    cluster: Arc<Cluster>,
}

impl ClusterView {
    /// Whether connections use TLS (the service URL is `pulsar+ssl://` or `https://`).
    pub fn uses_tls(&self) -> bool {
        self.cluster.url.tls
    }

    /// Whether lookups go to the web service (the service URL is `http://` or `https://`).
    pub fn uses_http(&self) -> bool {
        self.cluster.url.http
    }

    /// The TLS session maker, when the service URL is a TLS one.
    pub(crate) fn tls_connector(&self) -> Option<&TlsConnector> {
        self.cluster.tls.as_ref()
    }

    /// Where the cluster's credentials come from.
    pub(crate) fn auth(&self) -> Option<&Arc<dyn AuthProvider>> {
        self.cluster.opts.auth.as_ref()
    }
}

/// Why an operation pinned to an older generation stops.
fn moved_on(addr: &str) -> NetError {
    NetError::Closed(format!(
        "{addr}: the client switched clusters or closed its connections meanwhile"
    ))
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
            clusters: RwLock::new(Clusters {
                list,
                current: 0,
                generation: 0,
            }),
            shut_down: AtomicBool::new(false),
            slots: Default::default(),
            next_host: AtomicUsize::new(0),
            counters: NetCounters::default(),
        })
    }

    /// The cluster in use now, for an operation to pin.
    pub fn view(&self) -> ClusterView {
        let clusters = self.clusters.read().expect("clusters lock");
        ClusterView {
            generation: clusters.generation,
            cluster: clusters.list[clusters.current].clone(),
        }
    }

    fn is_current(&self, view: &ClusterView) -> bool {
        self.clusters.read().expect("clusters lock").generation == view.generation
    }

    /// Which cluster is in use: its index in the list the pool was made with.
    pub fn current_cluster(&self) -> usize {
        self.clusters.read().expect("clusters lock").current
    }

    /// Makes cluster `index` the one in use and closes every connection, so whatever was
    /// attached to the previous cluster reconnects (and looks its topics up) on this one.
    pub fn switch_to(&self, index: usize) {
        self.next_generation(|clusters| {
            assert!(index < clusters.list.len(), "no cluster {index}");
            clusters.current = index;
        });
        self.next_host.store(0, Ordering::Relaxed);
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
        self.next_generation(|clusters| {
            clusters.list = vec![cluster];
            clusters.current = 0;
        });
        self.next_host.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// Applies `change`, starts a new generation and closes the connections of the previous
    /// one. The slots are taken under the same write lock as the generation moves, so a dial
    /// of the old generation finds it gone when it completes (and closes what it opened).
    fn next_generation(&self, change: impl FnOnce(&mut Clusters)) {
        let old = {
            let mut clusters = self.clusters.write().expect("clusters lock");
            change(&mut clusters);
            clusters.generation += 1;
            std::mem::take(&mut *self.slots.lock().expect("pool lock"))
        };
        for slot in old.values() {
            if let Some(c) = slot.conn.lock().expect("slot lock").as_ref() {
                c.close();
            }
        }
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

    /// Stops the failover watcher, and any dial (the client is closing): a lookup under way
    /// ends rather than opening connections nobody will close.
    pub fn shut_down(&self) {
        self.shut_down.store(true, Ordering::Release);
    }

    /// Whether `shut_down` was called.
    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    /// The connection settings every cluster shares (its credentials and TLS files aside:
    /// see [`ClusterView`]).
    pub fn options(&self) -> &ConnectionOptions {
        &self.opts
    }

    /// The open connection to `addr` of `view`'s cluster, dialling it if there is none.
    pub async fn get(&self, view: &ClusterView, addr: &str) -> Result<Connection, NetError> {
        self.get_via(view, addr, None).await
    }

    /// The open connection to the broker `addr` of `view`'s cluster, through the Pulsar proxy
    /// `proxy` when given (a lookup answered `proxyThroughServiceUrl`): the socket goes to the
    /// proxy and `Connect` names the broker, as the Java and C++ clients do. Fails (retriably)
    /// once the pool has moved on from `view`'s generation.
    pub async fn get_via(&self, view: &ClusterView, addr: &str, proxy: Option<&str>) -> Result<Connection, NetError> {
        let key = match proxy {
            Some(p) => format!("{addr} via {p}"),
            None => addr.to_string(),
        };
        let slot = {
            let clusters = self.clusters.read().expect("clusters lock");
            if clusters.generation != view.generation || self.is_shut_down() {
                return Err(moved_on(addr));
            }
            let mut slots = self.slots.lock().expect("pool lock");
            if !slots.contains_key(&key) {
                // Brokers come and go (a rolling restart gives new addresses): a new address
                // is the moment to forget the dead ones nobody is dialling.
                slots.retain(|_, s| Arc::strong_count(s) > 1 || s.open().is_some());
            }
            slots.entry(key).or_default().clone()
        };
        let _dialling = slot.dial.lock().await;
        if let Some(conn) = slot.open() {
            return if self.is_current(view) {
                Ok(conn)
            } else {
                Err(moved_on(addr))
            };
        }
        let (dial, proxy_to) = match proxy {
            Some(p) => (p, Some(addr)),
            None => (addr, None),
        };
        let cluster = &view.cluster;
        // Boxed: dialling (TCP, TLS handshake, Connect) is the big part of this future, and
        // every lookup, every create and every reattach awaits this one, though they dial only
        // when no connection is open (issue 31: a consumer's creation was a 113 KB task).
        let conn = Box::pin(Connection::connect(dial, &cluster.opts, cluster.tls.as_ref(), proxy_to))
            .await
            .inspect_err(|_| bump(&self.counters.connections_failed))?;
        bump(&self.counters.connections_opened);
        // Stored under the read lock: a switch either took this slot before (and the
        // connection closes here) or takes it after (and closes the connection itself).
        let clusters = self.clusters.read().expect("clusters lock");
        if clusters.generation != view.generation || self.is_shut_down() {
            conn.close();
            return Err(moved_on(addr));
        }
        *slot.conn.lock().expect("slot lock") = Some(conn.clone());
        Ok(conn)
    }

    /// A connection to any host of the (binary) service URL, trying them in turn; `view`
    /// follows a switch that happens meanwhile (nothing was asked of the old cluster yet).
    pub async fn get_service(&self, view: &mut ClusterView) -> Result<Connection, NetError> {
        self.on_service_hosts(view, |view, host| async move { self.get(&view, &host).await })
            .await
    }

    /// `attempt` on the hosts of `view`'s service URL in turn until one succeeds; a round
    /// through every host that fails backs off before the next, until the connect timeout's
    /// budget is spent. A failure that retrying cannot mend (a refused credential) ends it at
    /// once. A switch meanwhile moves `view` (and the attempts) to the new cluster: callers
    /// use nothing of the old one before this returns.
    pub(crate) async fn on_service_hosts<T, F, Fut>(
        &self,
        view: &mut ClusterView,
        mut attempt: F,
    ) -> Result<T, NetError>
    where
        F: FnMut(ClusterView, String) -> Fut,
        Fut: Future<Output = Result<T, NetError>>,
    {
        let deadline = tokio::time::Instant::now() + self.opts.connect_timeout;
        let mut backoff = Backoff::default_reconnect();
        'rounds: loop {
            if !self.is_current(view) {
                *view = self.view();
            }
            let hosts = view.cluster.url.hosts.clone();
            let mut last_err = None;
            for _ in 0..hosts.len() {
                let i = self.next_host.load(Ordering::Relaxed) % hosts.len();
                match attempt(view.clone(), hosts[i].clone()).await {
                    Ok(c) => return Ok(c),
                    Err(e) if self.is_shut_down() => return Err(e),
                    Err(_) if !self.is_current(view) => continue 'rounds,
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
        let open = slots
            .values()
            .filter(|slot| slot.dial.try_lock().is_err() || slot.open().is_some());
        open.count() as u64
    }

    /// Closes every connection; a dial under way closes what it opens.
    pub fn close_all(&self) {
        self.next_generation(|_| {});
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
#[path = "pool_tests.rs"]
mod tests;
