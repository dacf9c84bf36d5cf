//! The recorder: turns a run's kernel events into stored messages and harness events.
//!
//! The run queues its kernel events (and the harness slots approvals, questions and tool
//! output in among them), so that it never waits for the store or a listener. The queue, and
//! the recorder's buffers, belong to the harness and serve each of its runs in turn: a run
//! allocates none of its own. The recorder runs alongside the kernel in the run's task, and
//! takes what is queued in batches:
//!
//! - the messages a batch adds, with the thread's token usage, are committed in ONE write (a
//!   run that streams nothing queues its whole conversation before the recorder first runs:
//!   one transaction per run); a message is announced (`message_end`) and the usage
//!   (`usage_update`) only once that write returned, so that anything a user interface saw
//!   survives a crash;
//! - events that come before the batch's first message are published before the write, the
//!   rest after it, in the order the run produced them;
//! - a streamed message is announced with `message_start` (empty), then one `message_delta`
//!   per delta (the text and where it goes), then `message_end` with the whole message once
//!   stored: streaming costs what each delta adds;
//! - a tool's output goes through `tool.output-delta` before it is published; once the tool
//!   finished, each stream it wrote to gets an `end` chunk, so that a handler holding text
//!   back releases it before `tool_end`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use harness_tags::tags::{DisplayToolResultTag, ToolOutputDelta};
use harness_tags::{
    BaseCtx, DisplayToolResult, EmitOutcome, KernelMessage, OutputDelta, OutputStream, Phase,
    ToolCallCtx, ToolResultCtx, Usage,
};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::{HarnessInner, storage_error};
use crate::event::{HarnessEvent, HarnessMessage, MessagePart, MessageRole, PartKind, StopReason};
use crate::kernel::{FinishedCall, KernelEvent};
use crate::store::{StoredMessage, WriteOp, metadata};
use crate::tool::{ShellStream, ToolProgress};
use harness_tags::util::{lock, unix_ms};

/// What the recorder handles, in order: the run's kernel events, and what the harness slots
/// in among them.
pub(crate) enum Recorded {
    Kernel(KernelEvent),
    Flush(oneshot::Sender<()>),
    /// A harness event (an approval, a question, the task list) published in its place among
    /// the run's events (boxed: it is rare, and the largest event would size every item).
    Event(Box<HarnessEvent>),
    /// Output a running tool reported, published through `tool.output-delta`.
    Output {
        call_id: String,
        progress: ToolProgress,
    },
}

/// The harness's queue from its active run to the run's recorder.
#[derive(Default)]
pub(crate) struct RunQueue {
    state: Mutex<QueueState>,
    ready: Notify,
}

#[derive(Default)]
struct QueueState {
    phase: QueuePhase,
    items: VecDeque<Recorded>,
    /// The recorder's buffers between runs.
    spare: Buffers,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum QueuePhase {
    /// No run: nothing is queued.
    #[default]
    Idle,
    /// A run records.
    Recording,
    /// The run's kernel ended: the recorder finishes what is queued (which may still grow:
    /// a plugin's flush, a late event), then the queue is idle.
    Ending,
}

/// What a recorder works in.
#[derive(Default)]
struct Buffers {
    batch: VecDeque<Recorded>,
    steps: Vec<Step>,
}

impl RunQueue {
    /// Opens the queue for a run.
    pub(crate) fn start(&self) {
        let mut state = lock(&self.state);
        state.phase = QueuePhase::Recording;
        // Whatever a crashed run left is not this run's.
        state.items.clear();
    }

