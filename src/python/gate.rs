//! The exit gate: whether an engine thread may still enter Python.
//!
//! A thread that takes the GIL while the interpreter finalizes is ended by CPython (3.11-3.13)
//! with `pthread_exit`, a forced unwind that Rust frames cannot survive (any `catch_unwind` on
//! the way aborts the process: "FATAL: exception not rethrown"). So from magnetar's exit handler
//! on ([`stop_calling_python`]), engine threads (dispatch, logging) no longer attach, and a
//! daemon thread blocked in a magnetar call never returns into Python; the handler waits for the
//! threads already on their way in to get out.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Set by the exit handler: engine threads no longer enter Python.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Threads on their way into Python (or inside) on the engine's behalf.
static CROSSING: AtomicUsize = AtomicUsize::new(0);
/// The thread that ran the exit handler; later exit handlers may still use magnetar from it.
static EXIT_THREAD: OnceLock<ThreadId> = OnceLock::new();
/// How long the exit handler waits for threads inside Python (a callback blocked for ever
/// must not hold up the exit).
const CROSSING_WAIT: Duration = Duration::from_secs(2);

pub fn stop_calling_python(py: Python<'_>) {
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
///
/// pyo3-log caches each Python logger's level, so a record below it is dropped without the GIL:
/// debug logging that is off costs the I/O thread a comparison. The cache is dropped at most
/// once a second (on the next record), so `logging.getLogger("magnetar...").setLevel(...)`
/// takes effect within a second.
struct ExitSafeLogger {
    logger: pyo3_log::Logger,
    levels: pyo3_log::ResetHandle,
    /// Seconds since `STARTED` at the last reset of `levels`.
    reset_at: AtomicU64,
}

static STARTED: OnceLock<Instant> = OnceLock::new();

impl ExitSafeLogger {
    fn refresh_levels(&self) {
        let now = STARTED.get_or_init(Instant::now).elapsed().as_secs();
        if self.reset_at.swap(now, Ordering::Relaxed) != now {
            self.levels.reset();
        }
    }
}

impl log::Log for ExitSafeLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.refresh_levels();
        let target = super::log_names::component(metadata.target());
        self.logger
            .enabled(&log::Metadata::builder().level(metadata.level()).target(target).build())
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        // The record goes to its component's logger (`log_names`), not its module's.
        let record = log::Record::builder()
            .args(*record.args())
            .level(record.level())
            .target(super::log_names::component(record.target()))
            .module_path(record.module_path())
            .file(record.file())
            .line(record.line())
            .build();
        let record = &record;
        if attach_unless_exiting(|_py| self.logger.log(record)).is_none() && record.level() <= log::Level::Warn {
            eprintln!("magnetar: {}", record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs `logger` as the process's `log` backend, behind the exit gate.
pub fn install_logger(logger: pyo3_log::Logger) {
    let levels = logger.reset_handle();
    let installed = ExitSafeLogger {
        logger,
        levels,
        reset_at: AtomicU64::new(0),
    };
    if log::set_boxed_logger(Box::new(installed)).is_ok() {
        log::set_max_level(log::LevelFilter::Trace);
    }
}
