//! Request and response bodies, as the spec names them. Fields marked *extension* are this
//! server's additions (the README lists them).

use harness_protocol::open_harness::UsageStats;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;
use crate::host::{AwaitingInput, ExecutionStatus, ToolCallRecord};

/// `limit` (1-100, default 20) and `offset` (default 0).
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct Pagination {
    /// How many to return, 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub(crate) limit: Option<i64>,
    /// How many to skip (default 0).
    #[param(minimum = 0)]
    pub(crate) offset: Option<i64>,
}

/// The schema of a spec field this server does not take: only `null` (or leaving it out) is
/// accepted, so that the document says what the server does.
pub(crate) fn null_only() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::Null)
        .description(Some(
            "Not supported by this server: leave it out or send null",
        ))
        .build()
}

/// A session's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SessionState {
    /// Takes messages.
    Active,
    /// Paused by a client.
    Paused,
    /// Ended by a client (its history is kept).
    Ended,
}

/// A state a client may set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SettableState {
    /// Takes messages.
    Active,
    /// Paused.
    Paused,
}

impl Pagination {
    /// `(limit, offset)`, or `400` naming the field out of range.
    pub(crate) fn checked(self) -> Result<(usize, usize), ApiError> {
        let limit = self.limit.unwrap_or(20);
        if !(1..=100).contains(&limit) {
            return Err(ApiError::invalid_field(
                "limit",
                format!("limit must be between 1 and 100, not {limit}"),
            ));
        }
        let offset = self.offset.unwrap_or(0);
        let offset = usize::try_from(offset).map_err(|_| {
            ApiError::invalid_field("offset", format!("offset must be 0 or more, not {offset}"))
        })?;
        Ok((limit as usize, offset))
    }
}

/// A page of a list.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct Page<T> {
    /// The items.
    pub(crate) data: Vec<T>,
    /// How many there are in all.
    pub(crate) total: usize,
    /// The page size asked for.
    pub(crate) limit: usize,
    /// Where the page starts.
    pub(crate) offset: usize,
    /// True if more follow.
    pub(crate) has_more: bool,
}

impl<T> Page<T> {
    /// The page of `items` at `offset`.
    pub(crate) fn of(items: Vec<T>, (limit, offset): (usize, usize)) -> Self {
        let total = items.len();
        let data: Vec<T> = items.into_iter().skip(offset).take(limit).collect();
        let has_more = offset.saturating_add(data.len()) < total;
        Page {
            data,
            total,
            limit,
            offset,
            has_more,
        }
    }
}

/// Checks a text field's length in characters.
pub(crate) fn check_length(field: &str, text: &str, max: usize) -> Result<(), ApiError> {
    let length = text.chars().count();
    if length == 0 || length > max {
        return Err(ApiError::invalid_field(
            field,
            format!("{field} must be 1 to {max} characters, not {length}"),
        ));
    }
    Ok(())
}

/// The time a `since` query parameter names (RFC 3339), or `400` naming it.
pub(crate) fn since(text: Option<&str>) -> Result<Option<i64>, ApiError> {
    text.map(|text| {
        harness_tags::util::parse_rfc3339(text).ok_or_else(|| {
            ApiError::invalid_field("since", format!("`{text}` is not an RFC 3339 date-time"))
        })
    })
    .transpose()
}

/// A whole number between `min` and `max` from a JSON number (`3.0` is the integer 3: JSON
/// has one number type), or `400` naming `field`.
pub(crate) fn whole(field: &str, value: f64, min: u64, max: u64) -> Result<u64, ApiError> {
    if value.fract() == 0.0 && value >= min as f64 && value <= max as f64 {
        // In range and integral: the conversion is exact.
        return Ok(value as u64);
    }
    Err(ApiError::invalid_field(
        field,
        format!("{field} is a whole number from {min} to {max}"),
    ))
}

/// A session: a thread of the harness.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) harness_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    pub(crate) status: SessionState,
    pub(crate) message_count: u64,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

/// `{ session }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct SessionResponse {
    pub(crate) session: Session,
}

/// Creates a session.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct CreateSessionRequest {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100)]
    pub(crate) name: Option<String>,
    /// The agent the session runs as (`404` if unknown).
    pub(crate) agent_id: Option<String>,
    /// Skills are not provided: only an empty list.
    #[schema(max_items = 0)]
    pub(crate) skills: Option<Vec<String>>,
    /// Not supported per session: the harness's instructions apply.
    #[schema(schema_with = null_only)]
    pub(crate) system_prompt: Option<String>,
}

