//! The sessions group: a session is a thread of the harness.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use harness_store::{StoredMessage, ThreadRecord, WriteOp, metadata};
use harness_tags::KernelMessage;
use harness_tags::util::rfc3339;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use super::shared::{agent, new_execution_id, thread, unsupported, wait_settled};
use super::types::{
    ConnectedSession, CreateSessionRequest, ForkSessionRequest, ForkSessionResponse, Message,
    MessageToolCall, Page, Pagination, SendMessageRequest, SendMessageResponse, Session,
    SessionResponse, SessionState, SettableState, UpdateSessionRequest, check_length,
};
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::host::ExecutionStatus;
use crate::state::Shared;
use crate::stream::{execution_stream, last_event_id};

/// The store namespace of session states (`paused`, `ended`); `active` is not stored.
const SESSION_STATES: &str = "harness-server.sessions";

const MAX_MESSAGE: usize = 100_000;

pub(crate) async fn session_view(
    state: &Shared,
    thread: &ThreadRecord,
) -> Result<Session, ApiError> {
    let store = state.host.store();
    let message_count = store
        .thread_version(&thread.id)
        .await?
        .map_or(0, |version| version.messages);
    let status = state_of(state, &thread.id).await?;
    Ok(Session {
        id: thread.id.clone(),
        harness_id: state.config.harness_id.clone(),
        name: thread.title.clone(),
        status,
        message_count,
        created_at: rfc3339(thread.created_at),
        updated_at: rfc3339(thread.updated_at),
    })
}

/// Whether a session is active, paused or ended.
pub(crate) async fn state_of(state: &Shared, session_id: &str) -> Result<SessionState, ApiError> {
    Ok(state
        .host
        .store()
        .record(SESSION_STATES, session_id)
        .await?
        .and_then(|record| serde_json::from_value(record.value).ok())
        .unwrap_or(SessionState::Active))
}

fn connect_url(state: &Shared, session_id: &str) -> String {
    format!(
        "/v1/harnesses/{}/sessions/{session_id}/connect",
        state.config.harness_id
    )
}

async fn set_state(state: &Shared, session_id: &str, status: SessionState) -> Result<(), ApiError> {
    let op = if status == SessionState::Active {
        WriteOp::DeleteRecord {
            namespace: SESSION_STATES.to_owned(),
            key: session_id.to_owned(),
        }
    } else {
        WriteOp::PutRecord {
            namespace: SESSION_STATES.to_owned(),
            key: session_id.to_owned(),
            thread_id: Some(session_id.to_owned()),
            value: json!(status),
        }
    };
    Ok(state.host.store().write(vec![op]).await?)
}

/// Sessions' filters.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SessionFilter {
    /// Only sessions in this state.
    status: Option<SessionState>,
    /// Sessions that run as this agent.
    agent_id: Option<String>,
    /// 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// Default 0.
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// Lists sessions, newest first.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/sessions", tag = "sessions",
    operation_id = "sessions.list", params(("harnessId" = String, Path), SessionFilter),
    responses((status = 200, body = Page<Session>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(filter): ApiQuery<SessionFilter>,
) -> Result<Json<Page<Session>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = Pagination {
        limit: filter.limit,
        offset: filter.offset,
    }
    .checked()?;
    let mut threads = state
        .host
        .store()
        .threads(Some(state.host.resource_id()))
        .await?;
    threads.retain(|thread| {
        thread.metadata.get(metadata::FORKED_SUBAGENT) != Some(&Value::Bool(true))
    });
    threads.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(b.id.cmp(&a.id)));
    let mut sessions = Vec::new();
    for thread in &threads {
        if let Some(agent) = &filter.agent_id
            && state.host.agents().bound(&thread.id).await?.as_ref() != Some(agent)
        {
            continue;
        }
        let session = session_view(&state, thread).await?;
        if filter
            .status
            .as_ref()
            .is_none_or(|status| *status == session.status)
        {
            sessions.push(session);
        }
    }
    Ok(Json(Page::of(sessions, page)))
}

/// Creates a session.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/sessions", tag = "sessions",
    operation_id = "sessions.create", params(("harnessId" = String, Path)),
    request_body = CreateSessionRequest,
    responses((status = 201, body = ConnectedSession), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn create(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<CreateSessionRequest>,
) -> Result<(StatusCode, Json<ConnectedSession>), ApiError> {
    state.check_harness(&harness_id)?;
    if let Some(name) = &request.name {
        check_length("name", name, 100)?;
    }
    unsupported(request.skills.as_deref(), request.system_prompt.as_deref())?;
    let agent = agent(&state, request.agent_id.as_deref()).await?;
    let thread = state
        .host
        .create_session(request.name, agent.as_ref())
        .await?;
    let session = session_view(&state, &thread).await?;
    let connect_url = connect_url(&state, &thread.id);
    Ok((
        StatusCode::CREATED,
        Json(ConnectedSession {
            session,
            connect_url,
        }),
    ))
}

/// A session.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}", tag = "sessions",
    operation_id = "sessions.get",
    params(("harnessId" = String, Path), ("sessionId" = String, Path)),
    responses((status = 200, body = SessionResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_session(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
) -> Result<Json<SessionResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let thread = thread(&state, &session_id).await?;
    Ok(Json(SessionResponse {
        session: session_view(&state, &thread).await?,
    }))
}

/// Renames, pauses or resumes a session.
#[utoipa::path(patch, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}", tag = "sessions",
    operation_id = "sessions.update",
    params(("harnessId" = String, Path), ("sessionId" = String, Path)),
    request_body = UpdateSessionRequest,
    responses((status = 200, body = SessionResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse)))]
