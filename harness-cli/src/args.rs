//! The command line, as clap parses it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "Runs AI agents through a typed tag pipeline: headless runs, an interactive \
chat, persistent threads, the tag catalog and PII redaction.";

const AFTER_HELP: &str = "\
Examples:
  harness run \"Refund order 1042\"               the offline demo (no API key needed)
  harness run --model anthropic/claude-sonnet-4-5 \"Why do the tests fail?\"
  harness run --base-url http://127.0.0.1:8000/v1 --model vllm/qwen2.5-coder \"Explain src/\"
  harness chat                                   an interactive session
  harness threads list                           what was done here before
  harness resume                                 continue the latest thread
  harness tags --json                            the tag catalog as JSON
  echo 'mail bob@example.com' | harness redact   PII and secrets redacted
  harness trust                                  let this folder's harness.toml widen what runs
  harness mcp list                               the MCP servers configured, and their tools

Models come from --model, harness.toml, your config.toml or the first key found in the
environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY, GEMINI_API_KEY,
GROQ_API_KEY, DEEPSEEK_API_KEY); with none of them and no --base-url, the offline demo model
runs.
Threads live in .harness/harness.db. Set NO_COLOR to turn colour off.

A project's harness.toml may only widen what runs or where keys go (provider URLs and key
variables, yolo, allow rules, a workspace outside it, less redaction, MCP servers) once you trust its
folder with `harness trust`; until then those settings are ignored, and a line says which.
Your own settings go in config.toml in $HARNESS_CONFIG_DIR, $XDG_CONFIG_HOME/harness or
~/.config/harness, where `harness trust` also keeps its list.";

/// `harness`: the command line.
#[derive(Debug, Parser)]
#[command(name = "harness", version, about = ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: Global,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// The configuration file [default: ./harness.toml, if it exists]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The SQLite file threads are kept in [default: .harness/harness.db]
    #[arg(long, global = true, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task headless and print what the agent does.
    #[command(after_help = RUN_HELP)]
    Run(RunArgs),
    /// Talk to the agent in the terminal.
    #[command(after_help = CHAT_HELP)]
    Chat(ChatArgs),
    /// Continue a thread in the terminal (the latest one by default).
    #[command(after_help = RESUME_HELP)]
    Resume(ResumeArgs),
    /// List, show, rename or delete threads.
    #[command(subcommand)]
    Threads(ThreadsCommand),
    /// Print the tag catalog: every interception point, its payload and context.
    #[command(after_help = TAGS_HELP)]
    Tags(TagsArgs),
    /// Redact PII and secrets from standard input.
    #[command(after_help = REDACT_HELP)]
    Redact(RedactArgs),
    /// Trust a project folder: its harness.toml may then widen what runs and where keys go.
    #[command(after_help = TRUST_HELP)]
    Trust(TrustArgs),
    /// Mark a project folder untrusted: its harness.toml may not widen anything.
    #[command(after_help = UNTRUST_HELP)]
    Untrust(UntrustArgs),
    /// The MCP servers of harness.toml and config.toml: whether they start, and their tools.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Serve the Open Harness API over HTTP: sessions, executions, streams, approvals.
    #[command(after_help = SERVE_HELP)]
    Serve(ServeArgs),
}

const SERVE_HELP: &str = "\
Examples:
  harness serve                                   127.0.0.1:7878, a token printed once
  HARNESS_SERVER_TOKEN=... harness serve --bind 0.0.0.0:7878
  harness serve --cors-origin https://app.example.com

Every request under /v1 needs `Authorization: Bearer <token>`. Without --token or
HARNESS_SERVER_TOKEN a token is generated and printed once, and the server only binds a
loopback address. The API is described at /openapi.json.";

/// `harness serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub bind: String,
    /// The bearer token clients send [default: $HARNESS_SERVER_TOKEN, else generated]
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// An origin browsers may call from (CORS); repeat for several
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,
    /// Seconds an approval or question waits for its user before the run goes on without one
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub input_timeout: u64,
    /// Let hooks call http URLs of loopback addresses (otherwise only https)
    #[arg(long)]
    pub allow_loopback_callbacks: bool,
    /// Let custom tools registered over the API run commands on this machine (in the
    /// workspace); without it a `command` handler is refused
    #[arg(long)]
    pub allow_command_tools: bool,
    /// The model, workspace and mode.
    #[command(flatten)]
    pub model: ModelArgs,
}

