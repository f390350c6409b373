//! Time as the actors see it: the wall clock in milliseconds, deadlines that may be unset, and
//! the producer's batch deadline, kept to the microsecond.
//!
//! tokio's timer counts whole milliseconds and rounds deadlines up, so a 1 ms batch delay
//! came out anywhere between 0.6 and 1.7 ms (measured at 1,000 msg/s: two in five batches were
//! held 1.3–1.7 ms), and that showed in publish latency. On Linux a timerfd, which the reactor
//! watches like a socket, fires on time, as the C++ client's asio timer does; elsewhere, or if
//! the timerfd cannot be made, tokio's timer stands in.
//!
//! A timerfd is a file descriptor, one per producer: with thousands of producers in a process
//! that is thousands of descriptors (past the common soft limit of 1,024) for a precision
//! only short delays need (issue 31). So a timer gets its timerfd only when it is asked for
//! precision (a delay under [`PRECISE_BELOW`]) and only when first armed.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Sleeps until `at`, or forever when `None` (a disabled `select!` branch).
pub async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Spawns a task that calls `tick` with `state` every `period` until `tick` returns false or
/// `state` is dropped: the task holds it weakly between ticks, so it never keeps a handle alive.
pub(crate) fn every<T, F, Fut>(state: &Arc<T>, period: Duration, mut tick: F)
where
    T: Send + Sync + 'static,
    F: FnMut(Arc<T>) -> Fut + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let weak = Arc::downgrade(state);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let Some(state) = weak.upgrade() else { return };
            if !tick(state).await {
                return;
            }
        }
    });
}

/// Delays at least this long are kept with tokio's timer: its rounding (at most a
/// millisecond, and never late, see [`DeadlineTimer::expired`]) is a tenth of them or less.
pub const PRECISE_BELOW: Duration = Duration::from_millis(10);

/// A one-shot timer for one deadline at a time.
pub(crate) struct DeadlineTimer {
    deadline: Option<Instant>,
    /// Whether to make a timerfd at the first arming (precision wanted, not yet tried).
    #[cfg(target_os = "linux")]
    want_fd: bool,
    #[cfg(target_os = "linux")]
    fd: Option<linux::TimerFd>,
}

impl DeadlineTimer {
    /// A disarmed timer for deadlines `delay` ahead, precise to the microsecond when `delay`
    /// is under [`PRECISE_BELOW`].
    pub fn new(delay: Duration) -> Self {
        #[cfg(not(target_os = "linux"))]
        let _ = delay;
        DeadlineTimer {
            deadline: None,
            #[cfg(target_os = "linux")]
            want_fd: delay < PRECISE_BELOW,
            #[cfg(target_os = "linux")]
            fd: None,
        }
    }

    /// Arms the timer for `deadline`, or disarms it with `None`. Setting the deadline it
    /// already has costs nothing; so does disarming, which only forgets the deadline (a
    /// later arming resets the timerfd, and `expired` checks the time anyway).
    /// Call within the runtime: a timerfd registers with its reactor.
    pub fn set(&mut self, deadline: Option<Instant>) {
        if deadline == self.deadline {
            return;
        }
        self.deadline = deadline;
        #[cfg(target_os = "linux")]
        if deadline.is_some() && std::mem::take(&mut self.want_fd) {
            self.fd = linux::TimerFd::new()
                .map_err(|e| log::debug!("no timerfd ({e}); batch deadlines use tokio's timer"))
                .ok();
        }
        #[cfg(target_os = "linux")]
        if let (Some(fd), Some(at)) = (&self.fd, deadline) {
            if let Err(e) = fd.arm(at.saturating_duration_since(Instant::now())) {
                log::debug!("timerfd_settime failed ({e}); batch deadlines use tokio's timer");
                self.fd = None;
            }
        }
    }

    /// Resolves once the deadline has passed; never while disarmed. Cancel-safe: dropping it
    /// midway loses nothing, as the `select!` loops that poll it need.
    pub async fn expired(&mut self) {
        let Some(deadline) = self.deadline else {
            return std::future::pending().await;
        };
        #[cfg(target_os = "linux")]
        while let Some(fd) = &self.fd {
            let outcome = match fd.wait().await {
                Ok(()) => {
                    let now = Instant::now();
                    if now + EARLY_SLACK >= deadline {
                        return;
                    }
                    // An expiration left from an earlier arming: wait out the rest.
                    fd.arm(deadline - now)
                }
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                log::debug!("timerfd failed ({e}); batch deadlines use tokio's timer");
                self.fd = None;
            }
        }
        // tokio fires on the first whole millisecond at or after a deadline: aim one tick
        // early so a batch is held at most its delay, not up to a millisecond more.
        tokio::time::sleep_until(deadline.checked_sub(TOKIO_TICK).unwrap_or(deadline)).await;
    }
}

