//! The subagents group: an agent's subagents, each running the tasks delegated to it in a
//! session of its own (see [`crate::agents`] for what that session runs with).
//!
//! A subagent's status is its latest task's: `idle` before the first, `running` while one is
//! queued, runs or waits for input, `completed`, or `failed` (failed or cancelled).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use harness_tags::util::{rfc3339, unix_ms};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::execution::execution_result;
use super::shared::{model_refused, new_execution_id, wait_finished, wait_settled};
use super::types::{ResultResponse, check_length};
use crate::agents::SubagentRecord;
use crate::error::{ApiError, ApiJson, ErrorResponse};
use crate::host::{ExecutionRecord, ExecutionStatus};
use crate::state::Shared;
use crate::stream::{execution_stream, last_event_id};

const MAX_PROMPT: usize = 100_000;
const MAX_TASK: usize = 100_000;

/// Where a subagent is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SubagentStatus {
    Idle,
    Running,
    Completed,
    Failed,
}

/// A subagent, as the spec shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct Subagent {
    id: String,
    name: String,
    description: String,
    status: SubagentStatus,
    parent_agent_id: String,
    created_at: String,
    /// *Extension*: the session its tasks run in.
    session_id: String,
}

/// `{ subagents }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct SubagentList {
    subagents: Vec<Subagent>,
}

/// `{ subagent }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct SubagentResponse {
    subagent: Subagent,
}

/// Spawns a subagent.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpawnSubagentRequest {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    /// 1-1000 characters.
    #[schema(min_length = 1, max_length = 1000)]
    description: String,
    /// Its instructions, after the harness's (its parent's prompt without one).
    #[serde(default)]
    #[schema(max_length = 100000)]
    system_prompt: Option<String>,
    /// Skills are not provided: only an empty list is taken.
    #[serde(default)]
    #[schema(max_items = 0)]
    skills: Option<Vec<String>>,
    /// Its model, `provider/name` (its parent's without one).
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._-]+/[A-Za-z0-9._:/@+-]+$")]
    model: Option<String>,
}

/// A task for a subagent.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DelegateRequest {
    /// 1-100000 characters.
    #[schema(min_length = 1, max_length = 100000)]
    task: String,
    /// Given to the subagent after the task, as JSON.
    #[serde(default, deserialize_with = "crate::error::object_only")]
    context: Option<Map<String, Value>>,
}

/// The delegated task's execution, once it finished or waits for input.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct DelegateResponse {
    execution_id: String,
    status: ExecutionStatus,
}

/// The latest execution of a subagent's session.
async fn latest(
    state: &Shared,
    subagent: &SubagentRecord,
) -> Result<Option<ExecutionRecord>, ApiError> {
    Ok(state
        .host
        .executions()
        .await?
        .into_iter()
        .find(|record| record.session_id == subagent.session_id))
}

async fn view(state: &Shared, subagent: SubagentRecord) -> Result<Subagent, ApiError> {
    let status = match latest(state, &subagent).await?.map(|record| record.status) {
        None => SubagentStatus::Idle,
        Some(ExecutionStatus::Pending | ExecutionStatus::Running) => SubagentStatus::Running,
        Some(ExecutionStatus::Completed) => SubagentStatus::Completed,
        Some(ExecutionStatus::Failed | ExecutionStatus::Cancelled) => SubagentStatus::Failed,
    };
    Ok(Subagent {
        id: subagent.id,
        name: subagent.name,
        description: subagent.description,
        status,
        parent_agent_id: subagent.parent_agent_id,
        created_at: rfc3339(subagent.created_at),
        session_id: subagent.session_id,
    })
}

/// The latest task of a subagent, or `409` if it was given none.
async fn latest_task(
    state: &Shared,
    subagent: &SubagentRecord,
) -> Result<ExecutionRecord, ApiError> {
    latest(state, subagent).await?.ok_or_else(|| {
        ApiError::conflict(format!(
            "subagent `{}` has not been given a task",
            subagent.id
        ))
    })
}

#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/agents/{agentId}/subagents",
    tag = "subagents", operation_id = "subagents.list",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = SubagentList), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
) -> Result<Json<SubagentList>, ApiError> {
    state.check_harness(&harness_id)?;
    let agents = state.host.agents();
    agents.get(&agent_id).await?;
    let mut subagents = Vec::new();
    for subagent in agents.subagents(&agent_id).await? {
        subagents.push(view(&state, subagent).await?);
    }
    Ok(Json(SubagentList { subagents }))
}

