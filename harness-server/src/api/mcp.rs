//! The MCP group: the servers every session shares (see [`crate::mcp`]), what they offer and
//! whether they answer.
//!
//! Over the API only streamable HTTP servers connect (`https`, or loopback `http` behind
//! `--allow-loopback-callbacks`): a stdio server runs a command on the server's machine, which
//! is configured in `harness.toml`, not bought with an API token. Configured servers are listed
//! and inspected, not changed (`409`).

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use harness_mcp::{McpState, McpStatus};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use super::types::{Page, Pagination};
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::mcp::McpEntry;
use crate::state::Shared;

/// How a server is reached.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Transport {
    /// A process the server started, spoken to over its standard input and output.
    Stdio {
        command: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
    },
    /// Streamable HTTP.
    Http { url: String },
}

/// The transport the document offers: streamable HTTP (see the module docs).
fn http_transport() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["http"])),
        )
        .required("type")
        .property(
            "url",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(utoipa::openapi::SchemaFormat::Custom(
                    "uri".to_owned(),
                )))
                .description(Some(
                    "`https`, or loopback `http` with `--allow-loopback-callbacks`",
                )),
        )
        .required("url")
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ))
        .build()
}

/// `auto_reconnect` as the server takes it: `true` or left out.
fn true_only() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Boolean, Type::Null]))
        .enum_values(Some([Some(true), None]))
        .description(Some(
            "Only `true` (the default): a server that stops is started again when next needed",
        ))
        .build()
}

/// Where a server stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum McpServerState {
    /// Running, what it offers listed.
    Connected,
    /// Not started yet (it starts when first needed), disabled or stopped.
    Disconnected,
    /// It failed; `error` says why.
    Error,
}

/// A tool of a server.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpTool {
    /// Its name on the server.
    name: String,
    description: String,
    #[schema(value_type = Object)]
    input_schema: Value,
    /// *Extension*: its name for the model and in `tools` (prefixed with the server's).
    tool_id: String,
}

/// A resource of a server.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpResource {
    uri: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    /// *Extension*: true if `uri` is a URI template.
    template: bool,
}

/// An argument of a prompt.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct PromptArgument {
    name: String,
    /// Not kept by the client: empty.
    description: String,
    required: bool,
}

/// A prompt of a server.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpPrompt {
    name: String,
    description: String,
    arguments: Vec<PromptArgument>,
}

/// A server, with what it offered when last listed.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpServerView {
    id: String,
    name: String,
    transport: Transport,
    status: McpServerState,
    tools: Vec<McpTool>,
    resources: Vec<McpResource>,
    prompts: Vec<McpPrompt>,
    /// *Extension*: from the server's configuration (not changed over the API).
    configured: bool,
    /// *Extension*: why it failed, with `status` `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `{ server }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpServerResponse {
    server: McpServerView,
}

/// `{ tools }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpToolList {
    tools: Vec<McpTool>,
}

/// `{ resources }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpResourceList {
    resources: Vec<McpResource>,
}

/// `{ prompts }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpPromptList {
    prompts: Vec<McpPrompt>,
}

/// Whether a server answers.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct McpHealth {
    status: Health,
    /// How long starting it (if it was not running) and listing what it offers took.
    latency_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
}

/// A server's health.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Health {
    Healthy,
    Unhealthy,
}

/// The name pattern of harness-mcp: it prefixes the tool names the model sees.
const NAME_PATTERN: &str = "^[A-Za-z0-9_-]{1,32}$";

/// Connects a server.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConnectRequest {
    /// 1-32 letters, digits, `_` or `-`: it prefixes the names of the server's tools.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,32}$")]
    name: String,
    #[serde(default, deserialize_with = "crate::error::object_only")]
    #[schema(schema_with = http_transport)]
    transport: Option<Map<String, Value>>,
    #[serde(default)]
    #[schema(schema_with = true_only)]
    auto_reconnect: Option<bool>,
}

/// Changes a server connected over the API.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UpdateRequest {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,32}$")]
    name: Option<String>,
    #[serde(deserialize_with = "crate::error::object_only")]
    #[schema(schema_with = http_transport)]
    transport: Option<Map<String, Value>>,
    #[schema(schema_with = true_only)]
    auto_reconnect: Option<bool>,
}

/// Servers' filter and page.
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct McpFilter {
    /// Only servers in this state.
    status: Option<McpServerState>,
    /// 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// Default 0.
    #[param(minimum = 0)]
    offset: Option<i64>,
}

fn tools(status: &McpStatus) -> Vec<McpTool> {
    status
        .tools
        .iter()
        .map(|tool| McpTool {
            name: tool.server_tool.clone(),
            description: tool.description.clone(),
            input_schema: (*tool.input_schema).clone(),
            tool_id: tool.name.clone(),
        })
        .collect()
}

fn resources(status: &McpStatus) -> Vec<McpResource> {
    status
        .resources
        .iter()
        .map(|resource| McpResource {
            uri: resource.uri.clone(),
            name: resource.name.clone(),
            mime_type: resource.mime_type.clone(),
            template: resource.template,
        })
        .collect()
}

