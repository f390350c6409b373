//! The process's tokio runtime, fork safety, and the two ways Python waits on the engine:
//! blocking (GIL released, Ctrl-C honoured) and asyncio (futures resolved with
//! `call_soon_threadsafe` from the client's dispatch thread, see [`super::dispatch`]).
//!
//! tokio does not survive `fork()`: a child process gets a fresh runtime, and objects created by
//! the parent refuse to work there (see [`ForkGuard`]) and are never dropped there (their drop
//! would reach into the parent's runtime, whose threads the child does not have).

#[cfg(unix)]
use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use super::dispatch::{resolve_later, Dispatcher};
use super::errors::{already_forked, to_pyerr};
use super::gate::detach;
use crate::client::producer::{Producer, WeakProducer};
use crate::client::Error;

struct ProcessRuntime {
    generation: u64,
    runtime: Arc<Runtime>,
    threads: usize,
}

static CURRENT: Mutex<Option<ProcessRuntime>> = Mutex::new(None);

/// I/O threads asked for before the runtime starts (the official client's `io_threads`); 0:
/// `MAGNETAR_IO_THREADS`, else one.
static REQUESTED_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Asks for `threads` I/O threads and returns how many the runtime has. The runtime is the
/// process's, shared by every client, so only a request made before it starts (or in a fork
/// child before it uses the engine) takes effect.
pub fn request_io_threads(threads: usize) -> usize {
    let guard = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(current) if current.generation == generation() => current.threads,
        _ => {
            REQUESTED_THREADS.store(threads.max(1), Ordering::Release);
            threads.max(1)
        }
    }
}

/// Bumped in the child after every `fork()`: cheaper to compare on every call than `getpid`,
/// which is a system call.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

#[cfg(unix)]
thread_local! {
    /// The locks the forking thread holds from `prepare` until `fork()` returns.
    static HELD_FOR_FORK: RefCell<Option<HeldForFork>> = const { RefCell::new(None) };
}

/// Locks a child would need that another thread might hold at the instant of `fork()`: in the
/// child that thread does not exist, so a lock it held would stay locked forever.
#[cfg(unix)]
struct HeldForFork {
    _runtime: MutexGuard<'static, Option<ProcessRuntime>>,
    _producers: MutexGuard<'static, Live>,
}

/// Producers made in this process image, by fork generation: a child never touches the
/// producers it inherited.
struct Live(Vec<(u64, WeakProducer)>);

static LIVE: Mutex<Live> = Mutex::new(Live(Vec::new()));

fn live_producers() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The producers this process image made that are still open.
pub fn open_producers() -> Vec<Producer> {
    let here = generation();
    live_producers()
        .0
        .iter()
        .filter(|(g, _)| *g == here)
        .filter_map(|(_, p)| p.upgrade())
        .filter(|p| !p.is_closed())
        .collect()
}

/// Remembers `producer` for the flush at exit (without keeping it alive).
pub fn track(producer: &Producer) {
    let mut live = live_producers();
    live.0.retain(|(_, p)| p.is_alive());
    live.0.push((generation(), producer.downgrade()));
}

#[cfg(unix)]
extern "C" fn before_fork() {
    let held = HeldForFork {
        _runtime: CURRENT.lock().unwrap_or_else(|e| e.into_inner()),
        _producers: live_producers(),
    };
    HELD_FOR_FORK.with(|h| *h.borrow_mut() = Some(held));
}

#[cfg(unix)]
extern "C" fn after_fork_in_parent() {
    HELD_FOR_FORK.with(|h| h.borrow_mut().take());
}

#[cfg(unix)]
extern "C" fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::AcqRel);
    // Unlocking is an atomic store in the child's own memory: nobody else is there to wake.
    HELD_FOR_FORK.with(|h| h.borrow_mut().take());
}

/// Installs the fork hooks (once per process image). Without `fork()` (Windows) there is
/// nothing to guard, so elsewhere it does nothing.
pub fn install_fork_hook() {
    #[cfg(unix)]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: the handlers take and release process-wide locks on the forking thread
            // and touch an atomic; none of them allocates in the child.
            unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_in_parent), Some(after_fork_in_child)) };
        });
    }
}

