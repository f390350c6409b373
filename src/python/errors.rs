//! The one place where engine errors become Python exceptions. The classes live in
//! `magnetar/exceptions.py`; each [`ErrorKind`] maps to its most specific class.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::client::{Error, ErrorKind};

static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The Python class name for `kind`.
pub fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Other => "PulsarError",
        ErrorKind::Timeout => "Timeout",
        ErrorKind::Connect => "ConnectError",
        ErrorKind::Authentication => "AuthenticationError",
        ErrorKind::Authorization => "AuthorizationError",
        ErrorKind::TopicNotFound => "TopicNotFound",
        ErrorKind::ProducerBusy => "ProducerBusy",
        ErrorKind::ConsumerBusy => "ConsumerBusy",
        ErrorKind::ProducerQueueFull => "ProducerQueueFull",
        ErrorKind::MessageTooLarge => "MessageTooLarge",
        ErrorKind::AlreadyClosed => "AlreadyClosed",
        ErrorKind::TopicTerminated => "TopicTerminated",
        ErrorKind::InvalidConfiguration => "InvalidConfiguration",
        ErrorKind::Protocol => "ProtocolError",
        ErrorKind::IncompatibleSchema => "IncompatibleSchema",
        ErrorKind::Transaction => "TransactionError",
        ErrorKind::Crypto => "CryptoError",
        ErrorKind::SchemaDecode => "SchemaDecodeError",
    }
}

/// Every kind, for the test that checks each maps to an existing class.
pub const ALL_KINDS: [ErrorKind; 18] = [
    ErrorKind::Other,
    ErrorKind::Timeout,
    ErrorKind::Connect,
    ErrorKind::Authentication,
    ErrorKind::Authorization,
    ErrorKind::TopicNotFound,
    ErrorKind::ProducerBusy,
    ErrorKind::ConsumerBusy,
    ErrorKind::ProducerQueueFull,
    ErrorKind::MessageTooLarge,
    ErrorKind::AlreadyClosed,
    ErrorKind::TopicTerminated,
    ErrorKind::InvalidConfiguration,
    ErrorKind::Protocol,
    ErrorKind::IncompatibleSchema,
    ErrorKind::Transaction,
    ErrorKind::Crypto,
    ErrorKind::SchemaDecode,
];

/// The class `name` of `magnetar.exceptions` (imported once).
pub fn exception_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let module = MODULE.get_or_try_init(py, || -> PyResult<_> { Ok(py.import("magnetar.exceptions")?.unbind()) })?;
    module.bind(py).getattr(name)
}

fn build(py: Python<'_>, class: &str, message: &str, code: Option<i32>) -> PyResult<PyErr> {
    let cls = exception_class(py, class)?;
    let exc = cls.call1((message,))?;
    exc.setattr("code", code)?;
    Ok(PyErr::from_value(exc))
}

/// Converts an engine error into the matching `magnetar` exception, carrying the broker's
/// error code in `.code`.
pub fn to_pyerr(e: Error) -> PyErr {
    Python::attach(|py| {
        build(py, class_name(e.kind()), e.message(), e.server_code()).unwrap_or_else(|import_failed| import_failed)
    })
}

/// Error for an object used in a process forked from the one that created it.
pub fn already_forked() -> PyErr {
    to_pyerr(Error::new(
        ErrorKind::AlreadyClosed,
        "this object was created in a parent process and cannot be used after fork(); create a new Client in the child",
    ))
}

/// Error for invalid arguments.
pub fn invalid(message: impl Into<String>) -> PyErr {
    to_pyerr(Error::invalid(message))
}
