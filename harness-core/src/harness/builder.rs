//! Building a harness: modes, the shared agent, subagents, storage, plugins and options.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};
use std::time::Duration;

use harness_tags::{Compose, IntoPlugin, Pipeline, Plugin, ToolCategory};
use serde_json::{Map, Value};

use super::heartbeat::{Heartbeat, Heartbeats};
use super::services::HarnessServices;
use super::session::Session;
use super::subagent::{SubagentDef, subagent_tool};
use super::{HarnessInner, ModeKernels, default_id};
use crate::builtin::{self, BuiltinTool};
use crate::event::{EventHub, EventHubConfig, HarnessEvent};
use crate::kernel::{Kernel, KernelBuildError, KernelConfig, ModelResolver};
use crate::model::{AuthChecker, IntoModel, ModelCatalog, ModelError, ModelId};
use crate::protocol::ErrorCode;
use crate::store::{Store, ThreadLock};
use crate::tool::{IntoTool, Tool, ToolSource};

/// A saved setup of the agent: instructions layered over the shared agent's, a tool set, a
/// default model, and where `submit_plan` approval leads.
#[derive(Clone)]
pub struct Mode {
    /// The mode's id, e.g. `plan`.
    pub id: String,
    /// A display name.
    pub name: Option<String>,
    /// What the mode is for, for pickers.
    pub description: Option<String>,
    /// Instructions added to the shared agent's.
    pub instructions: Option<String>,
    /// The model used until the user picks another in this mode.
    pub default_model: Option<ModelId>,
    pub(crate) default_model_text: Option<String>,
    /// The mode an approved plan switches to.
    pub transitions_to: Option<String>,
    /// Tools replacing the shared agent's.
    pub tools: Option<Vec<Arc<dyn Tool>>>,
    /// Tools added to the shared agent's.
    pub additional_tools: Option<Vec<Arc<dyn Tool>>>,
    /// The mode the harness starts in (unless `default_mode` names another).
    pub default: bool,
    /// Anything else, for UIs.
    pub metadata: Map<String, Value>,
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mode")
            .field("id", &self.id)
            .field("default_model", &self.default_model_text)
            .field("transitions_to", &self.transitions_to)
            .finish_non_exhaustive()
    }
}

impl Mode {
    /// A mode with only an id.
    pub fn new(id: impl Into<String>) -> Self {
        Mode {
            id: id.into(),
            name: None,
            description: None,
            instructions: None,
            default_model: None,
            default_model_text: None,
            transitions_to: None,
            tools: None,
            additional_tools: None,
            default: false,
            metadata: Map::new(),
        }
    }

    /// Sets the display name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the mode's instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Sets the default model, `provider/name` (checked when the harness is built).
    pub fn default_model(mut self, model_id: impl Into<String>) -> Self {
        self.default_model_text = Some(model_id.into());
        self
    }

    /// The mode an approved plan switches to.
    pub fn transitions_to(mut self, mode_id: impl Into<String>) -> Self {
        self.transitions_to = Some(mode_id.into());
        self
    }

    /// Replaces the shared agent's tools in this mode.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.tools = Some(tools.into_iter().collect());
        self
    }

    /// Adds tools to the shared agent's in this mode.
    pub fn additional_tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.additional_tools = Some(tools.into_iter().collect());
        self
    }

    /// Makes this the starting mode.
    pub fn default(mut self) -> Self {
        self.default = true;
        self
    }

    /// Adds a metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }
}

/// The agent every mode layers over: base instructions and tools.
#[derive(Clone, Default)]
pub struct AgentConfig {
    /// Base instructions.
    pub instructions: String,
    /// Tools shared by every mode that does not replace them.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Sources of tools (MCP servers) shared like `tools`; asked before every step.
    pub sources: Vec<Arc<dyn ToolSource>>,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig").finish_non_exhaustive()
    }
}