pub(crate) async fn update(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<UpdateSessionRequest>,
) -> Result<Json<SessionResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    thread(&state, &session_id).await?;
    if let Some(name) = &request.name {
        check_length("name", name, 100)?;
    }
    if let Some(name) = &request.name {
        state
            .host
            .harness(&session_id)
            .await?
            .rename_thread(name)
            .await?;
    }
    if let Some(status) = request.status {
        let status = match status {
            SettableState::Active => SessionState::Active,
            SettableState::Paused => SessionState::Paused,
        };
        set_state(&state, &session_id, status).await?;
    }
    let thread = thread(&state, &session_id).await?;
    Ok(Json(SessionResponse {
        session: session_view(&state, &thread).await?,
    }))
}

/// `delete_history`.
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct EndOptions {
    /// Also delete the session and its messages (default false: the session is ended).
    delete_history: Option<bool>,
}

/// Ends a session, or deletes it with its history.
#[utoipa::path(delete, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}", tag = "sessions",
    operation_id = "sessions.end",
    params(("harnessId" = String, Path), ("sessionId" = String, Path), EndOptions),
    responses((status = 204), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse)))]
pub(crate) async fn end(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
    ApiQuery(options): ApiQuery<EndOptions>,
) -> Result<StatusCode, ApiError> {
    state.check_harness(&harness_id)?;
    thread(&state, &session_id).await?;
    if options.delete_history.unwrap_or(false) {
        state.host.delete_session(&session_id).await?;
    } else {
        set_state(&state, &session_id, SessionState::Ended).await?;
        state
            .host
            .journal()
            .record(
                "session.ended",
                json!({ "session_id": session_id, "deleted": false }),
            )
            .await;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Resumes a paused or ended session.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}/resume",
    tag = "sessions", operation_id = "sessions.resume",
    params(("harnessId" = String, Path), ("sessionId" = String, Path)),
    responses((status = 200, body = ConnectedSession), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
pub(crate) async fn resume(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
) -> Result<Json<ConnectedSession>, ApiError> {
    state.check_harness(&harness_id)?;
    thread(&state, &session_id).await?;
    set_state(&state, &session_id, SessionState::Active).await?;
    let thread = thread(&state, &session_id).await?;
    Ok(Json(ConnectedSession {
        session: session_view(&state, &thread).await?,
        connect_url: connect_url(&state, &session_id),
    }))
}

/// History paging.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HistoryOptions {
    /// 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// Default 0.
    #[param(minimum = 0)]
    offset: Option<i64>,
    /// Not supported (`400`): page with `offset`.
    #[param(ignore)]
    since: Option<String>,
}

/// A session's messages, oldest first.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}/history",
    tag = "sessions", operation_id = "sessions.history",
    params(("harnessId" = String, Path), ("sessionId" = String, Path), HistoryOptions),
    responses((status = 200, body = Page<Message>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn history(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
    ApiQuery(options): ApiQuery<HistoryOptions>,
) -> Result<Json<Page<Message>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = Pagination {
        limit: options.limit,
        offset: options.offset,
    }
    .checked()?;
    if options.since.is_some() {
        return Err(ApiError::invalid_field(
            "since",
            "filtering by time is not supported; page with offset",
        ));
    }
    thread(&state, &session_id).await?;
    let stored = state.host.store().messages(&session_id).await?;
    Ok(Json(Page::of(messages(&stored), page)))
}

/// A thread's messages as the spec shows them: tool results go into the tool calls of the
/// assistant message that made them (call ids are unique within a run only, so a result
/// belongs to the latest call of its id).
pub(crate) fn messages(stored: &[StoredMessage]) -> Vec<Message> {
    let mut shown: Vec<Message> = Vec::new();
    // Where the latest call of each id is: (message, call) in `shown`.
    let mut calls: HashMap<&str, (usize, usize)> = HashMap::new();
    for message in stored {
        let (role, content, tool_calls) = match &message.message {
            KernelMessage::User { content } => ("user", content, None),
            KernelMessage::System { content } => ("system", content, None),
            KernelMessage::Assistant {
                content,
                tool_calls,
                ..
            } => {
                for (at, call) in tool_calls.iter().enumerate() {
                    calls.insert(call.id.as_str(), (shown.len(), at));
                }
                let made = tool_calls
                    .iter()
                    .map(|call| MessageToolCall {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        input: call.arguments.clone(),
                        output: None,
                        status: "pending".to_owned(),
                    })
                    .collect::<Vec<_>>();
                ("assistant", content, (!made.is_empty()).then_some(made))
            }
            KernelMessage::ToolResult {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                if let Some(&(at, call)) = calls.get(tool_call_id.as_str())
                    && let Some(made) = shown[at]
                        .tool_calls
                        .as_mut()
                        .and_then(|made| made.get_mut(call))
                {
                    made.output = Some(json!({ "text": content }));
                    made.status = if *is_error { "failed" } else { "completed" }.to_owned();
                }
                continue;
            }
        };
        shown.push(Message {
            id: message.id.clone(),
            role: role.to_owned(),
            content: content.clone(),
            tool_calls,
            created_at: rfc3339(message.created_at),
        });
    }
    shown
}

/// Forks a session: a new session with a copy of its messages.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}/fork",
    tag = "sessions", operation_id = "sessions.fork",
    params(("harnessId" = String, Path), ("sessionId" = String, Path)),
    request_body = ForkSessionRequest,
    responses((status = 201, body = ForkSessionResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 422, body = ErrorResponse)))]
