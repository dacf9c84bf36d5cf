//! Handlers and their registrations.
//!
//! A registration pairs a handler with a tag (typed handlers) or a [`Pattern`] (JSON handlers),
//! a [`FailurePolicy`] and an optional name. Build one with [`on`], [`on_async`],
//! [`on_service`], [`tap`], [`tap_async`], [`tap_service`], [`on_json`] or [`tap_json`], tune
//! it (`.fail_closed()`, `.named(..)`, `.layer(..)`, `.queue(..)`) and add it to a
//! [`Compose`](crate::Compose) block. The shorthand methods on `Compose` cover the common case.
//!
//! Every registration is also a tower [`Layer`](tower::Layer) over the rest of a tag's chain
//! (see [`crate::layer`]); the [`Pipeline`](crate::Pipeline) compiles all registrations of a
//! tag into one flat service instead of nesting them.

mod json;
mod typed;

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::flow::FailurePolicy;
use crate::pattern::{Pattern, PatternError};
use crate::tag::TagDescriptor;

/// What an emit does when an asynchronous tap's queue is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TapOverflow {
    /// Wait for room, at most this long; then drop the request and count it. The wait is the
    /// backpressure: the emit (and so the kernel) slows down to the tap's pace, within a bound.
    Wait(Duration),
    /// Drop the request at once and count it.
    Drop,
}

/// The queue of an asynchronous tap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TapQueueConfig {
    /// How many requests may wait for the tap (at least 1).
    pub capacity: usize,
    /// What to do when they are that many.
    pub overflow: TapOverflow,
}

impl Default for TapQueueConfig {
    /// 1,024 requests; wait at most 100 ms for room, then drop.
    fn default() -> Self {
        TapQueueConfig {
            capacity: 1024,
            overflow: TapOverflow::Wait(Duration::from_millis(100)),
        }
    }
}

pub use json::{JsonOnHandler, JsonTapHandler};
pub(crate) use json::{JsonOnStep, JsonTapSpec, SyncJsonOnFn, SyncJsonTapFn};
pub use json::{
    JsonRequest, OnJson, TagInfo, TapJson, on_json, on_json_service, tap_json, tap_json_async,
};
use std::time::Duration;
pub use typed::{
    AsyncFn, On, ServiceHandler, SyncFn, TagRequest, Tap, on, on_async, on_service, tap, tap_async,
    tap_service,
};
pub(crate) use typed::{Halt, OnStep, SyncOnFn, SyncTapFn, TapSpec};
pub use typed::{OnHandler, TapHandler, TapOutput};

/// Names a registration in failure reports and traces, e.g. `redaction: on message.tool-result`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HandlerId {
    // A thin pointer: an emit's outcome over a small payload then fits in two registers.
    name: Arc<String>,
}

impl HandlerId {
    pub(crate) fn new(origin: Option<&str>, custom: Option<&str>, default: &str) -> Self {
        let own = custom.unwrap_or(default);
        let name = match origin {
            Some(origin) => format!("{origin}: {own}"),
            None => own.to_owned(),
        };
        HandlerId {
            name: Arc::new(name),
        }
    }

    /// The handler's display name.
    pub fn as_str(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for HandlerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl fmt::Debug for HandlerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HandlerId({})", self.name)
    }
}

/// A context viewed without its type, for JSON handlers.
pub(crate) trait ErasedCtx: Send + Sync {
    fn to_json(&self) -> Result<Value, serde_json::Error>;
    fn as_any(&self) -> &dyn Any;
}

impl<C: Serialize + Send + Sync + 'static> ErasedCtx for C {
    fn to_json(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A registration with its handler type erased, ready to be compiled into a pipeline.
pub struct Registration {
    pub(crate) policy: FailurePolicy,
    pub(crate) name: Option<String>,
    pub(crate) body: Body,
}

pub(crate) enum Body {
    TypedOn {
        descriptor: &'static TagDescriptor,
        /// An `OnStep<T>` for the descriptor's tag.
        step: Box<dyn Any + Send + Sync>,
    },
    TypedTap {
        descriptor: &'static TagDescriptor,
        /// A `TapSpec<T>` for the descriptor's tag.
        spec: Box<dyn Any + Send + Sync>,
        queue: Option<TapQueueConfig>,
    },
    JsonOn {
        pattern: Result<Pattern, PatternError>,
        step: JsonOnStep,
    },
    JsonTap {
        pattern: Result<Pattern, PatternError>,
        spec: JsonTapSpec,
        queue: Option<TapQueueConfig>,
    },
}

impl Registration {
    /// The label used when the registration was not named.
    pub(crate) fn default_label(&self) -> String {
        match &self.body {
            Body::TypedOn { descriptor, .. } => format!("on {}", descriptor.name()),
            Body::TypedTap { descriptor, .. } => format!("tap {}", descriptor.name()),
            Body::JsonOn { pattern, .. } => format!("on_json {}", pattern_label(pattern)),
            Body::JsonTap { pattern, .. } => format!("tap_json {}", pattern_label(pattern)),
        }
    }

    /// Where the handler sorts among `on` handlers of a tag: lower runs first.
    pub(crate) fn specificity(&self) -> u8 {
        match &self.body {
            Body::JsonOn {
                pattern: Ok(pattern),
                ..
            }
            | Body::JsonTap {
                pattern: Ok(pattern),
                ..
            } => pattern.specificity(),
            _ => Pattern::EXACT,
        }
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field(
                "handler",
                &self.name.clone().unwrap_or_else(|| self.default_label()),
            )
            .field("policy", &self.policy)
            .finish()
    }
}

fn pattern_label(pattern: &Result<Pattern, PatternError>) -> String {
    match pattern {
        Ok(pattern) => pattern.to_string(),
        Err(_) => "<invalid pattern>".to_owned(),
    }
}

/// Options shared by every registration builder.
#[derive(Clone, Debug, Default)]
pub(crate) struct Options {
    pub(crate) policy: FailurePolicy,
    pub(crate) name: Option<String>,
}

/// Implements the option setters on a registration builder.
macro_rules! registration_options {
    () => {
        /// Fail the whole emit when this handler fails (see [`FailurePolicy::FailClosed`]).
        pub fn fail_closed(mut self) -> Self {
            self.options.policy = $crate::FailurePolicy::FailClosed;
            self
        }

        /// Keep the previous payload and report when this handler fails (the default).
        pub fn fail_open(mut self) -> Self {
            self.options.policy = $crate::FailurePolicy::FailOpen;
            self
        }

        /// Sets the failure policy.
        pub fn policy(mut self, policy: $crate::FailurePolicy) -> Self {
            self.options.policy = policy;
            self
        }

        /// Names the handler in failure reports and traces.
        pub fn named(mut self, name: impl Into<String>) -> Self {
            self.options.name = Some(name.into());
            self
        }
    };
}
pub(crate) use registration_options;
