//! The [`EventLogWriter`]: every envelope a hub publishes, appended to an event log in a
//! [`Store`], so that a client that reconnects (after a cut, or after the process restarted)
//! can read what it missed with [`Store::events`], byte for byte what was first sent.
//!
//! Envelopes are taken by a listener on the publishing thread (no envelope is ever missed, as a
//! subscription may when it falls behind), then serialized and appended in batches by a task on
//! the runtime. Listeners of two threads publishing at once may see envelopes out of `seq`
//! order; the task puts them back in order and appends only unbroken runs, so the log holds
//! every envelope from the writer's start, each once, in `seq` order. A harness that goes on
//! with the same log after a restart starts its hub at [`next_seq`], so that `seq`s keep
//! increasing across processes.
//!
//! The queue between the listener and the task is unbounded, because publishing never waits:
//! if the store stalls while events keep coming, they wait in memory until it answers.
//!
//! A listener counts as an audience: a harness with only this writer attached believes a user
//! interface is watching (and waits for approvals). A server that logs events sets the
//! harness's interactivity itself.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use harness_protocol::EventEnvelope;
use harness_store::{LoggedEvent, Store, StoreError, WriteOp};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::bus::{EventBus, ListenerGuard};
use crate::hub::EventHub;

/// The most envelopes appended in one write.
const MAX_BATCH: usize = 256;

/// Appends every envelope a hub publishes to one event log; see the [module docs](self).
pub struct EventLogWriter {
    /// Where the next `seq` is read, to know what `flush` waits for.
    bus: EventBus,
    listener: ListenerGuard,
    /// The `seq` of the last envelope stored, or the error that stopped the writer.
    stored: watch::Receiver<Result<u64, StoreError>>,
    task: JoinHandle<()>,
    store: Arc<dyn Store>,
    log_id: String,
}

/// The `seq` a hub that goes on with `log_id` starts at (its `EventHubConfig::first_seq`):
/// one past the log's last event, or 1 for a log never written.
pub async fn next_seq(store: &dyn Store, log_id: &str) -> Result<u64, StoreError> {
    Ok(store
        .event_log(log_id)
        .await?
        .map_or(1, |log| log.last_seq + 1))
}

impl EventLogWriter {
    /// Starts appending to `log_id` every envelope `hub` publishes from now on. Must be called
    /// within a Tokio runtime (the appends run on it).
    pub fn start(hub: &EventHub, store: Arc<dyn Store>, log_id: impl Into<String>) -> Self {
        let log_id = log_id.into();
        let (sender, receiver) = mpsc::unbounded_channel::<Arc<EventEnvelope>>();
        let listener = hub.bus().listen_shared(move |envelope| {
            let _ = sender.send(Arc::clone(envelope));
        });
        // Read after the listener is in place: every envelope from this `seq` on reaches it
        // (one stamped earlier may or may not, and is not logged).
        let first = hub.bus().next_seq();
        let (report, stored) = watch::channel(Ok(first - 1));
        let task = tokio::spawn(append_loop(
            Arc::clone(&store),
            log_id.clone(),
            first,
            receiver,
            report,
        ));
        EventLogWriter {
            bus: hub.bus().clone(),
            listener,
            stored,
            task,
            store,
            log_id,
        }
    }

    /// The log's id.
    pub fn log_id(&self) -> &str {
        &self.log_id
    }

    /// Waits until every envelope published before this call is stored; the error of a
    /// failed append, if one failed (the writer stops at the first).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let target = self.bus.next_seq().saturating_sub(1);
        let mut stored = self.stored.clone();
        let reached = stored
            .wait_for(|state| state.as_ref().map_or(true, |seq| *seq >= target))
            .await
            .map_err(|_| writer_stopped(&self.log_id))?;
        reached.clone().map(drop)
    }

    /// Stops listening, stores every envelope taken so far, and closes the log at `closed_at`
    /// (Unix milliseconds): its stream is complete.
    pub async fn close(self, closed_at: i64) -> Result<(), StoreError> {
        let EventLogWriter {
            listener,
            stored,
            task,
            store,
            log_id,
            ..
        } = self;
        // Removing the listener drops the queue's sender: the task ends once it is drained.
        drop(listener);
        task.await.map_err(|_| writer_stopped(&log_id))?;
        stored.borrow().clone()?;
        store
            .write(vec![WriteOp::CloseEventLog { log_id, closed_at }])
            .await
    }
}

impl fmt::Debug for EventLogWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventLogWriter")
            .field("log_id", &self.log_id)
            .field("stored", &*self.stored.borrow())
            .finish_non_exhaustive()
    }
}

fn writer_stopped(log_id: &str) -> StoreError {
    StoreError::Backend(format!("the writer of event log `{log_id}` stopped"))
}

async fn append_loop(
    store: Arc<dyn Store>,
    log_id: String,
    first: u64,
    mut queue: mpsc::UnboundedReceiver<Arc<EventEnvelope>>,
    report: watch::Sender<Result<u64, StoreError>>,
) {
    let mut order = SeqOrder::new(first);
    let mut received = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut received, MAX_BATCH).await > 0 {
        for envelope in received.drain(..) {
            order.push(envelope);
        }
        let mut events = Vec::new();
        while let Some(envelope) = order.pop() {
            match serde_json::to_string(&*envelope) {
                Ok(json) => events.push(LoggedEvent {
                    seq: envelope.seq,
                    envelope: json,
                }),
                Err(error) => {
                    let error = StoreError::Backend(format!(
                        "envelope {} cannot be serialized for event log `{log_id}`: {error}",
                        envelope.seq
                    ));
                    report.send_modify(|state| *state = Err(error));
                    return;
                }
            }
        }
        if events.is_empty() {
            continue;
        }
        let written = store
            .write(vec![WriteOp::AppendEvents {
                log_id: log_id.clone(),
                events,
            }])
            .await;
        if let Err(error) = written {
            tracing::warn!(log = %log_id, %error, "an event log append failed; the log stops here");
            report.send_modify(|state| *state = Err(error));
            return;
        }
        report.send_modify(|state| *state = Ok(order.next() - 1));
    }
}

/// Puts envelopes taken by listeners back in `seq` order.
///
/// Listeners of two threads publishing at once may see envelopes out of order; this hands
/// them out as an unbroken run from the first `seq`, holding back whatever follows a gap
/// until the gap fills. Envelopes before the next expected `seq` are dropped.
#[derive(Debug)]
pub struct SeqOrder {
    next: u64,
    waiting: BTreeMap<u64, Arc<EventEnvelope>>,
}

impl SeqOrder {
    /// Orders envelopes from `first` on (a bus's `next_seq` read once its listener is in
    /// place).
    pub fn new(first: u64) -> Self {
        SeqOrder {
            next: first,
            waiting: BTreeMap::new(),
        }
    }

    /// Takes an envelope in whatever order it came.
    pub fn push(&mut self, envelope: Arc<EventEnvelope>) {
        if envelope.seq >= self.next {
            self.waiting.insert(envelope.seq, envelope);
        }
    }

    /// The next envelope in order, if it has come.
    pub fn pop(&mut self) -> Option<Arc<EventEnvelope>> {
        let envelope = self.waiting.remove(&self.next)?;
        self.next += 1;
        Some(envelope)
    }

    /// The `seq` handed out next.
    pub fn next(&self) -> u64 {
        self.next
    }
}
