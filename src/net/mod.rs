//! Sockets and timers: one task per connection owns its socket, a pool shares connections per
//! broker, lookups find the broker that owns a topic, backoff spaces retries, `tls` wraps
//! sockets for `pulsar+ssl://`, `http` looks topics up over the admin REST API for `http://` and
//! `https://` service URLs. This layer knows frames and request ids, never what a producer
//! or consumer means by them.

pub mod auth;
pub mod backoff;
pub mod connection;
pub mod error;
pub mod failover;
pub mod http;
pub mod lookup;
pub mod pool;
pub mod stats;
pub mod tls;
pub mod url;

pub use auth::{AuthProvider, StaticAuth, TokenFile};
pub use connection::{Connection, ConnectionOptions, Event, HandlerId};
pub use error::NetError;
pub use pool::ConnectionPool;
pub use tls::{TlsConnector, TlsOptions};
