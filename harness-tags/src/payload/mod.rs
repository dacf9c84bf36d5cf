//! The payload types of the standard catalog. JSON field names are camelCase.

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod mcp;
mod stream;

pub use mcp::{McpResourceInfo, McpToolAnnotations, McpToolInfo, McpToolList};
pub use stream::{DeltaKind, OutputDelta, OutputStream, TextDelta};

/// A message of the conversation the kernel keeps.
///
/// ```
/// use harness_tags::KernelMessage;
///
/// let json = r#"{"role":"tool_result","toolCallId":"call_1","toolName":"read_file","content":"hi","isError":true}"#;
/// let msg: KernelMessage = serde_json::from_str(json).unwrap();
/// assert_eq!(msg.content(), "hi");
/// assert_eq!(serde_json::to_string(&msg).unwrap(), json);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "role",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum KernelMessage {
    /// What the model said, with the tool calls it made.
    Assistant {
        /// The text of the message.
        content: String,
        /// The tool calls the model made in this message.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The model's reasoning, kept so that providers that require it back (Anthropic's
        /// signed thinking blocks during tool use) receive it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<Thinking>,
    },
    /// A tool's result, as the model sees it.
    ToolResult {
        /// The call this result answers.
        tool_call_id: String,
        /// The tool that ran.
        tool_name: String,
        /// The result text.
        content: String,
        /// True if the tool failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// A user message.
    User {
        /// The text of the message.
        content: String,
    },
    /// A system message.
    System {
        /// The text of the message.
        content: String,
    },
}

impl KernelMessage {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        KernelMessage::User {
            content: content.into(),
        }
    }

    /// An assistant message without tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        KernelMessage::Assistant {
            content: content.into(),
            tool_calls: Vec::new(),
            thinking: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        KernelMessage::System {
            content: content.into(),
        }
    }

    /// A tool result.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        KernelMessage::ToolResult {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            content: content.into(),
            is_error,
        }
    }

    /// The message's text.
    pub fn content(&self) -> &str {
        match self {
            KernelMessage::Assistant { content, .. }
            | KernelMessage::ToolResult { content, .. }
            | KernelMessage::User { content }
            | KernelMessage::System { content } => content,
        }
    }

    /// Mutable access to the message's text.
    pub fn content_mut(&mut self) -> &mut String {
        match self {
            KernelMessage::Assistant { content, .. }
            | KernelMessage::ToolResult { content, .. }
            | KernelMessage::User { content }
            | KernelMessage::System { content } => content,
        }
    }

    /// The same message with other text.
    pub fn with_content(&self, content: impl Into<String>) -> Self {
        let mut copy = self.clone();
        *copy.content_mut() = content.into();
        copy
    }
}

/// A model's reasoning for one response.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Thinking {
    /// The reasoning text (may be empty when the provider only returns a signature).
    pub text: String,
    /// The provider's signature over the reasoning, to send back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call's id, unique within the run.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments: a JSON object. Before healing, a string here holds argument text the
    /// model produced that did not parse as JSON.
    pub arguments: Value,
}

/// A tool as it is offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's input, shared: a request per model call costs no copy of it.
    pub input_schema: Arc<Value>,
    /// The tool's permission category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<ToolCategory>,
}

/// Token usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens (including cached ones).
    pub input_tokens: u64,
    /// Completion tokens (including reasoning).
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Completion tokens spent on reasoning.
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