fn prompts(status: &McpStatus) -> Vec<McpPrompt> {
    status
        .prompts
        .iter()
        .map(|prompt| McpPrompt {
            name: prompt.name.clone(),
            description: prompt.description.clone().unwrap_or_default(),
            arguments: prompt
                .arguments
                .iter()
                .map(|(name, required)| PromptArgument {
                    name: name.clone(),
                    description: String::new(),
                    required: *required,
                })
                .collect(),
        })
        .collect()
}

fn view(entry: &McpEntry, status: &McpStatus) -> McpServerView {
    let (state, error) = match &status.state {
        McpState::Connected => (McpServerState::Connected, None),
        McpState::Failed { reason } => (McpServerState::Error, Some(reason.clone())),
        _ => (McpServerState::Disconnected, None),
    };
    let config = entry.client.server().config();
    let transport = match (&config.command, &config.url) {
        (Some(command), _) => Transport::Stdio {
            command: command.clone(),
            args: config.args.clone(),
        },
        (None, url) => Transport::Http {
            url: url.clone().unwrap_or_default(),
        },
    };
    McpServerView {
        id: entry.id.clone(),
        name: entry.client.name().to_owned(),
        transport,
        status: state,
        tools: tools(status),
        resources: resources(status),
        prompts: prompts(status),
        configured: entry.configured,
        error,
    }
}

/// The URL of a requested transport, or why it is refused.
fn requested_url(state: &Shared, transport: Map<String, Value>) -> Result<String, ApiError> {
    let text = |key: &str| transport.get(key).and_then(Value::as_str);
    match text("type") {
        Some("http") => {}
        Some("stdio") => {
            return Err(ApiError::forbidden(
                "a stdio server runs a command on the server's machine: configure it in \
                 harness.toml",
            ));
        }
        Some("sse") => {
            return Err(ApiError::invalid_field(
                "transport.type",
                "the legacy SSE transport is not supported; connect the server's streamable \
                 HTTP endpoint (`type: http`)",
            ));
        }
        _ => {
            return Err(ApiError::invalid_field(
                "transport.type",
                "a transport's type is `http` (streamable HTTP)",
            ));
        }
    }
    if let Some(extra) = transport.keys().find(|key| *key != "type" && *key != "url") {
        return Err(ApiError::invalid_field(
            "transport",
            format!("an http transport has `type` and `url`, not `{extra}`"),
        ));
    }
    let url = text("url")
        .ok_or_else(|| ApiError::invalid_field("transport.url", "a transport needs its `url`"))?;
    state.host.hooks().check_url("transport.url", url)?;
    Ok(url.to_owned())
}

fn check_name(name: &str) -> Result<(), ApiError> {
    let valid = (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(ApiError::invalid_field(
            "name",
            format!("a name matches {NAME_PATTERN}: it prefixes the server's tool names"),
        ))
    }
}

fn check_reconnect(auto_reconnect: Option<bool>) -> Result<(), ApiError> {
    if auto_reconnect == Some(false) {
        return Err(ApiError::invalid_field(
            "auto_reconnect",
            "a server that stops is always started again when next needed",
        ));
    }
    Ok(())
}

#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/mcp-servers", tag = "mcp",
    operation_id = "mcp.list", params(("harnessId" = String, Path), McpFilter),
    responses((status = 200, body = Page<McpServerView>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(filter): ApiQuery<McpFilter>,
) -> Result<Json<Page<McpServerView>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = Pagination {
        limit: filter.limit,
        offset: filter.offset,
    }
    .checked()?;
    let servers = state
        .host
        .mcp()
        .all()
        .iter()
        .map(|entry| view(entry, &entry.client.status()))
        .filter(|server| filter.status.is_none_or(|status| server.status == status))
        .collect();
    Ok(Json(Page::of(servers, page)))
}

