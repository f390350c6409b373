//! The end of a process's life.
//!
//! Producers still open when the interpreter exits get a bounded time to send their open
//! batches and collect their receipts; whatever is still unsettled then is reported on the
//! `magnetar` logger (per topic, with a count) instead of vanishing.
//!
//! Then the engine stops calling into Python. A thread that takes the GIL while the interpreter
//! finalizes is ended by CPython (3.11-3.13) with `pthread_exit`, a forced unwind that Rust
//! frames cannot survive (any `catch_unwind` on the way aborts the process: "FATAL: exception
//! not rethrown"). So from the exit handler on, engine threads (dispatch, logging) no longer
//! attach, and a daemon thread blocked in a magnetar call never returns into Python; the handler
//! waits for the threads already on their way in to get out.
//!
//! Also the test-only hook that makes an actor panic.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

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
    live.0.retain(|(_, p)| p.is_alive());
    live.0.push((generation(), producer.downgrade()));
}

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

/// Set by the exit handler: engine threads no longer enter Python.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Threads on their way into Python (or inside) on the engine's behalf.
static CROSSING: AtomicUsize = AtomicUsize::new(0);
/// The thread that ran the exit handler; later exit handlers may still use magnetar from it.
static EXIT_THREAD: OnceLock<ThreadId> = OnceLock::new();
/// How long the exit handler waits for threads inside Python (a callback blocked for ever
/// must not hold up the exit).
const CROSSING_WAIT: Duration = Duration::from_secs(2);

fn stop_calling_python(py: Python<'_>) {
    let _ = EXIT_THREAD.set(std::thread::current().id());
    // SeqCst with the increments in `cross`: a thread either sees EXITING or is counted here.
    EXITING.store(true, Ordering::SeqCst);
    py.detach(|| {
        let until = Instant::now() + CROSSING_WAIT;
        while CROSSING.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Counts this thread as crossing into Python; false (and not counted) once the interpreter is
/// exiting, except on the thread running the exit handlers.
fn cross() -> bool {
    CROSSING.fetch_add(1, Ordering::SeqCst);
    if EXITING.load(Ordering::SeqCst) && EXIT_THREAD.get() != Some(&std::thread::current().id()) {
        CROSSING.fetch_sub(1, Ordering::SeqCst);
        return false;
    }
    true
}

fn crossed() {
    CROSSING.fetch_sub(1, Ordering::SeqCst);
}

/// For engine threads (dispatch, logging): runs `f` attached, unless the interpreter is exiting.
pub fn attach_unless_exiting<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    if !cross() {
        return None;
    }
    let r = Python::attach(f);
    crossed();
    Some(r)
}

/// For Python threads: runs the blocking `f` detached. Once the interpreter is exiting, the
/// thread never takes the GIL back: only daemon threads are still running then (the exit
/// handlers run after the others were joined), and parking one until the process ends is what
/// CPython would do to it, minus the unwind through Rust frames.
pub fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    let r = py.detach(|| {
        let r = f();
        if !cross() {
            park_for_ever();
        }
        r
    });
    crossed();
    r
}

/// Parks the calling thread until the process ends.
pub fn park_for_ever() -> ! {
    loop {
        std::thread::park();
    }
}

/// The engine's `log` records go to Python's `logging` (through pyo3-log), except once the
/// interpreter is exiting: then warnings and errors go straight to stderr.
struct ExitSafeLogger(pyo3_log::Logger);

impl log::Log for ExitSafeLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        // Checked first, without the GIL: records of other crates (rustls) are mostly filtered.
        if !self.0.enabled(record.metadata()) {
            return;
        }
        if attach_unless_exiting(|_py| self.0.log(record)).is_none() && record.level() <= log::Level::Warn {
            eprintln!("magnetar: {}", record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs `logger` as the process's `log` backend, behind the exit gate.
pub fn install_logger(logger: pyo3_log::Logger) {
    if log::set_boxed_logger(Box::new(ExitSafeLogger(logger))).is_ok() {
        log::set_max_level(log::LevelFilter::Trace);
    }
}
