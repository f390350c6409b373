//! The end of a process's life: producers still open when the interpreter exits get a bounded
//! time to send their open batches and collect their receipts, and whatever is still unsettled
//! then is reported on the `magnetar` logger (per topic, with a count) instead of vanishing.
//! Also the test-only hook that makes an actor panic.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;

use super::errors::to_pyerr;
use super::runtime::{generation, runtime};
use crate::client::producer::{Producer, WeakProducer};

/// Producers made in this process image, by fork generation: a child never touches the
/// producers it inherited.
pub struct Live(Vec<(u64, WeakProducer)>);

static LIVE: Mutex<Live> = Mutex::new(Live(Vec::new()));

pub(super) fn lock_live() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remembers `producer` for the flush at exit (without keeping it alive).
pub fn track(producer: &Producer) {
    let mut live = lock_live();
    live.0.retain(|(_, p)| p.upgrade().is_some());
    live.0.push((generation(), producer.downgrade()));
}

/// Flushes every producer of this process that is still open, waiting at most `timeout`
/// seconds in all, and logs a warning for each topic whose messages failed or are still
/// unacknowledged. Registered with `atexit` by `magnetar`.
#[pyfunction]
pub fn _flush_at_exit(py: Python<'_>, timeout: f64) {
    let here = generation();
    let producers: Vec<Producer> = {
        let live = lock_live();
        live.0
            .iter()
            .filter(|(g, _)| *g == here)
            .filter_map(|(_, p)| p.upgrade())
            .filter(|p| !p.is_closed())
            .collect()
    };
    if producers.is_empty() {
        return;
    }
    let timeout = Duration::try_from_secs_f64(timeout).unwrap_or(Duration::ZERO);
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
