//! Topic lookup (following redirects) and partition metadata: binary commands on a connection
//! to the service URL, or REST calls (`net::http`) when it is `http://` or `https://`.

use super::http;
use super::http::MAX_REDIRECTS;
use super::pool::ClusterView;
use super::stats::bump;
use super::url::broker_address;
use super::{Connection, ConnectionPool, NetError};
use crate::protocol::commands;
use crate::protocol::pb::command_get_topics_of_namespace::Mode as TopicDomains;
use crate::protocol::pb::{
    command_lookup_topic_response::LookupType, command_partitioned_topic_metadata_response, CommandLookupTopicResponse,
};

/// Finds the broker that owns `topic` and returns a connection to it.
pub async fn lookup_topic(pool: &ConnectionPool, topic: &str) -> Result<Connection, NetError> {
    counted(pool, lookup_topic_uncounted(pool, topic)).await
}

/// A lookup, counted in the pool's lookup figures (attempts, failures, duration).
async fn counted(
    pool: &ConnectionPool,
    lookup: impl std::future::Future<Output = Result<Connection, NetError>>,
) -> Result<Connection, NetError> {
    let started = std::time::Instant::now();
    let found = lookup.await;
    let c = pool.counters();
    bump(&c.lookups);
    c.lookup_duration.record(started.elapsed());
    if found.is_err() {
        bump(&c.lookups_failed);
    }
    found
}

async fn lookup_topic_uncounted(pool: &ConnectionPool, topic: &str) -> Result<Connection, NetError> {
    // The answer names a broker of the cluster that gave it: it is dialled with that
    // cluster's credentials, or not at all once the pool has switched.
    let mut view = pool.view();
    if view.uses_http() {
        let broker = http::lookup(pool, &mut view, topic).await?;
        return pool.get(&view, &broker).await;
    }
    let conn = pool.get_service(&mut view).await?;
    lookup_from(pool, &view, conn, topic).await
}

/// Finds the broker that owns `topic` in the cluster a broker named when it said the topic had
/// migrated there (PIP-188's `TopicMigrated`: its service URL, plain and TLS), asking that URL
/// with the credentials of the cluster the client is on.
pub async fn lookup_topic_in(
    pool: &ConnectionPool,
    plain: Option<&str>,
    tls: Option<&str>,
    topic: &str,
) -> Result<Connection, NetError> {
    counted(pool, async {
        let view = pool.view();
        let conn = named_broker(pool, &view, plain, tls).await?;
        lookup_from(pool, &view, conn, topic).await
    })
    .await
}

/// The binary lookup of `topic`, starting at `conn` and following redirects.
async fn lookup_from(
    pool: &ConnectionPool,
    view: &ClusterView,
    mut conn: Connection,
    topic: &str,
) -> Result<Connection, NetError> {
    let mut authoritative = false;
    for _ in 0..MAX_REDIRECTS {
        let listener = pool.options().listener_name.as_deref();
        let frame = conn
            .request(|id| commands::lookup(topic, id, authoritative, listener))
            .await?;
        let resp = frame
            .command
            .lookup_topic_response
            .ok_or_else(|| NetError::UnexpectedResponse("LookupResponse without its body".into()))?;
        // Behind a Pulsar proxy the broker is reached through the proxy that answered.
        let proxy = (resp.proxy_through_service_url == Some(true)).then(|| conn.addr().to_string());
        match LookupType::try_from(resp.response.unwrap_or(LookupType::Failed as i32)) {
            Ok(LookupType::Connect) => {
                return pool.get_via(view, &broker_of(view, &resp)?, proxy.as_deref()).await;
            }
            Ok(LookupType::Redirect) => {
                authoritative = resp.authoritative.unwrap_or(false);
                conn = pool.get_via(view, &broker_of(view, &resp)?, proxy.as_deref()).await?;
            }
            _ => return Err(NetError::refused(resp.error, resp.message, "lookup failed")),
        }
    }
    Err(NetError::TooManyRedirects(topic.to_string()))
}

