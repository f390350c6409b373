//! The public client handle: creates producers and consumers over one shared connection pool,
//! and closes them all.

use std::sync::Arc;

use super::consumer::{Consumer, TopicSelection};
use super::error::{Error, Result};
use super::options::{ClientOptions, ConsumerOptions, ProducerOptions, TopicDomains};
use super::producer::Producer;
use super::shared::{ClientShared, ClientState};
use super::topic::TopicName;
use super::transaction::{Transaction, TxnId};
use crate::net::url::ServiceUrl;
use crate::net::{http, lookup, AuthProvider, TlsOptions};

/// A Pulsar client: shares connections among its producers and consumers.
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<ClientShared>,
}

impl Client {
    /// A client for `service_url` (`pulsar://host:port[,host:port]`, or `pulsar+ssl://` for
    /// TLS). Nothing connects until a producer, consumer or lookup needs it, but TLS files are
    /// read now.
    pub fn new(service_url: &str, opts: ClientOptions) -> Result<Client> {
        let shared = Arc::new(ClientShared::new(service_url, opts)?);
        if shared.opts.enable_transaction {
            let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
                Error::invalid("a client with transactions enabled must be made within the tokio runtime")
            })?;
            runtime.spawn(super::transaction::keep_coordinators_connected(Arc::downgrade(&shared)));
        }
        Ok(Client { shared })
    }

    /// Which cluster is in use: 0 for the service URL, `i + 1` for the `i`th failover
    /// secondary.
    pub fn current_cluster(&self) -> usize {
        self.shared.pool.current_cluster()
    }

    /// Moves the client to the cluster at `service_url`, whose brokers take `auth` and `tls`
    /// (every other connection option stays): each connection closes, and producers,
    /// consumers and readers reconnect there, where producers resend what is pending. Nothing
    /// is dialled here; a bad URL or TLS file leaves the client where it was.
    pub fn switch_service(
        &self,
        service_url: &str,
        auth: Option<Arc<dyn AuthProvider>>,
        tls: TlsOptions,
    ) -> Result<()> {
        self.shared.check_open()?;
        if self.shared.opts.failover.is_some() {
            return Err(Error::invalid(
                "a client with AutoClusterFailover picks its cluster itself: it cannot be switched by hand",
            ));
        }
        let service = ServiceUrl::parse(service_url)?;
        self.shared.pool.replace_cluster(service, auth, tls)?;
        log::warn!("switched to the cluster at {service_url}");
        Ok(())
    }

    /// Creates a producer; looks the topic up and attaches before returning.
    pub async fn create_producer(&self, topic: &str, opts: ProducerOptions) -> Result<Producer> {
        Producer::open(self.shared.clone(), topic, opts).await
    }

    /// Subscribes to one topic, a list, or a pattern; attaches before returning.
    pub async fn subscribe(
        &self,
        topics: TopicSelection,
        subscription: &str,
        opts: ConsumerOptions,
    ) -> Result<Consumer> {
        Consumer::open(self.shared.clone(), topics, subscription, opts).await
    }

    /// Opens a transaction, which the coordinator aborts after `timeout` unless it is ended
    /// first. Waits (within the operation timeout) for a coordinator that is still loading.
    pub async fn new_transaction(&self, timeout: std::time::Duration) -> Result<Transaction> {
        Transaction::open(self.shared.clone(), timeout).await
    }

    /// A handle to the open transaction `id`, made by this or another client (another process
    /// commits what an executor wrote, say); checks that its coordinator can be reached.
    pub async fn resume_transaction(&self, id: TxnId) -> Result<Transaction> {
        Transaction::resume(self.shared.clone(), id).await
    }

    /// Number of partitions of `topic` (0 when not partitioned).
    pub async fn partition_count(&self, topic: &str) -> Result<u32> {
        self.shared.check_open()?;
        let topic = TopicName::parse(topic)?;
        Ok(lookup::partition_count(&self.shared.pool, topic.as_str()).await?)
    }

    /// The persistent topics of `namespace` (`tenant/namespace`), as the broker lists them:
    /// each partition of a partitioned topic by its own name. Serves pattern reads without
    /// an admin URL.
    pub async fn topics_of_namespace(&self, namespace: &str) -> Result<Vec<String>> {
        self.shared.check_open()?;
        let mut parts = namespace.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(t), Some(n), None) if !t.is_empty() && !n.is_empty() => {}
            _ => {
                return Err(Error::invalid(format!(
                    "namespace {namespace:?} is not 'tenant/namespace'"
                )))
            }
        }
        Ok(lookup::topics_of_namespace(&self.shared.pool, namespace, TopicDomains::Persistent).await?)
    }

    /// Sends `method path` to the web service of an `http://` or `https://` service URL with
    /// the client's credentials and TLS, following redirects (the admin REST API's transport).
    /// Every answer the service gives is returned, whatever its status.
    pub async fn web_request(
        &self,
        method: &str,
        path: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> Result<http::Answer> {
        self.shared.check_open()?;
        let method = hyper::Method::from_bytes(method.as_bytes())
            .map_err(|_| Error::invalid(format!("{method:?} is not an HTTP method")))?;
        if !path.starts_with('/') {
            return Err(Error::invalid(format!("the path {path:?} must start with '/'")));
        }
        let mut view = self.shared.pool.view();
        if !view.uses_http() {
            return Err(Error::invalid(
                "web service requests need an http:// or https:// service URL (the broker's web service port)",
            ));
        }
        let pool = &self.shared.pool;
        Ok(http::request(pool, &mut view, &method, path, &headers, body.into()).await?)
    }

    /// Closes every producer and consumer, then the connections. Idempotent.
    pub async fn close(&self) {
        self.shared.close().await
    }

    /// The connection state: closed, idle (nothing created yet), connecting (some producer or
    /// consumer is reattaching), or connected.
    pub fn state(&self) -> ClientState {
        self.shared.state()
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Connection and lookup statistics.
    pub fn stats(&self) -> super::stats::ClientStats {
        super::stats::ClientStats::of(&self.shared.pool)
    }
}
