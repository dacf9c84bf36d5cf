//! The client of one MCP server: starting it, listing its tools, calling them, and what happens
//! when it fails.
//!
//! - The server starts the first time a kernel asks for its tools (or on
//!   [`McpClient::connect`]). Its tools are listed, `mcp.tools-listed` is emitted, and the
//!   reshaped list is registered.
//! - When the server says its tools or resources changed, the next step lists them again.
//! - A call that finds the server gone (it crashed, the connection broke) restarts it. A start
//!   that fails waits out a backoff (1 s, 2 s, 4 s, ... up to 60 s) before the next one;
//!   calls meanwhile fail at once, saying when the next start may happen.
//! - Every failure reaches the model as a tool error and the user as a harness `error` event
//!   (when the client runs inside a harness), with the end of the server's stderr.

mod events;
mod listing;
mod tool;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use harness_core::event::HarnessEvent;
use harness_core::harness::HarnessServices;
use harness_core::tool::{ToolContext, ToolRegistry, ToolSource, ToolSourceCtx};
use harness_tags::util::error_chain;
use harness_tags::{McpListReason, McpResourceInfo, McpToolInfo, McpToolList, Pipeline};
use rmcp::RoleClient;
use rmcp::model::{CancelledNotificationParam, ClientRequest, RequestId, ServerResult};
use rmcp::service::{
    ClientInitializeError, Peer, PeerRequestOptions, RunningService, ServiceError, ServiceExt,
};
use tokio_util::sync::CancellationToken;

pub use listing::McpPromptInfo;

use self::events::{Events, Handler, Watched};
use crate::config::{McpServer, Transport};
use crate::error::{McpError, Seconds};
use crate::transport::stdio::ChildProcess;

/// How long a failure message waits for a dead server's exit status and last stderr.
const SETTLE: Duration = Duration::from_millis(500);
/// The longest wait between two starts of a failing server.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The client of one MCP server, and the [`ToolSource`] that offers its tools to a kernel.
/// Cheap to clone; clones share the connection.
///
/// ```no_run
/// # async fn demo() -> Result<(), harness_mcp::McpError> {
/// use harness_mcp::{McpClient, McpServer};
/// use harness_tags::Pipeline;
///
/// let client = McpClient::new(McpServer::stdio("time", "uvx").arg("mcp-server-time"));
/// let status = client.connect(&Pipeline::default()).await?;
/// for tool in &status.tools {
///     println!("{}: {}", tool.name, tool.description);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for McpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.inner.server.name())
            .field("state", &self.inner.view().state)
            .finish()
    }
}

/// Where a client stands with its server.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpState {
    /// Not started yet: it starts when a kernel first asks for its tools.
    NotStarted,
    /// Running, its tools listed.
    Connected,
    /// It failed to start, or stopped; the reason says which and what happens next.
    Failed {
        /// What happened.
        reason: String,
    },
    /// `enabled = false` in its configuration.
    Disabled,
    /// [`McpClient::shutdown`] was called.
    ShutDown,
}

/// What a client knows about its server, for `harness mcp list` and other user interfaces.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct McpStatus {
    /// The server's name.
    pub server: String,
    /// Where the client stands.
    pub state: McpState,
    /// The server's own name and version, from its handshake.
    pub server_info: Option<String>,
    /// The tools registered, as `mcp.tools-listed` handlers left them.
    pub tools: Vec<McpToolInfo>,
    /// The resources the model can read through the resource tool.
    pub resources: Vec<McpResourceInfo>,
    /// The prompts the server offers.
    pub prompts: Vec<McpPromptInfo>,
    /// The process id of a stdio server that is running.
    pub pid: Option<u32>,
    /// The end of a stdio server's stderr.
    pub stderr: String,
}

