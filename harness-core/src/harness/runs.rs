//! Flow control (send, follow up, steer, abort), the run driver, and the recorder that turns a
//! run's kernel events into stored messages and harness events.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use harness_tags::tags::DisplayToolResultTag;
use harness_tags::{BaseCtx, DisplayToolResult, KernelMessage, RunOutcome, ToolResultCtx, Usage};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::channel::SessionChannel;
use super::{Harness, HarnessError, HarnessInner, storage_error};
use crate::event::{
    AgentEndReason, HarnessEvent, HarnessMessage, MessagePart, MessageRole, StopReason,
};
use crate::kernel::{FinishedCall, KernelEvent, OpenTasks, RunInput, SessionSource};
use crate::protocol::ErrorCode;
use crate::store::{StoredMessage, WriteOp, metadata};
use crate::task::TaskBoard;
use harness_tags::util::{lock, unix_ms};
use std::collections::VecDeque;

/// How a run went.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// The run's id.
    pub run_id: String,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The final answer.
    pub final_text: Option<String>,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// Tokens the run used.
    pub usage: Usage,
}

impl RunSummary {
    fn failed(error: impl std::fmt::Display) -> Self {
        RunSummary {
            run_id: String::new(),
            outcome: RunOutcome::Error,
            final_text: None,
            error: Some(error.to_string()),
            usage: Usage::default(),
        }
    }
}

/// What `follow_up` did with the message.
#[derive(Clone, Debug, PartialEq)]
pub enum FollowUp {
    /// A run was active: the message waits behind it (and the runs queued before it).
    Queued {
        /// Messages queued now.
        count: usize,
    },
    /// Nothing was running: the message ran at once.
    Completed(RunSummary),
}

enum Started {
    Running(oneshot::Receiver<RunSummary>),
    Queued(usize),
}

impl Harness {
    /// Sends a message and waits for its run to end. A thread is selected or created if none
    /// is bound. Fails with [`HarnessError::Busy`] while another run is active.
    pub async fn send_message(
        &self,
        content: impl Into<String>,
    ) -> Result<RunSummary, HarnessError> {
        match self.inner.start(content.into(), false)? {
            Started::Running(done) => wait(done).await,
            Started::Queued(_) => Err(HarnessError::Busy),
        }
    }

    /// Queues a message behind the active run (runs drain one by one, in order, each after the
    /// previous ended), or runs it now if nothing is running.
    pub async fn follow_up(&self, content: impl Into<String>) -> Result<FollowUp, HarnessError> {
        match self.inner.start(content.into(), true)? {
            Started::Running(done) => Ok(FollowUp::Completed(wait(done).await?)),
            Started::Queued(count) => Ok(FollowUp::Queued { count }),
        }
    }

    /// Redirects the agent: aborts the active run, drops the queued follow-ups, and runs this
    /// message next. Waits for that run to end.
    pub async fn steer(&self, content: impl Into<String>) -> Result<RunSummary, HarnessError> {
        let content = content.into();
        let steered = {
            let mut runs = lock(&self.session().runs);
            runs.active
                .as_ref()
                .map(|active| active.abort.clone())
                .map(|abort| {
                    let (reply, done) = oneshot::channel();
                    runs.queue.clear();
                    runs.queue.push_back(Queued {
                        content: content.clone(),
                        reply: Some(reply),
                    });
                    abort.cancel();
                    (done, runs.queue_event())
                })
        };
        let Some((done, queue_event)) = steered else {
            return self.send_message(content).await;
        };
        self.inner.emit(queue_event);
        self.inner.cancel_waits();
        wait(done).await
    }

    /// Aborts the active run (queued follow-ups still run afterwards) and cancels every
    /// pending approval and question.
    pub fn abort(&self) {
        if let Some(active) = &lock(&self.session().runs).active {
            active.abort.cancel();
        }
        self.inner.cancel_waits();
    }
}

async fn wait(done: oneshot::Receiver<RunSummary>) -> Result<RunSummary, HarnessError> {
    done.await
        .map_err(|_| HarnessError::RunLost("the run's task stopped before reporting".into()))
}

