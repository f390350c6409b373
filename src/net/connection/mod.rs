//! One connection to one broker, owned by one task.
//!
//! [`Connection`] is a cheap handle: requests go to the task over a channel, each answered
//! through its own oneshot; producers and consumers register by id and get their frames on a
//! channel of [`Event`]s. When the task ends, for any reason, every pending request and every
//! registered handler is told why, so nothing waits on a dead socket.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::auth::AuthProvider;
use super::tls::{tls_verdict, TlsConnector, TlsOptions};
use super::NetError;
use crate::protocol::commands::{self, response_request_id};
use crate::protocol::frame::{self, Frame, DEFAULT_MAX_MESSAGE_SIZE, FRAME_PADDING};
use crate::protocol::pb::{base_command::Type, BaseCommand, ServerError};

mod actor;

use actor::Actor;

/// Bytes queued for a socket beyond which the connection stops taking new frames.
const MAX_WRITE_BACKLOG: usize = 16 * 1024 * 1024;

const CLOSED_IN_HANDSHAKE: &str = "closed by the broker during the handshake";

/// Challenges answered before `Connected`: a broker asking more often is not making progress.
const MAX_HANDSHAKE_CHALLENGES: usize = 8;

/// How long closing waits for the socket to take its last bytes.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Settings of every connection of a client.
#[derive(Clone)]
pub struct ConnectionOptions {
    /// TCP connect plus the Connect/Connected handshake.
    pub connect_timeout: Duration,
    /// Each request/response exchange.
    pub operation_timeout: Duration,
    /// Interval between our pings; a connection whose pong is missing at the next ping closes.
    pub keepalive_interval: Duration,
    /// Where the credentials sent in `Connect` and in answers to challenges come from.
    pub auth: Option<Arc<dyn AuthProvider>>,
    /// TLS settings, used when the service URL is `pulsar+ssl://`.
    pub tls: TlsOptions,
    /// The broker listener (`advertisedListeners`) whose addresses lookups answer with.
    pub listener_name: Option<String>,
    /// `host:port` of a proxy that routes TLS connections by SNI: every TLS connection is
    /// dialled there, naming (and verifying) the broker it is for in the handshake.
    pub sni_proxy: Option<String>,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            connect_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(30),
            keepalive_interval: Duration::from_secs(30),
            auth: None,
            tls: TlsOptions::default(),
            listener_name: None,
            sni_proxy: None,
        }
    }
}

impl ConnectionOptions {
    /// A TCP connection for `addr`: to `addr` itself, or for TLS (`tls`) through the SNI proxy
    /// when there is one (the TLS handshake over it then names `addr`'s host).
    pub(crate) async fn dial(&self, addr: &str, tls: bool) -> Result<TcpStream, NetError> {
        let to = match &self.sni_proxy {
            Some(proxy) if tls => {
                if super::tls::host_of(addr).parse::<std::net::IpAddr>().is_ok() {
                    // Not worth retrying: the broker's address will not turn into a name.
                    return Err(NetError::Tls {
                        addr: addr.to_string(),
                        reason: format!(
                            "an SNI proxy routes by host name, and {addr} is an IP address \
                             (brokers behind an SNI proxy must advertise DNS names)"
                        ),
                    });
                }
                proxy.as_str()
            }
            _ => addr,
        };
        let tcp = TcpStream::connect(to).await.map_err(|e| connect_err(to, e))?;
        tcp.set_nodelay(true).map_err(|e| connect_err(to, e))?;
        Ok(tcp)
    }
}

/// Options end up in logs and panic messages: the credentials are shown by method only.
impl std::fmt::Debug for ConnectionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so a field added later cannot slip past without a decision here.
        let ConnectionOptions {
            connect_timeout,
            operation_timeout,
            keepalive_interval,
            auth,
            tls,
            listener_name,
            sni_proxy,
        } = self;
        f.debug_struct("ConnectionOptions")
            .field("connect_timeout", connect_timeout)
            .field("operation_timeout", operation_timeout)
            .field("keepalive_interval", keepalive_interval)
            .field("auth", auth)
            .field("tls", tls)
            .field("listener_name", listener_name)
            .field("sni_proxy", sni_proxy)
            .finish()
    }
}

