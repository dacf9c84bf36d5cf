//! The Open Harness API over HTTP: a thin layer over [`Harness`](harness_core::harness::Harness)
//! with no agent logic of its own.
//!
//! ```no_run
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use harness_core::harness::{Harness, Mode};
//! use harness_core::store::{SqliteStore, Store};
//! use harness_server::{Server, ServerConfig};
//!
//! let store = SqliteStore::open("harness.db")?;
//! let shared: Arc<dyn Store> = Arc::new(store.clone());
//! let factory = Arc::new(move || {
//!     Ok(Harness::builder("agent")
//!         .mode(Mode::new("build").default_model("anthropic/claude-sonnet-4-5"))
//!         .sqlite(store.clone()))
//! });
//! let server = Server::new(ServerConfig::new("a-long-random-token"), shared, factory).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7878").await?;
//! server.serve(listener, std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! What it serves, under `/v1/harnesses/{harnessId}/` (the spec's route table is
//! [`SPEC_ROUTES`]):
//! - **registry**: the one harness this server hosts, its capabilities and health.
//! - **sessions**: a session is a thread. Create, list, get, rename, pause and resume, end or
//!   delete, history, fork, send a message (waiting for the answer, or streamed), and the
//!   session's WebSocket.
//! - **execution**: execute (on a session, or a new one), list, get, attach to the stream,
//!   cancel, result, tool calls, and input: answers to approvals and questions.
//! - **agents** and **memory**: agents as stored profiles (system prompt, model, tool allow
//!   and deny lists), cloned; their memory blocks, which reach every model call of their
//!   sessions; an archive, a lexical search, and snapshots exported and imported.
//! - **tools**: the harness's own tools, the MCP servers' tools, and custom tools registered
//!   at runtime that call a webhook; a tool invoked directly through the gate.
//! - **mcp**: the MCP servers every session shares: those of [`ServerConfig::mcp_servers`]
//!   and streamable HTTP servers connected over the API; their tools, resources, prompts and
//!   health.
//! - **planning**: an execution's plan, its session's task list: read, rewritten, streamed.
//! - **files**: the workspace's files, read, written, searched, uploaded, downloaded as a
//!   ZIP archive, every path resolved beneath its root.
//! - **subagents**: an agent's subagents, each running the tasks delegated to it in a session
//!   of its own, with its prompt and model over its parent's tool lists and memory.
//! - **hooks**: signed webhooks before and after tools, and when executions end or fail;
//!   the server's journal of events, listed, streamed, and sent to webhooks.
//! - **diagnostics** and **logs**: uptime, memory, load; the process's `tracing` events kept
//!   in a ring ([`ServerLogs`]), listed or streamed.
//!
//! Every other spec route answers `501` with the spec's error body, and `capabilities` lists
//! what is and is not provided.
//!
//! Streams: every SSE frame of an execution is appended to the store's event log before any
//! client reads it; `id:` is its `seq`. A client that sends `Last-Event-ID` receives exactly
//! the frames after it, also after the server restarted; an execution the previous process
//! left running ends with `error` then `done`. Completed streams are kept for
//! [`ServerConfig::retention`], then answer `410`.
//!
//! Every route under `/v1` needs `Authorization: Bearer <token>` (compared in constant time,
//! never logged); `/openapi.json` is public.

mod agents;
mod api;
mod artifacts;
mod auth;
mod console;
mod error;
mod hooks;
mod host;
mod journal;
mod logs;
mod mcp;
pub mod openapi;
mod routes;
mod state;
mod stream;
mod tools;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use harness_store::{Store, WriteOp};
use harness_tags::util::unix_ms;

pub use agents::{AgentConfig, ToolsAccess};
pub use error::{ApiError, ErrorBody, ErrorResponse};
pub use hooks::{Hook, HookEvent, HookHandler, sign};
pub use host::{AwaitingInput, ExecutionStatus, HarnessFactory, ToolCallRecord};
pub use logs::{DEFAULT_LOG_CAPACITY, LogLayer, LogLevel, LogRecord, ServerLogs};
pub use routes::{SPEC_ROUTES, SpecRoute, Transport};
pub use tools::ToolHandler;

/// 32 random bytes from the operating system, in hex: a bearer token or a signing key.
pub fn random_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// How the server runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The `{harnessId}` of the routes (default `local`).
    pub harness_id: String,
    /// The bearer token every `/v1` request must carry.
    pub token: String,
    /// Origins allowed to call from a browser (CORS); none by default.
    pub cors_origins: Vec<String>,
    /// An approval nobody answers within this is declined, a question answered as by a
    /// harness without a user (default 10 minutes).
    pub input_timeout: Duration,
    /// How long a completed stream can be read again (default 1 hour, as the spec says).
    pub retention: Duration,
    /// The largest request body, in bytes (default 1 MiB).
    pub body_limit: usize,
    /// A session's harness is dropped after this long without requests (default 10 minutes).
    pub idle_timeout: Duration,
    /// Whether hooks may call `http` URLs of loopback addresses (default: only `https`).
    pub loopback_callbacks: bool,
    /// The delay before a failed hook delivery's first retry; each next one doubles it
    /// (default 1 s; four attempts in all).
    pub hook_retry_after: Duration,
    /// The directory the files routes serve, every path resolved beneath it (none by default:
    /// they answer `501`).
    pub workspace: Option<std::path::PathBuf>,
    /// The logs `GET /logs` serves: install [`ServerLogs::layer`] (or
    /// [`ServerLogs::subscriber`]) in the process's `tracing` subscriber to fill them.
    pub logs: ServerLogs,
    /// MCP servers every session shares (one client each, started when first needed), listed
    /// by the `mcp` routes; servers connected over the API are added to them.
    pub mcp_servers: Vec<harness_mcp::McpServer>,
    /// Whether custom tools may have `command` handlers, which run programs on this machine
    /// (default: no, `403`).
    pub command_tools: bool,
}