    /// Queues an item for the active run's recorder; gives it back when no run records.
    #[expect(
        clippy::result_large_err,
        reason = "the error is the caller's own item handed back, moved as it came in"
    )]
    pub(crate) fn send(&self, item: Recorded) -> Result<(), Recorded> {
        let mut state = lock(&self.state);
        if state.phase == QueuePhase::Idle {
            return Err(item);
        }
        state.items.push_back(item);
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// The run crashed (its recorder with it): drops what is queued (a flush waiting on it
    /// returns) and takes nothing more.
    pub(crate) fn reset(&self) {
        let mut state = lock(&self.state);
        state.phase = QueuePhase::Idle;
        state.items.clear();
    }

    /// The run's kernel ended: the recorder ends once the queue is empty.
    pub(crate) fn end(&self) {
        let mut state = lock(&self.state);
        if state.phase == QueuePhase::Recording {
            state.phase = QueuePhase::Ending;
        }
        drop(state);
        self.ready.notify_one();
    }

    /// Waits for what is queued and swaps it into `batch` (which must be empty); false once the
    /// run ended and everything was taken (the queue is then idle).
    async fn next(&self, batch: &mut VecDeque<Recorded>) -> bool {
        loop {
            {
                let mut state = lock(&self.state);
                if !state.items.is_empty() {
                    std::mem::swap(&mut state.items, batch);
                    return true;
                }
                if state.phase != QueuePhase::Recording {
                    state.phase = QueuePhase::Idle;
                    return false;
                }
            }
            // A notification between the look and the wait is kept as a permit.
            self.ready.notified().await;
        }
    }
}

/// What a run's recording came to.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    /// Messages stored.
    pub(crate) stored: u64,
    /// Why a write of messages failed, if one did (the stored thread then differs from the
    /// run's conversation).
    pub(crate) failed: Option<String>,
}

/// The run a recorder records.
pub(crate) struct RunScope {
    pub(crate) thread_id: String,
    pub(crate) run_id: String,
    pub(crate) mode_id: String,
    pub(crate) model_id: String,
    pub(crate) usage_before: Usage,
    pub(crate) abort: CancellationToken,
}

/// The assistant message being streamed.
struct Streaming {
    id: Arc<str>,
    created_at: i64,
    /// The kinds of its parts so far.
    parts: Vec<PartKind>,
}

/// One thing to publish, in order, once the batch's write is done where it must be.
enum Step {
    Emit(HarnessEvent),
    /// An event about a message of the batch's write: published only if the write succeeded.
    Stored(HarnessEvent),
    Usage(Usage),
    Output {
        call_id: String,
        progress: ToolProgress,
    },
    ToolEnd(FinishedCall),
    Flush(oneshot::Sender<()>),
}

/// Stores a run's messages in order and publishes its events (see the module docs).
pub(crate) struct Recorder {
    harness: Arc<HarnessInner>,
    run: RunScope,
    streaming: Option<Streaming>,
    /// Messages of the batch, to write.
    pending: Vec<StoredMessage>,
    /// The thread's usage to write with them.
    pending_usage: Option<Usage>,
    /// Where in the batch's steps the first one waiting for the write is.
    first_write: Option<usize>,
    /// Whether `tool.output-delta` has handlers (else nothing needs ending or naming).
    reshapes_output: bool,
    /// Tool names by call id, for the context of `tool.output-delta`.
    tools: HashMap<String, String>,
    /// The output streams each running call wrote to, to end once it finished.
    open_output: Vec<(String, OutputStream)>,
    recording: Recording,
}

impl Recorder {
    pub(crate) fn new(harness: Arc<HarnessInner>, run: RunScope) -> Self {
        let reshapes_output = harness.pipeline.has_handlers::<ToolOutputDelta>();
        Recorder {
            harness,
            run,
            streaming: None,
            pending: Vec::new(),
            pending_usage: None,
            first_write: None,
            reshapes_output,
            tools: HashMap::new(),
            open_output: Vec::new(),
            recording: Recording::default(),
        }
    }

    /// Records the run's queue until the run ended and everything queued is handled.
    pub(crate) async fn record(mut self, queue: &RunQueue) -> Recording {
        let mut buffers = std::mem::take(&mut lock(&queue.state).spare);
        while queue.next(&mut buffers.batch).await {
            self.handle(&mut buffers).await;
        }
        lock(&queue.state).spare = buffers;
        self.recording
    }

