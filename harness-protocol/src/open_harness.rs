//! The Open Harness API's execution events, and the mapping from a run's harness events to
//! them: what an HTTP server streams for an execution (`event:` is the event's `type`, `id:` the
//! envelope's `seq`).
//!
//! The types follow `ExecutionEvent` of the Open Harness API v0.2.0
//! (`spec/openharness.mapi.md` in jeffrschneider/OpenHarness). [`ExecutionStream`] maps one
//! execution (one run) event by event:
//!
//! | harness event | execution events |
//! |---|---|
//! | `message_delta`, text part | `text { content }` (the delta) |
//! | `message_delta`, reasoning part | `thinking { content }` (the delta) |
//! | `tool_start` | `tool_call_start { id, name, input }`: the arguments the tool runs with, after healing and any handler that reshaped them |
//! | `tool_end` | `tool_result { id, success, output: { text } }`, then `tool_call_end { id }` |
//! | `task_updated` | `progress { percentage, step, step_number, total_steps }` from the task list: completed tasks over all, the task in progress (or the next pending one) as the step |
//! | `error` | `error { code, message, recoverable }`: `error_type` as the code (`harness_error` without one), `retryable` as recoverable |
//! | `usage_update` | nothing; kept for `done` |
//! | `agent_end`, complete | `done { usage }` |
//! | `agent_end`, error or aborted | `error` (`run_failed` with the run's error, or `aborted`), then `done { usage }` |
//! | `agent_end`, suspended | nothing: the execution waits for input and goes on |
//! | anything else | nothing (approvals and questions are the execution's `awaiting_input` state, kept by the server) |
//!
//! `done` is always the last event of an execution: the stream maps nothing after it. Its usage
//! is what the execution spent: the thread's total at the last `usage_update` less the total
//! when the execution started (given to [`ExecutionStream::new`]).
//!
//! ```
//! use harness_protocol::open_harness::{ExecutionEvent, ExecutionStream};
//! use harness_protocol::{AgentEndReason, HarnessEvent};
//!
//! let mut stream = ExecutionStream::new(Default::default());
//! let done = stream.map(&HarnessEvent::AgentEnd {
//!     run_id: "r1".into(),
//!     reason: AgentEndReason::Complete,
//!     error: None,
//! });
//! assert!(matches!(done.as_slice(), [ExecutionEvent::Done { .. }]));
//! assert_eq!(done[0].kind(), "done");
//! assert!(stream.is_done());
//! ```

use harness_tags::Usage;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::event::{AgentEndReason, HarnessEvent};
use crate::message::PartKind;
use crate::task::{TaskItem, TaskStatus};

/// One event of an execution's stream, as the Open Harness API names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecutionEvent {
    /// A chunk of the answer.
    Text {
        /// The new text.
        content: String,
    },
    /// A chunk of the model's reasoning.
    Thinking {
        /// The new text.
        content: String,
    },
    /// A tool call starts running.
    ToolCallStart {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments it runs with.
        input: Value,
    },
    /// More of a tool call's arguments (not sent by this mapping: a harness streams argument
    /// text, and the spec's delta is an object).
    ToolCallDelta {
        /// The call's id.
        id: String,
        /// The new part of the arguments.
        input_delta: Value,
    },
    /// A tool call is complete.
    ToolCallEnd {
        /// The call's id.
        id: String,
    },
    /// A tool call's result.
    ToolResult {
        /// The call's id.
        id: String,
        /// False if the tool failed.
        success: bool,
        /// The result, as `{ "text": ... }`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
    },
    /// A file the execution produced (not sent by this mapping: artifacts are listed by the
    /// server).
    Artifact {
        /// The artifact's id.
        id: String,
        /// Its name.
        name: String,
        /// Its media type.
        mime_type: String,
        /// Its size.
        size_bytes: u64,
    },
    /// How far the execution is, from its task list.
    Progress {
        /// Completed tasks over all, 0 to 100.
        percentage: f64,
        /// The task being worked on.
        step: String,
        /// Its place, from 1.
        step_number: u64,
        /// How many tasks there are.
        total_steps: u64,
    },
    /// Something failed.
    Error {
        /// A machine-readable code.
        code: String,
        /// What happened.
        message: String,
        /// Whether trying again may help.
        recoverable: bool,
    },
    /// The execution ended; always the last event.
    Done {
        /// What the execution spent.
        usage: UsageStats,
    },
}

impl ExecutionEvent {
    /// The event's `type`: the SSE `event:` name.
    pub fn kind(&self) -> &'static str {
        match self {
            ExecutionEvent::Text { .. } => "text",
            ExecutionEvent::Thinking { .. } => "thinking",
            ExecutionEvent::ToolCallStart { .. } => "tool_call_start",
            ExecutionEvent::ToolCallDelta { .. } => "tool_call_delta",
            ExecutionEvent::ToolCallEnd { .. } => "tool_call_end",
            ExecutionEvent::ToolResult { .. } => "tool_result",
            ExecutionEvent::Artifact { .. } => "artifact",
            ExecutionEvent::Progress { .. } => "progress",
            ExecutionEvent::Error { .. } => "error",
            ExecutionEvent::Done { .. } => "done",
        }
    }
}

