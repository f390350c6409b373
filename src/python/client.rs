//! `_Client`, `_Producer` and `_Consumer`: the engine handles behind `magnetar.Client` and
//! `magnetar.AsyncClient`. Each blocking method has an `aio_` twin that takes an asyncio
//! future and resolves it.

use std::sync::Arc;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::convert;
use super::dispatch::Dispatcher;
use super::errors::{invalid, to_pyerr};
use super::lifecycle;
use super::runtime::{spawn_for_asyncio, wait, ForkGuard};
use super::types::{new_id, new_message, without_gc, PyMessage, PyMessageId, SendFuture};
use crate::client::consumer::{SeekTarget, TopicSelection};
use crate::client::producer::WouldBlock;
use crate::client::{self, Error, ErrorKind};

fn none(py: Python<'_>, _: ()) -> PyResult<Py<PyAny>> {
    Ok(py.None())
}

/// Engine handle of `magnetar.Client`.
#[pyclass(name = "_Client", module = "magnetar._core", frozen)]
pub struct PyClient {
    inner: client::Client,
    guard: ForkGuard,
    /// Runs this client's send callbacks and asyncio completions (shared by its producers and
    /// consumers), so another client's slow callback never delays them.
    dispatch: Arc<Dispatcher>,
}

impl Drop for PyClient {
    fn drop(&mut self) {
        self.guard.leak_in_child(&self.inner);
        self.guard.leak_in_child(&self.dispatch);
    }
}

fn selection(topic: &Bound<'_, PyAny>, pattern: bool) -> PyResult<TopicSelection> {
    if let Ok(s) = topic.extract::<String>() {
        return Ok(if pattern {
            TopicSelection::Pattern(s)
        } else {
            TopicSelection::One(s)
        });
    }
    if pattern {
        return Err(invalid("a pattern must be a str"));
    }
    let list: Vec<String> = topic
        .extract()
        .map_err(|_| invalid("topic must be a str or a list of str"))?;
    Ok(TopicSelection::Many(list))
}

#[pymethods]
impl PyClient {
    #[new]
    fn new(service_url: &str, options: &Bound<'_, PyDict>) -> PyResult<Self> {
        let opts = convert::client_options(options)?;
        let inner = client::Client::new(service_url, opts).map_err(to_pyerr)?;
        Ok(PyClient {
            inner,
            guard: ForkGuard::new(),
            dispatch: Dispatcher::new(),
        })
    }

    #[pyo3(signature = (topic, options, router=None))]
    fn create_producer(
        &self,
        py: Python<'_>,
        topic: String,
        options: &Bound<'_, PyDict>,
        router: Option<Py<PyAny>>,
    ) -> PyResult<PyProducer> {
        self.guard.check()?;
        let opts = convert::producer_options(options)?;
        let c = self.inner.clone();
        let p = wait(py, async move { c.create_producer(&topic, opts).await })?;
        p.set_router(router.map(python_router));
        lifecycle::track(&p);
        Ok(PyProducer {
            inner: p,
            guard: self.guard,
            dispatch: self.dispatch.clone(),
        })
    }

    #[pyo3(signature = (fut, topic, options, router=None))]
    fn aio_create_producer(
        &self,
        py: Python<'_>,
        fut: Py<PyAny>,
        topic: String,
        options: &Bound<'_, PyDict>,
        router: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        self.guard.check()?;
        let opts = convert::producer_options(options)?;
        let c = self.inner.clone();
        let guard = self.guard;
        let dispatch = self.dispatch.clone();
        spawn_for_asyncio(
            py,
            &self.dispatch,
            fut,
            async move { c.create_producer(&topic, opts).await },
            move |py, p| {
                p.set_router(router.map(python_router));
                lifecycle::track(&p);
                Ok(Py::new(
                    py,
                    PyProducer {
                        inner: p,
                        guard,
                        dispatch,
                    },
                )?
                .into_any())
            },
        )
    }

    #[pyo3(signature = (topic, subscription, options, pattern=false))]
    fn subscribe(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyAny>,
        subscription: String,
        options: &Bound<'_, PyDict>,
        pattern: bool,
    ) -> PyResult<PyConsumer> {
        self.guard.check()?;
        let sel = selection(topic, pattern)?;
        let opts = convert::consumer_options(options)?;
        let c = self.inner.clone();
        let consumer = wait(py, async move { c.subscribe(sel, &subscription, opts).await })?;
        Ok(PyConsumer {
            inner: consumer,
            guard: self.guard,
            dispatch: self.dispatch.clone(),
        })
    }

