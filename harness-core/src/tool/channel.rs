//! The back-channel from a running tool (or the kernel) to the harness that hosts it.
//!
//! A tool that needs a human (a question, a plan approval, an access request) suspends
//! through the channel; the harness shows it to the user and resumes the tool with the answer.
//! The kernel asks the channel for tool approvals and strategy escalations. The channel may be
//! absent (a bare kernel, a headless run): every caller has a documented fallback.

use async_trait::async_trait;
use harness_tags::{GateVerdict, ToolCall, ToolCategory};
use serde_json::Value;

/// A tool asks to pause until the user answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Suspension {
    /// The suspended call.
    pub call_id: String,
    /// The suspended tool.
    pub tool_name: String,
    /// What the UI shows (the question, the plan, the access request).
    pub payload: Value,
    /// JSON Schema of the answer the tool expects, if it constrains it.
    pub resume_schema: Option<Value>,
}

/// Why a suspension ended without an answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SuspendError {
    /// The run was aborted while waiting.
    #[error("the run was aborted while waiting for the user")]
    Aborted,
    /// No user interface can answer (a headless run).
    #[error("no user interface is attached to answer")]
    Unavailable,
}

/// Progress of a running tool, for user interfaces.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolProgress {
    /// A partial result.
    Partial(Value),
    /// Output of a command the tool runs.
    Shell {
        /// The output text.
        output: String,
        /// Which stream it came from.
        stream: ShellStream,
    },
}

/// A command's output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShellStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// The permission gate answered "ask": the user decides whether the call runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalRequest {
    /// The call waiting for approval.
    pub call: ToolCall,
    /// The tool's category, if known.
    pub category: Option<ToolCategory>,
    /// The gate's verdict, with its reason.
    pub verdict: GateVerdict,
}

/// The user's answer to an approval request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run the call.
    Approve,
    /// Do not run it; the model is told why.
    Decline {
        /// What the model is told.
        reason: String,
    },
    /// Run it, and every later call of this tool in the session.
    AlwaysAllowTool,
    /// Run it, and every later call of a tool of this category in the session.
    AlwaysAllowCategory,
}

impl ApprovalAnswer {
    /// True if the call may run.
    pub fn approves(&self) -> bool {
        !matches!(self, ApprovalAnswer::Decline { .. })
    }
}

/// The harness side of a running kernel.
#[async_trait]
pub trait HarnessChannel: Send + Sync + 'static {
    /// Pauses the tool until the user answers. Without a UI, return
    /// [`SuspendError::Unavailable`]; the built-in tools then answer with plain text.
    async fn suspend(&self, request: Suspension) -> Result<Value, SuspendError>;

    /// Reports a running tool's progress.
    fn progress(&self, call_id: &str, progress: ToolProgress);

    /// Asks the user whether a call may run.
    async fn approve(&self, request: ApprovalRequest) -> ApprovalAnswer;

    /// The strategy evaluator escalates: asks the user how to continue. `Some` continues the
    /// run with that message to the model; `None` ends the run as failed.
    async fn escalate(&self, reason: &str) -> Option<String>;
}