/// Why a harness could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No mode was configured.
    #[error("a harness needs at least one mode; add one with `HarnessBuilder::mode`")]
    NoModes,
    /// Two modes share an id.
    #[error("mode `{0}` is configured twice; mode ids must be unique")]
    DuplicateMode(String),
    /// A mode transitions to itself or to a mode that does not exist.
    #[error("mode `{mode}` transitions to `{target}`, which is {why}")]
    BadTransition {
        /// The mode.
        mode: String,
        /// Its target.
        target: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A mode sets both `tools` and `additional_tools`.
    #[error(
        "mode `{0}` sets both `tools` (replacing the agent's) and `additional_tools` (adding to them); use one"
    )]
    ToolsAndAdditionalTools(String),
    /// The default mode does not exist.
    #[error("the default mode `{0}` is not configured")]
    UnknownDefaultMode(String),
    /// A model id is not `provider/name`.
    #[error("{0}")]
    InvalidModel(#[from] crate::model::ModelIdError),
    /// Two subagent types share an id.
    #[error("subagent type `{0}` is configured twice")]
    DuplicateSubagent(String),
    /// A subagent allows a harness tool that does not exist.
    #[error(
        "subagent `{subagent}` allows harness tool `{tool}`, which is not one of the agent's tools"
    )]
    UnknownHarnessTool {
        /// The subagent.
        subagent: String,
        /// The tool.
        tool: String,
    },
    /// The state schema is not a valid JSON Schema.
    #[error("the state schema is not a valid JSON Schema: {0}")]
    StateSchema(String),
    /// The initial state does not match the schema.
    #[error("the initial state does not match the state schema: {0}")]
    InitialState(String),
    /// A kernel could not be built (a tool name collides, a schema is invalid, ...).
    #[error("mode `{mode}`: {source}")]
    Kernel {
        /// The mode (or subagent type).
        mode: String,
        /// What went wrong.
        #[source]
        source: KernelBuildError,
    },
    /// The tag pipeline could not be built.
    #[error(transparent)]
    Pipeline(#[from] harness_tags::BuildError),
}

type ComposeBlock = Box<dyn FnOnce(Compose) -> Compose + Send>;

/// Builds a [`Harness`](super::Harness).
pub struct HarnessBuilder {
    id: String,
    resource_id: Option<String>,
    store: Option<Arc<dyn Store>>,
    lock: Option<Arc<dyn ThreadLock>>,
    state_schema: Option<Value>,
    initial_state: Map<String, Value>,
    modes: Vec<Mode>,
    default_mode: Option<String>,
    agent: AgentConfig,
    subagents: Vec<SubagentDef>,
    disabled_builtins: HashSet<BuiltinTool>,
    heartbeats: Vec<Heartbeat>,
    id_generator: Option<Arc<dyn Fn() -> String + Send + Sync>>,
    resolver: Option<ModelResolver>,
    catalog: Option<ModelCatalog>,
    auth_checker: Option<AuthChecker>,
    event_config: EventHubConfig,
    default_model: Option<String>,
    category_resolver: Option<crate::kernel::CategoryResolver>,
    plugins: Vec<Arc<dyn Plugin>>,
    compose: Vec<ComposeBlock>,
    kernel_config: KernelConfig,
    interactive: Option<bool>,
    persist_grants: bool,
    input_timeout: Option<Duration>,
}

impl std::fmt::Debug for HarnessBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessBuilder").finish_non_exhaustive()
    }
}

impl HarnessBuilder {
    pub(crate) fn new(id: impl Into<String>) -> Self {
        HarnessBuilder {
            id: id.into(),
            resource_id: None,
            store: None,
            lock: None,
            state_schema: None,
            initial_state: Map::new(),
            modes: Vec::new(),
            default_mode: None,
            agent: AgentConfig::default(),
            subagents: Vec::new(),
            disabled_builtins: HashSet::new(),
            heartbeats: Vec::new(),
            id_generator: None,
            resolver: None,
            catalog: None,
            auth_checker: None,
            event_config: EventHubConfig::default(),
            default_model: None,
            category_resolver: None,
            plugins: Vec::new(),
            compose: Vec::new(),
            kernel_config: KernelConfig::default(),
            interactive: None,
            persist_grants: false,
            input_timeout: None,
        }
    }

