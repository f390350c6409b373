//! `_Transaction`: the engine handle behind `magnetar.Transaction` and
//! `magnetar.AsyncTransaction`.

use std::sync::Arc;

use pyo3::prelude::*;

use super::dispatch::Dispatcher;
use super::runtime::{engine_handle, none, EngineHandle, ForkGuard};
use crate::client::{self, TxnId};

/// Engine handle of a transaction.
#[pyclass(name = "_Transaction", module = "magnetar._core", frozen)]
pub struct PyTransaction {
    pub(super) inner: client::Transaction,
    guard: ForkGuard,
    dispatch: Arc<Dispatcher>,
}

engine_handle!(PyTransaction, client::Transaction);

impl PyTransaction {
    pub fn new(inner: client::Transaction, guard: ForkGuard, dispatch: Arc<Dispatcher>) -> Self {
        PyTransaction { inner, guard, dispatch }
    }
}

/// The engine transaction behind `obj`: a `_Transaction`, or a `magnetar` transaction object
/// holding one in `_core`.
pub fn of(obj: &Bound<'_, PyAny>) -> PyResult<client::Transaction> {
    if let Ok(t) = obj.cast::<PyTransaction>() {
        return Ok(t.get().inner.clone());
    }
    if let Ok(core) = obj.getattr("_core") {
        if let Ok(t) = core.cast::<PyTransaction>() {
            return Ok(t.get().inner.clone());
        }
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "txn must be a transaction from client.new_transaction(), not {}",
        obj.get_type().name()?
    )))
}

/// The transaction named by the `txn` entry of a message's fields, if any.
pub fn of_fields(fields: Option<&Bound<'_, pyo3::types::PyDict>>) -> PyResult<Option<client::Transaction>> {
    match fields.map(|f| f.get_item("txn")).transpose()?.flatten() {
        Some(t) if !t.is_none() => Ok(Some(of(&t)?)),
        _ => Ok(None),
    }
}

/// A transaction id from Python: `(most, least)`.
pub fn id_of(most: u64, least: u64) -> TxnId {
    TxnId { most, least }
}

#[pymethods]
impl PyTransaction {
    /// `(most, least)` significant bits of the id.
    #[getter]
    fn id(&self) -> (u64, u64) {
        let id = self.inner.id();
        (id.most, id.least)
    }

    /// "open", "committing", "aborting", "committed", "aborted" or "errored".
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state().name()
    }

    #[pyo3(signature = (*, future=None))]
    fn commit(&self, py: Python<'_>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        self.call(py, future, |t| async move { t.commit().await }, none)
    }

    #[pyo3(signature = (*, future=None))]
    fn abort(&self, py: Python<'_>, future: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        self.call(py, future, |t| async move { t.abort().await }, none)
    }
}
