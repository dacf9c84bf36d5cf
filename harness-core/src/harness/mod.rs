//! The harness: what turns the kernel into something a user interface can drive.
//!
//! A [`Harness`] owns modes (each a saved setup: instructions, tools, a model), the storage of
//! threads, the event stream and the display state. Its [`Session`] is the per-conversation
//! state: the bound thread, mode and model, the running run, the follow-up queue, pending
//! approvals and suspensions, permission grants, token usage and application state.
//!
//! ```
//! use harness_core::harness::{Harness, Mode};
//! use harness_core::model::{Scripted, ScriptedModel};
//! use std::sync::Arc;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let model = Arc::new(ScriptedModel::new("scripted/demo").then(Scripted::text("Hello!")));
//! let harness = Harness::builder("my-agent")
//!     .mode(Mode::new("build").default_model("scripted/demo"))
//!     .model(model)
//!     .build()
//!     .unwrap();
//! harness.init().await.unwrap();
//! let summary = harness.send_message("Hi").await.unwrap();
//! assert_eq!(summary.final_text.as_deref(), Some("Hello!"));
//! assert_eq!(harness.list_messages(None).await.unwrap().len(), 2);
//! # });
//! ```

mod builder;
mod channel;
mod conversation;
mod heartbeat;
mod modes;
mod record;
mod runs;
mod services;
mod session;
mod subagent;
mod threads;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use harness_tags::util::unix_ms;
use harness_tags::{Pipeline, ToolCategory};
use serde_json::{Map, Value};

pub use builder::{AgentConfig, BuildError, HarnessBuilder, Mode};
pub use channel::ESCALATION;
/// How a run ended (re-exported from `harness_tags` for [`RunSummary::outcome`]).
pub use harness_tags::RunOutcome;
pub use heartbeat::Heartbeat;
pub use runs::{FollowUp, RunSummary};
pub use services::HarnessServices;
pub use session::{Grants, Session};
pub use subagent::SubagentDef;
pub use threads::CloneOptions;

use crate::display::DisplayState;
use crate::display::DisplayStateStream;
use crate::event::{EventEnvelope, EventHub, HarnessEvent, ListenerGuard, Subscription};
use crate::kernel::{Kernel, ModelResolver};
use crate::model::{Model, ModelError, ModelId};
use crate::protocol::ErrorCode;
use crate::store::{LockError, Store, StoreError, ThreadLock};

/// Why a harness operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The thread is locked by another harness.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The model id is not usable.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model id is not `provider/name`.
    #[error(transparent)]
    ModelId(#[from] crate::model::ModelIdError),
    /// A run is active; use `follow_up` to queue a message or `steer` to redirect.
    #[error(
        "a run is already active; use `follow_up` to queue the message or `steer` to redirect the run"
    )]
    Busy,
    /// The thread does not exist.
    #[error("thread `{0}` does not exist")]
    ThreadNotFound(String),
    /// A message id that is not in the thread.
    #[error("message `{message_id}` is not in thread `{thread_id}`")]
    MessageNotFound {
        /// The thread.
        thread_id: String,
        /// The message asked for.
        message_id: String,
    },
    /// No thread is selected.
    #[error("no thread is selected; call `select_or_create_thread` or `create_thread` first")]
    NoThread,
    /// The mode does not exist.
    #[error("there is no mode `{mode}`; the modes are: {known}")]
    UnknownMode {
        /// The mode asked for.
        mode: String,
        /// The configured modes.
        known: String,
    },
    /// Nothing is waiting for that answer.
    #[error("nothing is waiting for {0}")]
    NothingPending(&'static str),
    /// Several tools are suspended; say which one to resume.
    #[error("several tools are suspended ({0}); pass the tool call id to resume one")]
    AmbiguousSuspension(String),
    /// Several tool calls wait for approval (subagents asking at once); say which one.
    #[error("several tool calls wait for approval ({0}); pass the tool call id to answer one")]
    AmbiguousApproval(String),
    /// The tool call named is not waiting for this kind of answer (it was answered, it never
    /// asked, or its run ended).
    #[error(
        "tool call `{call_id}` is not waiting for {what}; {}",
        if waiting.is_empty() { "nothing is".to_owned() } else { format!("these are: {waiting}") }
    )]
    NotPending {
        /// The call id given.
        call_id: String,
        /// What was answered: `an approval` or `an answer`.
        what: &'static str,
        /// The calls that are waiting, comma-separated.
        waiting: String,
    },
    /// The answer does not match what the suspended tool expects.
    #[error("the answer does not match what the tool expects: {0}")]
    InvalidAnswer(String),
    /// The application state would not match its schema.
    #[error("the state does not match its schema: {0}")]
    InvalidState(String),
    /// A plugin failed to start or stop.
    #[error(transparent)]
    Plugin(#[from] harness_tags::PluginError),
    /// The run's task ended without a result (it panicked or was cancelled).
    #[error("the run ended without a result: {0}")]
    RunLost(String),
    /// A task-list edit was refused.
    #[error(transparent)]
    Task(#[from] crate::task::TaskError),
}

/// Runs agents in modes over persisted threads, with one event stream and one display state.
/// Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Harness {
    inner: Arc<HarnessInner>,
}

