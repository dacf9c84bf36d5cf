//! The kernel: one agent run, `bootstrap -> [think -> act -> observe -> verify]* -> complete`.
//!
//! - **Think**: assemble the system prompt (`prompt.system`) and tools (`tool.schema`), call
//!   the model (`model.request`, streaming, retried with backoff), act on its response
//!   (`model.response`, `message.assistant`).
//! - **Act**: heal each tool call (`tool.healing`, `nudge.healing-*`), let handlers reshape it
//!   (`tool.call`), gate it (`tool.gate-result`), run the allowed calls in parallel with a
//!   timeout, and add their results in call order (`message.tool-result` /
//!   `message.tool-error`, `observation.tool-result`).
//! - **Observe**: record failures (`lifecycle.failure`), score the strategy
//!   (`control.strategy-evaluated`) and switch or escalate, detect loops
//!   (`nudge.loop-detected`).
//! - **Verify**: before finishing, check output length (`message.max-tokens-recovery`),
//!   required tools (`nudge.required-tools-pending`), open tasks (`nudge.tasks-incomplete`),
//!   the verifier (`nudge.verifier-retry`) and the terminate decision (`decision.terminate`).
//!
//! Every tag's reshaped payload is what the kernel then uses. The state is an immutable
//! [`KernelState`] snapshot that changes only between emits; an aborted run ends with every
//! tool call answered, so the conversation stays valid for the next run.
//!
//! ```
//! use harness_core::kernel::{Kernel, RunInput};
//! use harness_core::model::{Scripted, ScriptedModel};
//! use harness_core::tool::{tool_fn, ToolContext, ToolError};
//! use harness_tags::RunOutcome;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Add { a: i64, b: i64 }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let model = ScriptedModel::new("scripted/demo")
//!     .then(Scripted::tool_call("add", serde_json::json!({"a": 2, "b": 3})))
//!     .then(Scripted::text("2 + 3 = 5"));
//! let kernel = Kernel::builder()
//!     .model(model)
//!     .instructions("You are a calculator.")
//!     .tool(tool_fn("add", "Adds two integers.", |args: Add, _: ToolContext| async move {
//!         Ok::<_, ToolError>((args.a + args.b).to_string())
//!     }))
//!     .build()
//!     .unwrap();
//! let result = kernel.run(RunInput::new("What is 2 + 3?")).await;
//! assert_eq!(result.outcome, RunOutcome::Complete);
//! assert_eq!(result.final_text.as_deref(), Some("2 + 3 = 5"));
//! assert_eq!(result.state.messages[2].content(), "5");
//! # });
//! ```

mod canonical;
mod healing;
mod json_repair;
mod loops;
mod run;
mod state;
mod strategy;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use harness_tags::{
    EmitError, KernelMessage, KernelState, LifecycleFailure, Pipeline, RunEnd, RunOutcome,
    SessionView, ToolCall, ToolCategory, Usage,
};
use tokio_util::sync::CancellationToken;

pub use canonical::canonical_json;
pub use healing::{Healing, HealingFailure, heal_tool_call};
pub use json_repair::repair_json;
pub use loops::{LoopConfig, LoopSignal};
pub use strategy::{Strategy, StrategyConfig};

use crate::model::{IntoModel, Model, ModelError, ModelId, RetryPolicy};
use crate::tool::{
    HarnessChannel, IntoTool, RegistryError, Tool, ToolRegistry, ToolSource, ToolSources,
};

/// A predicate over the state after each step; `true` ends the run.
pub type StopWhen = Arc<dyn Fn(&KernelState) -> bool + Send + Sync>;

/// Finds the model for a model id (strategies that switch models use it).
pub type ModelResolver = Arc<dyn Fn(&ModelId) -> Result<Arc<dyn Model>, ModelError> + Send + Sync>;

/// Maps a tool name to its permission category, overriding the tool's own.
pub type CategoryResolver = Arc<dyn Fn(&str) -> Option<ToolCategory> + Send + Sync>;

