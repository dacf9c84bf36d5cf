//! The `[mcp]` table: MCP servers whose tools the agent gets.
//!
//! Each `[mcp.servers.NAME]` table is a [`McpServerConfig`] as `harness-mcp` defines it (unknown
//! keys are errors): a server started over stdio (`command`, `args`, `env`, `inherit_env`,
//! `cwd`) or reached over streamable HTTP (`url`, `headers`), with `enabled`, `tools` (an
//! allow-list), `disabled_tools`, `prefix`, `trust_read_only_hint`, `timeout_ms`,
//! `startup_timeout_ms`, `max_result_bytes` and `max_message_bytes`.
//!
//! ```toml
//! [mcp.servers.fs]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//! disabled_tools = ["write_file", "edit_file", "move_file"]
//!
//! [mcp.servers.docs]
//! url = "https://mcp.example.com/mcp"
//! headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
//! ```
//!
//! A relative `cwd`, and a `command` that is a relative path (`./tools/server`), are relative
//! to the file's folder; a bare command name is looked up on `PATH`. Without `cwd` a server
//! runs in the directory `harness` runs in.
//!
//! The user's `config.toml` and the project's `harness.toml` may both name servers; a project
//! server replaces the user's server of the same name, whole. An enabled server of a project
//! file runs a command or sends headers (whose `${VAR}` values come from the environment),
//! so it needs the folder's trust ([`Config::remove_untrusted`]); a disabled one widens
//! nothing and stays.

use std::collections::BTreeMap;
use std::path::Path;

use harness_mcp::{McpServer, McpServerConfig};
use serde::Deserialize;
use toml::Spanned;

use super::{Config, ConfigError};

/// The most servers one file may name: each is a process or a connection per run.
pub const MAX_MCP_SERVERS: usize = 64;

/// The `[mcp]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, by name.
    #[serde(default)]
    pub servers: BTreeMap<String, Spanned<McpServerConfig>>,
    /// The servers removed because the file's folder is not trusted.
    #[serde(skip)]
    untrusted: BTreeMap<String, Spanned<McpServerConfig>>,
}

/// Whether a configured server may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpAdmission {
    /// It runs (if enabled).
    Admitted,
    /// Its project file's folder is not trusted: it is not started.
    Untrusted,
}

/// A server as configured, with the file that names it.
#[derive(Clone, Debug)]
pub struct ConfiguredMcpServer {
    /// The server, its relative paths resolved against its file's folder.
    pub server: McpServer,
    /// The file that configures it.
    pub file: String,
    /// Whether it may run.
    pub admission: McpAdmission,
}

impl ConfiguredMcpServer {
    /// True if the server is started: admitted and enabled.
    pub fn runs(&self) -> bool {
        self.admission == McpAdmission::Admitted && self.server.config().enabled
    }
}

impl Config {
    /// Checks every `[mcp.servers.NAME]` table: errors point at the table.
    pub(super) fn check_mcp(&self) -> Result<(), ConfigError> {
        let servers = &self.mcp.servers;
        if let Some((_, extra)) = servers.iter().nth(MAX_MCP_SERVERS) {
            return Err(self.error(
                extra.span(),
                format!(
                    "[mcp.servers] names {} servers; at most {MAX_MCP_SERVERS} are allowed",
                    servers.len()
                ),
            ));
        }
        self.mcp_servers().map(drop)
    }

    /// The servers this file names, their relative paths made relative to its folder.
    pub fn mcp_servers(&self) -> Result<Vec<ConfiguredMcpServer>, ConfigError> {
        let admitted = self.mcp.servers.iter().map(|s| (s, McpAdmission::Admitted));
        let untrusted = self
            .mcp
            .untrusted
            .iter()
            .map(|s| (s, McpAdmission::Untrusted));
        admitted
            .chain(untrusted)
            .map(|((name, table), admission)| {
                let server = McpServer::from_config(name.clone(), self.anchored(table.get_ref()))
                    .map_err(|error| self.error(table.span(), error.to_string()))?;
                Ok(ConfiguredMcpServer {
                    server,
                    file: self.file().to_owned(),
                    admission,
                })
            })
            .collect()
    }

    /// Moves the enabled servers out of reach (they are listed, never started) and names
    /// each one (`mcp.servers.NAME`). For [`Config::remove_untrusted`].
    pub(super) fn remove_untrusted_mcp(&mut self) -> Vec<String> {
        let enabled: Vec<String> = self
            .mcp
            .servers
            .iter()
            .filter(|(_, table)| table.get_ref().enabled)
            .map(|(name, _)| name.clone())
            .collect();
        let mut removed = Vec::with_capacity(enabled.len());
        for name in enabled {
            if let Some(table) = self.mcp.servers.remove(&name) {
                removed.push(format!("mcp.servers.{name}"));
                self.mcp.untrusted.insert(name, table);
            }
        }
        removed
    }

