//! The official client's `Message` and `MessageId` (`magnetar.compat`), and the compat paths
//! that run once per message: `receive(timeout_millis)`, `acknowledge(msg)` and
//! `send_async(content, callback)` (classes of their own over the engine handles). They are here rather than in Python because a Python
//! wrapper per message and per id, and a Python frame per call, cost the compatibility layer
//! as much CPU again as the engine's own work (docs/compat.md). Everything else of the compat
//! API stays in `python/magnetar/compat/`, which also owns its exception classes: errors go
//! through its `translate`, as in Python.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyInt, PyMemoryView, PyString, PyType};

use super::consumer::PyConsumer;
use super::convert;
use super::dispatch::log_callback_error;
use super::errors::{exception_class, to_pyerr};
use super::producer::PyProducer;
use super::runtime::EngineHandle;
use super::schema::{self, Binding};
use super::types::{id_ends, id_hash, new_id, new_message_with, untracked, PyMessage, PyMessageId};
use crate::client;

/// What the compat paths raise and hand out, given by `magnetar.compat` when it is imported
/// (`_register_compat`): the engine names no module of the compatibility layer, which may
/// move its pieces around freely.
struct CompatNames {
    translate: Py<PyAny>,
    interrupted: Py<PyAny>,
    result: Py<PyAny>,
    result_of: Py<PyAny>,
    encryption_context: Py<PyAny>,
}

static COMPAT: PyOnceLock<CompatNames> = PyOnceLock::new();

/// Called once by `magnetar.compat` at import, before any of its objects exist.
#[pyfunction]
fn _register_compat(
    py: Python<'_>,
    translate: Py<PyAny>,
    interrupted: Py<PyAny>,
    result: Py<PyAny>,
    result_of: Py<PyAny>,
    encryption_context: Py<PyAny>,
) {
    // A second registration (a reload of the module) keeps the first: the classes stay equal.
    let _ = COMPAT.set(
        py,
        CompatNames {
            translate,
            interrupted,
            result,
            result_of,
            encryption_context,
        },
    );
}

fn compat_names(py: Python<'_>) -> PyResult<&CompatNames> {
    COMPAT
        .get(py)
        .ok_or_else(|| PyRuntimeError::new_err("magnetar.compat has not registered its classes (import it first)"))
}

/// `e` as the compatibility API raises it: magnetar's errors as the official classes (through
/// `magnetar.compat.exceptions.translate`), Ctrl-C during a wait as `Interrupted`, each
/// caused by the original; anything else as it is.
fn compat_err(py: Python<'_>, e: PyErr) -> PyErr {
    let mapped = if e.is_instance_of::<PyKeyboardInterrupt>(py) {
        compat_names(py).and_then(|c| c.interrupted.bind(py).call1(("interrupted",)))
    } else {
        match exception_class(py, "PulsarError") {
            Ok(native) if e.value(py).is_instance(&native).unwrap_or(false) => {
                compat_names(py).and_then(|c| c.translate.bind(py).call1((e.value(py),)))
            }
            Ok(_) => return e,
            Err(import_failed) => Err(import_failed),
        }
    };
    match mapped {
        Ok(exc) => {
            let out = PyErr::from_value(exc);
            out.set_cause(py, Some(e));
            out
        }
        Err(failed) => failed,
    }
}

/// `compat_err` of an engine error.
fn engine_err(py: Python<'_>, e: client::Error) -> PyErr {
    compat_err(py, to_pyerr(e))
}

/// The official `MessageId`: `MessageId(partition, ledger_id, entry_id, batch_index)` (that
/// order), accessor methods, `earliest`/`latest`, comparisons. Equal to other compat ids only;
/// hashes as the native id does. `_id` is the native id.
#[pyclass(name = "MessageId", module = "magnetar.compat._pulsar", frozen)]
pub struct PyCompatId {
    inner: client::MessageId,
}

fn compat_id(py: Python<'_>, inner: client::MessageId) -> PyResult<Py<PyCompatId>> {
    untracked(py, PyCompatId { inner })
}

id_ends!(PyCompatId);