/// Checks a final answer before the run may end.
#[async_trait]
pub trait Verifier: Send + Sync + 'static {
    /// Accepts the answer or says what is wrong with it (the model is told, and tries again).
    async fn verify(&self, answer: &str, state: &KernelState) -> Verdict;
}

/// A verifier's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The answer may end the run.
    Accept,
    /// The answer is rejected, for this reason.
    Reject(String),
}

/// What the session a run belongs to allows right now, read when each tool call is gated
/// (into [`ToolCallCtx::session`](harness_tags::ToolCallCtx::session)).
pub trait SessionSource: Send + Sync + 'static {
    /// The current view.
    fn view(&self) -> SessionView;
}

/// The open items of the task list, for the `nudge.tasks-incomplete` check.
pub trait OpenTasks: Send + Sync + 'static {
    /// Descriptions of the tasks not completed yet.
    fn open_tasks(&self) -> Vec<String>;
}

/// How a kernel runs.
#[derive(Clone)]
pub struct KernelConfig {
    /// The base system prompt (strategy instructions are appended).
    pub instructions: String,
    /// Model calls per run before the kernel ends it.
    pub max_steps: u32,
    /// Ends the run when it returns true after a step.
    pub stop_when: Option<StopWhen>,
    /// The strategies, in the order they are tried; empty means one implicit `default`.
    pub strategies: Vec<Strategy>,
    /// How the strategy evaluator scores and recommends.
    pub strategy: StrategyConfig,
    /// Loop-detection thresholds.
    pub loops: LoopConfig,
    /// How model calls are retried.
    pub retry: RetryPolicy,
    /// How long a tool call may take when the tool does not say.
    pub tool_timeout: Duration,
    /// Tools that must have run successfully before the run may finish.
    pub required_tools: Vec<String>,
    /// Checks final answers.
    pub verifier: Option<Arc<dyn Verifier>>,
    /// How many times each finishing check (required tools, open tasks, verifier) may send the
    /// model back before the run is allowed to end anyway.
    pub max_nudges: u32,
    /// How many times the model may be asked to continue an answer cut off by its token limit.
    pub max_tokens_recoveries: u32,
    /// How many times `decision.terminate` handlers may veto the end of a run.
    pub max_terminate_vetoes: u32,
    /// Sampling temperature sent to the model.
    pub temperature: Option<f32>,
    /// The most tokens the model may produce per call.
    pub max_output_tokens: Option<u32>,
    /// Overrides tools' own permission categories.
    pub category_resolver: Option<CategoryResolver>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            instructions: String::new(),
            max_steps: 50,
            stop_when: None,
            strategies: Vec::new(),
            strategy: StrategyConfig::default(),
            loops: LoopConfig::default(),
            retry: RetryPolicy::default(),
            tool_timeout: Duration::from_secs(120),
            required_tools: Vec::new(),
            verifier: None,
            max_nudges: 3,
            max_tokens_recoveries: 3,
            max_terminate_vetoes: 3,
            temperature: None,
            max_output_tokens: None,
            category_resolver: None,
        }
    }
}

impl fmt::Debug for KernelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelConfig")
            .field("max_steps", &self.max_steps)
            .field("strategies", &self.strategies)
            .field("loops", &self.loops)
            .field("retry", &self.retry)
            .field("tool_timeout", &self.tool_timeout)
            .field("required_tools", &self.required_tools)
            .finish_non_exhaustive()
    }
}

/// Why a kernel could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelBuildError {
    /// A tool could not be registered.
    #[error(transparent)]
    Tool(#[from] RegistryError),
    /// Two strategies share a name.
    #[error("strategy `{0}` is configured twice; strategy names must be unique")]
    DuplicateStrategy(String),
    /// A strategy offers a tool the kernel does not have.
    #[error("strategy `{strategy}` offers tool `{tool}`, which is not registered")]
    UnknownStrategyTool {
        /// The strategy.
        strategy: String,
        /// The tool.
        tool: String,
    },
}

