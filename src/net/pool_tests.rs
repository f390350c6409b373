//! Unit tests of the pool against fake brokers and web services on loopback, which record the
//! credentials they see and answer when the test lets them: cluster switches and replacement,
//! dials and lookups completing after a switch, shutting down, and slots of dead addresses.

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
