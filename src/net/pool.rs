//! One shared connection per broker address, opened on first use and replaced once closed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Mutex;

use super::backoff::Backoff;
use super::connection::{Connection, ConnectionOptions, Route};
use super::stats::{bump, NetCounters};
use super::tls::TlsConnector;
use super::url::ServiceUrl;
use super::NetError;

/// The connections of one client.
pub struct ConnectionPool {
    opts: ConnectionOptions,
    service: ServiceUrl,
    // Set for `pulsar+ssl://`: then every broker, lookup targets included, is dialled with TLS.
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
        if opts.sni_proxy.is_some() && !service.tls {
            return Err(NetError::InvalidUrl {
                url: service.hosts.join(","),
                reason: "an SNI proxy routes TLS connections: the service URL must be pulsar+ssl://".into(),
            });
        }
        let tls = if service.tls || opts.tls.names_files() {
            Some(TlsConnector::new(&opts.tls)?)
        } else {
            None
        };
        Ok(ConnectionPool {
            tls: tls.filter(|_| service.tls),
            opts,
            service,
            slots: Default::default(),
            next_host: AtomicUsize::new(0),
            counters: NetCounters::default(),
        })
    }

    /// Whether connections use TLS (the service URL is `pulsar+ssl://`).
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
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
        // The far end of the TLS session: the Pulsar proxy when there is one, else the broker.
        let far = proxy.unwrap_or(addr);
        let proxy_to = proxy.map(|_| addr);
        let (dial, sni_for) = match self.opts.sni_proxy.as_deref() {
            Some(sni) => (sni, Some(far)),
            None => (far, None),
        };
        let route = Route { sni_for, proxy_to };
        let conn = Connection::connect(dial, &self.opts, self.tls.as_ref(), route)
            .await
            .inspect_err(|_| bump(&self.counters.connections_failed))?;
        bump(&self.counters.connections_opened);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// A connection to any host of the service URL, trying them in turn; a round through every
    /// host that fails backs off before the next, until the connect timeout's budget is spent.
    pub async fn get_service(&self) -> Result<Connection, NetError> {
        let hosts = &self.service.hosts;
        let deadline = tokio::time::Instant::now() + self.opts.connect_timeout;
        let mut backoff = Backoff::default_reconnect();
        loop {
            let mut last_err = None;
            for _ in 0..hosts.len() {
                let i = self.next_host.load(Ordering::Relaxed) % hosts.len();
                match self.get(&hosts[i]).await {
                    Ok(c) => return Ok(c),
                    Err(e) => {
                        log::warn!("cannot reach {}: {e}", hosts[i]);
                        // Only auth-style failures are final; anything else tries the next host.
                        if !e.is_retriable() {
                            return Err(e);
                        }
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