/// The broker a broker named as a topic's new owner when it closed a producer or consumer of it
/// (`assignedBrokerServiceUrl` and its TLS twin of `CloseProducer`/`CloseConsumer`, sent by the
/// extensible load manager during a transfer): a connection to it, without a lookup.
pub async fn assigned_broker(
    pool: &ConnectionPool,
    plain: Option<&str>,
    tls: Option<&str>,
) -> Result<Connection, NetError> {
    named_broker(pool, &pool.view(), plain, tls).await
}

/// A connection to a broker a broker named by its URLs (the TLS one when the client uses TLS).
async fn named_broker(
    pool: &ConnectionPool,
    view: &ClusterView,
    plain: Option<&str>,
    tls: Option<&str>,
) -> Result<Connection, NetError> {
    let url = if view.uses_tls() { tls } else { plain };
    let url = url.ok_or_else(|| NetError::UnexpectedResponse("no broker URL for this scheme".into()))?;
    pool.get(view, &broker_address(url, view.uses_tls())?).await
}

/// `host:port` of the broker a lookup answer names: its TLS URL when the client uses TLS.
fn broker_of(view: &ClusterView, resp: &CommandLookupTopicResponse) -> Result<String, NetError> {
    let tls = view.uses_tls();
    let url = if tls {
        resp.broker_service_url_tls.as_deref()
    } else {
        resp.broker_service_url.as_deref()
    };
    let url = url.ok_or_else(|| {
        NetError::UnexpectedResponse(if tls {
            "the lookup answer has no TLS broker URL (brokerServiceUrlTls): is TLS enabled on the broker?".into()
        } else {
            "the lookup answer has no broker URL".into()
        })
    })?;
    broker_address(url, tls)
}

/// Number of partitions of `topic`; 0 means a non-partitioned topic.
pub async fn partition_count(pool: &ConnectionPool, topic: &str) -> Result<u32, NetError> {
    let counted = partition_count_uncounted(pool, topic).await;
    bump(&pool.counters().metadata_lookups);
    if counted.is_err() {
        bump(&pool.counters().metadata_lookups_failed);
    }
    counted
}

async fn partition_count_uncounted(pool: &ConnectionPool, topic: &str) -> Result<u32, NetError> {
    let mut view = pool.view();
    if view.uses_http() {
        return http::partitions(pool, &mut view, topic).await;
    }
    let conn = pool.get_service(&mut view).await?;
    let frame = conn.request(|id| commands::partitioned_metadata(topic, id)).await?;
    let resp = frame
        .command
        .partition_metadata_response
        .ok_or_else(|| NetError::UnexpectedResponse("PartitionedMetadataResponse without its body".into()))?;
    if resp.response == Some(command_partitioned_topic_metadata_response::LookupType::Failed as i32) {
        return Err(NetError::refused(resp.error, resp.message, "partition metadata failed"));
    }
    Ok(resp.partitions.unwrap_or(0))
}

/// A connection to a broker that can answer questions about `topic` (its schema): any broker
/// of the service URL, or, when the service URL is a web service, the one owning `topic`.
pub async fn broker_for(pool: &ConnectionPool, topic: &str) -> Result<Connection, NetError> {
    let mut view = pool.view();
    if view.uses_http() {
        lookup_topic(pool, topic).await
    } else {
        pool.get_service(&mut view).await
    }
}

/// Topics of `namespace` (`tenant/ns`) in `mode`'s domains, partitions listed one by one.
pub async fn topics_of_namespace(
    pool: &ConnectionPool,
    namespace: &str,
    mode: TopicDomains,
) -> Result<Vec<String>, NetError> {
    let mut view = pool.view();
    if view.uses_http() {
        return http::topics(pool, &mut view, namespace, mode).await;
    }
    let conn = pool.get_service(&mut view).await?;
    let frame = conn
        .request(|id| commands::get_topics_of_namespace(namespace, mode, id))
        .await?;
    let resp = frame
        .command
        .get_topics_of_namespace_response
        .ok_or_else(|| NetError::UnexpectedResponse("GetTopicsOfNamespaceResponse without its body".into()))?;
    Ok(resp.topics)
}
