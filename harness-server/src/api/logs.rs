//! The logs routes of the diagnostics group: the server's kept `tracing` events (see
//! [`crate::ServerLogs`]), newest first, or streamed as they come.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

use super::types::{Page, Pagination, since};
use crate::error::{ApiError, ApiQuery, ErrorResponse};
use crate::logs::{LogEntry, LogLevel};
use crate::state::Shared;
use crate::stream::{last_event_id, log_stream};

/// Which entries to list.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LogFilter {
    /// Entries at this level and above (default: all).
    level: Option<LogLevel>,
    /// Entries logged at or after this time (RFC 3339).
    #[param(format = DateTime)]
    since: Option<String>,
    /// 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/logs", tag = "diagnostics",
    operation_id = "diagnostics.logs", params(("harnessId" = String, Path), LogFilter),
    responses((status = 200, body = Page<LogEntry>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(filter): ApiQuery<LogFilter>,
) -> Result<Json<Page<LogEntry>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = Pagination {
        limit: filter.limit,
        offset: filter.offset,
    }
    .checked()?;
    let since = since(filter.since.as_deref())?.unwrap_or(i64::MIN);
    let minimum = filter.level.unwrap_or(LogLevel::Debug);
    let entries = state
        .config
        .logs
        .after(0)
        .into_iter()
        .rev()
        .filter(|record| record.level >= minimum && record.at >= since)
        .map(LogEntry::from)
        .collect();
    Ok(Json(Page::of(entries, page)))
}

/// Which entries to stream.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct StreamFilter {
    /// Entries at this level and above (default: all).
    level: Option<LogLevel>,
}

#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/logs/stream", tag = "diagnostics",
    operation_id = "diagnostics.streamLogs",
    params(("harnessId" = String, Path), StreamFilter,
        ("Last-Event-ID" = Option<String>, Header, pattern = "^[0-9]{0,19}$", nullable = false,
            description = "The id of the last entry received: the stream goes on after it")),
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "`event: log`, `id:` the entry's number, `data:` a LogEntry; the \
                kept entries first, then each new one"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn stream(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(filter): ApiQuery<StreamFilter>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let after = last_event_id(&headers)?;
    Ok(log_stream(
        &state,
        after,
        filter.level.unwrap_or(LogLevel::Debug),
    ))
}
