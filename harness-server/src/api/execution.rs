//! The execution group: run a message on a session, follow it, answer what it waits for.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use harness_core::tool::ApprovalAnswer;
use harness_tags::util::rfc3339;
use serde::Deserialize;
use utoipa::IntoParams;

use super::shared::{agent, model_refused, new_execution_id, thread, unsupported, wait_finished};
use super::types::{
    ArtifactSummary, CancelResponse, ExecuteRequest, ExecuteResponse, Execution, ExecutionResponse,
    ExecutionResult, Page, Pagination, ResultResponse, SendInputRequest, SendInputResponse,
    ToolCallSummary, ToolCallsResponse, check_length,
};
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::host::{ExecutionRecord, ExecutionStatus};
use crate::state::Shared;
use crate::stream::{execution_stream, last_event_id};

const MAX_MESSAGE: usize = 100_000;

fn view(state: &Shared, record: ExecutionRecord) -> Execution {
    let progress = None;
    let artifacts_count = record.artifact_paths().len() as u64;
    Execution {
        id: record.id,
        harness_id: state.config.harness_id.clone(),
        status: record.status,
        progress,
        started_at: rfc3339(record.started_at),
        completed_at: record.completed_at.map(rfc3339),
        artifacts_count,
        session_id: record.session_id,
        message: record.message,
        awaiting_input: record.awaiting_input,
    }
}

/// Checks an execute request and starts it; the execution's id and session.
async fn start(state: &Shared, request: ExecuteRequest) -> Result<(String, String), ApiError> {
    check_length("message", &request.message, MAX_MESSAGE)?;
    unsupported(request.skills.as_deref(), request.system_prompt.as_deref())?;
    let agent = agent(state, request.agent_id.as_deref()).await?;
    if request.max_tokens.is_some() {
        return Err(ApiError::invalid_field(
            "max_tokens",
            "max_tokens per execution is not supported; the mode's model settings apply",
        ));
    }
    if request.temperature.is_some() {
        return Err(ApiError::invalid_field(
            "temperature",
            "temperature per execution is not supported; the mode's model settings apply",
        ));
    }
    let session_id = match &request.session_id {
        Some(id) => {
            let session = thread(state, id).await?.id;
            let bound = state.host.agents().bound(&session).await?;
            if let Some(agent) = &agent
                && bound.as_deref() != Some(agent.id.as_str())
            {
                return Err(ApiError::conflict(format!(
                    "session `{session}` runs as {}, not `{}`",
                    bound.map_or("no agent".to_owned(), |bound| format!("`{bound}`")),
                    agent.id
                )));
            }
            session
        }
        None => state.host.create_session(None, agent.as_ref()).await?.id,
    };
    if let Some(model) = &request.model {
        let harness = state.host.harness(&session_id).await?;
        let checked = match harness.check_model(model) {
            Ok(()) => harness.switch_model(model).await,
            Err(error) => Err(error),
        };
        checked.map_err(|error| model_refused(model, error))?;
    }
    let id = new_execution_id();
    state
        .host
        .execute(&session_id, request.message, id.clone())
        .await?;
    Ok((id, session_id))
}

/// Executes a task; follow it with the stream URL.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/execute", tag = "execution",
    operation_id = "execution.run", params(("harnessId" = String, Path)),
    request_body = ExecuteRequest,
    responses((status = 202, body = ExecuteResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse), (status = 422, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub(crate) async fn execute(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<ExecuteRequest>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let (id, session_id) = start(&state, request).await?;
    let location = format!("/v1/harnesses/{harness_id}/executions/{id}");
    let body = ExecuteResponse {
        execution_id: id.clone(),
        status: ExecutionStatus::Pending,
        stream_url: format!("{location}/stream"),
        session_id,
    };
    let mut response = (StatusCode::ACCEPTED, Json(body)).into_response();
    if let (Ok(location), Ok(id)) = (HeaderValue::from_str(&location), HeaderValue::from_str(&id)) {
        response.headers_mut().insert(header::LOCATION, location);
        response.headers_mut().insert("x-execution-id", id);
    }
    Ok(response)
}

/// Executes a task and streams it.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/execute/stream", tag = "execution",
    operation_id = "execution.stream", params(("harnessId" = String, Path)),
    request_body = ExecuteRequest,
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "Execution events; `id:` is the frame's seq"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 422, body = ErrorResponse), (status = 503, body = ErrorResponse)))]
pub(crate) async fn execute_stream(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<ExecuteRequest>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let (id, _) = start(&state, request).await?;
    execution_stream(&state, &id, 0).await
}

