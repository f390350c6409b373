//! `_Producer`: the engine handle behind `magnetar.Producer` and `magnetar.AsyncProducer`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::arrow;
use super::arrow_values::PyValueEncoder;
use super::gate;
use super::getters;
use super::runtime::{engine_handle, none, run, wait, EngineHandle};
use super::schema;
use super::stats;
use super::transaction;
use super::types::{id_list, new_id, SendFuture};
use crate::client::producer::WouldBlock;
use crate::client::{self, Error};
use crate::columnar;
use crate::columnar::schema_write::ValueEncoder;
use crate::columnar::write::Roles;

// `close(*, future=None)` and `closed` come with it (see `engine_handle!`).
engine_handle! {
    /// Engine handle of a producer.
    #[pyclass(name = "_Producer", module = "magnetar._core", frozen)]
    pub struct PyProducer(client::Producer) {
        /// Encodes what it sends with it (a `magnetar.schema` object).
        schema: Option<Py<PyAny>>,
    };
}

fn id_obj(py: Python<'_>, id: client::MessageId) -> PyResult<Py<PyAny>> {
    Ok(new_id(py, id)?.into_any())
}

getters!(PyProducer {
    fn topic() -> &str;
    fn name() -> String;
    fn last_sequence_id() -> i64;
    fn is_connected() -> bool;
    fn partitions() -> usize;
});

#[pymethods]
impl PyProducer {
    /// Sends one message (`fields`: the keyword arguments of `Producer.send`, or None) and
    /// returns its id once the broker has it. A blocking send flushes the open batch; an
    /// asyncio send does not, so concurrent coroutines share batches (the batching delay bounds
    /// the wait), as the other clients' async sends do.
    #[pyo3(signature = (data, fields=None, *, future=None))]
    fn send(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyDict>>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let msg = self.outgoing(data, fields)?;
        let p = self.inner.clone();
        let room = future.is_some().then(|| self.dispatch.clone());
        let send = async move {
            match room {
                Some(room) => {
                    room.room().await;
                    p.send_with(msg, false).await
                }
                None => p.send(msg).await,
            }
        };
        run(py, &self.dispatch, future, send, id_obj)
    }

    /// Queues one message and returns its `SendFuture`; waits only while the pending queue
    /// is full and the producer blocks when full.
    #[pyo3(signature = (data, fields=None))]
    fn send_async(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<SendFuture>> {
        let msg = self.outgoing(data, fields)?;
        let (fut, done) = SendFuture::pending(py, &self.dispatch)?;
        self.enqueue(py, msg, done)?;
        Ok(fut)
    }

    /// Sends every payload (bytes-like) and returns every id once all receipts are in; with
    /// `txn`, every message is sent inside that transaction.
    #[pyo3(signature = (payloads, keys=None, properties=None, event_times=None, *, txn=None, future=None))]
    #[allow(clippy::too_many_arguments)]
    fn send_many(
        &self,
        py: Python<'_>,
        payloads: &Bound<'_, PyAny>,
        keys: Option<&Bound<'_, PyAny>>,
        properties: Option<&Bound<'_, PyAny>>,
        event_times: Option<&Bound<'_, PyAny>>,
        txn: Option<&Bound<'_, PyAny>>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.guard.check()?;
        let mut msgs = schema::messages(self.schema.as_ref(), payloads, keys, properties, event_times)?;
        if let Some(t) = txn.filter(|t| !t.is_none()) {
            let t = transaction::of(t)?;
            for m in &mut msgs {
                m.txn = Some(t.clone());
            }
        }
        let p = self.inner.clone();
        let room = future.is_some().then(|| self.dispatch.clone());
        let send = async move {
            if let Some(room) = room {
                room.room().await;
            }
            send_all(p, msgs).await
        };
        run(py, &self.dispatch, future, send, id_list)
    }

    /// Queues every row of an Arrow record batch or table (`__arrow_c_array__` or
    /// `__arrow_c_stream__`) and returns their `_Receipts` once all are queued, so the caller
    /// can go on while they are in flight. `value` names the payload column (binary or
    /// string); `key`, `properties` and `event_time` name optional columns (None, or a name
    /// the data lacks: not set). With `txn`, the messages are part of that transaction. With
    /// `encoder` (the topic's `_ValueEncoder`), each payload is its row's other columns
    /// (a record schema) or its value (a primitive one) encoded with the topic's schema.
    #[pyo3(signature = (data, value="value", key=None, properties=None, event_time=None, txn=None, encoder=None))]
    #[allow(clippy::too_many_arguments)]
    fn send_arrow(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        value: &str,
        key: Option<&str>,
        properties: Option<&str>,
        event_time: Option<&str>,
        txn: Option<&Bound<'_, PyAny>>,
        encoder: Option<&Bound<'_, PyValueEncoder>>,
    ) -> PyResult<arrow::PyReceipts> {
        let roles = Roles {
            value,
            key,
            properties,
            event_time,
        };
        let msgs = self.arrow_messages(py, data, &roles, txn, encoder)?;
        let n = msgs.len();
        let p = self.inner.clone();
        let receipts = wait(py, async move { Ok(p.enqueue_many(msgs).await) })?;
        Ok(arrow::PyReceipts::new(receipts, n))
    }

    /// [`send_arrow`](Self::send_arrow), waiting for every receipt: the ids in row order
    /// (the first failure raises, with how many failed). With an asyncio future, returns at
    /// once and completes it.
    #[pyo3(signature = (data, value="value", key=None, properties=None, event_time=None, txn=None, encoder=None, *, future=None))]
    #[allow(clippy::too_many_arguments)]
    fn send_arrow_ids(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        value: &str,
        key: Option<&str>,
        properties: Option<&str>,
        event_time: Option<&str>,
        txn: Option<&Bound<'_, PyAny>>,
        encoder: Option<&Bound<'_, PyValueEncoder>>,
        future: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let roles = Roles {
            value,
            key,
            properties,
            event_time,
        };
        let msgs = self.arrow_messages(py, data, &roles, txn, encoder)?;
        let p = self.inner.clone();
        let room = future.is_some().then(|| self.dispatch.clone());
        let send = async move {
            if let Some(room) = room {
                room.room().await;
            }
            send_all(p, msgs).await
        };
        run(py, &self.dispatch, future, send, id_list)
    }

    #[pyo3(signature = (*, future=None))]
    fn flush(&self, py: Python<'_>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        self.call(py, future, |p| async move { p.flush().await }, none)
    }
}

impl PyProducer {
    /// The messages of every row of `data` (see `send_arrow`), built without the GIL.
    fn arrow_messages(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        roles: &Roles<'_>,
        txn: Option<&Bound<'_, PyAny>>,
        encoder: Option<&Bound<'_, PyValueEncoder>>,
    ) -> PyResult<Vec<client::OutgoingMessage>> {
        self.guard.check()?;
        let own;
        let encoder = match (encoder, &self.schema) {
            (Some(e), _) => Some(&e.get().inner),
            (None, Some(schema)) => {
                own = self.schema_encoder(schema.bind(py))?;
                own.as_ref()
            }
            (None, None) => None,
        };
        let txn = txn.filter(|t| !t.is_none()).map(transaction::of).transpose()?;
        let batches = arrow::import_batches(data)?;
        gate::detach(py, || {
            let mut all = Vec::with_capacity(batches.iter().map(|b| b.num_rows()).sum());
            for b in &batches {
                all.extend(match encoder {
                    Some(e) => columnar::write::with_metadata(b, roles, e.messages(b)?)?,
                    None => columnar::write::messages(b, roles)?,
                });
            }
            if let Some(t) = &txn {
                for m in &mut all {
                    m.txn = Some(t.clone());
                }
            }
            Ok::<_, Error>(all)
        })
        .map_err(super::errors::to_pyerr)
    }

