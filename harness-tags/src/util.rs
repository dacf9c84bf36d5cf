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

/// The calendar date of a day count since 1970-01-01 (proleptic Gregorian).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A Unix time in milliseconds as RFC 3339 / ISO 8601 in UTC, to the millisecond:
/// `2026-11-25T18:21:20.123Z`.
pub fn rfc3339(unix_ms: i64) -> String {
    let seconds = unix_ms.div_euclid(1000);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let in_day = seconds.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60,
        unix_ms.rem_euclid(1000)
    )
}