/// Builds a [`Kernel`].
#[derive(Default)]
pub struct KernelBuilder {
    model: Option<Arc<dyn Model>>,
    resolver: Option<ModelResolver>,
    tools: ToolRegistry,
    pending_tools: Vec<Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    pipeline: Option<Pipeline>,
    config: KernelConfig,
}

impl std::fmt::Debug for KernelBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelBuilder").finish_non_exhaustive()
    }
}

impl KernelBuilder {
    /// The default model (a run can override it).
    pub fn model(mut self, model: impl IntoModel) -> Self {
        self.model = Some(model.into_model());
        self
    }

    /// How strategies find the models they name. Without one, a strategy that names a model
    /// ends the run with a configuration error: the kernel never reads the environment itself
    /// (pass [`resolve_model`](crate::model::resolve_model) for the built-in providers
    /// configured from the environment).
    pub fn model_resolver(
        mut self,
        resolver: impl Fn(&ModelId) -> Result<Arc<dyn Model>, ModelError> + Send + Sync + 'static,
    ) -> Self {
        self.resolver = Some(Arc::new(resolver));
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.pending_tools.push(tool.into_tool());
        self
    }

    /// Uses these tools (replacing those added so far).
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self.pending_tools.clear();
        self
    }

    /// Adds a source of tools that can change while the kernel runs (an MCP server): it is
    /// asked for its tools before every step, and they are offered next to the kernel's own.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// The tag pipeline every emit goes through (default: no handlers).
    pub fn pipeline(mut self, pipeline: Pipeline) -> Self {
        self.pipeline = Some(pipeline);
        self
    }

    /// The base system prompt.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.config.instructions = instructions.into();
        self
    }

    /// Model calls per run (default 50).
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.config.max_steps = max_steps;
        self
    }

    /// Ends the run when `stop` returns true after a step.
    pub fn stop_when(
        mut self,
        stop: impl Fn(&KernelState) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.config.stop_when = Some(Arc::new(stop));
        self
    }

    /// Adds a strategy (the first added is the starting one).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.config.strategies.push(strategy);
        self
    }

    /// Sets the strategy evaluator's thresholds.
    pub fn strategy_config(mut self, config: StrategyConfig) -> Self {
        self.config.strategy = config;
        self
    }

    /// Sets the loop-detection thresholds.
    pub fn loop_detection(mut self, config: LoopConfig) -> Self {
        self.config.loops = config;
        self
    }

    /// Sets how model calls are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.config.retry = retry;
        self
    }

    /// Sets the default per-call tool timeout (default 120 s).
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.config.tool_timeout = timeout;
        self
    }

    /// Tools that must run successfully before the run may finish.
    pub fn required_tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.config.required_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Checks final answers.
    pub fn verifier(mut self, verifier: impl Verifier) -> Self {
        self.config.verifier = Some(Arc::new(verifier));
        self
    }

    /// Overrides tools' own permission categories.
    pub fn category_resolver(
        mut self,
        resolver: impl Fn(&str) -> Option<ToolCategory> + Send + Sync + 'static,
    ) -> Self {
        self.config.category_resolver = Some(Arc::new(resolver));
        self
    }

    /// Replaces the whole configuration.
    pub fn config(mut self, config: KernelConfig) -> Self {
        self.config = config;
        self
    }

    /// Mutable access to the configuration, for settings without a builder method.
    pub fn config_mut(&mut self) -> &mut KernelConfig {
        &mut self.config
    }

    /// Builds the kernel, checking tools and strategies.
    pub fn build(self) -> Result<Kernel, KernelBuildError> {
        let mut tools = self.tools;
        for tool in self.pending_tools {
            tools.register(tool)?;
        }
        let mut names = std::collections::HashSet::new();
        for strategy in &self.config.strategies {
            if !names.insert(strategy.name.as_str()) {
                return Err(KernelBuildError::DuplicateStrategy(strategy.name.clone()));
            }
            for tool in strategy.tools.iter().flatten() {
                if tools.get(tool).is_none() {
                    return Err(KernelBuildError::UnknownStrategyTool {
                        strategy: strategy.name.clone(),
                        tool: tool.clone(),
                    });
                }
            }
        }
        Ok(Kernel {
            inner: Arc::new(KernelInner {
                model: self.model,
                resolver: self.resolver,
                tools,
                sources: ToolSources::new(self.sources),
                pipeline: self.pipeline.unwrap_or_default(),
                config: self.config,
            }),
        })
    }
}