pub(super) fn generation() -> u64 {
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
    let requested = REQUESTED_THREADS.load(Ordering::Acquire);
    let threads = if requested > 0 {
        requested
    } else {
        std::env::var("MAGNETAR_IO_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1usize)
            .max(1)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("magnetar-io")
        .enable_all()
        .build()
        .expect("tokio runtime");
    ProcessRuntime {
        generation,
        runtime: Arc::new(runtime),
        threads,
    }
}

/// The runtime of this process.
pub fn runtime() -> Arc<Runtime> {
    with_current(|c| c.runtime.clone())
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
        if self.forked() {
            return Err(already_forked());
        }
        Ok(())
    }

    /// Whether this is a process forked from the creator.
    pub fn forked(&self) -> bool {
        self.0 != generation()
    }

    /// Keeps `object` from ever being dropped when this is a forked child (call it from the
    /// owner's `Drop`): one more reference, never released, makes the owner's drop only a
    /// count decrement, which reaches nothing of the parent's runtime.
    pub fn leak_in_child<T: Clone>(&self, object: &T) {
        if self.forked() {
            std::mem::forget(object.clone());
        }
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
        let joined = detach(py, || {
            rt.block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut handle).await })
        });
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

/// An engine operation as the runtime runs it: a future of `T` or an engine error.
pub trait Operation<T>: Future<Output = Result<T, Error>> + Send + 'static {}
impl<T, F: Future<Output = Result<T, Error>> + Send + 'static> Operation<T> for F {}

/// Turns an operation's outcome into a Python object, with the GIL held.
pub trait ToPython<T>: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static {}
impl<T, C: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static> ToPython<T> for C {}

/// Runs one waiting operation for either kind of caller, so each operation is written once:
/// with no `future` it blocks this thread (GIL released, Ctrl-C honoured) and returns the
/// converted outcome; with an asyncio future it returns None at once and resolves the future
/// from the client's dispatch thread.
pub fn run<T: Send + 'static>(
    py: Python<'_>,
    dispatch: &Arc<Dispatcher>,
    future: Option<Py<PyAny>>,
    op: impl Operation<T>,
    convert: impl ToPython<T>,
) -> PyResult<Py<PyAny>> {
    match future {
        None => {
            let value = wait(py, op)?;
            convert(py, value)
        }
        Some(future) => {
            spawn_for_asyncio(py, dispatch, future, op, convert)?;
            Ok(py.None())
        }
    }
}

/// What the engine handles (`_Client`, `_Producer`, `_Consumer`) share: each operation takes
/// a clone of its engine object and runs blocking or through an asyncio future ([`run`]).
pub trait EngineHandle {
    /// The engine object behind the handle (`client::Client`, `client::Producer`, ...).
    type Engine: Clone;

    fn engine(&self) -> &Self::Engine;
    fn guard(&self) -> ForkGuard;
    fn dispatch(&self) -> &Arc<Dispatcher>;

    /// Runs `op` on the engine object, refusing in a process forked from the handle's creator.
    fn call<T: Send + 'static, F: Operation<T>>(
        &self,
        py: Python<'_>,
        future: Option<Py<PyAny>>,
        op: impl FnOnce(Self::Engine) -> F,
        convert: impl ToPython<T>,
    ) -> PyResult<Py<PyAny>> {
        self.guard().check()?;
        run(py, self.dispatch(), future, op(self.engine().clone()), convert)
    }

    /// Closes the way every handle closes: as [`EngineHandle::call`], except in a process
    /// forked from the handle's creator, where a blocking close does nothing (the parent's
    /// engine is not the child's to close) and an asyncio one raises.
    fn close_with<F: Operation<()>>(
        &self,
        py: Python<'_>,
        future: Option<Py<PyAny>>,
        op: impl FnOnce(Self::Engine) -> F,
    ) -> PyResult<Py<PyAny>> {
        if self.guard().forked() && future.is_none() {
            return Ok(py.None());
        }
        self.call(py, future, op, none)
    }
}

