//! Describing an MCP server: how to start or reach it, and how much of it the model sees.
//!
//! [`McpServerConfig`] is the serde form, what a `[mcp.servers.NAME]` table of `harness.toml`
//! deserializes into (unknown keys are rejected); [`McpServer`] is a named, checked server with
//! builder methods for library users.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long one call (or listing) may take unless the server's configuration says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to start and answer `initialize`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// The most text one tool result may hand the model, in bytes.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 256 * 1024;
/// The largest single JSON-RPC message read from a server, in bytes.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The environment variables a stdio server inherits from the harness (the set the reference
/// SDKs pass, plus the locale and temporary directory). Everything else, API keys included,
/// reaches a server only when its configuration names it in `env` or `inherit_env`.
pub const INHERITED_ENV: [&str; 8] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR",
];

/// Header names the streamable HTTP transport sets itself.
const RESERVED_HEADERS: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// One `[mcp.servers.NAME]` table: a stdio server (`command`, `args`, `env`, `cwd`) or a
/// streamable HTTP server (`url`, `headers`), and what the model sees of it.
///
/// Values of `env` and `headers` may name environment variables as `${NAME}` (`$$` is a
/// literal `$`); they are read when the server is started, and a missing one is an error that
/// names it.
///
/// ```
/// use harness_mcp::McpServerConfig;
///
/// let config: McpServerConfig = toml::from_str(r#"
///     command = "npx"
///     args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
///     disabled_tools = ["write_file", "move_file"]
///     timeout_ms = 30000
/// "#).unwrap();
/// assert_eq!(config.command.as_deref(), Some("npx"));
/// assert!(config.enabled);
/// assert!(toml::from_str::<McpServerConfig>("comand = \"npx\"").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for it (values may hold `${NAME}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Further variables it inherits from the harness's environment, beyond [`INHERITED_ENV`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inherit_env: Vec<String>,
    /// The directory it runs in (default: the harness's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The endpoint of a streamable HTTP server (`http://` or `https://`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request (values may hold `${NAME}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// False keeps the server configured but never started.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// If set, only these of the server's tools (by the server's own names) are offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The server's tools (by its own names) never offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    /// What the model's name of each tool starts with (default: `NAME__`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Put tools the server hints are read-only into the `read` permission category instead
    /// of `mcp`. Only for servers you trust: the hint is the server's claim.
    #[serde(default)]
    pub trust_read_only_hint: bool,
    /// How long one call may take, in milliseconds (default 60,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// How long starting and `initialize` may take, in milliseconds (default 30,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_ms: Option<u64>,
    /// The most text one result may hand the model, in bytes (default 262,144).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_result_bytes: Option<usize>,
    /// The largest JSON-RPC message read from the server, in bytes (default 16 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<usize>,
}

fn enabled_by_default() -> bool {
    true
}

impl Default for McpServerConfig {
    fn default() -> Self {
        McpServerConfig {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            inherit_env: Vec::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            enabled: true,
            tools: None,
            disabled_tools: Vec::new(),
            prefix: None,
            trust_read_only_hint: false,
            timeout_ms: None,
            startup_timeout_ms: None,
            max_result_bytes: None,
            max_message_bytes: None,
        }
    }
}

/// What is wrong with a server's configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpConfigError {
    /// The name cannot prefix tool names.
    #[error(
        "MCP server name `{0}` is invalid: use 1 to 32 letters, digits, `_` or `-` (it prefixes \
         the tool names the model sees)"
    )]
    InvalidName(String),
    /// Neither or both of `command` and `url`.
    #[error(
        "MCP server `{0}` needs exactly one of `command` (a server started over stdio) or `url` \
         (a streamable HTTP server)"
    )]
    Transport(String),
    /// A key that does not fit the transport.
    #[error("MCP server `{server}`: `{key}` applies only to {applies_to} servers")]
    MisplacedKey {
        /// The server.
        server: String,
        /// The key.
        key: &'static str,
        /// `stdio` or `streamable HTTP`.
        applies_to: &'static str,
    },
    /// A value is not acceptable.
    #[error("MCP server `{server}`: {message}")]
    Invalid {
        /// The server.
        server: String,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// `${NAME}` names a variable the environment does not have.
    #[error(
        "MCP server `{server}`: `{key}` uses the environment variable `{variable}`, which is not \
         set; set it, or change the configuration"
    )]
    MissingVariable {
        /// The server.
        server: String,
        /// The `env` or `headers` entry.
        key: String,
        /// The variable.
        variable: String,
    },
}

