//! The contexts tags are emitted with: read-only information about the emit site.
//!
//! Every kernel context embeds a [`BaseCtx`] (flattened in JSON), which carries the iteration,
//! phase, a read-only snapshot of the [`KernelState`] and the run's identity. Ids are `Arc<str>`
//! so cloning a context (for async handlers) costs reference counts, not copies.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::payload::ToolCategory;
use crate::payload::{KernelMessage, ObservationStep, Usage};
use crate::phase::Phase;

/// What a tag's context must be: cloneable (async handlers get a clone), serializable (JSON
/// handlers see it as JSON) and describable as a JSON Schema (for the catalog).
///
/// The two methods feed the debug-level `tracing` span every emit opens; a third-party context
/// type can rely on the defaults: `impl TagContext for MyCtx {}`.
pub trait TagContext: Clone + Send + Sync + Serialize + JsonSchema + 'static {
    /// The kernel iteration the emit belongs to, if any.
    fn iteration(&self) -> Option<u32> {
        None
    }

    /// The tool call the emit belongs to, if any.
    fn call_id(&self) -> Option<&str> {
        None
    }
}

impl TagContext for BaseCtx {
    fn iteration(&self) -> Option<u32> {
        Some(self.iteration)
    }
}

/// Implements [`TagContext`] for contexts that embed a `base: BaseCtx`.
macro_rules! based_context {
    ($($ctx:ty => $call_id:expr),* $(,)?) => {
        $(impl TagContext for $ctx {
            fn iteration(&self) -> Option<u32> {
                Some(self.base.iteration)
            }

            fn call_id(&self) -> Option<&str> {
                let call_id: fn(&$ctx) -> Option<&str> = $call_id;
                call_id(self)
            }
        })*
    };
}

based_context! {
    NudgeCtx => |_| None,
    ToolCallCtx => |ctx| Some(&ctx.call_id),
    ToolResultCtx => |ctx| Some(&ctx.call_id),
    ModelCtx => |_| None,
    MemoryCtx => |_| None,
    SubagentCtx => |ctx| Some(&ctx.tool_call_id),
}

impl TagContext for ThreadCtx {}

impl TagContext for McpCtx {}

impl TagContext for serde_json::Value {}

/// Read-only state of the kernel at the moment of an emit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelState {
    /// The conversation as the model sees it.
    pub messages: Arc<Vec<KernelMessage>>,
    /// The steps recorded so far in this run.
    pub steps: Vec<ObservationStep>,
    /// The current iteration (0 before the first model call).
    pub iteration: u32,
    /// Consecutive failures without a success in between.
    pub failure_streak: u32,
    /// The name of the active strategy.
    pub strategy: String,
    /// Token usage of the run so far.
    pub usage: Usage,
}

/// The context every kernel tag carries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BaseCtx {
    /// The current iteration of the agent loop.
    pub iteration: u32,
    /// The phase of the emit.
    pub phase: Phase,
    /// A read-only snapshot of the kernel state.
    pub state: Arc<KernelState>,
    /// The active strategy's name.
    pub strategy: Arc<str>,
    /// The run's id.
    pub run_id: Arc<str>,
    /// The thread the run belongs to, if it runs inside a harness session.
    pub thread_id: Option<Arc<str>>,
    /// The thread of the run that spawned this one: a subagent's parent thread (a fresh
    /// subagent has no thread of its own; a forked one runs on a hidden copy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_thread_id: Option<Arc<str>>,
    /// The resource (project, user) the thread belongs to.
    pub resource_id: Option<Arc<str>>,
    /// The active mode, if any.
    pub mode_id: Option<Arc<str>>,
    /// The model in use, `provider/name`.
    pub model_id: Arc<str>,
}

impl BaseCtx {
    /// The thread whose records this emit belongs with: the parent thread of a subagent's
    /// run, else the run's own thread. Plugins that keep per-thread state (a pseudonym vault,
    /// memory) key it by this, so a subagent shares its parent's state, never another
    /// thread's, and deleting the parent drops it.
    ///
    /// ```
    /// use harness_tags::BaseCtx;
    ///
    /// let subagent = BaseCtx { parent_thread_id: Some("t1".into()), ..BaseCtx::default() };
    /// assert_eq!(subagent.root_thread_id(), Some("t1"));
    /// let run = BaseCtx { thread_id: Some("t2".into()), ..BaseCtx::default() };
    /// assert_eq!(run.root_thread_id(), Some("t2"));
    /// ```
    pub fn root_thread_id(&self) -> Option<&str> {
        self.parent_thread_id
            .as_deref()
            .or(self.thread_id.as_deref())
    }
}