pub(crate) async fn fork(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<ForkSessionRequest>,
) -> Result<(StatusCode, Json<ForkSessionResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    if let Some(name) = &request.new_name {
        check_length("new_name", name, 100)?;
    }
    thread(&state, &session_id).await?;
    let fork = state
        .host
        .fork_session(&session_id, request.new_name, request.from_message_id)
        .await?;
    let session = session_view(&state, &fork).await?;
    let message_count = session.message_count;
    Ok((
        StatusCode::CREATED,
        Json(ForkSessionResponse {
            session,
            forked_from: session_id,
            message_count,
        }),
    ))
}

/// Sends a message and waits for the answer.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}/message",
    tag = "sessions", operation_id = "sessions.sendMessage",
    params(("harnessId" = String, Path), ("sessionId" = String, Path)),
    request_body = SendMessageRequest,
    responses((status = 200, body = SendMessageResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse), (status = 503, body = ErrorResponse)))]
pub(crate) async fn send_message(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<SendMessageRequest>,
) -> Result<Json<SendMessageResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    check_length("content", &request.content, MAX_MESSAGE)?;
    thread(&state, &session_id).await?;
    // Waiting behind another execution could take as long as that one waits for its user.
    if let Some(busy) = state.host.busy_with(&session_id) {
        return Err(ApiError::conflict(format!(
            "session `{session_id}` is running execution `{busy}`; queue with /execute"
        ))
        .with_details(json!({ "execution_id": busy })));
    }
    let live = state
        .host
        .execute(&session_id, request.content, new_execution_id())
        .await?;
    let record = wait_settled(&live).await;
    if let Some(waiting) = &record.awaiting_input {
        return Err(ApiError::conflict(format!(
            "the execution waits for input ({} of `{}`): answer it at /executions/{}/input",
            waiting.kind, waiting.tool_name, record.id
        ))
        .with_details(json!({ "execution_id": record.id, "awaiting_input": waiting })));
    }
    if record.status != ExecutionStatus::Completed {
        return Err(ApiError::unavailable(format!(
            "the execution {}: {}",
            if record.status == ExecutionStatus::Cancelled {
                "was cancelled"
            } else {
                "failed"
            },
            record.error.unwrap_or_default()
        )));
    }
    let stored = state.host.store().messages(&session_id).await?;
    let run: Vec<StoredMessage> = match &record.run_id {
        Some(run_id) => stored
            .into_iter()
            .filter(|message| message.run_id.as_deref() == Some(run_id.as_str()))
            .collect(),
        None => Vec::new(),
    };
    let shown = messages(&run);
    let message = shown.iter().find(|message| message.role == "user").cloned();
    let response = shown
        .iter()
        .rev()
        .find(|message| message.role == "assistant")
        .cloned();
    match (message, response) {
        (Some(message), Some(response)) => Ok(Json(SendMessageResponse { message, response })),
        _ => Err(ApiError::internal(
            "the execution completed but its messages were not found",
        )),
    }
}

/// Sends a message and streams the execution.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}/message/stream",
    tag = "sessions", operation_id = "sessions.sendMessageStream",
    params(("harnessId" = String, Path), ("sessionId" = String, Path)),
    request_body = SendMessageRequest,
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "Execution events; `id:` is the frame's seq"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn send_message_stream(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SendMessageRequest>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    check_length("content", &request.content, MAX_MESSAGE)?;
    let after = last_event_id(&headers)?;
    thread(&state, &session_id).await?;
    let id = new_execution_id();
    state
        .host
        .execute(&session_id, request.content, id.clone())
        .await?;
    Ok(execution_stream(&state, &id, after).await?.into_response())
}
