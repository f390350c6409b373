//! A Python key reader (`magnetar.CryptoKeyReader` or any object with its two methods) as the
//! engine's [`CryptoKeyReader`].

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use super::gate;
use crate::client::crypto::{CryptoKeyReader, EncryptionKeyInfo, KeyReader};

/// Calls `get_public_key(name, metadata)` / `get_private_key(name, metadata)` on a Python object.
pub struct PyKeyReader {
    reader: Py<PyAny>,
    /// `repr` of the object, for logs (taken once, with the GIL held).
    shown: String,
}

impl std::fmt::Debug for PyKeyReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// The engine's reader for a Python object, checked for the two methods.
pub fn key_reader(obj: &Bound<'_, PyAny>) -> PyResult<KeyReader> {
    for method in ["get_public_key", "get_private_key"] {
        if !obj.getattr(method).is_ok_and(|m| m.is_callable()) {
            return Err(super::errors::invalid(format!(
                "crypto_key_reader must be a magnetar.CryptoKeyReader (or have get_public_key and get_private_key), not {}",
                obj.get_type()
            )));
        }
    }
    let shown = obj
        .repr()
        .map_or_else(|_| "CryptoKeyReader".to_string(), |r| r.to_string());
    Ok(Arc::new(PyKeyReader {
        reader: obj.clone().unbind(),
        shown,
    }))
}

impl PyKeyReader {
    fn call(&self, method: &str, name: &str, metadata: &[(String, String)]) -> Result<EncryptionKeyInfo, String> {
        gate::attach_unless_exiting(|py| {
            let meta = PyDict::new(py);
            for (k, v) in metadata {
                meta.set_item(k, v).map_err(|e| e.to_string())?;
            }
            let value = self
                .reader
                .bind(py)
                .call_method1(method, (name, meta))
                .map_err(|e| format!("{method}({name:?}) raised {e}"))?;
            key_info(&value).map_err(|e| format!("{method}({name:?}): {e}"))
        })
        .unwrap_or_else(|| Err("the interpreter is exiting".into()))
    }
}

fn key_bytes(value: &Bound<'_, PyAny>) -> Result<Vec<u8>, String> {
    if let Ok(s) = value.cast::<PyString>() {
        Ok(s.to_str().map_err(|e| e.to_string())?.as_bytes().to_vec())
    } else if let Ok(b) = value.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else {
        Err(format!(
            "returned {}, not bytes, str or (key, metadata)",
            value.get_type()
        ))
    }
}

fn key_info(value: &Bound<'_, PyAny>) -> Result<EncryptionKeyInfo, String> {
    let Ok(pair) = value.cast::<PyTuple>() else {
        return Ok(EncryptionKeyInfo {
            key: key_bytes(value)?,
            metadata: Vec::new(),
        });
    };
    if pair.len() != 2 {
        return Err("a tuple must be (key, metadata)".into());
    }
    let key = key_bytes(&pair.get_item(0).map_err(|e| e.to_string())?)?;
    let meta = pair.get_item(1).map_err(|e| e.to_string())?;
    let metadata = if meta.is_none() {
        Vec::new()
    } else {
        meta.cast::<PyDict>()
            .map_err(|_| "metadata must be a dict of str to str".to_string())?
            .iter()
            .map(|(k, v)| Ok((k.extract::<String>()?, v.extract::<String>()?)))
            .collect::<PyResult<Vec<_>>>()
            .map_err(|_| "metadata must be a dict of str to str".to_string())?
    };
    Ok(EncryptionKeyInfo { key, metadata })
}

impl CryptoKeyReader for PyKeyReader {
    fn public_key(&self, name: &str, metadata: &[(String, String)]) -> Result<EncryptionKeyInfo, String> {
        self.call("get_public_key", name, metadata)
    }

    fn private_key(&self, name: &str, metadata: &[(String, String)]) -> Result<EncryptionKeyInfo, String> {
        self.call("get_private_key", name, metadata)
    }
}

/// How a received message was encrypted (`Message.encryption`).
#[pyclass(name = "EncryptionContext", module = "magnetar", frozen, get_all)]
pub struct PyEncryptionContext {
    /// The encrypted data keys: (key name, RSA-encrypted data key, the key's metadata).
    keys: Vec<(String, Py<PyBytes>, Py<PyDict>)>,
    /// The AES-GCM IV (`encryption_param`).
    param: Py<PyBytes>,
    /// `encryption_algo` as the producer set it ("" when unset, as the Java and C++ clients leave it).
    algorithm: String,
    /// The codec the payload was compressed with before encryption, or None.
    compression: Option<&'static str>,
    /// The payload's size before compression (0 when uncompressed).
    uncompressed_size: u32,
    /// Messages in the (encrypted) batch, -1 when not batched.
    batch_size: i32,
    /// True when the payload is still encrypted (``crypto_failure_action="consume"``).
    decryption_failed: bool,
}

#[pymethods]
impl PyEncryptionContext {
    fn __repr__(&self) -> String {
        format!(
            "EncryptionContext(keys={:?}, compression={:?}, batch_size={}, decryption_failed={})",
            self.keys.iter().map(|k| &k.0).collect::<Vec<_>>(),
            self.compression,
            self.batch_size,
            if self.decryption_failed { "True" } else { "False" },
        )
    }
}

/// The encryption context of `msg`, or None when it was not encrypted.
pub fn context(py: Python<'_>, msg: &crate::client::Message) -> PyResult<Option<Py<PyEncryptionContext>>> {
    let meta = &msg.metadata;
    if meta.encryption_keys.is_empty() {
        return Ok(None);
    }
    let mut keys = Vec::with_capacity(meta.encryption_keys.len());
    for k in &meta.encryption_keys {
        let d = PyDict::new(py);
        for kv in &k.metadata {
            d.set_item(&kv.key, &kv.value)?;
        }
        keys.push((k.key.clone(), PyBytes::new(py, &k.value).unbind(), d.unbind()));
    }
    let codec = crate::protocol::pb::CompressionType::try_from(meta.compression.unwrap_or(0)).ok();
    let compression = codec
        .filter(|c| *c != crate::protocol::pb::CompressionType::None)
        .map(crate::protocol::compression::codec_name);
    Py::new(
        py,
        PyEncryptionContext {
            keys,
            param: PyBytes::new(py, meta.encryption_param.as_deref().unwrap_or_default()).unbind(),
            algorithm: meta.encryption_algo.clone().unwrap_or_default(),
            compression,
            uncompressed_size: if compression.is_some() {
                meta.uncompressed_size.unwrap_or(0)
            } else {
                0
            },
            batch_size: meta.num_messages_in_batch.unwrap_or(-1),
            decryption_failed: msg.still_encrypted,
        },
    )
    .map(Some)
}
