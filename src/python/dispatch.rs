//! Dispatch threads: where send callbacks run and asyncio futures are resolved, with the GIL,
//! never on an I/O thread.
//!
//! Each client has its own dispatcher, whose thread starts with the first job, so a callback
//! that blocks delays only the callbacks and asyncio completions of its own client. The queue
//! is bounded by admission rather than by making its producers wait: I/O threads always queue
//! at once (a socket read never waits on Python), and it is the client's sends that wait while
//! the backlog is at its limit, as they wait for a free slot under `max_pending`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use super::errors::to_pyerr;
use super::gate::attach_unless_exiting;
use crate::client::{Error, ErrorKind};

/// A unit of work that needs the GIL, run in order on its client's dispatch thread.
pub type Job = Box<dyn FnOnce(Python<'_>) + Send>;

/// Jobs a client may have waiting before its sends wait. A send queues at most one job, so a
/// full window of `max_pending` completions (10,000 in the benchmarks) fits without waiting.
pub const MAX_BACKLOG: usize = 16_384;
/// Waiting sends go on once the backlog is down to this, not one job at a time.
const RESUME_AT: usize = MAX_BACKLOG / 2;

/// The dispatch queue and thread of one client. Dropping the last handle lets the thread finish
/// what is queued and end.
pub struct Dispatcher {
    shared: Arc<Shared>,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Rung when a job arrives for an idle thread, or when the last handle goes.
    arrived: Condvar,
    /// Jobs queued and not yet run; read without the lock on every send.
    backlog: AtomicUsize,
    /// Sends waiting for the backlog to fall (so the thread signals only when someone waits).
    waiting: AtomicUsize,
    /// Blocking senders wait here (with `queue`'s lock); asyncio sends on `room_async`.
    room: Condvar,
    room_async: tokio::sync::Notify,
    /// Every handle is gone: end once the queue is empty.
    orphaned: AtomicBool,
}

struct Queue {
    jobs: VecDeque<Job>,
    /// A thread serves this queue.
    serving: bool,
    /// The serving thread waits on `arrived`.
    idle: bool,
}

thread_local! {
    /// Whether this thread is a dispatch thread: a callback that sends must never wait for
    /// room, since only a dispatch thread makes room.
    static ON_DISPATCH_THREAD: Cell<bool> = const { Cell::new(false) };
}

impl Dispatcher {
    pub fn new() -> Arc<Dispatcher> {
        Arc::new(Dispatcher {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    jobs: VecDeque::new(),
                    serving: false,
                    idle: false,
                }),
                arrived: Condvar::new(),
                backlog: AtomicUsize::new(0),
                waiting: AtomicUsize::new(0),
                room: Condvar::new(),
                room_async: tokio::sync::Notify::new(),
                orphaned: AtomicBool::new(false),
            }),
        })
    }

    /// Queues `job`; never waits (beyond a short lock), so I/O threads may call it.
    pub fn push(&self, job: Job) {
        self.shared.backlog.fetch_add(1, Ordering::AcqRel);
        let mut q = self.shared.lock();
        q.jobs.push_back(job);
        if !q.serving {
            q.serving = true;
            drop(q);
            self.start();
        } else if q.idle {
            q.idle = false;
            drop(q);
            self.shared.arrived.notify_one();
        }
    }

    fn start(&self) {
        let shared = self.shared.clone();
        let started = std::thread::Builder::new()
            .name("magnetar-dispatch".into())
            .spawn(move || serve(shared));
        if let Err(e) = started {
            // The jobs stay queued; the next one tries again.
            log::error!("cannot start a dispatch thread: {e}");
            self.shared.lock().serving = false;
        }
    }

    /// Waits, with the GIL released and Ctrl-C honoured, while the backlog is full; with
    /// `block` off, fails at once instead (`ProducerQueueFull`), as a full producer does.
    pub fn wait_for_room(&self, py: Python<'_>, block: bool) -> PyResult<()> {
        let shared = &*self.shared;
        if shared.backlog.load(Ordering::Relaxed) < MAX_BACKLOG || ON_DISPATCH_THREAD.with(Cell::get) {
            return Ok(());
        }
        if !block {
            return Err(to_pyerr(full()));
        }
        shared.waiting.fetch_add(1, Ordering::AcqRel);
        let outcome = loop {
            super::gate::detach(py, || {
                let q = shared.lock();
                if shared.backlog.load(Ordering::Acquire) >= MAX_BACKLOG {
                    let _ = shared.room.wait_timeout(q, SIGNAL_CHECK);
                }
            });
            if shared.backlog.load(Ordering::Acquire) < MAX_BACKLOG {
                break Ok(());
            }
            if let Err(e) = py.check_signals() {
                break Err(e);
            }
        };
        shared.waiting.fetch_sub(1, Ordering::AcqRel);
        outcome
    }

    /// The async twin of [`Dispatcher::wait_for_room`], for sends made from asyncio (which
    /// wait on the runtime, never blocking the event loop).
    pub async fn room(&self) {
        let shared = &*self.shared;
        if shared.backlog.load(Ordering::Relaxed) < MAX_BACKLOG {
            return;
        }
        shared.waiting.fetch_add(1, Ordering::AcqRel);
        loop {
            let notified = shared.room_async.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if shared.backlog.load(Ordering::Acquire) < MAX_BACKLOG {
                break;
            }
            notified.await;
        }
        shared.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.shared.orphaned.store(true, Ordering::Release);
        let q = self.shared.lock();
        let idle = q.idle;
        drop(q);
        if idle {
            self.shared.arrived.notify_one();
        }
    }
}

