//! Errors of the network layer.

use thiserror::Error;

use crate::protocol::pb::ServerError;
use crate::protocol::ProtocolError;

/// Why a network operation failed.
#[derive(Debug, Error, Clone)]
pub enum NetError {
    /// Could not open a TCP connection to any host.
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    /// The TLS handshake failed: the broker's certificate was refused, or the broker refused ours.
    #[error("TLS handshake with {addr} failed: {reason}")]
    Tls { addr: String, reason: String },
    /// The TLS settings cannot be used (a missing or malformed certificate or key file).
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    /// The socket failed after it was open.
    #[error("i/o error: {0}")]
    Io(String),
    /// The connection closed (by either side) before the operation completed.
    #[error("connection closed: {0}")]
    Closed(String),
    /// The peer sent bytes that are not the Pulsar protocol.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The peer sent a well-formed command that makes no sense here.
    #[error("unexpected response: {0}")]
    UnexpectedResponse(String),
    /// The operation did not complete within its timeout.
    #[error("{0} timed out")]
    Timeout(&'static str),
    /// The broker answered with an error.
    #[error("broker error {code:?}: {message}")]
    Server { code: ServerError, message: String },
    /// A lookup was redirected more times than allowed.
    #[error("too many lookup redirects for {0}")]
    TooManyRedirects(String),
    /// A service URL that cannot be parsed.
    #[error("invalid service URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
}

impl NetError {
    /// The broker's refusal as an answer body states it: an optional code and message.
    pub(crate) fn refused(code: Option<i32>, message: Option<String>, fallback: &str) -> NetError {
        NetError::Server {
            code: code.map_or(ServerError::UnknownError, ServerError::from_code),
            message: message.unwrap_or_else(|| fallback.into()),
        }
    }

    /// Whether retrying on a new connection may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            NetError::Connect { .. } | NetError::Io(_) | NetError::Closed(_) | NetError::Timeout(_) => true,
            NetError::Protocol(_) | NetError::UnexpectedResponse(_) => true,
            NetError::Server { code, .. } => matches!(
                code,
                ServerError::ServiceNotReady
                    | ServerError::TooManyRequests
                    | ServerError::MetadataError
                    | ServerError::PersistenceError
                    | ServerError::UnknownError
                    | ServerError::ProducerBlockedQuotaExceededError
                    | ServerError::ConsumerNotFound
            ),
            // A certificate verdict does not change by retrying, so report it at once.
            NetError::Tls { .. } | NetError::TlsConfig(_) => false,
            NetError::TooManyRedirects(_) | NetError::InvalidUrl { .. } => false,
        }
    }
}
