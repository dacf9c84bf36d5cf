//! The router: the spec's route table, each route answered by its handler or `501`.

pub(crate) mod agents;
pub(crate) mod connect;
pub(crate) mod events;
pub(crate) mod execution;
pub(crate) mod files;
pub(crate) mod hooks;
pub(crate) mod logs;
pub(crate) mod mcp;
pub(crate) mod memory;
pub(crate) mod planning;
pub(crate) mod registry;
pub(crate) mod sessions;
mod shared;
pub(crate) mod subagents;
pub(crate) mod tools;
pub(crate) mod types;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::{HeaderName, HeaderValue, Method, Uri};
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::{MethodFilter, MethodRouter, any, on};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::ServerConfig;
use crate::error::ApiError;
use crate::routes::{SPEC_ROUTES, SpecRoute};
use crate::state::Shared;

/// The largest upload body (the spec's batch limit): uploads are not held to the JSON body
/// limit.
const UPLOAD_LIMIT: usize = 100 * 1024 * 1024;

/// The spec operations this server provides, with their handlers.
fn built(route: &SpecRoute) -> Option<MethodRouter<Shared>> {
    let method = route.method;
    Some(match route.id {
        "harnesses.list" => on_method(method, registry::list),
        "harnesses.get" => on_method(method, registry::get_harness),
        "harnesses.capabilities" => on_method(method, registry::capabilities),
        "harnesses.health" => on_method(method, registry::health),
        "diagnostics.get" => on_method(method, registry::diagnostics),
        "diagnostics.logs" => on_method(method, logs::list),
        "diagnostics.streamLogs" => on_method(method, logs::stream),
        "sessions.list" => on_method(method, sessions::list),
        "sessions.create" => on_method(method, sessions::create),
        "sessions.connect" => on_method(method, connect::connect),
        "sessions.get" => on_method(method, sessions::get_session),
        "sessions.update" => on_method(method, sessions::update),
        "sessions.end" => on_method(method, sessions::end),
        "sessions.resume" => on_method(method, sessions::resume),
        "sessions.history" => on_method(method, sessions::history),
        "sessions.fork" => on_method(method, sessions::fork),
        "sessions.sendMessage" => on_method(method, sessions::send_message),
        "sessions.sendMessageStream" => on_method(method, sessions::send_message_stream),
        "execution.run" => on_method(method, execution::execute),
        "execution.stream" => on_method(method, execution::execute_stream),
        "execution.list" => on_method(method, execution::list),
        "execution.get" => on_method(method, execution::get_execution),
        "execution.attachStream" => on_method(method, execution::attach),
        "execution.cancel" => on_method(method, execution::cancel),
        "execution.result" => on_method(method, execution::result),
        "execution.listToolCalls" => on_method(method, execution::tool_calls),
        "execution.sendInput" => on_method(method, execution::send_input),
        "execution.listArtifacts" => on_method(method, execution::list_artifacts),
        "execution.downloadArtifact" => on_method(method, execution::download_artifact),
        "agents.list" => on_method(method, agents::list),
        "agents.create" => on_method(method, agents::create),
        "agents.get" => on_method(method, agents::get_agent),
        "agents.update" => on_method(method, agents::update),
        "agents.delete" => on_method(method, agents::delete),
        "agents.clone" => on_method(method, agents::clone_agent),
        "memory.get" => on_method(method, agents::memory),
        "memory.listBlocks" => on_method(method, agents::list_blocks),
        "memory.getBlock" => on_method(method, agents::get_block),
        "memory.updateBlock" => on_method(method, agents::update_block),
        "memory.createBlock" => on_method(method, agents::create_block),
        "memory.deleteBlock" => on_method(method, agents::delete_block),
        "memory.search" => on_method(method, memory::search),
        "memory.getArchive" => on_method(method, memory::archive),
        "memory.addToArchive" => on_method(method, memory::add_to_archive),
        "memory.export" => on_method(method, memory::export),
        "memory.import" => {
            on_method(method, memory::import).layer(DefaultBodyLimit::max(UPLOAD_LIMIT))
        }
        "mcp.list" => on_method(method, mcp::list),
        "mcp.connect" => on_method(method, mcp::connect),
        "mcp.get" => on_method(method, mcp::get_server),
        "mcp.update" => on_method(method, mcp::update),
        "mcp.disconnect" => on_method(method, mcp::disconnect),
        "mcp.listTools" => on_method(method, mcp::list_tools),
        "mcp.listResources" => on_method(method, mcp::list_resources),
        "mcp.listPrompts" => on_method(method, mcp::list_prompts),
        "mcp.health" => on_method(method, mcp::health),
        "tools.list" => on_method(method, tools::list),
        "tools.get" => on_method(method, tools::get_tool),
        "tools.register" => on_method(method, tools::register),
        "tools.unregister" => on_method(method, tools::unregister),
        "tools.invoke" => on_method(method, tools::invoke),
        "tools.invokeStream" => on_method(method, tools::invoke_stream),
        "planning.get" => on_method(method, planning::plan),
        "planning.listTasks" => on_method(method, planning::list_tasks),
        "planning.update" => on_method(method, planning::update),
        "planning.updateTask" => on_method(method, planning::update_task),
        "planning.stream" => on_method(method, planning::stream),
        "files.list" => on_method(method, files::list),
        "files.mkdir" => on_method(method, files::mkdir),
        "files.search" => on_method(method, files::search),
        "files.upload" => {
            on_method(method, files::upload).layer(DefaultBodyLimit::max(UPLOAD_LIMIT))
        }
        "files.uploadBatch" => {
            on_method(method, files::upload_batch).layer(DefaultBodyLimit::max(UPLOAD_LIMIT))
        }
        "files.downloadBatch" => on_method(method, files::download_batch),
        // Answered by the catch-all `files/{*path}` (see `router`).
        "files.read" | "files.write" | "files.delete" | "files.download" => {
            on_method(method, files::catch_all)
        }
        "subagents.list" => on_method(method, subagents::list),
        "subagents.spawn" => on_method(method, subagents::spawn),
        "subagents.get" => on_method(method, subagents::get_subagent),
        "subagents.terminate" => on_method(method, subagents::terminate),
        "subagents.delegate" => on_method(method, subagents::delegate),
        "subagents.delegateStream" => on_method(method, subagents::delegate_stream),
        "subagents.result" => on_method(method, subagents::result),
        "subagents.attachStream" => on_method(method, subagents::attach),
        "hooks.listEvents" => on_method(method, events::list),
        "hooks.streamEvents" => on_method(method, events::stream),
        "webhooks.register" => on_method(method, events::register),
        "webhooks.list" => on_method(method, events::list_webhooks),
        "webhooks.delete" => on_method(method, events::delete_webhook),
        "hooks.list" => on_method(method, hooks::list),
        "hooks.register" => on_method(method, hooks::register),
        "hooks.get" => on_method(method, hooks::get_hook),
        "hooks.update" => on_method(method, hooks::update),
        "hooks.unregister" => on_method(method, hooks::unregister),
        _ => return None,
    })
}

