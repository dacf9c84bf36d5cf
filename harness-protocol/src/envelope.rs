//! The envelope every subscription delivers: an event with its place in the harness's
//! sequence, the thread and run it belongs to, and when it happened.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::HarnessEvent;

/// One event as subscribers receive it.
///
/// `seq` numbers the events of one harness: the first is 1 (or one past where a restored
/// event log ended), each next one is one more, and no number is used twice. It is per
/// harness rather than per thread because one subscription follows a harness across thread
/// switches: a client that reconnects names the last `seq` it saw and gets exactly what came
/// after, whatever threads those events belong to. A client that wants one thread filters on
/// `thread_id`.
///
/// ```
/// use harness_protocol::{EventEnvelope, HarnessEvent};
///
/// let envelope = EventEnvelope {
///     seq: 7,
///     thread_id: Some("thread-1".into()),
///     run_id: None,
///     at: 1_700_000_000_000,
///     event: HarnessEvent::Info { message: "hello".into() },
/// };
/// let json = serde_json::to_value(&envelope)?;
/// assert_eq!(json["seq"], 7);
/// assert_eq!(json["threadId"], "thread-1");
/// assert!(json.get("runId").is_none());
/// assert_eq!(json["event"]["type"], "info");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventEnvelope {
    /// The event's place in the harness's sequence, from 1, strictly increasing.
    pub seq: u64,
    /// The thread bound when the event happened (`null` before any thread is).
    pub thread_id: Option<Arc<str>>,
    /// The run the event belongs to, for events inside a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Arc<str>>,
    /// When the event was published, in Unix milliseconds (at the resolution of the system's
    /// coarse clock: a few milliseconds).
    pub at: i64,
    /// The event.
    pub event: HarnessEvent,
}

impl EventEnvelope {
    /// The event's `type`, e.g. `tool_end`.
    pub fn kind(&self) -> &'static str {
        self.event.kind()
    }
}

/// Where an event belongs: the thread and run it is published for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventScope {
    /// The bound thread, if any.
    pub thread_id: Option<Arc<str>>,
    /// The run, for events inside one.
    pub run_id: Option<Arc<str>>,
}