/// Which id space a handler id belongs to: the protocol numbers producers and consumers apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlerId {
    /// A `producer_id`.
    Producer(u64),
    /// A `consumer_id`.
    Consumer(u64),
    /// No protocol id: a watcher that is only told when the connection closes.
    Watcher(u64),
}

/// What a registered producer or consumer receives.
#[derive(Debug)]
pub enum Event {
    /// A frame addressed to the handler's id.
    Frame(Box<Frame>),
    /// The connection is gone; the handler must find a new one. Boxed, as the frame is: an
    /// event is then two words, and each registration's channel allocates room for 32 of
    /// them up front (5.7 KB per producer or consumer with the error inline; issue 31).
    Closed(Box<NetError>),
}

enum Outbound {
    Request {
        request_id: u64,
        frame: BytesMut,
        reply: oneshot::Sender<Result<Frame, NetError>>,
    },
    Cancel(u64),
    Write(Bytes),
    Register(HandlerId, mpsc::UnboundedSender<Event>),
    Unregister(HandlerId),
    Close,
}

struct Shared {
    tx: mpsc::UnboundedSender<Outbound>,
    addr: String,
    closed: Arc<AtomicBool>,
    next_request_id: AtomicU64,
    max_message_size: usize,
    protocol_version: i32,
    operation_timeout: Duration,
}

