//! Arrow across the boundary, through the Arrow C Data Interface's PyCapsule protocol: record
//! batches of received messages out (`_ArrowBatch.__arrow_c_array__`, which pyarrow and any
//! other Arrow library imports without a copy), batches and tables to send in
//! (`__arrow_c_array__` / `__arrow_c_stream__` of the caller's object). The columns themselves
//! are built in `crate::columnar`.

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;

use arrow_array::ffi::{from_ffi, to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use arrow_array::{Array, RecordBatch, StructArray};
use arrow_schema::{DataType, Schema};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

use super::arrow_values::{fetch_writers, PyValueSchema};
use super::errors::{invalid, to_pyerr};
use super::gate;
use super::runtime;
use super::types::PyMessageId;
use crate::client::producer::Receipts;
use crate::client::{self, Error, ErrorKind};
use crate::columnar::read::Layout;
use crate::columnar::scan::RangeScan;

fn arrow_error(what: &str, e: impl std::fmt::Display) -> PyErr {
    invalid(format!("{what}: {e}"))
}

/// The Arrow schema of an object with `__arrow_c_schema__` (a `pyarrow.Schema`, ...).
fn import_schema(obj: &Bound<'_, PyAny>) -> PyResult<Schema> {
    if !obj.hasattr(pyo3::intern!(obj.py(), "__arrow_c_schema__"))? {
        return Err(PyTypeError::new_err(format!(
            "expected an Arrow schema (an object with __arrow_c_schema__), not {}",
            obj.get_type().name()?
        )));
    }
    let capsule = obj.call_method0(pyo3::intern!(obj.py(), "__arrow_c_schema__"))?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let ptr = capsule
        .pointer_checked(Some(c"arrow_schema"))?
        .cast::<FFI_ArrowSchema>();
    // SAFETY: an "arrow_schema" capsule holds a valid FFI_ArrowSchema, which stays owned by
    // the capsule (borrowed here) while the capsule lives.
    let ffi = unsafe { ptr.as_ref() };
    Schema::try_from(ffi).map_err(|e| arrow_error("importing an Arrow schema", e))
}

/// The record batches of an object with `__arrow_c_array__` (a `pyarrow.RecordBatch`) or
/// `__arrow_c_stream__` (a `pyarrow.Table`, a reader).
pub fn import_batches(data: &Bound<'_, PyAny>) -> PyResult<Vec<RecordBatch>> {
    let py = data.py();
    if data.hasattr(pyo3::intern!(py, "__arrow_c_array__"))? {
        let pair = data.call_method0(pyo3::intern!(py, "__arrow_c_array__"))?;
        let (schema, array): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract()?;
        let schema = schema.cast::<PyCapsule>()?;
        let array = array.cast::<PyCapsule>()?;
        let schema_ptr = schema.pointer_checked(Some(c"arrow_schema"))?.cast::<FFI_ArrowSchema>();
        let array_ptr = array.pointer_checked(Some(c"arrow_array"))?.cast::<FFI_ArrowArray>();
        // SAFETY: the capsules hold valid C Data Interface structs; the array is moved out
        // (its capsule is left with a released one), the schema borrowed.
        let ffi_array = unsafe { FFI_ArrowArray::from_raw(array_ptr.as_ptr()) };
        let data = unsafe { from_ffi(ffi_array, schema_ptr.as_ref()) }
            .map_err(|e| arrow_error("importing an Arrow array", e))?;
        if !matches!(data.data_type(), DataType::Struct(_)) {
            return Err(invalid(format!(
                "expected a record batch (an Arrow struct array), not an array of {}",
                data.data_type()
            )));
        }
        let batch = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let s = StructArray::from(data);
            (s.null_count() == 0).then(|| RecordBatch::from(s))
        }));
        return match batch {
            Ok(Some(b)) => Ok(vec![b]),
            Ok(None) => Err(invalid("a record batch cannot have null rows")),
            Err(_) => Err(invalid("the Arrow array is malformed")),
        };
    }
    if data.hasattr(pyo3::intern!(py, "__arrow_c_stream__"))? {
        let capsule = data.call_method0(pyo3::intern!(py, "__arrow_c_stream__"))?;
        let capsule = capsule.cast::<PyCapsule>()?;
        let ptr = capsule
            .pointer_checked(Some(c"arrow_array_stream"))?
            .cast::<FFI_ArrowArrayStream>();
        // SAFETY: an "arrow_array_stream" capsule holds a valid stream, moved out here.
        let reader = unsafe { ArrowArrayStreamReader::from_raw(ptr.as_ptr()) }
            .map_err(|e| arrow_error("importing an Arrow stream", e))?;
        return reader
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| arrow_error("reading an Arrow stream", e));
    }
    Err(PyTypeError::new_err(format!(
        "expected an Arrow record batch or table (an object with __arrow_c_array__ or \
         __arrow_c_stream__), not {}",
        data.get_type().name()?
    )))
}