/// Spawns a subagent with a session of its own.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/agents/{agentId}/subagents",
    tag = "subagents", operation_id = "subagents.spawn",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    request_body = SpawnSubagentRequest,
    responses((status = 201, body = SubagentResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 422, body = ErrorResponse), (status = 503, body = ErrorResponse)))]
pub(crate) async fn spawn(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<SpawnSubagentRequest>,
) -> Result<(StatusCode, Json<SubagentResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    check_length("name", &request.name, 100)?;
    check_length("description", &request.description, 1000)?;
    if let Some(prompt) = &request.system_prompt
        && prompt.chars().count() > MAX_PROMPT
    {
        return Err(ApiError::invalid_field(
            "system_prompt",
            "a system prompt is at most 100000 characters",
        ));
    }
    if request
        .skills
        .as_ref()
        .is_some_and(|skills| !skills.is_empty())
    {
        return Err(ApiError::invalid_field(
            "skills",
            "skills are not provided by this server",
        ));
    }
    if let Some(model) = &request.model
        && harness_core::model::ModelId::new(model).is_err()
    {
        return Err(ApiError::invalid_field(
            "model",
            format!("model id `{model}` is not `provider/name`"),
        ));
    }
    let agents = state.host.agents();
    let parent = agents.get(&agent_id).await?;
    let mut subagent = SubagentRecord {
        id: format!("sub_{}", harness_core::harness::default_id()),
        parent_agent_id: parent.id.clone(),
        name: request.name,
        description: request.description,
        system_prompt: request.system_prompt,
        model: request.model,
        session_id: String::new(),
        created_at: unix_ms(),
    };
    let profile = subagent.profile(&parent);
    let session = state
        .host
        .create_session(Some(subagent.name.clone()), Some(&profile))
        .await?;
    subagent.session_id = session.id;
    if let Some(model) = &subagent.model
        && let Err(error) = state
            .host
            .harness(&subagent.session_id)
            .await?
            .check_model(model)
    {
        state.host.delete_session(&subagent.session_id).await?;
        return Err(model_refused(model, error));
    }
    agents.save_subagent(&subagent).await?;
    Ok((
        StatusCode::CREATED,
        Json(SubagentResponse {
            subagent: view(&state, subagent).await?,
        }),
    ))
}