#[pymethods]
impl PyCompatId {
    #[new]
    #[pyo3(
        signature = (partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1),
        text_signature = "(partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1)"
    )]
    fn new(partition: i32, ledger_id: i64, entry_id: i64, batch_index: i32) -> Self {
        PyCompatId {
            inner: client::MessageId::new(ledger_id, entry_id, partition, batch_index),
        }
    }

    /// The compat id of a native `magnetar.MessageId`.
    #[classmethod]
    fn _of(_cls: &Bound<'_, PyType>, native: &Bound<'_, PyMessageId>) -> Self {
        PyCompatId {
            inner: native.get().inner.clone(),
        }
    }

    /// The id itself (the official client has two id types; here there is one).
    #[classmethod]
    fn wrap(_cls: &Bound<'_, PyType>, msg_id: &Bound<'_, PyAny>) -> PyResult<Py<PyCompatId>> {
        if let Ok(me) = msg_id.cast::<PyCompatId>() {
            return Ok(me.clone().unbind());
        }
        if let Ok(native) = msg_id.cast::<PyMessageId>() {
            return compat_id(msg_id.py(), native.get().inner.clone());
        }
        Err(PyValueError::new_err(format!("not a message id: {}", msg_id.repr()?)))
    }

    /// The native `magnetar.MessageId`, which the engine takes.
    #[getter]
    fn _id(&self, py: Python<'_>) -> PyResult<Py<PyMessageId>> {
        new_id(py, self.inner.clone())
    }

    fn ledger_id(&self) -> i64 {
        self.inner.ledger_id
    }

    fn entry_id(&self) -> i64 {
        self.inner.entry_id
    }

    fn batch_index(&self) -> i32 {
        self.inner.batch_index
    }

    fn partition(&self) -> i32 {
        self.inner.partition
    }

    /// The id as bytes (a `MessageIdData` protobuf, as every Pulsar client writes it).
    fn serialize<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.serialize())
    }

    /// Parses bytes from `serialize()`; `topic` names the topic the id is of.
    #[staticmethod]
    #[pyo3(signature = (message_id_bytes, topic=None))]
    fn deserialize(message_id_bytes: &[u8], topic: Option<&str>) -> PyResult<Self> {
        let mut inner = client::MessageId::deserialize(message_id_bytes).map_err(to_pyerr)?;
        inner.topic = topic.map(Arc::from);
        Ok(PyCompatId { inner })
    }

    fn __str__(&self) -> String {
        let i = &self.inner;
        format!("({},{},{},{})", i.ledger_id, i.entry_id, i.partition, i.batch_index)
    }

    fn __repr__(&self) -> String {
        self.__str__()
    }

    fn __hash__(&self) -> u64 {
        id_hash(&self.inner)
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let Ok(other) = other.cast::<PyCompatId>() else {
            return Ok(py.NotImplemented());
        };
        let r = op.matches(self.inner.cmp(&other.get().inner));
        Ok(PyBool::new(py, r).to_owned().into_any().unbind())
    }

    /// Pickles as the native id it holds, so the batch size and topic survive.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (Py<PyMessageId>,))> {
        let py = slf.py();
        Ok((slf.get_type().getattr("_of")?, (new_id(py, slf.get().inner.clone())?,)))
    }
}

/// The official `Message`: every field is a method. Holds what a native message holds (the
/// engine's message and the consumer's schema), so receiving makes one object.
#[pyclass(name = "Message", module = "magnetar.compat", frozen)]
pub struct PyCompatMessage {
    inner: client::Message,
    schema: Option<Arc<Binding>>,
}

fn compat_message(
    py: Python<'_>,
    inner: client::Message,
    schema: Option<&Arc<Binding>>,
) -> PyResult<Py<PyCompatMessage>> {
    untracked(
        py,
        PyCompatMessage {
            inner,
            schema: schema.cloned(),
        },
    )
}

#[pymethods]
impl PyCompatMessage {
    /// The compat message of a native `magnetar.Message` (decoded by the same schema).
    #[classmethod]
    fn _of(cls: &Bound<'_, PyType>, native: &Bound<'_, PyMessage>) -> PyResult<Py<PyCompatMessage>> {
        let m = native.get();
        compat_message(cls.py(), m.inner.clone(), m.schema.as_ref())
    }

