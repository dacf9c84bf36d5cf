//! `harness.toml`: the project's modes, models, providers, permissions, redaction, memory and
//! MCP servers;
//! the user's own `config.toml` with the same keys; and which project folders are trusted.
//!
//! Settings come in two layers ([`Settings`]): the user's `config.toml` in the user's
//! configuration directory ([`user_config_dir`]), then the project's `harness.toml` on top.
//! What a project file may set that widens what runs or where keys go applies only once the
//! user trusted its folder ([`trust`](Config::remove_untrusted)); otherwise it is ignored and
//! one line says which keys and how to trust.
//!
//! Every key is optional; a missing file means the defaults. Relative paths are relative to
//! the file's directory. Files are read only if they are regular files of at most 1 MiB.
//! Errors name the file, the line and the column:
//!
//! ```toml
//! model = "anthropic/claude-sonnet-4-5"   # the model when no mode names one
//! instructions = "You are a careful coding agent for this repository."
//! workspace = "."                         # where the file and shell tools work
//! database = ".harness/harness.db"        # where threads are stored
//! resource = "my-project"                 # groups the threads of this project
//! default_mode = "build"
//!
//! [[modes]]
//! id = "plan"
//! instructions = "Read the code, then submit a plan with submit_plan."
//! model = "openai/gpt-4.1"
//! transitions_to = "build"                # an approved plan switches here
//! tools = ["read_file", "list_dir", "grep"]
//!
//! [[modes]]
//! id = "build"
//! default = true
//!
//! [providers.vllm]                        # any OpenAI-compatible server: model `vllm/NAME`
//! base_url = "http://127.0.0.1:8000/v1"
//! api_key_env = "VLLM_API_KEY"            # optional
//! protocol = "openai"                     # or "anthropic"
//! models = ["qwen2.5-coder"]
//!
//! [permissions]                           # first match wins; see harness-permissions
//! file = "permissions.toml"               # optional: rules from a file, then these on top
//! yolo = false                            # true: allow everything not denied
//! [permissions.tools]
//! shell = "ask"
//! [permissions.categories]
//! read = "allow"
//! edit = "ask"
//!
//! [redaction]                             # harness-redaction's RedactionConfig (camelCase)
//! enabled = true
//! allow = ["support@example.com"]
//! operator = { type = "replace" }
//!
//! [memory]                                # harness-om's OmConfig (camelCase); off without it
//! observerModel = "openai/gpt-4.1-mini"   # default: the run's own model
//! observationThreshold = 30000            # tokens of raw messages before they are observed
//! idle = "auto"                           # or "off", or { after = 600000 } (ms)
//!
//! [mcp.servers.fs]                        # an MCP server's tools, as `fs__TOOL` (see McpConfig)
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//! disabled_tools = ["write_file"]         # or `tools = [...]`, an allow-list
//! ```

mod layers;
mod mcp;
mod trust;

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use harness_om::{ObservationalMemory, OmConfig};
use harness_permissions::{Policy, Rules};
use harness_redaction::{Operator, Redaction, RedactionConfig, Target};
use harness_tags::ToolCategory;
use serde::Deserialize;
use toml::Spanned;

pub use layers::Settings;
pub use mcp::{ConfiguredMcpServer, MAX_MCP_SERVERS, McpAdmission, McpConfig};
pub use trust::{
    CONFIG_DIR_VAR, TRUST_FILE, TrustLevel, TrustList, USER_CONFIG_FILE, user_config_dir,
};

/// The file looked for in the current directory when `--config` is not given.
pub const DEFAULT_FILE: &str = "harness.toml";
/// The largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The keys a `[redaction]` table accepts besides `enabled`.
const REDACTION_KEYS: [&str; 10] = [
    "entities",
    "operator",
    "operators",
    "custom",
    "deny",
    "allow",
    "targets",
    "hashKey",
    "hashLen",
    "maxInputBytes",
];

/// A configuration problem, located in its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read `{file}`: {reason}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// The file is not valid, or a value is wrong.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The 1-based line.
        line: usize,
        /// The 1-based column.
        column: usize,
        /// What is wrong and what is accepted.
        message: String,
    },
}

