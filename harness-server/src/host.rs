//! Hosting: one [`Harness`] per live session, built by the factory, bound to the session's
//! thread and fed executions one at a time; each execution's events mapped to the spec's
//! execution events and appended to its event log before any client reads them.
//!
//! A session is a thread. Its harness takes the thread's lock (a session open in another
//! process is `409`), runs the session's executions in the order they came, and is dropped
//! when idle; the next request loads it again from the store.
//!
//! An execution's stream is its event log (`Store::events`), `seq` from 1: a client that
//! attaches, or comes back with `Last-Event-ID`, reads the log, then waits for more. Clients
//! never read the harness's events directly, so what a resumed client receives is byte for
//! byte what an unbroken one did, in this process or after a restart.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use harness_core::harness::{Harness, HarnessBuilder, RunSummary};
use harness_events::SeqOrder;
use harness_protocol::open_harness::{ExecutionEvent, ExecutionStream, UsageStats};
use harness_protocol::{EventEnvelope, HarnessEvent};
use harness_store::{LoggedEvent, Record, Store, ThreadRecord, WriteOp};
use harness_tags::util::{lock, rfc3339, unix_ms};
use harness_tags::{RunOutcome, ToolSpec};
use harness_workspace::Workspace;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use utoipa::ToSchema;

use crate::agents::{AgentRecord, Agents};
use crate::artifacts::{ArtifactSummary, mime};
use crate::error::ApiError;
use crate::hooks::{HookEvent, Hooks};
use crate::journal::Journal;
use crate::mcp::{McpServers, McpSource};
use crate::tools::{CustomToolSource, CustomTools};

/// The store namespace of execution records (bound to their session's thread).
pub(crate) const EXECUTIONS: &str = "harness-server.executions";

/// Builds the harness of a session: the server adds interactivity and the approval timeout,
/// then binds the session's thread. Every harness it builds should share one store. An error
/// (e.g. a configuration that no longer loads) is answered `503` with its text.
pub type HarnessFactory = Arc<dyn Fn() -> Result<HarnessBuilder, String> + Send + Sync>;

/// Where an execution stands, as the spec names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    /// Waiting behind the session's earlier executions.
    Pending,
    /// Running (possibly waiting for input: see `awaiting_input`).
    Running,
    /// Ended with an answer.
    Completed,
    /// Ended with an error.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl ExecutionStatus {
    /// True once the execution is over.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            ExecutionStatus::Completed | ExecutionStatus::Failed | ExecutionStatus::Cancelled
        )
    }
}

/// A tool call of an execution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolCallRecord {
    /// The call's id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments it ran with.
    #[schema(value_type = Object)]
    pub input: Value,
    /// What it returned: `{ "text": ... }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output: Option<Value>,
    /// `running`, `completed` or `failed`.
    pub status: String,
    /// When it started, Unix milliseconds.
    pub started_at: i64,
    /// When it ended, Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<i64>,
}

/// What an execution waits for, while it waits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AwaitingInput {
    /// `approval` (answer `yes`, `no` or `always`) or `question` (answer with text).
    pub kind: String,
    /// The tool call that waits.
    pub call_id: String,
    /// Its tool.
    pub tool_name: String,
    /// Its arguments.
    #[schema(value_type = Object)]
    pub input: Value,
    /// For a question, what to show (the tool's suspend payload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub prompt: Option<Value>,
}

/// One frame of an execution's stream: a spec execution event, or (an extension) what the
/// execution now waits for, as `awaiting_input`, so that a client knows to answer without
/// polling.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
enum Frame {
    Spec(ExecutionEvent),
    Input(InputFrame),
    Answered(AnsweredFrame),
    Subagent(SubagentFrame),
}

/// A subagent the model spawned (its `subagent` call, `call_id`) started or ended; what it
/// did shows in that call's `tool_result`.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum SubagentFrame {
    SubagentStart {
        call_id: String,
        agent_type: String,
        task: String,
        model_id: String,
    },
    SubagentEnd {
        call_id: String,
        agent_type: String,
        success: bool,
        duration_ms: u64,
    },
}

/// `{"type": "input_answered", "call_id"}`: what the execution waited for was answered (or
/// declined by the timeout).
#[derive(Clone, Debug, Serialize)]
struct AnsweredFrame {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: String,
}

/// `{"type": "awaiting_input", ...AwaitingInput}`.
#[derive(Clone, Debug, Serialize)]
struct InputFrame {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    waiting: AwaitingInput,
}

impl From<ExecutionEvent> for Frame {
    fn from(event: ExecutionEvent) -> Self {
        Frame::Spec(event)
    }
}

