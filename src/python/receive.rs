//! Receiving for asyncio. A receive given an asyncio future takes its messages on the event
//! loop's own thread, in the callback that completes the future, and only while the future is
//! still pending. A receive cancelled while it waits therefore takes nothing: its message stays
//! at the head of the queue for the next receive, and nothing is ever taken and handed back
//! (which would have to undo flow permits and the transaction book of what was taken).
//!
//! While the queue is empty a task on the runtime waits for a message (or the deadline) and
//! then asks the event loop, through the client's dispatch thread, to try again.

use std::sync::Arc;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::PyList;

use super::arrow::{batch_of, PyArrowLayout, PyRangeScan};
use super::dispatch::{complete_later, Dispatcher};
use super::errors::to_pyerr;
use super::runtime::runtime;
use super::schema::Binding;
use super::types::{new_message_with, without_gc};
use crate::client::{self, Error, ErrorKind};

/// What one receive takes.
#[derive(Clone, Copy)]
pub(super) enum Want {
    /// One message; a timeout raises.
    One,
    /// What is queued, up to this many messages of at most this many payload bytes together
    /// (one message in any case); a timeout gives an empty list.
    UpTo(usize, usize),
    /// What is queued, up to this many messages, as one Arrow batch of the arrival's layout; a
    /// timeout gives an empty batch.
    Rows(usize),
}

/// One asyncio receive in flight: called with its future on the event loop's thread, it
/// completes the future if anything can be taken, or waits again.
#[pyclass(name = "_Arrival", module = "magnetar._core", frozen)]
pub(super) struct Arrival {
    consumer: client::Consumer,
    schema: Option<Arc<Binding>>,
    want: Want,
    /// The columns of a `Want::Rows` receive, and the range scan that keeps its messages.
    layout: Option<Rows>,
    deadline: Option<Instant>,
    dispatch: Arc<Dispatcher>,
    event_loop: Py<PyAny>,
}

/// Starts an asyncio receive: completes `future` now if a message is queued (the caller is on
/// the event loop's thread, the future just made), else once one arrives or `deadline` passes.
pub(super) fn receive(
    py: Python<'_>,
    consumer: &client::Consumer,
    schema: Option<&Arc<Binding>>,
    dispatch: &Arc<Dispatcher>,
    want: Want,
    deadline: Option<Instant>,
    future: Py<PyAny>,
) -> PyResult<()> {
    start(py, consumer, schema, None, dispatch, want, deadline, future)
}

/// The columns of an Arrow receive, and the range scan that keeps its messages (all: None).
pub(super) type Rows = (Py<PyArrowLayout>, Option<Py<PyRangeScan>>);

/// [`receive`] of up to `max_rows` messages as one Arrow batch of `rows`' columns.
pub(super) fn receive_arrow(
    py: Python<'_>,
    consumer: &client::Consumer,
    dispatch: &Arc<Dispatcher>,
    rows: Rows,
    max_rows: usize,
    deadline: Option<Instant>,
    future: Py<PyAny>,
) -> PyResult<()> {
    start(
        py,
        consumer,
        None,
        Some(rows),
        dispatch,
        Want::Rows(max_rows),
        deadline,
        future,
    )
}

#[allow(clippy::too_many_arguments)]
fn start(
    py: Python<'_>,
    consumer: &client::Consumer,
    schema: Option<&Arc<Binding>>,
    layout: Option<Rows>,
    dispatch: &Arc<Dispatcher>,
    want: Want,
    deadline: Option<Instant>,
    future: Py<PyAny>,
) -> PyResult<()> {
    let fut = future.bind(py);
    if let Some(value) = take(py, consumer, schema, layout.as_ref(), want)? {
        fut.call_method1("set_result", (value,))?;
        return Ok(());
    }
    let arrival = Arrival {
        consumer: consumer.clone(),
        schema: schema.cloned(),
        want,
        layout,
        deadline,
        dispatch: dispatch.clone(),
        event_loop: fut.call_method0("get_loop")?.unbind(),
    };
    Bound::new(py, arrival)?.call1((future,))?;
    Ok(())
}

