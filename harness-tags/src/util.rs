//! Small helpers every harness crate shares: the wall clock and mutex locking that ignores
//! poisoning.

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

/// Locks `mutex`, going on if a thread panicked while holding it.
///
/// For state whose every critical section replaces whole values, so that a panic cannot
/// leave it half-written: the poison flag then carries no information.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