    /// `config` with a relative `cwd`, and a `command` that is a relative path, anchored at
    /// the file's folder.
    fn anchored(&self, config: &McpServerConfig) -> McpServerConfig {
        let mut config = config.clone();
        if let Some(cwd) = &config.cwd {
            config.cwd = Some(self.path(cwd));
        }
        if let Some(command) = &config.command
            && is_relative_path(command)
        {
            let command = Path::new(command);
            let command = command.strip_prefix(".").unwrap_or(command);
            config.command = Some(self.path(command).display().to_string());
        }
        config
    }
}

/// True for `./server` and `tools/server`; false for a bare name (`npx`), looked up on
/// `PATH`, and for an absolute path.
fn is_relative_path(command: &str) -> bool {
    let path = Path::new(command);
    path.is_relative() && path.components().count() > 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, dir: &Path) -> Result<Config, ConfigError> {
        Config::parse(text, "harness.toml", dir)
    }

    fn line_of(error: ConfigError) -> (usize, String) {
        match error {
            ConfigError::Invalid { line, message, .. } => (line, message),
            other => panic!("not located: {other}"),
        }
    }

    #[test]
    fn servers_parse_with_their_paths_anchored_at_the_file() {
        let config = parse(
            r#"
[mcp.servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
disabled_tools = ["write_file"]
cwd = "data"

[mcp.servers.local]
command = "./tools/server"
tools = ["search"]
timeout_ms = 5000

[mcp.servers.docs]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
enabled = false
"#,
            Path::new("/src/app"),
        )
        .unwrap();
        let servers = config.mcp_servers().unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s.server.name()).collect();
        assert_eq!(names, ["docs", "fs", "local"]);
        let fs = servers[1].server.config();
        assert_eq!(fs.command.as_deref(), Some("npx"), "a bare name stays");
        assert_eq!(fs.cwd.as_deref(), Some(Path::new("/src/app/data")));
        assert_eq!(fs.disabled_tools, ["write_file"]);
        let local = servers[2].server.config();
        assert_eq!(local.command.as_deref(), Some("/src/app/tools/server"));
        assert_eq!(local.tools.as_deref(), Some(&["search".to_owned()][..]));
        assert!(servers[1].runs() && !servers[0].runs(), "docs is disabled");
        assert!(servers.iter().all(|s| s.file == "harness.toml"));
        assert!(
            parse("", Path::new(""))
                .unwrap()
                .mcp_servers()
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn bad_server_tables_name_the_line() {
        let cases = [
            (
                "model = \"a/b\"\n[mcp.servers.\"my server\"]\ncommand = \"x\"\n",
                2,
                "is invalid",
            ),
            (
                "\n[mcp.servers.a]\ncomand = \"x\"\n",
                3,
                "unknown field `comand`",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\nurl = \"http://h/\"\n",
                1,
                "exactly one of",
            ),
            (
                "\n\n[mcp.servers.a]\ncommand = \"x\"\ntimeout_ms = 0\n",
                3,
                "`timeout_ms`",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\ntimeout_ms = -1\n",
                3,
                "u64",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\nheaders = { A = \"b\" }\n",
                1,
                "`headers`",
            ),
            (
                "[mcp.servers.a]\nurl = \"http://h/\"\nheaders = { A = \"${T\" }\n",
                1,
                "not closed",
            ),
            (
                "[mcp.servers.a]\nurl = \"file:///etc/passwd\"\n",
                1,
                "http://",
            ),
            ("[mcp]\nserver = {}\n", 2, "unknown field `server`"),
        ];
        for (text, line, expected) in cases {
            let (found, message) = line_of(parse(text, Path::new("")).unwrap_err());
            assert_eq!(found, line, "{text:?}: {message}");
            assert!(message.contains(expected), "{text:?}: {message}");
        }
        let many: String = (0..=MAX_MCP_SERVERS)
            .map(|i| format!("[mcp.servers.s{i:03}]\ncommand = \"x\"\n"))
            .collect();
        let (line, message) = line_of(parse(&many, Path::new("")).unwrap_err());
        assert_eq!(line, 2 * MAX_MCP_SERVERS + 1, "{message}");
        assert!(message.contains("at most 64"), "{message}");
    }

    #[test]
    fn without_trust_enabled_servers_are_listed_but_never_run() {
        let mut config = parse(
            "[mcp.servers.evil]\ncommand = \"sh\"\nenv = { T = \"${GITHUB_TOKEN}\" }\n\
             [mcp.servers.off]\ncommand = \"x\"\nenabled = false\n",
            Path::new(""),
        )
        .unwrap();
        assert_eq!(config.remove_untrusted_mcp(), ["mcp.servers.evil"]);
        let servers = config.mcp_servers().unwrap();
        let seen: Vec<(&str, McpAdmission, bool)> = servers
            .iter()
            .map(|s| (s.server.name(), s.admission, s.runs()))
            .collect();
        assert_eq!(
            seen,
            [
                ("off", McpAdmission::Admitted, false),
                ("evil", McpAdmission::Untrusted, false),
            ]
        );
    }
}