impl HarnessInner {
    fn start(
        self: &Arc<Self>,
        content: String,
        queue_if_busy: bool,
    ) -> Result<Started, HarnessError> {
        let mut runs = lock(&self.session.runs);
        if runs.active.is_some() {
            if !queue_if_busy {
                return Err(HarnessError::Busy);
            }
            runs.queue.push_back(Queued {
                content,
                reply: None,
            });
            let count = runs.queue.len();
            let queue_event = runs.queue_event();
            drop(runs);
            self.emit(queue_event);
            return Ok(Started::Queued(count));
        }
        let abort = CancellationToken::new();
        runs.active = Some(ActiveRun {
            abort: abort.clone(),
        });
        drop(runs);
        let (reply, done) = oneshot::channel();
        let harness = Arc::clone(self);
        tokio::spawn(harness.drive(
            Queued {
                content,
                reply: Some(reply),
            },
            abort,
        ));
        Ok(Started::Running(done))
    }

    /// Runs a message, then whatever was queued behind it, one at a time.
    async fn drive(self: Arc<Self>, first: Queued, abort: CancellationToken) {
        let mut next = Some((first, abort));
        while let Some((queued, abort)) = next.take() {
            let run = AssertUnwindSafe(self.run_once(queued.content, abort)).catch_unwind();
            let summary = run.await.unwrap_or_else(|panic| {
                let error = harness_tags::TagError::from_panic(&*panic);
                self.emit(HarnessEvent::Error {
                    error: format!("the run crashed: {error}"),
                    error_type: Some(ErrorCode::RunCrashed.into()),
                    retryable: Some(true),
                    retry_delay_ms: None,
                });
                RunSummary::failed(error)
            });
            self.apply_plan_switch().await;
            // The slot changes before the caller hears back, so that a returned
            // `send_message` never sees its own run still active.
            let (following, queue_event) = {
                let mut runs = lock(&self.session.runs);
                let following = runs
                    .queue
                    .pop_front()
                    .map(|item| (item, CancellationToken::new()));
                runs.active = following.as_ref().map(|(_, abort)| ActiveRun {
                    abort: abort.clone(),
                });
                (following, runs.queue_event())
            };
            if let Some(reply) = queued.reply {
                let _ = reply.send(summary);
            }
            if following.is_some() {
                self.emit(queue_event);
            } else {
                self.session.idle.notify_waiters();
            }
            next = following;
        }
    }

    /// Waits until no run is active.
    pub(crate) async fn wait_idle(&self) {
        loop {
            let idle = self.session.idle.notified();
            if !self.session.is_running() {
                return;
            }
            idle.await;
        }
    }

    /// Drops every pending approval and question: their waiters see the channel close.
    pub(crate) fn cancel_waits(&self) {
        lock(&self.session.approvals).clear();
        lock(&self.session.suspensions).clear();
    }

