//! What a client of a harness sees on the wire, and nothing that runs.
//!
//! A harness publishes [`HarnessEvent`]s; every subscription delivers each one inside an
//! [`EventEnvelope`] (`{seq, threadId, runId?, at, event}`), so a client that reconnects can
//! say where it stopped. A user interface folds the events into a [`DisplayState`] with the
//! pure [`reduce`] function (the runtime's display scheduler does the same, and batches the
//! snapshots). Messages, threads, tasks and error codes are the other shapes a client meets.
//!
//! [`open_harness`] maps a run's events to the Open Harness API's execution events, for HTTP
//! servers.
//!
//! JSON field names are camelCase (the Open Harness types keep the spec's snake_case); every
//! enum is tagged by `type` in snake_case. The JSON Schema of the envelope is
//! [`envelope_schema`], checked in as `schema/events.json`.
//!
//! ```
//! use harness_protocol::{DisplayState, HarnessEvent, reduce};
//!
//! let event: HarnessEvent = serde_json::from_str(r#"{"type": "agent_start", "runId": "r1"}"#)?;
//! assert_eq!(event.kind(), "agent_start");
//! let mut state = DisplayState::default();
//! reduce(&mut state, &event);
//! assert!(state.is_running);
//! # Ok::<(), serde_json::Error>(())
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod display;
mod envelope;
mod error;
pub mod event;
mod memory;
mod message;
pub mod open_harness;
pub mod reducer;
mod task;

pub use display::{
    ActiveSubagent, ActiveTool, DisplayState, ModifiedFile, PendingApproval, PendingSuspension,
    SubagentStatus, SubagentToolCall, ToolStatus,
};
pub use envelope::{EventEnvelope, EventScope};
pub use error::ErrorCode;
pub use event::{AgentEndReason, HarnessEvent, ModelScope, OutputStream, ThreadInfo};
pub use harness_tags::util::WallClock;
pub use memory::{OmProgress, OmRole, OmStatus, OmTrigger};
pub use message::{HarnessMessage, MessagePart, MessageRole, PartKind, StopReason};
pub use reducer::{reduce, reduce_with_clock};
pub use task::{TaskItem, TaskStatus};

/// The JSON Schema (draft 2020-12) of an [`EventEnvelope`], as checked in at
/// `harness-protocol/schema/events.json`.
pub fn envelope_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(EventEnvelope)).unwrap_or_default()
}
