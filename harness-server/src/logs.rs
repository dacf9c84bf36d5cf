//! The server's logs: the process's `tracing` events, kept in a bounded ring and sent live,
//! for `GET /logs` and `GET /logs/stream`.
//!
//! [`ServerLogs`] keeps the newest entries (2,000 by default) and numbers them from the time it
//! was made, in microseconds: a later process numbers on from above an earlier one's entries,
//! so a client that resumes a stream after a restart gets the new process's entries, none
//! skipped. Install
//! its [`layer`](ServerLogs::layer) in the process's subscriber (or use
//! [`subscriber`](ServerLogs::subscriber), as `harness serve` does). Kept: `debug` and above
//! from the harness's own crates (`harness_*` targets), `info` and above from the rest. Without
//! the layer installed, the logs are empty.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use harness_tags::util::{lock, unix_ms};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use utoipa::ToSchema;

/// How many entries are kept unless told otherwise.
pub const DEFAULT_LOG_CAPACITY: usize = 2_000;

/// A log entry's level, the spec's four (`trace` events are not kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// What happened.
    Info,
    /// Something went wrong and was handled.
    Warn,
    /// Something failed.
    Error,
}

impl LogLevel {
    fn of(level: Level) -> LogLevel {
        match level {
            Level::ERROR => LogLevel::Error,
            Level::WARN => LogLevel::Warn,
            Level::INFO => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }
}

/// One kept event.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRecord {
    /// Its number, increasing: the stream's `id:`.
    pub seq: u64,
    /// When, in Unix milliseconds.
    pub at: i64,
    /// Its level.
    pub level: LogLevel,
    /// Its message.
    pub message: String,
    /// Its other fields, and `target` (the module that logged it).
    pub context: Map<String, Value>,
}

/// A log entry as the spec shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct LogEntry {
    timestamp: String,
    level: LogLevel,
    message: String,
    #[serde(skip_serializing_if = "Map::is_empty")]
    #[schema(value_type = Object)]
    context: Map<String, Value>,
}

impl From<LogRecord> for LogEntry {
    fn from(record: LogRecord) -> Self {
        LogEntry {
            timestamp: harness_tags::util::rfc3339(record.at),
            level: record.level,
            message: record.message,
            context: record.context,
        }
    }
}

struct Ring {
    entries: VecDeque<LogRecord>,
    next_seq: u64,
}

struct Inner {
    ring: Mutex<Ring>,
    capacity: usize,
    live: broadcast::Sender<LogRecord>,
}

/// The server's log ring; cheap to clone (clones share it).
#[derive(Clone)]
pub struct ServerLogs {
    inner: Arc<Inner>,
}

impl Debug for ServerLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerLogs")
            .field("capacity", &self.inner.capacity)
            .finish_non_exhaustive()
    }
}

impl Default for ServerLogs {
    fn default() -> Self {
        ServerLogs::new(DEFAULT_LOG_CAPACITY)
    }
}

impl ServerLogs {
    /// A ring that keeps the newest `capacity` entries (at least 1).
    pub fn new(capacity: usize) -> ServerLogs {
        let capacity = capacity.max(1);
        let (live, _) = broadcast::channel(256);
        ServerLogs {
            inner: Arc::new(Inner {
                ring: Mutex::new(Ring {
                    entries: VecDeque::with_capacity(capacity.min(4_096)),
                    next_seq: u64::try_from(unix_ms()).unwrap_or(0) * 1000 + 1,
                }),
                capacity,
                live,
            }),
        }
    }

    /// The `tracing` layer that fills this ring.
    pub fn layer(&self) -> LogLayer {
        LogLayer { logs: self.clone() }
    }