    #[pyo3(signature = (fut, topic, subscription, options, pattern=false))]
    fn aio_subscribe(
        &self,
        py: Python<'_>,
        fut: Py<PyAny>,
        topic: &Bound<'_, PyAny>,
        subscription: String,
        options: &Bound<'_, PyDict>,
        pattern: bool,
    ) -> PyResult<()> {
        self.guard.check()?;
        let sel = selection(topic, pattern)?;
        let opts = convert::consumer_options(options)?;
        let c = self.inner.clone();
        let guard = self.guard;
        let dispatch = self.dispatch.clone();
        spawn_for_asyncio(
            py,
            &self.dispatch,
            fut,
            async move { c.subscribe(sel, &subscription, opts).await },
            move |py, consumer| {
                Ok(Py::new(
                    py,
                    PyConsumer {
                        inner: consumer,
                        guard,
                        dispatch,
                    },
                )?
                .into_any())
            },
        )
    }

    fn partition_count(&self, py: Python<'_>, topic: String) -> PyResult<u32> {
        self.guard.check()?;
        let c = self.inner.clone();
        wait(py, async move { c.partition_count(&topic).await })
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.guard.check().is_err() {
            return Ok(());
        }
        let c = self.inner.clone();
        wait(py, async move {
            c.close().await;
            Ok(())
        })
    }

    fn aio_close(&self, py: Python<'_>, fut: Py<PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let c = self.inner.clone();
        spawn_for_asyncio(
            py,
            &self.dispatch,
            fut,
            async move {
                c.close().await;
                Ok(())
            },
            none,
        )
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// "idle", "connecting", "connected" or "closed".
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state().name()
    }
}

/// A Python callable `router(key, num_partitions) -> int` as the producer's router.
fn python_router(func: Py<PyAny>) -> crate::client::producer::Router {
    std::sync::Arc::new(move |msg: &client::OutgoingMessage, n: usize| {
        lifecycle::attach_unless_exiting(|py| {
            func.bind(py)
                .call1((msg.key.clone(), n))
                .and_then(|r| r.extract::<usize>())
                .map_err(|e| Error::invalid(format!("router failed: {e}")))
        })
        .unwrap_or_else(|| Err(Error::closed("the interpreter is exiting: the router")))
    })
}

/// Engine handle of a producer.
#[pyclass(name = "_Producer", module = "magnetar._core", frozen)]
pub struct PyProducer {
    inner: client::Producer,
    guard: ForkGuard,
    dispatch: Arc<Dispatcher>,
}

impl Drop for PyProducer {
    fn drop(&mut self) {
        self.guard.leak_in_child(&self.inner);
        self.guard.leak_in_child(&self.dispatch);
    }
}

fn id_obj(py: Python<'_>, id: client::MessageId) -> PyResult<Py<PyAny>> {
    Ok(new_id(py, id)?.into_any())
}

