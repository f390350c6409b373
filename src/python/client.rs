//! `_Client`: the engine handle behind `magnetar.Client` and `magnetar.AsyncClient`.
//!
//! Every waiting method of the handles (`_Client`, `_Producer`, `_Consumer`) is written once
//! and takes a keyword-only `future`: without it the call blocks, with an asyncio future it
//! returns at once and resolves the future ([`run`]).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::arrow_values::PyValueSchema;
use super::consumer::PyConsumer;
use super::dispatch::Dispatcher;
use super::errors::{invalid, to_pyerr};
use super::options;
use super::producer::PyProducer;
use super::runtime::{engine_handle, run, EngineHandle, ForkGuard};
use super::transaction::{self, PyTransaction};
use super::{gate, runtime, schema, stats};
use crate::client::consumer::TopicSelection;
use crate::client::{self, Error};

/// Engine handle of `magnetar.Client`.
#[pyclass(name = "_Client", module = "magnetar._core", frozen)]
pub struct PyClient {
    inner: client::Client,
    guard: ForkGuard,
    /// Runs this client's send callbacks and asyncio completions (shared by its producers and
    /// consumers), so another client's slow callback never delays them.
    dispatch: Arc<Dispatcher>,
}

engine_handle!(PyClient, client::Client);

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
    /// `failover`: the secondary service URLs, then the check interval, failover delay and
    /// switch-back delay in seconds (`magnetar.AutoClusterFailover`).
    #[new]
    #[pyo3(signature = (service_url, options, failover=None))]
    fn new(
        service_url: &str,
        options: &Bound<'_, PyDict>,
        failover: Option<(Vec<String>, f64, f64, f64)>,
    ) -> PyResult<Self> {
        let mut opts = options::client_options(options)?;
        if let Some((secondaries, check, delay, back)) = failover {
            let secs = |v: f64, what: &str| {
                std::time::Duration::try_from_secs_f64(v)
                    .map_err(|_| invalid(format!("{what} must be a non-negative number of seconds, got {v}")))
            };
            opts.failover = Some(client::FailoverOptions {
                secondaries,
                check_interval: secs(check, "check_interval")?,
                failover_delay: secs(delay, "failover_delay")?,
                switch_back_delay: secs(back, "switch_back_delay")?,
            });
        }
        // The failover watcher is a task of the runtime.
        let rt = runtime::runtime();
        let _entered = rt.enter();
        let inner = client::Client::new(service_url, opts).map_err(to_pyerr)?;
        Ok(PyClient {
            inner,
            guard: ForkGuard::new(),
            dispatch: Dispatcher::new(),
        })
    }

    /// `router_payload`: the router is called as `router(key, payload, num_partitions)`, for
    /// routers that look at the payload (magnetar.compat's `message_router`).
    #[pyo3(signature = (topic, options, router=None, schema=None, *, router_payload=false, future=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_producer(
        &self,
        py: Python<'_>,
        topic: String,
        options: &Bound<'_, PyDict>,
        router: Option<Py<PyAny>>,
        schema: Option<Py<PyAny>>,
        router_payload: bool,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.guard.check()?;
        let mut opts = options::producer_options(options)?;
        opts.schema = schema::info(schema.as_ref().map(|s| s.bind(py)))?;
        let c = self.inner.clone();
        let (guard, dispatch) = (self.guard, self.dispatch.clone());
        let create = async move { c.create_producer(&topic, opts).await };
        run(py, &self.dispatch, future, create, move |py, p| {
            p.set_router(router.map(|r| python_router(r, router_payload)));
            runtime::track(&p);
            Ok(Py::new(py, PyProducer::new(p, guard, dispatch, schema))?.into_any())
        })
    }

    /// `event_hook(kind, topic, ids)`, when given, is called on the dispatch thread with
    /// `("active", topic, None)`, `("inactive", topic, None)`, `("nacks_sent", None, ids)` or
    /// `("ack_timeout", None, ids)`.
    #[pyo3(signature = (topic, subscription, options, pattern=false, schema=None, *, future=None, event_hook=None))]
    #[allow(clippy::too_many_arguments)]
    fn subscribe(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyAny>,
        subscription: String,
        options: &Bound<'_, PyDict>,
        pattern: bool,
        schema: Option<Py<PyAny>>,
        future: Option<Py<PyAny>>,
        event_hook: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.guard.check()?;
        let sel = selection(topic, pattern)?;
        let mut opts = options::consumer_options(options)?;
        opts.event_hook = event_hook.map(|h| python_event_hook(h, self.dispatch.clone()));
        opts.schema = schema::info(schema.as_ref().map(|s| s.bind(py)))?;
        let binding = schema::Binding::new(schema, &self.inner);
        let c = self.inner.clone();
        let (guard, dispatch) = (self.guard, self.dispatch.clone());
        let subscribe = async move { c.subscribe(sel, &subscription, opts).await };
        run(py, &self.dispatch, future, subscribe, move |py, consumer| {
            Ok(Py::new(py, PyConsumer::new(consumer, guard, dispatch, binding))?.into_any())
        })
    }

    #[pyo3(signature = (topic, *, future=None))]
    fn partition_count(&self, py: Python<'_>, topic: String, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        let count = |c: client::Client| async move { c.partition_count(&topic).await };
        self.call(py, future, count, |py, n| Ok(n.into_pyobject(py)?.into_any().unbind()))
    }

    #[pyo3(signature = (namespace, *, future=None))]
    fn topics_of_namespace(&self, py: Python<'_>, namespace: String, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        let list = |c: client::Client| async move { c.topics_of_namespace(&namespace).await };
        self.call(py, future, list, |py, topics| {
            Ok(topics.into_pyobject(py)?.into_any().unbind())
        })
    }

    /// `method path` on the web service (`magnetar.admin`'s transport): `(status, headers,
    /// body)` of the answer, redirects followed, whatever the status.
    #[pyo3(signature = (method, path, headers, body, *, future=None))]
    fn web_request(
        &self,
        py: Python<'_>,
        method: String,
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let send = |c: client::Client| async move { c.web_request(&method, &path, headers, body).await };
        self.call(py, future, send, |py, answer| {
            let body = pyo3::types::PyBytes::new(py, &answer.body);
            Ok((answer.status, answer.headers, body)
                .into_pyobject(py)?
                .into_any()
                .unbind())
        })
    }

    /// The registry's schema of `topic` at `version` (its bytes; None: the latest) as
    /// `(name, type, definition, properties, version)`, or None when there is none.
    #[pyo3(signature = (topic, version=None, *, future=None))]
    fn get_schema(
        &self,
        py: Python<'_>,
        topic: String,
        version: Option<Vec<u8>>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let get = |c: client::Client| async move { c.get_schema(&topic, version).await };
        self.call(py, future, get, |py, got| match got {
            Some((info, stored)) => schema::info_tuple(py, &info, &stored),
            None => Ok(py.None()),
        })
    }

    /// Opens a transaction that the coordinator aborts after `timeout` seconds.
    #[pyo3(signature = (timeout, *, future=None))]
    fn new_transaction(
        &self,
        py: Python<'_>,
        timeout: &Bound<'_, PyAny>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let timeout = match super::convert::span(Some(timeout), "timeout")? {
            super::convert::Span::Within(d) if !d.is_zero() => d,
            _ => return Err(invalid(
                "a transaction's timeout must be a positive, finite number of seconds (its coordinator aborts it then)",
            )),
        };
        let (guard, dispatch) = (self.guard, self.dispatch.clone());
        let open = |c: client::Client| async move { c.new_transaction(timeout).await };
        self.call(py, future, open, move |py, t| {
            Ok(Py::new(py, PyTransaction::new(t, guard, dispatch))?.into_any())
        })
    }

    /// The open transaction `(most, least)`, made by any client.
    #[pyo3(signature = (most, least, *, future=None))]
    fn transaction_from_id(
        &self,
        py: Python<'_>,
        most: u64,
        least: u64,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let id = transaction::id_of(most, least);
        let (guard, dispatch) = (self.guard, self.dispatch.clone());
        let resume = |c: client::Client| async move { c.resume_transaction(id).await };
        self.call(py, future, resume, move |py, t| {
            Ok(Py::new(py, PyTransaction::new(t, guard, dispatch))?.into_any())
        })
    }

    #[pyo3(signature = (*, future=None))]
    fn close(&self, py: Python<'_>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        self.close_with(py, future, |c| async move {
            c.close().await;
            Ok(())
        })
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Which cluster is in use: 0 for the service URL, `i + 1` for the `i`th failover secondary.
    #[getter]
    fn current_cluster(&self) -> usize {
        self.inner.current_cluster()
    }

    /// Moves the client to `service_url`; of `options` (client options, as `new` takes them)
    /// only the credentials and TLS files are used.
    fn switch_service(&self, service_url: &str, options: &Bound<'_, PyDict>) -> PyResult<()> {
        self.guard.check()?;
        let opts = options::client_options(options)?;
        self.inner
            .switch_service(service_url, opts.connection.auth, opts.connection.tls)
            .map_err(to_pyerr)
    }

    /// "idle", "connecting", "connected" or "closed".
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state().name()
    }
}