/// Connects a streamable HTTP server; it starts when a run or a route first needs it.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/mcp-servers", tag = "mcp",
    operation_id = "mcp.connect", params(("harnessId" = String, Path)),
    request_body = ConnectRequest,
    responses((status = 201, body = McpServerResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn connect(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<ConnectRequest>,
) -> Result<(StatusCode, Json<McpServerResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    check_name(&request.name)?;
    check_reconnect(request.auto_reconnect)?;
    let transport = request
        .transport
        .ok_or_else(|| ApiError::invalid_field("transport", "a server needs its `transport`"))?;
    let url = requested_url(&state, transport)?;
    let entry = state.host.mcp().connect(request.name, url).await?;
    Ok((
        StatusCode::CREATED,
        Json(McpServerResponse {
            server: view(&entry, &entry.client.status()),
        }),
    ))
}

#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/mcp-servers/{serverId}", tag = "mcp",
    operation_id = "mcp.get", params(("harnessId" = String, Path), ("serverId" = String, Path)),
    responses((status = 200, body = McpServerResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_server(
    State(state): State<Shared>,
    Path((harness_id, server_id)): Path<(String, String)>,
) -> Result<Json<McpServerResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let entry = state.host.mcp().get(&server_id)?;
    Ok(Json(McpServerResponse {
        server: view(&entry, &entry.client.status()),
    }))
}

/// Renames a server connected over the API or points it elsewhere; it restarts when next
/// needed.
#[utoipa::path(patch, path = "/v1/harnesses/{harnessId}/mcp-servers/{serverId}", tag = "mcp",
    operation_id = "mcp.update",
    params(("harnessId" = String, Path), ("serverId" = String, Path)),
    request_body = UpdateRequest,
    responses((status = 200, body = McpServerResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn update(
    State(state): State<Shared>,
    Path((harness_id, server_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<UpdateRequest>,
) -> Result<Json<McpServerResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    if let Some(name) = &request.name {
        check_name(name)?;
    }
    check_reconnect(request.auto_reconnect)?;
    let url = request
        .transport
        .map(|transport| requested_url(&state, transport))
        .transpose()?;
    let entry = state
        .host
        .mcp()
        .update(&server_id, request.name, url)
        .await?;
    Ok(Json(McpServerResponse {
        server: view(&entry, &entry.client.status()),
    }))
}

/// Disconnects a server connected over the API; sessions stop offering its tools.
#[utoipa::path(delete, path = "/v1/harnesses/{harnessId}/mcp-servers/{serverId}", tag = "mcp",
    operation_id = "mcp.disconnect",
    params(("harnessId" = String, Path), ("serverId" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
pub(crate) async fn disconnect(
    State(state): State<Shared>,
    Path((harness_id, server_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    state.check_harness(&harness_id)?;
    state.host.mcp().disconnect(&server_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The server, started if it is not running, and what it offers now.
async fn listed(state: &Shared, server_id: &str) -> Result<McpStatus, ApiError> {
    let mcp = state.host.mcp();
    let entry = mcp.get(server_id)?;
    mcp.refresh(&entry).await
}

/// The server's tools (it starts if it is not running).
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/mcp-servers/{serverId}/tools", tag = "mcp",
    operation_id = "mcp.listTools",
    params(("harnessId" = String, Path), ("serverId" = String, Path)),
    responses((status = 200, body = McpToolList), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 503, body = ErrorResponse)))]
pub(crate) async fn list_tools(
    State(state): State<Shared>,
    Path((harness_id, server_id)): Path<(String, String)>,
) -> Result<Json<McpToolList>, ApiError> {
    state.check_harness(&harness_id)?;
    let status = listed(&state, &server_id).await?;
    Ok(Json(McpToolList {
        tools: tools(&status),
    }))
}

/// The server's resources and resource templates (it starts if it is not running).
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/mcp-servers/{serverId}/resources",
    tag = "mcp", operation_id = "mcp.listResources",
    params(("harnessId" = String, Path), ("serverId" = String, Path)),
    responses((status = 200, body = McpResourceList), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 503, body = ErrorResponse)))]
pub(crate) async fn list_resources(
    State(state): State<Shared>,
    Path((harness_id, server_id)): Path<(String, String)>,
) -> Result<Json<McpResourceList>, ApiError> {
    state.check_harness(&harness_id)?;
    let status = listed(&state, &server_id).await?;
    Ok(Json(McpResourceList {
        resources: resources(&status),
    }))
}

/// The server's prompts (it starts if it is not running).
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/mcp-servers/{serverId}/prompts",
    tag = "mcp", operation_id = "mcp.listPrompts",
    params(("harnessId" = String, Path), ("serverId" = String, Path)),
    responses((status = 200, body = McpPromptList), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 503, body = ErrorResponse)))]
pub(crate) async fn list_prompts(
    State(state): State<Shared>,
    Path((harness_id, server_id)): Path<(String, String)>,
) -> Result<Json<McpPromptList>, ApiError> {
    state.check_harness(&harness_id)?;
    let status = listed(&state, &server_id).await?;
    Ok(Json(McpPromptList {
        prompts: prompts(&status),
    }))
}

/// Starts the server if it is not running and lists what it offers: `healthy` if that worked.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/mcp-servers/{serverId}/health",
    tag = "mcp", operation_id = "mcp.health",
    params(("harnessId" = String, Path), ("serverId" = String, Path)),
    responses((status = 200, body = McpHealth), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn health(
    State(state): State<Shared>,
    Path((harness_id, server_id)): Path<(String, String)>,
) -> Result<Json<McpHealth>, ApiError> {
    state.check_harness(&harness_id)?;
    let mcp = state.host.mcp();
    let entry = mcp.get(&server_id)?;
    let started = Instant::now();
    let outcome = mcp.refresh(&entry).await;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let last_error = match outcome {
        Ok(status) => match status.state {
            McpState::Connected => None,
            McpState::Failed { reason } => Some(reason),
            other => Some(format!("the server is not running ({other:?})")),
        },
        Err(error) => Some(error.message().to_owned()),
    };
    Ok(Json(McpHealth {
        status: if last_error.is_none() {
            Health::Healthy
        } else {
            Health::Unhealthy
        },
        latency_ms,
        last_error,
    }))
}