/// Token usage as the Open Harness API reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UsageStats {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Both.
    pub total_tokens: u64,
}

/// Maps the harness events of one execution to its execution events (see the
/// [module docs](self) for the table).
#[derive(Clone, Debug)]
pub struct ExecutionStream {
    usage_before: Usage,
    usage_now: Usage,
    done: bool,
}

impl ExecutionStream {
    /// A stream for an execution that starts on a thread whose token usage is
    /// `usage_before`.
    pub fn new(usage_before: Usage) -> Self {
        ExecutionStream {
            usage_before,
            usage_now: usage_before,
            done: false,
        }
    }

    /// True once `done` was mapped: the execution is over.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The execution events `event` maps to, in order (often none).
    pub fn map(&mut self, event: &HarnessEvent) -> Vec<ExecutionEvent> {
        if self.done {
            return Vec::new();
        }
        match event {
            HarnessEvent::MessageDelta { kind, delta, .. } => {
                let content = delta.clone();
                vec![match kind {
                    PartKind::Text => ExecutionEvent::Text { content },
                    PartKind::Thinking => ExecutionEvent::Thinking { content },
                }]
            }
            HarnessEvent::ToolStart {
                tool_call_id,
                tool_name,
                args,
                ..
            } => vec![ExecutionEvent::ToolCallStart {
                id: tool_call_id.clone(),
                name: tool_name.clone(),
                input: args.clone(),
            }],
            HarnessEvent::ToolEnd {
                tool_call_id,
                result,
                is_error,
            } => vec![
                ExecutionEvent::ToolResult {
                    id: tool_call_id.clone(),
                    success: !is_error,
                    output: Some(json!({ "text": result })),
                },
                ExecutionEvent::ToolCallEnd {
                    id: tool_call_id.clone(),
                },
            ],
            HarnessEvent::TaskUpdated { tasks } => progress(tasks).into_iter().collect(),
            HarnessEvent::Error {
                error,
                error_type,
                retryable,
                ..
            } => vec![ExecutionEvent::Error {
                code: error_type
                    .clone()
                    .unwrap_or_else(|| "harness_error".to_owned()),
                message: error.clone(),
                recoverable: retryable.unwrap_or(false),
            }],
            HarnessEvent::UsageUpdate { usage } => {
                self.usage_now = *usage;
                Vec::new()
            }
            HarnessEvent::AgentEnd { reason, error, .. } => self.end(*reason, error.as_deref()),
            _ => Vec::new(),
        }
    }

    fn end(&mut self, reason: AgentEndReason, error: Option<&str>) -> Vec<ExecutionEvent> {
        let failure = match reason {
            AgentEndReason::Suspended => return Vec::new(),
            AgentEndReason::Complete => None,
            AgentEndReason::Error => Some(ExecutionEvent::Error {
                code: "run_failed".to_owned(),
                message: error.unwrap_or("the run failed").to_owned(),
                recoverable: false,
            }),
            AgentEndReason::Aborted => Some(ExecutionEvent::Error {
                code: "aborted".to_owned(),
                message: error.unwrap_or("the run was aborted").to_owned(),
                recoverable: false,
            }),
        };
        self.done = true;
        let input_tokens = self
            .usage_now
            .input_tokens
            .saturating_sub(self.usage_before.input_tokens);
        let output_tokens = self
            .usage_now
            .output_tokens
            .saturating_sub(self.usage_before.output_tokens);
        let done = ExecutionEvent::Done {
            usage: UsageStats {
                input_tokens,
                output_tokens,
                total_tokens: input_tokens + output_tokens,
            },
        };
        failure.into_iter().chain(Some(done)).collect()
    }
}

/// `progress` from a task list: none for an empty list.
fn progress(tasks: &[TaskItem]) -> Option<ExecutionEvent> {
    let total = tasks.len();
    if total == 0 {
        return None;
    }
    let completed = tasks
        .iter()
        .filter(|task| task.status == TaskStatus::Completed)
        .count();
    let current = tasks
        .iter()
        .position(|task| task.status == TaskStatus::InProgress)
        .or_else(|| {
            tasks
                .iter()
                .position(|task| task.status == TaskStatus::Pending)
        });
    let (step, step_number) = match current {
        Some(at) => {
            let task = &tasks[at];
            (
                task.active_form
                    .clone()
                    .unwrap_or_else(|| task.content.clone()),
                at + 1,
            )
        }
        None => ("done".to_owned(), total),
    };
    Some(ExecutionEvent::Progress {
        percentage: (completed as f64 * 100.0 / total as f64 * 10.0).round() / 10.0,
        step,
        step_number: step_number as u64,
        total_steps: total as u64,
    })
}