/// How a server is reached.
#[derive(Clone, Debug)]
pub(crate) enum Transport<'a> {
    Stdio { command: &'a str },
    Http { url: &'a str },
}

/// A named MCP server: how to start or reach it and what the model sees of it. Build one with
/// [`McpServer::stdio`] or [`McpServer::http`] and the builder methods, or from a
/// configuration table with [`McpServer::from_config`]; hand it to a harness with
/// [`McpHarnessExt::mcp_server`](crate::McpHarnessExt::mcp_server).
///
/// ```
/// use std::time::Duration;
/// use harness_mcp::McpServer;
///
/// let server = McpServer::stdio("fs", "npx")
///     .args(["-y", "@modelcontextprotocol/server-filesystem", "."])
///     .disabled_tools(["write_file"])
///     .timeout(Duration::from_secs(20));
/// assert!(server.validate().is_ok());
/// assert!(McpServer::stdio("my server", "npx").validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServer {
    name: String,
    config: McpServerConfig,
}

impl McpServer {
    /// A server started as a child process speaking MCP over stdin and stdout.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>) -> Self {
        McpServer {
            name: name.into(),
            config: McpServerConfig {
                command: Some(command.into()),
                ..McpServerConfig::default()
            },
        }
    }

    /// A server reached over streamable HTTP at `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServer {
            name: name.into(),
            config: McpServerConfig {
                url: Some(url.into()),
                ..McpServerConfig::default()
            },
        }
    }

    /// A server from its configuration table, checked.
    pub fn from_config(
        name: impl Into<String>,
        config: McpServerConfig,
    ) -> Result<Self, McpConfigError> {
        let server = McpServer {
            name: name.into(),
            config,
        };
        server.validate()?;
        Ok(server)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.config.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.config.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the server (the value may hold `${NAME}`).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.env.insert(key.into(), value.into());
        self
    }

    /// Lets the server inherit more of the harness's environment than [`INHERITED_ENV`].
    pub fn inherit_env<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.config
            .inherit_env
            .extend(names.into_iter().map(Into::into));
        self
    }

    /// The directory the server runs in.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.config.cwd = Some(cwd.into());
        self
    }

    /// Adds an HTTP header (the value may hold `${NAME}`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.headers.insert(name.into(), value.into());
        self
    }

    /// Enables or disables the server.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.config.enabled = enabled;
        self
    }

    /// Offers only these of the server's tools (by its own names).
    pub fn tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.config.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Never offers these of the server's tools (by its own names).
    pub fn disabled_tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.config
            .disabled_tools
            .extend(tools.into_iter().map(Into::into));
        self
    }

    /// What the model's name of each tool starts with (default `NAME__`; may be empty).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.prefix = Some(prefix.into());
        self
    }

    /// Puts tools the server hints are read-only into the `read` category.
    pub fn trust_read_only_hint(mut self, trust: bool) -> Self {
        self.config.trust_read_only_hint = trust;
        self
    }

    /// How long one call may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.timeout_ms = Some(millis(timeout));
        self
    }

    /// How long starting and `initialize` may take.
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.config.startup_timeout_ms = Some(millis(timeout));
        self
    }

    /// The most text one result may hand the model, in bytes.
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.config.max_result_bytes = Some(bytes);
        self
    }

    /// The largest JSON-RPC message read from the server, in bytes.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.config.max_message_bytes = Some(bytes);
        self
    }

    /// Checks the name, the transport and every value that can be checked before starting.
    pub fn validate(&self) -> Result<(), McpConfigError> {
        let name = &self.name;
        let valid_name = !name.is_empty() && name.len() <= 32 && name.chars().all(tool_name_char);
        if !valid_name {
            return Err(McpConfigError::InvalidName(name.clone()));
        }
        let invalid = |message: String| McpConfigError::Invalid {
            server: name.clone(),
            message,
        };
        let config = &self.config;
        match self.transport()? {
            Transport::Stdio { command } => {
                if command.trim().is_empty() {
                    return Err(invalid("`command` is empty".to_owned()));
                }
                if !config.headers.is_empty() {
                    return Err(self.misplaced("headers", "streamable HTTP"));
                }
                for key in config.env.keys().chain(&config.inherit_env) {
                    if key.is_empty() || key.contains(['=', '\0']) {
                        return Err(invalid(format!(
                            "`{key}` is not an environment variable name"
                        )));
                    }
                }
            }
            Transport::Http { url } => {
                for (key, present) in [
                    ("args", !config.args.is_empty()),
                    ("env", !config.env.is_empty()),
                    ("inherit_env", !config.inherit_env.is_empty()),
                    ("cwd", config.cwd.is_some()),
                ] {
                    if present {
                        return Err(self.misplaced(key, "stdio"));
                    }
                }
                let scheme_ok = reqwest::Url::parse(url)
                    .is_ok_and(|parsed| matches!(parsed.scheme(), "http" | "https"));
                if !scheme_ok {
                    return Err(invalid(format!(
                        "`url` must be an http:// or https:// address, not `{url}`"
                    )));
                }
                for header in config.headers.keys() {
                    if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
                        return Err(invalid(format!("`{header}` is not an HTTP header name")));
                    }
                    if RESERVED_HEADERS
                        .iter()
                        .any(|reserved| header.eq_ignore_ascii_case(reserved))
                    {
                        return Err(invalid(format!(
                            "the header `{header}` is set by the MCP transport itself"
                        )));
                    }
                }
            }
        }
        if let Some(prefix) = &config.prefix
            && !prefix.chars().all(tool_name_char)
        {
            return Err(invalid(format!(
                "`prefix` `{prefix}` may hold only letters, digits, `_` and `-`"
            )));
        }
        for (key, value) in [
            ("timeout_ms", config.timeout_ms),
            ("startup_timeout_ms", config.startup_timeout_ms),
        ] {
            if value == Some(0) {
                return Err(invalid(format!("`{key}` must be more than 0")));
            }
        }
        for (key, value) in [
            ("max_result_bytes", config.max_result_bytes),
            ("max_message_bytes", config.max_message_bytes),
        ] {
            if value == Some(0) {
                return Err(invalid(format!("`{key}` must be more than 0")));
            }
        }
        for (key, value) in config.env.iter().chain(&config.headers) {
            check_placeholders(value).map_err(|message| invalid(format!("`{key}`: {message}")))?;
        }
        Ok(())
    }

    fn misplaced(&self, key: &'static str, applies_to: &'static str) -> McpConfigError {
        McpConfigError::MisplacedKey {
            server: self.name.clone(),
            key,
            applies_to,
        }
    }

    pub(crate) fn transport(&self) -> Result<Transport<'_>, McpConfigError> {
        match (&self.config.command, &self.config.url) {
            (Some(command), None) => Ok(Transport::Stdio { command }),
            (None, Some(url)) => Ok(Transport::Http { url }),
            _ => Err(McpConfigError::Transport(self.name.clone())),
        }
    }

    /// What the model's tool names start with.
    pub(crate) fn tool_prefix(&self) -> String {
        match &self.config.prefix {
            Some(prefix) => prefix.clone(),
            None => format!("{}__", self.name),
        }
    }

    pub(crate) fn call_timeout(&self) -> Duration {
        self.config
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
    }

    pub(crate) fn handshake_timeout(&self) -> Duration {
        self.config
            .startup_timeout_ms
            .map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_millis)
    }

    pub(crate) fn result_limit(&self) -> usize {
        self.config
            .max_result_bytes
            .unwrap_or(DEFAULT_MAX_RESULT_BYTES)
    }

    pub(crate) fn message_limit(&self) -> usize {
        self.config
            .max_message_bytes
            .unwrap_or(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// True if the configuration lets the model see the server tool `name`.
    pub(crate) fn offers(&self, name: &str) -> bool {
        let allowed = self
            .config
            .tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == name));
        allowed && !self.config.disabled_tools.iter().any(|t| t == name)
    }

    /// An `env` or `headers` value with its `${NAME}` placeholders read from the environment.
    pub(crate) fn expand(&self, key: &str, value: &str) -> Result<String, McpConfigError> {
        expand(value, |variable| std::env::var(variable).ok()).map_err(|error| match error {
            Expansion::Missing(variable) => McpConfigError::MissingVariable {
                server: self.name.clone(),
                key: key.to_owned(),
                variable,
            },
            Expansion::Malformed(message) => McpConfigError::Invalid {
                server: self.name.clone(),
                message: format!("`{key}`: {message}"),
            },
        })
    }
}

