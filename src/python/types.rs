//! `MessageId`, `Message` and the send future as Python objects.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyType};

use super::dispatch::Dispatcher;
use super::errors::to_pyerr;
use super::getters;
use crate::client::{self, Error, ErrorKind};

/// A new Python object that the cyclic garbage collector does not track. PyO3 makes every
/// class collectable, but these objects hold no Python references (or only transiently), and
/// tracking hundreds of thousands of messages or futures makes `gc` passes dominate the cost
/// of receiving and sending.
pub fn untracked<T: pyo3::PyClass + Into<pyo3::PyClassInitializer<T>>>(py: Python<'_>, value: T) -> PyResult<Py<T>> {
    let obj = Py::new(py, value)?;
    // SAFETY: `obj` is a live object of a GC-enabled type; untracking is idempotent and
    // PyO3's dealloc untracks again harmlessly.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(obj.as_ptr() as *mut std::ffi::c_void) };
    Ok(obj)
}

/// A `MessageId` object.
pub fn new_id(py: Python<'_>, inner: client::MessageId) -> PyResult<Py<PyMessageId>> {
    untracked(py, PyMessageId { inner })
}

/// A `Message` object.
/// A `Message` object, decoded (`msg.value`) by its consumer's schema.
pub fn new_message_with(
    py: Python<'_>,
    inner: client::Message,
    schema: Option<&Arc<super::schema::Binding>>,
) -> PyResult<Py<PyMessage>> {
    let schema = schema.cloned();
    untracked(py, PyMessage { inner, schema })
}

/// The hash of an id in Python (`hash(msg_id)`), for the native and the compat id alike.
pub fn id_hash(id: &client::MessageId) -> u64 {
    let mut h = DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

/// The `earliest` and `latest` class attributes of an id class (a pyclass whose field `inner`
/// is a `client::MessageId`): the native `MessageId` and the compat one have the same.
macro_rules! id_ends {
    ($class:ty) => {
        #[pyo3::pymethods]
        impl $class {
            /// Before the first message of a topic.
            #[classattr]
            fn earliest() -> Self {
                Self {
                    inner: $crate::client::MessageId::EARLIEST,
                }
            }

            /// After the last message of a topic.
            #[classattr]
            fn latest() -> Self {
                Self {
                    inner: $crate::client::MessageId::LATEST,
                }
            }
        }
    };
}
pub(crate) use id_ends;

/// Where a message sits in a topic. Ordered, hashable, picklable; `serialize()` gives the same
/// bytes as the Java and C++ clients.
#[pyclass(name = "MessageId", module = "magnetar", frozen, from_py_object)]
#[derive(Clone)]
pub struct PyMessageId {
    pub inner: client::MessageId,
}

/// `MessageId(ledger_id, entry_id, partition, batch_index, batch_size, topic)`: how an id pickles.
type IdArgs = (i64, i64, i32, i32, i32, Option<String>);

getters!(PyMessageId {
    ledger_id: i64;
    entry_id: i64;
    partition: i32;
    batch_index: i32;
    batch_size: i32;
});

id_ends!(PyMessageId);

#[pymethods]
impl PyMessageId {
    #[new]
    #[pyo3(
        signature = (ledger_id, entry_id, partition=-1, batch_index=-1, batch_size=0, topic=None),
        text_signature = "(ledger_id, entry_id, partition=-1, batch_index=-1, batch_size=0, topic=None)"
    )]
    fn new(
        ledger_id: i64,
        entry_id: i64,
        partition: i32,
        batch_index: i32,
        batch_size: i32,
        topic: Option<String>,
    ) -> Self {
        let mut inner = client::MessageId::new(ledger_id, entry_id, partition, batch_index);
        inner.batch_size = batch_size;
        inner.topic = topic.map(|t| Arc::from(t.as_str()));
        PyMessageId { inner }
    }

    #[getter]
    fn topic(&self) -> Option<String> {
        self.inner.topic.as_deref().map(str::to_string)
    }

    /// The id as bytes (a `MessageIdData` protobuf).
    fn serialize<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.serialize())
    }

    /// Parses bytes from `serialize()` (of any Pulsar client).
    #[classmethod]
    #[pyo3(signature = (data, topic=None))]
    fn deserialize(_cls: &Bound<'_, PyType>, data: &[u8], topic: Option<String>) -> PyResult<Self> {
        let mut inner = client::MessageId::deserialize(data).map_err(to_pyerr)?;
        inner.topic = topic.map(|t| Arc::from(t.as_str()));
        Ok(PyMessageId { inner })
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let Ok(other) = other.cast::<PyMessageId>() else {
            return Ok(py.NotImplemented());
        };
        let o = &other.get().inner;
        let r = op.matches(self.inner.cmp(o));
        Ok(pyo3::types::PyBool::new(py, r).to_owned().into_any().unbind())
    }

    fn __hash__(&self) -> u64 {
        id_hash(&self.inner)
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "MessageId(ledger_id={}, entry_id={}, partition={}, batch_index={})",
            self.inner.ledger_id, self.inner.entry_id, self.inner.partition, self.inner.batch_index
        )
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, IdArgs)> {
        let me = slf.get();
        Ok((
            slf.get_type().into_any(),
            (
                me.inner.ledger_id,
                me.inner.entry_id,
                me.inner.partition,
                me.inner.batch_index,
                me.inner.batch_size,
                me.topic(),
            ),
        ))
    }
}