#[pymethods]
impl PyProducer {
    #[getter]
    fn topic(&self) -> &str {
        self.inner.topic()
    }
    #[getter]
    fn name(&self) -> String {
        self.inner.name()
    }
    #[getter]
    fn last_sequence_id(&self) -> i64 {
        self.inner.last_sequence_id()
    }
    #[getter]
    fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }
    #[getter]
    fn partitions(&self) -> usize {
        self.inner.partitions()
    }

    #[pyo3(signature = (data, key=None, properties=None, event_time=None, deliver_at=None, ordering_key=None, sequence_id=None))]
    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        key: Option<String>,
        properties: Option<&Bound<'_, PyDict>>,
        event_time: Option<u64>,
        deliver_at: Option<i64>,
        ordering_key: Option<&Bound<'_, PyAny>>,
        sequence_id: Option<i64>,
    ) -> PyResult<Py<PyMessageId>> {
        self.guard.check()?;
        let msg = convert::message(data, key, properties, event_time, deliver_at, ordering_key, sequence_id)?;
        let p = self.inner.clone();
        let id = wait(py, async move { p.send(msg).await })?;
        new_id(py, id)
    }

    #[pyo3(signature = (data, key=None, properties=None, event_time=None, deliver_at=None, ordering_key=None, sequence_id=None))]
    #[allow(clippy::too_many_arguments)]
    fn send_async(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        key: Option<String>,
        properties: Option<&Bound<'_, PyDict>>,
        event_time: Option<u64>,
        deliver_at: Option<i64>,
        ordering_key: Option<&Bound<'_, PyAny>>,
        sequence_id: Option<i64>,
    ) -> PyResult<Py<SendFuture>> {
        self.guard.check()?;
        let msg = convert::message(data, key, properties, event_time, deliver_at, ordering_key, sequence_id)?;
        self.dispatch.wait_for_room(py, self.inner.blocks_if_full())?;
        let (fut, done) = SendFuture::pending(py, &self.dispatch)?;
        if let Err(blocked) = self.inner.try_enqueue(msg, false, done) {
            let WouldBlock(msg, done) = *blocked;
            let p = self.inner.clone();
            wait(py, async move {
                p.enqueue(msg, false, done).await;
                Ok(())
            })?;
        }
        Ok(fut)
    }

    /// Sends every payload (bytes-like) and waits for all receipts; returns their ids.
    #[pyo3(signature = (payloads, keys=None, properties=None, event_times=None))]
    fn send_many<'py>(
        &self,
        py: Python<'py>,
        payloads: &Bound<'py, PyAny>,
        keys: Option<&Bound<'py, PyAny>>,
        properties: Option<&Bound<'py, PyAny>>,
        event_times: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.guard.check()?;
        let msgs = many(payloads, keys, properties, event_times)?;
        let p = self.inner.clone();
        id_list(py, wait(py, send_all(p, msgs))?)
    }

    #[pyo3(signature = (fut, payloads, keys=None, properties=None, event_times=None))]
    fn aio_send_many(
        &self,
        py: Python<'_>,
        fut: Py<PyAny>,
        payloads: &Bound<'_, PyAny>,
        keys: Option<&Bound<'_, PyAny>>,
        properties: Option<&Bound<'_, PyAny>>,
        event_times: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.guard.check()?;
        let msgs = many(payloads, keys, properties, event_times)?;
        let p = self.inner.clone();
        let room = self.dispatch.clone();
        let send = async move {
            room.room().await;
            send_all(p, msgs).await
        };
        spawn_for_asyncio(py, &self.dispatch, fut, send, |py, ids| {
            Ok(id_list(py, ids)?.into_any().unbind())
        })
    }

    #[pyo3(signature = (fut, data, key=None, properties=None, event_time=None, deliver_at=None, ordering_key=None, sequence_id=None))]
    #[allow(clippy::too_many_arguments)]
    fn aio_send(
        &self,
        py: Python<'_>,
        fut: Py<PyAny>,
        data: &Bound<'_, PyAny>,
        key: Option<String>,
        properties: Option<&Bound<'_, PyDict>>,
        event_time: Option<u64>,
        deliver_at: Option<i64>,
        ordering_key: Option<&Bound<'_, PyAny>>,
        sequence_id: Option<i64>,
    ) -> PyResult<()> {
        self.guard.check()?;
        let msg = convert::message(data, key, properties, event_time, deliver_at, ordering_key, sequence_id)?;
        let p = self.inner.clone();
        // Like the other clients' async sends: no flush, so concurrent coroutines share
        // batches; the batching delay bounds the wait.
        let room = self.dispatch.clone();
        let send = async move {
            room.room().await;
            p.send_with(msg, false).await
        };
        spawn_for_asyncio(py, &self.dispatch, fut, send, id_obj)
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.guard.check()?;
        let p = self.inner.clone();
        wait(py, async move { p.flush().await })
    }

    fn aio_flush(&self, py: Python<'_>, fut: Py<PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let p = self.inner.clone();
        spawn_for_asyncio(py, &self.dispatch, fut, async move { p.flush().await }, none)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.guard.check().is_err() {
            return Ok(());
        }
        let p = self.inner.clone();
        wait(py, async move { p.close().await })
    }

    fn aio_close(&self, py: Python<'_>, fut: Py<PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let p = self.inner.clone();
        spawn_for_asyncio(py, &self.dispatch, fut, async move { p.close().await }, none)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// The messages of a `send_many` call: payloads plus optional per-message columns, each a
/// list as long as the payloads.
fn many<'py>(
    payloads: &Bound<'py, PyAny>,
    keys: Option<&Bound<'py, PyAny>>,
    properties: Option<&Bound<'py, PyAny>>,
    event_times: Option<&Bound<'py, PyAny>>,
) -> PyResult<Vec<client::OutgoingMessage>> {
    let mut msgs: Vec<client::OutgoingMessage> = convert::payloads(payloads)?
        .into_iter()
        .map(client::OutgoingMessage::new)
        .collect();
    if let Some(keys) = keys {
        let keys: Vec<Option<String>> = column(keys, msgs.len(), "keys", "a list of str or None")?;
        for (m, k) in msgs.iter_mut().zip(keys) {
            m.key = k;
        }
    }
    if let Some(props) = properties {
        let props: Vec<Option<Bound<'_, PyDict>>> =
            column(props, msgs.len(), "properties", "a list of dict[str, str] or None")?;
        for (m, p) in msgs.iter_mut().zip(props) {
            if let Some(p) = p {
                m.properties = convert::property_pairs(&p)?;
            }
        }
    }
    if let Some(times) = event_times {
        let times: Vec<Option<u64>> = column(
            times,
            msgs.len(),
            "event_times",
            "a list of milliseconds since the epoch or None",
        )?;
        for (m, t) in msgs.iter_mut().zip(times) {
            m.event_time = t;
        }
    }
    Ok(msgs)
}

