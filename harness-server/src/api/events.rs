//! The events and webhooks routes of the hooks group: the server's journal (see
//! [`crate::journal`]) listed or streamed, and webhooks that receive its events.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use harness_tags::util::{rfc3339, unix_ms};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::shared::signing_secret;
use super::types::{Page, Pagination, since};
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::hooks::Webhook;
use crate::state::Shared;
use crate::stream::{journal_stream, last_event_id};

/// The most events a list reads (the newest).
const MAX_LISTED: usize = 10_000;

/// A journal event.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct StoredEvent {
    /// A number, as the stream's `id:`.
    id: String,
    #[serde(rename = "type")]
    kind: String,
    #[schema(value_type = Object)]
    data: Value,
    timestamp: String,
}

/// A journal event's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ToSchema)]
pub(crate) enum EventType {
    #[serde(rename = "execution.started")]
    ExecutionStarted,
    #[serde(rename = "execution.completed")]
    ExecutionCompleted,
    #[serde(rename = "session.created")]
    SessionCreated,
    #[serde(rename = "session.ended")]
    SessionEnded,
    #[serde(rename = "hook.triggered")]
    HookTriggered,
    #[serde(rename = "error")]
    Error,
}

impl EventType {
    /// Every type the journal records.
    const ALL: [EventType; 6] = [
        EventType::ExecutionStarted,
        EventType::ExecutionCompleted,
        EventType::SessionCreated,
        EventType::SessionEnded,
        EventType::HookTriggered,
        EventType::Error,
    ];

    fn name(self) -> &'static str {
        match self {
            EventType::ExecutionStarted => "execution.started",
            EventType::ExecutionCompleted => "execution.completed",
            EventType::SessionCreated => "session.created",
            EventType::SessionEnded => "session.ended",
            EventType::HookTriggered => "hook.triggered",
            EventType::Error => "error",
        }
    }
}

/// Which events to list.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventFilter {
    /// Only events of this type.
    #[serde(rename = "type")]
    #[param(rename = "type", inline)]
    kind: Option<EventType>,
    /// Events at or after this time (RFC 3339).
    #[param(format = DateTime)]
    since: Option<String>,
    /// 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// Which events to stream.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct StreamFilter {
    /// Comma-separated event types (default: all).
    events: Option<String>,
}

fn check_type(field: &str, kind: &str) -> Result<(), ApiError> {
    if EventType::ALL.iter().any(|known| known.name() == kind) {
        return Ok(());
    }
    let names: Vec<&str> = EventType::ALL.iter().map(|known| known.name()).collect();
    Err(ApiError::invalid_field(
        field,
        format!("`{kind}` is not an event type: {}", names.join(", ")),
    ))
}

/// The server's recent events (kept for the server's retention), newest first.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/events", tag = "hooks",
    operation_id = "hooks.listEvents", params(("harnessId" = String, Path), EventFilter),
    responses((status = 200, body = Page<StoredEvent>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(filter): ApiQuery<EventFilter>,
) -> Result<Json<Page<StoredEvent>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = Pagination {
        limit: filter.limit,
        offset: filter.offset,
    }
    .checked()?;
    let since = since(filter.since.as_deref())?.unwrap_or(0);
    let mut events = state.host.journal().after(0, since, usize::MAX).await?;
    events.retain(|event| {
        event.at >= since && filter.kind.is_none_or(|kind| kind.name() == event.kind)
    });
    let events = events
        .into_iter()
        .rev()
        .take(MAX_LISTED)
        .map(|event| StoredEvent {
            id: event.id.to_string(),
            kind: event.kind,
            data: event.data,
            timestamp: rfc3339(event.at),
        })
        .collect();
    Ok(Json(Page::of(events, page)))
}