pub(crate) struct Inner {
    pub(crate) server: McpServer,
    events: Arc<Events>,
    link: tokio::sync::Mutex<Link>,
    view: Mutex<View>,
    /// The pipeline of the first kernel that asked, for reporting failures found by calls.
    pipeline: OnceLock<Pipeline>,
    /// How many sessions were started (the newest one's id).
    sessions: AtomicU64,
    /// The id of the session the published tools were listed from (0: never listed).
    listed: AtomicU64,
}

/// The published side: what kernels and status readers see without waiting on the link.
struct View {
    registry: Arc<ToolRegistry>,
    list: Option<McpToolList>,
    prompts: Vec<McpPromptInfo>,
    server_info: Option<String>,
    state: McpState,
    process: Option<Arc<ChildProcess>>,
}

enum Link {
    Idle,
    Up(Session),
    Down(Down),
    Closed,
}

/// A running connection.
struct Session {
    id: u64,
    service: RunningService<RoleClient, Handler>,
    process: Option<Arc<ChildProcess>>,
}

/// The server failed; when it may be started again.
struct Down {
    reason: String,
    failed_starts: u32,
    since: Instant,
}

impl Down {
    /// How long until the next start may happen: at once after a server that ran stopped,
    /// then 1 s, 2 s, 4 s, ... after each failed start.
    fn wait(&self) -> Duration {
        let backoff = match self.failed_starts {
            0 => Duration::ZERO,
            n => Duration::from_secs(1u64 << (n - 1).min(6)).min(MAX_BACKOFF),
        };
        backoff.saturating_sub(self.since.elapsed())
    }
}

impl McpClient {
    /// A client of `server`; nothing starts until its tools are asked for.
    pub fn new(server: McpServer) -> Self {
        let state = if server.config().enabled {
            McpState::NotStarted
        } else {
            McpState::Disabled
        };
        McpClient {
            inner: Arc::new(Inner {
                events: Events::new(),
                server,
                link: tokio::sync::Mutex::new(Link::Idle),
                view: Mutex::new(View {
                    registry: Arc::new(ToolRegistry::new()),
                    list: None,
                    prompts: Vec::new(),
                    server_info: None,
                    state,
                    process: None,
                }),
                pipeline: OnceLock::new(),
                sessions: AtomicU64::new(0),
                listed: AtomicU64::new(0),
            }),
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        self.inner.server.name()
    }

    /// The server's description.
    pub fn server(&self) -> &McpServer {
        &self.inner.server
    }

    /// Starts the server now (if it is not running) and lists its tools, emitting
    /// `mcp.tools-listed` through `pipeline`; `harness mcp list` does this. Inside a harness the
    /// kernel does it before the first step, with the harness's pipeline.
    pub async fn connect(&self, pipeline: &Pipeline) -> Result<McpStatus, McpError> {
        self.inner
            .refresh(pipeline, &CancellationToken::new())
            .await?;
        Ok(self.status())
    }

    /// What the client knows about its server now.
    pub fn status(&self) -> McpStatus {
        let view = self.inner.view();
        let (tools, resources) = view
            .list
            .as_ref()
            .map(|list| (list.tools.clone(), list.resources.clone()))
            .unwrap_or_default();
        McpStatus {
            server: self.name().to_owned(),
            state: view.state.clone(),
            server_info: view.server_info.clone(),
            tools,
            resources,
            prompts: view.prompts.clone(),
            pid: view
                .process
                .as_ref()
                .filter(|_| view.state == McpState::Connected)
                .and_then(|process| process.pid()),
            stderr: view
                .process
                .as_ref()
                .map(|process| process.stderr())
                .unwrap_or_default(),
        }
    }

    /// Stops the server; its tools are withdrawn and it is not started again.
    pub async fn shutdown(&self) {
        let mut link = self.inner.link.lock().await;
        *link = Link::Closed;
        let mut view = self.inner.view();
        view.registry = Arc::new(ToolRegistry::new());
        view.list = None;
        view.state = McpState::ShutDown;
    }

    /// This client as a kernel's tool source.
    pub fn into_source(self) -> Arc<dyn ToolSource> {
        Arc::new(self)
    }
}

#[async_trait]
impl ToolSource for McpClient {
    fn name(&self) -> &str {
        self.inner.server.name()
    }