/// A character a tool name may hold (what model providers accept).
pub(crate) fn tool_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[derive(Debug, PartialEq, Eq)]
enum Expansion {
    Missing(String),
    Malformed(String),
}

fn check_placeholders(value: &str) -> Result<(), String> {
    match expand(value, |_| Some(String::new())) {
        Ok(_) | Err(Expansion::Missing(_)) => Ok(()),
        Err(Expansion::Malformed(message)) => Err(message),
    }
}

/// Replaces `${NAME}` with `lookup(NAME)`; `$$` is a literal `$`, and any other `$` is kept.
fn expand(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, Expansion> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else {
                return Err(Expansion::Malformed(
                    "`${` is not closed by `}` (write `$$` for a literal `$`)".to_owned(),
                ));
            };
            let variable = &tail[..end];
            let valid = variable
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && variable
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(Expansion::Malformed(format!(
                    "`${{{variable}}}` does not name an environment variable"
                )));
            }
            out.push_str(&lookup(variable).ok_or_else(|| Expansion::Missing(variable.to_owned()))?);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_owned())
    }

    #[test]
    fn placeholders_expand_from_the_environment() {
        assert_eq!(expand("Bearer ${TOKEN}", lookup).unwrap(), "Bearer s3cret");
        assert_eq!(expand("$$5 and $x", lookup).unwrap(), "$5 and $x");
        assert_eq!(
            expand("${MISSING}", lookup),
            Err(Expansion::Missing("MISSING".to_owned()))
        );
        assert!(matches!(
            expand("${TOKEN", lookup),
            Err(Expansion::Malformed(_))
        ));
        assert!(matches!(
            expand("${1X}", lookup),
            Err(Expansion::Malformed(_))
        ));
    }

    #[test]
    fn a_table_deserializes_and_is_checked() {
        let config: McpServerConfig = toml::from_str(
            r#"
            url = "http://127.0.0.1:3001/mcp"
            headers = { Authorization = "Bearer ${TOKEN}" }
            tools = ["echo"]
            enabled = false
            "#,
        )
        .unwrap();
        assert!(!config.enabled);
        let server = McpServer::from_config("remote", config).unwrap();
        assert_eq!(server.tool_prefix(), "remote__");
        assert!(server.offers("echo") && !server.offers("get-env"));

        let error = toml::from_str::<McpServerConfig>("command = \"x\"\nheader = {}")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `header`"), "{error}");
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        let both = McpServerConfig {
            command: Some("x".into()),
            url: Some("http://localhost".into()),
            ..McpServerConfig::default()
        };
        let cases = [
            (McpServer::stdio("a b", "x"), "name `a b` is invalid"),
            (
                McpServer::stdio("x", "x").header("A", "b"),
                "`headers` applies only to streamable HTTP",
            ),
            (McpServer::http("x", "ftp://host"), "http:// or https://"),
            (
                McpServer::http("x", "http://h").cwd("/"),
                "`cwd` applies only",
            ),
            (
                McpServer::http("x", "http://h").header("Accept", "x"),
                "set by the MCP transport",
            ),
            (McpServer::stdio("x", "x").prefix("a.b"), "`prefix`"),
            (McpServer::stdio("x", "x").env("K", "${A"), "is not closed"),
            (
                McpServer::stdio("x", "x").timeout(Duration::ZERO),
                "`timeout_ms` must be more than 0",
            ),
        ];
        for (server, expected) in cases {
            let error = server.validate().unwrap_err().to_string();
            assert!(error.contains(expected), "{error} lacks {expected}");
        }
        for config in [both, McpServerConfig::default()] {
            let error = McpServer::from_config("x", config).unwrap_err().to_string();
            assert!(error.contains("exactly one of `command`"), "{error}");
        }
    }
}