/// What a receive wants, if the queue has it (None: wait).
fn take(
    py: Python<'_>,
    consumer: &client::Consumer,
    schema: Option<&Arc<Binding>>,
    layout: Option<&Rows>,
    want: Want,
) -> PyResult<Option<Py<PyAny>>> {
    match want {
        Want::Rows(max) => {
            let msgs = consumer.try_receive_many(max).map_err(to_pyerr)?;
            if msgs.is_empty() {
                return Ok(None);
            }
            rows(py, layout, msgs).map(Some)
        }
        Want::One => match consumer.try_receive().map_err(to_pyerr)? {
            Some(m) => Ok(Some(new_message_with(py, m, schema)?.into_any())),
            None => Ok(None),
        },
        Want::UpTo(..) => {
            let msgs = take_now(consumer, want).map_err(to_pyerr)?;
            if msgs.is_empty() {
                return Ok(None);
            }
            Ok(Some(messages(py, msgs, schema)?.into_any().unbind()))
        }
    }
}

#[pymethods]
impl Arrival {
    /// Completes `future` with what can be taken, unless it is done already (cancelled), in
    /// which case nothing is taken. Never raises: a failure completes the future.
    fn __call__(slf: &Bound<'_, Self>, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("done")?.is_truthy()? {
            return Ok(());
        }
        let this = slf.get();
        let outcome = match take(
            slf.py(),
            &this.consumer,
            this.schema.as_ref(),
            this.layout.as_ref(),
            this.want,
        ) {
            Ok(Some(value)) => Ok(value),
            Ok(None) if this.deadline.is_some_and(|d| d <= Instant::now()) => this.timed_out(slf.py()),
            Ok(None) => {
                this.wait(slf.clone().unbind(), future.clone().unbind());
                return Ok(());
            }
            Err(e) => Err(e),
        };
        match outcome {
            Ok(value) => future.call_method1("set_result", (value,))?,
            Err(e) => future.call_method1("set_exception", (e.into_value(slf.py()),))?,
        };
        Ok(())
    }
}

impl Arrival {
    fn timed_out(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.want {
            Want::One => Err(to_pyerr(Error::new(
                ErrorKind::Timeout,
                "no message received within the timeout",
            ))),
            Want::UpTo(..) => Ok(PyList::empty(py).into_any().unbind()),
            Want::Rows(_) => rows(py, self.layout.as_ref(), Vec::new()),
        }
    }

    /// Waits on the runtime for a message, the consumer's end or the deadline, then calls
    /// `arrival` again on the event loop. A wait whose future was cancelled ends at the next of
    /// those and takes nothing.
    fn wait(&self, arrival: Py<Arrival>, future: Py<PyAny>) {
        let consumer = self.consumer.clone();
        let deadline = self.deadline;
        let dispatch = self.dispatch.clone();
        runtime().spawn(async move {
            match deadline {
                Some(d) => {
                    let _ = tokio::time::timeout_at(d.into(), consumer.wait_for_message()).await;
                }
                None => consumer.wait_for_message().await,
            }
            dispatch.push(Box::new(move |py| {
                let event_loop = arrival.get().event_loop.clone_ref(py);
                complete_later(event_loop, future, arrival.into_any());
            }));
        });
    }
}

/// The Arrow batch of `msgs` in `layout`'s columns.
fn rows(py: Python<'_>, layout: Option<&Rows>, msgs: Vec<client::Message>) -> PyResult<Py<PyAny>> {
    let Some((layout, scan)) = layout else {
        return Err(to_pyerr(Error::new(
            ErrorKind::Other,
            "an Arrow receive without columns",
        )));
    };
    let batch = batch_of(py, layout.get(), scan.as_ref().map(|s| s.get()), msgs)?;
    Ok(Bound::new(py, batch)?.into_any().unbind())
}

/// What a `receive_many` wants that is queued now (`want` is `UpTo`).
pub(super) fn take_now(consumer: &client::Consumer, want: Want) -> client::Result<Vec<client::Message>> {
    match want {
        Want::One => Ok(consumer.try_receive()?.into_iter().collect()),
        Want::Rows(max) => consumer.try_receive_many(max),
        Want::UpTo(max, max_bytes) => consumer.try_receive_many_within(max, max_bytes),
    }
}

/// What is left of `want` after `first` was taken, if anything.
pub(super) fn after(want: Want, first: &client::Message) -> Option<Want> {
    match want {
        Want::UpTo(max, max_bytes) if max > 1 && first.payload.len() < max_bytes => {
            Some(Want::UpTo(max - 1, max_bytes - first.payload.len()))
        }
        _ => None,
    }
}

/// Python messages of `msgs`, decoded by `schema`.
pub(super) fn messages<'py>(
    py: Python<'py>,
    msgs: Vec<client::Message>,
    schema: Option<&Arc<Binding>>,
) -> PyResult<Bound<'py, PyList>> {
    without_gc(py, || {
        let out = PyList::empty(py);
        for m in msgs {
            out.append(new_message_with(py, m, schema)?)?;
        }
        Ok(out)
    })
}
