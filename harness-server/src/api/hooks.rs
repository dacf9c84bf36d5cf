//! The hooks group: webhooks called before and after tools, and when executions end or fail.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::shared::signing_secret;
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::hooks::{Hook, HookEvent, HookHandler};
use crate::state::Shared;

/// Hooks' filter.
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HookFilter {
    /// Only hooks of this event.
    event: Option<HookEvent>,
}

/// `{ hooks }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct HookList {
    hooks: Vec<Hook>,
}

/// `{ hook }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct HookResponse {
    hook: Hook,
}

/// Registers a hook.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegisterHookRequest {
    event: HookEvent,
    handler: HookHandler,
    /// Default true.
    #[serde(default)]
    enabled: Option<bool>,
    /// *Extension*: the signing key (default: generated; 16 to 256 characters).
    #[serde(default)]
    #[schema(min_length = 16, max_length = 256)]
    secret: Option<String>,
}

/// Changes a hook.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UpdateHookRequest {
    #[serde(deserialize_with = "crate::error::object_only")]
    handler: Option<HookHandler>,
    enabled: Option<bool>,
}

fn check(state: &Shared, handler: &HookHandler) -> Result<(), ApiError> {
    let HookHandler::Webhook { url } = handler;
    state.host.hooks().check_url("handler.url", url)
}

/// Lists the hooks.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/hooks", tag = "hooks",
    operation_id = "hooks.list", params(("harnessId" = String, Path), HookFilter),
    responses((status = 200, body = HookList), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(filter): ApiQuery<HookFilter>,
) -> Result<Json<HookList>, ApiError> {
    state.check_harness(&harness_id)?;
    let hooks = state
        .host
        .hooks()
        .all()
        .await?
        .into_iter()
        .filter(|hook| filter.event.is_none_or(|event| hook.event == event))
        .collect();
    Ok(Json(HookList { hooks }))
}

/// Registers a hook.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/hooks", tag = "hooks",
    operation_id = "hooks.register", params(("harnessId" = String, Path)),
    request_body = RegisterHookRequest,
    responses((status = 201, body = HookResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn register(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<RegisterHookRequest>,
) -> Result<(StatusCode, Json<HookResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    check(&state, &request.handler)?;
    let secret = signing_secret(request.secret)?;
    let hook = Hook {
        id: format!("hook_{}", harness_core::harness::default_id()),
        event: request.event,
        handler: request.handler,
        enabled: request.enabled.unwrap_or(true),
        secret,
    };
    state.host.hooks().put(&hook).await?;
    Ok((StatusCode::CREATED, Json(HookResponse { hook })))
}

/// A hook.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/hooks/{hookId}", tag = "hooks",
    operation_id = "hooks.get", params(("harnessId" = String, Path), ("hookId" = String, Path)),
    responses((status = 200, body = HookResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_hook(
    State(state): State<Shared>,
    Path((harness_id, hook_id)): Path<(String, String)>,
) -> Result<Json<HookResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let hook = state.host.hooks().get(&hook_id).await?;
    Ok(Json(HookResponse { hook }))
}

/// Changes a hook's handler or enables and disables it.
#[utoipa::path(patch, path = "/v1/harnesses/{harnessId}/hooks/{hookId}", tag = "hooks",
    operation_id = "hooks.update", params(("harnessId" = String, Path), ("hookId" = String, Path)),
    request_body = UpdateHookRequest,
    responses((status = 200, body = HookResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn update(
    State(state): State<Shared>,
    Path((harness_id, hook_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<UpdateHookRequest>,
) -> Result<Json<HookResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let mut hook = state.host.hooks().get(&hook_id).await?;
    if let Some(handler) = request.handler {
        check(&state, &handler)?;
        hook.handler = handler;
    }
    if let Some(enabled) = request.enabled {
        hook.enabled = enabled;
    }
    state.host.hooks().put(&hook).await?;
    Ok(Json(HookResponse { hook }))
}

/// Removes a hook.
#[utoipa::path(delete, path = "/v1/harnesses/{harnessId}/hooks/{hookId}", tag = "hooks",
    operation_id = "hooks.unregister",
    params(("harnessId" = String, Path), ("hookId" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn unregister(
    State(state): State<Shared>,
    Path((harness_id, hook_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    state.check_harness(&harness_id)?;
    state.host.hooks().delete(&hook_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