/// A received message.
#[pyclass(name = "Message", module = "magnetar", frozen)]
pub struct PyMessage {
    pub inner: client::Message,
    /// The consumer's schema, which decodes `value`.
    pub schema: Option<Arc<super::schema::Binding>>,
}

getters!(PyMessage {
    fn key() -> Option<&str>;
    /// Publish time, milliseconds since the epoch.
    fn publish_time() -> u64;
    /// Event time in milliseconds since the epoch, or None.
    fn event_time() -> Option<u64>;
    redelivery_count: u32;
    fn producer_name() -> &str;
    fn sequence_id() -> u64;
    /// Whether the message has a null value (a tombstone, sent as `send(None)`): `value` is
    /// None and `data` empty. An empty payload is not a null value.
    fn null_value() -> bool;
});

#[pymethods]
impl PyMessage {
    /// The payload bytes.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.payload)
    }

    /// The payload decoded by the consumer's schema (the payload bytes without one); None for
    /// a null value.
    #[getter]
    fn value(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let msg = slf.get();
        super::schema::value(slf.as_any(), &msg.inner, msg.schema.as_deref())
    }

    /// The registry's version of the schema the message was written with, or None.
    #[getter]
    fn schema_version<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        super::schema::version(&self.inner).map(|v| PyBytes::new(py, v))
    }

    /// The writer schema of this message's version (see `magnetar.schema`), fetched once.
    fn _writer_schema(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        super::schema::writer(py, &self.inner, self.schema.as_deref())
    }

    /// How the message was encrypted end to end, or None when it was not.
    #[getter]
    fn encryption(&self, py: Python<'_>) -> PyResult<Option<Py<super::crypto::PyEncryptionContext>>> {
        super::crypto::context(py, &self.inner)
    }

    /// Whether the key is the base64 of bytes (a KeyValue SEPARATED key).
    #[getter]
    fn _key_b64(&self) -> bool {
        self.inner.key_is_b64()
    }

    /// The payload, decoded as UTF-8.
    fn text(&self) -> PyResult<String> {
        std::str::from_utf8(&self.inner.payload)
            .map(str::to_string)
            .map_err(|e| pyo3::exceptions::PyUnicodeDecodeError::new_err(e.to_string()))
    }

    #[getter]
    fn ordering_key<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.ordering_key().map(|k| PyBytes::new(py, k))
    }
    #[getter]
    fn properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.inner.properties() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }
    #[getter]
    fn message_id(&self, py: Python<'_>) -> PyResult<Py<PyMessageId>> {
        new_id(py, self.inner.id.clone())
    }
    /// For a message reassembled from chunks, the id of its first chunk (`message_id` is
    /// its last chunk's); None otherwise.
    #[getter]
    fn first_chunk_message_id(&self, py: Python<'_>) -> PyResult<Option<Py<PyMessageId>>> {
        let Some(&(ledger_id, entry_id)) = self.inner.first_chunk.as_deref() else {
            return Ok(None);
        };
        let mut id = self.inner.id.clone();
        (id.ledger_id, id.entry_id, id.batch_index, id.batch_size) = (ledger_id, entry_id, -1, 0);
        new_id(py, id).map(Some)
    }
    #[getter]
    fn topic(&self) -> &str {
        &self.inner.topic
    }

    fn __len__(&self) -> usize {
        self.inner.payload.len()
    }

    /// `memoryview(msg)` exposes the payload without copying it (read-only).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(pyo3::exceptions::PyBufferError::new_err("view is null"));
        }
        if flags & pyo3::ffi::PyBUF_WRITABLE == pyo3::ffi::PyBUF_WRITABLE {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "message payloads are read-only",
            ));
        }
        let payload = &slf.get().inner.payload;
        // The payload is immutable and lives as long as the message, which the view references.
        let rc = unsafe {
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                payload.as_ptr() as *mut std::os::raw::c_void,
                payload.len() as pyo3::ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}

    fn __repr__(&self) -> String {
        format!(
            "Message(topic={:?}, id={}, {} bytes)",
            &*self.inner.topic,
            self.inner.id,
            self.inner.payload.len()
        )
    }

    fn __reduce__(&self) -> PyResult<()> {
        Err(pyo3::exceptions::PyTypeError::new_err(
            "magnetar.Message cannot be pickled; send msg.data, msg.properties and msg.message_id.serialize() instead",
        ))
    }
}

