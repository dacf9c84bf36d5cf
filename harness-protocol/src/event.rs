//! The harness's events: one [`HarnessEvent`] enum (JSON tagged by `type`, fields in
//! camelCase) that every user interface, log and bridge consumes, and the shapes its variants
//! carry: messages and their parts, thread info, observational memory's progress.
//!
//! ```
//! use harness_protocol::HarnessEvent;
//!
//! let event = HarnessEvent::Info { message: "hello".into() };
//! assert_eq!(event.kind(), "info");
//! assert_eq!(serde_json::to_value(&event)?["type"], "info");
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::sync::Arc;

/// A command's output stream (the type `tool.output-delta` handlers see).
pub use harness_tags::OutputStream;
use harness_tags::{ToolCategory, Usage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::display::DisplayState;
use crate::memory::{OmProgress, OmRole, OmTrigger};
use crate::message::{HarnessMessage, PartKind};
use crate::task::TaskItem;

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentEndReason {
    /// The agent finished.
    Complete,
    /// The run was aborted.
    Aborted,
    /// The run failed.
    Error,
    /// The run is paused on a tool waiting for the user.
    Suspended,
}

/// What a model change applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelScope {
    /// Every thread.
    Global,
    /// This thread.
    Thread,
    /// This mode in this thread.
    Mode,
}

/// A thread as user interfaces see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadInfo {
    /// The thread's id.
    pub id: String,
    /// The resource it belongs to.
    pub resource_id: String,
    /// Its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Creation time, Unix milliseconds.
    pub created_at: i64,
    /// Last change, Unix milliseconds.
    pub updated_at: i64,
}