/// Runs agents: a model, tools, a pipeline and a configuration. Cheap to clone.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<KernelInner>,
}

pub(crate) struct KernelInner {
    pub(crate) model: Option<Arc<dyn Model>>,
    pub(crate) resolver: Option<ModelResolver>,
    pub(crate) tools: ToolRegistry,
    pub(crate) sources: ToolSources,
    pub(crate) pipeline: Pipeline,
    pub(crate) config: KernelConfig,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field(
                "model",
                &self.inner.model.as_ref().map(|m| m.id().to_string()),
            )
            .field("tools", &self.inner.tools)
            .field("config", &self.inner.config)
            .finish()
    }
}

impl Kernel {
    /// Starts building a kernel.
    pub fn builder() -> KernelBuilder {
        KernelBuilder::default()
    }

    /// The kernel's tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// The permission category of a tool: one of the kernel's own, or one its tool sources
    /// offered in the last step that asked them.
    pub fn tool_category(&self, tool_name: &str) -> Option<ToolCategory> {
        match self.inner.tools.get(tool_name) {
            Some(tool) => Some(tool.tool.category()),
            None => self.inner.sources.category(tool_name),
        }
    }

    /// The kernel's pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.inner.pipeline
    }

    /// The kernel's configuration.
    pub fn config(&self) -> &KernelConfig {
        &self.inner.config
    }

    /// Runs the agent on one input until it finishes, fails, is aborted or reaches its limit.
    /// Never panics: every failure ends in a [`RunResult`] with a clear outcome.
    pub async fn run(&self, input: RunInput) -> RunResult {
        run::run(&self.inner, input).await
    }

    /// Calls one tool outside the loop, as a model's call is called: `tool.call` handlers
    /// reshape or suppress it, its arguments are checked against its schema (nothing heals
    /// them), the permission gate decides (a verdict that asks the user refuses the call
    /// unless `input` has a channel to ask on), the tool runs with its timeout, and
    /// `message.tool-result` / `message.tool-error` handlers reshape the result (so a
    /// redactor sees it). No model is called and nothing joins a conversation; `input` gives
    /// the context (thread, mode, model id, channel, abort, observer), its message is unused.
    /// Fails only without a model (its id is in every context).
    pub async fn invoke(
        &self,
        input: RunInput,
        call: ToolCall,
    ) -> Result<ToolInvocation, KernelError> {
        run::invoke(&self.inner, input, call).await
    }
}

/// What a direct call ([`Kernel::invoke`]) did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolInvocation {
    /// The call as it ran (after `tool.call` handlers).
    pub call: ToolCall,
    /// Its result as the result handlers left it: what a model would have seen.
    pub content: String,
    /// True if it failed or was refused.
    pub is_error: bool,
    /// Why it did not run; `None` if it ran.
    pub refused: Option<Refusal>,
    /// How long the tool ran.
    pub duration_ms: u64,
}

/// Why a direct call did not run (`content` says more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// No tool has the name.
    UnknownTool,
    /// The arguments do not fit the tool's input schema.
    InvalidArguments,
    /// A `tool.call` handler or the permission gate stopped it.
    Blocked,
}