    async fn run_once(self: &Arc<Self>, content: String, abort: CancellationToken) -> RunSummary {
        let thread = match self.ensure_thread().await {
            Ok(thread) => thread,
            Err(error) => return self.refuse(error),
        };
        let mode_id = self.session.mode_id();
        let Some(kernels) = self.kernels.get(&mode_id) else {
            return self.refuse(self.unknown_mode(&mode_id));
        };
        let Some(model_id) = self.session.model_id() else {
            return self.refuse(HarnessError::Model(crate::model::ModelError::UnknownModel(
                "no model is selected for this mode; set a default model or call `switch_model`"
                    .into(),
            )));
        };
        let model = match self.resolve_model(&model_id) {
            Ok(model) => model,
            Err(error) => return self.refuse(error),
        };
        let history = match self.store.messages(&thread.id).await {
            Ok(messages) => messages.into_iter().map(|m| m.message).collect(),
            Err(error) => return self.refuse(error),
        };
        let run_id = self.new_id();
        self.session.set_run(Some(&run_id));
        self.emit(HarnessEvent::AgentStart {
            run_id: run_id.clone(),
        });

        let (events, queue) = mpsc::unbounded_channel();
        let recorder = Recorder {
            harness: Arc::clone(self),
            thread_id: thread.id.clone(),
            run_id: run_id.clone(),
            mode_id: mode_id.clone(),
            model_id: model_id.to_string(),
            usage_before: self.session.token_usage(),
            abort: abort.clone(),
            streaming: None,
        };
        let recording = tokio::spawn(recorder.record(queue));
        *lock(&self.recorder) = Some(events.clone());
        let input = RunInput::message(KernelMessage::user(content))
            .history(history)
            .run_id(run_id.clone())
            .thread(thread.id.as_str(), thread.resource_id.as_str())
            .mode(mode_id.as_str())
            .model(model)
            .abort(abort)
            .channel(Arc::new(SessionChannel::new(Arc::clone(self))))
            // Queued, so that the run never waits for the store or a listener.
            .observer(Arc::new(move |event| {
                let _ = events.send(Recorded::Kernel(event));
            }))
            .tasks(Arc::new(OpenTaskList(self.session.tasks())))
            .session(Arc::clone(self) as Arc<dyn SessionSource>);
        let result = kernels.main.run(input).await;
        // The sender stays in the slot until everything is stored, so that a plugin's
        // `flush_messages` in the meantime still waits for the run's last messages.
        let sender = lock(&self.recorder).clone();
        if let Some(sender) = sender {
            let _ = sender.send(Recorded::End);
        }
        let _ = recording.await;
        lock(&self.recorder).take();
        if let Err(error) = self
            .update_metadata(|meta| {
                meta.insert(
                    metadata::TASKS.into(),
                    serde_json::to_value(self.session.tasks.tasks()).unwrap_or(Value::Null),
                );
            })
            .await
        {
            self.emit(storage_error(&error));
        }

        let reason = match result.outcome {
            RunOutcome::Complete | RunOutcome::MaxSteps => AgentEndReason::Complete,
            RunOutcome::Aborted => AgentEndReason::Aborted,
            RunOutcome::Error => AgentEndReason::Error,
            RunOutcome::Suspended => AgentEndReason::Suspended,
        };
        let error = result.error.as_ref().map(ToString::to_string);
        self.emit(HarnessEvent::AgentEnd {
            run_id: run_id.clone(),
            reason,
            error: error.clone(),
        });
        self.session.set_run(None);
        RunSummary {
            run_id,
            outcome: result.outcome,
            final_text: result.final_text,
            error,
            usage: result.usage,
        }
    }

    /// A run that cannot start: an error event and a failed summary.
    fn refuse(&self, error: impl Into<HarnessError>) -> RunSummary {
        let error = error.into();
        self.emit(HarnessEvent::Error {
            error: error.to_string(),
            error_type: Some(ErrorCode::RunRefused.into()),
            retryable: Some(false),
            retry_delay_ms: None,
        });
        RunSummary::failed(error)
    }

    /// Publishes an event behind what the active run's recorder has queued, so that user
    /// interfaces see it after the text and tool starts that happened before it (a tool's
    /// output after its start, an approval after the text that led to it); at once without a
    /// run.
    pub(crate) fn emit_in_order(&self, event: HarnessEvent) {
        let Some(sender) = lock(&self.recorder).clone() else {
            self.emit(event);
            return;
        };
        // The recorder stopped (on a storage error): publish at once rather than lose it.
        if let Err(mpsc::error::SendError(Recorded::Event(event))) =
            sender.send(Recorded::Event(event))
        {
            self.emit(event);
        }
    }

    /// Waits until everything the active run produced so far is stored (no-op without a run).
    pub(crate) async fn flush_recorder(&self) {
        let sender = lock(&self.recorder).clone();
        if let Some(sender) = sender {
            let (done, flushed) = oneshot::channel();
            if sender.send(Recorded::Flush(done)).is_ok() {
                let _ = flushed.await;
            }
        }
    }
}

struct OpenTaskList(Arc<TaskBoard>);

impl OpenTasks for OpenTaskList {
    fn open_tasks(&self) -> Vec<String> {
        self.0.incomplete().into_iter().map(|t| t.content).collect()
    }
}

/// The active run and the messages queued behind it.
#[derive(Default)]
pub(crate) struct RunSlot {
    pub(crate) active: Option<ActiveRun>,
    pub(crate) queue: VecDeque<Queued>,
}

impl RunSlot {
    /// The event announcing the queue as it is now.
    pub(crate) fn queue_event(&self) -> HarnessEvent {
        HarnessEvent::FollowUpQueued {
            count: self.queue.len(),
            follow_ups: self
                .queue
                .iter()
                .map(|queued| queued.content.clone())
                .collect(),
        }
    }
}

pub(crate) struct ActiveRun {
    pub(crate) abort: CancellationToken,
}

/// A message waiting for the active run to end.
pub(crate) struct Queued {
    pub(crate) content: String,
    pub(crate) reply: Option<oneshot::Sender<RunSummary>>,
}