const TOKIO_TICK: std::time::Duration = std::time::Duration::from_millis(1);
#[cfg(target_os = "linux")]
const EARLY_SLACK: std::time::Duration = std::time::Duration::from_micros(50);

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;

    pub(super) struct TimerFd(AsyncFd<OwnedFd>);

    impl TimerFd {
        pub fn new() -> io::Result<Self> {
            // SAFETY: plain system call; the fd it returns is owned by the OwnedFd below.
            let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a new, valid descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // Registering outside a runtime would panic.
            tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
            // SAFETY: the OwnedFd keeps the descriptor open, unchanged, for the AsyncFd's life.
            Ok(TimerFd(unsafe {
                AsyncFd::register_with_interest(fd, Interest::READABLE)
            }?))
        }

        /// Fires once after `after` (at once for zero).
        pub fn arm(&self, after: Duration) -> io::Result<()> {
            let spec = libc::itimerspec {
                it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
                it_value: libc::timespec {
                    tv_sec: after.as_secs() as libc::time_t,
                    // An all-zero it_value would disarm; one nanosecond fires at once.
                    tv_nsec: (after.subsec_nanos() as libc::c_long).max((after.as_secs() == 0) as libc::c_long),
                },
            };
            // SAFETY: the fd is ours and open; `spec` outlives the call; no old value wanted.
            let rc = unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        /// Waits for an expiration and consumes it.
        pub async fn wait(&self) -> io::Result<()> {
            loop {
                let mut guard = self.0.readable().await?;
                let read = guard.try_io(|fd| {
                    let mut ticks = [0u8; 8];
                    // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
                    let n = unsafe { libc::read(fd.as_raw_fd(), ticks.as_mut_ptr().cast(), ticks.len()) };
                    if n < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(())
                    }
                });
                match read {
                    Ok(result) => {
                        // The expirations are consumed: the next arming's must be waited for,
                        // not found by a read that would only say EAGAIN.
                        guard.clear_ready();
                        return result;
                    }
                    // Readiness was stale (re-armed since): wait again.
                    Err(_would_block) => continue,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn fires_at_the_deadline_and_not_before() {
        let delay = Duration::from_millis(3);
        let mut timer = DeadlineTimer::new(delay);
        let start = Instant::now();
        timer.set(Some(start + delay));
        timer.expired().await;
        assert!(start.elapsed() >= delay - Duration::from_micros(50));
    }

    #[tokio::test]
    async fn a_moved_deadline_replaces_the_old_one() {
        let mut timer = DeadlineTimer::new(Duration::from_millis(1));
        let start = Instant::now();
        timer.set(Some(start + Duration::from_millis(1)));
        // The first arming expires unobserved; the later deadline must still be waited for.
        std::thread::sleep(Duration::from_millis(2));
        let later = Instant::now() + Duration::from_millis(5);
        timer.set(Some(later));
        timer.expired().await;
        assert!(Instant::now() + Duration::from_micros(50) >= later);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_descriptor_only_for_short_delays_and_only_once_armed() {
        let mut short = DeadlineTimer::new(Duration::from_millis(1));
        assert!(short.fd.is_none(), "no descriptor before the first arming");
        short.set(Some(Instant::now() + Duration::from_millis(1)));
        assert!(short.fd.is_some());
        let mut long = DeadlineTimer::new(PRECISE_BELOW);
        let start = Instant::now();
        long.set(Some(start + PRECISE_BELOW));
        assert!(long.fd.is_none());
        long.expired().await;
        assert!(start.elapsed() + TOKIO_TICK >= PRECISE_BELOW);
    }

    #[tokio::test]
    async fn disarmed_never_fires() {
        let mut timer = DeadlineTimer::new(Duration::from_millis(1));
        timer.set(Some(Instant::now()));
        timer.set(None);
        let fired = tokio::time::timeout(Duration::from_millis(20), timer.expired()).await;
        assert!(fired.is_err());
    }
}