/// True if this server provides the spec operation `id`.
pub(crate) fn is_built(route: &SpecRoute) -> bool {
    built(route).is_some()
}

fn filter(method: &str) -> MethodFilter {
    match method {
        "POST" => MethodFilter::POST,
        "PUT" => MethodFilter::PUT,
        "PATCH" => MethodFilter::PATCH,
        "DELETE" => MethodFilter::DELETE,
        _ => MethodFilter::GET,
    }
}

fn on_method<H, T>(method: &str, handler: H) -> MethodRouter<Shared>
where
    H: Handler<T, Shared>,
    T: 'static,
{
    on(filter(method), handler)
}

/// The routes under `/v1`, behind the token and the body limit.
pub(crate) fn router(state: &Shared) -> Router<Shared> {
    let mut paths: BTreeMap<String, MethodRouter<Shared>> = BTreeMap::new();
    for route in SPEC_ROUTES {
        let path = route.router_path();
        // `files/{path}`, `files/{path}/download`: one catch-all answers them all, every method.
        if path.contains("{*") {
            paths
                .entry(path.clone())
                .or_insert_with(|| any(files::catch_all));
            continue;
        }
        let answer = built(route).unwrap_or_else(|| not_built(route.method, route.id));
        let merged = match paths.remove(&path) {
            Some(existing) => existing.merge(answer),
            None => answer,
        };
        paths.insert(path, merged);
    }
    let mut api = Router::new();
    for (path, methods) in paths {
        api = api.route(&path, methods);
    }
    let token: Arc<str> = Arc::from(state.config.token.as_str());
    api.method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            token,
            crate::auth::require_token,
        ))
        .layer(DefaultBodyLimit::max(state.config.body_limit))
}

/// Cross-origin access for the configured origins; none without any.
pub(crate) fn cors(config: &ServerConfig) -> Option<CorsLayer> {
    let origins: Vec<HeaderValue> = config
        .cors_origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ])
            .allow_headers([
                axum::http::header::AUTHORIZATION,
                axum::http::header::CONTENT_TYPE,
                HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([
                axum::http::header::LOCATION,
                HeaderName::from_static("x-execution-id"),
            ]),
    )
}

/// `501` for a spec operation this server does not provide.
fn not_built(method: &str, id: &'static str) -> MethodRouter<Shared> {
    on_method(method, move || async move { ApiError::not_built(id) })
}

/// `404` with the spec's body for a path no route answers.
pub(crate) async fn no_route(uri: Uri) -> impl IntoResponse {
    ApiError::no_route(uri.path())
}

async fn method_not_allowed(method: Method, uri: Uri) -> impl IntoResponse {
    ApiError::method_not_allowed(method.as_str(), uri.path())
}