pub(crate) struct HarnessInner {
    pub(crate) id: String,
    pub(crate) modes: Vec<Mode>,
    pub(crate) default_mode: String,
    pub(crate) default_model: Option<ModelId>,
    pub(crate) kernels: HashMap<String, ModeKernels>,
    pub(crate) subagents: Vec<SubagentDef>,
    pub(crate) subagent_kernels: HashMap<String, Kernel>,
    pub(crate) resolver: ModelResolver,
    pub(crate) catalog: Arc<crate::model::ModelCatalog>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) lock: Arc<dyn ThreadLock>,
    pub(crate) pipeline: Pipeline,
    pub(crate) hub: EventHub,
    pub(crate) state_validator: Option<jsonschema::Validator>,
    pub(crate) category_resolver: Option<crate::kernel::CategoryResolver>,
    pub(crate) id_generator: Arc<dyn Fn() -> String + Send + Sync>,
    pub(crate) interactive: Option<bool>,
    pub(crate) persist_grants: bool,
    pub(crate) input_timeout: Option<std::time::Duration>,
    pub(crate) session: Session,
    /// The queue from the active run to its recorder, for publishing in order and flushing
    /// before a fork.
    pub(crate) queue: record::RunQueue,
    /// The task that runs messages.
    pub(crate) runner: runs::Runner,
    pub(crate) heartbeats: heartbeat::Heartbeats,
    pub(crate) initialized: AtomicBool,
    /// Serializes read-modify-write of the bound thread's record.
    pub(crate) metadata_writes: tokio::sync::Mutex<()>,
}