/// Engine message ids as a Python list of `MessageId`s.
fn id_list(py: Python<'_>, ids: Vec<client::MessageId>) -> PyResult<Bound<'_, PyList>> {
    without_gc(py, || {
        let out = PyList::empty(py);
        for id in ids {
            out.append(new_id(py, id)?)?;
        }
        Ok(out)
    })
}

fn column<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(
    values: &Bound<'py, PyAny>,
    n: usize,
    name: &str,
    what: &str,
) -> PyResult<Vec<T>> {
    let values: Vec<T> = values
        .extract()
        .map_err(|_| invalid(format!("{name} must be {what}")))?;
    if values.len() != n {
        return Err(invalid(format!("{} {name} for {n} payloads", values.len())));
    }
    Ok(values)
}

async fn send_all(p: client::Producer, msgs: Vec<client::OutgoingMessage>) -> Result<Vec<client::MessageId>, Error> {
    let n = msgs.len();
    let results = p.send_many(msgs).await;
    let mut ids = Vec::with_capacity(n);
    let mut first_error = None;
    for r in results {
        match r {
            Ok(id) => ids.push(id),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        None => Ok(ids),
        Some(e) => Err(Error::new(
            e.kind(),
            format!("{} of {n} messages failed; first error: {}", n - ids.len(), e.message()),
        )),
    }
}

/// Engine handle of a consumer (and of a reader, which is a non-durable consumer).
#[pyclass(name = "_Consumer", module = "magnetar._core", frozen)]
pub struct PyConsumer {
    inner: client::Consumer,
    guard: ForkGuard,
    dispatch: Arc<Dispatcher>,
}

impl Drop for PyConsumer {
    fn drop(&mut self) {
        self.guard.leak_in_child(&self.inner);
        self.guard.leak_in_child(&self.dispatch);
    }
}

fn message_id_of(obj: &Bound<'_, PyAny>) -> PyResult<client::MessageId> {
    if let Ok(m) = obj.cast::<PyMessage>() {
        return Ok(m.get().inner.id.clone());
    }
    if let Ok(id) = obj.cast::<PyMessageId>() {
        return Ok(id.get().inner.clone());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(
        "expected a Message or a MessageId",
    ))
}

fn seek_target(target: &Bound<'_, PyAny>) -> PyResult<SeekTarget> {
    if let Ok(id) = target.cast::<PyMessageId>() {
        return Ok(SeekTarget::Id(id.get().inner.clone()));
    }
    match target.extract::<i64>() {
        Ok(ms) if ms >= 0 => Ok(SeekTarget::PublishTime(ms as u64)),
        _ => Err(invalid(
            "seek takes a MessageId or a publish time in milliseconds since the epoch",
        )),
    }
}

#[pymethods]
impl PyConsumer {
    #[getter]
    fn topics(&self) -> Vec<String> {
        self.inner.topics()
    }
    #[getter]
    fn subscription(&self) -> &str {
        self.inner.subscription()
    }
    #[getter]
    fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }
    #[getter]
    fn corrupt_messages(&self) -> u64 {
        self.inner.corrupt_messages()
    }
    #[getter]
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The next message, waiting up to `timeout` seconds (None: forever).
    #[pyo3(signature = (timeout=None))]
    fn receive(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyMessage>> {
        let m = self.receive_one(py, convert::deadline(timeout)?)?;
        new_message(py, m)
    }

    /// A queued message or None, without waiting.
    fn try_receive(&self, py: Python<'_>) -> PyResult<Option<Py<PyMessage>>> {
        self.guard.check()?;
        match self.inner.try_receive().map_err(to_pyerr)? {
            Some(m) => Ok(Some(new_message(py, m)?)),
            None => Ok(None),
        }
    }

    /// Up to `max_messages`: what is queued, or whatever arrives within `timeout` seconds.
    #[pyo3(signature = (max_messages=100, timeout=None))]
    fn receive_many<'py>(
        &self,
        py: Python<'py>,
        max_messages: usize,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.guard.check()?;
        if max_messages == 0 {
            return Err(invalid("max_messages must be at least 1"));
        }
        let deadline = convert::deadline(timeout)?;
        let mut msgs = self.inner.try_receive_many(max_messages).map_err(to_pyerr)?;
        if msgs.is_empty() && deadline.is_none_or(|d| d > Instant::now()) {
            match self.receive_one(py, deadline) {
                Ok(first) => {
                    msgs.push(first);
                    msgs.extend(self.inner.try_receive_many(max_messages - 1).unwrap_or_default());
                }
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyTimeoutError>(py) => {}
                Err(e) => return Err(e),
            }
        }
        without_gc(py, || {
            let out = PyList::empty(py);
            for m in msgs {
                out.append(new_message(py, m)?)?;
            }
            Ok(out)
        })
    }

    /// Resolves `fut` (with None) once a message may be available or the consumer ended.
    fn aio_wait(&self, py: Python<'_>, fut: Py<PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let c = self.inner.clone();
        spawn_for_asyncio(
            py,
            &self.dispatch,
            fut,
            async move {
                c.wait_for_message().await;
                Ok(())
            },
            none,
        )
    }

    fn ack(&self, message: &Bound<'_, PyAny>) -> PyResult<()> {
        self.guard.check()?;
        self.inner.ack(&message_id_of(message)?).map_err(to_pyerr)
    }

    fn ack_many(&self, messages: &Bound<'_, PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let mut ids = Vec::with_capacity(messages.len().unwrap_or(0));
        for m in messages.try_iter()? {
            ids.push(message_id_of(&m?)?);
        }
        self.inner.ack_many(ids).map_err(to_pyerr)
    }

    fn ack_cumulative(&self, message: &Bound<'_, PyAny>) -> PyResult<()> {
        self.guard.check()?;
        self.inner.ack_cumulative(&message_id_of(message)?).map_err(to_pyerr)
    }

    #[pyo3(signature = (message, cumulative=false))]
    fn ack_with_receipt(&self, py: Python<'_>, message: &Bound<'_, PyAny>, cumulative: bool) -> PyResult<()> {
        self.guard.check()?;
        let id = message_id_of(message)?;
        let c = self.inner.clone();
        wait(py, async move { c.ack_with_receipt(&id, cumulative).await })
    }

    #[pyo3(signature = (fut, message, cumulative=false))]
    fn aio_ack_with_receipt(
        &self,
        py: Python<'_>,
        fut: Py<PyAny>,
        message: &Bound<'_, PyAny>,
        cumulative: bool,
    ) -> PyResult<()> {
        self.guard.check()?;
        let id = message_id_of(message)?;
        let c = self.inner.clone();
        spawn_for_asyncio(
            py,
            &self.dispatch,
            fut,
            async move { c.ack_with_receipt(&id, cumulative).await },
            none,
        )
    }

    fn nack(&self, message: &Bound<'_, PyAny>) -> PyResult<()> {
        self.guard.check()?;
        self.inner.nack(&message_id_of(message)?).map_err(to_pyerr)
    }

    fn redeliver_unacknowledged(&self) -> PyResult<()> {
        self.guard.check()?;
        self.inner.redeliver_unacknowledged().map_err(to_pyerr)
    }

    fn pause(&self) -> PyResult<()> {
        self.guard.check()?;
        self.inner.set_paused(true);
        Ok(())
    }

    fn resume(&self) -> PyResult<()> {
        self.guard.check()?;
        self.inner.set_paused(false);
        Ok(())
    }

    fn seek(&self, py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let t = seek_target(target)?;
        let c = self.inner.clone();
        wait(py, async move { c.seek(t).await })
    }

    fn aio_seek(&self, py: Python<'_>, fut: Py<PyAny>, target: &Bound<'_, PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let t = seek_target(target)?;
        let c = self.inner.clone();
        spawn_for_asyncio(py, &self.dispatch, fut, async move { c.seek(t).await }, none)
    }

    fn last_message_ids<'py>(&self, py: Python<'py>) -> PyResult<Vec<PyMessageId>> {
        self.guard.check()?;
        let c = self.inner.clone();
        let ids = wait(py, async move { c.last_message_ids().await })?;
        Ok(ids.into_iter().map(|inner| PyMessageId { inner }).collect::<Vec<_>>())
    }

    fn aio_last_message_ids(&self, py: Python<'_>, fut: Py<PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let c = self.inner.clone();
        spawn_for_asyncio(
            py,
            &self.dispatch,
            fut,
            async move { c.last_message_ids().await },
            |py, ids| Ok(id_list(py, ids)?.into_any().unbind()),
        )
    }

    /// The broker's statistics per covered topic, as dicts.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.guard.check()?;
        let c = self.inner.clone();
        let all = wait(py, async move { c.stats().await })?;
        let out = PyList::empty(py);
        for s in all {
            let d = PyDict::new(py);
            d.set_item("topic", s.topic)?;
            d.set_item("msg_rate_out", s.msg_rate_out)?;
            d.set_item("msg_throughput_out", s.msg_throughput_out)?;
            d.set_item("msg_rate_redeliver", s.msg_rate_redeliver)?;
            d.set_item("consumer_name", s.consumer_name)?;
            d.set_item("available_permits", s.available_permits)?;
            d.set_item("unacked_messages", s.unacked_messages)?;
            d.set_item("blocked_consumer_on_unacked_msgs", s.blocked_consumer_on_unacked_msgs)?;
            d.set_item("msg_backlog", s.msg_backlog)?;
            d.set_item("subscription_type", s.subscription_type)?;
            d.set_item("queued", self.inner.queued())?;
            d.set_item("corrupt_messages", self.inner.corrupt_messages())?;
            out.append(d)?;
        }
        Ok(out)
    }

    fn has_message_available(&self, py: Python<'_>) -> PyResult<bool> {
        self.guard.check()?;
        let c = self.inner.clone();
        wait(py, async move { c.has_message_available().await })
    }

    fn aio_has_message_available(&self, py: Python<'_>, fut: Py<PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let c = self.inner.clone();
        spawn_for_asyncio(
            py,
            &self.dispatch,
            fut,
            async move { c.has_message_available().await },
            |py, b| Ok(pyo3::types::PyBool::new(py, b).to_owned().into_any().unbind()),
        )
    }

    fn unsubscribe(&self, py: Python<'_>) -> PyResult<()> {
        self.guard.check()?;
        let c = self.inner.clone();
        wait(py, async move { c.unsubscribe().await })
    }

    fn aio_unsubscribe(&self, py: Python<'_>, fut: Py<PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let c = self.inner.clone();
        spawn_for_asyncio(py, &self.dispatch, fut, async move { c.unsubscribe().await }, none)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.guard.check().is_err() {
            return Ok(());
        }
        let c = self.inner.clone();
        wait(py, async move { c.close().await })
    }

    fn aio_close(&self, py: Python<'_>, fut: Py<PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let c = self.inner.clone();
        spawn_for_asyncio(py, &self.dispatch, fut, async move { c.close().await }, none)
    }
}

impl PyConsumer {
    fn receive_one(&self, py: Python<'_>, deadline: Option<Instant>) -> PyResult<client::Message> {
        self.guard.check()?;
        if let Some(m) = self.inner.try_receive().map_err(to_pyerr)? {
            return Ok(m);
        }
        let mut interrupt: Option<PyErr> = None;
        let c = &self.inner;
        let got = lifecycle::detach(py, || {
            c.receive_blocking(deadline, || {
                let checked = lifecycle::attach_unless_exiting(|py| py.check_signals());
                checked.unwrap_or_else(|| lifecycle::park_for_ever()).map_err(|e| {
                    interrupt = Some(e);
                    Error::new(ErrorKind::Other, "interrupted")
                })
            })
        });
        if let Some(e) = interrupt {
            return Err(e);
        }
        match got.map_err(to_pyerr)? {
            Some(m) => Ok(m),
            None => Err(to_pyerr(Error::new(
                ErrorKind::Timeout,
                "no message received within the timeout",
            ))),
        }
    }
}
