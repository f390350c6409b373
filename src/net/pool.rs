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
        let conn = Connection::connect(dial, &cluster.opts, cluster.tls.as_ref(), proxy_to)
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
mod tests {
    use std::sync::atomic::AtomicU64;

    use bytes::BytesMut;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::Semaphore;

    use super::*;
    use crate::net::StaticAuth;
    use crate::protocol::frame::{self, Frame, DEFAULT_MAX_MESSAGE_SIZE, FRAME_PADDING};
    use crate::protocol::pb::{base_command::Type, BaseCommand, CommandConnected};

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

    /// What a fake server saw: the credential of each connection (or request), and how many
    /// of its connections the client has closed.
    #[derive(Default)]
    struct Seen {
        creds: Mutex<Vec<String>>,
        closed: AtomicUsize,
    }

    impl Seen {
        fn creds(&self) -> Vec<String> {
            self.creds.lock().unwrap().clone()
        }
    }

    /// A fake server on loopback; `gate` holds each answer until the test adds a permit.
    struct Fake {
        addr: String,
        seen: Arc<Seen>,
        gate: Arc<Semaphore>,
    }

    impl Fake {
        async fn start<F, Fut>(serve: F) -> Fake
        where
            F: Fn(TcpStream, Arc<Seen>, Arc<Semaphore>) -> Fut + Send + 'static,
            Fut: Future<Output = ()> + Send + 'static,
        {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let fake = Fake {
                addr: listener.local_addr().unwrap().to_string(),
                seen: Default::default(),
                gate: Arc::new(Semaphore::new(0)),
            };
            let (seen, gate) = (fake.seen.clone(), fake.gate.clone());
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(stream, seen.clone(), gate.clone()));
                }
            });
            fake
        }

        /// A broker: records the credential of `Connect` and answers `Connected` once the gate
        /// lets it; then reads until the client closes.
        async fn broker() -> Fake {
            Fake::start(|mut stream, seen, gate| async move {
                let mut buf = BytesMut::new();
                let Some(connect) = next_frame(&mut stream, &mut buf).await else {
                    return;
                };
                let cred = connect.command.connect.unwrap().auth_data.unwrap_or_default();
                seen.creds.lock().unwrap().push(String::from_utf8_lossy(&cred).into());
                gate.acquire().await.unwrap().forget();
                let connected = BaseCommand {
                    r#type: Type::Connected as i32,
                    connected: Some(CommandConnected {
                        server_version: "fake".into(),
                        protocol_version: Some(21),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                let mut out = BytesMut::new();
                frame::encode_command(&connected, &mut out);
                stream.write_all(&out).await.unwrap();
                while next_frame(&mut stream, &mut buf).await.is_some() {}
                seen.closed.fetch_add(1, Ordering::SeqCst);
            })
            .await
        }

        /// A web service whose topic lookups name `broker`: records the `Authorization` header
        /// of each request and answers once the gate lets it.
        async fn web_service(broker: String) -> Fake {
            Fake::start(move |mut stream, seen, gate| {
                let broker = broker.clone();
                async move {
                    let mut head = Vec::new();
                    while !head.ends_with(b"\r\n\r\n") {
                        let mut byte = [0u8];
                        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).to_lowercase();
                    let auth = head.lines().find_map(|l| l.strip_prefix("authorization: "));
                    seen.creds.lock().unwrap().push(auth.unwrap_or("").trim().into());
                    gate.acquire().await.unwrap().forget();
                    let body = format!(r#"{{"brokerUrl": "pulsar://{broker}"}}"#);
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
            })
            .await
        }

        fn url(&self, scheme: &str) -> ServiceUrl {
            ServiceUrl::parse(&format!("{scheme}://{}", self.addr)).unwrap()
        }

        fn open(&self) {
            self.gate.add_permits(1000);
        }
    }

    async fn next_frame(stream: &mut TcpStream, buf: &mut BytesMut) -> Option<Frame> {
        loop {
            if let Some(f) = frame::decode(buf, DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING).unwrap() {
                return Some(f);
            }
            if stream.read_buf(buf).await.unwrap_or(0) == 0 {
                return None;
            }
        }
    }

    fn token(t: &str) -> Option<Arc<dyn AuthProvider>> {
        Some(Arc::new(StaticAuth::new("token", t)))
    }

    fn with_token(t: &str) -> ConnectionOptions {
        ConnectionOptions {
            auth: token(t),
            ..Default::default()
        }
    }

    async fn until(what: &str, cond: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(tokio::time::Instant::now() < deadline, "{what} did not happen");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
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
        assert!(pool.get_service(&mut pool.view()).await.is_err());
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
        assert!(!pool.view().uses_tls());
        assert_eq!(pool.view().cluster.url.hosts, ["127.0.0.1:6650"]);
    }

    /// A switch while a broker of the old cluster is still answering the handshake: that
    /// connection is closed, and the caller gets one to the new cluster.
    #[tokio::test]
    async fn a_dial_completing_after_a_switch_is_closed_not_handed_out() {
        let (old, new) = (Fake::broker().await, Fake::broker().await);
        new.open();
        let pool = Arc::new(ConnectionPool::new(old.url("pulsar"), with_token("old")).unwrap());
        let getting = tokio::spawn({
            let pool = pool.clone();
            async move { pool.get_service(&mut pool.view()).await }
        });
        until("the old broker's handshake", || !old.seen.creds().is_empty()).await;
        pool.replace_cluster(new.url("pulsar"), token("new"), TlsOptions::default())
            .unwrap();
        old.open();

        let conn = getting.await.unwrap().unwrap();
        assert_eq!(conn.addr(), new.addr);
        until("the old connection's close", || {
            old.seen.closed.load(Ordering::SeqCst) == 1
        })
        .await;
        assert_eq!(old.seen.creds(), ["old"]);
        assert_eq!(new.seen.creds(), ["new"]);
        assert_eq!(pool.open_connections(), 1);
    }

    /// A lookup the old cluster answers after the switch: the broker it names is not dialled
    /// (least of all with the new cluster's credentials); the caller looks up again.
    #[tokio::test]
    async fn a_lookup_answered_by_the_old_cluster_is_not_followed() {
        let stale_broker = Fake::broker().await;
        stale_broker.open();
        let old = Fake::web_service(stale_broker.addr.clone()).await;
        let pool = Arc::new(ConnectionPool::new(old.url("http"), with_token("old")).unwrap());
        let looking_up = tokio::spawn({
            let pool = pool.clone();
            async move { super::super::lookup::lookup_topic(&pool, "persistent://t/n/x").await }
        });
        until("the old cluster's lookup", || !old.seen.creds().is_empty()).await;
        let new = Fake::broker().await;
        pool.replace_cluster(new.url("pulsar"), token("new"), TlsOptions::default())
            .unwrap();
        old.open();

        let err = looking_up.await.unwrap().unwrap_err();
        assert!(err.is_retriable(), "{err}");
        assert_eq!(old.seen.creds(), ["bearer old"]);
        assert!(stale_broker.seen.creds().is_empty(), "the stale answer was dialled");
    }

    /// A switch between two rounds over the service hosts: the next round asks the new
    /// cluster's hosts with the new cluster's credentials.
    #[tokio::test]
    async fn a_lookup_moved_to_the_new_cluster_carries_its_credentials() {
        let (refusing, refusals) = counting_listener().await;
        let broker = Fake::broker().await;
        broker.open();
        let new = Fake::web_service(broker.addr.clone()).await;
        new.open();
        let old = ServiceUrl::parse(&format!("http://{}", refusing.hosts[0])).unwrap();
        let pool = Arc::new(ConnectionPool::new(old, with_token("old")).unwrap());
        let looking_up = tokio::spawn({
            let pool = pool.clone();
            async move { super::super::lookup::lookup_topic(&pool, "persistent://t/n/x").await }
        });
        until("a refused attempt", || refusals.load(Ordering::SeqCst) >= 1).await;
        pool.replace_cluster(new.url("http"), token("new"), TlsOptions::default())
            .unwrap();

        let conn = looking_up.await.unwrap().unwrap();
        assert_eq!(conn.addr(), broker.addr);
        assert_eq!(new.seen.creds(), ["bearer new"]);
        assert_eq!(broker.seen.creds(), ["new"]);
    }

    /// Once the client is closing, nothing is dialled any more, so nothing is left open.
    #[tokio::test]
    async fn a_shut_down_pool_dials_nothing() {
        let broker = Fake::broker().await;
        broker.open();
        let pool = ConnectionPool::new(broker.url("pulsar"), ConnectionOptions::default()).unwrap();
        pool.shut_down();
        pool.close_all();
        assert!(pool.get_service(&mut pool.view()).await.is_err());
        assert!(broker.seen.creds().is_empty());
        assert_eq!(pool.open_connections(), 0);
    }

    /// Slots of addresses no longer used are dropped once a new address comes.
    #[tokio::test]
    async fn slots_of_dead_addresses_do_not_pile_up() {
        let pool = ConnectionPool::new(
            ServiceUrl::parse("pulsar://127.0.0.1:1").unwrap(),
            ConnectionOptions::default(),
        )
        .unwrap();
        for _ in 0..20 {
            let (url, _) = counting_listener().await;
            assert!(pool.get(&pool.view(), &url.hosts[0]).await.is_err());
        }
        assert!(pool.slots.lock().unwrap().len() <= 1);
    }
}