/// A mode's kernels: the one runs use, and the one forked subagents use (same tool schemas,
/// but `subagent` and the task tools are stubs).
pub(crate) struct ModeKernels {
    pub(crate) main: Kernel,
    pub(crate) fork: Kernel,
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("id", &self.inner.id)
            .field(
                "modes",
                &self.inner.modes.iter().map(|m| &m.id).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Harness {
    /// Starts building a harness.
    pub fn builder(id: impl Into<String>) -> HarnessBuilder {
        HarnessBuilder::new(id)
    }

    /// The harness's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The per-conversation state.
    pub fn session(&self) -> &Session {
        &self.inner.session
    }

    /// The configured modes.
    pub fn modes(&self) -> &[Mode] {
        &self.inner.modes
    }

    /// The tag pipeline every run goes through.
    pub fn pipeline(&self) -> &Pipeline {
        &self.inner.pipeline
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The tools a mode offers of its own (built-in, the mode's and the harness's; not those of
    /// tool sources such as MCP servers, which are listed when a run starts): `None` for a mode
    /// that does not exist.
    pub fn tool_specs(&self, mode_id: &str) -> Option<Arc<[harness_tags::ToolSpec]>> {
        let kernels = self.inner.kernels.get(mode_id)?;
        Some(Arc::clone(kernels.main.tools().specs()))
    }

    /// A tool's permission category, from the configured resolver, else the tool's own.
    pub fn tool_category(&self, tool_name: &str) -> Option<ToolCategory> {
        self.inner.category(tool_name)
    }

    /// The harness's events, from now on, as a stream; dropping it unsubscribes. A subscriber
    /// that falls behind gets [`Delivery::Missed`](crate::event::Delivery::Missed) instead of
    /// slowing the run.
    pub fn subscribe(&self) -> Subscription {
        self.inner.hub.subscribe()
    }

    /// Calls `callback` for every event, on the emitting task; dropping the guard removes it.
    /// A panicking callback is removed and reported, never breaking the run.
    pub fn listen<F>(&self, callback: F) -> ListenerGuard
    where
        F: Fn(&EventEnvelope) + Send + Sync + 'static,
    {
        self.inner.hub.listen(callback)
    }

    /// Display-state snapshots, batched (250 ms window, 500 ms ceiling; at once for events
    /// that need a human or change identity). Starts with the current snapshot.
    pub fn subscribe_display_state(&self) -> DisplayStateStream {
        self.inner.hub.subscribe_display_state()
    }

    /// The current display state.
    pub fn display_state(&self) -> Arc<DisplayState> {
        self.inner.hub.display_state()
    }

    /// The event hub (for sharing with a server or another component).
    pub fn events(&self) -> &EventHub {
        &self.inner.hub
    }

    /// Publishes an event on the harness's stream (plugins report their progress this way).
    pub fn emit(&self, event: HarnessEvent) {
        self.inner.emit(event);
    }

    /// Starts the plugins and heartbeats. Call once before using the harness; later calls do
    /// nothing.
    pub async fn init(&self) -> Result<(), HarnessError> {
        if self.inner.initialized.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Err(error) = self.inner.pipeline.start().await {
            self.inner.initialized.store(false, Ordering::Release);
            return Err(error.into());
        }
        self.inner.heartbeats.start_all();
        Ok(())
    }

    /// Stops heartbeats and plugins, aborts any run and releases the thread.
    pub async fn destroy(&self) {
        self.abort();
        self.inner.wait_idle().await;
        self.inner.heartbeats.stop_all().await;
        for failure in self.inner.pipeline.shutdown().await {
            tracing::warn!(%failure, "plugin failed to stop");
        }
        if let Some(thread_id) = self.inner.session.thread_id() {
            let _ = self.inner.lock.release(&thread_id).await;
        }
        self.inner.session.unbind_thread();
        self.inner.initialized.store(false, Ordering::Release);
    }

    /// Adds and starts (if the harness is initialized) a heartbeat.
    pub fn add_heartbeat(&self, heartbeat: Heartbeat) {
        let running = self.inner.initialized.load(Ordering::Acquire);
        self.inner.heartbeats.add(heartbeat, running);
    }

    /// Stops and removes a heartbeat, running its shutdown hook.
    pub async fn remove_heartbeat(&self, id: &str) -> bool {
        self.inner.heartbeats.remove(id).await
    }

    /// Stops and removes every heartbeat.
    pub async fn stop_heartbeats(&self) {
        self.inner.heartbeats.stop_all().await;
    }

    /// The ids of the running heartbeats.
    pub fn heartbeat_ids(&self) -> Vec<String> {
        self.inner.heartbeats.ids()
    }
}

impl Drop for HarnessInner {
    fn drop(&mut self) {
        self.runner.stop();
    }
}

impl crate::kernel::SessionSource for HarnessInner {
    fn view(&self) -> harness_tags::SessionView {
        self.session.view()
    }
}

impl HarnessInner {
    pub(crate) fn category(&self, tool_name: &str) -> Option<ToolCategory> {
        if let Some(resolve) = &self.category_resolver
            && let Some(category) = resolve(tool_name)
        {
            return Some(category);
        }
        self.kernels
            .values()
            .find_map(|k| k.main.tool_category(tool_name))
    }

    pub(crate) fn emit(&self, event: HarnessEvent) {
        self.hub.emit_in(event, &self.session.event_scope());
    }

    pub(crate) fn new_id(&self) -> String {
        (self.id_generator)()
    }

    pub(crate) fn mode(&self, id: &str) -> Option<&Mode> {
        self.modes.iter().find(|m| m.id == id)
    }

    pub(crate) fn unknown_mode(&self, mode: &str) -> HarnessError {
        HarnessError::UnknownMode {
            mode: mode.to_owned(),
            known: self
                .modes
                .iter()
                .map(|m| m.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    pub(crate) fn resolve_model(&self, id: &ModelId) -> Result<Arc<dyn Model>, ModelError> {
        (self.resolver)(id)
    }

    /// The model a mode starts with: its saved choice in the thread, its default, the
    /// harness's default.
    pub(crate) fn initial_model(
        &self,
        mode_id: &str,
        metadata: Option<&Map<String, Value>>,
    ) -> Option<ModelId> {
        let saved = metadata
            .and_then(|m| {
                m.get(&format!(
                    "{}{mode_id}",
                    crate::store::metadata::MODE_MODEL_PREFIX
                ))
            })
            .and_then(Value::as_str)
            .and_then(|id| ModelId::new(id).ok());
        saved
            .or_else(|| self.mode(mode_id).and_then(|m| m.default_model.clone()))
            .or_else(|| self.default_model.clone())
    }

    /// True if a user interface can answer approvals and questions: set explicitly, or
    /// inferred from whether anyone subscribed to the harness's events.
    pub(crate) fn interactive(&self) -> bool {
        self.interactive.unwrap_or_else(|| self.hub.audience() > 0)
    }
}

/// A new id, as the harness makes them by default: time-ordered, with a random part so two
/// harnesses do not collide (19 hex digits: 11 of Unix milliseconds, 8 random).
pub fn default_id() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let mut id = String::with_capacity(19);
    push_hex(&mut id, unix_ms() as u64, 11);
    push_hex(&mut id, u64::from(hasher.finish() as u32), 8);
    id
}

/// Appends the low `digits` hex digits of `value`, zero-padded (what `{:0width$x}` writes,
/// without the formatting machinery ids are made often enough to notice).
fn push_hex(out: &mut String, value: u64, digits: u32) {
    for shift in (0..digits).rev() {
        let digit = ((value >> (shift * 4)) & 0xf) as u32;
        out.push(char::from_digit(digit, 16).unwrap_or('0'));
    }
}

/// The event that reports a failed write of the thread.
pub(crate) fn storage_error(error: &dyn std::fmt::Display) -> HarnessEvent {
    HarnessEvent::Error {
        error: format!("storing the thread failed: {error}"),
        error_type: Some(ErrorCode::Storage.into()),
        retryable: Some(true),
        retry_delay_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_digits_are_what_format_writes() {
        for value in [0u64, 1, 0xabc, 0x18b_2c3d_4e5f, u64::from(u32::MAX)] {
            let mut out = String::new();
            push_hex(&mut out, value, 11);
            assert_eq!(out, format!("{value:011x}"));
        }
        let id = default_id();
        assert_eq!(id.len(), 19);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert!(id[..11] <= *format!("{:011x}", unix_ms()), "{id}");
        assert_ne!(default_id(), default_id());
    }
}