    async fn tools(&self, ctx: ToolSourceCtx<'_>) -> Arc<ToolRegistry> {
        // Failures are reported where they happen; the kernel gets what there is.
        let _ = self.inner.refresh(ctx.pipeline, ctx.abort).await;
        Arc::clone(&self.inner.view().registry)
    }
}

impl Inner {
    fn view(&self) -> MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the server if it should run and is not running, and lists its tools when they
    /// were never listed from this session or the server said they changed.
    async fn refresh(
        self: &Arc<Self>,
        pipeline: &Pipeline,
        abort: &CancellationToken,
    ) -> Result<(), McpError> {
        if !self.server.config().enabled {
            return Err(McpError::Disabled {
                server: self.server.name().to_owned(),
            });
        }
        let _ = self.pipeline.set(pipeline.clone());
        let listed = self.listed.load(Ordering::Acquire);
        if listed != 0 && listed == self.sessions.load(Ordering::Acquire) && !self.events.is_stale()
        {
            return Ok(());
        }
        let mut link = tokio::select! {
            biased;
            () = abort.cancelled() => return Ok(()),
            link = self.link.lock() => link,
        };
        self.notice_stopped(&mut link).await;
        match &*link {
            Link::Closed => {
                return Err(McpError::Closed {
                    server: self.server.name().to_owned(),
                });
            }
            // The tools stay offered; the next call starts the server again.
            Link::Down(down) if self.listed.load(Ordering::Acquire) != 0 => {
                return Err(self.restarting(down));
            }
            Link::Down(down) if !down.wait().is_zero() => return Err(self.restarting(down)),
            Link::Idle | Link::Down(_) => {
                tokio::select! {
                    biased;
                    () = abort.cancelled() => return Ok(()),
                    started = self.start(&mut link) => started?,
                }
            }
            Link::Up(_) => {}
        }
        let Link::Up(session) = &*link else {
            return Ok(());
        };
        let reason = match self.listed.load(Ordering::Acquire) {
            0 => McpListReason::Connect,
            id if id != session.id => McpListReason::Reconnect,
            _ => McpListReason::ListChanged,
        };
        self.events.take_stale();
        let peer = session.service.peer();
        let listing = tokio::time::timeout(
            self.server.call_timeout(),
            listing::list(peer, self.server.name()),
        )
        .await;
        let listing = match listing {
            Ok(Ok(listing)) => listing,
            Ok(Err(error)) => {
                let error = self.listing_failed(error.to_string());
                self.report_error(&error);
                return Err(error);
            }
            Err(_) => {
                let error = self.listing_failed(format!(
                    "it did not answer within {}",
                    Seconds(self.server.call_timeout())
                ));
                self.report_error(&error);
                return Err(error);
            }
        };
        self.listed.store(session.id, Ordering::Release);
        let server_info = peer.peer_info().and_then(|info| {
            info.server_info
                .as_ref()
                .map(|about| format!("{} {}", about.name, about.version))
        });
        self.publish(pipeline, listing, reason, server_info).await;
        Ok(())
    }

    fn listing_failed(&self, detail: String) -> McpError {
        // Listed again at the next step.
        self.listed.store(0, Ordering::Release);
        McpError::Protocol {
            server: self.server.name().to_owned(),
            what: "tools/list".to_owned(),
            detail,
        }
    }