/// The message ids of every row of `data` (a record batch or table of a read): its
/// `message_id` (or `__messageId`) column, each id told its partition by the `__topic` column,
/// or else by the `topic` and `partition` columns, when the data has them (a consumer of
/// several topics routes each ack by it).
pub fn row_ids(data: &Bound<'_, PyAny>) -> PyResult<Vec<client::MessageId>> {
    use arrow_array::cast::AsArray;

    let batches = import_batches(data)?;
    let mut ids = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for b in &batches {
        let column = |name: &str| b.column_by_name(name);
        let Some(col) = column("message_id").or_else(|| column("__messageId")) else {
            return Err(invalid(
                "the data has no message_id (or __messageId) column: keep it among the columns read to ack \
                 the rows",
            ));
        };
        let Some(col) = col.as_binary_opt::<i32>() else {
            return Err(invalid(format!(
                "the message id column must be binary, not {}",
                col.data_type()
            )));
        };
        let names = column("__topic").and_then(|c| c.as_string_opt::<i32>().cloned());
        let topics = column("topic").and_then(|c| c.as_string_opt::<i32>().cloned());
        let parts = column("partition").and_then(|c| c.as_primitive_opt::<arrow_array::types::Int32Type>().cloned());
        for row in 0..b.num_rows() {
            if col.is_null(row) {
                return Err(invalid(format!("row {row} has no message id")));
            }
            let mut id = client::MessageId::deserialize(col.value(row))
                .map_err(|e| invalid(format!("row {row}: not a message id: {e}")))?;
            let name = match (&names, &topics, &parts) {
                (Some(n), _, _) if n.is_valid(row) => Some(n.value(row).to_string()),
                (_, Some(t), Some(p)) if t.is_valid(row) && p.is_valid(row) => Some(match p.value(row) {
                    i if i < 0 => t.value(row).to_string(),
                    i => format!("{}-partition-{i}", t.value(row)),
                }),
                _ => None,
            };
            id.topic = name.map(|n| std::sync::Arc::from(n.as_str()));
            ids.push(id);
        }
    }
    Ok(ids)
}

fn id_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<client::MessageId> {
    obj.cast::<PyMessageId>()
        .map(|id| id.get().inner.clone())
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a MessageId")))
}

/// The columns a read fills, checked once per partition.
#[pyclass(name = "_ArrowLayout", module = "magnetar._core", frozen)]
pub struct PyArrowLayout {
    pub(crate) inner: Layout,
    /// Where writer schemas of other versions come from (with `values`).
    fetch: Option<(client::Client, String)>,
}

#[pymethods]
impl PyArrowLayout {
    /// `schema` (anything with `__arrow_c_schema__`) names the columns; `topic` and
    /// `partition` (-1: not partitioned) fill the topic and partition columns, or with
    /// `per_message` each message's own do (a consumer of several partitions or topics). With
    /// `values` (the topic's `_ValueSchema`), its columns are the payload decoded with it.
    #[new]
    #[pyo3(signature = (schema, topic, partition, values=None, *, per_message=false))]
    fn new(
        schema: &Bound<'_, PyAny>,
        topic: &str,
        partition: i32,
        values: Option<&Bound<'_, PyValueSchema>>,
        per_message: bool,
    ) -> PyResult<Self> {
        let schema = std::sync::Arc::new(import_schema(schema)?);
        let (decoder, fetch) = match values {
            Some(v) => (Some(v.get().inner.clone()), v.get().fetch.clone()),
            None => (None, None),
        };
        let inner = if per_message {
            Layout::per_message(schema, topic, decoder)
        } else {
            Layout::with_values(schema, topic, partition, decoder)
        }
        .map_err(to_pyerr)?;
        Ok(PyArrowLayout { inner, fetch })
    }
}

/// A range of one partition being read: which messages belong to it, and when it is complete.
#[pyclass(name = "_RangeScan", module = "magnetar._core", frozen)]
pub struct PyRangeScan {
    pub(crate) inner: Mutex<RangeScan>,
}

#[pymethods]
impl PyRangeScan {
    #[new]
    #[pyo3(signature = (name, start, verify, end, end_time=None, end_is_message=false))]
    fn new(
        name: &str,
        start: Option<&Bound<'_, PyAny>>,
        verify: bool,
        end: &Bound<'_, PyAny>,
        end_time: Option<u64>,
        end_is_message: bool,
    ) -> PyResult<Self> {
        let start = start.filter(|s| !s.is_none()).map(|s| id_of(s, "start")).transpose()?;
        let scan = RangeScan::new(name, start, verify, id_of(end, "end")?, end_time).expect_end_message(end_is_message);
        Ok(PyRangeScan {
            inner: Mutex::new(scan),
        })
    }

    #[getter]
    fn done(&self) -> bool {
        self.lock().done()
    }

    #[getter]
    fn reached_end(&self) -> bool {
        self.lock().reached_end()
    }