fn full() -> Error {
    Error::new(
        ErrorKind::ProducerQueueFull,
        "the client's callback queue is full: a send callback or an asyncio event loop is not keeping up",
    )
}

const SIGNAL_CHECK: Duration = Duration::from_millis(100);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for jobs and swaps them into `batch` (empty on entry); false once every handle
    /// is gone and nothing is left.
    fn take(&self, batch: &mut VecDeque<Job>) -> bool {
        let mut q = self.lock();
        loop {
            if !q.jobs.is_empty() {
                std::mem::swap(&mut q.jobs, batch);
                return true;
            }
            if self.orphaned.load(Ordering::Acquire) {
                q.serving = false;
                return false;
            }
            q.idle = true;
            q = self.arrived.wait(q).unwrap_or_else(|e| e.into_inner());
            q.idle = false;
        }
    }

    /// Counts `n` jobs as run, and lets waiting sends go once enough room is made.
    fn ran(&self, n: usize) {
        let left = self.backlog.fetch_sub(n, Ordering::AcqRel) - n;
        if left <= RESUME_AT && self.waiting.load(Ordering::Acquire) > 0 {
            // Taken and released so a sender between its check and its wait is not missed.
            drop(self.lock());
            self.room.notify_all();
            self.room_async.notify_waiters();
        }
    }
}

/// The dispatch thread. It gets a Python thread state once, for its whole life: making and
/// freeing one per burst cost microseconds on every callback's path. It waits with the GIL
/// released and ends without taking it again (the thread state is left to the interpreter), and
/// it runs nothing once the interpreter is exiting (see [`super::lifecycle`]).
fn serve(shared: Arc<Shared>) {
    ON_DISPATCH_THREAD.with(|d| d.set(true));
    // One more Ensure than Release: when the attach ends, the thread detaches but keeps its
    // thread state for every later `Python::attach`.
    // SAFETY: attached (the closure runs inside `Python::attach`).
    let started = attach_unless_exiting(|_py| unsafe {
        pyo3::ffi::PyGILState_Ensure();
    });
    let mut batch = VecDeque::new();
    while shared.take(&mut batch) {
        let n = batch.len();
        let ran = started.and_then(|()| {
            attach_unless_exiting(|py| {
                for job in batch.drain(..) {
                    run_job(py, job);
                }
                flush_asyncio_resolutions(py);
            })
        });
        if ran.is_none() {
            // The interpreter is exiting: nothing may run any more; the jobs' Python objects
            // are released later by PyO3 (it defers what is dropped without the GIL).
            batch.clear();
            shared.ran(n);
            shared.lock().serving = false;
            return;
        }
        shared.ran(n);
    }
}

fn run_job(py: Python<'_>, job: Job) {
    // A panicking or raising callback must not take the dispatch thread down.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(py))).is_err() {
        log::error!("a completion callback panicked; continuing");
    }
    if let Some(err) = PyErr::take(py) {
        log_callback_error(py, &err);
    }
}