    /// The native id of the message, which the engine takes.
    #[getter]
    fn _id(&self, py: Python<'_>) -> PyResult<Py<PyMessageId>> {
        new_id(py, self.inner.id.clone())
    }

    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.payload)
    }

    /// The payload decoded by the schema. A null value decodes the empty payload, as in the
    /// official client.
    fn value(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.inner.null_value() {
            let empty = PyBytes::new(py, b"");
            return match &self.schema {
                None => Ok(empty.into_any().unbind()),
                Some(b) => Ok(b.schema().bind(py).call_method1("decode", (empty,))?.unbind()),
            };
        }
        if self.schema.is_none() {
            return Ok(PyBytes::new(py, &self.inner.payload).into_any().unbind());
        }
        // The schema decodes a native message (its writer schema, its key); rare enough next
        // to the decoding itself to make one.
        let native = new_message_with(py, self.inner.clone(), self.schema.as_ref())?;
        schema::value(native.bind(py).as_any(), &self.inner, self.schema.as_deref())
    }

    fn properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.inner.properties() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    fn partition_key(&self) -> &str {
        self.inner.key().unwrap_or("")
    }

    fn ordering_key(&self) -> String {
        self.inner
            .ordering_key()
            .map_or_else(String::new, |k| String::from_utf8_lossy(k).into_owned())
    }

    /// Milliseconds since the epoch.
    fn publish_timestamp(&self) -> u64 {
        self.inner.publish_time()
    }

    /// Milliseconds since the epoch; 0 when unset.
    fn event_timestamp(&self) -> u64 {
        self.inner.event_time().unwrap_or(0)
    }

    fn message_id(&self, py: Python<'_>) -> PyResult<Py<PyCompatId>> {
        compat_id(py, self.inner.id.clone())
    }

    fn topic_name(&self) -> &str {
        &self.inner.topic
    }

    fn redelivery_count(&self) -> u32 {
        self.inner.redelivery_count
    }

    /// The registry's version bytes as a str (one char per byte), "" when none.
    fn schema_version(&self) -> String {
        let version = self.inner.metadata.schema_version.as_deref().unwrap_or_default();
        version.iter().map(|&b| b as char).collect()
    }

    fn producer_name(&self) -> &str {
        self.inner.producer_name()
    }

    fn has_null_value(&self) -> bool {
        self.inner.null_value()
    }

    /// `pulsar.EncryptionContext` of an encrypted message, or None.
    fn encryption_context(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match super::crypto::context(py, &self.inner)? {
            None => Ok(None),
            Some(native) => Ok(Some(
                compat_names(py)?.encryption_context.bind(py).call1((native,))?.unbind(),
            )),
        }
    }

    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        let id = &self.inner.id;
        Ok(format!(
            "Message(topic={}, id=({},{},{},{}), {} bytes)",
            PyString::new(py, &self.inner.topic).repr()?,
            id.ledger_id,
            id.entry_id,
            id.partition,
            id.batch_index,
            self.inner.payload.len()
        ))
    }
}