/// Runs `f`, which makes many new objects, with the cyclic collector paused. Every #[pyclass]
/// object counts towards the collector's thresholds, so building a list of a million message
/// ids ran well over a thousand collections, and the full ones walk every object in the
/// process: with `gc.disable()` a 1,000,000-message `send_many` took a quarter less CPU.
/// The objects made here hold no Python references, so they form no cycles, and the GIL is
/// held throughout, so no other Python code runs while the collector is off. Collection
/// resumes with the next allocation after `f`.
pub(crate) fn without_gc<R>(_py: Python<'_>, f: impl FnOnce() -> R) -> R {
    struct Resume(bool);
    impl Drop for Resume {
        fn drop(&mut self) {
            if self.0 {
                // SAFETY: the GIL is held (the `Python` token proves it).
                unsafe { pyo3::ffi::PyGC_Enable() };
            }
        }
    }
    // SAFETY: as above; returns whether the collector was enabled.
    let _resume = Resume(unsafe { pyo3::ffi::PyGC_Disable() } != 0);
    f()
}

/// Engine message ids as a Python list of `MessageId`s.
pub fn id_list(py: Python<'_>, ids: Vec<client::MessageId>) -> PyResult<Py<PyAny>> {
    without_gc(py, || {
        let out = pyo3::types::PyList::empty(py);
        for id in ids {
            out.append(new_id(py, id)?)?;
        }
        Ok(out.into_any().unbind())
    })
}

enum FutureState {
    /// Callbacks with the future object to pass them (held only while callbacks wait).
    Pending(Vec<(Py<PyAny>, Py<SendFuture>)>),
    Done(Result<client::MessageId, Error>),
}

pub(crate) struct FutureCell {
    state: Mutex<FutureState>,
    cond: Condvar,
    /// Threads blocked in `result()`; completion signals the condvar only when there are
    /// some, since a signal is a system call.
    waiters: std::sync::atomic::AtomicUsize,
}

/// The outcome of `Producer.send_async`: the `concurrent.futures.Future` interface
/// (`result`, `exception`, `done`, `add_done_callback`), without its per-message cost.
/// Callbacks run in order on the dispatch thread of the client that made it.
#[pyclass(name = "SendFuture", module = "magnetar", frozen)]
pub struct SendFuture {
    pub(crate) cell: Arc<FutureCell>,
}

impl SendFuture {
    /// A pending future and the callback that completes it; its done-callbacks run on
    /// `dispatch`'s thread.
    pub fn pending(py: Python<'_>, dispatch: &Arc<Dispatcher>) -> PyResult<(Py<SendFuture>, client::SendCallback)> {
        let cell = Arc::new(FutureCell {
            state: Mutex::new(FutureState::Pending(Vec::new())),
            cond: Condvar::new(),
            waiters: std::sync::atomic::AtomicUsize::new(0),
        });
        let fut = untracked(py, SendFuture { cell: cell.clone() })?;
        let dispatch = dispatch.clone();
        let done: client::SendCallback = Box::new(move |result| {
            {
                let mut st = cell.state.lock().unwrap_or_else(|e| e.into_inner());
                let prev = std::mem::replace(&mut *st, FutureState::Done(result));
                let callbacks = match prev {
                    FutureState::Pending(cbs) => cbs,
                    FutureState::Done(_) => Vec::new(),
                };
                // Queued before the lock is released, so whoever sees the future done also
                // finds its callbacks counted in the client's callback backlog. A callback that
                // runs at once and asks for the result waits for this lock, then sees it done.
                // Without callbacks nothing needs the GIL: the common send_async costs no hop.
                if !callbacks.is_empty() {
                    dispatch.push(Box::new(move |py| {
                        for (cb, fut) in callbacks {
                            if let Err(e) = cb.bind(py).call1((fut,)) {
                                super::dispatch::log_callback_error(py, &e);
                            }
                        }
                    }));
                }
            }
            if cell.waiters.load(std::sync::atomic::Ordering::Acquire) > 0 {
                cell.cond.notify_all();
            }
        });
        Ok((fut, done))
    }