    /// Groups threads (a project, a user); defaults to the harness id.
    pub fn resource_id(mut self, resource_id: impl Into<String>) -> Self {
        self.resource_id = Some(resource_id.into());
        self
    }

    /// Where threads are stored (default: in memory).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Stores threads in a SQLite file and locks them across processes with the file's
    /// [`SqliteThreadLock`](crate::store::SqliteThreadLock).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use harness_core::harness::{Harness, Mode};
    /// use harness_core::store::SqliteStore;
    ///
    /// let harness = Harness::builder("my-agent")
    ///     .mode(Mode::new("build").default_model("anthropic/claude-sonnet-4-5"))
    ///     .sqlite(SqliteStore::open(".harness/threads.db")?)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sqlite")]
    pub fn sqlite(mut self, store: crate::store::SqliteStore) -> Self {
        self.lock = Some(Arc::new(store.thread_lock()));
        self.store = Some(Arc::new(store));
        self
    }

    /// The thread lock (default: an in-process lock; use the store's cross-process lock for
    /// SQLite).
    pub fn thread_lock(mut self, lock: Arc<dyn ThreadLock>) -> Self {
        self.lock = Some(lock);
        self
    }

    /// JSON Schema of the application state; its `default`s seed the state and every write
    /// is validated.
    pub fn state_schema(mut self, schema: Value) -> Self {
        self.state_schema = Some(schema);
        self
    }

    /// Initial state values (over the schema's defaults).
    pub fn initial_state(mut self, state: Map<String, Value>) -> Self {
        self.initial_state = state;
        self
    }