/// A handle to a live (or recently closed) connection. Clones share the connection.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.shared.addr)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Connection {
    /// Opens a TCP connection to `addr` (`host:port`), wraps it in TLS when `tls` is given,
    /// and performs the Pulsar handshake, all within the connect timeout.
    ///
    /// A credential the broker refuses (typically one that expired while the client was
    /// away) is asked for again and tried once more when the provider can renew it; only a
    /// refused renewed credential is final.
    ///
    /// With `proxy_to`, `addr` is a Pulsar proxy and `proxy_to` (`host:port`) the broker it
    /// forwards this connection to, named in `Connect`.
    pub async fn connect(
        addr: &str,
        opts: &ConnectionOptions,
        tls: Option<&TlsConnector>,
        proxy_to: Option<&str>,
    ) -> Result<Connection, NetError> {
        let attempts = async {
            match Self::connect_once(addr, opts, tls, proxy_to).await {
                Err(NetError::Server {
                    code: ServerError::AuthenticationError,
                    message,
                }) if opts.auth.as_ref().is_some_and(|a| a.renews()) => {
                    log::info!("{addr} refused the credential ({message}); trying once more with a fresh one");
                    if let Some(auth) = &opts.auth {
                        auth.refused();
                    }
                    Self::connect_once(addr, opts, tls, proxy_to).await
                }
                other => other,
            }
        };
        tokio::time::timeout(opts.connect_timeout, attempts)
            .await
            .map_err(|_| NetError::Timeout("connect"))?
    }

    async fn connect_once(
        addr: &str,
        opts: &ConnectionOptions,
        tls: Option<&TlsConnector>,
        proxy_to: Option<&str>,
    ) -> Result<Connection, NetError> {
        let opening = async {
            let tcp = opts.dial(addr, tls.is_some()).await?;
            match tls {
                // Plain TCP keeps tokio's owned halves, which need no lock between them.
                None => {
                    let (rd, wr) = tcp.into_split();
                    Self::start(addr, opts, rd, wr, false, proxy_to)
                        .await
                        .map_err(|e| match e {
                            // What a TLS port does with a plain Connect: say so.
                            NetError::Connect { addr, reason } if reason == CLOSED_IN_HANDSHAKE => NetError::Connect {
                                addr,
                                reason: format!("{reason} (if this is a TLS port, use pulsar+ssl://)"),
                            },
                            other => other,
                        })
                }
                // rustls may keep ciphertext after accepting plaintext, so these writes are
                // flushed.
                Some(tls) => {
                    let (rd, wr) = tokio::io::split(tls.connect(addr, tcp).await?);
                    Self::start(addr, opts, rd, wr, true, proxy_to).await
                }
            }
        };
        opening.await
    }

    /// The `Connect`/`Connected` exchange on an open stream, then the actor that owns it.
    async fn start<R, W>(
        addr: &str,
        opts: &ConnectionOptions,
        mut rd: R,
        mut wr: W,
        flush_writes: bool,
        proxy_to: Option<&str>,
    ) -> Result<Connection, NetError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let auth = opts.auth.as_deref();
        let (method, data) = match auth {
            Some(p) => (Some(p.method()), Some(p.auth_data().await?)),
            None => (None, None),
        };
        let mut out = BytesMut::new();
        frame::encode_command(&commands::connect(method, data, proxy_to), &mut out);
        wr.write_all(&out).await.map_err(|e| handshake_err(addr, e))?;
        wr.flush().await.map_err(|e| handshake_err(addr, e))?;
        let mut leftover = BytesMut::with_capacity(4096);
        let mut challenges = 0;
        let connected = 'handshake: loop {
            // The first frame settles the handshake, whatever it is.
            if let Some(f) = frame::decode(&mut leftover, DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING)? {
                match Type::try_from(f.command.r#type) {
                    Ok(Type::Connected) => break 'handshake f.command.connected.unwrap_or_default(),
                    Ok(Type::Error) => {
                        let e = f.command.error.unwrap_or_default();
                        return Err(NetError::refused(Some(e.error), Some(e.message), ""));
                    }
                    Ok(Type::AuthChallenge) => {
                        let Some(auth) = auth else {
                            return Err(NetError::Server {
                                code: ServerError::AuthenticationError,
                                message: "broker asked for authentication the client is not configured for".into(),
                            });
                        };
                        challenges += 1;
                        if challenges > MAX_HANDSHAKE_CHALLENGES {
                            return Err(NetError::UnexpectedResponse(format!(
                                "more than {MAX_HANDSHAKE_CHALLENGES} authentication challenges in the handshake"
                            )));
                        }
                        let mut out = BytesMut::new();
                        frame::encode_command(
                            &commands::auth_response(auth.method(), auth.auth_data().await?),
                            &mut out,
                        );
                        wr.write_all(&out).await.map_err(|e| handshake_err(addr, e))?;
                        wr.flush().await.map_err(|e| handshake_err(addr, e))?;
                        continue 'handshake;
                    }
                    _ => {
                        return Err(NetError::UnexpectedResponse(format!(
                            "type {} during the handshake",
                            f.command.r#type
                        )))
                    }
                }
            }
            let n = rd.read_buf(&mut leftover).await.map_err(|e| handshake_err(addr, e))?;
            if n == 0 {
                return Err(NetError::Connect {
                    addr: addr.to_string(),
                    reason: CLOSED_IN_HANDSHAKE.into(),
                });
            }
        };
        let max_message_size = connected
            .max_message_size
            .filter(|s| *s > 0)
            .map(|s| s as usize)
            .unwrap_or(DEFAULT_MAX_MESSAGE_SIZE);
        let (tx, rx) = mpsc::unbounded_channel();
        let closed = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            tx,
            addr: addr.to_string(),
            closed: closed.clone(),
            next_request_id: AtomicU64::new(0),
            max_message_size,
            protocol_version: connected.protocol_version.unwrap_or(0),
            operation_timeout: opts.operation_timeout,
        });
        let actor = Actor {
            addr: addr.to_string(),
            max_frame_size: max_message_size + FRAME_PADDING,
            keepalive: opts.keepalive_interval,
            auth: opts.auth.clone(),
            challenge: None,
            pending: HashMap::new(),
            handlers: HashMap::new(),
            closed,
        };
        tokio::spawn(actor.run(rd, wr, flush_writes, leftover, rx));
        let through = proxy_to.map(|b| format!(" for broker {b}")).unwrap_or_default();
        log::debug!(
            "connected to {addr}{through} (protocol {}, max message {max_message_size})",
            shared.protocol_version
        );
        Ok(Connection { shared })
    }

    /// `host:port` this connection reaches.
    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    /// The largest message the broker accepts (from `Connected`).
    pub fn max_message_size(&self) -> usize {
        self.shared.max_message_size
    }

    /// Protocol version the broker agreed to.
    pub fn protocol_version(&self) -> i32 {
        self.shared.protocol_version
    }

    /// How long a request waits for its response.
    pub fn operation_timeout(&self) -> Duration {
        self.shared.operation_timeout
    }

    /// Whether the connection's task has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Sends the command built for a fresh request id and waits for its response, within the
    /// operation timeout. A broker `Error` response becomes [`NetError::Server`].
    pub async fn request(&self, build: impl FnOnce(u64) -> BaseCommand) -> Result<Frame, NetError> {
        self.request_with_timeout(self.shared.operation_timeout, build).await
    }

    /// [`Connection::request`] with an explicit timeout.
    pub async fn request_with_timeout(
        &self,
        timeout: Duration,
        build: impl FnOnce(u64) -> BaseCommand,
    ) -> Result<Frame, NetError> {
        let pending = self.send_request(build)?;
        pending.response(timeout).await
    }

    /// Queues the command built for a fresh request id at once, so it is ordered before
    /// anything sent after this returns, and gives back a handle to await its response.
    pub fn send_request(&self, build: impl FnOnce(u64) -> BaseCommand) -> Result<PendingRequest, NetError> {
        let request_id = self.shared.next_request_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = BytesMut::new();
        frame::encode_command(&build(request_id), &mut frame);
        let (reply, rx) = oneshot::channel();
        self.post(Outbound::Request {
            request_id,
            frame,
            reply,
        })?;
        Ok(PendingRequest {
            conn: self.clone(),
            request_id,
            rx,
        })
    }

    /// Queues an encoded frame (a send, an ack, a flow) for writing.
    pub fn write(&self, frame: Bytes) -> Result<(), NetError> {
        self.post(Outbound::Write(frame))
    }

    /// Queues a command that expects no response.
    pub fn send_command(&self, command: &BaseCommand) -> Result<(), NetError> {
        let mut buf = BytesMut::new();
        frame::encode_command(command, &mut buf);
        self.write(buf.freeze())
    }

    /// Routes frames addressed to `id` to the returned channel until unregistered or closed.
    pub fn register(&self, id: HandlerId) -> Result<mpsc::UnboundedReceiver<Event>, NetError> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.post(Outbound::Register(id, tx))?;
        Ok(rx)
    }

    /// Stops routing frames to `id`.
    pub fn unregister(&self, id: HandlerId) {
        let _ = self.post(Outbound::Unregister(id));
    }

    /// Closes the socket; pending requests and handlers are told.
    pub fn close(&self) {
        let _ = self.post(Outbound::Close);
    }

    fn post(&self, msg: Outbound) -> Result<(), NetError> {
        if self.is_closed() {
            return Err(NetError::Closed(format!(
                "connection to {} is closed",
                self.shared.addr
            )));
        }
        self.shared
            .tx
            .send(msg)
            .map_err(|_| NetError::Closed(format!("connection to {} is closed", self.shared.addr)))
    }
}

