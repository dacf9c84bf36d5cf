//! Small helpers every harness crate shares: the wall clock, mutex locking that ignores
//! poisoning, and errors printed with their causes.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// A wall clock in Unix milliseconds, injectable where tests need a fixed time.
pub type WallClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system's wall clock in Unix milliseconds (0 if the system clock is before 1970).
pub fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The wall clock in Unix milliseconds, read cheaply: on Linux from the coarse clock (a few
/// nanoseconds instead of a full clock read, at the kernel tick's resolution, 1 to 4 ms); the
/// same as [`unix_ms`] elsewhere. For stamps taken on every event, where that resolution is
/// enough.
pub fn coarse_unix_ms() -> i64 {
    #[cfg(target_os = "linux")]
    {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        now.tv_sec
            .saturating_mul(1000)
            .saturating_add(now.tv_nsec / 1_000_000)
    }
    #[cfg(not(target_os = "linux"))]
    {
        unix_ms()
    }
}

/// Locks `mutex`, going on if a thread panicked while holding it.
///
/// For state whose every critical section replaces whole values, so that a panic cannot
/// leave it half-written: the poison flag then carries no information.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An error and its causes, joined with `: ` (a cause whose text the error already contains
/// is left out), for messages that say what went wrong all the way down.
///
/// ```
/// let io = std::io::Error::other("connection reset");
/// assert_eq!(harness_tags::util::error_chain(&io), "connection reset");
/// ```
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