/// An execution as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ExecutionRecord {
    pub(crate) id: String,
    pub(crate) session_id: String,
    pub(crate) status: ExecutionStatus,
    pub(crate) message: String,
    pub(crate) started_at: i64,
    #[serde(default)]
    pub(crate) completed_at: Option<i64>,
    #[serde(default)]
    pub(crate) output: String,
    #[serde(default)]
    pub(crate) error: Option<String>,
    #[serde(default)]
    pub(crate) usage: UsageStats,
    #[serde(default)]
    pub(crate) tool_calls: Vec<ToolCallRecord>,
    #[serde(default)]
    pub(crate) awaiting_input: Option<AwaitingInput>,
    /// The harness run that carries it, once started.
    #[serde(default)]
    pub(crate) run_id: Option<String>,
}

impl ExecutionRecord {
    /// The files this execution wrote: the paths of its `write_file` calls that completed
    /// (the workspace tool's), first write first; an artifact's id is `art_<n>`, from 1.
    pub(crate) fn artifact_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = Vec::new();
        for call in &self.tool_calls {
            if call.name == "write_file"
                && call.status == "completed"
                && let Some(path) = call.input["path"].as_str()
                && !paths.iter().any(|known| known == path)
            {
                paths.push(path.to_owned());
            }
        }
        paths
    }

    /// Its artifacts, with their current size in `workspace` (0 without one, or once
    /// deleted).
    pub(crate) fn artifacts(&self, workspace: Option<&Workspace>) -> Vec<ArtifactSummary> {
        self.artifact_paths()
            .into_iter()
            .zip(1..)
            .map(|(path, n): (String, u32)| {
                let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
                let size_bytes = workspace
                    .and_then(|workspace| workspace.entry(&path).ok())
                    .map_or(0, |entry| entry.size);
                ArtifactSummary {
                    id: format!("art_{n}"),
                    mime_type: mime(&name).to_owned(),
                    name,
                    size_bytes,
                }
            })
            .collect()
    }

    fn put(&self) -> WriteOp {
        WriteOp::PutRecord {
            namespace: EXECUTIONS.to_owned(),
            key: self.id.clone(),
            thread_id: Some(self.session_id.clone()),
            value: serde_json::to_value(self).unwrap_or(Value::Null),
        }
    }

    pub(crate) fn from_record(record: &Record) -> Result<Self, ApiError> {
        serde_json::from_value(record.value.clone()).map_err(|error| {
            ApiError::internal(format!(
                "execution record `{}` is corrupt: {error}",
                record.key
            ))
        })
    }
}

/// An execution this process runs (or will): its record as it changes, and a counter bumped
/// after each append to its log, so that streams know when to read again.
#[derive(Debug)]
pub(crate) struct Live {
    record: Mutex<ExecutionRecord>,
    changed: watch::Sender<u64>,
    cancelled: AtomicBool,
    harness: Harness,
}

impl Live {
    pub(crate) fn record(&self) -> ExecutionRecord {
        lock(&self.record).clone()
    }

    /// A receiver that sees every append and status change from now on.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn update(&self, change: impl FnOnce(&mut ExecutionRecord)) -> ExecutionRecord {
        let mut record = lock(&self.record);
        change(&mut record);
        record.clone()
    }

    fn bump(&self) {
        self.changed.send_modify(|count| *count += 1);
    }

    pub(crate) fn harness(&self) -> &Harness {
        &self.harness
    }
}

/// A session's harness and the queue of its executions.
#[derive(Debug)]
struct Hosted {
    harness: Harness,
    jobs: mpsc::UnboundedSender<Arc<Live>>,
    last_used: Mutex<Instant>,
}

