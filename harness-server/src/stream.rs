//! An execution's SSE stream, read from its event log: what was stored after the client's
//! `Last-Event-ID`, then whatever is appended, until the log is closed.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use harness_store::{LoggedEvent, Store};
use harness_tags::util::unix_ms;
use serde::Deserialize;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::state::State;

/// The most frames read from the store at a time.
const PAGE: usize = 256;

/// The `seq` a client last received, from `Last-Event-ID` (0 without one).
pub(crate) fn last_event_id(headers: &HeaderMap) -> Result<u64, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(0);
    };
    value
        .to_str()
        .ok()
        .map(str::trim)
        .and_then(|text| {
            if text.is_empty() {
                Some(0)
            } else {
                text.parse().ok()
            }
        })
        .ok_or_else(|| {
            ApiError::invalid_field(
                "Last-Event-ID",
                "Last-Event-ID must be the id of a frame this stream sent (a number)",
            )
        })
}

/// The SSE response of execution `id` from after `after`; `410` once the stream is past its
/// retention.
pub(crate) async fn execution_stream(
    state: &Arc<State>,
    id: &str,
    after: u64,
) -> Result<Response, ApiError> {
    let store = Arc::clone(state.host.store());
    // Watch before reading, so that nothing appended in between goes unnoticed.
    let live = state.host.live(id);
    let changes = live.as_ref().map(|live| live.watch());
    let retention = i64::try_from(state.config.retention.as_millis()).unwrap_or(i64::MAX);
    match store.event_log(id).await? {
        None if live.is_none() => {
            return Err(ApiError::gone(format!(
                "the stream of execution `{id}` is no longer kept"
            )));
        }
        Some(log)
            if log
                .closed_at
                .is_some_and(|at| at.saturating_add(retention) <= unix_ms()) =>
        {
            return Err(ApiError::gone(format!(
                "the stream of execution `{id}` is no longer kept"
            )));
        }
        _ => {}
    }
    let reader = Reader {
        store,
        id: id.to_owned(),
        after,
        changes,
        ended: false,
    };
    let body = futures_util::stream::unfold(reader, |mut reader| async move {
        let chunk = reader.next_chunk().await?;
        Some((Ok::<Bytes, Infallible>(chunk), reader))
    });
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(id) {
        headers.insert("x-execution-id", value);
    }
    Ok(response)
}

struct Reader {
    store: Arc<dyn Store>,
    id: String,
    after: u64,
    changes: Option<watch::Receiver<u64>>,
    ended: bool,
}

impl Reader {
    /// The next frames, or `None` once the log is closed and read to its end.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        loop {
            // Whether the log was closed is read before its events: the last frames and the
            // close are one write, so a log seen closed is then read to its end.
            let closed = match self.store.event_log(&self.id).await {
                Ok(Some(log)) => log.closed_at.is_some(),
                // Not written yet: a queued execution has none until it starts.
                Ok(None) => self.changes.is_none(),
                Err(_) => true,
            };
            let events = match self.store.events(&self.id, self.after, PAGE).await {
                Ok(events) => events,
                Err(error) => {
                    tracing::warn!(execution = %self.id, %error, "reading a stream failed");
                    self.ended = true;
                    return None;
                }
            };
            if let Some(last) = events.last() {
                self.after = last.seq;
                return Some(frames(&events));
            }
            if closed {
                self.ended = true;
                return None;
            }
            match &mut self.changes {
                // The execution's worker bumps this after every append and when it ends.
                Some(changes) => {
                    if changes.changed().await.is_err() {
                        // The worker is gone: read once more, then stop.
                        self.changes = None;
                    }
                }
                // Not run here and not closed: nothing will come (a restart closes what the
                // previous process left open).
                None => {
                    self.ended = true;
                    return None;
                }
            }
        }
    }
}

/// Frames as the spec writes them: `event:` the frame's `type`, `id:` its `seq`, `data:` the
/// JSON stored.
fn frames(events: &[LoggedEvent]) -> Bytes {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow, rename = "type")]
        kind: &'a str,
    }
    let mut text = String::new();
    for event in events {
        let kind =
            serde_json::from_str::<Kind<'_>>(&event.envelope).map_or("message", |frame| frame.kind);
        text.push_str("event: ");
        text.push_str(kind);
        text.push_str("\nid: ");
        text.push_str(&event.seq.to_string());
        text.push_str("\ndata: ");
        text.push_str(&event.envelope);
        text.push_str("\n\n");
    }
    Bytes::from(text)
}