    /// Emits `mcp.tools-listed` and registers the tools as handlers left them.
    async fn publish(
        self: &Arc<Self>,
        pipeline: &Pipeline,
        listing: listing::Listing,
        reason: McpListReason,
        server_info: Option<String>,
    ) {
        let payload = listing::payload(&self.server, &listing);
        let (reshaped, withheld) = listing::reshape(pipeline, payload, reason).await;
        if let Some(message) = &withheld {
            self.report(message, true);
        }
        let (registry, dropped) = match &reshaped {
            Some(list) => listing::register(self, list, &listing),
            None => (ToolRegistry::new(), Vec::new()),
        };
        if !dropped.is_empty() {
            self.report(
                &format!(
                    "MCP server `{}`: some tools are not offered: {}",
                    self.server.name(),
                    dropped.join("; ")
                ),
                true,
            );
        }
        tracing::info!(
            server = self.server.name(),
            tools = registry.len(),
            ?reason,
            "MCP server tools listed"
        );
        let mut view = self.view();
        view.registry = Arc::new(registry);
        view.list = reshaped;
        view.prompts = listing.prompts;
        view.server_info = server_info;
        view.state = McpState::Connected;
    }

    /// Marks a session whose connection ended on its own as down.
    async fn notice_stopped(&self, link: &mut Link) {
        if let Link::Up(session) = link
            && session.service.is_closed()
        {
            let (reason, _) = session.ending(None).await;
            self.went_down(link, reason, 0);
        }
    }

    fn went_down(&self, link: &mut Link, reason: String, failed_starts: u32) {
        self.view().state = McpState::Failed {
            reason: reason.clone(),
        };
        *link = Link::Down(Down {
            reason,
            failed_starts,
            since: Instant::now(),
        });
    }

    fn restarting(&self, down: &Down) -> McpError {
        McpError::Restarting {
            server: self.server.name().to_owned(),
            reason: down.reason.clone(),
            retry_in: down.wait(),
        }
    }