/// Everything that happens in a harness, for user interfaces and logs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum HarnessEvent {
    /// The active mode changed.
    ModeChanged {
        /// The new mode.
        mode_id: String,
        /// The mode before.
        previous_mode_id: Option<String>,
    },
    /// The active model changed.
    ModelChanged {
        /// The new model, `provider/name`.
        model_id: String,
        /// What the change applies to.
        scope: ModelScope,
        /// The mode, for a mode-scoped change.
        mode_id: Option<String>,
    },
    /// The active thread changed.
    ThreadChanged {
        /// The new thread.
        thread_id: String,
        /// The thread before.
        previous_thread_id: Option<String>,
    },
    /// A thread was created.
    ThreadCreated {
        /// The thread.
        thread: ThreadInfo,
    },
    /// A thread was deleted.
    ThreadDeleted {
        /// The thread.
        thread_id: String,
    },
    /// The application state changed.
    StateChanged {
        /// The whole state after the change.
        state: Value,
        /// The top-level keys that changed.
        changed_keys: Vec<String>,
    },
    /// A run started.
    AgentStart {
        /// The run's id.
        run_id: String,
    },
    /// A run ended.
    AgentEnd {
        /// The run's id.
        run_id: String,
        /// Why.
        reason: AgentEndReason,
        /// The error, for a failed run.
        error: Option<String>,
    },
    /// A message started (user, assistant or system).
    MessageStart {
        /// The message so far (shared, so the display state can hold it without a copy).
        message: Arc<HarnessMessage>,
    },
    /// A streaming message grew; the whole message so far. The harness streams with
    /// [`HarnessEvent::MessageDelta`] instead; this one stays for emitters that replace the
    /// message whole.
    MessageUpdate {
        /// The message so far.
        message: Arc<HarnessMessage>,
    },
    /// A streaming message grew by `delta`, at the end of its part number `part` (a new part
    /// when `part` is the number of parts so far). Sent between the message's `message_start`
    /// and `message_end`, so that streaming an answer costs what each delta adds, not the
    /// message so far.
    MessageDelta {
        /// The message's id (shared: a delta costs no copy of it).
        message_id: Arc<str>,
        /// The index of the part in the message's content.
        part: usize,
        /// Answer text or reasoning.
        kind: PartKind,
        /// The new text.
        delta: String,
    },
    /// A message is complete.
    MessageEnd {
        /// The message.
        message: Arc<HarnessMessage>,
    },
    /// A tool call started running.
    ToolStart {
        /// The call's id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The arguments.
        args: Value,
        /// The tool's permission category, if known.
        category: Option<ToolCategory>,
    },
    /// A tool call waits for the user's approval.
    ToolApprovalRequired {
        /// The call's id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The arguments.
        args: Value,
        /// The tool's category, if known.
        category: Option<ToolCategory>,
        /// Why approval is needed.
        reason: Option<String>,
    },
    /// The user answered a tool call's approval (the call no longer waits for it).
    ToolApprovalAnswered {
        /// The call's id.
        tool_call_id: String,
        /// True if the call may run (approved, or allowed for the session).
        approved: bool,
    },
    /// A tool paused until the user answers (a question, a plan, an access request).
    ToolSuspended {
        /// The call's id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The arguments.
        args: Value,
        /// What the UI shows.
        suspend_payload: Value,
        /// JSON Schema of the expected answer.
        resume_schema: Option<Value>,
    },
    /// A running tool reported partial progress.
    ToolUpdate {
        /// The call's id.
        tool_call_id: String,
        /// The partial result.
        partial_result: Value,
    },
    /// A tool call finished.
    ToolEnd {
        /// The call's id.
        tool_call_id: String,
        /// The result shown (after display transforms).
        result: String,
        /// True if the tool failed.
        is_error: bool,
    },
    /// The model began a tool call's arguments.
    ToolInputStart {
        /// The call's id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
    },
    /// More of a tool call's arguments.
    ToolInputDelta {
        /// The call's id.
        tool_call_id: String,
        /// The new argument text.
        args_text_delta: String,
    },
    /// A tool call's arguments are complete.
    ToolInputEnd {
        /// The call's id.
        tool_call_id: String,
    },
    /// Output of a command a tool runs.
    ShellOutput {
        /// The call's id.
        tool_call_id: String,
        /// The output.
        output: String,
        /// Which stream.
        stream: OutputStream,
    },
    /// Token usage changed.
    UsageUpdate {
        /// The thread's total.
        usage: Usage,
    },
    /// Something worth telling the user.
    Info {
        /// The message.
        message: String,
    },
    /// Something failed.
    Error {
        /// What.
        error: String,
        /// A machine-readable kind, e.g. `handler_failure`.
        error_type: Option<String>,
        /// Whether trying again may help.
        retryable: Option<bool>,
        /// How long to wait before trying again, in milliseconds.
        retry_delay_ms: Option<u64>,
    },
    /// The follow-up queue changed: a follow-up was queued behind the running run, or the queue
    /// was drained or cleared. The session sends the whole queue so that the display state
    /// (here or in another process) can be rebuilt from events alone.
    FollowUpQueued {
        /// How many follow-ups are queued now.
        count: usize,
        /// Their texts, oldest first (may be left empty by senders that only know the count).
        #[serde(default)]
        follow_ups: Vec<String>,
    },
    /// A subagent started.
    SubagentStart {
        /// The parent's `subagent` call.
        tool_call_id: String,
        /// The subagent's type.
        agent_type: String,
        /// Its task.
        task: String,
        /// Its model.
        model_id: String,
        /// True if it runs on a fork of the parent thread.
        forked: bool,
    },
    /// A subagent streamed text.
    SubagentTextDelta {
        /// The parent's `subagent` call.
        tool_call_id: String,
        /// The subagent's type.
        agent_type: String,
        /// The new text.
        text_delta: String,
    },
    /// A subagent started a tool call.
    SubagentToolStart {
        /// The parent's `subagent` call.
        tool_call_id: String,
        /// The subagent's type.
        agent_type: String,
        /// The tool.
        sub_tool_name: String,
        /// The arguments.
        sub_tool_args: Value,
    },
    /// A subagent's tool call finished.
    SubagentToolEnd {
        /// The parent's `subagent` call.
        tool_call_id: String,
        /// The subagent's type.
        agent_type: String,
        /// The tool.
        sub_tool_name: String,
        /// The result.
        sub_tool_result: String,
        /// True if it failed.
        is_error: bool,
    },
    /// A subagent finished.
    SubagentEnd {
        /// The parent's `subagent` call.
        tool_call_id: String,
        /// The subagent's type.
        agent_type: String,
        /// What it returned.
        result: String,
        /// True if it failed.
        is_error: bool,
        /// How long it ran.
        duration_ms: u64,
    },
    /// The task list changed.
    TaskUpdated {
        /// The whole list.
        tasks: Vec<TaskItem>,
    },
    /// A new display-state snapshot is available (sent by the display scheduler).
    DisplayStateChanged {
        /// The snapshot.
        display_state: Arc<DisplayState>,
    },
    /// Observational memory's progress, reconstructed (e.g. after loading a thread).
    OmStatus {
        /// The progress.
        progress: OmProgress,
    },
    /// The observer started.
    OmObservationStart {
        /// Tokens about to be observed.
        pending_tokens: u64,
    },
    /// The observer finished.
    OmObservationEnd {
        /// Messages observed.
        observed_messages: u32,
        /// Tokens in the active observations now.
        observation_tokens: u64,
        /// How long it took.
        duration_ms: u64,
    },
    /// The observer failed.
    OmObservationFailed {
        /// Why.
        error: String,
        /// Which attempt failed.
        attempt: u32,
    },
    /// The reflector started.
    OmReflectionStart {
        /// Tokens in the observations being reflected.
        observation_tokens: u64,
    },
    /// The reflector finished.
    OmReflectionEnd {
        /// Tokens in the observations after reflection.
        observation_tokens: u64,
        /// How many reflections have run.
        generation_count: u32,
        /// How long it took.
        duration_ms: u64,
    },
    /// The reflector failed.
    OmReflectionFailed {
        /// Why.
        error: String,
        /// Which attempt failed.
        attempt: u32,
    },
    /// Observations started buffering ahead of the threshold.
    OmBufferingStart {
        /// Tokens being buffered.
        pending_tokens: u64,
    },
    /// A buffering pass ended: a chunk is ready, or (`tokens` 0) there was nothing it could
    /// cover yet.
    OmBufferingEnd {
        /// Chunks buffered now.
        buffered: u32,
        /// Tokens the new chunk covers; 0 when the pass made none.
        tokens: u64,
    },
    /// Buffering failed.
    OmBufferingFailed {
        /// Why.
        error: String,
    },
    /// Buffered observations replaced the messages they cover.
    OmActivation {
        /// What triggered it.
        triggered_by: OmTrigger,
        /// Tokens of raw messages the observations replaced.
        activated_tokens: u64,
    },
    /// An observational-memory role's model changed.
    OmModelChanged {
        /// Which role.
        role: OmRole,
        /// The new model.
        model_id: String,
    },
}