/// The parsed `harness.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The model when neither the thread nor the mode names one, `provider/name`.
    pub model: Option<Spanned<String>>,
    /// The agent's base instructions (each mode's are added to them).
    pub instructions: Option<String>,
    /// The directory the file and shell tools work in.
    pub workspace: Option<PathBuf>,
    /// The SQLite file threads are stored in.
    pub database: Option<PathBuf>,
    /// The resource threads are grouped under.
    pub resource: Option<String>,
    /// The mode to start in.
    pub default_mode: Option<Spanned<String>>,
    /// The modes (default: `build`, and `plan` which transitions to it).
    #[serde(default)]
    pub modes: Vec<ModeConfig>,
    /// Providers added to, or changed in, the built-in catalog.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Permission rules.
    pub permissions: Option<PermissionsConfig>,
    /// PII and secret redaction.
    pub redaction: Option<Spanned<toml::Table>>,
    /// Observational memory (off without the table).
    pub memory: Option<Spanned<toml::Table>>,
    /// MCP servers (see [`McpConfig`]).
    #[serde(default)]
    pub mcp: McpConfig,
    #[serde(skip)]
    source: Source,
}

/// One `[[modes]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeConfig {
    /// The mode's id.
    pub id: Spanned<String>,
    /// A display name.
    pub name: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Instructions added to the agent's.
    pub instructions: Option<String>,
    /// The mode's default model.
    pub model: Option<Spanned<String>>,
    /// The mode an approved plan switches to.
    pub transitions_to: Option<Spanned<String>>,
    /// True for the starting mode.
    #[serde(default)]
    pub default: bool,
    /// The tools of this mode, by name (default: all of them).
    pub tools: Option<Spanned<Vec<String>>>,
}

/// The wire protocol of a configured provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// OpenAI Chat Completions (most servers).
    #[default]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// One `[providers.ID]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The server's base URL.
    pub base_url: Option<String>,
    /// The environment variable holding the key (a key is then required).
    pub api_key_env: Option<String>,
    /// The protocol (default `openai`).
    #[serde(default)]
    pub protocol: Protocol,
    /// Well-known model names, for `/model`.
    #[serde(default)]
    pub models: Vec<String>,
}

/// The `[permissions]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// A permissions file (`.toml` or `.json`) whose rules come first.
    pub file: Option<Spanned<PathBuf>>,
    /// Allow everything that is not denied.
    #[serde(default)]
    pub yolo: bool,
    /// Per-tool policies.
    #[serde(default)]
    pub tools: BTreeMap<String, Policy>,
    /// Per-category policies.
    #[serde(default)]
    pub categories: BTreeMap<ToolCategory, Policy>,
}

#[derive(Debug, Default)]
struct Source {
    file: String,
    dir: PathBuf,
    text: String,
}