impl ServerConfig {
    /// A configuration with `token` and the defaults.
    pub fn new(token: impl Into<String>) -> Self {
        ServerConfig {
            harness_id: "local".to_owned(),
            token: token.into(),
            cors_origins: Vec::new(),
            input_timeout: Duration::from_secs(600),
            retention: Duration::from_secs(3600),
            body_limit: 1024 * 1024,
            idle_timeout: Duration::from_secs(600),
            loopback_callbacks: false,
            hook_retry_after: Duration::from_secs(1),
            workspace: None,
            logs: ServerLogs::default(),
            mcp_servers: Vec::new(),
            command_tools: false,
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// The harness could not be built, or the store failed while recovering.
    #[error("{}", .0.message())]
    Start(ApiError),
    /// Serving failed.
    #[error("serving failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The server: its configuration, its store and the harnesses of live sessions.
#[derive(Clone, Debug)]
pub struct Server {
    state: state::Shared,
}

impl Server {
    /// Builds the server: checks that the factory's harness builds, drops completed streams
    /// past their retention, and ends the executions a previous process left running.
    pub async fn new(
        config: ServerConfig,
        store: Arc<dyn Store>,
        factory: HarnessFactory,
    ) -> Result<Server, ServerError> {
        if config.token.is_empty() {
            return Err(ServerError::Config(
                "the token must not be empty".to_owned(),
            ));
        }
        let workspace = match &config.workspace {
            Some(root) => Some(harness_workspace::Workspace::new(root).map_err(|error| {
                ServerError::Config(format!("the workspace cannot be served: {error}"))
            })?),
            None => None,
        };
        let hooks = hooks::Hooks::new(
            Arc::clone(&store),
            &config.harness_id,
            config.loopback_callbacks,
            config.hook_retry_after,
        );
        let webhooks = Arc::new(hooks::Webhooks(Arc::clone(&hooks)));
        let journal = journal::Journal::open(Arc::clone(&store), webhooks, config.retention)
            .await
            .map_err(ServerError::Start)?;
        hooks.attach(&journal);
        let host = host::Host::new(
            Arc::clone(&store),
            factory,
            config.input_timeout,
            hooks,
            journal,
            workspace.clone(),
            config.mcp_servers.clone(),
        )
        .await
        .map_err(ServerError::Start)?;
        let state = Arc::new(state::State {
            config,
            host,
            started_at: unix_ms(),
            openapi: std::sync::OnceLock::new(),
            workspace,
            closing: tokio_util::sync::CancellationToken::new(),
        });
        state.prune().await.map_err(ServerError::Start)?;
        let recovered = state.host.recover().await.map_err(ServerError::Start)?;
        if recovered > 0 {
            tracing::info!(
                recovered,
                "ended executions a previous process left running"
            );
        }
        Ok(Server { state })
    }

    /// The router: the API, `/openapi.json`, the spec's error bodies for unknown routes and
    /// methods.
    pub fn router(&self) -> axum::Router {
        use axum::routing::get;
        let state = Arc::clone(&self.state);
        let router = axum::Router::new()
            .route("/openapi.json", get(openapi::serve))
            .route("/console", get(console::redirect))
            .route("/console/", get(console::index))
            .route("/console/{file}", get(console::file))
            .merge(api::router(&state))
            .fallback(api::no_route)
            .with_state(Arc::clone(&state));
        match api::cors(&state.config) {
            Some(cors) => router.layer(cors),
            None => router,
        }
    }

    /// Serves on `listener` until `shutdown` completes; drops idle sessions' harnesses and
    /// expired streams meanwhile.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let sweeper = tokio::spawn(sweep(Arc::clone(&self.state)));
        let closing = self.state.closing.clone();
        let served = axum::serve(listener, self.router())
            .with_graceful_shutdown(async move {
                shutdown.await;
                // Streams that would stay open end, so that their connections can close.
                closing.cancel();
            })
            .await;
        sweeper.abort();
        self.state.host.mcp().shutdown().await;
        Ok(served?)
    }

    /// Drops the harnesses of sessions idle for `idle` with nothing queued (they load again
    /// from the store on their next request); returns how many.
    pub async fn evict_idle(&self, idle: Duration) -> usize {
        self.state.host.evict_idle(idle).await
    }
}

async fn sweep(state: state::Shared) {
    let every = (state.config.idle_timeout / 2).max(Duration::from_secs(1));
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        state.host.evict_idle(state.config.idle_timeout).await;
        if let Err(error) = state.prune().await {
            tracing::warn!(error = error.message(), "pruning expired streams failed");
        }
    }
}

impl state::State {
    async fn prune(&self) -> Result<(), ApiError> {
        let retention = i64::try_from(self.config.retention.as_millis()).unwrap_or(i64::MAX);
        self.host
            .store()
            .write(vec![WriteOp::PruneEventLogs {
                // Closed at or before the cut-off: a retention of zero keeps nothing.
                closed_before: unix_ms().saturating_sub(retention).saturating_add(1),
            }])
            .await
            .map_err(ApiError::from)
    }
}
