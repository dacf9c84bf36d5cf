//! The `harness` command line: a headless `run`, an interactive `chat`, threads kept in
//! SQLite, the tag catalog and PII redaction, on the harness runtime.
//!
//! ```text
//! harness run "Refund order 1042"        # the offline demo: no key needed
//! harness run --model anthropic/claude-sonnet-4-5 --yes "Fix the failing test"
//! harness chat                           # talk to it; /mode, /model, /threads, /new, /abort
//! harness threads list                   # what ran here before; `harness resume ID`
//! harness tags --json                    # the tag catalog
//! harness redact < output.txt            # PII and secrets redacted
//! harness trust                          # let this folder's harness.toml widen what runs
//! harness mcp list                       # the MCP servers configured, and their tools
//! ```
//!
//! The library holds what the binary is made of, so that it can be tested and reused:
//!
//! - [`args`]: the command line (clap).
//! - [`config`]: `harness.toml` (modes, models, providers, permissions, redaction, MCP
//!   servers), layered over the user's `config.toml`, with errors that name the file and
//!   line; which project folders are trusted, and what an untrusted one may not set.
//! - [`setup`]: choosing the model and building the [`Harness`](harness_core::harness::Harness)
//!   with its store, tools, MCP servers and plugins.
//! - the file and shell tools come from [`harness_workspace`], confined to a directory.
//! - [`demo`]: the offline demo model and its tools.
//! - [`render`] and [`answers`]: what a terminal shows of the display state, and how typed
//!   answers become approvals and tool answers.
//! - [`run`], [`chat`], [`threads`], [`mcp`] and [`commands`]: the commands (`trust` and
//!   `untrust` are in [`commands`]).
//! - [`progress`]: the spinner on standard error.

pub mod answers;
pub mod args;
pub mod chat;
pub mod commands;
pub mod config;
pub mod demo;
pub mod mcp;
pub mod progress;
pub mod render;
pub mod run;
pub mod serve;
pub mod setup;
pub mod threads;

use std::process::ExitCode;
use std::time::Duration;

use args::{Cli, Command};

/// Why a command failed. Every message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// `harness.toml` is wrong.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// A harness operation failed.
    #[error(transparent)]
    Harness(#[from] harness_core::harness::HarnessError),
    /// The harness could not be built from the configuration.
    #[error("the harness could not be built: {0}")]
    Build(#[from] harness_core::harness::BuildError),
    /// The thread store failed.
    #[error(transparent)]
    Store(#[from] harness_core::store::StoreError),
    /// The model cannot be used.
    #[error(transparent)]
    Model(#[from] harness_core::model::ModelError),
    /// The workspace directory is not usable.
    #[error(transparent)]
    Workspace(#[from] harness_workspace::WorkspaceError),
    /// Redaction failed.
    #[error(transparent)]
    Redaction(#[from] harness_redaction::RedactionError),
    /// Reading or writing failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The command was used wrongly.
    #[error("{0}")]
    Usage(String),
    /// The HTTP server did not start or stopped.
    #[error(transparent)]
    Server(#[from] harness_server::ServerError),
}

impl CliError {
    /// The exit status for this error: 2 for usage and configuration mistakes, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Config(_) => 2,
            _ => 1,
        }
    }
}

/// The pace of the demo model's words: a few milliseconds for a person, none for a pipe.
pub(crate) fn demo_pace(for_person: bool) -> Duration {
    if for_person {
        Duration::from_millis(15)
    } else {
        Duration::ZERO
    }
}

/// Runs a parsed command line and returns the process's exit status.
pub fn main_with(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("harness: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run::run(&cli.global, args).await,
            Command::Chat(args) => {
                chat::chat(&cli.global, &args.model, setup::ThreadChoice::New(None)).await
            }
            Command::Resume(args) => {
                let thread = match args.id {
                    Some(id) => setup::ThreadChoice::Id(id),
                    None => setup::ThreadChoice::Latest,
                };
                chat::chat(&cli.global, &args.model, thread).await
            }
            Command::Threads(command) => threads::threads(&cli.global, command).await,
            Command::Tags(args) => commands::tags(args.json),
            Command::Redact(args) => commands::redact(args.json),
            Command::Trust(args) => commands::trust(args),
            Command::Untrust(args) => commands::untrust(args),
            Command::Mcp(command) => mcp::mcp(&cli.global, command).await,
            Command::Serve(args) => serve::serve(&cli.global, args).await,
        }
    });
    // Tool processes and stdin readers must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(error) => {
            let style = render::Style::for_stderr();
            // A server's or a model's words can be part of the message.
            let message = render::strip_controls(&error.to_string()).into_owned();
            eprintln!("{} {message}", style.red("harness: error:"));
            ExitCode::from(error.exit_code())
        }
    }
}