    /// A subscriber that does nothing but fill this ring: for
    /// `tracing::subscriber::set_global_default`.
    pub fn subscriber(&self) -> impl Subscriber + Send + Sync + 'static {
        tracing_subscriber::registry().with(self.layer())
    }

    /// Keeps an entry; `seq` and `at` are given here.
    pub fn push(&self, level: LogLevel, message: String, context: Map<String, Value>) {
        let record = {
            let mut ring = lock(&self.inner.ring);
            let record = LogRecord {
                seq: ring.next_seq,
                at: unix_ms(),
                level,
                message,
                context,
            };
            ring.next_seq += 1;
            if ring.entries.len() == self.inner.capacity {
                ring.entries.pop_front();
            }
            ring.entries.push_back(record.clone());
            record
        };
        // No one listening is fine.
        let _ = self.inner.live.send(record);
    }

    /// The kept entries after `after`, oldest first.
    pub fn after(&self, after: u64) -> Vec<LogRecord> {
        let ring = lock(&self.inner.ring);
        let skip = ring.entries.partition_point(|record| record.seq <= after);
        ring.entries.iter().skip(skip).cloned().collect()
    }

    /// New entries as they are kept.
    pub(crate) fn watch(&self) -> broadcast::Receiver<LogRecord> {
        self.inner.live.subscribe()
    }
}

/// The layer that keeps events in a [`ServerLogs`].
#[derive(Clone, Debug)]
pub struct LogLayer {
    logs: ServerLogs,
}

/// Whether an event is kept: `debug` of the harness's crates, `info` of the rest.
fn kept(metadata: &Metadata<'_>) -> bool {
    let level = *metadata.level();
    if metadata.target().starts_with("harness") {
        level <= Level::DEBUG
    } else {
        level <= Level::INFO
    }
}

impl<S: Subscriber> Layer<S> for LogLayer {
    fn register_callsite(
        &self,
        metadata: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if kept(metadata) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        kept(metadata)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let metadata = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        fields.context.insert(
            "target".to_owned(),
            Value::String(metadata.target().to_owned()),
        );
        self.logs.push(
            LogLevel::of(*metadata.level()),
            fields.message,
            fields.context,
        );
    }
}

/// An event's fields: `message`, and the rest as JSON.
#[derive(Default)]
struct Fields {
    message: String,
    context: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
        } else {
            self.context.insert(field.name().to_owned(), value);
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(harness_tags::util::error_chain(value)));
    }
}

#[cfg(test)]
mod tests {
    use super::{LogLevel, ServerLogs};

    #[test]
    fn the_ring_keeps_the_newest_entries_in_order() {
        let logs = ServerLogs::new(3);
        for n in 1..=5 {
            logs.push(LogLevel::Info, format!("entry {n}"), Default::default());
        }
        let kept = logs.after(0);
        let messages: Vec<&str> = kept.iter().map(|record| record.message.as_str()).collect();
        assert_eq!(messages, ["entry 3", "entry 4", "entry 5"]);
        assert!(kept.windows(2).all(|pair| pair[1].seq == pair[0].seq + 1));
        assert_eq!(logs.after(kept[1].seq).len(), 1);
        assert!(logs.after(kept[2].seq).is_empty());
        // Numbered from the time the ring was made (in µs): a ring a restart makes numbers on
        // from above.
        let before = u64::try_from(harness_tags::util::unix_ms()).unwrap();
        let later = ServerLogs::new(3);
        later.push(LogLevel::Info, "after a restart".into(), Default::default());
        assert!(later.after(0)[0].seq > before * 1000);
    }

    #[test]
    fn events_of_the_installed_layer_are_kept_with_their_fields() {
        let logs = ServerLogs::new(10);
        tracing::subscriber::with_default(logs.subscriber(), || {
            tracing::warn!(session = "s1", attempts = 3_u64, "a hook failed");
            tracing::trace!("not kept");
            tracing::debug!(target: "hyper::proto", "not kept either");
            tracing::debug!(target: "harness_core::run", "kept");
        });
        let kept = logs.after(0);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(kept[0].level, LogLevel::Warn);
        assert_eq!(kept[0].message, "a hook failed");
        assert_eq!(kept[0].context["session"], "s1");
        assert_eq!(kept[0].context["attempts"], 3);
        assert_eq!(kept[1].context["target"], "harness_core::run");
    }
}