    /// Adds a mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.modes.push(mode);
        self
    }

    /// The mode to start in when a thread has none saved.
    pub fn default_mode(mut self, mode_id: impl Into<String>) -> Self {
        self.default_mode = Some(mode_id.into());
        self
    }

    /// The shared agent's base instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.agent.instructions = instructions.into();
        self
    }

    /// Adds a tool to the shared agent.
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.agent.tools.push(tool.into_tool());
        self
    }

    /// Adds a source of tools to the shared agent (an MCP server, through `harness-mcp`): its
    /// tools are offered in every mode that does not replace the agent's tools, and in forked
    /// subagents.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.agent.sources.push(source);
        self
    }

    /// Adds a subagent type (and with it the `subagent` tool).
    pub fn subagent(mut self, subagent: SubagentDef) -> Self {
        self.subagents.push(subagent);
        self
    }

    /// Removes a built-in tool from every mode.
    pub fn disable_builtin(mut self, tool: BuiltinTool) -> Self {
        self.disabled_builtins.insert(tool);
        self
    }

    /// Adds a heartbeat, started by `init`.
    pub fn heartbeat(mut self, heartbeat: Heartbeat) -> Self {
        self.heartbeats.push(heartbeat);
        self
    }

    /// How thread and message ids are made.
    pub fn id_generator(mut self, generate: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.id_generator = Some(Arc::new(generate));
        self
    }

    /// The providers models come from and are listed from (default: the built-in providers,
    /// configured from the environment). A [`model_resolver`](Self::model_resolver) takes
    /// precedence for building models.
    pub fn model_catalog(mut self, catalog: ModelCatalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// Decides which providers have credentials (a keychain, a config file), asked before the
    /// environment; feeds [`Harness::list_available_models`](super::Harness::list_available_models).
    pub fn model_auth_checker(
        mut self,
        checker: impl Fn(&str) -> Option<bool> + Send + Sync + 'static,
    ) -> Self {
        self.auth_checker = Some(Arc::new(checker));
        self
    }

    /// The event bus capacity and display-state timing.
    pub fn event_config(mut self, config: EventHubConfig) -> Self {
        self.event_config = config;
        self
    }

    /// The one model every mode uses, whatever model id it names: the simplest set-up, and
    /// what tests and offline demos want. Its id becomes the default model unless
    /// [`default_model`](Self::default_model) names another. Replaces any resolver.
    pub fn model(mut self, model: impl IntoModel) -> Self {
        let model = model.into_model();
        if self.default_model.is_none() {
            self.default_model = Some(model.id().to_string());
        }
        self.resolver = Some(Arc::new(move |_: &ModelId| Ok(Arc::clone(&model))));
        self
    }

    /// How model ids become models (default: the model catalog).
    pub fn model_resolver(
        mut self,
        resolve: impl Fn(&ModelId) -> Result<Arc<dyn crate::model::Model>, ModelError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.resolver = Some(Arc::new(resolve));
        self
    }

    /// The model when neither the thread nor the mode names one.
    pub fn default_model(mut self, model_id: impl Into<String>) -> Self {
        self.default_model = Some(model_id.into());
        self
    }

    /// Maps tool names to permission categories.
    pub fn tool_category_resolver(
        mut self,
        resolve: impl Fn(&str) -> Option<ToolCategory> + Send + Sync + 'static,
    ) -> Self {
        self.category_resolver = Some(Arc::new(resolve));
        self
    }

    /// Adds a plugin.
    pub fn plugin(mut self, plugin: impl IntoPlugin) -> Self {
        self.plugins.push(plugin.into_plugin());
        self
    }

    /// Adds a compose block.
    pub fn compose(mut self, block: impl FnOnce(Compose) -> Compose + Send + 'static) -> Self {
        self.compose.push(Box::new(block));
        self
    }

    /// Adjusts the kernel's configuration (step limit, timeouts, retries, loop detection).
    pub fn kernel(mut self, configure: impl FnOnce(&mut KernelConfig)) -> Self {
        configure(&mut self.kernel_config);
        self
    }

    /// Whether a user interface answers approvals and questions. Unset, the harness decides
    /// per request: interactive while anyone is subscribed to its events. Headless, approvals
    /// are declined with a message the model sees and questions get a plain-text fallback.
    pub fn interactive(mut self, interactive: bool) -> Self {
        self.interactive = Some(interactive);
        self
    }

    /// Gives up on the user after `limit` instead of waiting as long as the run lasts: an
    /// approval nobody answered is declined (the model is told why), a question or plan review
    /// nobody answered is answered as a headless harness answers it. For servers, where the
    /// user who could answer may be gone. Unset by default.
    pub fn input_timeout(mut self, limit: Duration) -> Self {
        self.input_timeout = Some(limit);
        self
    }

    /// Saves the session grants (`always allow` answers) with the thread, so that they come
    /// back with it. Off by default: grants then last for the session, across threads.
    pub fn persist_grants(mut self, persist: bool) -> Self {
        self.persist_grants = persist;
        self
    }

    /// Builds the harness, checking modes, state and tools.
    pub fn build(self) -> Result<super::Harness, BuildError> {
        let modes = check_modes(self.modes)?;
        let default_mode = match self.default_mode {
            Some(id) if modes.iter().any(|m| m.id == id) => id,
            Some(id) => return Err(BuildError::UnknownDefaultMode(id)),
            None => modes
                .iter()
                .find(|m| m.default)
                .or_else(|| modes.first())
                .map(|m| m.id.clone())
                .ok_or(BuildError::NoModes)?,
        };
        let default_model = self
            .default_model
            .as_deref()
            .map(ModelId::new)
            .transpose()?;
        let (state_validator, state) =
            initial_state(self.state_schema.as_ref(), self.initial_state)?;
        check_subagents(&self.subagents, &self.agent)?;

        let hub = EventHub::with_config(self.event_config);
        let sink_hub = hub.clone();
        let services = HarnessServices::default();
        let mut pipeline = Pipeline::builder().extension(services.clone()).error_sink(
            move |failure: &harness_tags::HandlerFailure| {
                sink_hub.emit(HarnessEvent::Error {
                    error: failure.to_string(),
                    error_type: Some(ErrorCode::HandlerFailure.into()),
                    retryable: None,
                    retry_delay_ms: None,
                });
            },
        );
        for plugin in self.plugins {
            pipeline = pipeline.plugin(plugin);
        }
        for block in self.compose {
            pipeline = pipeline.compose(block);
        }
        let pipeline = pipeline.build()?;

        let resource_id = self.resource_id.unwrap_or_else(|| self.id.clone());
        let initial_model = modes
            .iter()
            .find(|m| m.id == default_mode)
            .and_then(|m| m.default_model.clone())
            .or_else(|| default_model.clone());
        let session = Session::new(resource_id, default_mode.clone(), initial_model, state);
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(crate::store::MemoryStore::new()) as Arc<dyn Store>);
        let lock = self.lock.unwrap_or_else(|| {
            Arc::new(crate::store::MemoryThreadLock::new()) as Arc<dyn ThreadLock>
        });
        let mut catalog = self.catalog.unwrap_or_default();
        if let Some(checker) = self.auth_checker {
            catalog = catalog.with_auth_checker(checker);
        }
        let catalog = Arc::new(catalog);
        let resolver = self.resolver.unwrap_or_else(|| {
            let catalog = Arc::clone(&catalog);
            Arc::new(move |id: &ModelId| catalog.resolve_model(id.as_str()))
        });
        let parts = KernelParts {
            agent: self.agent,
            subagents: self.subagents.clone(),
            disabled: self.disabled_builtins,
            config: self.kernel_config,
            category_resolver: self.category_resolver.clone(),
            pipeline: pipeline.clone(),
            resolver: Arc::clone(&resolver),
        };

        let mut build_error = None;
        let inner = Arc::new_cyclic(|weak: &Weak<HarnessInner>| {
            services.bind(weak.clone());
            let tasks = session.tasks();
            let task_hub = hub.clone();
            let task_harness = weak.clone();
            tasks.on_change(move |_, tasks| {
                let event = HarnessEvent::TaskUpdated {
                    tasks: tasks.to_vec(),
                };
                match task_harness.upgrade() {
                    // After the `task_write` call that changed the list, for user interfaces.
                    Some(harness) => harness.emit_in_order(event),
                    None => task_hub.emit(event),
                }
            });
            let (kernels, subagent_kernels) = match parts.build(&modes, weak, &session) {
                Ok(kernels) => kernels,
                Err(error) => {
                    build_error = Some(error);
                    (HashMap::new(), HashMap::new())
                }
            };
            HarnessInner {
                id: self.id,
                modes: modes.clone(),
                default_mode,
                default_model,
                kernels,
                subagents: parts.subagents.clone(),
                subagent_kernels,
                resolver,
                catalog,
                store,
                lock,
                pipeline,
                hub,
                state_validator,
                category_resolver: self.category_resolver,
                id_generator: self.id_generator.unwrap_or_else(|| Arc::new(default_id)),
                interactive: self.interactive,
                persist_grants: self.persist_grants,
                input_timeout: self.input_timeout,
                session,
                queue: Default::default(),
                runner: Default::default(),
                heartbeats: Heartbeats::new(self.heartbeats),
                initialized: AtomicBool::new(false),
                metadata_writes: tokio::sync::Mutex::new(()),
            }
        });
        if let Some(error) = build_error {
            return Err(error);
        }
        Ok(super::Harness { inner })
    }
}

