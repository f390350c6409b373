//! Lookups over the brokers' admin REST API, for `http://` and `https://` service URLs: the
//! lookup service the Java and C++ clients use for such URLs (`HttpLookupService`).
//!
//! - `GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}` answers `brokerUrl` and
//!   `brokerUrlTls`, the binary addresses producers and consumers then connect to;
//! - `GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions` answers `{"partitions": N}`;
//! - `GET /admin/v2/namespaces/{tenant}/{namespace}/topics` answers the topic names.
//!
//! HTTP/1.1 is hyper's, over the same TCP and TLS (`net::tls`) as the binary connections, so
//! `https://` trusts, verifies names and presents client certificates exactly as
//! `pulsar+ssl://` does. Each request gets a connection of its own: lookups are rare (a
//! producer's or consumer's creation and reconnections), so a pool of idle HTTP connections
//! would cost more than it saves. Credentials travel as the official clients send them:
//! `Authorization: Bearer` for tokens, `Authorization: Basic` for basic, the client certificate
//! for `tls`.

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{header, Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::auth::provider_failed;
use super::pool::ClusterView;
use super::url::broker_address;
use super::{ConnectionPool, NetError};
use crate::protocol::pb::command_get_topics_of_namespace::Mode as TopicDomains;
use crate::protocol::pb::ServerError;

/// Redirects a lookup follows before giving up, over HTTP or the binary protocol (the C++
/// client's limit). Declared here, where both lookups can reach it: `lookup` calls into
/// this module, not the other way round.
pub const MAX_REDIRECTS: usize = 20;

/// `host:port` of the broker that owns `topic` (a full name, `persistent://t/ns/x`).
pub async fn lookup(pool: &ConnectionPool, view: &mut ClusterView, topic: &str) -> Result<String, NetError> {
    let mut path = format!("/lookup/v2/topic/{}", topic_path(topic)?);
    if let Some(listener) = pool.options().listener_name.as_deref() {
        path.push_str(&format!("?listenerName={}", encode(listener)));
    }
    let answer = get_json(pool, view, &path).await?;
    let tls = view.uses_tls();
    // Older brokers spell the TLS address `brokerUrlSsl` (the C++ client reads both).
    let keys: &[&str] = if tls {
        &["brokerUrlTls", "brokerUrlSsl"]
    } else {
        &["brokerUrl"]
    };
    let url = keys
        .iter()
        .find_map(|k| answer.get(*k)?.as_str().filter(|s| !s.is_empty()));
    let url = url.ok_or_else(|| {
        NetError::UnexpectedResponse(if tls {
            format!("the lookup answer has no TLS broker URL (brokerUrlTls): is TLS enabled on the broker? {answer}")
        } else {
            format!("the lookup answer has no broker URL: {answer}")
        })
    })?;
    broker_address(url, tls)
}

/// Number of partitions of `topic`; 0 for a non-partitioned topic.
pub async fn partitions(pool: &ConnectionPool, view: &mut ClusterView, topic: &str) -> Result<u32, NetError> {
    // As the C++ client asks: a topic that auto-creation would make partitioned gets its metadata.
    let path = format!(
        "/admin/v2/{}/partitions?checkAllowAutoCreation=true",
        topic_path(topic)?
    );
    let answer = get_json(pool, view, &path).await?;
    let n = answer.get("partitions").and_then(Value::as_u64).unwrap_or(0);
    u32::try_from(n).map_err(|_| NetError::UnexpectedResponse(format!("{n} partitions")))
}

/// Topics of `namespace` (`tenant/ns`) in `mode`'s domains, partitions listed one by one (as
/// the binary `GetTopicsOfNamespace` answers).
pub async fn topics(
    pool: &ConnectionPool,
    view: &mut ClusterView,
    namespace: &str,
    mode: TopicDomains,
) -> Result<Vec<String>, NetError> {
    let (tenant, ns) = namespace
        .split_once('/')
        .filter(|(t, n)| !t.is_empty() && !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| NetError::Server {
            code: ServerError::MetadataError,
            message: format!("{namespace:?} is not a tenant/namespace name"),
        })?;
    let mode = match mode {
        TopicDomains::Persistent => "PERSISTENT",
        TopicDomains::NonPersistent => "NON_PERSISTENT",
        TopicDomains::All => "ALL",
    };
    let path = format!(
        "/admin/v2/namespaces/{}/{}/topics?mode={mode}",
        encode(tenant),
        encode(ns)
    );
    match get_json(pool, view, &path).await? {
        Value::Array(items) => Ok(items.into_iter().filter_map(|v| v.as_str().map(String::from)).collect()),
        other => Err(NetError::UnexpectedResponse(format!("topics of {namespace}: {other}"))),
    }
}

/// `{domain}/{tenant}/{namespace}/{encoded local name}` of a full topic name.
fn topic_path(topic: &str) -> Result<String, NetError> {
    let invalid = || NetError::Server {
        code: ServerError::InvalidTopicName,
        message: format!("{topic:?} is not a full topic name (persistent://tenant/namespace/topic)"),
    };
    let (domain, rest) = topic.split_once("://").ok_or_else(invalid)?;
    if domain != "persistent" && domain != "non-persistent" {
        return Err(invalid());
    }
    let mut parts = rest.splitn(3, '/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(t), Some(ns), Some(local)) if !t.is_empty() && !ns.is_empty() && !local.is_empty() => {
            Ok(format!("{domain}/{}/{}/{}", encode(t), encode(ns), encode(local)))
        }
        _ => Err(invalid()),
    }
}

