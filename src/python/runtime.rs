//! The process's tokio runtime, the dispatch thread, and the two ways Python waits on the
//! engine: blocking (GIL released, Ctrl-C honoured) and asyncio (futures resolved with
//! `call_soon_threadsafe`).
//!
//! tokio does not survive `fork()`: a child process gets a fresh runtime and dispatch thread,
//! and objects created by the parent refuse to work there (see [`ForkGuard`]).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tokio::runtime::Runtime;

use super::errors::{already_forked, to_pyerr};
use crate::client::Error;

struct ProcessRuntime {
    generation: u64,
    runtime: Arc<Runtime>,
    dispatch: mpsc::Sender<Job>,
}

/// A unit of work that needs the GIL, run in order on the dispatch thread.
pub type Job = Box<dyn FnOnce(Python<'_>) + Send>;

static CURRENT: Mutex<Option<ProcessRuntime>> = Mutex::new(None);

/// Bumped in the child after every `fork()`: cheaper to compare on every call than `getpid`,
/// which is a system call.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Installs the fork hook (once per process image).
pub fn install_fork_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering a child handler that only touches atomics.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    });
}

fn generation() -> u64 {
    FORK_GENERATION.load(Ordering::Acquire)
}

fn with_current<R>(f: impl FnOnce(&ProcessRuntime) -> R) -> R {
    let mut guard = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    let generation = generation();
    if guard.as_ref().is_none_or(|c| c.generation != generation) {
        if let Some(old) = guard.take() {
            // The parent's threads do not exist in this child; dropping the runtime would
            // try to join them and hang.
            std::mem::forget(old);
        }
        *guard = Some(start(generation));
    }
    f(guard.as_ref().expect("set above"))
}

fn start(generation: u64) -> ProcessRuntime {
    let threads = std::env::var("MAGNETAR_IO_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("magnetar-io")
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("magnetar-dispatch".into())
        .spawn(move || dispatch_loop(rx))
        .expect("dispatch thread");
    ProcessRuntime {
        generation,
        runtime: Arc::new(runtime),
        dispatch: tx,
    }
}

fn dispatch_loop(rx: mpsc::Receiver<Job>) {
    // Attached for the thread's whole life, detached while it waits: attaching afresh for each
    // burst made and freed a Python thread state every time, which cost microseconds on every
    // callback's path. Many completions of a burst share one GIL acquisition.
    Python::attach(|py| {
        let mut rx = rx;
        loop {
            let (back, first) = py.detach(move || {
                let first = rx.recv();
                (rx, first)
            });
            rx = back;
            let Ok(first) = first else { return };
            run_job(py, first);
            for _ in 0..1024 {
                match rx.try_recv() {
                    Ok(job) => run_job(py, job),
                    Err(_) => break,
                }
            }
            flush_asyncio_resolutions(py);
        }
    });
}

fn run_job(py: Python<'_>, job: Job) {
    // A panicking or raising callback must not take the dispatch thread down.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(py))).is_err() {
        log::error!("a completion callback panicked; continuing");
    }
    if let Some(err) = PyErr::take(py) {
        super::types::log_callback_error(py, &err);
    }
}

/// The runtime of this process.
pub fn runtime() -> Arc<Runtime> {
    with_current(|c| c.runtime.clone())
}

/// Queues `job` for the dispatch thread.
pub fn dispatch(job: Job) {
    let tx = with_current(|c| c.dispatch.clone());
    let _ = tx.send(job);
}

/// Remembers the process that created an object; the object refuses to work in a fork child.
#[derive(Debug, Clone, Copy)]
pub struct ForkGuard(u64);

impl ForkGuard {
    /// Records the current process.
    pub fn new() -> Self {
        ForkGuard(generation())
    }

    /// Errors when called in a process other than the creator.
    pub fn check(&self) -> PyResult<()> {
        if self.0 != generation() {
            return Err(already_forked());
        }
        Ok(())
    }
}