fn check_modes(mut modes: Vec<Mode>) -> Result<Vec<Mode>, BuildError> {
    if modes.is_empty() {
        return Err(BuildError::NoModes);
    }
    let ids: HashSet<String> = modes.iter().map(|m| m.id.clone()).collect();
    if ids.len() != modes.len() {
        let mut seen = HashSet::new();
        let duplicate = modes
            .iter()
            .find(|m| !seen.insert(&m.id))
            .map(|m| m.id.clone());
        return Err(BuildError::DuplicateMode(duplicate.unwrap_or_default()));
    }
    for mode in &mut modes {
        if let Some(target) = &mode.transitions_to {
            if *target == mode.id {
                return Err(BuildError::BadTransition {
                    mode: mode.id.clone(),
                    target: target.clone(),
                    why: "the mode itself",
                });
            }
            if !ids.contains(target) {
                return Err(BuildError::BadTransition {
                    mode: mode.id.clone(),
                    target: target.clone(),
                    why: "not a configured mode",
                });
            }
        }
        if mode.tools.is_some() && mode.additional_tools.is_some() {
            return Err(BuildError::ToolsAndAdditionalTools(mode.id.clone()));
        }
        if let Some(text) = &mode.default_model_text {
            mode.default_model = Some(ModelId::new(text)?);
        }
    }
    Ok(modes)
}