/// A new or resumed session, with where to connect (the WebSocket is not provided: stream
/// with `message/stream` instead).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ConnectedSession {
    pub(crate) session: Session,
    pub(crate) connect_url: String,
}

/// Renames, pauses or resumes a session.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UpdateSessionRequest {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100)]
    pub(crate) name: Option<String>,
    pub(crate) status: Option<SettableState>,
}

/// Forks a session.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ForkSessionRequest {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100)]
    pub(crate) new_name: Option<String>,
    /// The last message copied (a message id of the session's history; `422` if it is not
    /// one); every message by default.
    pub(crate) from_message_id: Option<String>,
}

/// A fork.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ForkSessionResponse {
    pub(crate) session: Session,
    pub(crate) forked_from: String,
    pub(crate) message_count: u64,
}

/// A tool call in a message.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct MessageToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    #[schema(value_type = Object)]
    pub(crate) input: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) output: Option<Value>,
    /// `pending`, `running`, `completed` or `failed`.
    pub(crate) status: String,
}

/// A message of a session.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct Message {
    pub(crate) id: String,
    /// `user`, `assistant` or `system`.
    pub(crate) role: String,
    pub(crate) content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_calls: Option<Vec<MessageToolCall>>,
    pub(crate) created_at: String,
}

/// Sends a message to a session.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendMessageRequest {
    /// 1-100000 characters.
    #[schema(min_length = 1, max_length = 100000)]
    pub(crate) content: String,
}

/// The message sent and the answer.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct SendMessageResponse {
    pub(crate) message: Message,
    pub(crate) response: Message,
}

/// Executes a task.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecuteRequest {
    /// 1-100000 characters.
    #[schema(min_length = 1, max_length = 100000)]
    pub(crate) message: String,
    /// The agent to run as: a new session runs as it; a given session must already (`404`
    /// if unknown, `400` if the session runs as another).
    #[serde(default)]
    pub(crate) agent_id: Option<String>,
    /// Skills are not provided: only an empty list.
    #[serde(default)]
    #[schema(max_items = 0)]
    pub(crate) skills: Option<Vec<String>>,
    /// The model for this session from now on, e.g. `anthropic/claude-sonnet-4-5`: `400`
    /// naming the field if malformed, `404` if this harness cannot build it (unknown, or no
    /// key).
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._-]+/[A-Za-z0-9._:/@+-]+$")]
    pub(crate) model: Option<String>,
    /// Not supported per execution: the mode's model settings apply.
    #[serde(default)]
    #[schema(schema_with = null_only)]
    pub(crate) max_tokens: Option<Value>,
    /// Not supported per execution: the mode's model settings apply.
    #[serde(default)]
    #[schema(schema_with = null_only)]
    pub(crate) temperature: Option<Value>,
    /// Not supported per execution: the harness's instructions apply.
    #[serde(default)]
    #[schema(schema_with = null_only)]
    pub(crate) system_prompt: Option<String>,
    /// The session to continue; a new one without it.
    #[serde(default)]
    pub(crate) session_id: Option<String>,
}

/// An execution started.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ExecuteResponse {
    pub(crate) execution_id: String,
    pub(crate) status: ExecutionStatus,
    pub(crate) stream_url: String,
    /// *Extension*: the session it runs in.
    pub(crate) session_id: String,
}

/// Progress from the session's task list.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ExecutionProgress {
    pub(crate) percentage: f64,
    pub(crate) current_step: String,
    pub(crate) steps_completed: u64,
    pub(crate) steps_total: u64,
}

/// An execution.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct Execution {
    pub(crate) id: String,
    pub(crate) harness_id: String,
    pub(crate) status: ExecutionStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) progress: Option<ExecutionProgress>,
    pub(crate) started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) completed_at: Option<String>,
    pub(crate) artifacts_count: u64,
    /// *Extension*: the session it runs in.
    pub(crate) session_id: String,
    /// *Extension*: the message it runs.
    pub(crate) message: String,
    /// *Extension*: the approval or question it waits for, while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) awaiting_input: Option<AwaitingInput>,
}

/// `{ execution }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ExecutionResponse {
    pub(crate) execution: Execution,
}

/// A cancellation.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct CancelResponse {
    pub(crate) execution: Execution,
    pub(crate) cancelled: bool,
}