/// Executions' filters.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ExecutionFilter {
    /// Only executions in this state.
    status: Option<ExecutionStatus>,
    /// Executions of sessions that run as this agent.
    agent_id: Option<String>,
    /// *Extension*: executions of this session.
    session_id: Option<String>,
    /// Not supported (`400`): page with `offset`.
    #[param(ignore)]
    since: Option<String>,
    /// 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// Default 0.
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// Lists executions, newest first.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions", tag = "execution",
    operation_id = "execution.list", params(("harnessId" = String, Path), ExecutionFilter),
    responses((status = 200, body = Page<Execution>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(filter): ApiQuery<ExecutionFilter>,
) -> Result<Json<Page<Execution>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = Pagination {
        limit: filter.limit,
        offset: filter.offset,
    }
    .checked()?;
    if filter.since.is_some() {
        return Err(ApiError::invalid_field(
            "since",
            "filtering by time is not supported; page with offset",
        ));
    }
    let mut executions = Vec::new();
    for record in state.host.executions().await? {
        if filter.status.is_some_and(|status| record.status != status)
            || filter
                .session_id
                .as_ref()
                .is_some_and(|session| *session != record.session_id)
        {
            continue;
        }
        if let Some(agent) = &filter.agent_id
            && state
                .host
                .agents()
                .bound(&record.session_id)
                .await?
                .as_ref()
                != Some(agent)
        {
            continue;
        }
        executions.push(view(&state, record));
    }
    Ok(Json(Page::of(executions, page)))
}

/// An execution.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions/{executionId}",
    tag = "execution", operation_id = "execution.get",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    responses((status = 200, body = ExecutionResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_execution(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
) -> Result<Json<ExecutionResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let record = state.host.execution(&execution_id).await?;
    Ok(Json(ExecutionResponse {
        execution: view(&state, record),
    }))
}

/// Attaches to an execution's stream; `Last-Event-ID` resumes after that frame.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions/{executionId}/stream",
    tag = "execution", operation_id = "execution.attachStream",
    params(("harnessId" = String, Path), ("executionId" = String, Path),
        ("Last-Event-ID" = Option<String>, Header, pattern = "^[0-9]{0,19}$", nullable = false,
            description = "The id of the last frame received: the stream goes on after it")),
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "Execution events; `id:` is the frame's seq"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 410, body = ErrorResponse)))]
pub(crate) async fn attach(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let after = last_event_id(&headers)?;
    state.host.execution(&execution_id).await?;
    execution_stream(&state, &execution_id, after).await
}

/// Cancels an execution: a queued one never starts, a running one is aborted.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/executions/{executionId}/cancel",
    tag = "execution", operation_id = "execution.cancel",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    responses((status = 200, body = CancelResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
pub(crate) async fn cancel(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
) -> Result<Json<CancelResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let record = state.host.execution(&execution_id).await?;
    let live = match state.host.live(&execution_id) {
        Some(live) if !record.status.is_finished() => live,
        _ => {
            return Err(ApiError::conflict(format!(
                "execution `{execution_id}` is already over"
            )));
        }
    };
    state.host.cancel(&live).await?;
    let record = wait_finished(&live).await;
    let cancelled = record.status == ExecutionStatus::Cancelled;
    Ok(Json(CancelResponse {
        execution: view(&state, record),
        cancelled,
    }))
}

/// What an execution ended with; `409` while it runs.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions/{executionId}/result",
    tag = "execution", operation_id = "execution.result",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    responses((status = 200, body = ResultResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
pub(crate) async fn result(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
) -> Result<Json<ResultResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let record = state.host.execution(&execution_id).await?;
    if !record.status.is_finished() {
        return Err(ApiError::conflict(format!(
            "execution `{execution_id}` is still running"
        )));
    }
    Ok(Json(ResultResponse {
        result: execution_result(&state, record),
    }))
}

/// What a finished execution produced.
pub(crate) fn execution_result(state: &Shared, record: ExecutionRecord) -> ExecutionResult {
    let tool_calls = record
        .tool_calls
        .iter()
        .map(|call| ToolCallSummary {
            id: call.id.clone(),
            name: call.name.clone(),
            success: call.status == "completed",
            duration_ms: call
                .completed_at
                .map_or(0, |end| end.saturating_sub(call.started_at)),
        })
        .collect();
    let written = record.artifacts(state.workspace.as_ref());
    ExecutionResult {
        execution_id: record.id,
        status: record.status,
        output: record.output,
        artifacts: written,
        tool_calls,
        usage: record.usage.into(),
        error: record.error,
    }
}

#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions/{executionId}/tool-calls",
    tag = "execution", operation_id = "execution.listToolCalls",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    responses((status = 200, body = ToolCallsResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn tool_calls(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
) -> Result<Json<ToolCallsResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let record = state.host.execution(&execution_id).await?;
    Ok(Json(ToolCallsResponse {
        tool_calls: record.tool_calls.into_iter().map(Into::into).collect(),
    }))
}

/// Answers the approval or question an execution waits for.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/executions/{executionId}/input",
    tag = "execution", operation_id = "execution.sendInput",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    request_body = SendInputRequest,
    responses((status = 200, body = SendInputResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 410, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 422, body = ErrorResponse)))]
pub(crate) async fn send_input(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<SendInputRequest>,
) -> Result<Json<SendInputResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    answer_input(
        &state,
        &execution_id,
        request.data,
        request.answer,
        request.call_id.as_deref(),
    )
    .await?;
    Ok(Json(SendInputResponse { accepted: true }))
}

