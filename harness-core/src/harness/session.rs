//! The session: the per-conversation state of a harness.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use harness_protocol::EventScope;
use harness_tags::util::lock;
use harness_tags::{SessionView, ToolCategory, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;

use super::channel::PendingAnswer;
use super::conversation::Conversation;
use super::runs::RunSlot;
use crate::model::ModelId;
use crate::store::ThreadRecord;
use crate::task::TaskBoard;
use crate::tool::ApprovalAnswer;

/// The calls still waiting in `pending`: (call id, tool). Waiters that went away (their run
/// was aborted, their tool timed out) are dropped first.
fn waiting<T>(pending: &mut Vec<PendingAnswer<T>>) -> Vec<(String, String)> {
    pending.retain(PendingAnswer::is_waiting);
    pending
        .iter()
        .map(|p| (p.call_id.clone(), p.tool_name.clone()))
        .collect()
}

/// Tools and categories the user allowed for the rest of the session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grants {
    /// Tools allowed by name.
    pub tools: BTreeSet<String>,
    /// Categories allowed.
    pub categories: BTreeSet<ToolCategory>,
}

/// The per-conversation state: identity, the bound thread, mode and model, the run and its
/// queue, pending approvals and suspensions, grants, token usage and application state.
///
/// Read it through its accessors; change it through the [`Harness`](super::Harness)'s
/// methods, which also persist the change and emit its event.
pub struct Session {
    pub(crate) resource_id: Mutex<String>,
    pub(crate) thread: Mutex<Option<ThreadRecord>>,
    pub(crate) mode_id: Mutex<String>,
    pub(crate) model_id: Mutex<Option<ModelId>>,
    pub(crate) runs: Mutex<RunSlot>,
    pub(crate) idle: Notify,
    pub(crate) approvals: Mutex<Vec<PendingAnswer<ApprovalAnswer>>>,
    pub(crate) suspensions: Mutex<Vec<PendingAnswer<Value>>>,
    pub(crate) grants: Mutex<Grants>,
    pub(crate) usage: Mutex<Usage>,
    pub(crate) state: Mutex<Arc<Value>>,
    pub(crate) tasks: Arc<TaskBoard>,
    pub(crate) plan_approved: Mutex<bool>,
    /// The bound thread and the active run, stamped on every event the harness publishes.
    pub(crate) scope: Mutex<EventScope>,
    /// The bound thread's conversation between runs (see `conversation.rs`).
    pub(crate) conversation: Mutex<Option<Conversation>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("resource_id", &self.resource_id())
            .field("thread_id", &self.thread_id())
            .field("mode_id", &self.mode_id())
            .field("model_id", &self.model_id())
            .field("running", &self.is_running())
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        resource_id: String,
        mode_id: String,
        model_id: Option<ModelId>,
        state: Value,
    ) -> Self {
        Session {
            resource_id: Mutex::new(resource_id),
            thread: Mutex::new(None),
            mode_id: Mutex::new(mode_id),
            model_id: Mutex::new(model_id),
            runs: Mutex::new(RunSlot::default()),
            idle: Notify::new(),
            approvals: Mutex::new(Vec::new()),
            suspensions: Mutex::new(Vec::new()),
            grants: Mutex::new(Grants::default()),
            usage: Mutex::new(Usage::default()),
            state: Mutex::new(Arc::new(state)),
            tasks: Arc::new(TaskBoard::new()),
            plan_approved: Mutex::new(false),
            scope: Mutex::new(EventScope::default()),
            conversation: Mutex::new(None),
        }
    }

    /// The resource threads are grouped under.
    pub fn resource_id(&self) -> String {
        lock(&self.resource_id).clone()
    }

    /// The bound thread's id.
    pub fn thread_id(&self) -> Option<String> {
        lock(&self.thread).as_ref().map(|t| t.id.clone())
    }

    /// The bound thread.
    pub fn thread(&self) -> Option<ThreadRecord> {
        lock(&self.thread).clone()
    }

    /// The active mode.
    pub fn mode_id(&self) -> String {
        lock(&self.mode_id).clone()
    }

    /// The active mode's model.
    pub fn model_id(&self) -> Option<ModelId> {
        lock(&self.model_id).clone()
    }

    /// True while a run is active.
    pub fn is_running(&self) -> bool {
        lock(&self.runs).active.is_some()
    }

    /// Messages queued behind the active run.
    pub fn queued_follow_ups(&self) -> Vec<String> {
        lock(&self.runs)
            .queue
            .iter()
            .map(|q| q.content.clone())
            .collect()
    }

    /// The calls waiting for approval, oldest first: (call id, tool). Several wait at once
    /// when subagents ask together; answer each with
    /// [`respond_to_tool_approval`](super::Harness::respond_to_tool_approval).
    pub fn pending_approvals(&self) -> Vec<(String, String)> {
        waiting(&mut lock(&self.approvals))
    }

    /// The suspended tool calls: (call id, tool).
    pub fn pending_suspensions(&self) -> Vec<(String, String)> {
        waiting(&mut lock(&self.suspensions))
    }

    /// What the user allowed for the rest of the session.
    pub fn grants(&self) -> Grants {
        lock(&self.grants).clone()
    }

    /// The bound thread's token usage.
    pub fn token_usage(&self) -> Usage {
        *lock(&self.usage)
    }

    /// The application state.
    pub fn state(&self) -> Value {
        Value::clone(&lock(&self.state))
    }

    /// The task list.
    pub fn tasks(&self) -> Arc<TaskBoard> {
        Arc::clone(&self.tasks)
    }

    /// What tool-call gates see of the session.
    pub(crate) fn view(&self) -> SessionView {
        let grants = lock(&self.grants);
        SessionView {
            state: Arc::clone(&lock(&self.state)),
            granted_tools: Arc::new(grants.tools.clone()),
            granted_categories: Arc::new(grants.categories.clone()),
        }
    }

    /// Binds a thread: its record, and the scope of the events that follow.
    pub(crate) fn bind_thread(&self, record: ThreadRecord) {
        lock(&self.scope).thread_id = Some(Arc::from(record.id.as_str()));
        let mut thread = lock(&self.thread);
        if thread.as_ref().is_none_or(|bound| bound.id != record.id) {
            lock(&self.conversation).take();
        }
        *thread = Some(record);
    }

    pub(crate) fn unbind_thread(&self) {
        lock(&self.scope).thread_id = None;
        let mut thread = lock(&self.thread);
        lock(&self.conversation).take();
        *thread = None;
    }

    /// Marks the events that follow as part of `run_id` (`None`: of no run).
    pub(crate) fn set_run(&self, run_id: Option<&str>) {
        lock(&self.scope).run_id = run_id.map(Arc::from);
    }

    /// The thread and run events are published for now.
    pub(crate) fn event_scope(&self) -> EventScope {
        lock(&self.scope).clone()
    }
}