impl Config {
    /// Reads `path`, or `./harness.toml` when `path` is `None` (no file there means the
    /// defaults; a named file must exist). This is one file: [`Settings`] layers the user's
    /// configuration under it and applies trust.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        match path {
            Some(path) => Config::load_file(path, true),
            None => Config::load_file(Path::new(DEFAULT_FILE), false),
        }
    }

    /// Reads `path`; a missing file is the defaults unless `required`.
    pub fn load_file(path: &Path, required: bool) -> Result<Config, ConfigError> {
        let text = match read_config_text(path) {
            Ok(text) => text,
            Err(error) if !required && error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Config::default());
            }
            Err(error) => {
                return Err(ConfigError::Read {
                    file: path.display().to_string(),
                    reason: error.to_string(),
                });
            }
        };
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Config::parse(&text, &path.display().to_string(), &dir)
    }

    /// Parses and checks a configuration; `file` names it in errors and `dir` anchors its
    /// relative paths.
    pub fn parse(text: &str, file: &str, dir: &Path) -> Result<Config, ConfigError> {
        let source = Source {
            file: file.to_owned(),
            dir: dir.to_path_buf(),
            text: text.to_owned(),
        };
        let mut config: Config = toml::from_str(text).map_err(|error| {
            source.error(
                error.span().unwrap_or(0..0),
                error.message().trim().to_owned(),
            )
        })?;
        config.source = source;
        config.check()?;
        Ok(config)
    }

    /// The file this configuration came from (empty for the defaults).
    pub fn file(&self) -> &str {
        &self.source.file
    }

    /// A path from the file, made relative to the file's directory.
    pub fn path(&self, path: &Path) -> PathBuf {
        self.source.path(path)
    }

    /// The directory of the file (empty for the defaults).
    pub fn dir(&self) -> &Path {
        &self.source.dir
    }

    /// An error at a span of the file.
    pub fn error(&self, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        self.source.error(span, message.into())
    }

    fn check(&self) -> Result<(), ConfigError> {
        let model_ids = self
            .model
            .iter()
            .chain(self.modes.iter().filter_map(|m| m.model.as_ref()));
        for model in model_ids {
            if let Err(error) = harness_core::model::ModelId::new(model.get_ref()) {
                return Err(self.error(model.span(), error.to_string()));
            }
        }
        let ids: Vec<&str> = self.modes.iter().map(|m| m.id.get_ref().as_str()).collect();
        for (index, mode) in self.modes.iter().enumerate() {
            if ids[..index].contains(&mode.id.get_ref().as_str()) {
                return Err(self.error(
                    mode.id.span(),
                    format!("mode `{}` is configured twice", mode.id.get_ref()),
                ));
            }
            if let Some(target) = &mode.transitions_to
                && !ids.contains(&target.get_ref().as_str())
            {
                return Err(self.error(
                    target.span(),
                    format!(
                        "`transitions_to` names `{}`, which is not a mode here; the modes are: {}",
                        target.get_ref(),
                        ids.join(", ")
                    ),
                ));
            }
        }
        if let Some(mode) = &self.default_mode
            && !self.modes.is_empty()
            && !ids.contains(&mode.get_ref().as_str())
        {
            return Err(self.error(
                mode.span(),
                format!(
                    "`default_mode` names `{}`, which is not a mode here; the modes are: {}",
                    mode.get_ref(),
                    ids.join(", ")
                ),
            ));
        }
        if let Some(table) = &self.redaction {
            for key in table.get_ref().keys() {
                if key != "enabled" && !REDACTION_KEYS.contains(&key.as_str()) {
                    return Err(self.error(
                        table.span(),
                        format!(
                            "unknown key `{key}` in [redaction]; the keys are: enabled, {}",
                            REDACTION_KEYS.join(", ")
                        ),
                    ));
                }
            }
            self.redaction()?;
        }
        self.memory()?;
        self.check_mcp()
    }

    /// The observational-memory plugin this file asks for: `None` without a `[memory]` table
    /// or with `enabled = false`.
    pub fn memory(&self) -> Result<Option<ObservationalMemory>, ConfigError> {
        self.memory_from(self.memory.as_ref())
    }

    /// The observational-memory plugin of a `[memory]` table (errors located in this file).
    fn memory_from(
        &self,
        table: Option<&Spanned<toml::Table>>,
    ) -> Result<Option<ObservationalMemory>, ConfigError> {
        let Some(table) = table else {
            return Ok(None);
        };
        let Some(configured) = self.section::<OmConfig>(table, "memory")? else {
            return Ok(None);
        };
        ObservationalMemory::new(configured)
            .map(Some)
            .map_err(|error| self.error(table.span(), format!("[memory]: {error}")))
    }

    /// The redaction plugin this file asks for (`None` when `enabled = false`). Without a
    /// `[redaction]` table: every built-in detector on tool results, tool errors and what UIs
    /// show of tool results (with the same `<ENTITY>` tokens the model sees).
    pub fn redaction(&self) -> Result<Option<Redaction>, ConfigError> {
        self.redaction_from(self.redaction.as_ref())
    }

    /// The redaction plugin of a `[redaction]` table (errors located in this file).
    fn redaction_from(
        &self,
        table: Option<&Spanned<toml::Table>>,
    ) -> Result<Option<Redaction>, ConfigError> {
        let Some(table) = table else {
            return Ok(Some(display_too(Redaction::default(), false)));
        };
        let Some(configured) = self.section::<RedactionConfig>(table, "redaction")? else {
            return Ok(None);
        };
        let display_set = configured.targets.contains_key(&Target::DisplayToolResult);
        let plugin = Redaction::try_from_config(configured)
            .map_err(|error| self.error(table.span(), format!("[redaction]: {error}")))?;
        Ok(Some(display_too(plugin, display_set)))
    }

    /// A plugin's table: `None` with `enabled = false`, else the rest of its keys as `C`;
    /// errors point at the table.
    fn section<C: serde::de::DeserializeOwned>(
        &self,
        table: &Spanned<toml::Table>,
        name: &str,
    ) -> Result<Option<C>, ConfigError> {
        let mut values = table.get_ref().clone();
        match values.remove("enabled") {
            None | Some(toml::Value::Boolean(true)) => {}
            Some(toml::Value::Boolean(false)) => return Ok(None),
            Some(other) => {
                return Err(self.error(
                    table.span(),
                    format!(
                        "`enabled` in [{name}] must be true or false, not {}",
                        other.type_str()
                    ),
                ));
            }
        }
        toml::Value::Table(values)
            .try_into()
            .map(Some)
            .map_err(|error: toml::de::Error| {
                self.error(
                    table.span(),
                    format!("[{name}]: {}", error.message().trim()),
                )
            })
    }

    /// Adds this file's permission rules to `rules`: its permissions file's, then its inline
    /// ones. Returns whether it turns yolo on.
    pub fn add_permissions(&self, rules: &mut Rules) -> Result<bool, ConfigError> {
        let Some(section) = &self.permissions else {
            return Ok(false);
        };
        if let Some(file) = &section.file {
            let loaded = trust::load_rules(&self.path(file.get_ref()))
                .map_err(|error| self.error(file.span(), error))?;
            let loaded = loaded.rules().clone();
            rules.tools.extend(loaded.tools);
            rules.categories.extend(loaded.categories);
        }
        rules.tools.extend(section.tools.clone());
        rules.categories.extend(section.categories.clone());
        Ok(section.yolo)
    }
}