/// Answers what execution `execution_id` waits for: an approval with `data` (`yes`, `no` or
/// `always`), a question with `answer` or else `data`; `410` after its end, `409` when
/// nothing waits, `422` for an answer that does not fit.
pub(crate) async fn answer_input(
    state: &Shared,
    execution_id: &str,
    data: String,
    answer: Option<serde_json::Value>,
    call_id: Option<&str>,
) -> Result<(), ApiError> {
    let record = state.host.execution(execution_id).await?;
    if record.status.is_finished() {
        return Err(ApiError::gone(format!(
            "execution `{execution_id}` is over"
        )));
    }
    let (Some(live), Some(waiting)) = (state.host.live(execution_id), record.awaiting_input) else {
        return Err(ApiError::conflict(format!(
            "execution `{execution_id}` is not waiting for input"
        )));
    };
    let call_id = call_id.unwrap_or(&waiting.call_id);
    let harness = live.harness();
    if waiting.kind == "approval" {
        harness.respond_to_tool_approval(approval(&data)?, Some(call_id))?;
    } else {
        let answer = answer.unwrap_or(serde_json::Value::String(data));
        harness.respond_to_tool_suspension(answer, Some(call_id))?;
    }
    Ok(())
}

/// An approval's answer from its text.
fn approval(data: &str) -> Result<ApprovalAnswer, ApiError> {
    match data.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "approve" | "approved" | "allow" => Ok(ApprovalAnswer::Approve),
        "n" | "no" | "decline" | "declined" | "deny" => Ok(ApprovalAnswer::Decline {
            reason: "the user declined over the API".to_owned(),
        }),
        "always" | "a" => Ok(ApprovalAnswer::AlwaysAllowTool),
        other => Err(ApiError::unfit_answer(format!(
            "an approval is answered yes, no or always, not `{other}`"
        ))),
    }
}

/// `{ artifacts }`.
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ArtifactList {
    artifacts: Vec<ArtifactSummary>,
}

/// The files an execution wrote (with the workspace's `write_file` tool).
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions/{executionId}/artifacts",
    tag = "execution", operation_id = "execution.listArtifacts",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    responses((status = 200, body = ArtifactList), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn list_artifacts(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
) -> Result<Json<ArtifactList>, ApiError> {
    state.check_harness(&harness_id)?;
    let record = state.host.execution(&execution_id).await?;
    Ok(Json(ArtifactList {
        artifacts: record.artifacts(state.workspace.as_ref()),
    }))
}

/// A file an execution wrote, as it is in the workspace now.
#[utoipa::path(get,
    path = "/v1/harnesses/{harnessId}/executions/{executionId}/artifacts/{artifactId}",
    tag = "execution", operation_id = "execution.downloadArtifact",
    params(("harnessId" = String, Path), ("executionId" = String, Path),
        ("artifactId" = String, Path)),
    responses((status = 200, content_type = "*/*", body = String,
            description = "The file's bytes (Content-Disposition: attachment)"),
        (status = 401, body = ErrorResponse), (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 501, body = ErrorResponse)))]
pub(crate) async fn download_artifact(
    State(state): State<Shared>,
    Path((harness_id, execution_id, artifact_id)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let record = state.host.execution(&execution_id).await?;
    let path = artifact_id
        .strip_prefix("art_")
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .and_then(|at| record.artifact_paths().into_iter().nth(at))
        .ok_or_else(|| ApiError::not_found("artifact", &artifact_id))?;
    let workspace = state
        .workspace
        .as_ref()
        .ok_or_else(|| ApiError::not_built("execution.downloadArtifact"))?;
    super::files::read(workspace, &path, true)
}