/// `timeout_millis` of the official API as a deadline: None waits for ever; anything but an
/// int is refused with the official message.
fn millis_deadline(timeout_millis: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Instant>> {
    let Some(t) = timeout_millis.filter(|t| !t.is_none()) else {
        return Ok(None);
    };
    if !t.is_instance_of::<PyInt>() || t.is_instance_of::<PyBool>() {
        return Err(PyValueError::new_err(format!(
            "Argument timeout_millis is expected to be of type 'int' and not '{}'",
            t.get_type().name()?
        )));
    }
    match t.extract::<u32>() {
        Ok(ms) => Ok(Some(Instant::now() + Duration::from_millis(u64::from(ms)))),
        // Negative or huge: in seconds, as the engine's own timeouts read them.
        Err(_) => convert::deadline(Some(&t.call_method1("__truediv__", (1000,))?)),
    }
}

/// The compatibility API's per-message calls on a consumer's engine handle, a class of its
/// own (`magnetar.compat` makes one per consumer or reader) so that the engine's handles carry
/// nothing of the compatibility API.
#[pyclass(name = "_CompatReceiving", module = "magnetar._core", frozen)]
pub struct PyCompatReceiving {
    consumer: Py<PyConsumer>,
}

#[pymethods]
impl PyCompatReceiving {
    #[new]
    fn new(consumer: Py<PyConsumer>) -> Self {
        PyCompatReceiving { consumer }
    }

    /// `Consumer.receive(timeout_millis)` of the compatibility API: the next message as a
    /// `magnetar.compat.Message`, raising the compat exception classes.
    #[pyo3(signature = (timeout_millis=None))]
    fn receive(&self, py: Python<'_>, timeout_millis: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyCompatMessage>> {
        let consumer = self.consumer.get();
        // A negative timeout is the engine's InvalidConfiguration: raised as the compat class.
        let deadline = millis_deadline(timeout_millis).map_err(|e| compat_err(py, e))?;
        let m = consumer.receive_one(py, deadline).map_err(|e| compat_err(py, e))?;
        compat_message(py, m, consumer.binding())
    }

    /// `Consumer.acknowledge(msg)` of the compatibility API for a `magnetar.compat.Message`.
    fn ack(&self, py: Python<'_>, message: &Bound<'_, PyCompatMessage>) -> PyResult<()> {
        let consumer = self.consumer.get();
        consumer.guard().check().map_err(|e| compat_err(py, e))?;
        consumer
            .engine()
            .ack(&message.get().inner.id)
            .map_err(|e| engine_err(py, e))
    }
}

/// The compatibility API's `send_async` on a producer's engine handle (see
/// [`PyCompatReceiving`]).
#[pyclass(name = "_CompatProducer", module = "magnetar._core", frozen)]
pub struct PyCompatProducer {
    producer: Py<PyProducer>,
}

#[pymethods]
impl PyCompatProducer {
    #[new]
    fn new(producer: Py<PyProducer>) -> Self {
        PyCompatProducer { producer }
    }

    /// `Producer.send_async(content, callback)` of the compatibility API: queues the message
    /// (`fields`: the native keyword arguments, or None) and calls `callback(result, msg_id)`
    /// on the client's dispatch thread once it completes. Raises the compat exception classes.
    #[pyo3(signature = (content, callback, fields=None))]
    fn send_async(
        &self,
        py: Python<'_>,
        content: &Bound<'_, PyAny>,
        callback: Option<Py<PyAny>>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let producer = self.producer.get();
        // Without a schema (BytesSchema) only bytes-like content goes as it is; None is a null value.
        let sendable = producer.has_schema()
            || content.is_none()
            || content.is_instance_of::<PyBytes>()
            || content.is_instance_of::<PyByteArray>()
            || content.is_instance_of::<PyMemoryView>();
        if !sendable {
            return Err(PyTypeError::new_err(format!(
                "content must be bytes, not {}",
                content.get_type().name()?
            )));
        }
        let msg = producer.outgoing(content, fields).map_err(|e| compat_err(py, e))?;
        let done: client::SendCallback = match callback.filter(|c| !c.is_none(py)) {
            None => Box::new(|_| {}),
            Some(callback) => {
                let dispatch = producer.dispatch().clone();
                Box::new(move |result| dispatch.push(Box::new(move |py| call_back(py, &callback, result))))
            }
        };
        producer.enqueue(py, msg, done).map_err(|e| compat_err(py, e))
    }
}

/// `callback(Result.Ok, msg_id)`, or `callback(result, None)` with the failure's `Result`.
fn call_back(py: Python<'_>, callback: &Py<PyAny>, result: client::Result<client::MessageId>) {
    let args = || -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        Ok(match result {
            Ok(id) => (
                compat_names(py)?.result.bind(py).getattr("Ok")?.unbind(),
                compat_id(py, id)?.into_any(),
            ),
            Err(e) => (
                compat_names(py)?
                    .result_of
                    .bind(py)
                    .call1((to_pyerr(e).value(py),))?
                    .unbind(),
                py.None(),
            ),
        })
    };
    // The official client aborts the process when a callback raises (they run in C++);
    // magnetar logs and goes on.
    if let Err(e) = args().and_then(|a| callback.bind(py).call1(a)) {
        log_callback_error(py, &e);
    }
}

/// Registers the compat classes (as `CompatMessage` and `CompatMessageId`: their Python names
/// are the official `Message` and `MessageId`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CompatMessage", py.get_type::<PyCompatMessage>())?;
    m.add("CompatMessageId", py.get_type::<PyCompatId>())?;
    m.add_class::<PyCompatReceiving>()?;
    m.add_class::<PyCompatProducer>()?;
    m.add_function(wrap_pyfunction!(_register_compat, m)?)?;
    Ok(())
}