    async fn handle(&mut self, buffers: &mut Buffers) {
        let messages = buffers
            .batch
            .iter()
            .filter(|item| matches!(item, Recorded::Kernel(KernelEvent::MessageAdded { .. })))
            .count();
        self.pending.reserve_exact(messages);
        for item in buffers.batch.drain(..) {
            self.plan(item, &mut buffers.steps);
        }
        // What came before the batch's first message is published before the write.
        let mut write_at = self.first_write.take();
        let mut stored = true;
        let mut steps = std::mem::take(&mut buffers.steps);
        for (at, step) in steps.drain(..).enumerate() {
            if write_at == Some(at) {
                write_at = None;
                stored = self.commit().await;
            }
            self.publish(step, stored).await;
        }
        buffers.steps = steps;
        if write_at.is_some() {
            // The batch ends with a message that shows nothing (a tool result).
            self.commit().await;
        }
    }

    /// Takes note of one item: what it stores, and what to publish.
    fn plan(&mut self, item: Recorded, steps: &mut Vec<Step>) {
        let event = match item {
            Recorded::Kernel(event) => event,
            Recorded::Flush(done) => return steps.push(Step::Flush(done)),
            Recorded::Event(event) => return steps.push(Step::Emit(*event)),
            Recorded::Output { call_id, progress } => {
                return steps.push(Step::Output { call_id, progress });
            }
        };
        let emit = match event {
            KernelEvent::MessageAdded { message } => return self.plan_message(message, steps),
            KernelEvent::TextDelta { message_id, text } => {
                return self.plan_delta(message_id, PartKind::Text, text, steps);
            }
            KernelEvent::ThinkingDelta { message_id, text } => {
                return self.plan_delta(message_id, PartKind::Thinking, text, steps);
            }
            KernelEvent::Usage { usage } => {
                let mut total = self.run.usage_before;
                total += &usage;
                *harness_tags::util::lock(&self.harness.session.usage) = total;
                self.pending_usage = Some(total);
                self.first_write.get_or_insert(steps.len());
                return steps.push(Step::Usage(total));
            }
            KernelEvent::ToolFinished(finished) => return steps.push(Step::ToolEnd(finished)),
            KernelEvent::ToolInputStarted { call_id, tool_name } => HarnessEvent::ToolInputStart {
                tool_call_id: call_id,
                tool_name,
            },
            KernelEvent::ToolInputDelta { call_id, delta } => HarnessEvent::ToolInputDelta {
                tool_call_id: call_id,
                args_text_delta: delta,
            },
            KernelEvent::ToolInputEnded { call_id } => HarnessEvent::ToolInputEnd {
                tool_call_id: call_id,
            },
            KernelEvent::ToolStarted { call } => {
                if self.reshapes_output {
                    self.tools.insert(call.id.clone(), call.name.clone());
                }
                let category = self.harness.category(&call.name);
                HarnessEvent::ToolStart {
                    tool_call_id: call.id,
                    tool_name: call.name,
                    args: call.arguments,
                    category,
                }
            }
            KernelEvent::ModelRetry {
                attempt,
                error,
                wait,
            } => HarnessEvent::Info {
                message: format!(
                    "model call attempt {attempt} failed ({error}); retrying in {} ms",
                    wait.as_millis()
                ),
            },
            _ => return,
        };
        steps.push(Step::Emit(emit));
    }

    fn plan_delta(
        &mut self,
        message_id: Arc<str>,
        kind: PartKind,
        delta: String,
        steps: &mut Vec<Step>,
    ) {
        let streaming = match &mut self.streaming {
            Some(streaming) if streaming.id == message_id => streaming,
            other => {
                let streaming = other.insert(Streaming {
                    id: message_id,
                    created_at: unix_ms(),
                    parts: Vec::new(),
                });
                steps.push(Step::Emit(HarnessEvent::MessageStart {
                    message: Arc::new(HarnessMessage {
                        id: streaming.id.to_string(),
                        role: MessageRole::Assistant,
                        content: Vec::new(),
                        created_at: streaming.created_at,
                        stop_reason: None,
                        error_message: None,
                    }),
                }));
                streaming
            }
        };
        if streaming.parts.last() != Some(&kind) {
            streaming.parts.push(kind);
        }
        steps.push(Step::Emit(HarnessEvent::MessageDelta {
            message_id: Arc::clone(&streaming.id),
            part: streaming.parts.len() - 1,
            kind,
            delta,
        }));
    }

