//! The tools group: the harness's own tools, and custom tools registered at runtime that call
//! a webhook.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use harness_core::kernel::Refusal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::shared::signing_secret;
use super::types::{Page, check_length};
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::state::Shared;
use crate::tools::{CustomTool, ToolHandler};

/// Where a tool comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToolOrigin {
    /// The harness's own (built-in, the mode's, the application's).
    Builtin,
    /// An MCP server's (listed once the server has started: see `mcp-servers`).
    Mcp,
    /// A skill's (skills are not provided).
    Skill,
    /// Registered at runtime.
    Custom,
}

/// A tool.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ToolInfo {
    /// Its name.
    id: String,
    name: String,
    description: String,
    source: ToolOrigin,
    #[schema(value_type = Object)]
    input_schema: Value,
}

/// `{ tool }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ToolResponse {
    tool: ToolInfo,
}

/// Tools' filter and page.
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ToolFilter {
    /// Only tools from there.
    source: Option<ToolOrigin>,
    /// 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// Default 0.
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// Registers a custom tool.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegisterToolRequest {
    /// 1-64 characters: letters, digits, `_` and `-` (what model providers take).
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]+$")]
    name: String,
    /// 1-1000 characters.
    #[schema(min_length = 1, max_length = 1000)]
    description: String,
    /// The JSON Schema of its input, an object schema.
    #[schema(value_type = Object)]
    input_schema: Value,
    handler: ToolHandler,
    /// *Extension*: the key of the calls' HMAC-SHA256 signatures (default: generated;
    /// 16 to 256 characters).
    #[serde(default)]
    #[schema(min_length = 16, max_length = 256)]
    secret: Option<String>,
}

/// *Extension*: a registered tool, with its signing key.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct RegisteredTool {
    tool: ToolInfo,
    secret: String,
}

fn custom(tool: &CustomTool) -> ToolInfo {
    ToolInfo {
        id: tool.name.clone(),
        name: tool.name.clone(),
        description: tool.description.clone(),
        source: ToolOrigin::Custom,
        input_schema: tool.input_schema.clone(),
    }
}

async fn every_tool(state: &Shared) -> Result<Vec<ToolInfo>, ApiError> {
    let mut tools: Vec<ToolInfo> = state
        .host
        .builtin_tools()
        .iter()
        .map(|spec| ToolInfo {
            id: spec.name.clone(),
            name: spec.name.clone(),
            description: spec.description.clone(),
            source: ToolOrigin::Builtin,
            input_schema: (*spec.input_schema).clone(),
        })
        .collect();
    for entry in state.host.mcp().all() {
        tools.extend(
            entry
                .client
                .status()
                .tools
                .into_iter()
                .map(|tool| ToolInfo {
                    id: tool.name.clone(),
                    name: tool.name,
                    description: tool.description,
                    source: ToolOrigin::Mcp,
                    input_schema: (*tool.input_schema).clone(),
                }),
        );
    }
    tools.extend(state.host.custom_tools().all().await?.iter().map(custom));
    Ok(tools)
}

/// Lists the tools: the harness's own, the MCP servers' (of those started), then the custom
/// ones.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/tools", tag = "tools",
    operation_id = "tools.list", params(("harnessId" = String, Path), ToolFilter),
    responses((status = 200, body = Page<ToolInfo>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(filter): ApiQuery<ToolFilter>,
) -> Result<Json<Page<ToolInfo>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = super::types::Pagination {
        limit: filter.limit,
        offset: filter.offset,
    }
    .checked()?;
    let tools = every_tool(&state)
        .await?
        .into_iter()
        .filter(|tool| filter.source.is_none_or(|source| tool.source == source))
        .collect();
    Ok(Json(Page::of(tools, page)))
}

