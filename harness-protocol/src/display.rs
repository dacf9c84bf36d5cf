//! The display state: one immutable snapshot of everything a user interface draws, folded
//! from the event stream.
//!
//! - [`reduce`](crate::reduce) folds one event into a [`DisplayState`] (the rules are listed
//!   in [`crate::reducer`]).
//! - The runtime's display scheduler (in `harness-core`) folds every event at once and
//!   publishes `Arc<DisplayState>` snapshots, batched; a client that reads the event stream
//!   itself folds it the same way:
//!
//! ```
//! use harness_protocol::{DisplayState, HarnessEvent, reduce};
//!
//! let mut state = DisplayState::default();
//! reduce(&mut state, &HarnessEvent::AgentStart { run_id: "run-1".into() });
//! assert!(state.is_running);
//! reduce(&mut state, &HarnessEvent::Info { message: "noted".into() });
//! assert!(state.is_running);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use harness_tags::{ToolCategory, Usage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::memory::OmProgress;
use crate::message::HarnessMessage;
use crate::task::TaskItem;

/// Where an active tool stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The model is still streaming its arguments.
    StreamingInput,
    /// It runs.
    Running,
    /// It finished.
    Completed,
    /// It failed (or the run ended while it ran).
    Error,
}

/// A tool call the UI shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveTool {
    /// The tool.
    pub name: String,
    /// The arguments (once known).
    pub args: Value,
    /// The tool's category, if known.
    pub category: Option<ToolCategory>,
    /// Where it stands.
    pub status: ToolStatus,
    /// The latest partial result.
    pub partial_result: Option<Value>,
    /// The result, once finished.
    pub result: Option<String>,
    /// True if it failed.
    pub is_error: bool,
    /// Command output so far.
    pub shell_output: String,
}

/// A tool call waiting for the user's approval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The arguments.
    pub args: Value,
    /// The tool's category.
    pub category: Option<ToolCategory>,
    /// Why approval is needed.
    pub reason: Option<String>,
}

/// A tool paused on the user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingSuspension {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// What the UI shows.
    pub suspend_payload: Value,
    /// JSON Schema of the expected answer.
    pub resume_schema: Option<Value>,
}

/// Where a subagent stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubagentStatus {
    /// It runs.
    Running,
    /// It finished.
    Completed,
    /// It failed.
    Error,
}

/// A subagent the UI shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveSubagent {
    /// Its type.
    pub agent_type: String,
    /// Its task.
    pub task: String,
    /// Its model.
    pub model_id: String,
    /// True if it runs on a fork.
    pub forked: bool,
    /// Its tool calls so far: (tool, finished, failed).
    pub tool_calls: Vec<SubagentToolCall>,
    /// Its text so far.
    pub text: String,
    /// Where it stands.
    pub status: SubagentStatus,
    /// How long it ran, once finished.
    pub duration_ms: Option<u64>,
    /// What it returned, once finished.
    pub result: Option<String>,
}

/// One tool call of a subagent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubagentToolCall {
    /// The tool.
    pub name: String,
    /// The arguments.
    pub args: Value,
    /// The result, once finished.
    pub result: Option<String>,
    /// True if it failed.
    pub is_error: bool,
}

/// A file the agent changed in this thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModifiedFile {
    /// The tools that changed it, in order.
    pub operations: Vec<String>,
    /// When it was first changed, Unix milliseconds.
    pub first_modified: i64,
}

/// Everything a user interface draws for one frame.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisplayState {
    /// True while a run is active.
    pub is_running: bool,
    /// The assistant message being streamed, if any.
    pub current_message: Option<Arc<HarnessMessage>>,
    /// Follow-ups waiting for the current run to end.
    pub queued_follow_ups: Vec<String>,
    /// The thread's token usage.
    pub token_usage: Usage,
    /// Tool calls of the current run, by call id.
    pub active_tools: BTreeMap<String, ActiveTool>,
    /// Argument text still streaming, by call id.
    pub tool_input_buffers: BTreeMap<String, String>,
    /// Tool calls waiting for approval, oldest first (several when subagents ask at once);
    /// answer each by its call id.
    pub pending_approvals: Vec<PendingApproval>,
    /// Tools paused on the user.
    pub pending_suspensions: Vec<PendingSuspension>,
    /// Subagents, by the parent's call id.
    pub active_subagents: BTreeMap<String, ActiveSubagent>,
    /// Observational memory's progress.
    pub om_progress: OmProgress,
    /// Files changed in this thread, by path.
    pub modified_files: BTreeMap<String, ModifiedFile>,
    /// The task list.
    pub tasks: Vec<TaskItem>,
    /// The task list before its last change.
    pub previous_tasks: Vec<TaskItem>,
}
