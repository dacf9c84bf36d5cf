//! From flags and `harness.toml` to a running [`Harness`]: the model, the store, the modes,
//! the tools, the MCP servers and the plugins.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use harness_core::event::EventHubConfig;
use harness_core::harness::{Harness, HarnessBuilder, Mode};
use harness_core::model::{
    Model, ModelCatalog, ModelError, ModelId, ProviderConfig, ProviderEntry, ProviderKind,
};
use harness_core::store::{SqliteStore, ThreadRecord};
use harness_core::tool::Tool;
use harness_mcp::{McpHarnessExt, McpServer};
use serde_json::{Map, Value};

use crate::CliError;
use crate::args::{Global, ModelArgs};
use crate::config::{ConfigError, Protocol, Settings};
use crate::demo::{self, DEMO_MODEL, DemoModel};
use harness_workspace::Workspace;

/// The database used when neither `--db` nor `harness.toml` names one.
pub const DEFAULT_DB: &str = ".harness/harness.db";

/// The environment variables looked at, in order, when no model is named, with the model
/// each one selects.
pub const KEYED_DEFAULTS: [(&str, &str); 6] = [
    ("ANTHROPIC_API_KEY", "anthropic/claude-sonnet-4-5"),
    ("OPENAI_API_KEY", "openai/gpt-4.1"),
    (
        "OPENROUTER_API_KEY",
        "openrouter/anthropic/claude-sonnet-4.5",
    ),
    ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
    ("GROQ_API_KEY", "groq/llama-3.3-70b-versatile"),
    ("DEEPSEEK_API_KEY", "deepseek/deepseek-chat"),
];

/// The provider id of `--base-url` when `--model` does not name one.
pub const BASE_URL_PROVIDER: &str = "local";

const INSTRUCTIONS: &str = "You are a careful software agent working in the directory {root}. \
Use the tools to read, search and change files there and to run commands; read before you \
change. For work of several steps keep a task list with task_write. When a decision is the \
user's, ask with ask_user. Be brief and say what you did.";

const PLAN_INSTRUCTIONS: &str = "You are in plan mode: read and search, but do not change \
anything. When you understand the task, submit a plan with submit_plan: an overview, the \
steps (file, change, why) and how to verify them.";

/// Where the model came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    /// `--model` or `--base-url`: used for the thread's mode even if the thread saved another.
    Flag(ModelId),
    /// `harness.toml`'s `model`.
    Config(ModelId),
    /// The first provider key found in the environment.
    Environment {
        /// The model.
        model: ModelId,
        /// The variable that selected it.
        var: &'static str,
    },
    /// The offline demo: asked for with `--model demo/...`, or no key and no base URL.
    Demo {
        /// The model.
        model: ModelId,
        /// True when `--model` named it.
        asked: bool,
    },
}

impl ModelChoice {
    /// The model.
    pub fn model(&self) -> &ModelId {
        match self {
            ModelChoice::Flag(model)
            | ModelChoice::Config(model)
            | ModelChoice::Environment { model, .. }
            | ModelChoice::Demo { model, .. } => model,
        }
    }

    /// True for the offline demo.
    pub fn is_demo(&self) -> bool {
        matches!(self, ModelChoice::Demo { .. })
    }

    /// The line saying the demo runs, for the top of the output.
    pub fn notice(&self) -> Option<String> {
        let ModelChoice::Demo { model, asked } = self else {
            return None;
        };
        let why = if *asked {
            "--model names it"
        } else {
            "no API key found and no --base-url"
        };
        Some(format!(
            "Offline demo: {why}, so the scripted model {model} runs (set OPENAI_API_KEY or \
             ANTHROPIC_API_KEY, or pass --model or --base-url, for a real one)."
        ))
    }
}