/// The server's events as they happen, after `Last-Event-ID` (also after a restart, within
/// the retention).
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/events/stream", tag = "hooks",
    operation_id = "hooks.streamEvents",
    params(("harnessId" = String, Path), StreamFilter,
        ("Last-Event-ID" = Option<String>, Header, pattern = "^[0-9]{0,19}$", nullable = false,
            description = "The id of the last event received: the stream goes on after it")),
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "`event:` the type, `id:` the event's id, `data:` `{type, ...}`"),
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
    let wanted = match filter.events {
        Some(list) => {
            let kinds: Vec<String> = list.split(',').map(|kind| kind.trim().to_owned()).collect();
            for kind in &kinds {
                check_type("events", kind)?;
            }
            Some(kinds)
        }
        None => None,
    };
    Ok(journal_stream(&state, after, wanted))
}

/// A webhook, as the spec shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct WebhookView {
    id: String,
    url: String,
    events: Vec<String>,
    secret: String,
    enabled: bool,
    created_at: String,
}

impl From<Webhook> for WebhookView {
    fn from(webhook: Webhook) -> Self {
        WebhookView {
            id: webhook.id,
            url: webhook.url,
            events: webhook.events,
            secret: webhook.secret,
            enabled: webhook.enabled,
            created_at: rfc3339(webhook.created_at),
        }
    }
}

/// `{ webhook }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct WebhookResponse {
    webhook: WebhookView,
}

/// `{ webhooks }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct WebhookList {
    webhooks: Vec<WebhookView>,
}

/// Registers a webhook.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegisterWebhookRequest {
    /// `https` (or loopback `http` with `--allow-loopback-callbacks`).
    #[schema(pattern = "^https://[^\\s/?#]+([/?#]\\S*)?$")]
    url: String,
    /// The event types to receive (`*`: all), 1 to 20.
    #[schema(min_items = 1, max_items = 20)]
    events: Vec<String>,
    /// The signing key (default: generated; 16 to 256 characters).
    #[serde(default)]
    #[schema(min_length = 16, max_length = 256)]
    secret: Option<String>,
}

#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/webhooks", tag = "hooks",
    operation_id = "webhooks.register", params(("harnessId" = String, Path)),
    request_body = RegisterWebhookRequest,
    responses((status = 201, body = WebhookResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn register(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<RegisterWebhookRequest>,
) -> Result<(StatusCode, Json<WebhookResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    state.host.hooks().check_url("url", &request.url)?;
    if request.events.is_empty() || request.events.len() > 20 {
        return Err(ApiError::invalid_field(
            "events",
            "a webhook asks for 1 to 20 event types",
        ));
    }
    for kind in request.events.iter().filter(|kind| *kind != "*") {
        check_type("events", kind)?;
    }
    let webhook = Webhook {
        id: format!("whk_{}", harness_core::harness::default_id()),
        url: request.url,
        events: request.events,
        secret: signing_secret(request.secret)?,
        enabled: true,
        created_at: unix_ms(),
    };
    state.host.hooks().put_webhook(&webhook).await?;
    Ok((
        StatusCode::CREATED,
        Json(WebhookResponse {
            webhook: webhook.into(),
        }),
    ))
}

#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/webhooks", tag = "hooks",
    operation_id = "webhooks.list", params(("harnessId" = String, Path)),
    responses((status = 200, body = WebhookList), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn list_webhooks(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
) -> Result<Json<WebhookList>, ApiError> {
    state.check_harness(&harness_id)?;
    let webhooks = state.host.hooks().webhooks().await?;
    Ok(Json(WebhookList {
        webhooks: webhooks.into_iter().map(Into::into).collect(),
    }))
}

#[utoipa::path(delete, path = "/v1/harnesses/{harnessId}/webhooks/{webhookId}", tag = "hooks",
    operation_id = "webhooks.delete",
    params(("harnessId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn delete_webhook(
    State(state): State<Shared>,
    Path((harness_id, webhook_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    state.check_harness(&harness_id)?;
    state.host.hooks().delete_webhook(&webhook_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