/// Percent-encodes one path segment or query value (everything but RFC 3986's unreserved
/// characters), as the official clients encode a topic's local name.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// GETs `path` from the service's hosts in turn (a host that cannot be reached moves on to the
/// next, as binary lookups do) and parses the JSON answer. Each attempt carries the
/// credentials of the cluster it goes to (`view` follows a switch between attempts).
async fn get_json(pool: &ConnectionPool, view: &mut ClusterView, path: &str) -> Result<Value, NetError> {
    let answer = request(pool, view, &Method::GET, path, &[], Bytes::new()).await?;
    if !(200..300).contains(&answer.status) {
        let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return Err(status_error(&answer.host, path, status, &answer.body));
    }
    serde_json::from_slice(&answer.body)
        .map_err(|e| NetError::UnexpectedResponse(format!("GET {path}: the answer is not JSON ({e})")))
}

/// The web service's answer to one request, redirects followed.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Header names in lower case, as hyper gives them.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// `host:port` that answered (the last of the redirects).
    pub host: String,
}

/// Any request to the web service (the admin REST API as well as lookups): sent to the
/// service's hosts in turn with the client's credentials, following redirects to the owning
/// broker with the same method and body. Every other answer, an error status too, is the
/// caller's to read: only the caller knows what a 404 or a 409 means for its call.
pub async fn request(
    pool: &ConnectionPool,
    view: &mut ClusterView,
    method: &Method,
    path: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<Answer, NetError> {
    pool.on_service_hosts(view, |view, host| {
        let body = body.clone();
        async move {
            let mut all = auth_headers(&view).await?;
            all.extend(headers.iter().cloned());
            follow_redirects(pool, &view, host, method, path, &all, body).await
        }
    })
    .await
}

/// One request, following redirects (a broker that does not own the bundle redirects lookups
/// and admin calls to the one that does) up to the lookup limit.
async fn follow_redirects(
    pool: &ConnectionPool,
    view: &ClusterView,
    host: String,
    method: &Method,
    path: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<Answer, NetError> {
    let (mut host, mut path) = (host, path.to_string());
    let limit = pool.options().operation_timeout;
    for _ in 0..MAX_REDIRECTS {
        let sent = send_once(pool, view, &host, method, &path, headers, body.clone());
        let (status, answer_headers, answer_body) = tokio::time::timeout(limit, sent)
            .await
            .map_err(|_| NetError::Timeout("HTTP request"))??;
        let location = answer_headers
            .iter()
            .find(|(k, _)| k == "location")
            .map(|(_, v)| v.clone());
        if !status.is_redirection() || status == StatusCode::NOT_MODIFIED {
            return Ok(Answer {
                status: status.as_u16(),
                headers: answer_headers,
                body: answer_body,
                host,
            });
        }
        let to = location
            .and_then(|l| l.parse::<Uri>().ok())
            .and_then(|uri| {
                Some((
                    uri.authority()?.clone(),
                    uri.path_and_query()?.clone(),
                    uri.scheme_str() == Some("https"),
                ))
            })
            .ok_or_else(|| {
                NetError::UnexpectedResponse(format!("{method} {path} on {host}: {status} without a usable Location"))
            })?;
        let (authority, target, https) = to;
        let default_port = if https { 443 } else { 80 };
        host = format!("{}:{}", authority.host(), authority.port_u16().unwrap_or(default_port));
        path = target.to_string();
    }
    Err(NetError::TooManyRedirects(path))
}

type RawAnswer = (StatusCode, Vec<(String, String)>, Bytes);

/// One request on a fresh connection: the status, the headers and the body.
async fn send_once(
    pool: &ConnectionPool,
    view: &ClusterView,
    addr: &str,
    method: &Method,
    path: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<RawAnswer, NetError> {
    let opts = pool.options();
    let tcp = tokio::time::timeout(opts.connect_timeout, opts.dial(addr, view.tls_connector().is_some()))
        .await
        .map_err(|_| NetError::Timeout("connect"))?
        .map_err(|e| match e {
            NetError::Connect { addr, reason } => NetError::Connect {
                addr,
                reason: format!("web service: {reason}"),
            },
            other => other,
        })?;
    let mut request = Request::builder()
        .method(method.clone())
        .uri(path)
        .header(header::HOST, addr)
        .header(header::ACCEPT, "application/json")
        .header(header::USER_AGENT, concat!("magnetar/", env!("CARGO_PKG_VERSION")));
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request
        .body(Full::new(body))
        .map_err(|e| NetError::UnexpectedResponse(format!("cannot build the request for {path}: {e}")))?;
    match view.tls_connector() {
        None => exchange(addr, tcp, request).await,
        Some(tls) => exchange(addr, tls.connect(addr, tcp).await?, request).await,
    }
}

/// Sends `request` over `stream` and reads the whole answer, driving the connection in the same
/// future, so a timeout above drops the socket too.
async fn exchange<S>(addr: &str, stream: S, request: Request<Full<Bytes>>) -> Result<RawAnswer, NetError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let http_err = |e: hyper::Error| NetError::Connect {
        addr: addr.to_string(),
        reason: format!("no HTTP answer ({e}): is this the broker's web service port?"),
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(http_err)?;
    let answer = async {
        let response = sender.send_request(request).await?;
        let status = response.status();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, hyper::Error>((status, headers, body))
    };
    tokio::pin!(answer, conn);
    let mut conn_done = false;
    loop {
        tokio::select! {
            got = &mut answer => return got.map_err(http_err),
            ended = &mut conn, if !conn_done => {
                ended.map_err(http_err)?;
                conn_done = true;
            }
        }
    }
}

/// The broker's refusal, with its reason: `{"reason": ...}` from Pulsar's REST resources,
/// `{"message": ...}` from the web server's own filters.
fn status_error(host: &str, path: &str, status: StatusCode, body: &[u8]) -> NetError {
    let json = serde_json::from_slice::<Value>(body).ok();
    let field = |k: &str| json.as_ref()?.get(k)?.as_str().map(String::from);
    let from_resource = field("reason");
    let reason = from_resource
        .clone()
        .or_else(|| field("message"))
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect());
    let code = match status {
        // The authentication filter refuses with its own body; a 401 from a resource is the
        // authenticated role being refused the operation.
        StatusCode::UNAUTHORIZED if from_resource.is_some() => ServerError::AuthorizationError,
        StatusCode::UNAUTHORIZED => ServerError::AuthenticationError,
        StatusCode::FORBIDDEN => ServerError::AuthorizationError,
        StatusCode::NOT_FOUND => ServerError::TopicNotFound,
        StatusCode::TOO_MANY_REQUESTS => ServerError::TooManyRequests,
        s if s.is_server_error() => ServerError::ServiceNotReady,
        _ => ServerError::UnknownError,
    };
    NetError::Server {
        code,
        message: format!("GET {path} on {host}: {status} {reason}"),
    }
}

/// The headers that carry the client's credential over HTTP.
async fn auth_headers(view: &ClusterView) -> Result<Vec<(String, String)>, NetError> {
    let Some(provider) = view.auth() else {
        return Ok(Vec::new());
    };
    // The header form decides which of the broker's providers reads it, so it names that one.
    let method = provider.http_method();
    let value = match method {
        // The credential is the client certificate of the TLS session itself.
        "tls" => return Ok(Vec::new()),
        "token" => {
            let data = provider.auth_data().await?;
            format!("Bearer {}", String::from_utf8_lossy(&data))
        }
        "basic" => {
            let data = provider.auth_data().await?;
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(data))
        }
        other => {
            return Err(provider_failed(
                other,
                "this method cannot authenticate over HTTP: use a pulsar:// or pulsar+ssl:// service URL",
            ))
        }
    };
    // The method name spares the broker trying each of its providers in turn.
    Ok(vec![
        ("authorization".to_string(), value),
        ("x-pulsar-auth-method-name".to_string(), method.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_paths_encode_the_local_name() {
        assert_eq!(
            topic_path("persistent://public/default/t").unwrap(),
            "persistent/public/default/t"
        );
        assert_eq!(
            topic_path("non-persistent://a/b/x y%/z").unwrap(),
            "non-persistent/a/b/x%20y%25%2Fz"
        );
        for bad in ["t", "persistent://a/b", "http://a/b/c", "persistent:///b/c"] {
            assert!(topic_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_keep_the_brokers_reason() {
        let e = status_error(
            "h:1",
            "/p",
            StatusCode::UNAUTHORIZED,
            br#"{"status":"401","message":"no token"}"#,
        );
        match e {
            NetError::Server { code, message } => {
                assert_eq!(code, ServerError::AuthenticationError);
                assert!(message.contains("no token") && message.contains("401"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let denied = status_error(
            "h:1",
            "/p",
            StatusCode::UNAUTHORIZED,
            br#"{"reason":"Unauthorized to LOOKUP"}"#,
        );
        assert!(
            matches!(
                denied,
                NetError::Server {
                    code: ServerError::AuthorizationError,
                    ..
                }
            ),
            "{denied:?}"
        );
        assert!(status_error("h:1", "/p", StatusCode::SERVICE_UNAVAILABLE, b"").is_retriable());
        assert!(!status_error("h:1", "/p", StatusCode::FORBIDDEN, b"").is_retriable());
    }
}
