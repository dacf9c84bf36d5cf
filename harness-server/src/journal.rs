//! The server's event journal: what happened across sessions (`execution.started`,
//! `execution.completed`, `session.created`, `session.ended`, `hook.triggered`, `error`), kept
//! in the store's event log for `GET /events` and `GET /events/stream`, and sent to the
//! webhooks that asked for it.
//!
//! The journal is one event log per hour (`harness-server.events.<hour>`): an hour's log is
//! closed when the next one starts, and closed logs are pruned after the server's retention,
//! like completed execution streams. An event's id is `hour << 32 | seq`: numeric and
//! increasing across hours, so `Last-Event-ID` resumes a stream, also after a restart.

use std::sync::Arc;

use harness_store::{LoggedEvent, Store, StoreError, WriteOp};
use harness_tags::util::unix_ms;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Mutex, watch};

use crate::error::ApiError;

const HOUR_MS: i64 = 3_600_000;
/// How many hours back a start looks for logs a stopped process left open.
const LOOK_BACK_HOURS: u64 = 48;
/// The most events read from one log at a time.
const PAGE: usize = 256;

/// One journal event.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JournalEvent {
    pub(crate) id: u64,
    pub(crate) kind: String,
    pub(crate) data: Value,
    pub(crate) at: i64,
}

impl JournalEvent {
    /// The event as a stream's `data:`: `{"type", ...its fields}`.
    pub(crate) fn frame(&self) -> Value {
        with_fields(json!({ "type": self.kind }), &self.data)
    }
}

