//! The end of a process's life.
//!
//! Producers still open when the interpreter exits get a bounded time to send their open
//! batches and collect their receipts; whatever is still unsettled then is reported on the
//! `magnetar` logger (per topic, with a count) instead of vanishing. Then the engine stops
//! calling into Python ([`super::gate`]).
//!
//! Also the test-only hook that makes an actor panic.

use std::time::Duration;

use pyo3::prelude::*;

use super::errors::to_pyerr;
use super::gate::stop_calling_python;
use super::runtime::{open_producers, runtime};

/// The longest the exit flush waits, however long it is asked to.
const MAX_EXIT_FLUSH_SECONDS: f64 = 3600.0;

/// Registered with `atexit` by `magnetar`: flushes every producer of this process that is still
/// open, waiting at most `timeout` seconds in all, logs a warning for each topic whose messages
/// failed or are still unacknowledged, then stops engine threads from calling into Python.
#[pyfunction]
pub fn _at_exit(py: Python<'_>, timeout: f64) {
    flush_open_producers(py, timeout);
    stop_calling_python(py);
}

fn flush_open_producers(py: Python<'_>, timeout: f64) {
    let producers = open_producers();
    if producers.is_empty() {
        return;
    }
    // Exit must stay bounded whatever the environment says: NaN or negative waits not at all,
    // anything over an hour (inf included) waits an hour.
    let timeout = if timeout > 0.0 {
        Duration::from_secs_f64(timeout.min(MAX_EXIT_FLUSH_SECONDS))
    } else {
        Duration::ZERO
    };
    let rt = runtime();
    py.detach(|| {
        rt.block_on(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            let flushes: Vec<_> = producers
                .into_iter()
                .map(|p| {
                    let flushing = p.clone();
                    (p, tokio::spawn(async move { flushing.flush().await }))
                })
                .collect();
            for (p, flush) in flushes {
                match tokio::time::timeout_at(deadline, flush).await {
                    Ok(Ok(Ok(()))) => {}
                    Ok(Ok(Err(e))) => log::warn!("at exit, {}: {e}", p.topic()),
                    Ok(Err(join)) => log::warn!("at exit, {}: flush failed: {join}", p.topic()),
                    Err(_) => log::warn!(
                        "at exit, {}: {} message(s) were not acknowledged within {:.1} s and may be lost",
                        p.topic(),
                        p.unsettled(),
                        timeout.as_secs_f64()
                    ),
                }
            }
        })
    });
}

/// Makes every producer and consumer actor of `topic` (and of its partitions) panic; returns
/// how many. Only in a process started with `MAGNETAR_TEST_HOOKS=1` (tests only).
#[pyfunction]
pub fn _inject_actor_panic(topic: &str) -> PyResult<usize> {
    crate::client::supervisor::inject_panic(topic).map_err(to_pyerr)
}