impl std::ops::AddAssign<&Usage> for Usage {
    fn add_assign(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// What is sent to a model provider.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    /// The model, `provider/name`.
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation, shared: the kernel hands its own to each request without copying it.
    /// A handler that changes it copies it first (`Arc::make_mut`), or builds a new one.
    pub messages: Arc<Vec<KernelMessage>>,
    /// The tools offered, shared: the kernel offers its tool list without copying it.
    #[serde(default)]
    pub tools: Arc<[ToolSpec]>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The most tokens the model may produce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

impl ModelRequest {
    /// What the model is told of each tool call it made: the contents of the tool-result
    /// messages, oldest first.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use harness_tags::{KernelMessage, ModelRequest};
    ///
    /// let request = ModelRequest {
    ///     messages: Arc::new(vec![
    ///         KernelMessage::user("read it"),
    ///         KernelMessage::tool_result("c1", "read_file", "hello", false),
    ///     ]),
    ///     ..ModelRequest::default()
    /// };
    /// assert_eq!(request.tool_results(), ["hello"]);
    /// ```
    pub fn tool_results(&self) -> Vec<&str> {
        self.messages
            .iter()
            .filter_map(|message| match message {
                KernelMessage::ToolResult { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Why the model stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its answer.
    #[default]
    Stop,
    /// The model wants tools to run.
    ToolCalls,
    /// The model hit its output token limit.
    Length,
    /// The provider filtered the output.
    ContentFilter,
    /// The model refused.
    Refusal,
}

/// A model's full response to one request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// The text the model produced.
    pub content: String,
    /// The model's reasoning, where the provider returns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// The tool calls the model made.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Tokens used by this call.
    pub usage: Usage,
}

/// A permission decision for one tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateDecision {
    /// Run the tool.
    Allow,
    /// Do not run the tool; the model is told why.
    Deny,
    /// Ask the user first.
    Ask,
}

/// The verdict of the permission gate for one tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateVerdict {
    /// The decision.
    pub decision: GateDecision,
    /// Why, for the model and the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A hard deny is absolute: no later handler can loosen it and the kernel never runs the tool.
    #[serde(default)]
    pub hard_deny: bool,
}

impl GateVerdict {
    /// A verdict that allows the call.
    pub fn allow() -> Self {
        GateVerdict {
            decision: GateDecision::Allow,
            reason: None,
            hard_deny: false,
        }
    }

    /// A verdict that denies the call, for this reason.
    pub fn deny(reason: impl Into<String>) -> Self {
        GateVerdict {
            decision: GateDecision::Deny,
            reason: Some(reason.into()),
            hard_deny: false,
        }
    }

    /// An absolute deny: no later handler can loosen it.
    pub fn hard_deny(reason: impl Into<String>) -> Self {
        GateVerdict {
            hard_deny: true,
            ..GateVerdict::deny(reason)
        }
    }

    /// A verdict that asks the user first.
    pub fn ask(reason: impl Into<String>) -> Self {
        GateVerdict {
            decision: GateDecision::Ask,
            reason: Some(reason.into()),
            hard_deny: false,
        }
    }

    /// The invariant of `tool.gate-result`: once a verdict is a hard deny, it stays exactly
    /// that verdict; a verdict that sets `hard_deny` is a deny.
    pub fn constrain(previous: &GateVerdict, next: GateVerdict) -> GateVerdict {
        if previous.hard_deny {
            previous.clone()
        } else if next.hard_deny {
            GateVerdict {
                decision: GateDecision::Deny,
                ..next
            }
        } else {
            next
        }
    }
}

/// What a healing step changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum HealingKind {
    /// The tool name was matched to a known tool.
    ToolName,
    /// A single wrapper key around the arguments was removed.
    UnwrapWrapper,
    /// A near-miss argument name was renamed.
    RenameArgument,
    /// A lone missing required parameter was filled from a lone unknown one.
    RemapMissingParameter,
    /// Malformed JSON argument text was repaired.
    JsonRepair,
    /// An argument was coerced to the type the schema asks for.
    TypeCoercion,
}

/// One change healing made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealingStep {
    /// What kind of change.
    pub kind: HealingKind,
    /// What changed, in words.
    pub detail: String,
}

/// Everything healing did to one tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealingReport {
    /// The call's id.
    pub call_id: String,
    /// The name the model used.
    pub original_name: String,
    /// The arguments the model sent (a string if they did not parse).
    pub original_arguments: Value,
    /// The repaired tool name.
    pub tool_name: String,
    /// The repaired arguments.
    pub arguments: Value,
    /// The changes, in order.
    pub steps: Vec<HealingStep>,
}

/// A step recorded by the kernel or by memory.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservationStep {
    /// The step's kind, e.g. `tool-result` or `observation`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The step's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Anything else worth recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// The context observational memory assembled for a model call: reflections, then
/// observations, then the raw messages not yet observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryContext {
    /// Reflections: the most compressed layer.
    pub reflections: Vec<String>,
    /// Observations not yet reflected.
    pub observations: Vec<String>,
    /// Recent messages, raw.
    pub messages: Vec<KernelMessage>,
}

/// A run begins.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStart {
    /// The run's id.
    pub run_id: String,
    /// The user's input that started the run.
    pub input: String,
    /// The model, `provider/name`.
    pub model_id: String,
    /// The step limit.
    pub max_steps: u32,
}

/// Why the agent entered a failure state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FailureReason {
    /// A tool failed.
    ToolError,
    /// The model refused.
    LlmRefusal,
    /// The verifier rejected the answer.
    VerifierRejection,
    /// The model call failed.
    ModelError,
    /// Observational memory failed.
    OmFailure,
}