/// The text of a configuration file: a regular file (a pipe is refused without waiting on
/// it) of at most [`MAX_CONFIG_BYTES`], in UTF-8. A missing file is `NotFound`.
pub(crate) fn read_config_text(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind};
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(harness_workspace::NEVER_BLOCK);
    }
    let file = options.open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    let too_large = || {
        Error::new(
            ErrorKind::InvalidData,
            format!("it is larger than {} KiB", MAX_CONFIG_BYTES / 1024),
        )
    };
    if metadata.len() > MAX_CONFIG_BYTES {
        return Err(too_large());
    }
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(too_large());
    }
    Ok(text)
}

/// Makes UIs show tool results redacted with the model's tokens, unless the configuration
/// chose its own display policy.
fn display_too(plugin: Redaction, configured: bool) -> Redaction {
    if configured {
        plugin
    } else {
        plugin.target_operator(Target::DisplayToolResult, Operator::Replace)
    }
}

/// The permission defaults of the CLI: reading and the harness's own tools run, edits,
/// commands and MCP tools ask.
pub fn default_rules() -> Rules {
    let mut rules = Rules::default();
    for (category, policy) in [
        (ToolCategory::Read, Policy::Allow),
        (ToolCategory::Other, Policy::Allow),
        (ToolCategory::Edit, Policy::Ask),
        (ToolCategory::Execute, Policy::Ask),
        (ToolCategory::Mcp, Policy::Ask),
    ] {
        rules.categories.insert(category, policy);
    }
    rules
}

impl Source {
    fn path(&self, path: &Path) -> PathBuf {
        if path.is_absolute() || self.dir.as_os_str().is_empty() {
            path.to_path_buf()
        } else {
            self.dir.join(path)
        }
    }

    fn error(&self, span: Range<usize>, message: String) -> ConfigError {
        let (line, column) = line_column(&self.text, span.start);
        ConfigError::Invalid {
            file: self.file.clone(),
            line,
            column,
            message,
        }
    }
}