impl HarnessEvent {
    /// The event's `type` as it appears in JSON, e.g. `tool_end`.
    pub fn kind(&self) -> &'static str {
        match self {
            HarnessEvent::ModeChanged { .. } => "mode_changed",
            HarnessEvent::ModelChanged { .. } => "model_changed",
            HarnessEvent::ThreadChanged { .. } => "thread_changed",
            HarnessEvent::ThreadCreated { .. } => "thread_created",
            HarnessEvent::ThreadDeleted { .. } => "thread_deleted",
            HarnessEvent::StateChanged { .. } => "state_changed",
            HarnessEvent::AgentStart { .. } => "agent_start",
            HarnessEvent::AgentEnd { .. } => "agent_end",
            HarnessEvent::MessageStart { .. } => "message_start",
            HarnessEvent::MessageUpdate { .. } => "message_update",
            HarnessEvent::MessageDelta { .. } => "message_delta",
            HarnessEvent::MessageEnd { .. } => "message_end",
            HarnessEvent::ToolStart { .. } => "tool_start",
            HarnessEvent::ToolApprovalRequired { .. } => "tool_approval_required",
            HarnessEvent::ToolApprovalAnswered { .. } => "tool_approval_answered",
            HarnessEvent::ToolSuspended { .. } => "tool_suspended",
            HarnessEvent::ToolUpdate { .. } => "tool_update",
            HarnessEvent::ToolEnd { .. } => "tool_end",
            HarnessEvent::ToolInputStart { .. } => "tool_input_start",
            HarnessEvent::ToolInputDelta { .. } => "tool_input_delta",
            HarnessEvent::ToolInputEnd { .. } => "tool_input_end",
            HarnessEvent::ShellOutput { .. } => "shell_output",
            HarnessEvent::UsageUpdate { .. } => "usage_update",
            HarnessEvent::Info { .. } => "info",
            HarnessEvent::Error { .. } => "error",
            HarnessEvent::FollowUpQueued { .. } => "follow_up_queued",
            HarnessEvent::SubagentStart { .. } => "subagent_start",
            HarnessEvent::SubagentTextDelta { .. } => "subagent_text_delta",
            HarnessEvent::SubagentToolStart { .. } => "subagent_tool_start",
            HarnessEvent::SubagentToolEnd { .. } => "subagent_tool_end",
            HarnessEvent::SubagentEnd { .. } => "subagent_end",
            HarnessEvent::TaskUpdated { .. } => "task_updated",
            HarnessEvent::DisplayStateChanged { .. } => "display_state_changed",
            HarnessEvent::OmStatus { .. } => "om_status",
            HarnessEvent::OmObservationStart { .. } => "om_observation_start",
            HarnessEvent::OmObservationEnd { .. } => "om_observation_end",
            HarnessEvent::OmObservationFailed { .. } => "om_observation_failed",
            HarnessEvent::OmReflectionStart { .. } => "om_reflection_start",
            HarnessEvent::OmReflectionEnd { .. } => "om_reflection_end",
            HarnessEvent::OmReflectionFailed { .. } => "om_reflection_failed",
            HarnessEvent::OmBufferingStart { .. } => "om_buffering_start",
            HarnessEvent::OmBufferingEnd { .. } => "om_buffering_end",
            HarnessEvent::OmBufferingFailed { .. } => "om_buffering_failed",
            HarnessEvent::OmActivation { .. } => "om_activation",
            HarnessEvent::OmModelChanged { .. } => "om_model_changed",
        }
    }
}
