//! `_Consumer`: the engine handle behind `magnetar.Consumer`, `magnetar.Reader` and their
//! asyncio twins.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::arrow::{self, PyArrowLayout, PyRangeScan};
use super::convert;
use super::errors::{invalid, to_pyerr};
use super::fields_dict;
use super::gate;
use super::getters;
use super::receive::{self, messages, Want};
use super::runtime::{engine_handle, none, EngineHandle};
use super::schema::Binding;
use super::stats;
use super::transaction;
use super::types::{id_list, new_message_with, PyMessage, PyMessageId};
use crate::client::consumer::SeekTarget;
use crate::client::{self, Error, ErrorKind};

// `close(*, future=None)` and `closed` come with it (see `engine_handle!`).
engine_handle! {
    /// Engine handle of a consumer (and of a reader, which is a non-durable consumer).
    #[pyclass(name = "_Consumer", module = "magnetar._core", frozen)]
    pub struct PyConsumer(client::Consumer) {
        /// Decodes its messages' `value` with it.
        schema: Option<Arc<Binding>>,
    };
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

getters!(PyConsumer {
    fn topics() -> Vec<String>;
    fn subscription() -> &str;
    fn is_connected() -> bool;
    fn corrupt_messages() -> u64;
    fn queued() -> usize;
});

#[pymethods]
impl PyConsumer {
    /// The next message, waiting up to `timeout` seconds (None: forever). With an asyncio
    /// future, returns at once and completes it (see [`receive`]: a cancelled one takes nothing).
    #[pyo3(signature = (timeout=None, *, future=None))]
    fn receive(
        &self,
        py: Python<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let deadline = convert::deadline(timeout)?;
        if let Some(future) = future {
            self.receive_for_asyncio(py, Want::One, deadline, future)?;
            return Ok(py.None());
        }
        let m = self.receive_one(py, deadline)?;
        Ok(new_message_with(py, m, self.schema.as_ref())?.into_any())
    }

    /// A queued message or None, without waiting: the asyncio receive's first try, which
    /// costs no future when the queue has a message. `timeout` is the receive's, only checked.
    #[pyo3(signature = (timeout=None))]
    fn try_receive(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Py<PyMessage>>> {
        self.guard.check()?;
        convert::deadline(timeout)?;
        match self.inner.try_receive().map_err(to_pyerr)? {
            Some(m) => Ok(Some(new_message_with(py, m, self.schema.as_ref())?)),
            None => Ok(None),
        }
    }

    /// Up to `max_messages` queued messages (possibly none), without waiting: as `try_receive`
    /// for `receive_many`.
    #[pyo3(signature = (max_messages=100, timeout=None, max_bytes=None))]
    fn try_receive_many<'py>(
        &self,
        py: Python<'py>,
        max_messages: usize,
        timeout: Option<&Bound<'py, PyAny>>,
        max_bytes: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.guard.check()?;
        let want = want_many(max_messages, max_bytes)?;
        convert::deadline(timeout)?;
        let msgs = receive::take_now(&self.inner, want).map_err(to_pyerr)?;
        messages(py, msgs, self.schema.as_ref())
    }

    /// Up to `max_messages`: what is queued, or whatever arrives within `timeout` seconds
    /// (an empty list when nothing does). With an asyncio future, as `receive`.
    #[pyo3(signature = (max_messages=100, timeout=None, max_bytes=None, *, future=None))]
    fn receive_many(
        &self,
        py: Python<'_>,
        max_messages: usize,
        timeout: Option<&Bound<'_, PyAny>>,
        max_bytes: Option<usize>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let want = want_many(max_messages, max_bytes)?;
        let deadline = convert::deadline(timeout)?;
        if let Some(future) = future {
            self.receive_for_asyncio(py, want, deadline, future)?;
            return Ok(py.None());
        }
        self.guard.check()?;
        let mut msgs = receive::take_now(&self.inner, want).map_err(to_pyerr)?;
        if msgs.is_empty() && deadline.is_none_or(|d| d > Instant::now()) {
            match self.receive_one(py, deadline) {
                Ok(first) => {
                    let left = receive::after(want, &first);
                    msgs.push(first);
                    if let Some(left) = left {
                        msgs.extend(receive::take_now(&self.inner, left).unwrap_or_default());
                    }
                }
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyTimeoutError>(py) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(messages(py, msgs, self.schema.as_ref())?.into_any().unbind())
    }

    /// Up to `max_rows` messages as one Arrow batch of `layout`'s columns: what is queued,
    /// waiting up to `timeout` seconds for a first message and briefly for more while fewer
    /// than `max_rows` came. With `scan`, only the messages of its range are kept. The columns
    /// are built without the GIL; no Python object is made per message. With an asyncio
    /// future, returns at once and completes it with what is queued once something is (an
    /// empty batch at the timeout; a cancelled one takes nothing).
    #[pyo3(signature = (layout, max_rows, timeout=None, scan=None, *, future=None))]
    fn receive_arrow(
        &self,
        py: Python<'_>,
        layout: &Bound<'_, PyArrowLayout>,
        max_rows: usize,
        timeout: Option<&Bound<'_, PyAny>>,
        scan: Option<&Bound<'_, PyRangeScan>>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.guard.check()?;
        if max_rows == 0 {
            return Err(invalid("max_rows must be at least 1"));
        }
        let deadline = convert::deadline(timeout)?;
        if let Some(future) = future {
            let rows = (layout.clone().unbind(), scan.map(|s| s.clone().unbind()));
            receive::receive_arrow(py, &self.inner, &self.dispatch, rows, max_rows, deadline, future)?;
            return Ok(py.None());
        }
        let msgs = self.gather(py, max_rows, deadline)?;
        let batch = arrow::batch_of(py, layout.get(), scan.map(|s| s.get()), msgs)?;
        Ok(Bound::new(py, batch)?.into_any().unbind())
    }

    /// Acknowledges every row of `data` (a record batch or table read from this consumer):
    /// the ids of its message id column, each individually (a batched message's own index).
    fn ack_arrow(&self, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.guard.check()?;
        let ids = arrow::row_ids(data)?;
        let n = ids.len();
        self.inner.ack_many(ids).map_err(to_pyerr)?;
        Ok(n)
    }

    #[pyo3(signature = (message, txn=None))]
    fn ack(&self, message: &Bound<'_, PyAny>, txn: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.guard.check()?;
        let id = message_id_of(message)?;
        match txn.filter(|t| !t.is_none()) {
            Some(t) => self.inner.ack_in_txn(&id, false, &transaction::of(t)?),
            None => self.inner.ack(&id),
        }
        .map_err(to_pyerr)
    }

    fn ack_many(&self, messages: &Bound<'_, PyAny>) -> PyResult<()> {
        self.guard.check()?;
        let mut ids = Vec::with_capacity(messages.len().unwrap_or(0));
        for m in messages.try_iter()? {
            ids.push(message_id_of(&m?)?);
        }
        self.inner.ack_many(ids).map_err(to_pyerr)
    }

    #[pyo3(signature = (message, txn=None))]
    fn ack_cumulative(&self, message: &Bound<'_, PyAny>, txn: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.guard.check()?;
        let id = message_id_of(message)?;
        match txn.filter(|t| !t.is_none()) {
            Some(t) => self.inner.ack_in_txn(&id, true, &transaction::of(t)?),
            None => self.inner.ack_cumulative(&id),
        }
        .map_err(to_pyerr)
    }

    #[pyo3(signature = (message, cumulative=false, *, future=None))]
    fn ack_with_receipt(
        &self,
        py: Python<'_>,
        message: &Bound<'_, PyAny>,
        cumulative: bool,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let id = message_id_of(message)?;
        self.call(
            py,
            future,
            |c| async move { c.ack_with_receipt(&id, cumulative).await },
            none,
        )
    }

    fn nack(&self, message: &Bound<'_, PyAny>) -> PyResult<()> {
        self.guard.check()?;
        // A message says how often it came before (for `nack_backoff`); a bare id, never.
        let redelivery_count = message
            .cast::<PyMessage>()
            .map_or(0, |m| m.get().inner.redelivery_count);
        self.inner
            .nack(&message_id_of(message)?, redelivery_count)
            .map_err(to_pyerr)
    }

    /// Publishes `message` to the retry letter topic to come back after `delay` seconds (to
    /// the dead letter topic once retried `max_redeliver_count` times), then acknowledges it.
    #[pyo3(signature = (message, delay, properties=None, *, future=None))]
    fn reconsume_later(
        &self,
        py: Python<'_>,
        message: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
        properties: Option<&Bound<'_, PyAny>>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let msg = message
            .cast::<PyMessage>()
            .map_err(|_| pyo3::exceptions::PyTypeError::new_err("reconsume_later takes a received Message"))?
            .get()
            .inner
            .clone();
        let delay = match convert::span(Some(delay), "delay")? {
            convert::Span::Within(d) => d,
            convert::Span::Unlimited => {
                return Err(invalid(
                    "delay must be a finite number of seconds: the message would never come back",
                ))
            }
        };
        let custom = match properties.filter(|p| !p.is_none()) {
            Some(p) => convert::string_pairs(p, "properties")?,
            None => Vec::new(),
        };
        self.call(
            py,
            future,
            |c| async move { c.reconsume_later(&msg, delay, custom).await },
            none,
        )
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

    #[pyo3(signature = (target, *, future=None))]
    fn seek(&self, py: Python<'_>, target: &Bound<'_, PyAny>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        let t = seek_target(target)?;
        self.call(py, future, |c| async move { c.seek(t).await }, none)
    }

    #[pyo3(signature = (*, future=None))]
    fn last_message_ids(&self, py: Python<'_>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        self.call(py, future, |c| async move { c.last_message_ids().await }, id_list)
    }

    /// The broker's statistics per covered topic, as dicts.
    #[pyo3(signature = (*, future=None))]
    fn stats(&self, py: Python<'_>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        let stats = |c: client::Consumer| async move {
            let all = c.stats().await?;
            Ok((all, c.queued(), c.corrupt_messages(), c.client_stats()))
        };
        self.call(py, future, stats, |py, (all, queued, corrupt, mine)| {
            let out = PyList::empty(py);
            for s in all {
                let d = fields_dict!(
                    py,
                    s,
                    [
                        topic,
                        msg_rate_out,
                        msg_throughput_out,
                        msg_rate_redeliver,
                        consumer_name,
                        available_permits,
                        unacked_messages,
                        blocked_consumer_on_unacked_msgs,
                        msg_backlog,
                        subscription_type,
                    ]
                );
                d.set_item("queued", queued)?;
                d.set_item("corrupt_messages", corrupt)?;
                d.set_item("client", stats::consumer_dict(py, &mine)?)?;
                out.append(d)?;
            }
            Ok(out.into_any().unbind())
        })
    }

    #[pyo3(signature = (*, future=None))]
    fn has_message_available(&self, py: Python<'_>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        self.call(
            py,
            future,
            |c| async move { c.has_message_available().await },
            |py, b| Ok(pyo3::types::PyBool::new(py, b).to_owned().into_any().unbind()),
        )
    }

    #[pyo3(signature = (*, future=None))]
    fn unsubscribe(&self, py: Python<'_>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        self.call(py, future, |c| async move { c.unsubscribe().await }, none)
    }
}

/// A consumer's (or reader's) client-side statistics.
#[pyfunction]
pub fn _consumer_stats<'py>(py: Python<'py>, consumer: &Bound<'py, PyConsumer>) -> PyResult<Bound<'py, PyDict>> {
    stats::consumer_dict(py, &consumer.get().engine().client_stats())
}

/// What `receive_many` wants: at least one message, and a byte limit of at least one byte.
fn want_many(max_messages: usize, max_bytes: Option<usize>) -> PyResult<Want> {
    if max_messages == 0 {
        return Err(invalid("max_messages must be at least 1"));
    }
    if max_bytes == Some(0) {
        return Err(invalid("max_bytes must be at least 1 (None: no limit)"));
    }
    Ok(Want::UpTo(max_messages, max_bytes.unwrap_or(usize::MAX)))
}

/// How long a bulk receive waits for more messages once it has some: the broker refills the
/// queue as soon as half of it is taken, so more are usually moments away.
const TOP_UP: Duration = Duration::from_millis(20);

impl PyConsumer {
    /// The schema its messages decode with (None: bytes).
    pub(super) fn binding(&self) -> Option<&Arc<Binding>> {
        self.schema.as_ref()
    }

    fn receive_for_asyncio(
        &self,
        py: Python<'_>,
        want: Want,
        deadline: Option<Instant>,
        future: Py<PyAny>,
    ) -> PyResult<()> {
        self.guard.check()?;
        receive::receive(
            py,
            &self.inner,
            self.schema.as_ref(),
            &self.dispatch,
            want,
            deadline,
            future,
        )
    }

    /// Up to `max` messages: waits until `deadline` for the first, then up to [`TOP_UP`] at
    /// a time for more (none when nothing came in time).
    fn gather(&self, py: Python<'_>, max: usize, deadline: Option<Instant>) -> PyResult<Vec<client::Message>> {
        let mut msgs = self.inner.try_receive_many(max).map_err(to_pyerr)?;
        let mut until = deadline;
        while msgs.len() < max {
            if !msgs.is_empty() {
                let more = self.inner.try_receive_many(max - msgs.len()).map_err(to_pyerr)?;
                if !more.is_empty() {
                    msgs.extend(more);
                    continue;
                }
                until = Some(Instant::now() + TOP_UP);
            }
            if until.is_some_and(|d| d <= Instant::now()) {
                break;
            }
            match self.receive_one(py, until) {
                Ok(m) => msgs.push(m),
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyTimeoutError>(py) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(msgs)
    }

    /// The next message, waiting until `deadline` (None: for ever) with the GIL released.
    pub(super) fn receive_one(&self, py: Python<'_>, deadline: Option<Instant>) -> PyResult<client::Message> {
        self.guard.check()?;
        if let Some(m) = self.inner.try_receive().map_err(to_pyerr)? {
            return Ok(m);
        }
        let mut interrupt: Option<PyErr> = None;
        let c = &self.inner;
        let got = gate::detach(py, || {
            c.receive_blocking(deadline, || {
                let checked = gate::attach_unless_exiting(|py| py.check_signals());
                checked.unwrap_or_else(|| gate::park_for_ever()).map_err(|e| {
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
