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

/// The day count since 1970-01-01 of a calendar date (proleptic Gregorian); the inverse of
/// [`civil_from_days`].
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// An RFC 3339 date-time (`2026-11-25T18:21:20Z`, `2026-11-25T19:21:20.5+01:00`; `t`, `z` and a
/// space for `T` accepted) as a Unix time in milliseconds; `None` for anything else, an
/// impossible date included. Digits past the millisecond are dropped.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = bytes.get(range)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if bytes.get(4) != Some(&b'-')
        || bytes.get(7) != Some(&b'-')
        || !matches!(bytes.get(10), Some(b'T' | b't' | b' '))
        || bytes.get(13) != Some(&b':')
        || bytes.get(16) != Some(&b':')
    {
        return None;
    }
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => return None,
    };
    // 60 is a leap second; Unix time has none, so it counts as the next second.
    if day < 1 || day > days_in_month || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if bytes.get(at) == Some(&b'.') {
        let start = at + 1;
        at = start;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        if at == start {
            return None;
        }
        let fraction = format!("{:0<3}", &text[start..(start + 3).min(at)]);
        millis = fraction.parse::<i64>().ok()?;
    }
    let offset_minutes = match bytes.get(at) {
        Some(b'Z' | b'z') if at + 1 == bytes.len() => 0,
        Some(sign @ (b'+' | b'-')) if at + 6 == bytes.len() && bytes.get(at + 3) == Some(&b':') => {
            let (hours, minutes) = (number(at + 1..at + 3)?, number(at + 4..at + 6)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = hours * 60 + minutes;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_minutes * 60;
    Some(seconds * 1000 + millis)
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

#[cfg(test)]
mod tests {
    use super::{civil_from_days, days_from_civil, parse_rfc3339, rfc3339};

    #[test]
    fn day_counts_and_dates_are_inverses() {
        for days in (-800_000..800_000).step_by(997) {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
        }
    }

    #[test]
    fn what_rfc3339_writes_parses_back() {
        let mut at: i64 = -62_135_596_800_000; // 0001-01-01
        while at < 253_402_300_799_000 {
            assert_eq!(parse_rfc3339(&rfc3339(at)), Some(at), "{}", rfc3339(at));
            at += 86_399_977_123;
        }
    }

    #[test]
    fn offsets_fractions_and_forms() {
        let utc = Some(1_764_094_880_000);
        assert_eq!(parse_rfc3339("2025-11-25T18:21:20Z"), utc);
        assert_eq!(parse_rfc3339("2025-11-25t18:21:20z"), utc);
        assert_eq!(parse_rfc3339("2025-11-25 18:21:20Z"), utc);
        assert_eq!(parse_rfc3339("2025-11-25T19:21:20+01:00"), utc);
        assert_eq!(parse_rfc3339("2025-11-25T13:51:20-04:30"), utc);
        assert_eq!(
            parse_rfc3339("2025-11-25T18:21:20.5Z"),
            utc.map(|t| t + 500)
        );
        assert_eq!(
            parse_rfc3339("2025-11-25T18:21:20.123456789Z"),
            utc.map(|t| t + 123)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for text in [
            "",
            "2025-11-25",
            "2025-11-25T18:21:20",
            "2025-11-25T18:21:20.Z",
            "2025-11-25T18:21:20+0100",
            "2025-11-25T18:21:20Z ",
            "2025-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2100-02-29T00:00:00Z",
            "2025-04-31T00:00:00Z",
            "2025-11-25T24:00:00Z",
            "2025-11-25T18:60:00Z",
            "2025-11-25T18:21:20+24:00",
            "+025-11-25T18:21:20Z",
            "2025-11-25T18:21:2éZ",
            "２025-11-25T18:21:20Z",
        ] {
            assert_eq!(parse_rfc3339(text), None, "{text:?}");
        }
    }
}