    /// Starts a session; on failure the link is down with one more failed start.
    async fn start(&self, link: &mut Link) -> Result<(), McpError> {
        let failed_starts = match link {
            Link::Down(down) => down.failed_starts,
            _ => 0,
        };
        let restart = !matches!(link, Link::Idle);
        match self.open().await {
            Ok((service, process)) => {
                let id = self.sessions.fetch_add(1, Ordering::AcqRel) + 1;
                {
                    let mut view = self.view();
                    view.process.clone_from(&process);
                    view.state = McpState::Connected;
                }
                if restart {
                    self.report(
                        &format!("MCP server `{}` was started again", self.server.name()),
                        false,
                    );
                }
                *link = Link::Up(Session {
                    id,
                    service,
                    process,
                });
                Ok(())
            }
            Err(error) => {
                let reason = match &error {
                    McpError::Start { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                // Said once per run of failures, not at every retry.
                if failed_starts == 0 {
                    self.report_error(&error);
                }
                self.went_down(link, reason, failed_starts + 1);
                Err(error)
            }
        }
    }

    /// Opens a connection and completes the MCP handshake within the startup timeout.
    async fn open(
        &self,
    ) -> Result<
        (
            RunningService<RoleClient, Handler>,
            Option<Arc<ChildProcess>>,
        ),
        McpError,
    > {
        let server = self.server.name().to_owned();
        let timeout = self.server.handshake_timeout();
        let handler = self.events.handler();
        match self.server.transport()? {
            Transport::Stdio { command } => {
                let (transport, process) = ChildProcess::spawn(&self.server, command)?;
                let transport = self.watched(transport);
                let started = tokio::time::timeout(timeout, handler.serve(transport)).await;
                let reason = match started {
                    Ok(Ok(service)) => return Ok((service, Some(process))),
                    Ok(Err(error)) => {
                        process.settle(SETTLE).await;
                        format!(
                            "{} before completing the MCP handshake ({})",
                            process.ending(),
                            handshake_failure(&error)
                        )
                    }
                    Err(_) => {
                        process.kill();
                        process.settle(SETTLE).await;
                        format!(
                            "it did not complete the MCP handshake within {} \
                             (`startup_timeout_ms`)",
                            Seconds(timeout)
                        )
                    }
                };
                Err(McpError::Start {
                    server,
                    reason,
                    stderr: process.stderr_excerpt(),
                })
            }
            Transport::Http { url } => {
                let transport = self.watched(crate::transport::http::connect(&self.server, url)?);
                let reason = match tokio::time::timeout(timeout, handler.serve(transport)).await {
                    Ok(Ok(service)) => return Ok((service, None)),
                    Ok(Err(error)) => format!(
                        "{url} did not complete the MCP handshake ({})",
                        handshake_failure(&error)
                    ),
                    Err(_) => format!(
                        "{url} did not complete the MCP handshake within {} (`startup_timeout_ms`)",
                        Seconds(timeout)
                    ),
                };
                Err(McpError::Start {
                    server,
                    reason,
                    stderr: String::new(),
                })
            }
        }
    }

    fn watched<T>(&self, transport: T) -> Watched<T> {
        Watched {
            inner: transport,
            events: Arc::clone(&self.events),
        }
    }

    /// The peer of a running session for a call, starting the server if it is not running
    /// and its backoff allows.
    async fn peer(&self) -> Result<(u64, Peer<RoleClient>), McpError> {
        if !self.server.config().enabled {
            return Err(McpError::Disabled {
                server: self.server.name().to_owned(),
            });
        }
        let mut link = self.link.lock().await;
        self.notice_stopped(&mut link).await;
        match &*link {
            Link::Up(session) => return Ok((session.id, session.service.peer().clone())),
            Link::Closed => {
                return Err(McpError::Closed {
                    server: self.server.name().to_owned(),
                });
            }
            Link::Down(down) if !down.wait().is_zero() => return Err(self.restarting(down)),
            Link::Idle | Link::Down(_) => self.start(&mut link).await?,
        }
        match &*link {
            Link::Up(session) => Ok((session.id, session.service.peer().clone())),
            _ => Err(McpError::Closed {
                server: self.server.name().to_owned(),
            }),
        }
    }

    /// Sends a request for a tool call and waits for the answer, within the server's timeout,
    /// cancelling it on the server when the run is aborted or the timeout passes.
    pub(crate) async fn request(
        &self,
        ctx: &ToolContext,
        what: &str,
        request: ClientRequest,
    ) -> Result<ServerResult, McpError> {
        let (session, peer) = self.peer().await?;
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.lost(session, what, &error).await),
        };
        let _progress = self
            .events
            .route_progress(handle.progress_token.clone(), ctx.clone());
        let mut cancel = CancelOnDrop {
            peer: Some(peer),
            id: handle.id.clone(),
            abort: ctx.abort.clone(),
        };
        let timeout = self.server.call_timeout();
        let answer = tokio::select! {
            biased;
            () = ctx.abort.cancelled() => {
                cancel.now(ABORTED).await;
                return Err(McpError::Aborted { what: what.to_owned() });
            }
            answer = tokio::time::timeout(timeout, handle.await_response()) => answer,
        };
        let Ok(answer) = answer else {
            cancel.now("the client's timeout passed").await;
            return Err(McpError::Timeout {
                server: self.server.name().to_owned(),
                what: what.to_owned(),
                timeout,
            });
        };
        cancel.peer = None;
        match answer {
            Ok(result) => Ok(result),
            Err(ServiceError::McpError(error)) => Err(McpError::Rejected {
                server: self.server.name().to_owned(),
                what: what.to_owned(),
                message: error.message.into_owned(),
                code: error.code.0,
            }),
            Err(error @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Err(self.lost(session, what, &error).await)
            }
            Err(error) => Err(McpError::Protocol {
                server: self.server.name().to_owned(),
                what: what.to_owned(),
                detail: error.to_string(),
            }),
        }
    }

