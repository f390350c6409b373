//! A credential supplied by a Python callable (`Authentication.token(callable)`, and the
//! OAuth2 client of `magnetar._oauth2`, which is such a callable).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::net::auth::{provider_failed, AuthFuture, AuthProvider};

/// Calls `supplier()` for every connect and every challenge, on a blocking thread so a slow
/// supplier (an HTTP round trip) never holds up an I/O thread. It returns `str` or `bytes`.
/// After the broker refused its credential, the supplier's `invalidate()` (if it has one) is
/// called first, so a cached credential (OAuth2's access token) is fetched anew.
pub struct PySupplier {
    method: String,
    supplier: Arc<Py<PyAny>>,
    refused: AtomicBool,
}

impl PySupplier {
    pub fn new(method: String, supplier: Py<PyAny>) -> Self {
        PySupplier {
            method,
            supplier: Arc::new(supplier),
            refused: AtomicBool::new(false),
        }
    }
}

impl AuthProvider for PySupplier {
    fn method(&self) -> &str {
        &self.method
    }

    fn auth_data(&self) -> AuthFuture {
        let supplier = self.supplier.clone();
        let method = self.method.clone();
        let invalidate = self.refused.swap(false, Ordering::AcqRel);
        Box::pin(async move {
            let called = tokio::task::spawn_blocking(move || {
                Python::attach(|py| -> Result<Vec<u8>, String> {
                    if invalidate {
                        if let Ok(hook) = supplier.bind(py).getattr("invalidate") {
                            hook.call0().map_err(|e| e.to_string())?;
                        }
                    }
                    let value = supplier.call0(py).map_err(|e| e.to_string())?;
                    let value = value.bind(py);
                    if let Ok(s) = value.cast::<PyString>() {
                        Ok(s.to_str().map_err(|e| e.to_string())?.as_bytes().to_vec())
                    } else if let Ok(b) = value.cast::<PyBytes>() {
                        Ok(b.as_bytes().to_vec())
                    } else {
                        Err(format!("the supplier returned {}, not str or bytes", value.get_type()))
                    }
                })
            })
            .await
            .map_err(|e| provider_failed(&method, e))?;
            match called {
                Ok(data) if !data.is_empty() => Ok(data),
                Ok(_) => Err(provider_failed(&method, "the supplier returned an empty credential")),
                Err(why) => Err(provider_failed(&method, why)),
            }
        })
    }

    fn refused(&self) {
        self.refused.store(true, Ordering::Release);
    }
}