/// The error a fail-closed handler returns to end the run as a failure of this reason: the
/// kernel emits `lifecycle.failure` with it before the run ends (observational memory fails
/// a run with [`FailureReason::OmFailure`] this way).
///
/// ```
/// use harness_tags::{FailureReason, ModelCtx, ModelRequest, RunFailure, on};
/// use harness_tags::tags::ModelRequestTag;
///
/// let guard = on(ModelRequestTag, |request: &ModelRequest, _: &ModelCtx| {
///     if request.messages.len() > 10_000 {
///         return Err(RunFailure::new(FailureReason::OmFailure, "memory is out of date"));
///     }
///     Ok(request.clone())
/// })
/// .fail_closed();
/// # let _ = guard;
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RunFailure {
    /// Why the run fails.
    pub reason: FailureReason,
    /// What went wrong, for the user.
    pub message: String,
}

impl RunFailure {
    /// A failure of this reason.
    pub fn new(reason: FailureReason, message: impl Into<String>) -> Self {
        RunFailure {
            reason,
            message: message.into(),
        }
    }
}

/// The agent entered a failure state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleFailure {
    /// Why.
    pub reason: FailureReason,
    /// The error's message.
    pub error_message: String,
    /// Which attempt failed (1-based).
    pub attempt_number: u32,
    /// Consecutive failures, this one included.
    pub failure_streak: u32,
    /// The strategy that was active.
    pub current_strategy: String,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunOutcome {
    /// The model gave its final answer.
    #[default]
    Complete,
    /// The step limit was reached.
    MaxSteps,
    /// The run was aborted.
    Aborted,
    /// The run failed.
    Error,
    /// The run paused waiting for the user.
    Suspended,
}

/// A run ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunEnd {
    /// The run's id.
    pub run_id: String,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Model calls made.
    pub steps: u32,
    /// Tokens used.
    pub usage: Usage,
    /// Wall-clock duration in milliseconds.
    pub duration_ms: u64,
    /// The final answer, if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// The error, if the run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the strategy evaluator recommends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StrategyAction {
    /// Keep going with the current strategy.
    Continue,
    /// Switch to the next untried strategy.
    Switch,
    /// Stop trying: ask the user or end the run.
    Escalate,
}

/// The strategy evaluator's score of the current strategy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyEvaluation {
    /// The strategy being scored.
    pub current_strategy: String,
    /// 1.0 is healthy, 0.0 is hopeless.
    pub score: f64,
    /// Consecutive failures.
    pub failure_streak: u32,
    /// What to do next; the kernel acts on the reshaped value.
    pub recommended_action: StrategyAction,
    /// Every configured strategy.
    pub available_strategies: Vec<String>,
}

/// Why the kernel wants to end the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TerminateReason {
    /// The model answered without calling tools.
    FinalAnswer,
    /// The step limit was reached.
    MaxSteps,
    /// The `stop_when` predicate said so.
    StopWhen,
}

/// The kernel is about to end the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminateDecision {
    /// Why.
    pub reason: TerminateReason,
    /// The final answer, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// A veto: set it to keep the run going with this message for the model (bounded by the
    /// kernel's veto limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_with: Option<String>,
}

/// What a subagent returned to its parent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubagentResult {
    /// The subagent's type.
    pub agent_type: String,
    /// The task it was given.
    pub task: String,
    /// The text the parent sees.
    pub result: String,
    /// True if the subagent failed.
    pub is_error: bool,
    /// Wall-clock duration in milliseconds.
    pub duration_ms: u64,
}

/// What a UI is shown for a tool result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisplayToolResult {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The text shown: at first what the model sees (after `message.tool-result` or
    /// `message.tool-error` handlers), so that nothing the model was spared reaches a screen
    /// unless a handler here decides so.
    pub content: String,
    /// The tool's own output, before any handler. A handler with its own policy for screens
    /// (masking where the model gets pseudonyms, say) derives `content` from it.
    #[serde(default)]
    pub tool_output: String,
    /// True if the tool failed.
    pub is_error: bool,
}

/// A thread was cloned or deleted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadChange {
    /// The thread created by a clone, or the thread deleted.
    pub thread_id: String,
    /// For a clone: the thread it was cloned from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_thread_id: Option<String>,
    /// For a clone: source message id -> new message id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub message_id_map: BTreeMap<String, String>,
}

/// The permission category of a tool.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ToolCategory {
    /// Reads files or data.
    Read,
    /// Changes files or data.
    Edit,
    /// Runs commands.
    Execute,
    /// Comes from an MCP server.
    Mcp,
    /// Anything else.
    Other,
}

impl ToolCategory {
    /// Every category, in declaration order.
    pub const ALL: [ToolCategory; 5] = [
        ToolCategory::Read,
        ToolCategory::Edit,
        ToolCategory::Execute,
        ToolCategory::Mcp,
        ToolCategory::Other,
    ];

    /// The category's name as it appears in JSON and configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCategory::Read => "read",
            ToolCategory::Edit => "edit",
            ToolCategory::Execute => "execute",
            ToolCategory::Mcp => "mcp",
            ToolCategory::Other => "other",
        }
    }
}