/// One run's input: the user's message, the conversation so far, and how the run connects
/// to its host.
#[derive(Clone)]
pub struct RunInput {
    pub(crate) message: KernelMessage,
    pub(crate) history: Arc<Vec<KernelMessage>>,
    pub(crate) run_id: Option<String>,
    pub(crate) thread_id: Option<Arc<str>>,
    pub(crate) parent_thread_id: Option<Arc<str>>,
    pub(crate) resource_id: Option<Arc<str>>,
    pub(crate) mode_id: Option<Arc<str>>,
    pub(crate) model: Option<Arc<dyn Model>>,
    pub(crate) abort: CancellationToken,
    pub(crate) channel: Option<Arc<dyn HarnessChannel>>,
    pub(crate) observer: Option<Arc<dyn KernelObserver>>,
    pub(crate) tasks: Option<Arc<dyn OpenTasks>>,
    pub(crate) session: Option<Arc<dyn SessionSource>>,
}

impl fmt::Debug for RunInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunInput")
            .field("message", &self.message)
            .field("history", &self.history.len())
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl RunInput {
    /// A run on this user message.
    pub fn new(text: impl Into<String>) -> Self {
        RunInput::message(KernelMessage::user(text))
    }

    /// A run on this message (normally a user message).
    pub fn message(message: KernelMessage) -> Self {
        RunInput {
            message,
            history: Arc::default(),
            run_id: None,
            thread_id: None,
            parent_thread_id: None,
            resource_id: None,
            mode_id: None,
            model: None,
            abort: CancellationToken::new(),
            channel: None,
            observer: None,
            tasks: None,
            session: None,
        }
    }

    /// The conversation before this message. Pass a shared `Arc` to keep it between runs
    /// without copying: the run appends to it in place when it holds the only reference
    /// (copying it once otherwise), and [`RunResult::state`] holds the whole conversation.
    pub fn history(mut self, history: impl Into<Arc<Vec<KernelMessage>>>) -> Self {
        self.history = history.into();
        self
    }

    /// The run's id (default: generated).
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// The thread and resource the run belongs to.
    pub fn thread(
        mut self,
        thread_id: impl Into<Arc<str>>,
        resource_id: impl Into<Arc<str>>,
    ) -> Self {
        self.thread_id = Some(thread_id.into());
        self.resource_id = Some(resource_id.into());
        self
    }

    /// The thread of the run that spawns this one (a subagent's parent thread); contexts
    /// carry it as [`BaseCtx::parent_thread_id`](harness_tags::BaseCtx::parent_thread_id).
    pub fn parent_thread(mut self, thread_id: impl Into<Arc<str>>) -> Self {
        self.parent_thread_id = Some(thread_id.into());
        self
    }

    /// The mode the run is in.
    pub fn mode(mut self, mode_id: impl Into<Arc<str>>) -> Self {
        self.mode_id = Some(mode_id.into());
        self
    }

    /// Uses this model instead of the kernel's.
    pub fn model(mut self, model: Arc<dyn Model>) -> Self {
        self.model = Some(model);
        self
    }

    /// Aborts the run when this token is cancelled.
    pub fn abort(mut self, abort: CancellationToken) -> Self {
        self.abort = abort;
        self
    }

    /// The harness back-channel (approvals, suspensions, escalations).
    pub fn channel(mut self, channel: Arc<dyn HarnessChannel>) -> Self {
        self.channel = Some(channel);
        self
    }

    /// Receives the run's events as they happen.
    pub fn observer(mut self, observer: Arc<dyn KernelObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The task list the `nudge.tasks-incomplete` check reads.
    pub fn tasks(mut self, tasks: Arc<dyn OpenTasks>) -> Self {
        self.tasks = Some(tasks);
        self
    }

    /// The session whose state and grants tool-call handlers see.
    pub fn session(mut self, session: Arc<dyn SessionSource>) -> Self {
        self.session = Some(session);
        self
    }
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The run's id.
    pub run_id: String,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The final state: the whole conversation, steps and usage.
    pub state: Arc<KernelState>,
    /// The final answer, if there is one.
    pub final_text: Option<String>,
    /// Why the run failed, if it did.
    pub error: Option<KernelError>,
    /// Tokens used by the run.
    pub usage: Usage,
    /// Model calls made.
    pub steps: u32,
    /// Wall-clock duration.
    pub duration: Duration,
}

/// Why a run failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The model kept failing.
    #[error("the model call failed: {0}")]
    Model(#[from] ModelError),
    /// No model was given to the kernel or the run.
    #[error(
        "no model: give the kernel one with `KernelBuilder::model` or the run one with `RunInput::model`"
    )]
    NoModel,
    /// A `message.user-task` handler rejected the user's message.
    #[error("the message was rejected by handler `{handler}`")]
    Rejected {
        /// The handler that suppressed the message.
        handler: String,
    },
    /// A fail-closed handler failed where the run cannot go on without it.
    #[error(transparent)]
    Handler(#[from] EmitError),
    /// The strategy evaluator escalated and nobody answered.
    #[error("the run was escalated and ended: {reason}")]
    Escalated {
        /// Why it escalated.
        reason: String,
    },
}