/// What the recorder handles, in order: the run's kernel events, and what the harness slots
/// in among them.
pub(crate) enum Recorded {
    Kernel(KernelEvent),
    Flush(oneshot::Sender<()>),
    /// A harness event (an approval, a question, tool progress, the task list) published in
    /// its place among the run's events.
    Event(HarnessEvent),
    /// The run ended: the recorder takes nothing new and ends once what is queued is done.
    End,
}

/// Stores a run's messages in order and publishes its events. A message is announced
/// (`message_end`) only once it is stored, so an acknowledged message survives a crash.
struct Recorder {
    harness: Arc<HarnessInner>,
    thread_id: String,
    run_id: String,
    mode_id: String,
    model_id: String,
    usage_before: Usage,
    abort: CancellationToken,
    streaming: Option<HarnessMessage>,
}

impl Recorder {
    async fn record(mut self, mut queue: mpsc::UnboundedReceiver<Recorded>) {
        while let Some(item) = queue.recv().await {
            match item {
                Recorded::Kernel(event) => self.kernel_event(event).await,
                Recorded::Flush(done) => {
                    let _ = done.send(());
                }
                Recorded::Event(event) => self.harness.emit(event),
                // Later sends fail, and their senders fall back (see `emit_in_order`).
                Recorded::End => queue.close(),
            }
        }
    }

    async fn kernel_event(&mut self, event: KernelEvent) {
        match event {
            KernelEvent::MessageAdded { message } => self.store(message).await,
            KernelEvent::TextDelta { text } => self.stream(text, false),
            KernelEvent::ThinkingDelta { text } => self.stream(text, true),
            KernelEvent::ToolInputStarted { call_id, tool_name } => {
                self.harness.emit(HarnessEvent::ToolInputStart {
                    tool_call_id: call_id,
                    tool_name,
                })
            }
            KernelEvent::ToolInputDelta { call_id, delta } => {
                self.harness.emit(HarnessEvent::ToolInputDelta {
                    tool_call_id: call_id,
                    args_text_delta: delta,
                })
            }
            KernelEvent::ToolInputEnded { call_id } => {
                self.harness.emit(HarnessEvent::ToolInputEnd {
                    tool_call_id: call_id,
                })
            }
            KernelEvent::ToolStarted { call } => {
                let category = self.harness.category(&call.name);
                self.harness.emit(HarnessEvent::ToolStart {
                    tool_call_id: call.id,
                    tool_name: call.name,
                    args: call.arguments,
                    category,
                });
            }
            KernelEvent::ToolFinished(finished) => self.tool_end(finished).await,
            KernelEvent::Usage { usage } => self.usage(usage).await,
            KernelEvent::ModelRetry {
                attempt,
                error,
                wait,
            } => self.harness.emit(HarnessEvent::Info {
                message: format!(
                    "model call attempt {attempt} failed ({error}); retrying in {} ms",
                    wait.as_millis()
                ),
            }),
            _ => {}
        }
    }

    fn stream(&mut self, delta: String, thinking: bool) {
        let message = self.streaming.get_or_insert_with(|| HarnessMessage {
            id: self.harness.new_id(),
            role: MessageRole::Assistant,
            content: Vec::new(),
            created_at: unix_ms(),
            stop_reason: None,
            error_message: None,
        });
        let started = message.content.is_empty();
        match (message.content.last_mut(), thinking) {
            (Some(MessagePart::Thinking { text }), true)
            | (Some(MessagePart::Text { text }), false) => text.push_str(&delta),
            (_, true) => message.content.push(MessagePart::Thinking { text: delta }),
            (_, false) => message.content.push(MessagePart::Text { text: delta }),
        }
        let message = Arc::new(message.clone());
        if started {
            self.harness.emit(HarnessEvent::MessageStart { message });
        } else {
            self.harness.emit(HarnessEvent::MessageUpdate { message });
        }
    }