const RUN_HELP: &str = "\
Examples:
  harness run \"Refund order 1042\"                        offline demo
  harness run --yes \"Refund order 1042\"                  approve what the agent asks
  harness run --json \"Refund order 1042\" | jq .type      one event a line
  harness run --model openai/gpt-4.1 \"Add a test for parse()\"
  harness run --base-url http://localhost:11434/v1 --model ollama/llama3.2 \"List the TODOs\"
  harness run --thread 0193c2... \"And now the docs\"      continue a thread

Approvals: no one is at the keyboard, so calls that need approval (edits, commands, by
default) are declined with a message the model sees, and plans are not approved; --yes
approves them and grants access requests. Questions are answered with a note that no one
is there. Exit status: 0 when the run completes, 1 when it fails, 130 when aborted (Ctrl-C).";

const CHAT_HELP: &str = "\
Examples:
  harness chat
  harness chat --model anthropic/claude-sonnet-4-5 --mode plan

In the session: type a message; while the agent works, a message is queued as a follow-up.
Approvals take y / n / a (always for this tool) / c (always for its category); questions
take a number or your words; plans take y, or n and what to change.
Commands: /mode [ID], /model [ID], /threads [ID], /new, /abort, /help, /exit.
Ctrl-C aborts the run; a second Ctrl-C exits.";

const RESUME_HELP: &str = "\
Examples:
  harness resume              the most recent thread not open elsewhere
  harness resume 0193c2...    a thread from `harness threads list`";

const TAGS_HELP: &str = "\
Examples:
  harness tags
  harness tags --json | jq '.[].name'

The full reference, with payloads and contexts, is TAGS.md.";

const REDACT_HELP: &str = "\
Examples:
  harness redact < tool-output.txt
  harness redact --json < tool-output.txt

With --json: {\"findings\": [{\"entity_type\", \"start\", \"end\", \"score\"}], \"text\"},
offsets in bytes of the input.";

const TRUST_HELP: &str = "\
Examples:
  harness trust                 trust the current folder (and those beneath it)
  harness trust ~/src/app       trust another folder
  harness trust --list          every folder trusted or untrusted

Until its folder is trusted, a project's harness.toml cannot set: providers' base_url (for
providers that send a key) and api_key_env, permissions.yolo, allow rules, a workspace or
database outside the folder, [redaction] keys other than custom and deny, and enabled
[mcp.servers.NAME] (commands to run, hosts to send headers to). Trust a folder
only if you trust its contents. The list is trust.toml in your configuration directory
($HARNESS_CONFIG_DIR, else $XDG_CONFIG_HOME/harness, else ~/.config/harness).";

const UNTRUST_HELP: &str = "\
Examples:
  harness untrust               the current folder
  harness untrust ~/src/app/vendor/lib

An untrusted folder inside a trusted one is untrusted: the nearest decision wins. `harness
chat` does not ask about an untrusted folder again.";

/// How the model is chosen and where tools work.
#[derive(Debug, Default, Args)]
pub struct ModelArgs {
    /// The model, `provider/name` (openai, anthropic, openrouter, groq, deepseek, gemini,
    /// ollama, a provider of harness.toml, or `demo/support`)
    #[arg(long, short, value_name = "PROVIDER/NAME")]
    pub model: Option<String>,
    /// The base URL of an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a gateway)
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The environment variable holding the key for --base-url [default: no key]
    #[arg(long, value_name = "VAR", requires = "base_url")]
    pub api_key_env: Option<String>,
    /// The mode to work in (e.g. `plan` or `build`)
    #[arg(long, value_name = "ID")]
    pub mode: Option<String>,
    /// The directory the file and shell tools work in [default: the current directory]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// `harness run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// What the agent should do
    #[arg(value_name = "TASK")]
    pub task: String,
    /// Print every event as one JSON object a line instead of text
    #[arg(long)]
    pub json: bool,
    /// Approve every call and plan that asks for approval, and grant access requests
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Continue this thread instead of starting one
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// The model and workspace.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `harness chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The model and workspace.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `harness resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The thread [default: the most recent one]
    #[arg(value_name = "ID")]
    pub id: Option<String>,
    /// The model and workspace.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `harness threads ...`.
#[derive(Debug, Subcommand)]
pub enum ThreadsCommand {
    /// List the threads, newest first.
    #[command(after_help = "Examples:\n  harness threads list\n  harness threads list --json")]
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Print a thread's messages.
    #[command(
        after_help = "Examples:\n  harness threads show 0193c2...\n  harness threads show 0193c2... --json"
    )]
    Show {
        /// The thread
        id: String,
        /// Print the stored messages as JSON
        #[arg(long)]
        json: bool,
    },
    /// Give a thread a title.
    #[command(
        after_help = "Example:\n  harness threads rename 0193c2... \"Refund for order 1042\""
    )]
    Rename {
        /// The thread
        id: String,
        /// The new title
        title: String,
    },
    /// Delete a thread with its messages.
    #[command(after_help = "Example:\n  harness threads delete 0193c2...")]
    Delete {
        /// The thread
        id: String,
    },
}

