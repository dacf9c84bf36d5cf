//! Machine-readable codes of the `error` events a harness publishes.

use std::fmt;

/// What kind of failure an [`HarnessEvent::Error`](crate::HarnessEvent::Error) reports, as
/// its `errorType` string. Clients may meet codes this version does not list (plugins add
/// their own), so they should treat unknown strings as a generic error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The store failed to save or load something.
    Storage,
    /// A run ended because its task panicked or was dropped.
    RunCrashed,
    /// A run could not start (no thread, no model, a handler refused it).
    RunRefused,
    /// A tag handler failed and was skipped.
    HandlerFailure,
    /// Switching modes failed.
    ModeSwitch,
    /// A subscriber fell behind and lost events.
    MissedEvents,
}

impl ErrorCode {
    /// The code as it appears in `errorType`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Storage => "storage",
            ErrorCode::RunCrashed => "run_crashed",
            ErrorCode::RunRefused => "run_refused",
            ErrorCode::HandlerFailure => "handler_failure",
            ErrorCode::ModeSwitch => "mode_switch",
            ErrorCode::MissedEvents => "missed_events",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorCode> for String {
    fn from(code: ErrorCode) -> String {
        code.as_str().to_owned()
    }
}