/// `object` with the fields of `data` it does not have yet.
pub(crate) fn with_fields(mut object: Value, data: &Value) -> Value {
    if let (Some(object), Some(fields)) = (object.as_object_mut(), data.as_object()) {
        for (key, value) in fields {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    object
}

/// An event as stored in the log.
#[derive(Serialize, Deserialize)]
struct Stored {
    #[serde(rename = "type")]
    kind: String,
    data: Value,
    at: i64,
}

fn log_id(hour: u64) -> String {
    format!("harness-server.events.{hour}")
}

fn hour_of(unix_ms: i64) -> u64 {
    u64::try_from(unix_ms.max(0) / HOUR_MS).unwrap_or(0)
}

fn event_id(hour: u64, seq: u64) -> u64 {
    (hour << 32) | (seq & 0xffff_ffff)
}

/// The hour and the seq an id names.
fn split(id: u64) -> (u64, u64) {
    (id >> 32, id & 0xffff_ffff)
}

/// The hour being written and its last seq.
struct Cursor {
    hour: u64,
    last_seq: u64,
}

/// Where the journal sends each event once it is kept: the webhooks.
pub(crate) trait EventSink: Send + Sync {
    /// Sends an event of type `kind`, kept at `at` (Unix ms), to those that asked for it.
    fn send(&self, kind: &str, data: &Value, at: i64);
}

/// The journal.
pub(crate) struct Journal {
    store: Arc<dyn Store>,
    /// The oldest hour read: logs older than this are pruned or abandoned.
    keep_hours: u64,
    cursor: Mutex<Option<Cursor>>,
    /// The id of the last event written.
    changes: watch::Sender<u64>,
    sink: Arc<dyn EventSink>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").finish_non_exhaustive()
    }
}

impl Journal {
    /// The journal; closes the logs of earlier hours a stopped process left open.
    pub(crate) async fn open(
        store: Arc<dyn Store>,
        sink: Arc<dyn EventSink>,
        retention: std::time::Duration,
    ) -> Result<Arc<Journal>, ApiError> {
        let now = hour_of(unix_ms());
        let mut closes = Vec::new();
        for hour in now.saturating_sub(LOOK_BACK_HOURS)..now {
            if let Some(log) = store.event_log(&log_id(hour)).await?
                && log.closed_at.is_none()
            {
                closes.push(WriteOp::CloseEventLog {
                    log_id: log_id(hour),
                    closed_at: unix_ms(),
                });
            }
        }
        if !closes.is_empty() {
            store.write(closes).await?;
        }
        let keep_hours = (retention.as_secs() / 3600 + 1).max(LOOK_BACK_HOURS);
        let journal = Arc::new(Journal {
            store,
            keep_hours,
            cursor: Mutex::new(None),
            changes: watch::channel(0).0,
            sink,
        });
        Ok(journal)
    }

    /// Records an event and sends it to the webhooks that asked for its type. A store that
    /// fails loses the event (logged), never the caller's work.
    pub(crate) async fn record(&self, kind: &str, data: Value) {
        let at = unix_ms();
        match self.append(kind, &data, at).await {
            Ok(id) => {
                self.changes.send_replace(id);
            }
            Err(error) => {
                tracing::warn!(
                    event = kind,
                    error = error.message(),
                    "journaling an event failed"
                );
            }
        }
        self.sink.send(kind, &data, at);
    }

    async fn append(&self, kind: &str, data: &Value, at: i64) -> Result<u64, ApiError> {
        let mut cursor = self.cursor.lock().await;
        match self.append_after(&mut cursor, kind, data, at).await {
            // Another process on the same store wrote since: go on after its events.
            Err(StoreError::EventOutOfOrder { .. }) => {
                if let Some(current) = cursor.as_mut() {
                    current.last_seq = self
                        .store
                        .event_log(&log_id(current.hour))
                        .await?
                        .map_or(0, |log| log.last_seq);
                }
                Ok(self.append_after(&mut cursor, kind, data, at).await?)
            }
            other => Ok(other?),
        }
    }

    async fn append_after(
        &self,
        cursor: &mut Option<Cursor>,
        kind: &str,
        data: &Value,
        at: i64,
    ) -> Result<u64, StoreError> {
        let hour = hour_of(at);
        let mut ops = Vec::new();
        let current = match cursor.take() {
            Some(current) if current.hour == hour => current,
            previous => {
                if let Some(previous) = previous {
                    ops.push(WriteOp::CloseEventLog {
                        log_id: log_id(previous.hour),
                        closed_at: at,
                    });
                }
                // A restart in the same hour goes on after what the last process wrote.
                let last_seq = self
                    .store
                    .event_log(&log_id(hour))
                    .await?
                    .map_or(0, |log| log.last_seq);
                Cursor { hour, last_seq }
            }
        };
        let seq = current.last_seq + 1;
        let envelope = serde_json::to_string(&Stored {
            kind: kind.to_owned(),
            data: data.clone(),
            at,
        })
        .unwrap_or_default();
        ops.push(WriteOp::AppendEvents {
            log_id: log_id(hour),
            events: vec![LoggedEvent { seq, envelope }],
        });
        // The cursor moves to this hour even if the write fails: a retry reads its last seq.
        *cursor = Some(Cursor {
            hour,
            last_seq: current.last_seq,
        });
        self.store.write(ops).await?;
        *cursor = Some(Cursor {
            hour,
            last_seq: seq,
        });
        Ok(event_id(hour, seq))
    }

    /// Events after `after` (an event id; 0 for all kept), oldest first, at most `limit`,
    /// reading the hours from `since` (Unix ms) on.
    pub(crate) async fn after(
        &self,
        after: u64,
        since: i64,
        limit: usize,
    ) -> Result<Vec<JournalEvent>, ApiError> {
        let (after_hour, after_seq) = split(after);
        let now = hour_of(unix_ms());
        let oldest = now.saturating_sub(self.keep_hours);
        let mut events = Vec::new();
        for hour in after_hour.max(hour_of(since)).max(oldest)..=now {
            let mut seq = if hour == after_hour { after_seq } else { 0 };
            loop {
                let page = self.store.events(&log_id(hour), seq, PAGE).await?;
                let Some(last) = page.last() else {
                    break;
                };
                seq = last.seq;
                let full = page.len() == PAGE;
                for logged in page {
                    let stored: Stored = match serde_json::from_str(&logged.envelope) {
                        Ok(stored) => stored,
                        Err(error) => {
                            tracing::warn!(%error, "a journal event is unreadable; skipped");
                            continue;
                        }
                    };
                    events.push(JournalEvent {
                        id: event_id(hour, logged.seq),
                        kind: stored.kind,
                        data: stored.data,
                        at: stored.at,
                    });
                    if events.len() == limit {
                        return Ok(events);
                    }
                }
                if !full {
                    break;
                }
            }
        }
        Ok(events)
    }

    /// Bumped with each event's id.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::{event_id, split};

    #[test]
    fn ids_grow_across_hours_and_split_back() {
        let late = event_id(490_000, 70_000);
        let next_hour = event_id(490_001, 1);
        assert!(next_hour > late);
        assert_eq!(split(late), (490_000, 70_000));
        assert_eq!(split(0), (0, 0));
    }
}