/// `harness tags`.
#[derive(Debug, Args)]
pub struct TagsArgs {
    /// Print the catalog as JSON, with payload and context schemas
    #[arg(long)]
    pub json: bool,
}

/// `harness trust`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The folder [default: the current directory]
    #[arg(value_name = "PATH", conflicts_with = "list")]
    pub path: Option<PathBuf>,
    /// List every decision instead
    #[arg(long)]
    pub list: bool,
}

/// `harness untrust`.
#[derive(Debug, Args)]
pub struct UntrustArgs {
    /// The folder [default: the current directory]
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
}

/// `harness mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start each configured MCP server, list its tools, and stop it.
    #[command(after_help = MCP_LIST_HELP)]
    List(McpListArgs),
}

const MCP_LIST_HELP: &str = "\
Examples:
  harness mcp list
  harness mcp list --timeout 120      a server started with `npx -y` may download first
  harness mcp list --json | jq '.[] | {server, state}'

Servers are [mcp.servers.NAME] tables of harness.toml or of your config.toml:
  [mcp.servers.fs]
  command = \"npx\"
  args = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \".\"]
  disabled_tools = [\"write_file\"]          # or tools = [...], an allow-list
  [mcp.servers.docs]
  url = \"https://mcp.example.com/mcp\"
  headers = { Authorization = \"Bearer ${DOCS_TOKEN}\" }

Each server is shown connected (with its tools as the model sees them: NAME__TOOL, their
permission category and what the permission rules say), failed (with the reason and the end of
its stderr), disabled, or not started because its project folder is not trusted. The exit
status is 0 whatever the servers do; 2 when the configuration is wrong.";

/// `harness mcp list`.
#[derive(Debug, Args)]
pub struct McpListArgs {
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// How long each server may take to start and list its tools, in seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
}

/// `harness redact`.
#[derive(Debug, Args)]
pub struct RedactArgs {
    /// Print the findings and the redacted text as JSON
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_its_flags_anywhere() {
        let cli = Cli::try_parse_from([
            "harness",
            "run",
            "--yes",
            "fix it",
            "--model",
            "openai/gpt-4o",
            "--db",
            "x.db",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert!(run.yes && !run.json);
        assert_eq!(run.task, "fix it");
        assert_eq!(run.model.model.as_deref(), Some("openai/gpt-4o"));
        assert_eq!(cli.global.db, Some(PathBuf::from("x.db")));
    }

    #[test]
    fn api_key_env_needs_a_base_url() {
        let error = Cli::try_parse_from(["harness", "chat", "--api-key-env", "KEY"]).unwrap_err();
        assert!(error.to_string().contains("--base-url"), "{error}");
    }
}
