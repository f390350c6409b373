//! The error users see. Every failure of the engine ends up as one [`Error`] whose [`ErrorKind`]
//! picks the Python exception class, carrying the broker's error code when there is one.

use std::fmt;

use crate::net::NetError;
use crate::protocol::pb::ServerError;
use crate::protocol::ProtocolError;

/// What went wrong, at the granularity of the public exception classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Anything without a more specific kind.
    Other,
    /// An operation did not complete within its timeout.
    Timeout,
    /// No broker could be reached, or the connection was lost for good.
    Connect,
    /// The broker rejected the credentials.
    Authentication,
    /// The credentials lack a permission.
    Authorization,
    /// The topic (or its namespace) does not exist and cannot be created.
    TopicNotFound,
    /// Another producer holds exclusive access, or the name is taken.
    ProducerBusy,
    /// An exclusive subscription already has a consumer.
    ConsumerBusy,
    /// The pending-message queue (or memory limit) is full and blocking is off.
    ProducerQueueFull,
    /// The message is larger than the broker accepts.
    MessageTooLarge,
    /// The client, producer or consumer was closed.
    AlreadyClosed,
    /// The topic was terminated: no more messages can be published or will be delivered.
    TopicTerminated,
    /// An invalid option value, topic name or argument.
    InvalidConfiguration,
    /// The peer violated the protocol.
    Protocol,
    /// The broker refused a schema as incompatible with the topic's.
    IncompatibleSchema,
    /// A transaction cannot go on: it is finished (committed, aborted, timed out), an
    /// operation in it failed, or its coordinator cannot be reached or refused it.
    Transaction,
    /// End-to-end encryption failed: a key cannot be had or used, or a payload cannot be
    /// sealed.
    Crypto,
    /// A payload does not decode with the topic's schema (the message names the topic, the
    /// message id and the schema version).
    SchemaDecode,
}

/// An engine error: a kind, a message, and the broker's error code when the broker said no.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    server_code: Option<i32>,
}

/// Results of the engine.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            server_code: None,
        }
    }

    /// Invalid configuration or argument.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidConfiguration, message)
    }

    /// A transaction error (see [`ErrorKind::Transaction`]).
    pub fn transaction(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transaction, message)
    }

    /// The same error as a transaction error, keeping its message and broker code, prefixed by
    /// what was being done.
    pub fn into_transaction(self, doing: &str) -> Self {
        Error {
            kind: ErrorKind::Transaction,
            message: format!("{doing}: {}", self.message),
            server_code: self.server_code,
        }
    }

    /// Use after close.
    pub fn closed(what: &str) -> Self {
        Self::new(ErrorKind::AlreadyClosed, format!("{what} is closed"))
    }

    /// Operation timed out.
    pub fn timeout(what: &str) -> Self {
        Self::new(ErrorKind::Timeout, format!("{what} timed out"))
    }

    /// The kind, which selects the Python exception class.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The broker's `ServerError` code, if the broker reported this error.
    pub fn server_code(&self) -> Option<i32> {
        self.server_code
    }

    /// Whether the operation may succeed if retried on a fresh connection.
    pub fn is_retriable(&self) -> bool {
        match self.kind {
            ErrorKind::Connect | ErrorKind::Timeout | ErrorKind::Protocol => true,
            ErrorKind::Other => self.server_code.is_some_and(|c| {
                matches!(
                    ServerError::try_from(c),
                    Ok(ServerError::ServiceNotReady
                        | ServerError::TooManyRequests
                        | ServerError::MetadataError
                        | ServerError::PersistenceError
                        | ServerError::UnknownError
                        | ServerError::ConsumerNotFound)
                )
            }),
            _ => false,
        }
    }

    /// Whether the broker fenced this producer off the topic (an `ExclusiveWithFencing` producer
    /// took it over): retrying cannot succeed.
    pub fn is_fenced(&self) -> bool {
        self.server_code == Some(ServerError::ProducerFenced as i32)
    }

    /// The error for a broker `ServerError`.
    /// The broker's error with the code as it came off the wire.
    pub(crate) fn from_code(code: i32, message: &str) -> Self {
        Error::from_server(ServerError::from_code(code), message)
    }

    pub fn from_server(code: ServerError, message: &str) -> Self {
        let kind = match code {
            ServerError::AuthenticationError => ErrorKind::Authentication,
            ServerError::AuthorizationError => ErrorKind::Authorization,
            ServerError::TopicNotFound | ServerError::SubscriptionNotFound => ErrorKind::TopicNotFound,
            ServerError::ProducerBusy | ServerError::ProducerFenced => ErrorKind::ProducerBusy,
            ServerError::ConsumerBusy => ErrorKind::ConsumerBusy,
            ServerError::TopicTerminatedError => ErrorKind::TopicTerminated,
            ServerError::InvalidTopicName => ErrorKind::InvalidConfiguration,
            ServerError::ChecksumError => ErrorKind::Protocol,
            ServerError::IncompatibleSchema => ErrorKind::IncompatibleSchema,
            ServerError::TransactionCoordinatorNotFound
            | ServerError::InvalidTxnStatus
            | ServerError::TransactionConflict
            | ServerError::TransactionNotFound => ErrorKind::Transaction,
            ServerError::ProducerBlockedQuotaExceededError | ServerError::ProducerBlockedQuotaExceededException => {
                ErrorKind::ProducerQueueFull
            }
            _ => ErrorKind::Other,
        };
        let message = if message.is_empty() {
            format!("{code:?}")
        } else {
            format!("{code:?}: {message}")
        };
        Error {
            kind,
            message,
            server_code: Some(code as i32),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<NetError> for Error {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Server { code, message } => Error::from_server(code, &message),
            NetError::Timeout(what) => Error::new(ErrorKind::Timeout, format!("{what} timed out")),
            NetError::Connect { .. } | NetError::Tls { .. } | NetError::Io(_) | NetError::Closed(_) => {
                Error::new(ErrorKind::Connect, e.to_string())
            }
            NetError::Protocol(_) | NetError::UnexpectedResponse(_) => Error::new(ErrorKind::Protocol, e.to_string()),
            NetError::TooManyRedirects(_) => Error::new(ErrorKind::Connect, e.to_string()),
            NetError::InvalidUrl { .. } | NetError::TlsConfig(_) => Error::invalid(e.to_string()),
        }
    }
}

impl From<ProtocolError> for Error {
    fn from(e: ProtocolError) -> Self {
        Error::new(ErrorKind::Protocol, e.to_string())
    }
}