fn check_subagents(subagents: &[SubagentDef], agent: &AgentConfig) -> Result<(), BuildError> {
    let mut seen = HashSet::new();
    for subagent in subagents {
        if !seen.insert(subagent.id.as_str()) {
            return Err(BuildError::DuplicateSubagent(subagent.id.clone()));
        }
        for tool in &subagent.allowed_harness_tools {
            if !agent.tools.iter().any(|t| t.name() == tool) {
                return Err(BuildError::UnknownHarnessTool {
                    subagent: subagent.id.clone(),
                    tool: tool.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Compiles the state schema, seeds the state from its defaults and the initial values, and
/// validates the result.
fn initial_state(
    schema: Option<&Value>,
    initial: Map<String, Value>,
) -> Result<(Option<jsonschema::Validator>, Value), BuildError> {
    let mut state = Map::new();
    let validator = match schema {
        Some(schema) => {
            let validator = jsonschema::validator_for(schema)
                .map_err(|e| BuildError::StateSchema(e.to_string()))?;
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, property) in properties {
                    if let Some(default) = property.get("default") {
                        state.insert(key.clone(), default.clone());
                    }
                }
            }
            Some(validator)
        }
        None => None,
    };
    state.extend(initial);
    let state = Value::Object(state);
    if let Some(validator) = &validator
        && let Some(error) = validator.iter_errors(&state).next()
    {
        return Err(BuildError::InitialState(error.to_string()));
    }
    Ok((validator, state))
}

/// What every mode's kernels are made from.
struct KernelParts {
    agent: AgentConfig,
    subagents: Vec<SubagentDef>,
    disabled: HashSet<BuiltinTool>,
    config: KernelConfig,
    category_resolver: Option<crate::kernel::CategoryResolver>,
    pipeline: Pipeline,
    resolver: ModelResolver,
}

type Kernels = (HashMap<String, ModeKernels>, HashMap<String, Kernel>);

impl KernelParts {
    fn build(
        &self,
        modes: &[Mode],
        harness: &Weak<HarnessInner>,
        session: &Session,
    ) -> Result<Kernels, BuildError> {
        let mut kernels = HashMap::new();
        for mode in modes {
            let mut own: Vec<Arc<dyn Tool>> = match (&mode.tools, &mode.additional_tools) {
                (Some(tools), _) => tools.clone(),
                (None, Some(extra)) => self.agent.tools.iter().chain(extra).cloned().collect(),
                (None, None) => self.agent.tools.clone(),
            };
            let builtins = self.builtins(harness, session);
            let forked: Vec<Arc<dyn Tool>> = builtins
                .iter()
                .map(|(kind, tool)| {
                    if kind.is_task_tool() || *kind == BuiltinTool::Subagent {
                        Arc::new(builtin::unavailable_in_fork(
                            tool.name(),
                            tool.description(),
                            tool.input_schema().clone(),
                        )) as Arc<dyn Tool>
                    } else {
                        Arc::clone(tool)
                    }
                })
                .collect();
            let mut fork_tools = own.clone();
            fork_tools.extend(forked);
            own.extend(builtins.into_iter().map(|(_, tool)| tool));
            let instructions = layered(&self.agent.instructions, mode.instructions.as_deref());
            let sources: &[Arc<dyn ToolSource>] = match mode.tools {
                Some(_) => &[],
                None => &self.agent.sources,
            };
            let main = self.kernel(&mode.id, instructions.clone(), own, sources, None)?;
            let fork = self.kernel(&mode.id, instructions, fork_tools, sources, None)?;
            kernels.insert(mode.id.clone(), ModeKernels { main, fork });
        }
        let mut subagent_kernels = HashMap::new();
        for subagent in &self.subagents {
            let mut tools = subagent.tools.clone();
            tools.extend(
                self.agent
                    .tools
                    .iter()
                    .filter(|t| {
                        subagent
                            .allowed_harness_tools
                            .iter()
                            .any(|name| name == t.name())
                    })
                    .cloned(),
            );
            let kernel = self.kernel(
                &subagent.id,
                subagent.instructions.clone(),
                tools,
                &[],
                Some(subagent.max_steps.unwrap_or(50)),
            )?;
            subagent_kernels.insert(subagent.id.clone(), kernel);
        }
        Ok((kernels, subagent_kernels))
    }

    fn builtins(
        &self,
        harness: &Weak<HarnessInner>,
        session: &Session,
    ) -> Vec<(BuiltinTool, Arc<dyn Tool>)> {
        let mut tools: Vec<(BuiltinTool, Arc<dyn Tool>)> = Vec::new();
        let board = session.tasks();
        let plan_harness = Weak::clone(harness);
        for kind in BuiltinTool::ALL {
            if self.disabled.contains(&kind) {
                continue;
            }
            let tool: Arc<dyn Tool> = match kind {
                BuiltinTool::AskUser => Arc::new(builtin::ask_user()),
                BuiltinTool::SubmitPlan => {
                    let harness = Weak::clone(&plan_harness);
                    Arc::new(builtin::submit_plan(Arc::new(move |_title: &str| {
                        if let Some(harness) = harness.upgrade() {
                            harness.plan_approved();
                        }
                    })))
                }
                BuiltinTool::RequestAccess => Arc::new(builtin::request_access()),
                BuiltinTool::TaskWrite => Arc::new(builtin::task_write(Arc::clone(&board))),
                BuiltinTool::TaskUpdate => Arc::new(builtin::task_update(Arc::clone(&board))),
                BuiltinTool::TaskComplete => Arc::new(builtin::task_complete(Arc::clone(&board))),
                BuiltinTool::TaskCheck => Arc::new(builtin::task_check(Arc::clone(&board))),
                BuiltinTool::Subagent if self.subagents.is_empty() => continue,
                BuiltinTool::Subagent => {
                    Arc::new(subagent_tool(Weak::clone(harness), &self.subagents))
                }
            };
            tools.push((kind, tool));
        }
        tools
    }

    fn kernel(
        &self,
        name: &str,
        instructions: String,
        tools: Vec<Arc<dyn Tool>>,
        sources: &[Arc<dyn ToolSource>],
        max_steps: Option<u32>,
    ) -> Result<Kernel, BuildError> {
        let mut config = self.config.clone();
        config.instructions = instructions;
        if let Some(max_steps) = max_steps {
            config.max_steps = max_steps;
        }
        config.category_resolver = self.category_resolver.clone().or(config.category_resolver);
        let resolver = Arc::clone(&self.resolver);
        let mut builder = Kernel::builder()
            .config(config)
            .pipeline(self.pipeline.clone())
            .model_resolver(move |id| resolver(id));
        for tool in tools {
            builder = builder.tool(tool);
        }
        for source in sources {
            builder = builder.tool_source(Arc::clone(source));
        }
        builder.build().map_err(|source| BuildError::Kernel {
            mode: name.to_owned(),
            source,
        })
    }
}

fn layered(base: &str, mode: Option<&str>) -> String {
    match mode {
        Some(extra) if base.is_empty() => extra.to_owned(),
        Some(extra) => format!("{base}\n\n{extra}"),
        None => base.to_owned(),
    }
}