    async fn store(&mut self, message: KernelMessage) {
        let streamed = matches!(message, KernelMessage::Assistant { .. })
            .then(|| self.streaming.take())
            .flatten();
        let id = streamed
            .as_ref()
            .map(|m| m.id.clone())
            .unwrap_or_else(|| self.harness.new_id());
        let created_at = streamed
            .as_ref()
            .map(|m| m.created_at)
            .unwrap_or_else(unix_ms);
        let stored = StoredMessage {
            id,
            thread_id: self.thread_id.clone(),
            created_at,
            run_id: Some(self.run_id.clone()),
            message,
        };
        let write = WriteOp::AppendMessages {
            thread_id: self.thread_id.clone(),
            messages: vec![stored.clone()],
        };
        if let Err(error) = self.harness.store.write(vec![write]).await {
            // Going on would lose the conversation: stop the run instead.
            self.harness.emit(storage_error(&error));
            self.abort.cancel();
            return;
        }
        let Some(message) = harness_message(&stored).map(Arc::new) else {
            return;
        };
        if streamed.is_none() {
            self.harness.emit(HarnessEvent::MessageStart {
                message: message.clone(),
            });
        }
        self.harness.emit(HarnessEvent::MessageEnd { message });
    }

    async fn tool_end(&self, finished: FinishedCall) {
        let FinishedCall {
            call_id,
            tool_name,
            content,
            output,
            is_error,
            healed,
            duration_ms,
        } = finished;
        let ctx = ToolResultCtx {
            base: BaseCtx {
                run_id: Arc::from(self.run_id.as_str()),
                thread_id: Some(Arc::from(self.thread_id.as_str())),
                resource_id: Some(Arc::from(self.harness.session.resource_id())),
                mode_id: Some(Arc::from(self.mode_id.as_str())),
                model_id: Arc::from(self.model_id.as_str()),
                phase: harness_tags::Phase::Act,
                ..BaseCtx::default()
            },
            tool_name: tool_name.clone(),
            call_id: call_id.clone(),
            healed,
            duration_ms,
        };
        let shown = DisplayToolResult {
            tool_call_id: call_id.clone(),
            tool_name,
            content,
            tool_output: output,
            is_error,
        };
        // A display handler that fails closed must not leak the raw result to the UI.
        let shown = match self
            .harness
            .pipeline
            .emit::<DisplayToolResultTag>(shown, &ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().map(|s| s.content),
            Err(_) => None,
        }
        .unwrap_or_else(|| "[hidden: the display handler failed]".to_owned());
        self.harness.emit(HarnessEvent::ToolEnd {
            tool_call_id: call_id,
            result: shown,
            is_error,
        });
    }

    async fn usage(&self, run_usage: Usage) {
        let mut total = self.usage_before;
        total += &run_usage;
        *lock(&self.harness.session.usage) = total;
        let saved = serde_json::to_value(total).unwrap_or(Value::Null);
        // Announced once stored, like messages, so that what a UI saw survives a crash.
        if let Err(error) = self
            .harness
            .update_metadata(|meta| {
                meta.insert(metadata::TOKEN_USAGE.into(), saved);
            })
            .await
        {
            self.harness.emit(storage_error(&error));
        }
        self.harness
            .emit(HarnessEvent::UsageUpdate { usage: total });
    }
}

/// How a stored message looks to user interfaces (tool results are shown through tool events).
fn harness_message(stored: &StoredMessage) -> Option<HarnessMessage> {
    let (role, content, stop_reason) = match &stored.message {
        KernelMessage::User { content } => (
            MessageRole::User,
            vec![MessagePart::Text {
                text: content.clone(),
            }],
            None,
        ),
        KernelMessage::System { content } => (
            MessageRole::System,
            vec![MessagePart::SystemReminder {
                text: content.clone(),
            }],
            None,
        ),
        KernelMessage::Assistant {
            content,
            tool_calls,
            thinking,
        } => {
            let mut parts = Vec::new();
            if let Some(thinking) = thinking.as_ref().filter(|t| !t.text.is_empty()) {
                parts.push(MessagePart::Thinking {
                    text: thinking.text.clone(),
                });
            }
            if !content.is_empty() {
                parts.push(MessagePart::Text {
                    text: content.clone(),
                });
            }
            for call in tool_calls {
                parts.push(MessagePart::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    args: call.arguments.clone(),
                });
            }
            let stop = if tool_calls.is_empty() {
                StopReason::Complete
            } else {
                StopReason::ToolUse
            };
            (MessageRole::Assistant, parts, Some(stop))
        }
        KernelMessage::ToolResult { .. } => return None,
    };
    Some(HarnessMessage {
        id: stored.id.clone(),
        role,
        content,
        created_at: stored.created_at,
        stop_reason,
        error_message: None,
    })
}
