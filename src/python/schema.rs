//! Schemas at the Python boundary. A schema is a `magnetar.schema` object; the engine takes
//! its wire description (`_wire()`), encodes through it on send (`_encode(value) -> bytes`, one
//! call per message) and hands each received message to it for `msg.value`
//! (`_decode_message(msg)`). The writer schema of a message's version is fetched from the
//! registry once per consumer and version, and cached here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use super::convert;
use super::errors::invalid;
use super::runtime::wait;
use crate::client;
use crate::protocol::schema::SchemaInfo;

/// Topic and schema version of a writer schema.
type WriterKey = (String, Vec<u8>);

/// A consumer's schema with what it needs to decode: the client (for writer schemas) and the
/// writer schemas fetched so far, by version.
pub struct Binding {
    schema: Py<PyAny>,
    client: client::Client,
    writers: Mutex<HashMap<WriterKey, Py<PyAny>>>,
}

impl Binding {
    /// The schema object (a `magnetar.schema` one, or a compat one).
    pub fn schema(&self) -> &Py<PyAny> {
        &self.schema
    }

    /// None when `schema` is None (bytes: `msg.value` is `msg.data`).
    pub fn new(schema: Option<Py<PyAny>>, client: &client::Client) -> Option<Arc<Binding>> {
        schema.map(|schema| {
            Arc::new(Binding {
                schema,
                client: client.clone(),
                writers: Mutex::new(HashMap::new()),
            })
        })
    }
}

/// The wire schema of a schema object (`schema._wire()`: None, or `(name, type, definition
/// bytes, properties)`).
pub fn info(schema: Option<&Bound<'_, PyAny>>) -> PyResult<Option<SchemaInfo>> {
    let Some(schema) = schema else {
        return Ok(None);
    };
    let wire = schema
        .call_method0("_wire")
        .map_err(|_| invalid("schema must be a magnetar.schema object"))?;
    if wire.is_none() {
        return Ok(None);
    }
    let (name, kind, data, properties): (String, i32, Vec<u8>, Bound<'_, PyDict>) = wire.extract()?;
    Ok(Some(SchemaInfo {
        name,
        kind,
        data,
        properties: super::convert::string_pairs(properties.as_any(), "schema properties")?,
    }))
}

/// What `schema._encode` gives: the payload, or (a KeyValue SEPARATED schema) the payload
/// and the base64 key that goes in the message key instead.
fn split<'py>(encoded: Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Option<String>)> {
    match encoded.cast::<PyTuple>() {
        Ok(t) => t.extract(),
        Err(_) => Ok((encoded, None)),
    }
}

/// Gives a message the key its schema encoded (base64, flagged as such).
fn set_key(msg: &mut client::OutgoingMessage, key: Option<String>) {
    if let Some(k) = key {
        msg.key = Some(k);
        msg.key_b64 = true;
    }
}

/// The message of `value` under `schema` (`fields`: the keyword arguments of `send`); `None`
/// is a null value.
pub fn message(
    schema: Option<&Py<PyAny>>,
    value: &Bound<'_, PyAny>,
    fields: Option<&Bound<'_, PyDict>>,
) -> PyResult<client::OutgoingMessage> {
    if value.is_none() {
        // A null value (tombstone) has no payload for any schema: nothing to encode.
        let mut msg = convert::message(PyBytes::new(value.py(), b"").as_any(), fields)?;
        msg.null_value = true;
        return Ok(msg);
    }
    let Some(s) = schema else {
        return convert::message(value, fields);
    };
    let (payload, key) = split(s.bind(value.py()).call_method1("_encode", (value,))?)?;
    let mut msg = convert::message(&payload, fields)?;
    set_key(&mut msg, key);
    Ok(msg)
}

/// The messages of `send_many`'s values under `schema`.
pub fn messages(
    schema: Option<&Py<PyAny>>,
    values: &Bound<'_, PyAny>,
    keys: Option<&Bound<'_, PyAny>>,
    properties: Option<&Bound<'_, PyAny>>,
    event_times: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<client::OutgoingMessage>> {
    let Some(s) = schema else {
        return convert::messages(values, keys, properties, event_times);
    };
    let s = s.bind(values.py());
    let payloads = PyList::empty(values.py());
    let mut schema_keys = Vec::new();
    for v in values.try_iter()? {
        let (payload, key) = split(s.call_method1("_encode", (v?,))?)?;
        payloads.append(payload)?;
        schema_keys.push(key);
    }
    let mut msgs = convert::messages(payloads.as_any(), keys, properties, event_times)?;
    for (msg, key) in msgs.iter_mut().zip(schema_keys) {
        set_key(msg, key);
    }
    Ok(msgs)
}

/// `msg.value`: the payload decoded by the consumer's schema `binding`, or the payload bytes.
/// `obj` is the Python message of `msg`, which the schema's `_decode_message` takes.
pub fn value(obj: &Bound<'_, PyAny>, msg: &client::Message, binding: Option<&Binding>) -> PyResult<Py<PyAny>> {
    let py = obj.py();
    if msg.null_value() {
        return Ok(py.None());
    }
    match binding {
        None => Ok(PyBytes::new(py, &msg.payload).into_any().unbind()),
        Some(b) => Ok(b.schema.bind(py).call_method1("_decode_message", (obj,))?.unbind()),
    }
}

/// The schema version a message was written with, as the registry's bytes.
pub fn version(msg: &client::Message) -> Option<&[u8]> {
    msg.metadata.schema_version.as_deref().filter(|v| !v.is_empty())
}

/// The registry's answer as a tuple `(name, type, definition, properties, version)`.
pub fn info_tuple(py: Python<'_>, info: &SchemaInfo, version: &[u8]) -> PyResult<Py<PyAny>> {
    let props = PyDict::new(py);
    for (k, v) in &info.properties {
        props.set_item(k, v)?;
    }
    let t = PyTuple::new(
        py,
        [
            info.name.clone().into_pyobject(py)?.into_any(),
            info.kind.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &info.data).into_any(),
            props.into_any(),
            PyBytes::new(py, version).into_any(),
        ],
    )?;
    Ok(t.into_any().unbind())
}

/// The writer schema of a message (`info_tuple`, or None when it has no version or the
/// registry has none), fetched once per version and consumer (`binding`); blocks while it
/// fetches.
pub fn writer(py: Python<'_>, msg: &client::Message, binding: Option<&Binding>) -> PyResult<Py<PyAny>> {
    let (Some(b), Some(v)) = (binding, version(msg)) else {
        return Ok(py.None());
    };
    let key = (msg.topic.to_string(), v.to_vec());
    if let Some(w) = b.writers.lock().expect("writers lock").get(&key) {
        return Ok(w.clone_ref(py));
    }
    let (c, topic, ver) = (b.client.clone(), key.0.clone(), v.to_vec());
    let got = wait(py, async move { c.get_schema(&topic, Some(ver)).await })?;
    let w = match got {
        Some((info, stored)) => info_tuple(py, &info, &stored)?,
        None => py.None(),
    };
    b.writers.lock().expect("writers lock").insert(key, w.clone_ref(py));
    Ok(w)
}