    /// (ledger, entry, batch index) of the last message kept.
    #[getter]
    fn last_key(&self) -> (i64, i64, i32) {
        self.lock().last_key()
    }
}

impl PyRangeScan {
    fn lock(&self) -> std::sync::MutexGuard<'_, RangeScan> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Messages received as one Arrow record batch (`pyarrow.record_batch(obj)` imports it).
#[pyclass(name = "_ArrowBatch", module = "magnetar._core", frozen)]
pub struct PyArrowBatch {
    batch: RecordBatch,
    read: usize,
    loss: Option<String>,
}

#[pymethods]
impl PyArrowBatch {
    /// Rows in the batch.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// Messages received, kept or not (0: none arrived within the timeout).
    #[getter]
    fn messages_read(&self) -> usize {
        self.read
    }

    /// What the range scan found missing, if anything.
    #[getter]
    fn loss(&self) -> Option<String> {
        self.loss.clone()
    }

    /// The Arrow PyCapsule protocol: (schema capsule, array capsule) of a struct array.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        // A requested schema is a hint the producer may ignore (the protocol says so).
        let _ = requested_schema;
        let data = StructArray::from(self.batch.clone()).into_data();
        let (array, schema) = to_ffi(&data).map_err(|e| arrow_error("exporting Arrow columns", e))?;
        let schema = PyCapsule::new_with_value(py, schema, c"arrow_schema")?;
        let array = PyCapsule::new_with_value(py, array, c"arrow_array")?;
        PyTuple::new(py, [schema, array])
    }
}

/// Builds the batch of `msgs` (those of `scan`'s range when given) without the GIL.
pub fn batch_of(
    py: Python<'_>,
    layout: &PyArrowLayout,
    scan: Option<&PyRangeScan>,
    msgs: Vec<client::Message>,
) -> PyResult<PyArrowBatch> {
    let read = msgs.len();
    if let Some(values) = layout.inner.values() {
        fetch_writers(py, values, layout.fetch.as_ref(), &msgs)?;
    }
    let built = gate::detach(py, || {
        let mut loss = None;
        let kept: Vec<&client::Message> = match scan {
            Some(s) => {
                let step = s.lock().step(&msgs);
                loss = step.loss;
                step.keep.iter().map(|&i| &msgs[i]).collect()
            }
            None => msgs.iter().collect(),
        };
        layout.inner.build(&kept).map(|b| (b, loss))
    });
    let (batch, loss) = built.map_err(to_pyerr)?;
    Ok(PyArrowBatch { batch, read, loss })
}

enum ReceiptState {
    Pending(Receipts),
    Waiting,
    Done(Result<usize, Error>),
}

/// The receipts of messages queued by `_Producer.send_arrow`.
#[pyclass(name = "_Receipts", module = "magnetar._core", frozen)]
pub struct PyReceipts {
    state: Mutex<ReceiptState>,
    count: usize,
}

impl PyReceipts {
    pub fn new(receipts: Receipts, count: usize) -> Self {
        PyReceipts {
            state: Mutex::new(ReceiptState::Pending(receipts)),
            count,
        }
    }
}

#[pymethods]
impl PyReceipts {
    fn __len__(&self) -> usize {
        self.count
    }

    /// Waits for every receipt: the number of messages sent, or the first failure's error
    /// with how many failed.
    fn wait(&self, py: Python<'_>) -> PyResult<usize> {
        let pending = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match std::mem::replace(&mut *state, ReceiptState::Waiting) {
                ReceiptState::Pending(r) => r,
                ReceiptState::Waiting => {
                    return Err(invalid("another thread is waiting for these receipts"));
                }
                ReceiptState::Done(outcome) => {
                    *state = ReceiptState::Done(outcome.clone());
                    return outcome.map_err(to_pyerr);
                }
            }
        };
        let n = self.count;
        let outcome = runtime::wait(py, async move { Ok(summarize(pending.wait().await, n)) });
        let outcome = match outcome {
            Ok(o) => o,
            // interrupted (Ctrl-C): the receipts are gone with the task; say so next time
            Err(e) => {
                *self.state.lock().unwrap_or_else(|e| e.into_inner()) = ReceiptState::Done(Err(Error::new(
                    ErrorKind::Other,
                    "waiting for the receipts was interrupted",
                )));
                return Err(e);
            }
        };
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = ReceiptState::Done(outcome.clone());
        outcome.map_err(to_pyerr)
    }
}

/// How many messages were sent, or the first failure with a count.
pub fn summarize(results: Vec<client::Result<client::MessageId>>, n: usize) -> Result<usize, Error> {
    let mut ok = 0;
    let mut first_error = None;
    for r in results {
        match r {
            Ok(_) => ok += 1,
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        None => Ok(ok),
        Some(e) => Err(Error::new(
            e.kind(),
            format!("{} of {n} messages failed; first error: {}", n - ok, e.message()),
        )),
    }
}
