//! `_ValueSchema`: a topic's schema as the Arrow columns of its decoded payloads, for reads
//! whose rows carry the schema's fields (`crate::columnar::schema_read`). It exports the
//! columns' Arrow schema (`__arrow_c_schema__`), and fetches from the registry the writer
//! schemas of versions it meets, before a batch is built.

use std::sync::Arc;

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_schema::Schema;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use super::errors::invalid;
use super::runtime::wait;
use crate::client::{self, Message};
use crate::columnar::schema_read::ValueSchema;
use crate::columnar::schema_write::ValueEncoder;

/// A topic's schema, decoded into Arrow columns.
#[pyclass(name = "_ValueSchema", module = "magnetar._core", frozen)]
pub struct PyValueSchema {
    pub(crate) inner: Arc<ValueSchema>,
    /// The client and topic that writer schemas are fetched with.
    pub(crate) fetch: Option<(client::Client, String)>,
}

impl PyValueSchema {
    /// The columns of a schema of wire type `kind` with `definition`, registered under
    /// `version`; None when its payloads stay bytes. With `fetch` (a client and topic), writer
    /// schemas of other versions are fetched when met.
    pub(crate) fn new(
        kind: i32,
        definition: &[u8],
        version: &[u8],
        fetch: Option<(client::Client, String)>,
    ) -> PyResult<Option<Self>> {
        let Some(inner) =
            ValueSchema::new(kind, definition, version).map_err(|e| invalid(format!("the topic's schema: {e}")))?
        else {
            return Ok(None);
        };
        Ok(Some(PyValueSchema {
            inner: Arc::new(inner),
            fetch,
        }))
    }
}

#[pymethods]
impl PyValueSchema {
    /// The Arrow PyCapsule protocol: the schema of the columns.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = Schema::new(self.inner.fields().clone());
        let ffi = FFI_ArrowSchema::try_from(&schema).map_err(|e| invalid(format!("exporting an Arrow schema: {e}")))?;
        PyCapsule::new_with_value(py, ffi, c"arrow_schema")
    }
}

/// Encodes the rows of a write with a topic's Avro, JSON or primitive schema.
#[pyclass(name = "_ValueEncoder", module = "magnetar._core", frozen)]
pub struct PyValueEncoder {
    pub(crate) inner: ValueEncoder,
}

#[pymethods]
impl PyValueEncoder {
    /// An encoder for a schema of wire type `kind`; None for the kinds whose payloads a write
    /// takes as bytes (NONE, BYTES, PROTOBUF, KEY_VALUE, ...).
    #[staticmethod]
    fn of(kind: i32, definition: &[u8]) -> PyResult<Option<Self>> {
        let inner = ValueEncoder::new(kind, definition).map_err(|e| invalid(format!("the topic's schema: {e}")))?;
        Ok(inner.map(|inner| PyValueEncoder { inner }))
    }
}

/// Fetches the writer schemas of versions among `msgs` that `values` does not know yet.
pub fn fetch_writers(
    py: Python<'_>,
    values: &ValueSchema,
    fetch: Option<&(client::Client, String)>,
    msgs: &[client::Message],
) -> PyResult<()> {
    let refs: Vec<&Message> = msgs.iter().collect();
    let unknown = values.unknown_versions(&refs);
    let Some((c, topic)) = fetch else {
        return Ok(());
    };
    for version in unknown {
        let (c, topic, v) = (c.clone(), topic.clone(), version.clone());
        let got = wait(py, async move { c.get_schema(&topic, Some(v)).await })?;
        values.add_writer(version, got.as_ref().map(|(info, _)| (info.kind, info.data.as_slice())));
    }
    Ok(())
}