#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/agents/{agentId}/subagents/{subagentId}",
    tag = "subagents", operation_id = "subagents.get",
    params(("harnessId" = String, Path), ("agentId" = String, Path),
        ("subagentId" = String, Path)),
    responses((status = 200, body = SubagentResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_subagent(
    State(state): State<Shared>,
    Path((harness_id, agent_id, subagent_id)): Path<(String, String, String)>,
) -> Result<Json<SubagentResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let subagent = state
        .host
        .agents()
        .subagent(&agent_id, &subagent_id)
        .await?;
    Ok(Json(SubagentResponse {
        subagent: view(&state, subagent).await?,
    }))
}

/// Cancels a subagent's running task, then deletes it with its session.
#[utoipa::path(delete,
    path = "/v1/harnesses/{harnessId}/agents/{agentId}/subagents/{subagentId}",
    tag = "subagents", operation_id = "subagents.terminate",
    params(("harnessId" = String, Path), ("agentId" = String, Path),
        ("subagentId" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
pub(crate) async fn terminate(
    State(state): State<Shared>,
    Path((harness_id, agent_id, subagent_id)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    state.check_harness(&harness_id)?;
    let subagent = state
        .host
        .agents()
        .subagent(&agent_id, &subagent_id)
        .await?;
    while let Some(live) = state
        .host
        .busy_with(&subagent.session_id)
        .and_then(|running| state.host.live(&running))
    {
        state.host.cancel(&live).await?;
        wait_finished(&live).await;
    }
    match state.host.delete_session(&subagent.session_id).await {
        // Its session was deleted on its own: the subagent still goes.
        Err(error) if error.status() == StatusCode::NOT_FOUND => {}
        other => other?,
    }
    state.host.agents().delete_subagent(&subagent.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Queues a task on the subagent's session.
async fn delegated(
    state: &Shared,
    agent_id: &str,
    subagent_id: &str,
    request: DelegateRequest,
) -> Result<String, ApiError> {
    check_length("task", &request.task, MAX_TASK)?;
    let subagent = state.host.agents().subagent(agent_id, subagent_id).await?;
    let mut message = request.task;
    if let Some(context) = request.context.filter(|context| !context.is_empty()) {
        let context = serde_json::to_string_pretty(&context)
            .map_err(|error| ApiError::internal(format!("context did not serialize: {error}")))?;
        message.push_str("\n\n<context>\n");
        message.push_str(&context);
        message.push_str("\n</context>");
    }
    let id = new_execution_id();
    state
        .host
        .execute(&subagent.session_id, message, id.clone())
        .await?;
    Ok(id)
}

/// Delegates a task and waits until it is over or waits for input (`running`: answer it at
/// the execution's `input`).
#[utoipa::path(post,
    path = "/v1/harnesses/{harnessId}/agents/{agentId}/subagents/{subagentId}/delegate",
    tag = "subagents", operation_id = "subagents.delegate",
    params(("harnessId" = String, Path), ("agentId" = String, Path),
        ("subagentId" = String, Path)),
    request_body = DelegateRequest,
    responses((status = 200, body = DelegateResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub(crate) async fn delegate(
    State(state): State<Shared>,
    Path((harness_id, agent_id, subagent_id)): Path<(String, String, String)>,
    ApiJson(request): ApiJson<DelegateRequest>,
) -> Result<Json<DelegateResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let id = delegated(&state, &agent_id, &subagent_id, request).await?;
    let record = match state.host.live(&id) {
        Some(live) => wait_settled(&live).await,
        None => state.host.execution(&id).await?,
    };
    Ok(Json(DelegateResponse {
        execution_id: record.id,
        status: record.status,
    }))
}

/// Delegates a task and streams it.
#[utoipa::path(post,
    path = "/v1/harnesses/{harnessId}/agents/{agentId}/subagents/{subagentId}/delegate/stream",
    tag = "subagents", operation_id = "subagents.delegateStream",
    params(("harnessId" = String, Path), ("agentId" = String, Path),
        ("subagentId" = String, Path)),
    request_body = DelegateRequest,
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "Execution events; `id:` is the frame's seq"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse), (status = 503, body = ErrorResponse)))]
pub(crate) async fn delegate_stream(
    State(state): State<Shared>,
    Path((harness_id, agent_id, subagent_id)): Path<(String, String, String)>,
    ApiJson(request): ApiJson<DelegateRequest>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let id = delegated(&state, &agent_id, &subagent_id, request).await?;
    execution_stream(&state, &id, 0).await
}

/// The result of the subagent's latest task; `409` while it runs or before it has one.
#[utoipa::path(get,
    path = "/v1/harnesses/{harnessId}/agents/{agentId}/subagents/{subagentId}/result",
    tag = "subagents", operation_id = "subagents.result",
    params(("harnessId" = String, Path), ("agentId" = String, Path),
        ("subagentId" = String, Path)),
    responses((status = 200, body = ResultResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
pub(crate) async fn result(
    State(state): State<Shared>,
    Path((harness_id, agent_id, subagent_id)): Path<(String, String, String)>,
) -> Result<Json<ResultResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let subagent = state
        .host
        .agents()
        .subagent(&agent_id, &subagent_id)
        .await?;
    let record = latest_task(&state, &subagent).await?;
    if !record.status.is_finished() {
        return Err(ApiError::conflict(format!(
            "subagent `{subagent_id}` is still running execution `{}`",
            record.id
        )));
    }
    Ok(Json(ResultResponse {
        result: execution_result(&state, record),
    }))
}

/// The stream of the subagent's latest task (resumed after `Last-Event-ID`); `409` before it
/// has one.
#[utoipa::path(get,
    path = "/v1/harnesses/{harnessId}/agents/{agentId}/subagents/{subagentId}/stream",
    tag = "subagents", operation_id = "subagents.attachStream",
    params(("harnessId" = String, Path), ("agentId" = String, Path),
        ("subagentId" = String, Path),
        ("Last-Event-ID" = Option<String>, Header, pattern = "^[0-9]{0,19}$", nullable = false,
            description = "The id of the last frame received: the stream goes on after it")),
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "Execution events; `id:` is the frame's seq"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 410, body = ErrorResponse)))]
pub(crate) async fn attach(
    State(state): State<Shared>,
    Path((harness_id, agent_id, subagent_id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let after = last_event_id(&headers)?;
    let subagent = state
        .host
        .agents()
        .subagent(&agent_id, &subagent_id)
        .await?;
    let record = latest_task(&state, &subagent).await?;
    execution_stream(&state, &record.id, after).await
}