static RESOLVE_MANY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Registers `magnetar._aio.resolve_many`, which completes futures on their event loop; the
/// module registers it when imported, and every asyncio call goes through that module.
#[pyfunction]
pub fn _register_asyncio(py: Python<'_>, resolve_many: Py<PyAny>) {
    let _ = RESOLVE_MANY.set(py, resolve_many);
}

/// An asyncio future to complete: its loop, the future, the value, the exception.
pub type Resolution = (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>);

/// A future to complete by calling `completer(future)` on its loop, if still pending then.
type Completion = (Py<PyAny>, Py<PyAny>, Py<PyAny>);

thread_local! {
    /// Resolutions and completions gathered during one burst of a dispatch thread, handed to
    /// each event loop in a single `call_soon_threadsafe` rather than one per future.
    static RESOLUTIONS: RefCell<Vec<Resolution>> = const { RefCell::new(Vec::new()) };
    static COMPLETIONS: RefCell<Vec<Completion>> = const { RefCell::new(Vec::new()) };
}

/// Queues an asyncio resolution for the end of the current burst (dispatch threads only).
pub fn resolve_later(r: Resolution) {
    RESOLUTIONS.with(|rs| rs.borrow_mut().push(r));
}

/// Queues `completer(future)` for `future`'s loop at the end of the current burst (dispatch
/// threads only): for a completion that must happen on the loop's thread, such as an asyncio
/// receive taking its message only if it was not cancelled (see [`super::receive`]).
pub fn complete_later(event_loop: Py<PyAny>, future: Py<PyAny>, completer: Py<PyAny>) {
    COMPLETIONS.with(|cs| cs.borrow_mut().push((event_loop, future, completer)));
}

/// One event loop's share of a burst: (future, value, exception) and (future, completer).
type ForLoop = (Vec<(Py<PyAny>, Py<PyAny>, Py<PyAny>)>, Vec<(Py<PyAny>, Py<PyAny>)>);

fn flush_asyncio_resolutions(py: Python<'_>) {
    let resolved = RESOLUTIONS.with(|r| std::mem::take(&mut *r.borrow_mut()));
    let completions = COMPLETIONS.with(|c| std::mem::take(&mut *c.borrow_mut()));
    if resolved.is_empty() && completions.is_empty() {
        return;
    }
    let Some(resolve_many) = RESOLVE_MANY.get(py) else {
        return log::error!("asyncio futures to complete, but magnetar._aio was never imported");
    };
    // Grouped by loop, each loop's order kept.
    let mut groups: Vec<(Py<PyAny>, ForLoop)> = Vec::new();
    fn group(groups: &mut Vec<(Py<PyAny>, ForLoop)>, event_loop: Py<PyAny>) -> &mut ForLoop {
        let at = match groups.iter().position(|(l, _)| l.as_ptr() == event_loop.as_ptr()) {
            Some(at) => at,
            None => {
                groups.push((event_loop, (Vec::new(), Vec::new())));
                groups.len() - 1
            }
        };
        &mut groups[at].1
    }
    for (event_loop, fut, value, error) in resolved {
        group(&mut groups, event_loop).0.push((fut, value, error));
    }
    for (event_loop, fut, completer) in completions {
        group(&mut groups, event_loop).1.push((fut, completer));
    }
    for (event_loop, (items, completers)) in groups {
        let call = pyo3::types::PyList::new(py, items).and_then(|items| {
            let completers = pyo3::types::PyList::new(py, completers)?;
            event_loop
                .bind(py)
                .call_method1("call_soon_threadsafe", (resolve_many.clone_ref(py), items, completers))
        });
        if let Err(e) = call {
            // The loop is closed: nobody is waiting any more.
            log::debug!("cannot resolve asyncio futures: {e}");
        }
    }
}

/// A user callback raised: log it (logger "magnetar") and carry on.
pub(crate) fn log_callback_error(py: Python<'_>, e: &PyErr) {
    let trace = e.traceback(py).and_then(|t| t.format().ok()).unwrap_or_default();
    log::error!("exception in a send callback (ignored): {e}\n{trace}");
}