    fn plan_message(&mut self, message: KernelMessage, steps: &mut Vec<Step>) {
        let streamed = matches!(message, KernelMessage::Assistant { .. })
            .then(|| self.streaming.take())
            .flatten();
        let (id, created_at) = match &streamed {
            Some(streamed) => (streamed.id.to_string(), streamed.created_at),
            None => (self.harness.new_id(), unix_ms()),
        };
        let stored = StoredMessage {
            id,
            thread_id: self.run.thread_id.clone(),
            created_at,
            run_id: Some(self.run.run_id.clone()),
            message,
        };
        self.first_write.get_or_insert(steps.len());
        if let Some(shown) = harness_message(&stored).map(Arc::new) {
            if streamed.is_none() {
                steps.push(Step::Stored(HarnessEvent::MessageStart {
                    message: Arc::clone(&shown),
                }));
            }
            steps.push(Step::Stored(HarnessEvent::MessageEnd { message: shown }));
        }
        self.pending.push(stored);
    }

    /// Writes the batch's messages and usage at once; true if the messages are stored.
    async fn commit(&mut self) -> bool {
        let messages = std::mem::take(&mut self.pending);
        let count = messages.len() as u64;
        let mut ops = Vec::with_capacity(1);
        if !messages.is_empty() {
            ops.push(WriteOp::AppendMessages {
                thread_id: self.run.thread_id.clone(),
                messages,
            });
        }
        let written = match self.pending_usage.take() {
            Some(total) => {
                let saved = serde_json::to_value(total).unwrap_or(Value::Null);
                self.harness
                    .write_with_record(&self.run.thread_id, ops, |record| {
                        record
                            .metadata
                            .insert(metadata::TOKEN_USAGE.into(), saved.clone());
                    })
                    .await
            }
            None => self.harness.store.write(ops).await.map_err(Into::into),
        };
        match written {
            Ok(()) => {
                self.recording.stored += count;
                true
            }
            Err(error) => {
                let event = storage_error(&error);
                if count > 0 {
                    // Going on would lose the conversation: stop the run instead.
                    if let HarnessEvent::Error { error, .. } = &event {
                        self.recording.failed.get_or_insert_with(|| error.clone());
                    }
                    self.run.abort.cancel();
                }
                self.harness.emit(event);
                false
            }
        }
    }

    async fn publish(&mut self, step: Step, stored: bool) {
        match step {
            Step::Emit(event) => self.harness.emit(event),
            Step::Stored(event) => {
                if stored {
                    self.harness.emit(event);
                }
            }
            Step::Usage(usage) => self.harness.emit(HarnessEvent::UsageUpdate { usage }),
            Step::Output { call_id, progress } => self.output(call_id, progress).await,
            Step::ToolEnd(finished) => self.tool_end(finished).await,
            Step::Flush(done) => {
                let _ = done.send(());
            }
        }
    }

    fn base(&self, phase: Phase) -> BaseCtx {
        BaseCtx {
            run_id: Arc::from(self.run.run_id.as_str()),
            thread_id: Some(Arc::from(self.run.thread_id.as_str())),
            resource_id: Some(Arc::from(self.harness.session.resource_id())),
            mode_id: Some(Arc::from(self.run.mode_id.as_str())),
            model_id: Arc::from(self.run.model_id.as_str()),
            phase,
            ..BaseCtx::default()
        }
    }

    /// Publishes a tool's output, through `tool.output-delta` when it has handlers.
    async fn output(&mut self, call_id: String, progress: ToolProgress) {
        let delta = output_delta(progress);
        if self.reshapes_output
            && let OutputDelta::Shell { stream, .. } = &delta
            && !self
                .open_output
                .iter()
                .any(|(id, open)| *id == call_id && open == stream)
        {
            self.open_output.push((call_id.clone(), *stream));
        }
        let tool_name = self.tools.get(&call_id).cloned().unwrap_or_default();
        publish_output(
            &self.harness,
            || self.base(Phase::Act),
            tool_name,
            call_id,
            delta,
        )
        .await;
    }

