//! The registry group: the one harness this server hosts.

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use harness_tags::util::rfc3339;
use serde::Serialize;
use utoipa::ToSchema;

use super::is_built;
use super::types::{
    CapabilitiesResponse, CapabilityManifest, DomainCapability, HarnessInfo, HarnessResponse,
    HealthCheck, HealthResponse, Page, Pagination,
};
use crate::error::{ApiError, ApiQuery, ErrorResponse};
use crate::routes::SPEC_ROUTES;
use crate::state::Shared;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the server provides of a domain: its spec operations built, and those not.
fn domain(groups: &[&str]) -> DomainCapability {
    let (operations, missing): (Vec<_>, Vec<_>) = SPEC_ROUTES
        .iter()
        .filter(|route| groups.contains(&route.group()))
        .partition(|route| is_built(route));
    let name = |route: &&crate::SpecRoute| route.id.to_owned();
    DomainCapability {
        supported: !operations.is_empty(),
        operations: operations.iter().map(name).collect(),
        limitations: (!missing.is_empty()).then(|| {
            missing
                .iter()
                .map(|route| format!("{} is not provided (501)", route.id))
                .collect()
        }),
    }
}

pub(crate) fn manifest() -> CapabilityManifest {
    CapabilityManifest {
        agents: domain(&["agents"]),
        skills: domain(&["skills"]),
        mcp: domain(&["mcp"]),
        execution: domain(&["execution"]),
        sessions: domain(&["sessions"]),
        memory: domain(&["memory"]),
        subagents: domain(&["subagents"]),
        files: domain(&["files"]),
        hooks: domain(&["hooks", "webhooks"]),
        planning: domain(&["planning"]),
        models: DomainCapability {
            supported: false,
            operations: Vec::new(),
            limitations: Some(vec![
                "models are chosen per execution with `model`".to_owned(),
            ]),
        },
    }
}

fn info(state: &Shared) -> HarnessInfo {
    let started = rfc3339(state.started_at);
    HarnessInfo {
        id: state.config.harness_id.clone(),
        name: state.config.harness_id.clone(),
        vendor: "harness-rs".to_owned(),
        description: "An agent harness served over the Open Harness API".to_owned(),
        execution_type: "sdk".to_owned(),
        status: "active".to_owned(),
        capabilities: manifest(),
        created_at: started.clone(),
        updated_at: started,
    }
}

/// Lists the harnesses: the one this server hosts.
#[utoipa::path(get, path = "/v1/harnesses", tag = "registry", operation_id = "harnesses.list",
    params(Pagination),
    responses((status = 200, body = Page<HarnessInfo>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    ApiQuery(page): ApiQuery<Pagination>,
) -> Result<Json<Page<HarnessInfo>>, ApiError> {
    Ok(Json(Page::of(vec![info(&state)], page.checked()?)))
}

/// The harness.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}", tag = "registry",
    operation_id = "harnesses.get", params(("harnessId" = String, Path)),
    responses((status = 200, body = HarnessResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_harness(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
) -> Result<Json<HarnessResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    Ok(Json(HarnessResponse {
        harness: info(&state),
    }))
}

/// What this server provides, domain by domain.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/capabilities", tag = "registry",
    operation_id = "harnesses.capabilities", params(("harnessId" = String, Path)),
    responses((status = 200, body = CapabilitiesResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn capabilities(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
) -> Result<Json<CapabilitiesResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    Ok(Json(CapabilitiesResponse {
        harness_id: state.config.harness_id.clone(),
        harness_name: state.config.harness_id.clone(),
        version: VERSION.to_owned(),
        capabilities: manifest(),
    }))
}

/// Whether the store answers.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/health", tag = "registry",
    operation_id = "harnesses.health", params(("harnessId" = String, Path)),
    responses((status = 200, body = HealthResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn health(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
) -> Result<Json<HealthResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let started = Instant::now();
    let store = state.host.store().event_log("health").await;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let check = match store {
        Ok(_) => HealthCheck {
            name: "store".to_owned(),
            status: "pass".to_owned(),
            message: None,
        },
        Err(error) => HealthCheck {
            name: "store".to_owned(),
            status: "fail".to_owned(),
            message: Some(error.to_string()),
        },
    };
    let status = if check.status == "pass" {
        "healthy"
    } else {
        "unhealthy"
    };
    Ok(Json(HealthResponse {
        status: status.to_owned(),
        latency_ms,
        version: VERSION.to_owned(),
        checks: vec![check],
    }))
}

/// Diagnostics of the server.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct Diagnostics {
    harness_id: String,
    version: String,
    uptime_seconds: u64,
    /// The process's resident memory (Linux; 0 elsewhere).
    memory_usage_mb: f64,
    /// Sessions with a harness in this process.
    active_sessions: u64,
    /// Executions this process runs or has queued.
    active_executions: u64,
    /// MCP servers start per session, with its harness: not counted here (0).
    connected_mcp_servers: u64,
    /// Skills are not provided (0).
    installed_skills: u64,
    /// The server's settings (never the token).
    #[schema(value_type = Object)]
    config: serde_json::Value,
}

/// Resident memory in MiB, from `/proc/self/statm` (0 where there is none).
fn resident_mb() -> f64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<f64>().ok())
        .unwrap_or(0.0);
    (pages * 4096.0 / (1024.0 * 1024.0) * 10.0).round() / 10.0
}

/// The server's state: uptime, memory, sessions and executions, settings.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/diagnostics", tag = "diagnostics",
    operation_id = "diagnostics.get", params(("harnessId" = String, Path)),
    responses((status = 200, body = Diagnostics), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn diagnostics(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
) -> Result<Json<Diagnostics>, ApiError> {
    state.check_harness(&harness_id)?;
    let (sessions, executions) = state.host.load().await;
    let config = &state.config;
    let uptime_ms = harness_tags::util::unix_ms().saturating_sub(state.started_at);
    Ok(Json(Diagnostics {
        harness_id: config.harness_id.clone(),
        version: VERSION.to_owned(),
        uptime_seconds: u64::try_from(uptime_ms / 1000).unwrap_or(0),
        memory_usage_mb: resident_mb(),
        active_sessions: sessions as u64,
        active_executions: executions as u64,
        connected_mcp_servers: 0,
        installed_skills: 0,
        config: serde_json::json!({
            "input_timeout_seconds": config.input_timeout.as_secs(),
            "retention_seconds": config.retention.as_secs(),
            "idle_timeout_seconds": config.idle_timeout.as_secs(),
            "body_limit_bytes": config.body_limit,
            "cors_origins": config.cors_origins,
            "loopback_callbacks": config.loopback_callbacks,
        }),
    }))
}