    /// The encoder of the rows of an Arrow send under this producer's `schema` (a
    /// `magnetar.schema` object): None when its payloads are bytes (BYTES, PROTOBUF, ...), sent
    /// as the value column has them.
    fn schema_encoder(&self, schema: &Bound<'_, PyAny>) -> PyResult<Option<ValueEncoder>> {
        let wire = schema.call_method0(pyo3::intern!(schema.py(), "_wire"))?;
        if wire.is_none() {
            return Ok(None);
        }
        let (_, kind, definition, _): (String, i32, Vec<u8>, Bound<'_, PyAny>) = wire.extract()?;
        ValueEncoder::new(kind, &definition).map_err(|e| super::errors::invalid(format!("the producer's schema: {e}")))
    }

    /// The message of `data` under this producer's schema (`fields`: the keyword arguments of
    /// `Producer.send`, or None), in the transaction the fields name.
    pub(super) fn outgoing(
        &self,
        data: &Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<client::OutgoingMessage> {
        self.guard.check()?;
        let mut msg = schema::message(self.schema.as_ref(), data, fields)?;
        msg.txn = transaction::of_fields(fields)?;
        Ok(msg)
    }

    /// Queues `msg`, whose receipt goes to `done`; waits only while the pending queue (or the
    /// client's callback backlog) is full and the producer blocks when full.
    pub(super) fn enqueue(
        &self,
        py: Python<'_>,
        msg: client::OutgoingMessage,
        done: client::SendCallback,
    ) -> PyResult<()> {
        self.dispatch.wait_for_room(py, self.inner.blocks_if_full())?;
        if let Err(blocked) = self.inner.try_enqueue(msg, false, done) {
            let WouldBlock(msg, done) = *blocked;
            let p = self.inner.clone();
            wait(py, async move {
                p.enqueue(msg, false, done).await;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Whether it encodes with a schema (without one it sends bytes as they are).
    pub(super) fn has_schema(&self) -> bool {
        self.schema.is_some()
    }
}

/// A producer's client-side statistics (no round trip: read from the engine's counters).
#[pyfunction]
pub fn _producer_stats<'py>(py: Python<'py>, producer: &Bound<'py, PyProducer>) -> PyResult<Bound<'py, PyDict>> {
    stats::producer_dict(py, &producer.get().engine().stats())
}

/// Sends `msgs` and waits for every receipt: their ids, or the first failure with a count.
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