/// A tool and its input schema.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/tools/{toolId}", tag = "tools",
    operation_id = "tools.get", params(("harnessId" = String, Path), ("toolId" = String, Path)),
    responses((status = 200, body = ToolResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_tool(
    State(state): State<Shared>,
    Path((harness_id, tool_id)): Path<(String, String)>,
) -> Result<Json<ToolResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    every_tool(&state)
        .await?
        .into_iter()
        .find(|tool| tool.id == tool_id)
        .map(|tool| Json(ToolResponse { tool }))
        .ok_or_else(|| ApiError::not_found("tool", &tool_id))
}

/// Registers a custom tool that calls a webhook; every session offers it from its next step.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/tools", tag = "tools",
    operation_id = "tools.register", params(("harnessId" = String, Path)),
    request_body = RegisterToolRequest,
    responses((status = 201, body = RegisteredTool), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
pub(crate) async fn register(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<RegisterToolRequest>,
) -> Result<(StatusCode, Json<RegisteredTool>), ApiError> {
    state.check_harness(&harness_id)?;
    check_length("name", &request.name, 64)?;
    if !request
        .name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(ApiError::invalid_field(
            "name",
            "a tool name takes letters, digits, `_` and `-` only",
        ));
    }
    check_length("description", &request.description, 1000)?;
    if request.input_schema.get("type") != Some(&Value::String("object".into()))
        || jsonschema::validator_for(&request.input_schema).is_err()
    {
        return Err(ApiError::unprocessable(
            "input_schema",
            "input_schema must be a valid JSON Schema of `\"type\": \"object\"`",
        ));
    }
    match &request.handler {
        ToolHandler::Webhook { url } => state.host.hooks().check_url("handler.url", url)?,
        ToolHandler::Command { .. } if !state.config.command_tools => {
            return Err(ApiError::forbidden(
                "command tools run programs on the server's machine; this server does not \
                 allow them (--allow-command-tools)",
            ));
        }
        ToolHandler::Command { command, args } => {
            check_length("handler.command", command, 1000)?;
            if args.len() > 100 {
                return Err(ApiError::invalid_field(
                    "handler.args",
                    "a command takes at most 100 arguments",
                ));
            }
        }
    }
    let secret = signing_secret(request.secret)?;
    if every_tool(&state)
        .await?
        .iter()
        .any(|tool| tool.name == request.name)
    {
        return Err(ApiError::conflict(format!(
            "a tool named `{}` exists",
            request.name
        )));
    }
    let tool = CustomTool {
        name: request.name,
        description: request.description,
        input_schema: request.input_schema,
        handler: request.handler,
        secret,
    };
    state.host.custom_tools().put(&tool).await?;
    Ok((
        StatusCode::CREATED,
        Json(RegisteredTool {
            tool: custom(&tool),
            secret: tool.secret,
        }),
    ))
}

/// Unregisters a custom tool (the harness's own cannot be: `409`).
#[utoipa::path(delete, path = "/v1/harnesses/{harnessId}/tools/{toolId}", tag = "tools",
    operation_id = "tools.unregister",
    params(("harnessId" = String, Path), ("toolId" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
pub(crate) async fn unregister(
    State(state): State<Shared>,
    Path((harness_id, tool_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    state.check_harness(&harness_id)?;
    if state.host.custom_tools().get(&tool_id).await?.is_some() {
        state.host.custom_tools().delete(&tool_id).await?;
        return Ok(StatusCode::NO_CONTENT);
    }
    if state
        .host
        .builtin_tools()
        .iter()
        .any(|spec| spec.name == tool_id)
    {
        return Err(ApiError::conflict(format!(
            "`{tool_id}` is one of the harness's own tools; only custom tools can be unregistered"
        )));
    }
    Err(ApiError::not_found("tool", &tool_id))
}

/// A direct call.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InvokeRequest {
    /// The tool's arguments, checked against its input schema (nothing repairs them).
    #[serde(deserialize_with = "crate::error::object_only")]
    #[schema(value_type = Object)]
    input: Option<serde_json::Map<String, Value>>,
}

/// What a direct call did.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct InvokeResponse {
    success: bool,
    /// `{ "text": ... }`: the result as a model would see it (after the result handlers, a
    /// redactor's included).
    #[schema(value_type = Object)]
    output: Value,
    duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs a direct call in the server's invoking harness; `404`, `400` or `403` if it did not
/// run.
async fn invoked(
    state: &Shared,
    tool_id: &str,
    request: InvokeRequest,
) -> Result<InvokeResponse, ApiError> {
    let input =
        Value::Object(request.input.ok_or_else(|| {
            ApiError::invalid_field("input", "a call needs its `input`, an object")
        })?);
    let harness = state.host.invoker().await?;
    let done = harness.invoke_tool(tool_id, input).await?;
    match done.refused {
        None => Ok(InvokeResponse {
            success: !done.is_error,
            output: serde_json::json!({ "text": done.content }),
            duration_ms: done.duration_ms,
            error: done.is_error.then_some(done.content),
        }),
        Some(Refusal::UnknownTool) => Err(ApiError::not_found("tool", tool_id)),
        Some(Refusal::InvalidArguments) => Err(ApiError::invalid_field("input", done.content)),
        Some(_) => Err(ApiError::forbidden(done.content)),
    }
}

/// Calls a tool directly, through the permission gate and the hooks as a model's call is (a
/// call the gate would ask a user about is refused: nobody is attached to a direct call).
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/tools/{toolId}/invoke", tag = "tools",
    operation_id = "tools.invoke",
    params(("harnessId" = String, Path), ("toolId" = String, Path)),
    request_body = InvokeRequest,
    responses((status = 200, body = InvokeResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse), (status = 503, body = ErrorResponse)))]
pub(crate) async fn invoke(
    State(state): State<Shared>,
    Path((harness_id, tool_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<InvokeRequest>,
) -> Result<Json<InvokeResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    Ok(Json(invoked(&state, &tool_id, request).await?))
}

/// Calls a tool directly and streams its outcome: `output` with the result, or `error`, then
/// `done`. A refusal before it runs is the same `4xx` as `invoke`'s. Not resumable: each
/// `POST` is a new call.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/tools/{toolId}/invoke/stream",
    tag = "tools", operation_id = "tools.invokeStream",
    params(("harnessId" = String, Path), ("toolId" = String, Path)),
    request_body = InvokeRequest,
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "`event:` the frame's type: `output` `{data}`, `error` `{code, \
                message}`, then `done` `{success, duration_ms}`"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 403, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 503, body = ErrorResponse)))]
pub(crate) async fn invoke_stream(
    State(state): State<Shared>,
    Path((harness_id, tool_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<InvokeRequest>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let done = invoked(&state, &tool_id, request).await?;
    let mut frames = vec![if done.success {
        serde_json::json!({ "type": "output", "data": done.output })
    } else {
        serde_json::json!({
            "type": "error",
            "code": "tool_failed",
            "message": done.error.unwrap_or_default(),
        })
    }];
    frames.push(serde_json::json!({
        "type": "done",
        "success": done.success,
        "duration_ms": done.duration_ms,
    }));
    Ok(crate::stream::frames_response(&frames))
}