/// The harnesses of live sessions and the executions this process runs.
pub(crate) struct Host {
    store: Arc<dyn Store>,
    factory: HarnessFactory,
    input_timeout: Duration,
    sessions: tokio::sync::Mutex<HashMap<String, Arc<Hosted>>>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    resource_id: String,
    hooks: Arc<Hooks>,
    journal: Arc<Journal>,
    /// The files the executions' artifacts are read from.
    workspace: Option<Workspace>,
    agents: Arc<Agents>,
    custom_tools: Arc<CustomTools>,
    mcp: Arc<McpServers>,
    /// The harness direct tool calls run in (no session), built when first needed.
    invoker: tokio::sync::OnceCell<Harness>,
    /// The tools the factory's harness offers in its default mode.
    builtin_tools: Arc<[ToolSpec]>,
    me: Weak<Host>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("resource_id", &self.resource_id)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// A host for the factory's harnesses; fails if the factory's harness cannot be built.
    pub(crate) async fn new(
        store: Arc<dyn Store>,
        factory: HarnessFactory,
        input_timeout: Duration,
        hooks: Arc<Hooks>,
        journal: Arc<Journal>,
        workspace: Option<Workspace>,
        mcp_servers: Vec<harness_mcp::McpServer>,
    ) -> Result<Arc<Host>, ApiError> {
        let agents = Agents::new(Arc::clone(&store));
        let custom_tools = CustomTools::new(
            Arc::clone(&store),
            workspace
                .as_ref()
                .map(|workspace| workspace.root().to_path_buf()),
        );
        let probe = factory()
            .map_err(|error| {
                ApiError::unavailable(format!("the harness cannot be built: {error}"))
            })?
            .build()
            .map_err(|error| {
                ApiError::unavailable(format!("the harness cannot be built: {error}"))
            })?;
        let resource_id = probe.session().resource_id();
        let builtin_tools = probe
            .tool_specs(&probe.session().mode_id())
            .unwrap_or_else(|| Arc::from(Vec::new()));
        let mcp =
            McpServers::new(Arc::clone(&store), probe.pipeline().clone(), mcp_servers).await?;
        Ok(Arc::new_cyclic(|me| Host {
            store,
            factory,
            input_timeout,
            sessions: tokio::sync::Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
            resource_id,
            hooks,
            journal,
            workspace,
            agents,
            custom_tools,
            mcp,
            invoker: tokio::sync::OnceCell::new(),
            builtin_tools,
            me: me.clone(),
        }))
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The tools registered at runtime.
    pub(crate) fn custom_tools(&self) -> &Arc<CustomTools> {
        &self.custom_tools
    }

    /// The MCP servers every session shares.
    pub(crate) fn mcp(&self) -> &Arc<McpServers> {
        &self.mcp
    }

    /// The tools the factory's harness offers of its own, in its default mode.
    pub(crate) fn builtin_tools(&self) -> &Arc<[ToolSpec]> {
        &self.builtin_tools
    }

    /// The agents sessions may run as.
    pub(crate) fn agents(&self) -> &Arc<Agents> {
        &self.agents
    }

    /// What happened across sessions.
    pub(crate) fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// The hooks every session's harness calls.
    pub(crate) fn hooks(&self) -> &Arc<Hooks> {
        &self.hooks
    }

    /// The resource the sessions' threads belong to.
    pub(crate) fn resource_id(&self) -> &str {
        &self.resource_id
    }

    /// A session's harness: the factory's, with the hooks, run as `agent` if it has one.
    async fn build(&self, agent: Option<String>) -> Result<Harness, ApiError> {
        let builder = (self.factory)()
            .map_err(|error| {
                ApiError::unavailable(format!("the harness cannot be built: {error}"))
            })?
            .interactive(true)
            .input_timeout(self.input_timeout);
        let builder = self
            .hooks
            .guard(builder)
            .tool_source(Arc::new(CustomToolSource(Arc::clone(&self.custom_tools))))
            .tool_source(Arc::new(McpSource(Arc::clone(&self.mcp))));
        let builder = match agent {
            Some(agent) => self.agents.apply(agent, builder),
            None => builder,
        };
        let harness = builder.build().map_err(|error| {
            ApiError::unavailable(format!("the harness cannot be built: {error}"))
        })?;
        harness.init().await?;
        Ok(harness)
    }

    /// The harness direct tool calls run in: the factory's with the hooks, the custom tools
    /// and the MCP servers, bound to no session.
    pub(crate) async fn invoker(&self) -> Result<&Harness, ApiError> {
        self.invoker.get_or_try_init(|| self.build(None)).await
    }

    fn host(&self, harness: Harness) -> Arc<Hosted> {
        let (jobs, queue) = mpsc::unbounded_channel();
        tokio::spawn(work(
            harness.clone(),
            Arc::clone(&self.store),
            Arc::clone(&self.hooks),
            queue,
            self.me.clone(),
        ));
        Arc::new(Hosted {
            harness,
            jobs,
            last_used: Mutex::new(Instant::now()),
        })
    }

    /// Creates a session (a thread) and hosts its harness.
    pub(crate) async fn create_session(
        &self,
        title: Option<String>,
        agent: Option<&AgentRecord>,
    ) -> Result<ThreadRecord, ApiError> {
        let harness = self.build(agent.map(|agent| agent.id.clone())).await?;
        let record = harness.create_thread(title).await?;
        if let Some(agent) = agent {
            self.agents.bind(&record.id, &agent.id).await?;
            if let Some(model) = &agent.config.model {
                let chosen = match harness.check_model(model) {
                    Ok(()) => harness.switch_model(model).await,
                    Err(error) => Err(error),
                };
                if let Err(error) = chosen {
                    tracing::warn!(agent = %agent.id, %error, "the agent's model cannot be used");
                }
            }
        }
        let hosted = self.host(harness);
        self.sessions.lock().await.insert(record.id.clone(), hosted);
        self.journal
            .record("session.created", json!({ "session_id": record.id }))
            .await;
        Ok(record)
    }

    /// Copies a session's messages into a new session and hosts it.
    pub(crate) async fn fork_session(
        &self,
        source: &str,
        title: Option<String>,
        up_to_message: Option<String>,
    ) -> Result<ThreadRecord, ApiError> {
        if self.store.thread(source).await?.is_none() {
            return Err(ApiError::not_found("session", source));
        }
        let agent = self.agents.bound(source).await?;
        let harness = self.build(agent.clone()).await?;
        let record = harness
            .clone_thread(harness_core::harness::CloneOptions {
                source_thread_id: Some(source.to_owned()),
                title,
                up_to_message,
                ..harness_core::harness::CloneOptions::default()
            })
            .await?;
        if let Some(agent) = agent {
            self.agents.bind(&record.id, &agent).await?;
        }
        let hosted = self.host(harness);
        self.sessions.lock().await.insert(record.id.clone(), hosted);
        self.journal
            .record("session.created", json!({ "session_id": record.id }))
            .await;
        Ok(record)
    }

    /// The harness of a session, loading it from the store if it is not hosted.
    async fn hosted(&self, session_id: &str) -> Result<Arc<Hosted>, ApiError> {
        let mut sessions = self.sessions.lock().await;
        if let Some(hosted) = sessions.get(session_id) {
            *lock(&hosted.last_used) = Instant::now();
            return Ok(Arc::clone(hosted));
        }
        if self.store.thread(session_id).await?.is_none() {
            return Err(ApiError::not_found("session", session_id));
        }
        let agent = self.agents.bound(session_id).await?;
        let harness = self.build(agent).await?;
        if let Err(error) = harness.switch_thread(session_id).await {
            harness.destroy().await;
            return Err(error.into());
        }
        let hosted = self.host(harness);
        sessions.insert(session_id.to_owned(), Arc::clone(&hosted));
        Ok(hosted)
    }

    /// The harness of a session (hosting it), to rename or inspect it.
    pub(crate) async fn harness(&self, session_id: &str) -> Result<Harness, ApiError> {
        Ok(self.hosted(session_id).await?.harness.clone())
    }

    /// Deletes a session with its messages and executions.
    pub(crate) async fn delete_session(&self, session_id: &str) -> Result<(), ApiError> {
        let hosted = self.hosted(session_id).await?;
        if self.busy_with(session_id).is_some() {
            return Err(ApiError::conflict(format!(
                "session `{session_id}` has executions running; cancel them first"
            )));
        }
        self.sessions.lock().await.remove(session_id);
        hosted.harness.delete_thread(session_id).await?;
        hosted.harness.destroy().await;
        self.journal
            .record(
                "session.ended",
                json!({ "session_id": session_id, "deleted": true }),
            )
            .await;
        Ok(())
    }

    /// Queues an execution of `message` on a session; it runs after the session's earlier
    /// ones.
    pub(crate) async fn execute(
        &self,
        session_id: &str,
        message: String,
        execution_id: String,
    ) -> Result<Arc<Live>, ApiError> {
        let hosted = self.hosted(session_id).await?;
        let record = ExecutionRecord {
            id: execution_id.clone(),
            session_id: session_id.to_owned(),
            status: ExecutionStatus::Pending,
            message,
            started_at: unix_ms(),
            completed_at: None,
            output: String::new(),
            error: None,
            usage: UsageStats::default(),
            tool_calls: Vec::new(),
            awaiting_input: None,
            run_id: None,
        };
        self.store.write(vec![record.put()]).await?;
        let live = Arc::new(Live {
            record: Mutex::new(record),
            changed: watch::channel(0).0,
            cancelled: AtomicBool::new(false),
            harness: hosted.harness.clone(),
        });
        lock(&self.live).insert(execution_id, Arc::clone(&live));
        if hosted.jobs.send(Arc::clone(&live)).is_err() {
            return Err(ApiError::internal("the session's worker stopped"));
        }
        Ok(live)
    }

    /// An unfinished execution of `session_id`, if it has one.
    pub(crate) fn busy_with(&self, session_id: &str) -> Option<String> {
        lock(&self.live)
            .values()
            .map(|live| live.record())
            .find(|record| record.session_id == session_id && !record.status.is_finished())
            .map(|record| record.id)
    }

    /// How many sessions have a harness in this process, and how many executions it runs or
    /// has queued.
    pub(crate) async fn load(&self) -> (usize, usize) {
        let sessions = self.sessions.lock().await.len();
        (sessions, lock(&self.live).len())
    }

    /// An execution this process runs, if it does.
    pub(crate) fn live(&self, execution_id: &str) -> Option<Arc<Live>> {
        lock(&self.live).get(execution_id).cloned()
    }

    /// An execution's record: the live one, else the stored one.
    pub(crate) async fn execution(&self, execution_id: &str) -> Result<ExecutionRecord, ApiError> {
        if let Some(live) = self.live(execution_id) {
            return Ok(live.record());
        }
        match self.store.record(EXECUTIONS, execution_id).await? {
            Some(record) => ExecutionRecord::from_record(&record),
            None => Err(ApiError::not_found("execution", execution_id)),
        }
    }

    /// Every stored execution, newest first.
    pub(crate) async fn executions(&self) -> Result<Vec<ExecutionRecord>, ApiError> {
        let mut records = self
            .store
            .records(EXECUTIONS, "")
            .await?
            .iter()
            .map(ExecutionRecord::from_record)
            .collect::<Result<Vec<_>, _>>()?;
        for record in &mut records {
            if let Some(live) = self.live(&record.id) {
                *record = live.record();
            }
        }
        records.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.id.cmp(&a.id)));
        Ok(records)
    }

    /// Drops the harnesses of sessions idle for `idle` with nothing queued; they load again
    /// on their next request. Returns how many were dropped.
    pub(crate) async fn evict_idle(&self, idle: Duration) -> usize {
        let evicted: Vec<Arc<Hosted>> = {
            let mut sessions = self.sessions.lock().await;
            let idle_ids: Vec<String> = sessions
                .iter()
                .filter(|(id, hosted)| {
                    self.busy_with(id).is_none() && lock(&hosted.last_used).elapsed() >= idle
                })
                .map(|(id, _)| id.clone())
                .collect();
            idle_ids
                .iter()
                .filter_map(|id| sessions.remove(id))
                .collect()
        };
        for hosted in &evicted {
            hosted.harness.destroy().await;
        }
        evicted.len()
    }

    /// Ends, as failed, every execution a previous process left running: its stream gets
    /// `error` then `done` and is closed. Called once at start.
    pub(crate) async fn recover(&self) -> Result<usize, ApiError> {
        let mut recovered = 0;
        for mut record in self.executions().await? {
            if record.status.is_finished() {
                continue;
            }
            let log = self.store.event_log(&record.id).await?;
            let last = log.map_or(0, |log| log.last_seq);
            let message = "the server stopped before the execution ended";
            let frames = failure("server_restarted", message, record.usage);
            record.status = ExecutionStatus::Failed;
            record.error = Some(message.to_owned());
            record.awaiting_input = None;
            let now = unix_ms();
            record.completed_at = Some(now);
            let mut ops = Vec::new();
            if log.is_none_or(|log| log.closed_at.is_none()) {
                ops.push(append(&record.id, last, &frames)?);
            }
            ops.push(record.put());
            ops.push(WriteOp::CloseEventLog {
                log_id: record.id.clone(),
                closed_at: now,
            });
            self.store.write(ops).await?;
            recovered += 1;
        }
        Ok(recovered)
    }

    /// Cancels an execution: a pending one ends now and never starts, a running one is
    /// aborted (it ends as its run does).
    pub(crate) async fn cancel(&self, live: &Live) -> Result<(), ApiError> {
        live.cancelled.store(true, Ordering::Release);
        let mut was_pending = false;
        let now = unix_ms();
        let record = live.update(|record| {
            if record.status == ExecutionStatus::Pending {
                was_pending = true;
                record.status = ExecutionStatus::Cancelled;
                record.completed_at = Some(now);
                record.error = Some("the execution was cancelled before it started".to_owned());
            }
        });
        if was_pending {
            let frames = failure(
                "cancelled",
                "the execution was cancelled before it started",
                UsageStats::default(),
            );
            self.store
                .write(vec![
                    append(&record.id, 0, &frames)?,
                    record.put(),
                    WriteOp::CloseEventLog {
                        log_id: record.id.clone(),
                        closed_at: now,
                    },
                ])
                .await?;
            live.bump();
        } else if record.status == ExecutionStatus::Running {
            live.harness.abort();
        }
        Ok(())
    }

    fn finished(&self, execution_id: &str) {
        lock(&self.live).remove(execution_id);
    }
}