/// Implements [`EngineHandle`] for a handle with the fields `inner` (the engine object),
/// `guard` and `dispatch`, and the `Drop` that never drops the parent's objects in a forked
/// child. The form `pub struct Name(Engine);` (attributes allowed) also declares the handle with
/// those three fields, `Name::new(inner, guard, dispatch)`, and the Python `close(*, future=None)`
/// and `closed` of an engine whose `close` is fallible and whose `is_closed` says so; fields in
/// braces after it (`pub struct Name(Engine) { extra: T };`) are added, and `new` takes them too.
macro_rules! engine_handle {
    (
        $(#[$attr:meta])* pub struct $handle:ident($engine:ty)
        $({ $($(#[$fattr:meta])* $field:ident: $fty:ty),* $(,)? })?;
    ) => {
        $(#[$attr])*
        pub struct $handle {
            inner: $engine,
            guard: $crate::python::runtime::ForkGuard,
            dispatch: std::sync::Arc<$crate::python::dispatch::Dispatcher>,
            $($($(#[$fattr])* $field: $fty,)*)?
        }

        impl $handle {
            pub fn new(
                inner: $engine,
                guard: $crate::python::runtime::ForkGuard,
                dispatch: std::sync::Arc<$crate::python::dispatch::Dispatcher>,
                $($($field: $fty,)*)?
            ) -> Self {
                $handle {
                    inner,
                    guard,
                    dispatch,
                    $($($field,)*)?
                }
            }
        }

        #[pyo3::pymethods]
        impl $handle {
            #[getter]
            fn closed(&self) -> bool {
                self.inner.is_closed()
            }

            #[pyo3(signature = (*, future=None))]
            fn close(
                &self,
                py: pyo3::Python<'_>,
                future: Option<pyo3::Py<pyo3::PyAny>>,
            ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                use $crate::python::runtime::EngineHandle as _;
                self.close_with(py, future, |engine| async move { engine.close().await })
            }
        }

        $crate::python::runtime::engine_handle!($handle, $engine);
    };
    ($handle:ty, $engine:ty) => {
        impl $crate::python::runtime::EngineHandle for $handle {
            type Engine = $engine;

            fn engine(&self) -> &Self::Engine {
                &self.inner
            }
            fn guard(&self) -> $crate::python::runtime::ForkGuard {
                self.guard
            }
            fn dispatch(&self) -> &std::sync::Arc<$crate::python::dispatch::Dispatcher> {
                &self.dispatch
            }
        }

        impl Drop for $handle {
            fn drop(&mut self) {
                self.guard.leak_in_child(&self.inner);
                self.guard.leak_in_child(&self.dispatch);
            }
        }
    };
}
pub(crate) use engine_handle;

/// The `convert` of [`run`] for operations that return nothing.
pub fn none(py: Python<'_>, _: ()) -> PyResult<Py<PyAny>> {
    Ok(py.None())
}

/// Turns a task's panic into an engine error.
pub fn panicked(join: tokio::task::JoinError) -> Error {
    let what = if join.is_panic() {
        crate::client::supervisor::panic_message(&*join.into_panic())
    } else {
        "cancelled".to_string()
    };
    Error::new(
        crate::client::ErrorKind::Other,
        format!("internal error in the engine: {what}"),
    )
}

/// Spawns `fut` and resolves the asyncio future `aio_future` with its outcome, converted by
/// `convert` on the client's dispatch thread. A future cancelled meanwhile is left alone.
fn spawn_for_asyncio<T: Send + 'static>(
    py: Python<'_>,
    dispatch: &Arc<Dispatcher>,
    aio_future: Py<PyAny>,
    fut: impl Operation<T>,
    convert: impl ToPython<T>,
) -> PyResult<()> {
    let loop_ = aio_future.bind(py).call_method0("get_loop")?.unbind();
    let rt = runtime();
    let dispatch = dispatch.clone();
    rt.spawn(async move {
        let outcome = tokio::spawn(fut).await;
        dispatch.push(Box::new(move |py| {
            let (value, error) = match outcome {
                Ok(Ok(v)) => match convert(py, v) {
                    Ok(obj) => (obj, py.None()),
                    Err(e) => (py.None(), e.into_value(py).into_any()),
                },
                Ok(Err(e)) => (py.None(), to_pyerr(e).into_value(py).into_any()),
                Err(join) => (py.None(), to_pyerr(panicked(join)).into_value(py).into_any()),
            };
            resolve_later((loop_, aio_future, value, error));
        }));
    });
    Ok(())
}
