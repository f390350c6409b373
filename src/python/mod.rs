//! The PyO3 surface: `magnetar._core`. Only this folder knows Python; it converts values,
//! waits on the engine (blocking or asyncio), and maps errors in one place (`errors.rs`).

mod arrow;
mod arrow_values;
mod auth;
mod client;
mod codec;
mod codec_json;
mod compat;
mod consumer;
mod convert;
mod crypto;
mod dispatch;
mod errors;
mod gate;
mod lifecycle;
mod log_names;
mod option_facts;
mod options;
mod producer;
mod receive;
mod runtime;
mod schema;
mod stats;
mod transaction;
mod types;

use pyo3::prelude::*;

/// Read-only Python properties of a pyclass whose engine value is its `inner`: `fn name() -> T;`
/// returns `inner.name()`, `name: T;` returns the field `inner.name`. They form a `#[pymethods]`
/// block of their own (PyO3's `multiple-pymethods`), beside the class's other methods.
macro_rules! getters {
    ($class:ty { $($entries:tt)* }) => {
        $crate::python::getters!(@each $class [] $($entries)*);
    };
    (@each $class:ty [$($done:tt)*] $(#[$attr:meta])* fn $name:ident() -> $ret:ty; $($rest:tt)*) => {
        $crate::python::getters!(@each $class [$($done)*
            $(#[$attr])*
            #[getter]
            fn $name(&self) -> $ret {
                self.inner.$name()
            }
        ] $($rest)*);
    };
    (@each $class:ty [$($done:tt)*] $(#[$attr:meta])* $name:ident: $ret:ty; $($rest:tt)*) => {
        $crate::python::getters!(@each $class [$($done)*
            $(#[$attr])*
            #[getter]
            fn $name(&self) -> $ret {
                self.inner.$name
            }
        ] $($rest)*);
    };
    (@each $class:ty [$($done:tt)*]) => {
        #[pyo3::pymethods]
        impl $class {
            $($done)*
        }
    };
}
pub(crate) use getters;

/// A dict of the named fields of a value, keyed by the field names: the engine's statistics
/// structs name their fields as the Python dicts do.
macro_rules! fields_dict {
    ($py:expr, $value:expr, [$($field:ident),* $(,)?]) => {{
        let d = pyo3::types::PyDict::new($py);
        $(pyo3::types::PyDictMethods::set_item(&d, stringify!($field), &$value.$field)?;)*
        d
    }};
}
pub(crate) use fields_dict;

/// Names of the exception classes each engine error kind maps to (for the mapping test).
#[pyfunction]
fn _error_class_names() -> Vec<&'static str> {
    errors::ALL_KINDS.iter().map(|k| errors::class_name(*k)).collect()
}

/// Protocol version this build speaks.
#[pyfunction]
fn _protocol_version() -> i32 {
    crate::protocol::PROTOCOL_VERSION
}

/// Hashes a key the way the default router does (for interoperability tests).
#[pyfunction]
#[pyo3(signature = (key, scheme="java_string"))]
fn _key_hash(key: &str, scheme: &str) -> PyResult<u32> {
    match scheme {
        "java_string" => Ok(crate::protocol::hash::java_string_hash(key)),
        "murmur3" => Ok(crate::protocol::hash::murmur3_32_hash(key.as_bytes())),
        _ => Err(errors::invalid(format!("unknown hashing scheme {scheme:?}"))),
    }
}

/// Asks for the process's I/O thread count before the engine starts; returns the count in
/// use (see `runtime::request_io_threads`).
#[pyfunction]
fn _io_threads(threads: usize) -> usize {
    runtime::request_io_threads(threads)
}

/// Panics inside an engine task, to prove the panic arrives as a `PulsarError`. A test hook:
/// it runs only while `MAGNETAR_TEST_HOOKS=1` is in the environment, read at each call (the
/// tests set it around the call), so the wheel users install cannot panic a task through it.
#[pyfunction]
fn _panic_in_engine(py: Python<'_>) -> PyResult<()> {
    if std::env::var_os("MAGNETAR_TEST_HOOKS").is_none_or(|v| v != "1") {
        return Err(errors::invalid(
            "_panic_in_engine is a test hook: it runs only with MAGNETAR_TEST_HOOKS=1 in the environment",
        ));
    }
    runtime::wait(py, async {
        if std::hint::black_box(true) {
            panic!("deliberate test panic");
        }
        Ok(())
    })
}

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    runtime::install_fork_hook();
    // Rust `log` records go to Python's `logging` under the "magnetar" logger, with levels
    // cached for a second at most (see `gate::install_logger`).
    if let Ok(l) = pyo3_log::Logger::new(m.py(), pyo3_log::Caching::LoggersAndLevels) {
        gate::install_logger(l.filter_target("magnetar".to_string(), log::LevelFilter::Trace));
    }
    m.add_class::<client::PyClient>()?;
    m.add_class::<producer::PyProducer>()?;
    m.add_class::<consumer::PyConsumer>()?;
    m.add_class::<transaction::PyTransaction>()?;
    m.add_class::<types::PyMessageId>()?;
    m.add_class::<types::PyMessage>()?;
    m.add_class::<crypto::PyEncryptionContext>()?;
    m.add_class::<types::SendFuture>()?;
    m.add_class::<codec::AvroCodec>()?;
    m.add_class::<arrow::PyArrowLayout>()?;
    m.add_class::<arrow_values::PyValueSchema>()?;
    m.add_class::<arrow_values::PyValueEncoder>()?;
    m.add_class::<arrow::PyRangeScan>()?;
    m.add_class::<arrow::PyArrowBatch>()?;
    m.add_class::<arrow::PyReceipts>()?;
    m.add_class::<receive::Arrival>()?;
    m.add_function(wrap_pyfunction!(_error_class_names, m)?)?;
    m.add_function(wrap_pyfunction!(_protocol_version, m)?)?;
    m.add_function(wrap_pyfunction!(_key_hash, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_in_engine, m)?)?;
    m.add_function(wrap_pyfunction!(_io_threads, m)?)?;
    m.add_function(wrap_pyfunction!(convert::_duration_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(options::_check_client_options, m)?)?;
    m.add_function(wrap_pyfunction!(option_facts::_engine_option_facts, m)?)?;
    m.add_function(wrap_pyfunction!(lifecycle::_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(dispatch::_register_asyncio, m)?)?;
    m.add_function(wrap_pyfunction!(lifecycle::_inject_actor_panic, m)?)?;
    m.add_function(wrap_pyfunction!(producer::_producer_stats, m)?)?;
    m.add_function(wrap_pyfunction!(consumer::_consumer_stats, m)?)?;
    m.add_function(wrap_pyfunction!(client::_client_stats, m)?)?;
    compat::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