/// How serious a nudge is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Informational.
    #[default]
    Info,
    /// Something is going wrong.
    Warn,
    /// The run is in trouble.
    Critical,
}

/// Context of `nudge.*` tags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NudgeCtx {
    /// The kernel context.
    #[serde(flatten)]
    pub base: BaseCtx,
    /// What triggered the nudge (e.g. `repeated-tool-call`).
    pub trigger: String,
    /// How serious it is.
    pub severity: Severity,
}

/// Context of tags about a tool call that is about to run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallCtx {
    /// The kernel context.
    #[serde(flatten)]
    pub base: BaseCtx,
    /// The tool's name.
    pub tool_name: String,
    /// The call's id.
    pub call_id: String,
    /// The tool's permission category, if a resolver knows it.
    pub category: Option<ToolCategory>,
    /// What the session allows right now (empty outside a harness session).
    #[serde(default)]
    pub session: SessionView,
}

/// A read-only view of the session a run belongs to, taken when a tool call is gated: the
/// application state and what the user allowed for the rest of the session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    /// The application state (`null` outside a harness).
    pub state: Arc<serde_json::Value>,
    /// Tools the user allowed for the session.
    pub granted_tools: Arc<std::collections::BTreeSet<String>>,
    /// Categories the user allowed for the session.
    pub granted_categories: Arc<std::collections::BTreeSet<ToolCategory>>,
}

impl SessionView {
    /// True if the application state has `"yolo": true` (approve everything not denied).
    pub fn yolo(&self) -> bool {
        self.state.get("yolo").and_then(serde_json::Value::as_bool) == Some(true)
    }
}

/// Context of tags about a tool's result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultCtx {
    /// The kernel context.
    #[serde(flatten)]
    pub base: BaseCtx,
    /// The tool's name.
    pub tool_name: String,
    /// The call's id.
    pub call_id: String,
    /// True if healing changed the call before it ran.
    pub healed: bool,
    /// Wall-clock execution time of the tool, in milliseconds.
    pub duration_ms: u64,
}

/// Context of `model.*` tags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelCtx {
    /// The kernel context.
    #[serde(flatten)]
    pub base: BaseCtx,
    /// The provider, e.g. `openai`.
    pub provider: String,
    /// The model name within the provider.
    pub model: String,
    /// 1 for the first try of this call, 2 for the first retry, ...
    pub attempt: u32,
}

/// Context of observational-memory tags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryCtx {
    /// The kernel context.
    #[serde(flatten)]
    pub base: BaseCtx,
    /// How many times the observations were reflected so far.
    pub generation: u32,
    /// Tokens in the active observations.
    pub observation_tokens: u64,
    /// Tokens in messages not yet observed.
    pub pending_tokens: u64,
}

/// Context of `subagent.*` and `message.subagent-handoff` tags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubagentCtx {
    /// The parent's kernel context.
    #[serde(flatten)]
    pub base: BaseCtx,
    /// The subagent's type, e.g. `explore`.
    pub agent_type: String,
    /// The parent's `subagent` tool call.
    pub tool_call_id: String,
    /// True if the subagent runs on a clone of the parent thread.
    pub forked: bool,
}

/// Context of `thread.*` tags, emitted outside a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadCtx {
    /// The resource the thread belongs to.
    pub resource_id: Arc<str>,
    /// The harness's id.
    pub harness_id: Arc<str>,
}

/// Context of `mcp.*` tags, emitted outside a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpCtx {
    /// The server's name.
    pub server: Arc<str>,
    /// Why the server's tools were listed.
    pub reason: McpListReason,
}

/// Why an MCP server's tools were listed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum McpListReason {
    /// The client connected to the server for the first time.
    #[default]
    Connect,
    /// The server said its tools (or resources) changed.
    ListChanged,
    /// The client reconnected after the server failed or stopped.
    Reconnect,
}