/// A request already on its way to the broker; [`PendingRequest::response`] waits for the answer.
pub struct PendingRequest {
    conn: Connection,
    request_id: u64,
    rx: oneshot::Receiver<Result<Frame, NetError>>,
}

impl PendingRequest {
    /// The response, within `timeout`. A broker `Error` response becomes [`NetError::Server`].
    pub async fn response(self, timeout: Duration) -> Result<Frame, NetError> {
        let response = match tokio::time::timeout(timeout, self.rx).await {
            Ok(Ok(r)) => r?,
            Ok(Err(_)) => return Err(NetError::Closed("connection task ended".into())),
            Err(_) => {
                let _ = self.conn.post(Outbound::Cancel(self.request_id));
                return Err(NetError::Timeout("request"));
            }
        };
        if response.command.r#type == Type::Error as i32 {
            let e = response.command.error.unwrap_or_default();
            return Err(NetError::refused(Some(e.error), Some(e.message), ""));
        }
        Ok(response)
    }
}

fn connect_err(addr: &str, e: std::io::Error) -> NetError {
    NetError::Connect {
        addr: addr.to_string(),
        reason: e.to_string(),
    }
}

/// I/O errors of the Pulsar handshake: over TLS 1.3 the broker may refuse our certificate
/// only now.
fn handshake_err(addr: &str, e: std::io::Error) -> NetError {
    tls_verdict(addr, &e).unwrap_or_else(|| connect_err(addr, e))
}

#[cfg(test)]
mod tests {
    use tokio::io::BufWriter;

    use super::*;
    use crate::protocol::pb::CommandConnected;

    async fn next(buf: &mut BytesMut, stream: &mut tokio::io::DuplexStream) -> Frame {
        loop {
            if let Some(f) = frame::decode(buf, DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING).unwrap() {
                return f;
            }
            assert!(stream.read_buf(buf).await.unwrap() > 0, "the client closed");
        }
    }

