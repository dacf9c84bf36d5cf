//! Flow control (send, follow up, steer, abort) and the run driver (the recorder that turns a
//! run's kernel events into stored messages and harness events is in `record.rs`).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use futures_util::FutureExt;
use harness_tags::{KernelMessage, RunOutcome, Usage};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::channel::SessionChannel;
use super::conversation::Conversation;
use super::record::{Recorded, Recorder, RunScope};
use super::{Harness, HarnessError, HarnessInner, storage_error};
use crate::event::{AgentEndReason, HarnessEvent};
use crate::kernel::{OpenTasks, RunInput, SessionSource};
use crate::protocol::ErrorCode;
use crate::store::{ThreadVersion, metadata};
use crate::task::TaskBoard;
use harness_tags::util::lock;
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

    /// Replaces the session's task list as the `task_write` tool does (ids kept, or assigned
    /// by [`assign_task_ids`](crate::task::assign_task_ids)) and stores it in the bound thread
    /// at once; `task_updated` follows. For a user or a front end editing the plan, also
    /// while a run works on it.
    pub async fn write_tasks(
        &self,
        tasks: &[crate::task::TaskInput],
    ) -> Result<Vec<crate::task::TaskItem>, HarnessError> {
        let written = self.inner.session.tasks.write(tasks)?;
        self.inner.store_tasks().await?;
        Ok(written)
    }

    /// Changes one task as the `task_update` tool does, and stores the list at once.
    pub async fn update_task(
        &self,
        id: &str,
        content: Option<String>,
        status: Option<crate::task::TaskStatus>,
    ) -> Result<Vec<crate::task::TaskItem>, HarnessError> {
        let updated = self.inner.session.tasks.update(id, content, status, None)?;
        self.inner.store_tasks().await?;
        Ok(updated)
    }

    /// Calls the tool `name` of the active mode with `arguments`, outside any run, as the
    /// model's calls are called ([`Kernel::invoke`](crate::kernel::Kernel::invoke)): `tool.call`
    /// handlers, the arguments checked against the tool's schema, the permission gate, the
    /// tool, the result handlers. Nobody is asked: a call the gate would ask the user about is
    /// refused. The thread bound now, if any, is the calls' context (a permission granted for
    /// it applies); no thread is created and nothing is stored. A refusal is a
    /// [`ToolInvocation`](crate::kernel::ToolInvocation) with `refused` set; an error only when
    /// the mode or its model cannot be used.
    pub async fn invoke_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<crate::kernel::ToolInvocation, HarnessError> {
        let inner = &self.inner;
        let mode_id = inner.session.mode_id();
        let kernels = inner
            .kernels
            .get(&mode_id)
            .ok_or_else(|| inner.unknown_mode(&mode_id))?;
        let model_id = inner.session.model_id().ok_or_else(|| {
            HarnessError::Model(crate::model::ModelError::UnknownModel(
                "no model is selected for this mode; set a default model or call `switch_model`"
                    .into(),
            ))
        })?;
        let model = inner.resolve_model(&model_id)?;
        let mut input = RunInput::new(String::new())
            .mode(mode_id.as_str())
            .model(model)
            .session(Arc::clone(inner) as Arc<dyn SessionSource>);
        if let Some(thread_id) = inner.session.thread_id() {
            input = input.thread(thread_id.as_str(), inner.session.resource_id());
        }
        let call = harness_tags::ToolCall {
            id: format!("invoke_{}", inner.new_id()),
            name: name.to_owned(),
            arguments,
        };
        kernels
            .main
            .invoke(input, call)
            .await
            // Only without a model, and this input has one.
            .map_err(|error| HarnessError::InvalidState(error.to_string()))
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
        let (reply, done) = oneshot::channel();
        runs.starting = Some((
            Queued {
                content,
                reply: Some(reply),
            },
            abort,
        ));
        drop(runs);
        self.runner.wake(self);
        Ok(Started::Running(done))
    }

    /// Runs a message, then whatever was queued behind it, one at a time.
    async fn drive(self: Arc<Self>, first: Queued, abort: CancellationToken) {
        let mut next = Some((first, abort));
        while let Some((queued, abort)) = next.take() {
            let run = AssertUnwindSafe(self.run_once(queued.content, abort)).catch_unwind();
            let summary = run.await.unwrap_or_else(|panic| {
                self.queue.reset();
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
        let (thread_id, resource_id) = match self.ensure_thread().await {
            Ok(ids) => ids,
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
        let conversation = match self.take_conversation(&thread_id).await {
            Ok(conversation) => conversation,
            Err(error) => return self.refuse(error),
        };
        let run_id = self.new_id();
        self.session.set_run(Some(&run_id));
        self.emit(HarnessEvent::AgentStart {
            run_id: run_id.clone(),
        });

        let recorder = Recorder::new(
            Arc::clone(self),
            RunScope {
                thread_id: thread_id.clone(),
                run_id: run_id.clone(),
                mode_id: mode_id.clone(),
                model_id: model_id.to_string(),
                usage_before: self.session.token_usage(),
                abort: abort.clone(),
            },
        );
        self.queue.start();
        let before = conversation.messages.len();
        let observer = Arc::clone(self);
        let input = RunInput::message(KernelMessage::user(content))
            // The run holds the only reference: the kernel appends in place.
            .history(conversation.messages)
            .run_id(run_id.clone())
            .thread(thread_id.as_str(), resource_id)
            .mode(mode_id.as_str())
            .model(model)
            .abort(abort)
            .channel(Arc::new(SessionChannel::new(Arc::clone(self))))
            // Queued, so that the run never waits for the store or a listener.
            .observer(Arc::new(move |event| {
                let _ = observer.queue.send(Recorded::Kernel(event));
            }))
            .tasks(Arc::new(OpenTaskList(self.session.tasks())))
            .session(Arc::clone(self) as Arc<dyn SessionSource>);
        // The recorder takes the run's events as they come, in this task, and ends once the
        // run ended and everything it queued is stored; until then a plugin's
        // `flush_messages` still waits for the run's last messages.
        let (result, recording) = tokio::join!(
            async {
                let result = kernels.main.run(input).await;
                self.queue.end();
                result
            },
            recorder.record(&self.queue),
        );
        // The conversation the run ended with is the stored one if every message it added
        // was stored: the next run starts from it.
        let added = result.state.messages.len().saturating_sub(before) as u64;
        if recording.failed.is_none() && recording.stored == added {
            self.keep_conversation(Conversation {
                thread_id,
                version: ThreadVersion {
                    messages: conversation.version.messages + added,
                    ..conversation.version
                },
                messages: Arc::clone(&result.state.messages),
            });
        }
        self.save_tasks().await;

        // A run whose messages could not be stored failed, whatever the model did.
        let (outcome, error) = match recording.failed {
            Some(error) => (RunOutcome::Error, Some(error)),
            None => (
                result.outcome,
                result.error.as_ref().map(ToString::to_string),
            ),
        };
        let reason = match outcome {
            RunOutcome::Complete | RunOutcome::MaxSteps => AgentEndReason::Complete,
            RunOutcome::Aborted => AgentEndReason::Aborted,
            RunOutcome::Error => AgentEndReason::Error,
            RunOutcome::Suspended => AgentEndReason::Suspended,
        };
        self.emit(HarnessEvent::AgentEnd {
            run_id: run_id.clone(),
            reason,
            error: error.clone(),
        });
        self.session.set_run(None);
        RunSummary {
            run_id,
            outcome,
            final_text: result.final_text,
            error,
            usage: result.usage,
        }
    }

    /// Saves the task list with the thread, if it changed.
    async fn save_tasks(&self) {
        if let Err(error) = self.store_tasks().await {
            self.emit(storage_error(&error));
        }
    }

    /// Stores the task list in the bound thread if it changed.
    async fn store_tasks(&self) -> Result<(), HarnessError> {
        let tasks = serde_json::to_value(self.session.tasks.tasks()).unwrap_or(Value::Null);
        let unchanged = lock(&self.session.thread).as_ref().is_some_and(|thread| {
            match thread.metadata.get(metadata::TASKS) {
                Some(saved) => *saved == tasks,
                None => tasks.as_array().is_some_and(Vec::is_empty),
            }
        });
        if unchanged {
            return Ok(());
        }
        self.update_metadata(|meta| {
            meta.insert(metadata::TASKS.into(), tasks);
        })
        .await
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
        if let Err(Recorded::Event(event)) = self.queue.send(Recorded::Event(Box::new(event))) {
            self.emit(*event);
        }
    }

    /// Waits until everything the active run produced so far is stored (no-op without a run).
    pub(crate) async fn flush_recorder(&self) {
        let (done, flushed) = oneshot::channel();
        if self.queue.send(Recorded::Flush(done)).is_ok() {
            let _ = flushed.await;
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
    /// The message that started the active run, until the runner takes it.
    pub(crate) starting: Option<(Queued, CancellationToken)>,
    pub(crate) queue: VecDeque<Queued>,
}

/// The harness's runner: one task that runs its messages, one at a time, for as long as the
/// harness lives (a task per message would allocate the whole run's state anew each time).
/// It is spawned by the first message and by a message that finds it gone (its runtime shut
/// down), and ends once the harness is dropped.
#[derive(Default)]
pub(crate) struct Runner {
    wake: Arc<Notify>,
    alive: Arc<AtomicBool>,
}

impl Runner {
    /// Gets the runner to the message in the run slot.
    fn wake(&self, harness: &Arc<HarnessInner>) {
        if self.alive.swap(true, Ordering::AcqRel) {
            self.wake.notify_one();
            return;
        }
        tokio::spawn(run_messages(
            Arc::downgrade(harness),
            Arc::clone(&self.wake),
            Alive(Arc::clone(&self.alive)),
        ));
    }

    /// The harness is gone: the runner ends.
    pub(crate) fn stop(&self) {
        self.wake.notify_one();
    }
}

/// Clears the runner's flag when its task ends (the harness is gone, or the runtime shut
/// down), so that the next message spawns another.
struct Alive(Arc<AtomicBool>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The runner's task: holds the harness only while it runs a message.
async fn run_messages(harness: Weak<HarnessInner>, wake: Arc<Notify>, _alive: Alive) {
    loop {
        let Some(inner) = harness.upgrade() else {
            return;
        };
        let starting = lock(&inner.session.runs).starting.take();
        match starting {
            Some((queued, abort)) => inner.drive(queued, abort).await,
            None => {
                drop(inner);
                // A wake-up between the look and the wait is kept as a permit.
                wake.notified().await;
            }
        }
    }
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