    fn wait(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Result<client::MessageId, Error>> {
        // Checked first, so a bad timeout is refused even when the result is there.
        let deadline = super::convert::deadline(timeout)?;
        // Already done: no need to release the GIL.
        if let FutureState::Done(r) = &*self.cell.state.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(r.clone());
        }
        loop {
            let outcome = super::gate::detach(py, || {
                let mut st = self.cell.state.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let FutureState::Done(r) = &*st {
                        return Some(r.clone());
                    }
                    let now = Instant::now();
                    let slice = now + Duration::from_millis(100);
                    let until = deadline.map_or(slice, |d| d.min(slice));
                    if until <= now {
                        return None;
                    }
                    // Registered under the lock, so a completion after our check sees us.
                    self.cell.waiters.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                    st = self
                        .cell
                        .cond
                        .wait_timeout(st, until - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    self.cell.waiters.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    if Instant::now() >= slice {
                        return None;
                    }
                }
            });
            if let Some(r) = outcome {
                return Ok(r);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(to_pyerr(Error::new(
                    ErrorKind::Timeout,
                    "send result not ready within the timeout",
                )));
            }
            py.check_signals()?;
        }
    }
}

#[pymethods]
impl SendFuture {
    /// The message id, waiting up to `timeout` seconds; raises the send's error.
    #[pyo3(signature = (timeout=None))]
    fn result(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyMessageId>> {
        match self.wait(py, timeout)? {
            Ok(id) => new_id(py, id),
            Err(e) => Err(to_pyerr(e)),
        }
    }

    /// The send's exception (or None), waiting up to `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn exception(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Py<PyAny>>> {
        match self.wait(py, timeout)? {
            Ok(_) => Ok(None),
            Err(e) => Ok(Some(to_pyerr(e).into_value(py).into_any())),
        }
    }

    /// Whether the send has completed.
    fn done(&self) -> bool {
        matches!(
            *self.cell.state.lock().unwrap_or_else(|e| e.into_inner()),
            FutureState::Done(_)
        )
    }

    /// Sends cannot be cancelled once queued; always False.
    fn cancel(&self) -> bool {
        false
    }

    /// Always False.
    fn cancelled(&self) -> bool {
        false
    }

    /// True while the send is pending.
    fn running(&self) -> bool {
        !self.done()
    }

    /// Calls `fn(future)` when the send completes (on the client's dispatch thread; at once,
    /// in this thread, if it already has).
    fn add_done_callback(slf: &Bound<'_, Self>, func: Py<PyAny>) -> PyResult<()> {
        let py = slf.py();
        let run_now = {
            let mut st = slf.get().cell.state.lock().unwrap_or_else(|e| e.into_inner());
            match &mut *st {
                FutureState::Pending(cbs) => {
                    cbs.push((func.clone_ref(py), slf.clone().unbind()));
                    false
                }
                FutureState::Done(_) => true,
            }
        };
        if run_now {
            if let Err(e) = func.bind(py).call1((slf.clone(),)) {
                super::dispatch::log_callback_error(py, &e);
            }
        }
        Ok(())
    }

    fn __repr__(&self) -> String {
        match &*self.cell.state.lock().unwrap_or_else(|e| e.into_inner()) {
            FutureState::Pending(_) => "<SendFuture pending>".into(),
            FutureState::Done(Ok(id)) => format!("<SendFuture done: {id}>"),
            FutureState::Done(Err(e)) => format!("<SendFuture failed: {e}>"),
        }
    }
}
