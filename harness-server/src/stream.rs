//! The SSE streams: an execution's, read from its event log (what was stored after the
//! client's `Last-Event-ID`, then whatever is appended, until the log is closed), and the
//! server's logs, read from their ring.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use harness_store::{LoggedEvent, Store};
use harness_tags::util::unix_ms;
use serde::Deserialize;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::journal::Journal;
use crate::logs::{LogEntry, LogLevel, LogRecord, ServerLogs};
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
    let events = execution_events(state, id, after).await?;
    let mut response = event_stream(events.map(|events| frames(&events)));
    if let Ok(value) = HeaderValue::from_str(id) {
        response.headers_mut().insert("x-execution-id", value);
    }
    Ok(response)
}

/// The stored frames of execution `id` after `after`, in batches as they are appended, until
/// its log is closed (or the server shuts down); `410` once the log is past its retention.
pub(crate) async fn execution_events(
    state: &Arc<State>,
    id: &str,
    after: u64,
) -> Result<impl Stream<Item = Vec<LoggedEvent>> + Send + 'static, ApiError> {
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
        closing: state.closing.clone(),
        ended: false,
    };
    Ok(futures_util::stream::unfold(
        reader,
        |mut reader| async move {
            let events = reader.next_events().await?;
            Some((events, reader))
        },
    ))
}

/// A `200` `text/event-stream` response of `chunks`.
pub(crate) fn event_stream(chunks: impl Stream<Item = Bytes> + Send + 'static) -> Response {
    let mut response = Response::new(Body::from_stream(chunks.map(Ok::<Bytes, Infallible>)));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A finished stream of `frames` (each `{"type", ...}`): `event:` the type, `data:` the
/// frame; no `id:` (nothing to resume).
pub(crate) fn frames_response(frames: &[serde_json::Value]) -> Response {
    let text = typed_frames(frames);
    event_stream(futures_util::stream::once(async move { text }))
}

/// `frames` (each `{"type", ...}`) as SSE without ids: `event:` the type, `data:` the frame.
pub(crate) fn typed_frames(frames: &[serde_json::Value]) -> Bytes {
    let mut text = String::new();
    for frame in frames {
        let kind = frame["type"].as_str().unwrap_or("message");
        text.push_str(&format!("event: {kind}\ndata: {frame}\n\n"));
    }
    Bytes::from(text)
}

/// The journal from after event `after`, then each new event, until the server shuts down;
/// only the types `wanted` lets through. `event:` is the type, `id:` the event's id, `data:`
/// `{"type", ...the event's fields}`.
pub(crate) fn journal_stream(
    state: &Arc<State>,
    after: u64,
    wanted: Option<Vec<String>>,
) -> Response {
    let journal = Arc::clone(state.host.journal());
    // Watched before the first read, so that nothing written in between goes unnoticed.
    let changes = journal.watch();
    let mut keep_alive =
        tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
    keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let tail = JournalTail {
        journal,
        changes,
        after,
        wanted,
        keep_alive,
        closing: state.closing.clone(),
    };
    event_stream(futures_util::stream::unfold(tail, |mut tail| async move {
        let chunk = tail.next_chunk().await?;
        Some((chunk, tail))
    }))
}

struct JournalTail {
    journal: Arc<Journal>,
    changes: watch::Receiver<u64>,
    after: u64,
    wanted: Option<Vec<String>>,
    keep_alive: tokio::time::Interval,
    closing: CancellationToken,
}

impl JournalTail {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            let events = match self.journal.after(self.after, 0, PAGE).await {
                Ok(events) => events,
                Err(error) => {
                    tracing::warn!(error = error.message(), "reading the journal failed");
                    return None;
                }
            };
            if let Some(last) = events.last() {
                self.after = last.id;
                let mut text = String::new();
                for event in events.into_iter().filter(|event| {
                    self.wanted
                        .as_ref()
                        .is_none_or(|wanted| wanted.contains(&event.kind))
                }) {
                    text.push_str(&format!(
                        "event: {}\nid: {}\ndata: {}\n\n",
                        event.kind,
                        event.id,
                        event.frame()
                    ));
                }
                if !text.is_empty() {
                    return Some(Bytes::from(text));
                }
                continue;
            }
            tokio::select! {
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                _ = self.keep_alive.tick() => return Some(Bytes::from_static(b": keep-alive\n\n")),
                () = self.closing.cancelled() => return None,
            }
        }
    }
}

/// How often an idle log or journal stream sends a comment, so that a client gone away is
/// noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The server's logs at `minimum` and above, from after entry `after`: what the ring keeps,
/// then each new entry, until the server shuts down. `event:` is `log`, `id:` the entry's
/// number, `data:` the entry.
pub(crate) fn log_stream(state: &Arc<State>, after: u64, minimum: LogLevel) -> Response {
    let logs = state.config.logs.clone();
    // Watch before reading, so that nothing kept in between goes unnoticed.
    let live = logs.watch();
    let pending: VecDeque<LogRecord> = logs.after(after).into();
    let mut keep_alive =
        tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
    keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let tail = LogTail {
        logs,
        live,
        pending,
        last: after,
        minimum,
        keep_alive,
        closing: state.closing.clone(),
    };
    event_stream(futures_util::stream::unfold(tail, |mut tail| async move {
        let chunk = tail.next_chunk().await?;
        Some((chunk, tail))
    }))
}

struct LogTail {
    logs: ServerLogs,
    live: broadcast::Receiver<LogRecord>,
    pending: VecDeque<LogRecord>,
    last: u64,
    minimum: LogLevel,
    keep_alive: tokio::time::Interval,
    closing: CancellationToken,
}

impl LogTail {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            while let Some(record) = self.pending.pop_front() {
                // The ring and the live channel overlap: each entry goes once.
                if record.seq <= self.last {
                    continue;
                }
                self.last = record.seq;
                if record.level >= self.minimum {
                    let seq = record.seq;
                    let data = serde_json::to_string(&LogEntry::from(record)).unwrap_or_default();
                    return Some(Bytes::from(format!(
                        "event: log\nid: {seq}\ndata: {data}\n\n"
                    )));
                }
            }
            tokio::select! {
                received = self.live.recv() => match received {
                    Ok(record) => self.pending.push_back(record),
                    // Fell behind the channel: what the ring still keeps follows.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.pending.extend(self.logs.after(self.last));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = self.keep_alive.tick() => return Some(Bytes::from_static(b": keep-alive\n\n")),
                () = self.closing.cancelled() => return None,
            }
        }
    }
}

struct Reader {
    store: Arc<dyn Store>,
    id: String,
    after: u64,
    changes: Option<watch::Receiver<u64>>,
    closing: CancellationToken,
    ended: bool,
}

impl Reader {
    /// The next frames, or `None` once the log is closed and read to its end.
    async fn next_events(&mut self) -> Option<Vec<LoggedEvent>> {
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
                return Some(events);
            }
            if closed {
                self.ended = true;
                return None;
            }
            match &mut self.changes {
                // The execution's worker bumps this after every append and when it ends.
                Some(changes) => {
                    tokio::select! {
                        changed = changes.changed() => {
                            if changed.is_err() {
                                // The worker is gone: read once more, then stop.
                                self.changes = None;
                            }
                        }
                        // The server shuts down: the client resumes from its last frame.
                        () = self.closing.cancelled() => {
                            self.ended = true;
                            return None;
                        }
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