const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Runs `fut` on the runtime and blocks until it finishes, with the GIL released. Every
/// 100 ms the wait checks for signals, so Ctrl-C raises `KeyboardInterrupt` (and abandons the
/// operation).
pub fn wait<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
{
    let rt = runtime();
    let mut handle = rt.spawn(fut);
    loop {
        let joined = py.detach(|| rt.block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut handle).await }));
        match joined {
            Ok(Ok(result)) => return result.map_err(to_pyerr),
            Ok(Err(join)) => return Err(to_pyerr(panicked(join))),
            Err(_) => {
                if let Err(e) = py.check_signals() {
                    handle.abort();
                    return Err(e);
                }
            }
        }
    }
}

/// Turns a task's panic into an engine error.
pub fn panicked(join: tokio::task::JoinError) -> Error {
    let what = if join.is_panic() {
        let p = join.into_panic();
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    } else {
        "cancelled".to_string()
    };
    Error::new(
        crate::client::ErrorKind::Other,
        format!("internal error in the engine: {what}"),
    )
}

static RESOLVE_MANY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// An asyncio future to complete: its loop, the future, the value, the exception.
type Resolution = (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>);

thread_local! {
    /// Resolutions gathered during one burst of the dispatch thread, handed to each event loop
    /// in a single `call_soon_threadsafe` rather than one per future.
    static RESOLUTIONS: std::cell::RefCell<Vec<Resolution>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn flush_asyncio_resolutions(py: Python<'_>) {
    let pending = RESOLUTIONS.with(|r| std::mem::take(&mut *r.borrow_mut()));
    if pending.is_empty() {
        return;
    }
    let resolve_many = match RESOLVE_MANY.get_or_try_init(py, || -> PyResult<_> {
        Ok(py.import("magnetar._aio")?.getattr("resolve_many")?.unbind())
    }) {
        Ok(f) => f.clone_ref(py),
        Err(e) => return log::error!("cannot load magnetar._aio: {e}"),
    };
    // Group by loop, keeping each loop's order.
    let mut groups: Vec<(Py<PyAny>, Vec<(Py<PyAny>, Py<PyAny>, Py<PyAny>)>)> = Vec::new();
    for (loop_, fut, value, error) in pending {
        match groups.iter_mut().find(|(l, _)| l.as_ptr() == loop_.as_ptr()) {
            Some((_, items)) => items.push((fut, value, error)),
            None => groups.push((loop_, vec![(fut, value, error)])),
        }
    }
    for (loop_, items) in groups {
        let call = pyo3::types::PyList::new(py, items).and_then(|list| {
            loop_
                .bind(py)
                .call_method1("call_soon_threadsafe", (resolve_many.clone_ref(py), list))
        });
        if let Err(e) = call {
            // The loop is closed: nobody is waiting any more.
            log::debug!("cannot resolve asyncio futures: {e}");
        }
    }
}

/// Spawns `fut` and resolves the asyncio future `aio_future` with its outcome, converted by
/// `convert` on the dispatch thread. A future cancelled meanwhile is left alone.
pub fn spawn_for_asyncio<T, F, C>(py: Python<'_>, aio_future: Py<PyAny>, fut: F, convert: C) -> PyResult<()>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
    C: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let loop_ = aio_future.bind(py).call_method0("get_loop")?.unbind();
    let rt = runtime();
    rt.spawn(async move {
        let outcome = tokio::spawn(fut).await;
        dispatch(Box::new(move |py| {
            let (value, error) = match outcome {
                Ok(Ok(v)) => match convert(py, v) {
                    Ok(obj) => (obj, py.None()),
                    Err(e) => (py.None(), e.into_value(py).into_any()),
                },
                Ok(Err(e)) => (py.None(), to_pyerr(e).into_value(py).into_any()),
                Err(join) => (py.None(), to_pyerr(panicked(join)).into_value(py).into_any()),
            };
            RESOLUTIONS.with(|r| r.borrow_mut().push((loop_, aio_future, value, error)));
        }));
    });
    Ok(())
}