/// The last frames of an execution that failed outside its run: `error`, then `done`.
fn failure(code: &str, message: &str, usage: UsageStats) -> Vec<Frame> {
    vec![
        Frame::Spec(ExecutionEvent::Error {
            code: code.to_owned(),
            message: message.to_owned(),
            recoverable: false,
        }),
        Frame::Spec(ExecutionEvent::Done { usage }),
    ]
}

/// The append of `frames` after `last`.
fn append(log_id: &str, last: u64, frames: &[Frame]) -> Result<WriteOp, ApiError> {
    let events = frames
        .iter()
        .zip(last + 1..)
        .map(|(frame, seq)| {
            serde_json::to_string(frame)
                .map(|envelope| LoggedEvent { seq, envelope })
                .map_err(|error| ApiError::internal(format!("a frame did not serialize: {error}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(WriteOp::AppendEvents {
        log_id: log_id.to_owned(),
        events,
    })
}

/// A session's worker: runs its executions one at a time, reading the harness's events in
/// `seq` order through one listener that lives as long as the session is hosted.
async fn work(
    harness: Harness,
    store: Arc<dyn Store>,
    hooks: Arc<Hooks>,
    mut jobs: mpsc::UnboundedReceiver<Arc<Live>>,
    host: Weak<Host>,
) {
    let (sender, mut envelopes) = mpsc::unbounded_channel::<Arc<EventEnvelope>>();
    let bus = harness.events().bus().clone();
    let _listener = bus.listen_shared(move |envelope| {
        let _ = sender.send(Arc::clone(envelope));
    });
    let mut order = SeqOrder::new(bus.next_seq());
    while let Some(live) = jobs.recv().await {
        // What happened between executions belongs to none.
        while let Ok(envelope) = envelopes.try_recv() {
            order.push(envelope);
        }
        while order.pop().is_some() {}
        let execution_id = live.record().id;
        let Some(services) = host.upgrade() else {
            break;
        };
        let mut run = Execution {
            live: &live,
            store: &*store,
            hooks: &hooks,
            journal: &services.journal,
            workspace: services.workspace.as_ref(),
            last_seq: 0,
            run_id: None,
            stream: ExecutionStream::new(harness.session().token_usage()),
        };
        if let Err(error) = run.run(&harness, &mut envelopes, &mut order).await {
            tracing::warn!(execution = %execution_id, error = ?error, "an execution's log failed");
        }
        services.finished(&execution_id);
        drop(services);
        live.bump();
    }
}

/// One execution as its worker runs it.
struct Execution<'a> {
    live: &'a Live,
    store: &'a dyn Store,
    hooks: &'a Arc<Hooks>,
    journal: &'a Journal,
    workspace: Option<&'a Workspace>,
    last_seq: u64,
    run_id: Option<String>,
    stream: ExecutionStream,
}

impl Execution<'_> {
    async fn run(
        &mut self,
        harness: &Harness,
        envelopes: &mut mpsc::UnboundedReceiver<Arc<EventEnvelope>>,
        order: &mut SeqOrder,
    ) -> Result<(), ApiError> {
        let mut started = false;
        let running = self.live.update(|record| {
            if record.status == ExecutionStatus::Pending {
                record.status = ExecutionStatus::Running;
                started = true;
            }
        });
        if !started {
            // Cancelled while it waited: the cancel ended it.
            return Ok(());
        }
        tracing::info!(
            execution = %running.id,
            session = %running.session_id,
            "execution started"
        );
        self.journal
            .record(
                "execution.started",
                json!({ "execution_id": running.id, "session_id": running.session_id }),
            )
            .await;
        if self.live.cancelled.load(Ordering::Acquire) {
            let message = "the execution was cancelled before it started";
            let frames = failure("cancelled", message, UsageStats::default());
            return self
                .finish(frames, ExecutionStatus::Cancelled, Some(message.to_owned()))
                .await;
        }
        self.store.write(vec![running.put()]).await?;
        self.live.bump();
        let message = running.message;
        let mut run = {
            let harness = harness.clone();
            tokio::spawn(async move { harness.send_message(message).await })
        };
        let mut ended: Option<Result<RunSummary, String>> = None;
        loop {
            tokio::select! {
                received = envelopes.recv() => match received {
                    Some(envelope) => order.push(envelope),
                    None => break,
                },
                joined = &mut run, if ended.is_none() => {
                    ended = Some(joined_summary(joined));
                    // Every event of the run was published before it reported.
                    while let Ok(envelope) = envelopes.try_recv() {
                        order.push(envelope);
                    }
                }
            }
            let mut frames = Vec::new();
            while let Some(envelope) = order.pop() {
                frames.extend(self.observe(&envelope));
                if self.stream.is_done() {
                    break;
                }
            }
            if self.stream.is_done() {
                let summary = match ended {
                    Some(summary) => summary,
                    None => joined_summary(run.await),
                };
                return self.end(frames, summary).await;
            }
            self.append(frames).await?;
            if ended.is_some() {
                break;
            }
        }
        // The run ended (or the harness went away) without a `done`: it never started.
        let summary = match ended {
            Some(summary) => summary,
            None => joined_summary(run.await),
        };
        let message = match &summary {
            Ok(summary) => summary
                .error
                .clone()
                .unwrap_or_else(|| "the run ended without an answer".to_owned()),
            Err(error) => error.clone(),
        };
        let frames = failure("run_failed", &message, UsageStats::default());
        self.finish(frames, ExecutionStatus::Failed, Some(message))
            .await
    }

    /// Keeps the record current with an event of the run, and maps it.
    fn observe(&mut self, envelope: &EventEnvelope) -> Vec<Frame> {
        if self.run_id.is_none()
            && let HarnessEvent::AgentStart { run_id } = &envelope.event
        {
            self.run_id = Some(run_id.clone());
            self.live
                .update(|record| record.run_id = Some(run_id.clone()));
        }
        if self.run_id.is_none() || envelope.run_id.as_deref() != self.run_id.as_deref() {
            return Vec::new();
        }
        let at = envelope.at;
        let mut answered = None;
        match &envelope.event {
            HarnessEvent::ToolApprovalRequired {
                tool_call_id,
                tool_name,
                args,
                ..
            } => return vec![self.await_input("approval", tool_call_id, tool_name, args, None)],
            HarnessEvent::ToolSuspended {
                tool_call_id,
                tool_name,
                args,
                suspend_payload,
                ..
            } => {
                return vec![self.await_input(
                    "question",
                    tool_call_id,
                    tool_name,
                    args,
                    Some(suspend_payload.clone()),
                )];
            }
            HarnessEvent::ToolApprovalAnswered { tool_call_id, .. } => {
                return self.answered(tool_call_id).into_iter().collect();
            }
            HarnessEvent::SubagentStart {
                tool_call_id,
                agent_type,
                task,
                model_id,
                ..
            } => {
                return vec![Frame::Subagent(SubagentFrame::SubagentStart {
                    call_id: tool_call_id.clone(),
                    agent_type: agent_type.clone(),
                    task: task.clone(),
                    model_id: model_id.clone(),
                })];
            }
            HarnessEvent::SubagentEnd {
                tool_call_id,
                agent_type,
                is_error,
                duration_ms,
                ..
            } => {
                return vec![Frame::Subagent(SubagentFrame::SubagentEnd {
                    call_id: tool_call_id.clone(),
                    agent_type: agent_type.clone(),
                    success: !is_error,
                    duration_ms: *duration_ms,
                })];
            }
            HarnessEvent::ToolStart {
                tool_call_id,
                tool_name,
                args,
                ..
            } => {
                self.live.update(|record| {
                    record.tool_calls.push(ToolCallRecord {
                        id: tool_call_id.clone(),
                        name: tool_name.clone(),
                        input: args.clone(),
                        output: None,
                        status: "running".to_owned(),
                        started_at: at,
                        completed_at: None,
                    });
                });
            }
            HarnessEvent::ToolEnd {
                tool_call_id,
                result,
                is_error,
            } => {
                answered = self.answered(tool_call_id);
                let record = self.live.record();
                let name = record
                    .tool_calls
                    .iter()
                    .rev()
                    .find(|call| call.id == *tool_call_id)
                    .map(|call| call.name.clone());
                self.hooks.notify(
                    HookEvent::PostTool,
                    json!({
                        "session_id": record.session_id,
                        "execution_id": record.id,
                        "tool": {
                            "id": tool_call_id,
                            "name": name,
                            "success": !is_error,
                            "output": { "text": result },
                        },
                    }),
                );
                self.live.update(|record| {
                    if let Some(call) = record
                        .tool_calls
                        .iter_mut()
                        .rev()
                        .find(|call| call.id == *tool_call_id)
                    {
                        call.output = Some(serde_json::json!({ "text": result }));
                        call.status = if *is_error { "failed" } else { "completed" }.to_owned();
                        call.completed_at = Some(at);
                    }
                });
            }
            _ => {}
        }
        answered
            .into_iter()
            .chain(
                self.stream
                    .map(&envelope.event)
                    .into_iter()
                    .map(Frame::from),
            )
            .collect()
    }

    fn await_input(
        &self,
        kind: &str,
        call_id: &str,
        tool_name: &str,
        input: &Value,
        prompt: Option<Value>,
    ) -> Frame {
        let waiting = AwaitingInput {
            kind: kind.to_owned(),
            call_id: call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            input: input.clone(),
            prompt,
        };
        self.live
            .update(|record| record.awaiting_input = Some(waiting.clone()));
        Frame::Input(InputFrame {
            kind: "awaiting_input",
            waiting,
        })
    }

    /// Clears what the execution waited for if `call_id` was it; the frame that says so.
    fn answered(&self, call_id: &str) -> Option<Frame> {
        let mut cleared = false;
        self.live.update(|record| {
            if record
                .awaiting_input
                .as_ref()
                .is_some_and(|waiting| waiting.call_id == call_id)
            {
                record.awaiting_input = None;
                cleared = true;
            }
        });
        cleared.then(|| {
            Frame::Answered(AnsweredFrame {
                kind: "input_answered",
                call_id: call_id.to_owned(),
            })
        })
    }

    async fn append(&mut self, frames: Vec<Frame>) -> Result<(), ApiError> {
        if frames.is_empty() {
            return Ok(());
        }
        let id = self.live.record().id;
        self.store
            .write(vec![append(&id, self.last_seq, &frames)?])
            .await?;
        self.last_seq += frames.len() as u64;
        self.live.bump();
        Ok(())
    }

    async fn end(
        &mut self,
        frames: Vec<Frame>,
        summary: Result<RunSummary, String>,
    ) -> Result<(), ApiError> {
        let (status, error) = match &summary {
            Ok(summary) => match summary.outcome {
                RunOutcome::Complete | RunOutcome::MaxSteps | RunOutcome::Suspended => {
                    (ExecutionStatus::Completed, None)
                }
                RunOutcome::Aborted => (
                    ExecutionStatus::Cancelled,
                    Some("the execution was cancelled".to_owned()),
                ),
                RunOutcome::Error => (
                    ExecutionStatus::Failed,
                    Some(
                        summary
                            .error
                            .clone()
                            .unwrap_or_else(|| "the run failed".to_owned()),
                    ),
                ),
            },
            Err(error) => (ExecutionStatus::Failed, Some(error.clone())),
        };
        if let Ok(summary) = &summary {
            let output = summary.final_text.clone().unwrap_or_default();
            self.live.update(|record| record.output = output);
        }
        self.finish(frames, status, error).await
    }

    /// Appends the last frames, stores the final record and closes the log, in one write.
    async fn finish(
        &mut self,
        frames: Vec<Frame>,
        status: ExecutionStatus,
        error: Option<String>,
    ) -> Result<(), ApiError> {
        let usage = frames.iter().find_map(|frame| match frame {
            Frame::Spec(ExecutionEvent::Done { usage }) => Some(*usage),
            _ => None,
        });
        let now = unix_ms();
        let record = self.live.update(|record| {
            record.status = status;
            record.error = error;
            record.completed_at = Some(now);
            record.awaiting_input = None;
            if let Some(usage) = usage {
                record.usage = usage;
            }
        });
        let mut ops = Vec::new();
        if !frames.is_empty() {
            ops.push(append(&record.id, self.last_seq, &frames)?);
        }
        ops.push(record.put());
        ops.push(WriteOp::CloseEventLog {
            log_id: record.id.clone(),
            closed_at: now,
        });
        self.store.write(ops).await?;
        self.last_seq += frames.len() as u64;
        self.live.bump();
        let duration_ms = now.saturating_sub(record.started_at);
        match &record.error {
            Some(error) if record.status != ExecutionStatus::Completed => tracing::warn!(
                execution = %record.id,
                status = ?record.status,
                duration_ms,
                error = %error,
                "execution ended"
            ),
            _ => tracing::info!(
                execution = %record.id,
                status = ?record.status,
                duration_ms,
                "execution ended"
            ),
        }
        self.journal
            .record(
                "execution.completed",
                json!({
                    "execution_id": record.id,
                    "session_id": record.session_id,
                    "status": record.status,
                    "error": record.error,
                    "artifacts": record.artifacts(self.workspace),
                    "usage": record.usage,
                    "completed_at": rfc3339(now),
                }),
            )
            .await;
        let data = json!({
            "session_id": record.session_id,
            "execution_id": record.id,
            "status": record.status,
            "error": record.error,
        });
        if record.status == ExecutionStatus::Failed {
            self.hooks.notify(HookEvent::Error, data.clone());
        }
        self.hooks.notify(HookEvent::Stop, data);
        Ok(())
    }
}

fn joined_summary(
    joined: Result<Result<RunSummary, harness_core::harness::HarnessError>, tokio::task::JoinError>,
) -> Result<RunSummary, String> {
    match joined {
        Ok(Ok(summary)) => Ok(summary),
        Ok(Err(error)) => Err(error.to_string()),
        Err(error) => Err(format!("the run stopped: {error}")),
    }
}
