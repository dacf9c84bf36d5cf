//! Compose blocks: `.compose(|c| c.on(...).tap(...))` groups registrations. A
//! [`Plugin`](crate::Plugin) bundles them with start and stop hooks.

use std::future::Future;

use serde_json::Value;

use crate::flow::IntoFlow;
use crate::handler::{self, Registration, TagInfo, TapOutput};
use crate::pattern::IntoPattern;
use crate::tag::Tag;

/// A group of registrations, built by chaining.
///
/// ```
/// use harness_tags::{Compose, Pipeline, tags::{MessageToolResult, ObservationToolResult}};
///
/// let pipeline = Pipeline::builder()
///     .compose(|c| {
///         c.on(MessageToolResult, |msg: &harness_tags::KernelMessage, _ctx| {
///             msg.with_content(msg.content().replace("hunter2", "<PASSWORD>"))
///         })
///         .tap(ObservationToolResult, |step: &harness_tags::ObservationStep, ctx| {
///             println!("{} took {} ms ({})", ctx.tool_name, ctx.duration_ms, step.kind);
///         })
///     })
///     .build()
///     .unwrap();
/// # let _ = pipeline;
/// ```
#[derive(Debug, Default)]
pub struct Compose {
    registrations: Vec<Registration>,
}

impl Compose {
    /// An empty block.
    pub fn new() -> Self {
        Compose::default()
    }

    /// Adds a registration built with [`handler::on`], [`handler::tap`], [`handler::on_json`]
    /// and friends, after setting its options.
    ///
    /// ```
    /// use harness_tags::{Compose, on, tags::ToolCallTag};
    ///
    /// let c = Compose::new().register(
    ///     on(ToolCallTag, |call: &harness_tags::ToolCall, _ctx| call.clone())
    ///         .named("audit")
    ///         .fail_closed(),
    /// );
    /// assert_eq!(c.len(), 1);
    /// ```
    pub fn register(mut self, registration: impl Into<Registration>) -> Self {
        self.registrations.push(registration.into());
        self
    }

    /// A synchronous `on` handler with the default policy (see [`handler::on`]).
    pub fn on<T, F, R>(self, tag: T, handler: F) -> Self
    where
        T: Tag,
        F: Fn(&T::Payload, &T::Ctx) -> R + Send + Sync + 'static,
        R: IntoFlow<T::Payload>,
    {
        self.register(handler::on(tag, handler))
    }

    /// An asynchronous `on` handler with the default policy (see [`handler::on_async`]).
    pub fn on_async<T, F, Fut>(self, tag: T, handler: F) -> Self
    where
        T: Tag,
        F: Fn(T::Payload, T::Ctx) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: IntoFlow<T::Payload>,
    {
        self.register(handler::on_async(tag, handler))
    }

    /// A synchronous tap (see [`handler::tap`]).
    pub fn tap<T, F, R>(self, tag: T, handler: F) -> Self
    where
        T: Tag,
        F: Fn(&T::Payload, &T::Ctx) -> R + Send + Sync + 'static,
        R: TapOutput,
    {
        self.register(handler::tap(tag, handler))
    }

    /// An asynchronous tap on the default queue (see [`handler::tap_async`]).
    pub fn tap_async<T, F, Fut>(self, tag: T, handler: F) -> Self
    where
        T: Tag,
        F: Fn(T::Payload, T::Ctx) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: TapOutput,
    {
        self.register(handler::tap_async(tag, handler))
    }

    /// A synchronous JSON `on` handler for every tag the pattern matches (see
    /// [`handler::on_json`]).
    pub fn on_json<F, R>(self, pattern: impl IntoPattern, handler: F) -> Self
    where
        F: Fn(&Value, &TagInfo<'_>) -> R + Send + Sync + 'static,
        R: IntoFlow<Value>,
    {
        self.register(handler::on_json(pattern, handler))
    }

    /// A synchronous JSON tap for every tag the pattern matches (see [`handler::tap_json`]).
    pub fn tap_json<F, R>(self, pattern: impl IntoPattern, handler: F) -> Self
    where
        F: Fn(&Value, &TagInfo<'_>) -> R + Send + Sync + 'static,
        R: TapOutput,
    {
        self.register(handler::tap_json(pattern, handler))
    }

    /// How many registrations the block holds.
    pub fn len(&self) -> usize {
        self.registrations.len()
    }

    /// True if the block holds no registration.
    pub fn is_empty(&self) -> bool {
        self.registrations.is_empty()
    }

    pub(crate) fn into_registrations(self) -> impl Iterator<Item = Registration> {
        self.registrations.into_iter()
    }
}