    async fn tool_end(&mut self, finished: FinishedCall) {
        let FinishedCall {
            call_id,
            tool_name,
            content,
            output,
            is_error,
            healed,
            duration_ms,
        } = finished;
        // What handlers held back of the tool's output comes before its end.
        let mut ended = Vec::new();
        self.open_output.retain(|(id, stream)| {
            let running = *id != call_id;
            if !running {
                ended.push(*stream);
            }
            running
        });
        self.tools.remove(&call_id);
        for stream in ended {
            let end = OutputDelta::Shell {
                stream,
                text: String::new(),
                end: true,
            };
            let base = || self.base(Phase::Act);
            publish_output(&self.harness, base, tool_name.clone(), call_id.clone(), end).await;
        }
        let ctx = ToolResultCtx {
            base: self.base(Phase::Act),
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
}

/// A tool's report as the payload of `tool.output-delta`.
fn output_delta(progress: ToolProgress) -> OutputDelta {
    match progress {
        ToolProgress::Partial(partial) => OutputDelta::Progress { partial },
        ToolProgress::Shell { output, stream } => OutputDelta::Shell {
            stream: match stream {
                ShellStream::Stdout => OutputStream::Stdout,
                ShellStream::Stderr => OutputStream::Stderr,
            },
            text: output,
            end: false,
        },
    }
}

/// Publishes a chunk of a tool's output as `tool.output-delta` handlers leave it (when it has
/// any): nothing if they suppress or empty it, or fail (a fail-closed redactor's chunk never
/// passes).
async fn publish_output(
    harness: &HarnessInner,
    base: impl FnOnce() -> BaseCtx,
    tool_name: String,
    call_id: String,
    delta: OutputDelta,
) {
    if !harness.pipeline.has_handlers::<ToolOutputDelta>() {
        return harness.emit(output_event(call_id, delta));
    }
    let ctx = ToolCallCtx {
        category: harness.category(&tool_name),
        base: base(),
        tool_name,
        call_id: call_id.clone(),
        session: harness.session.view(),
    };
    match harness.pipeline.emit::<ToolOutputDelta>(delta, &ctx).await {
        Ok(EmitOutcome::Continue(OutputDelta::Shell { text, .. })) if text.is_empty() => {}
        Ok(EmitOutcome::Continue(delta)) => harness.emit(output_event(call_id, delta)),
        Ok(EmitOutcome::Suppressed { .. }) | Err(_) => {}
    }
}

/// The event that shows a chunk of a tool's output.
fn output_event(call_id: String, delta: OutputDelta) -> HarnessEvent {
    match delta {
        OutputDelta::Shell { stream, text, .. } => HarnessEvent::ShellOutput {
            tool_call_id: call_id,
            output: text,
            stream,
        },
        OutputDelta::Progress { partial } => HarnessEvent::ToolUpdate {
            tool_call_id: call_id,
            partial_result: partial,
        },
    }
}

impl HarnessInner {
    /// Publishes output a running tool reported: in order with the active run's events, or,
    /// with no run to record it (a tool's task that outlived its run), on a task of its own;
    /// through `tool.output-delta` either way.
    pub(crate) fn report_output(self: &Arc<Self>, call_id: &str, progress: ToolProgress) {
        let item = Recorded::Output {
            call_id: call_id.to_owned(),
            progress,
        };
        let Err(Recorded::Output { call_id, progress }) = self.queue.send(item) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let harness = Arc::clone(self);
        runtime.spawn(async move {
            let base = || BaseCtx {
                thread_id: harness.session.thread_id().map(Arc::from),
                resource_id: Some(Arc::from(harness.session.resource_id())),
                phase: Phase::Act,
                ..BaseCtx::default()
            };
            let delta = output_delta(progress);
            publish_output(&harness, base, String::new(), call_id, delta).await;
        });
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