    /// The connection of `session` broke during a request: the session is down (the server
    /// is started again on the next call) and the user is told.
    async fn lost(&self, session: u64, what: &str, error: &ServiceError) -> McpError {
        let mut link = self.link.lock().await;
        let (reason, stderr) = match &*link {
            Link::Up(current) if current.id == session => current.ending(Some(error)).await,
            _ => (service_failure(error), String::new()),
        };
        let failure = McpError::Stopped {
            server: self.server.name().to_owned(),
            what: what.to_owned(),
            reason: reason.clone(),
            stderr,
        };
        if matches!(&*link, Link::Up(current) if current.id == session) {
            self.went_down(&mut link, reason, 0);
            self.report_error(&failure);
        }
        failure
    }

    fn report_error(&self, error: &McpError) {
        self.report(&error.to_string(), true);
    }

    /// Tells the user: a harness event when a harness hosts the client, and the log.
    fn report(&self, message: &str, failure: bool) {
        if failure {
            tracing::warn!(server = self.server.name(), "{message}");
        } else {
            tracing::info!(server = self.server.name(), "{message}");
        }
        let harness = self
            .pipeline
            .get()
            .and_then(|pipeline| pipeline.extension::<HarnessServices>())
            .and_then(HarnessServices::harness);
        let Some(harness) = harness else {
            return;
        };
        harness.emit(if failure {
            HarnessEvent::Error {
                error: message.to_owned(),
                error_type: Some("mcp_server".to_owned()),
                retryable: None,
                retry_delay_ms: None,
            }
        } else {
            HarnessEvent::Info {
                message: message.to_owned(),
            }
        });
    }
}

impl Session {
    /// Why the connection ended and the end of the server's stderr.
    async fn ending(&self, error: Option<&ServiceError>) -> (String, String) {
        match &self.process {
            Some(process) => {
                process.settle(SETTLE).await;
                (process.ending(), process.stderr_excerpt())
            }
            None => (
                error.map_or_else(|| "the connection closed".to_owned(), service_failure),
                String::new(),
            ),
        }
    }
}

/// Why a request is cancelled when its run is aborted.
const ABORTED: &str = "the run was aborted";
/// How long telling a server about a cancellation may take.
const CANCEL_SEND: Duration = Duration::from_secs(1);

/// Tells the server to cancel a request that is given up: at once where the client gives up
/// (timeout, abort), or, when the request's future is dropped (the kernel stopped waiting),
/// from a task of its own.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
    /// The call's abort signal, to say why a dropped request was given up.
    abort: CancellationToken,
}

impl CancelOnDrop {
    fn notification(&self, reason: &str) -> CancelledNotificationParam {
        CancelledNotificationParam::new(Some(self.id.clone()), Some(reason.to_owned()))
    }

    /// Sends the cancellation before returning, so that it reaches the server before any
    /// later request.
    async fn now(&mut self, reason: &str) {
        if let Some(peer) = self.peer.take() {
            let cancelled = self.notification(reason);
            // A server that is gone or stuck cannot be told; the request is given up anyway.
            let _ = tokio::time::timeout(CANCEL_SEND, peer.notify_cancelled(cancelled)).await;
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let reason = if self.abort.is_cancelled() {
            ABORTED
        } else {
            "the client stopped waiting for the answer"
        };
        let cancelled = self.notification(reason);
        runtime.spawn(async move {
            let _ = tokio::time::timeout(CANCEL_SEND, peer.notify_cancelled(cancelled)).await;
        });
    }
}

/// Why a request's connection failed, without rmcp's transport type names.
fn service_failure(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportSend(error) => {
            format!(
                "the connection failed ({})",
                error_chain(error.error.as_ref())
            )
        }
        ServiceError::TransportClosed => "the connection closed".to_owned(),
        other => error_chain(other),
    }
}

/// Why a handshake failed, without rmcp's transport type names.
fn handshake_failure(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, .. } => error_chain(error.error.as_ref()),
        other => error_chain(other),
    }
}