    /// A peer on the other end of `stream`: answers `Connect`, then returns the next frame.
    async fn peer(mut stream: tokio::io::DuplexStream) -> Frame {
        let mut buf = BytesMut::new();
        let connect = next(&mut buf, &mut stream).await;
        assert_eq!(connect.command.r#type, Type::Connect as i32);
        let mut out = BytesMut::new();
        let connected = BaseCommand {
            r#type: Type::Connected as i32,
            connected: Some(CommandConnected {
                server_version: "peer".into(),
                protocol_version: Some(21),
                ..Default::default()
            }),
            ..Default::default()
        };
        frame::encode_command(&connected, &mut out);
        stream.write_all(&out).await.unwrap();
        next(&mut buf, &mut stream).await
    }

    /// Hands out `cred-1`, `cred-2`, ... so a test sees which answer is fresh.
    struct Counting(std::sync::atomic::AtomicUsize);

    impl AuthProvider for Counting {
        fn method(&self) -> &str {
            "token"
        }
        fn auth_data(&self) -> crate::net::auth::AuthFuture {
            let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
            Box::pin(async move { Ok(format!("cred-{n}").into_bytes()) })
        }
    }

    fn challenge() -> BaseCommand {
        BaseCommand {
            r#type: Type::AuthChallenge as i32,
            auth_challenge: Some(crate::protocol::pb::CommandAuthChallenge {
                challenge: Some(crate::protocol::pb::AuthData {
                    auth_method_name: Some("token".into()),
                    auth_data: Some(b"refresh".to_vec().into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn answered(f: &Frame) -> Vec<u8> {
        assert_eq!(f.command.r#type, Type::AuthResponse as i32);
        let r = f.command.auth_response.as_ref().unwrap().response.as_ref().unwrap();
        assert_eq!(r.auth_method_name.as_deref(), Some("token"));
        r.auth_data.clone().unwrap().to_vec()
    }

    /// Challenges during the handshake and after it are answered with fresh data each time.
    #[tokio::test]
    async fn challenges_are_answered_with_fresh_credentials_at_any_time() {
        let (client, mut server) = tokio::io::duplex(1 << 16);
        let peer = tokio::spawn(async move {
            let mut buf = BytesMut::new();
            let connect = next(&mut buf, &mut server).await;
            assert_eq!(connect.command.connect.unwrap().auth_data.unwrap().as_ref(), b"cred-1");
            let mut out = BytesMut::new();
            frame::encode_command(&challenge(), &mut out);
            server.write_all(&out).await.unwrap();
            let in_handshake = answered(&next(&mut buf, &mut server).await);
            let mut out = BytesMut::new();
            let connected = BaseCommand {
                r#type: Type::Connected as i32,
                connected: Some(CommandConnected::default()),
                ..Default::default()
            };
            frame::encode_command(&connected, &mut out);
            frame::encode_command(&challenge(), &mut out);
            server.write_all(&out).await.unwrap();
            let later = answered(&next(&mut buf, &mut server).await);
            (in_handshake, later, server)
        });
        let (rd, wr) = tokio::io::split(client);
        let opts = ConnectionOptions {
            auth: Some(Arc::new(Counting(Default::default()))),
            ..Default::default()
        };
        let conn = Connection::start("peer:1", &opts, rd, wr, false, None).await.unwrap();
        let (in_handshake, later, _server) = tokio::time::timeout(Duration::from_secs(10), peer)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(in_handshake, b"cred-2");
        assert_eq!(later, b"cred-3");
        assert!(!conn.is_closed());
    }

    /// rustls may keep ciphertext after it has accepted plaintext, as a `BufWriter` keeps
    /// bytes: a frame written with nothing after it still reaches the peer.
    #[tokio::test]
    async fn writes_held_back_by_the_writer_are_flushed() {
        let (client, server) = tokio::io::duplex(1 << 20);
        let peer = tokio::spawn(peer(server));
        let (rd, wr) = tokio::io::split(client);
        let opts = ConnectionOptions::default();
        let conn = Connection::start("peer:1", &opts, rd, BufWriter::with_capacity(1 << 20, wr), true, None)
            .await
            .unwrap();
        conn.send_command(&commands::ping()).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), peer)
            .await
            .expect("the ping stayed in the writer's buffer")
            .unwrap();
        assert_eq!(got.command.r#type, Type::Ping as i32);
    }
}
