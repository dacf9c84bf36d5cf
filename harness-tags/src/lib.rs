//! The typed tag system of the harness.
//!
//! Every interception point of the harness is a **tag**: a name (`message.tool-result`), a
//! typed payload, a typed context and a phase. Code and plugins attach **`on`** handlers that
//! reshape a tag's payload and **`tap`** handlers that observe the final payload, grouped in
//! `.compose()` blocks. Registrations compile once into an immutable [`Pipeline`], which the
//! kernel calls at every emit site and whose reshaped payload is what the system then uses.
//!
//! ```
//! use harness_tags::{BaseCtx, KernelMessage, Pipeline, ToolResultCtx};
//! use harness_tags::tags::{MessageToolResult, PromptSystem};
//!
//! let pipeline = Pipeline::builder()
//!     .compose(|c| {
//!         c.on(PromptSystem, |text: &String, ctx: &BaseCtx| format!("[tenant: {}]\n{text}", ctx.strategy))
//!             // Redact before the model sees a tool result.
//!             .on(MessageToolResult, |msg: &KernelMessage, _ctx: &ToolResultCtx| {
//!                 msg.with_content(msg.content().replace("hunter2", "<PASSWORD>"))
//!             })
//!     })
//!     .build()?;
//!
//! // Every handler here is synchronous, so the emit completes without an executor.
//! let ctx = ToolResultCtx::default();
//! let message = KernelMessage::tool_result("call_1", "read_file", "password: hunter2", false);
//! let outcome = pipeline.emit::<MessageToolResult>(message, &ctx).now().unwrap()?;
//! assert_eq!(outcome.into_payload().unwrap().content(), "password: <PASSWORD>");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The pieces
//!
//! - [`Tag`] and `#[derive(Tag)]` declare tags; [`catalog()`] lists every tag linked into the
//!   binary (third-party ones included) and [`tags`] holds the standard catalog.
//! - [`context`] and [`payload`] hold the standard contexts and payload types (camelCase JSON).
//! - [`Flow`] and [`IntoFlow`]: a handler returns the payload, an `Option`, a `Flow` or a
//!   `Result`; [`FailurePolicy`] says what a failure does.
//! - [`handler`]: typed and JSON registrations, sync, async and tower-service handlers, any of
//!   which a tower layer (e.g. `TimeoutLayer`) can wrap.
//! - [`Pattern`]: `a.b`, `a.*`, `a.**`, `**` and predicates, ordered broad to narrow.
//! - [`Compose`] and [`Plugin`] group registrations; [`Pipeline`] compiles and runs them.
//! - [`layer`]: each registration as a standalone tower layer.
//! - [`util`]: the wall clock and poison-free locking the harness crates share.

#![deny(clippy::print_stdout, clippy::print_stderr)]

extern crate self as harness_tags;

pub mod compose;
pub mod context;
pub mod flow;
pub mod handler;
pub mod layer;
pub mod pattern;
pub mod payload;
mod phase;
pub mod pipeline;
pub mod tag;
pub mod tags;
pub mod util;

pub use compose::Compose;
pub use context::{
    BaseCtx, KernelState, McpCtx, McpListReason, MemoryCtx, ModelCtx, NudgeCtx, SessionView,
    Severity, SubagentCtx, TagContext, ThreadCtx, ToolCallCtx, ToolCategory, ToolResultCtx,
};
pub use flow::{BoxError, FailurePolicy, Flow, IntoFlow, TagError};
pub use handler::{
    HandlerId, JsonRequest, Registration, TagInfo, TagRequest, on, on_async, on_json,
    on_json_service, on_service, tap, tap_async, tap_json, tap_json_async, tap_service,
};
pub use harness_macros::Tag;
pub use pattern::{IntoPattern, Pattern, PatternError};
pub use payload::{
    DeltaKind, DisplayToolResult, FailureReason, FinishReason, GateDecision, GateVerdict,
    HealingKind, HealingReport, HealingStep, KernelMessage, LifecycleFailure, McpResourceInfo,
    McpToolAnnotations, McpToolInfo, McpToolList, MemoryContext, ModelRequest, ModelResponse,
    ObservationStep, OutputDelta, OutputStream, RunEnd, RunFailure, RunOutcome, RunStart,
    StrategyAction, StrategyEvaluation, SubagentResult, TerminateDecision, TerminateReason,
    TextDelta, Thinking, ThreadChange, ToolCall, ToolSpec, Usage,
};
pub use pipeline::{
    BuildError, Emit, EmitError, EmitOutcome, ErrorSink, FailureKind, HandlerFailure, IntoPlugin,
    Pipeline, PipelineBuilder, Plugin, PluginError, TagService, TapOverflow, TapQueueConfig,
    TapStats,
};
pub use tag::{Phase, Tag, TagDescriptor, catalog, duplicate_names, lookup};

/// The names most code needs: `use harness_tags::prelude::*;`.
pub mod prelude {
    pub use crate::context::*;
    pub use crate::payload::*;
    pub use crate::tags::*;
    pub use crate::{Compose, Flow, Pipeline, Plugin, Tag};
}

/// Items the derive macro's expansion refers to. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use linkme;

    pub use crate::tag::{CatalogEntry, TAGS};

    use crate::tag::{Tag, TagDescriptor};

    /// Builds a tag's descriptor in a `static`.
    pub const fn descriptor<T: Tag>(
        description: &'static str,
        payload_type: &'static str,
        ctx_type: &'static str,
        crate_name: &'static str,
        module_path: &'static str,
    ) -> TagDescriptor {
        TagDescriptor::new::<T>(
            description,
            payload_type,
            ctx_type,
            crate_name,
            module_path,
            crate::pipeline::chain_factory::<T>,
        )
    }
}