/// The 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |rest| rest.chars().count())
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "harness.toml", Path::new(""))
    }

    fn located(error: ConfigError) -> (usize, usize, String) {
        match error {
            ConfigError::Invalid {
                line,
                column,
                message,
                ..
            } => (line, column, message),
            other => panic!("not located: {other}"),
        }
    }

    #[test]
    fn memory_is_off_without_its_table_and_built_from_it() {
        assert!(parse("").unwrap().memory().unwrap().is_none());
        let on = parse("[memory]\nobservationThreshold = 30000\nidle = \"auto\"\n").unwrap();
        let memory = on.memory().unwrap().unwrap();
        assert_eq!(memory.config().observation_threshold, 30_000);
        let off = parse("[memory]\nenabled = false\nobservationThreshold = 1\n").unwrap();
        assert!(off.memory().unwrap().is_none());
        let (line, _, message) = located(
            parse("model = \"openai/gpt-4.1\"\n[memory]\nobservationThreshold = 0\n").unwrap_err(),
        );
        assert!(
            line >= 2 && message.contains("[memory]"),
            "{line}: {message}"
        );
    }

    #[test]
    fn an_empty_file_is_the_defaults() {
        let config = parse("").unwrap();
        assert!(config.model.is_none() && config.modes.is_empty());
        let mut rules = default_rules();
        assert!(!config.add_permissions(&mut rules).unwrap());
        assert_eq!(rules, default_rules());
        assert_eq!(rules.categories[&ToolCategory::Execute], Policy::Ask);
        assert!(config.redaction().unwrap().is_some());
    }

    #[test]
    fn a_full_file_parses() {
        let config = parse(
            r#"
model = "anthropic/claude-sonnet-4-5"
default_mode = "build"
[[modes]]
id = "plan"
model = "openai/gpt-4.1"
transitions_to = "build"
tools = ["read_file"]
[[modes]]
id = "build"
default = true
[providers.vllm]
base_url = "http://127.0.0.1:8000/v1"
models = ["qwen"]
[permissions]
yolo = true
[permissions.tools]
shell = "deny"
[permissions.categories]
edit = "allow"
[redaction]
allow = ["support@example.com"]
"#,
        )
        .unwrap();
        assert_eq!(config.modes.len(), 2);
        assert_eq!(config.providers["vllm"].protocol, Protocol::OpenAi);
        let mut rules = default_rules();
        assert!(config.add_permissions(&mut rules).unwrap(), "yolo");
        assert_eq!(rules.tools["shell"], Policy::Deny);
        assert_eq!(rules.categories[&ToolCategory::Edit], Policy::Allow);
        assert_eq!(
            rules.categories[&ToolCategory::Execute],
            Policy::Ask,
            "categories not set keep the defaults"
        );
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let (line, _, message) = located(parse("model = \"a/b\"\n[modes\n").unwrap_err());
        assert_eq!(line, 2, "{message}");
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_line() {
        let (line, column, message) =
            located(parse("model = \"openai/gpt-4o\"\nmodle = 1\n").unwrap_err());
        assert_eq!((line, column), (2, 1));
        assert!(message.contains("modle"), "{message}");

        let (line, _, message) = located(parse("\n\nmodel = \"gpt-4o\"\n").unwrap_err());
        assert_eq!(line, 3);
        assert!(message.contains("provider/name"), "{message}");

        let (line, _, message) =
            located(parse("[permissions.tools]\nshell = \"maybe\"\n").unwrap_err());
        assert_eq!(line, 2, "{message}");
    }

    #[test]
    fn mode_references_are_checked() {
        let text =
            "[[modes]]\nid = \"plan\"\ntransitions_to = \"biuld\"\n[[modes]]\nid = \"build\"\n";
        let (line, _, message) = located(parse(text).unwrap_err());
        assert_eq!(line, 3);
        assert!(message.contains("biuld") && message.contains("plan, build"));

        let text = "[[modes]]\nid = \"a\"\n[[modes]]\nid = \"a\"\n";
        let (line, _, _) = located(parse(text).unwrap_err());
        assert_eq!(line, 4);

        let text = "default_mode = \"x\"\n[[modes]]\nid = \"a\"\n";
        let (line, _, _) = located(parse(text).unwrap_err());
        assert_eq!(line, 1);
    }

    #[test]
    fn redaction_tables_are_checked() {
        let (line, _, message) = located(parse("x = 1\n").unwrap_err());
        assert_eq!(line, 1, "{message}");

        let (line, _, message) = located(parse("\n[redaction]\nalow = []\n").unwrap_err());
        assert_eq!(line, 2);
        assert!(message.contains("alow"), "{message}");

        let text = "[redaction]\ncustom = [{ entity = \"X\", pattern = \"(\" }]\n";
        let (_, _, message) = located(parse(text).unwrap_err());
        assert!(message.contains("[redaction]"), "{message}");

        let config = parse("[redaction]\nenabled = false\n").unwrap();
        assert!(config.redaction().unwrap().is_none());
    }

    #[test]
    fn deeply_nested_and_huge_values_fail_cleanly() {
        for depth in [1_000, 100_000] {
            let arrays = format!("model = {}{}\n", "[".repeat(depth), "]".repeat(depth));
            assert!(parse(&arrays).is_err());
            let tables = format!("x = {}{}\n", "{a = ".repeat(depth), "}".repeat(depth));
            assert!(parse(&tables).is_err());
            let dotted = format!("{} = 1\n", vec!["a"; depth].join("."));
            assert!(parse(&dotted).is_err());
        }
        let long = format!("instructions = \"{}\"\n", "x".repeat(900_000));
        assert_eq!(parse(&long).unwrap().instructions.unwrap().len(), 900_000);
    }

    #[test]
    fn files_that_are_not_small_regular_text_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let large = dir.path().join("large.toml");
        std::fs::File::create(&large)
            .unwrap()
            .set_len(MAX_CONFIG_BYTES + 1)
            .unwrap();
        let error = Config::load(Some(&large)).unwrap_err().to_string();
        assert!(error.contains("larger than 1024 KiB"), "{error}");
        let binary = dir.path().join("binary.toml");
        std::fs::write(&binary, [b'a', 0xff, 0xfe]).unwrap();
        let error = Config::load(Some(&binary)).unwrap_err().to_string();
        assert!(error.contains("valid UTF-8"), "{error}");
        let error = Config::load(Some(dir.path())).unwrap_err().to_string();
        assert!(
            error.contains("not a regular file") || error.contains("directory"),
            "{error}"
        );
        #[cfg(unix)]
        {
            let made = std::process::Command::new("mkfifo")
                .arg(dir.path().join("pipe.toml"))
                .status()
                .unwrap();
            assert!(made.success());
            let error = Config::load(Some(&dir.path().join("pipe.toml")))
                .unwrap_err()
                .to_string();
            assert!(error.contains("not a regular file"), "{error}");
            std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.toml")).unwrap();
            let error = Config::load(Some(&dir.path().join("zero.toml")))
                .unwrap_err()
                .to_string();
            assert!(error.contains("not a regular file"), "{error}");
            // A permissions file is read the same way.
            std::fs::write(
                dir.path().join("harness.toml"),
                "[permissions]\nfile = \"zero.toml\"\n",
            )
            .unwrap();
            let config = Config::load(Some(&dir.path().join("harness.toml"))).unwrap();
            let error = config
                .add_permissions(&mut default_rules())
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("harness.toml:2:") && error.contains("not a regular file"),
                "{error}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_or_fail_cleanly(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let text = String::from_utf8_lossy(&raw);
            if let Ok(config) = parse(&text) {
                let _ = config.redaction();
                let _ = config.memory();
                let _ = config.add_permissions(&mut default_rules());
            }
        }

        #[test]
        fn toml_like_text_parses_or_fails_cleanly(text in "((model|workspace|yolo|default_mode|file|enabled|base_url|api_key_env|id|tools|allow|custom|command|url|args|headers|env|cwd|timeout_ms) = (\"[a-z/.:$}{]{0,6}\"|true|[0-9]{1,3}|\\[\\]|\\{\\})\n|\\[(permissions|redaction|memory|providers\\.x|permissions\\.tools|mcp|mcp\\.servers\\.x)\\]\n|\\[\\[modes\\]\\]\n){0,8}") {
            if let Ok(config) = parse(&text) {
                let _ = config.redaction();
                let _ = config.memory();
                let _ = config.add_permissions(&mut default_rules());
                let _ = config.mcp_servers();
                let mut config = config;
                let _ = config.remove_untrusted(Path::new("/nowhere"), &Config::default());
                let _ = config.mcp_servers();
            }
        }
    }

    #[test]
    fn lines_and_columns_count_characters() {
        assert_eq!(line_column("ab\ncdé f", 8), (2, 5));
        assert_eq!(line_column("", 3), (1, 1));
    }
}