/// Something that happened during a run, for user interfaces and storage. Owned, so an
/// observer can queue it as it is; the kernel builds one only when an observer is attached.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum KernelEvent {
    /// The run began.
    RunStarted {
        /// The run's id.
        run_id: String,
    },
    /// A message was added to the conversation (user, assistant, tool result or nudge).
    MessageAdded {
        /// The message, as the model will see it.
        message: KernelMessage,
    },
    /// More answer text streamed in (after `message.text-delta` handlers).
    TextDelta {
        /// The message it belongs to: one per model call attempt, the id of the assistant
        /// message the call produces.
        message_id: Arc<str>,
        /// The new text.
        text: String,
    },
    /// More reasoning text streamed in (after `message.text-delta` handlers).
    ThinkingDelta {
        /// The message it belongs to (as for [`KernelEvent::TextDelta`]).
        message_id: Arc<str>,
        /// The new text.
        text: String,
    },
    /// The model began a tool call.
    ToolInputStarted {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        tool_name: String,
    },
    /// More of a tool call's arguments streamed in (after `message.text-delta` handlers).
    ToolInputDelta {
        /// The call's id.
        call_id: String,
        /// The new argument text.
        delta: String,
    },
    /// A tool call's arguments are complete.
    ToolInputEnded {
        /// The call's id.
        call_id: String,
    },
    /// A tool call starts running.
    ToolStarted {
        /// The call, after healing and handlers.
        call: ToolCall,
    },
    /// A tool call finished.
    ToolFinished(FinishedCall),
    /// A model call failed and will be retried.
    ModelRetry {
        /// The attempt that failed.
        attempt: u32,
        /// Why.
        error: ModelError,
        /// How long the kernel waits before the next attempt.
        wait: Duration,
    },
    /// The run's token usage changed.
    Usage {
        /// The run's total so far.
        usage: Usage,
    },
    /// The agent entered a failure state.
    Failure {
        /// The failure, as handlers left it.
        failure: LifecycleFailure,
    },
    /// The run ended.
    RunFinished {
        /// How, as handlers left it.
        end: RunEnd,
    },
}

/// A finished tool call, as [`KernelEvent::ToolFinished`] reports it.
#[derive(Clone, Debug)]
pub struct FinishedCall {
    /// The call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The result text the model sees.
    pub content: String,
    /// The tool's own output, before `message.tool-result` / `message.tool-error`
    /// handlers reshaped it for the model.
    pub output: String,
    /// True if the call failed.
    pub is_error: bool,
    /// True if healing repaired the call before it ran.
    pub healed: bool,
    /// How long it ran.
    pub duration_ms: u64,
}

/// Receives a run's events. Called on the run's task: keep it quick (queue the work).
pub trait KernelObserver: Send + Sync + 'static {
    /// One event.
    fn on_event(&self, event: KernelEvent);
}

impl<F: Fn(KernelEvent) + Send + Sync + 'static> KernelObserver for F {
    fn on_event(&self, event: KernelEvent) {
        self(event)
    }
}