/// Picks the model: `--base-url` or `--model`, else the configuration, else the first key in
/// the environment (`env` reads a variable), else the demo.
pub fn choose_model(
    flags: &ModelArgs,
    settings: &Settings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelChoice, CliError> {
    if let Some(model) = &flags.model {
        let id = ModelId::new(model).map_err(|e| CliError::Usage(e.to_string()))?;
        return Ok(if id.provider() == "demo" {
            ModelChoice::Demo {
                model: id,
                asked: true,
            }
        } else {
            ModelChoice::Flag(id)
        });
    }
    if flags.base_url.is_some() {
        let id = ModelId::new(&format!("{BASE_URL_PROVIDER}/default"))
            .map_err(|e| CliError::Usage(e.to_string()))?;
        return Ok(ModelChoice::Flag(id));
    }
    if let Some(id) = settings.model()? {
        return Ok(ModelChoice::Config(id));
    }
    for (var, model) in KEYED_DEFAULTS {
        if env(var).is_some_and(|key| !key.trim().is_empty()) {
            let model = ModelId::new(model).map_err(|e| CliError::Usage(e.to_string()))?;
            return Ok(ModelChoice::Environment { model, var });
        }
    }
    ModelId::new(DEMO_MODEL)
        .map(|model| ModelChoice::Demo {
            model,
            asked: false,
        })
        .map_err(|e| CliError::Usage(e.to_string()))
}

/// The catalog: the built-in providers, those of the user's configuration and
/// `harness.toml` (what trust let it set), and `--base-url`'s.
pub fn model_catalog(
    flags: &ModelArgs,
    settings: &Settings,
    choice: &ModelChoice,
) -> Result<ModelCatalog, CliError> {
    let mut catalog = ModelCatalog::new();
    for (id, provider, config) in settings.providers() {
        let known = catalog.providers().iter().find(|p| p.id == *id).cloned();
        let mut entry = match (known, &provider.base_url) {
            (Some(entry), _) => entry,
            (None, Some(url)) => ProviderEntry::new(
                id,
                match provider.protocol {
                    Protocol::OpenAi => ProviderKind::OpenAi,
                    Protocol::Anthropic => ProviderKind::Anthropic,
                },
                ProviderConfig::new(url.clone()),
                Vec::<String>::new(),
            ),
            (None, None) => {
                return Err(CliError::Config(ConfigError::Read {
                    file: config.file().to_owned(),
                    reason: format!(
                        "[providers.{id}] needs a `base_url`: `{id}` is not a built-in provider"
                    ),
                }));
            }
        };
        if let Some(url) = &provider.base_url {
            entry.config = entry.config.with_base_url(url.clone());
        }
        if let Some(var) = &provider.api_key_env {
            entry.config = entry.config.with_api_key_env(var.clone());
        }
        entry.models.extend(provider.models.iter().cloned());
        catalog = catalog.with_provider(entry);
    }
    if let Some(url) = &flags.base_url {
        let provider = choice.model().provider();
        let known = catalog
            .providers()
            .iter()
            .find(|p| p.id == provider)
            .cloned();
        let mut entry = known.unwrap_or_else(|| {
            ProviderEntry::new(
                provider,
                ProviderKind::OpenAi,
                ProviderConfig::new(url.clone()),
                [choice.model().name()],
            )
        });
        entry.config = entry.config.with_base_url(url.clone());
        if let Some(var) = &flags.api_key_env {
            entry.config = entry.config.with_api_key_env(var.clone());
        }
        catalog = catalog.with_provider(entry);
    }
    Ok(catalog)
}

/// Builds models: the demo for `demo/*`, the catalog for the rest.
pub type Resolver = Arc<dyn Fn(&ModelId) -> Result<Arc<dyn Model>, ModelError> + Send + Sync>;

/// A harness opened from flags and configuration, with what was decided on the way.
pub struct Setup {
    /// The harness (initialized).
    pub harness: Harness,
    /// The model and where it came from.
    pub choice: ModelChoice,
    /// The database file.
    pub db: PathBuf,
    /// The workspace the tools work in.
    pub workspace: Workspace,
    /// The project settings that were ignored because its folder is not trusted, as one line
    /// to show the user (see [`Settings::notice`]).
    pub notice: Option<String>,
    resolver: Resolver,
    mode: Option<String>,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("choice", &self.choice)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

/// Which thread to bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThreadChoice {
    /// A new thread, with a title.
    New(Option<String>),
    /// This thread.
    Id(String),
    /// The most recent thread no other process holds (or a new one).
    Latest,
}

impl Setup {
    /// Opens the store, builds and starts the harness. `pace` spaces the demo model's words.
    pub async fn open(
        global: &Global,
        flags: &ModelArgs,
        pace: Duration,
    ) -> Result<Setup, CliError> {
        let settings = Settings::load(global.config.as_deref())?;
        Setup::open_with(settings, global, flags, pace).await
    }

    /// Like [`Setup::open`], with the settings already loaded.
    pub async fn open_with(
        settings: Settings,
        global: &Global,
        flags: &ModelArgs,
        pace: Duration,
    ) -> Result<Setup, CliError> {
        let parts = Parts::load(settings, global, flags, pace)?;
        let harness = parts.builder()?.build()?;
        harness.init().await?;
        Ok(Setup {
            harness,
            choice: parts.choice,
            db: parts.db,
            workspace: parts.workspace,
            notice: parts.settings.notice(),
            resolver: parts.resolver,
            mode: flags.mode.clone(),
        })
    }

    /// Prints [`Setup::notice`] on standard error, if there is one.
    pub fn print_notice(&self) {
        if let Some(notice) = &self.notice {
            // Key names come from the project file: shown, never obeyed.
            let style = crate::render::Style::for_stderr();
            let notice = crate::render::show_controls(notice);
            eprintln!("{} {notice}", style.yellow("harness: note:"));
        }
    }

    /// Builds a model, to check that it can be used (its provider is known and keyed).
    pub fn check_model(&self, id: &ModelId) -> Result<(), ModelError> {
        (self.resolver)(id).map(drop)
    }

    /// Binds a thread, then applies `--mode` and the model choice: a flag always, a default
    /// only over the demo model (so a key set since the demo takes over).
    pub async fn bind(&self, thread: ThreadChoice) -> Result<ThreadRecord, CliError> {
        let harness = &self.harness;
        match thread {
            ThreadChoice::New(title) => {
                harness.create_thread(title).await?;
            }
            ThreadChoice::Id(id) => harness.switch_thread(&id).await?,
            ThreadChoice::Latest => {
                harness.select_or_create_thread().await?;
            }
        }
        if let Some(mode) = &self.mode {
            harness.switch_mode(mode).await?;
        }
        let current = harness.session().model_id();
        let replace = match &self.choice {
            ModelChoice::Flag(_) => true,
            ModelChoice::Demo { .. } => false,
            ModelChoice::Config(_) | ModelChoice::Environment { .. } => {
                current.as_ref().is_none_or(|m| m.provider() == "demo")
            }
        };
        if replace && current.as_ref() != Some(self.choice.model()) {
            harness.switch_model(self.choice.model().as_str()).await?;
        }
        harness
            .session()
            .thread()
            .ok_or_else(|| CliError::Usage("no thread is bound".to_owned()))
    }
}

/// What a harness is built from, decided once from flags and configuration.
pub struct Parts {
    /// The layered configuration.
    pub settings: Settings,
    /// The model and where it came from.
    pub choice: ModelChoice,
    /// Builds models.
    pub resolver: Resolver,
    /// The workspace the tools work in.
    pub workspace: Workspace,
    /// The database file.
    pub db: PathBuf,
    /// The store opened on it.
    pub store: SqliteStore,
    /// The tools.
    pub tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts")
            .field("choice", &self.choice)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl Parts {
    /// Chooses the model, opens the workspace and the store. `pace` spaces the demo model's
    /// words.
    pub fn load(
        settings: Settings,
        global: &Global,
        flags: &ModelArgs,
        pace: Duration,
    ) -> Result<Parts, CliError> {
        let choice = choose_model(flags, &settings, &|var| std::env::var(var).ok())?;
        let catalog = Arc::new(model_catalog(flags, &settings, &choice)?);
        let resolver: Resolver = Arc::new(move |id: &ModelId| {
            if id.provider() == "demo" {
                Ok(Arc::new(DemoModel::new(id.clone(), pace)) as Arc<dyn Model>)
            } else {
                catalog.resolve_model(id.as_str())
            }
        });
        if let ModelChoice::Flag(model) = &choice {
            resolver(model)?;
        }
        let root = flags
            .workspace
            .clone()
            .or_else(|| settings.workspace())
            .unwrap_or_else(|| PathBuf::from("."));
        let workspace = Workspace::new(&root)?;
        let db = global
            .db
            .clone()
            .or_else(|| settings.database())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        let store = open_store(&db)?;

        let mut tools = workspace.tools();
        if choice.is_demo() {
            tools.extend(demo::tools());
        }
        Ok(Parts {
            settings,
            choice,
            resolver,
            workspace,
            db,
            store,
            tools,
        })
    }

    /// The harness, not yet built, with the configured MCP servers: `harness run` and
    /// `harness chat` build it once.
    pub fn builder(&self) -> Result<HarnessBuilder, CliError> {
        let mut builder = self.session_builder()?;
        // Started by the first run that asks for their tools; a failure is an error event,
        // and the run goes on without that server.
        for server in self.mcp_servers()? {
            builder = builder.mcp_server(server);
        }
        Ok(builder)
    }

    /// The harness of one `harness serve` session: without the MCP servers, which the server
    /// runs once for every session ([`Parts::mcp_servers`]).
    pub fn session_builder(&self) -> Result<HarnessBuilder, CliError> {
        harness_builder(
            &self.settings,
            &self.tools,
            &self.choice,
            &self.resolver,
            &self.workspace,
            self.store.clone(),
        )
    }

    /// The configured MCP servers that run (admitted and enabled).
    pub fn mcp_servers(&self) -> Result<Vec<McpServer>, CliError> {
        Ok(self
            .settings
            .mcp_servers()?
            .into_iter()
            .filter(|configured| configured.runs())
            .map(|configured| configured.server)
            .collect())
    }
}

/// The harness of [`Parts::session_builder`].
fn harness_builder(
    settings: &Settings,
    tools: &[Arc<dyn Tool>],
    choice: &ModelChoice,
    resolver: &Resolver,
    workspace: &Workspace,
    store: SqliteStore,
) -> Result<HarnessBuilder, CliError> {
    let (permissions, yolo) = settings.permissions()?;
    let mut builder = Harness::builder("harness-cli")
        .resource_id(settings.resource().unwrap_or("default"))
        .sqlite(store)
        .instructions(settings.instructions().map_or_else(
            || INSTRUCTIONS.replace("{root}", &workspace.root().display().to_string()),
            str::to_owned,
        ))
        .default_model(choice.model().to_string())
        .model_resolver({
            let resolver = Arc::clone(resolver);
            move |id| resolver(id)
        })
        .plugin(permissions)
        .interactive(true)
        .event_config(EventHubConfig {
            bus_capacity: 16 * 1024,
            display_state_events: false,
            ..EventHubConfig::default()
        });
    for tool in tools {
        builder = builder.tool(Arc::clone(tool));
    }
    for mode in modes(settings, tools)? {
        builder = builder.mode(mode);
    }
    if let Some(mode) = settings.default_mode() {
        builder = builder.default_mode(mode);
    }
    if let Some(redaction) = settings.redaction()? {
        builder = builder.plugin(redaction);
    }
    if let Some(memory) = settings.memory()? {
        builder = builder.plugin(memory);
    }
    if yolo {
        let mut state = Map::new();
        state.insert("yolo".into(), Value::Bool(true));
        builder = builder.initial_state(state);
    }
    Ok(builder)
}

/// Opens (creating its directory) the SQLite store.
pub fn open_store(path: &Path) -> Result<SqliteStore, CliError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| CliError::Io {
            what: format!("cannot create the directory `{}`", dir.display()),
            source,
        })?;
    }
    Ok(SqliteStore::open(path)?)
}

