//! Handler failures: how they are described, reported and turned into emit errors.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::flow::{FailurePolicy, TagError};
use crate::handler::HandlerId;
use crate::tag::TagDescriptor;

/// What went wrong in a handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The handler returned an error or [`Flow::Fail`](crate::Flow::Fail).
    Failed,
    /// The handler panicked.
    Panicked,
    /// A JSON handler returned a payload that does not match the tag's payload schema.
    InvalidPayload,
    /// A handler suppressed a tag that cannot be suppressed.
    NotSuppressible,
    /// An asynchronous tap could not be queued or run (no runtime, queue closed).
    TapUndeliverable,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Failed => "failed",
            FailureKind::Panicked => "panicked",
            FailureKind::InvalidPayload => "returned an invalid payload",
            FailureKind::NotSuppressible => "suppressed a tag that cannot be suppressed",
            FailureKind::TapUndeliverable => "could not be delivered",
        })
    }
}

/// A handler failure, as the error sink receives it.
#[derive(Clone, Debug)]
pub struct HandlerFailure {
    /// The tag being emitted.
    pub tag: &'static TagDescriptor,
    /// The handler that failed.
    pub handler: HandlerId,
    /// The handler's policy (for taps always `FailOpen`: a tap never fails an emit).
    pub policy: FailurePolicy,
    /// What went wrong.
    pub kind: FailureKind,
    /// The error.
    pub error: TagError,
}

impl fmt::Display for HandlerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "handler `{}` {} on `{}`: {}",
            self.handler,
            self.kind,
            self.tag.name(),
            self.error
        )
    }
}

/// Receives every handler failure; the harness runtime turns them into `error` events.
///
/// Any `Fn(&HandlerFailure) + Send + Sync` is a sink.
pub trait ErrorSink: Send + Sync + 'static {
    /// Called once per failure, on the emitting task (or the tap's worker task).
    fn report(&self, failure: &HandlerFailure);
}

impl<F: Fn(&HandlerFailure) + Send + Sync + 'static> ErrorSink for F {
    fn report(&self, failure: &HandlerFailure) {
        self(failure)
    }
}

/// The emit failed because a `FailClosed` handler failed: the emit site must not use the
/// payload. The full [`HandlerFailure`] is inside.
#[derive(Clone, Debug)]
pub struct EmitError {
    // Boxed so that a `Result<EmitOutcome<P>, EmitError>` stays small on the hot path.
    failure: Box<HandlerFailure>,
}

impl EmitError {
    /// The failure that failed the emit.
    pub fn failure(&self) -> &HandlerFailure {
        &self.failure
    }

    /// The tag's name.
    pub fn tag(&self) -> &'static str {
        self.failure.tag.name()
    }

    /// The handler that failed.
    pub fn handler(&self) -> &HandlerId {
        &self.failure.handler
    }

    /// What went wrong.
    pub fn kind(&self) -> FailureKind {
        self.failure.kind
    }
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` failed closed: handler `{}` {}: {}",
            self.failure.tag.name(),
            self.failure.handler,
            self.failure.kind,
            self.failure.error
        )
    }
}

impl std::error::Error for EmitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.failure.error)
    }
}

/// Reports a failure and says whether the emit must fail.
pub(crate) fn report(
    sink: Option<&Arc<dyn ErrorSink>>,
    failure: HandlerFailure,
) -> Option<EmitError> {
    tracing::warn!(
        tag = failure.tag.name(),
        handler = failure.handler.as_str(),
        kind = %failure.kind,
        error = %failure.error,
        "tag handler failed"
    );
    if let Some(sink) = sink {
        // A sink that panics must not take the emit down with it.
        let reported =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.report(&failure)));
        if reported.is_err() {
            tracing::error!(tag = failure.tag.name(), "the error sink panicked");
        }
    }
    match failure.policy {
        FailurePolicy::FailOpen => None,
        FailurePolicy::FailClosed => Some(EmitError {
            failure: Box::new(failure),
        }),
    }
}

/// The error of a caught panic.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> TagError {
    TagError::from_panic(panic)
}