/// A tool call of a result.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ToolCallSummary {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) success: bool,
    pub(crate) duration_ms: i64,
}

pub(crate) use crate::artifacts::ArtifactSummary;

/// Token usage.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
pub(crate) struct Usage {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) total_tokens: u64,
}

impl From<UsageStats> for Usage {
    fn from(usage: UsageStats) -> Self {
        Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens,
        }
    }
}

/// What an execution ended with.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ExecutionResult {
    pub(crate) execution_id: String,
    pub(crate) status: ExecutionStatus,
    pub(crate) output: String,
    pub(crate) artifacts: Vec<ArtifactSummary>,
    pub(crate) tool_calls: Vec<ToolCallSummary>,
    pub(crate) usage: Usage,
    /// *Extension*: why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// `{ result }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ResultResponse {
    pub(crate) result: ExecutionResult,
}

/// `{ tool_calls }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ToolCallsResponse {
    pub(crate) tool_calls: Vec<DetailedToolCall>,
}

/// A tool call of an execution, as the spec shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct DetailedToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    #[schema(value_type = Object)]
    pub(crate) input: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) output: Option<Value>,
    /// `running`, `completed` or `failed`.
    pub(crate) status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    pub(crate) started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) completed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) duration_ms: Option<i64>,
}

impl From<ToolCallRecord> for DetailedToolCall {
    fn from(call: ToolCallRecord) -> Self {
        let error = (call.status == "failed")
            .then(|| {
                call.output
                    .as_ref()
                    .and_then(|output| output["text"].as_str())
                    .map(str::to_owned)
            })
            .flatten();
        DetailedToolCall {
            id: call.id,
            name: call.name,
            input: call.input,
            output: call.output,
            status: call.status,
            error,
            started_at: harness_tags::util::rfc3339(call.started_at),
            completed_at: call.completed_at.map(harness_tags::util::rfc3339),
            duration_ms: call
                .completed_at
                .map(|end| end.saturating_sub(call.started_at)),
        }
    }
}

/// Answers what the execution waits for.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendInputRequest {
    /// For an approval: `yes`, `no` or `always` (this tool, for the session); for a question:
    /// the answer's text.
    pub(crate) data: String,
    /// *Extension*: the tool call answered, when several wait.
    #[serde(default)]
    pub(crate) call_id: Option<String>,
    /// *Extension*: a question's answer as JSON, for tools whose answer is not text.
    #[serde(default)]
    pub(crate) answer: Option<Value>,
}

/// Whether the input was taken.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct SendInputResponse {
    pub(crate) accepted: bool,
}

/// What a domain of the API provides.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct DomainCapability {
    pub(crate) supported: bool,
    pub(crate) operations: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) limitations: Option<Vec<String>>,
}

/// Every domain's capability.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct CapabilityManifest {
    pub(crate) agents: DomainCapability,
    pub(crate) skills: DomainCapability,
    pub(crate) mcp: DomainCapability,
    pub(crate) execution: DomainCapability,
    pub(crate) sessions: DomainCapability,
    pub(crate) memory: DomainCapability,
    pub(crate) subagents: DomainCapability,
    pub(crate) files: DomainCapability,
    pub(crate) hooks: DomainCapability,
    pub(crate) planning: DomainCapability,
    pub(crate) models: DomainCapability,
}

/// The harness this server hosts.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct HarnessInfo {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) vendor: String,
    pub(crate) description: String,
    /// Always `sdk`: the harness runs in this process.
    pub(crate) execution_type: String,
    /// Always `active`.
    pub(crate) status: String,
    pub(crate) capabilities: CapabilityManifest,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

/// `{ harness }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct HarnessResponse {
    pub(crate) harness: HarnessInfo,
}

/// The capability manifest.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct CapabilitiesResponse {
    pub(crate) harness_id: String,
    pub(crate) harness_name: String,
    pub(crate) version: String,
    pub(crate) capabilities: CapabilityManifest,
}

/// One health check.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct HealthCheck {
    pub(crate) name: String,
    /// `pass` or `fail`.
    pub(crate) status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
}

/// The server's health.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct HealthResponse {
    /// `healthy` or `unhealthy`.
    pub(crate) status: String,
    pub(crate) latency_ms: u64,
    pub(crate) version: String,
    pub(crate) checks: Vec<HealthCheck>,
}