/// The modes of the configuration, or `build` (the default) and `plan` (read-only tools,
/// transitions to `build`).
fn modes(settings: &Settings, tools: &[Arc<dyn Tool>]) -> Result<Vec<Mode>, CliError> {
    let (configured, config) = settings.modes();
    let pick = |names: &[String]| -> Result<Vec<Arc<dyn Tool>>, String> {
        names
            .iter()
            .map(|name| {
                tools
                    .iter()
                    .find(|t| t.name() == name)
                    .cloned()
                    .ok_or_else(|| {
                        let known: Vec<&str> = tools.iter().map(|t| t.name()).collect();
                        format!(
                            "there is no tool `{name}`; the tools are: {} (and the built-in \
                             ask_user, submit_plan, request_access and task tools, always on)",
                            known.join(", ")
                        )
                    })
            })
            .collect()
    };
    if configured.is_empty() {
        let read_only: Vec<String> = ["read_file", "list_dir", "grep", "lookup_order"]
            .iter()
            .filter(|name| tools.iter().any(|t| t.name() == **name))
            .map(|name| (*name).to_owned())
            .collect();
        let plan_tools = pick(&read_only).map_err(CliError::Usage)?;
        return Ok(vec![
            Mode::new("build")
                .name("Build")
                .description("Full tool access: reads, edits, commands.")
                .default(),
            Mode::new("plan")
                .name("Plan")
                .description("Read-only; submits a plan that, once approved, switches to build.")
                .instructions(PLAN_INSTRUCTIONS)
                .transitions_to("build")
                .tools(plan_tools),
        ]);
    }
    let mut modes = Vec::new();
    for entry in configured {
        let mut mode = Mode::new(entry.id.get_ref().clone());
        if let Some(name) = &entry.name {
            mode = mode.name(name.clone());
        }
        if let Some(description) = &entry.description {
            mode = mode.description(description.clone());
        }
        if let Some(instructions) = &entry.instructions {
            mode = mode.instructions(instructions.clone());
        }
        if let Some(model) = &entry.model {
            mode = mode.default_model(model.get_ref().clone());
        }
        if let Some(target) = &entry.transitions_to {
            mode = mode.transitions_to(target.get_ref().clone());
        }
        if let Some(names) = &entry.tools {
            let picked = pick(names.get_ref())
                .map_err(|message| CliError::Config(config.error(names.span(), message)))?;
            mode = mode.tools(picked);
        }
        if entry.default {
            mode = mode.default();
        }
        modes.push(mode);
    }
    Ok(modes)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    /// A project file in the current directory, which no one trusted.
    fn project(text: &str) -> Settings {
        let config = Config::parse(text, "harness.toml", Path::new("")).unwrap();
        Settings::layered(Config::default(), config, None, None).unwrap()
    }

    fn choose(flags: ModelArgs, config: &str, env: &[(&str, &str)]) -> ModelChoice {
        let config = project(config);
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        choose_model(&flags, &config, &|var| env.get(var).cloned()).unwrap()
    }

    fn id(text: &str) -> ModelId {
        ModelId::new(text).unwrap()
    }

    #[test]
    fn the_model_comes_from_flags_then_config_then_keys_then_the_demo() {
        let flag = ModelArgs {
            model: Some("openai/gpt-4o".into()),
            ..ModelArgs::default()
        };
        assert_eq!(
            choose(flag, "model = \"anthropic/x\"", &[]),
            ModelChoice::Flag(id("openai/gpt-4o"))
        );
        assert_eq!(
            choose(
                ModelArgs::default(),
                "model = \"anthropic/x\"",
                &[("OPENAI_API_KEY", "k")]
            ),
            ModelChoice::Config(id("anthropic/x"))
        );
        assert_eq!(
            choose(
                ModelArgs::default(),
                "",
                &[("OPENAI_API_KEY", "k"), ("GROQ_API_KEY", "g")]
            ),
            ModelChoice::Environment {
                model: id("openai/gpt-4.1"),
                var: "OPENAI_API_KEY"
            }
        );
        let demo = choose(ModelArgs::default(), "", &[("OPENAI_API_KEY", " ")]);
        assert!(demo.is_demo());
        assert!(
            demo.notice()
                .unwrap()
                .starts_with("Offline demo: no API key found")
        );
        let asked = choose(
            ModelArgs {
                model: Some("demo/support".into()),
                ..ModelArgs::default()
            },
            "",
            &[("OPENAI_API_KEY", "k")],
        );
        assert!(
            asked
                .notice()
                .unwrap()
                .starts_with("Offline demo: --model names it")
        );
    }

    #[test]
    fn a_base_url_makes_a_provider() {
        let flags = ModelArgs {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..ModelArgs::default()
        };
        let config = Settings::default();
        let choice = choose_model(&flags, &config, &|_| None).unwrap();
        assert_eq!(choice, ModelChoice::Flag(id("local/default")));
        let catalog = model_catalog(&flags, &config, &choice).unwrap();
        let entry = catalog
            .providers()
            .iter()
            .find(|p| p.id == "local")
            .unwrap();
        assert_eq!(entry.config.base_url, "http://127.0.0.1:9/v1");
        assert!(catalog.resolve_model("local/default").is_ok());

        let flags = ModelArgs {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: Some("openai/gpt-4o".into()),
            ..ModelArgs::default()
        };
        let choice = choose_model(&flags, &config, &|_| None).unwrap();
        let catalog = model_catalog(&flags, &config, &choice).unwrap();
        let openai = catalog
            .providers()
            .iter()
            .find(|p| p.id == "openai")
            .unwrap();
        assert_eq!(openai.config.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(openai.config.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    }

    #[test]
    fn configured_providers_join_the_catalog() {
        let config = project(
            "[providers.vllm]\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodels = [\"qwen\"]\n\
             [providers.ollama]\nbase_url = \"http://gpu:11434/v1\"\n",
        );
        let choice = ModelChoice::Config(id("vllm/qwen"));
        let catalog = model_catalog(&ModelArgs::default(), &config, &choice).unwrap();
        assert!(catalog.resolve_model("vllm/qwen").is_ok());
        let ollama = catalog
            .providers()
            .iter()
            .find(|p| p.id == "ollama")
            .unwrap();
        assert_eq!(ollama.config.base_url, "http://gpu:11434/v1");

        let config = project("[providers.nowhere]\nmodels = []\n");
        let error = model_catalog(&ModelArgs::default(), &config, &choice).unwrap_err();
        assert!(error.to_string().contains("needs a `base_url`"), "{error}");
    }
}