// `_ValueSchema.of` is written here, beside the handle it takes, so that the Arrow files
// below the handles never name them.
#[pymethods]
impl PyValueSchema {
    /// The columns of a schema of wire type `kind` with `definition`, registered under
    /// `version`; None when its payloads stay bytes. With `client`, writer schemas of other
    /// versions are fetched for `topic` when met.
    #[staticmethod]
    #[pyo3(signature = (kind, definition, version, client=None, topic=""))]
    fn of(
        kind: i32,
        definition: &[u8],
        version: &[u8],
        client: Option<&Bound<'_, PyClient>>,
        topic: &str,
    ) -> PyResult<Option<Self>> {
        let fetch = client.map(|c| (c.get().engine().clone(), topic.to_string()));
        PyValueSchema::new(kind, definition, version, fetch)
    }
}

/// A client's connection and lookup statistics.
#[pyfunction]
pub fn _client_stats<'py>(py: Python<'py>, client: &Bound<'py, PyClient>) -> PyResult<Bound<'py, PyDict>> {
    stats::client_dict(py, &client.get().engine().stats())
}

/// A Python callable `router(key, num_partitions) -> int` (with `payload`: `router(key,
/// payload, num_partitions)`) as the producer's router.
fn python_router(func: Py<PyAny>, payload: bool) -> crate::client::producer::Router {
    std::sync::Arc::new(move |msg: &client::OutgoingMessage, n: usize| {
        gate::attach_unless_exiting(|py| {
            let func = func.bind(py);
            let chosen = if payload {
                func.call1((msg.key.clone(), pyo3::types::PyBytes::new(py, &msg.payload), n))
            } else {
                func.call1((msg.key.clone(), n))
            };
            chosen
                .and_then(|r| r.extract::<usize>())
                .map_err(|e| Error::invalid(format!("router failed: {e}")))
        })
        .unwrap_or_else(|| Err(Error::closed("the interpreter is exiting: the router")))
    })
}

/// An engine [`EventHook`](client::events::EventHook) that calls a Python callable on the
/// client's dispatch thread: the consumer's task never waits for Python.
fn python_event_hook(hook: Py<PyAny>, dispatch: Arc<Dispatcher>) -> client::events::EventHook {
    use client::events::ConsumerEvent;
    let hook = Arc::new(hook);
    client::events::EventHook(Arc::new(move |event: ConsumerEvent| {
        let hook = hook.clone();
        dispatch.push(Box::new(move |py| {
            let (kind, topic, ids) = match event {
                ConsumerEvent::ActiveChanged { topic, active } => {
                    (if active { "active" } else { "inactive" }, Some(topic), None)
                }
                ConsumerEvent::NacksSent(ids) => ("nacks_sent", None, Some(ids)),
                ConsumerEvent::AckTimeout(ids) => ("ack_timeout", None, Some(ids)),
            };
            let ids = ids.map(|ids| {
                ids.into_iter()
                    .filter_map(|id| super::types::new_id(py, id).ok())
                    .collect::<Vec<_>>()
            });
            if let Err(e) = hook.call1(py, (kind, topic, ids)) {
                super::dispatch::log_callback_error(py, &e);
            }
        }));
    }))
}
