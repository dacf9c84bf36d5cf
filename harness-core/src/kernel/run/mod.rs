//! One run of the agent loop: `bootstrap -> [think -> act -> observe -> verify]* -> complete`.
//!
//! [`Run`] holds the run's state and drives the steps ([`Run::drive`], [`Run::step`]); each
//! phase's methods live in a file of their own.

mod act;
mod control;
mod observe;
mod stream;
mod think;
mod verify;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use harness_tags::tags::{
    LifecycleComplete, LifecycleStart, MessageAssistant, MessageMaxTokensRecovery, MessageUserTask,
};
use harness_tags::{
    BaseCtx, EmitOutcome, FailureReason, FinishReason, KernelMessage, KernelState, Phase, RunEnd,
    RunFailure, RunOutcome, RunStart, TerminateReason, ToolCall, ToolCallCtx, ToolCategory,
};
use tokio_util::sync::CancellationToken;

use super::loops::LoopDetector;
use super::state::{Transition, apply};
use super::strategy::{RunHealth, Strategy};
use super::{
    KernelConfig, KernelError, KernelEvent, KernelInner, KernelObserver, OpenTasks, RunInput,
    RunResult, SessionSource, ToolInvocation,
};
use crate::model::Model;
use crate::tool::{HarnessChannel, ToolRegistry, ToolSourceCtx};

pub(crate) async fn run(kernel: &KernelInner, input: RunInput) -> RunResult {
    let started = Instant::now();
    let model = match input.model.clone().or_else(|| kernel.model.clone()) {
        Some(model) => model,
        None => {
            return RunResult {
                run_id: input.run_id.unwrap_or_else(new_run_id),
                outcome: RunOutcome::Error,
                state: Arc::new(KernelState {
                    messages: input.history,
                    ..KernelState::default()
                }),
                final_text: None,
                error: Some(KernelError::NoModel),
                usage: Default::default(),
                steps: 0,
                duration: started.elapsed(),
            };
        }
    };
    let mut run = Run::new(kernel, input, model);
    let end = run.drive().await;
    run.finish(end, started).await
}

pub(crate) async fn invoke(
    kernel: &KernelInner,
    input: RunInput,
    call: ToolCall,
) -> Result<ToolInvocation, KernelError> {
    let model = input
        .model
        .clone()
        .or_else(|| kernel.model.clone())
        .ok_or(KernelError::NoModel)?;
    let mut run = Run::new(kernel, input, model);
    Ok(run.invoke(call).await)
}

fn new_run_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let millis = harness_tags::util::unix_ms();
    format!(
        "run_{millis:x}_{:x}",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// How a run ended, before `lifecycle.complete`.
struct End {
    outcome: RunOutcome,
    final_text: Option<String>,
    error: Option<KernelError>,
}

impl End {
    fn complete(final_text: Option<String>) -> Self {
        End {
            outcome: RunOutcome::Complete,
            final_text,
            error: None,
        }
    }

    fn failed(error: KernelError) -> Self {
        End {
            outcome: RunOutcome::Error,
            final_text: None,
            error: Some(error),
        }
    }

    fn aborted() -> Self {
        End {
            outcome: RunOutcome::Aborted,
            final_text: None,
            error: None,
        }
    }
}

/// What a step decided.
enum StepFlow {
    Continue,
    End(End),
}

/// What the strategy evaluation led to.
enum Decision {
    Continue,
    Switched,
    Escalated,
    End(End),
}

#[derive(Default)]
struct NudgeCounts {
    required: u32,
    tasks: u32,
    verifier: u32,
    recoveries: u32,
    vetoes: u32,
}

struct Run<'k> {
    kernel: &'k KernelInner,
    config: &'k KernelConfig,
    run_id: Arc<str>,
    thread_id: Option<Arc<str>>,
    parent_thread_id: Option<Arc<str>>,
    resource_id: Option<Arc<str>>,
    mode_id: Option<Arc<str>>,
    input: Option<KernelMessage>,
    model: Arc<dyn Model>,
    model_id: Arc<str>,
    abort: CancellationToken,
    channel: Option<Arc<dyn HarnessChannel>>,
    observer: Option<Arc<dyn KernelObserver>>,
    tasks: Option<Arc<dyn OpenTasks>>,
    session: Option<Arc<dyn SessionSource>>,
    state: Arc<KernelState>,
    strategies: Vec<Strategy>,
    strategy: usize,
    tried: Vec<bool>,
    strategy_name: Arc<str>,
    tools: ToolRegistry,
    /// The kernel's tools with its sources' tools, once a source offered any.
    all_tools: Option<ToolRegistry>,
    /// The generation of `all_tools` (0: none yet).
    tools_generation: u64,
    loops: LoopDetector,
    health: RunHealth,
    iteration: u32,
    extra_steps: u32,
    nudges: NudgeCounts,
    succeeded_tools: HashSet<String>,
}

impl<'k> Run<'k> {
    fn new(kernel: &'k KernelInner, input: RunInput, model: Arc<dyn Model>) -> Self {
        let config = &kernel.config;
        let strategies = if config.strategies.is_empty() {
            vec![Strategy::new("default")]
        } else {
            config.strategies.clone()
        };
        let mut tried = vec![false; strategies.len()];
        tried[0] = true;
        let strategy_name: Arc<str> = Arc::from(strategies[0].name.as_str());
        let tools = match &strategies[0].tools {
            Some(names) => kernel.tools.subset(names.iter().map(String::as_str)),
            None => kernel.tools.clone(),
        };
        let model_id: Arc<str> = Arc::from(model.id().as_str());
        let state = Arc::new(KernelState {
            messages: input.history,
            strategy: strategy_name.to_string(),
            ..KernelState::default()
        });
        Run {
            kernel,
            config,
            run_id: Arc::from(input.run_id.unwrap_or_else(new_run_id)),
            thread_id: input.thread_id,
            parent_thread_id: input.parent_thread_id,
            resource_id: input.resource_id,
            mode_id: input.mode_id,
            input: Some(input.message),
            model,
            model_id,
            abort: input.abort,
            channel: input.channel,
            observer: input.observer,
            tasks: input.tasks,
            session: input.session,
            state,
            strategies,
            strategy: 0,
            tried,
            strategy_name,
            tools,
            all_tools: None,
            tools_generation: 0,
            loops: LoopDetector::new(config.loops),
            health: RunHealth::default(),
            iteration: 0,
            extra_steps: 0,
            nudges: NudgeCounts::default(),
            succeeded_tools: HashSet::new(),
        }
    }

    fn base(&self, phase: Phase) -> BaseCtx {
        BaseCtx {
            iteration: self.iteration,
            phase,
            state: Arc::clone(&self.state),
            strategy: Arc::clone(&self.strategy_name),
            run_id: Arc::clone(&self.run_id),
            thread_id: self.thread_id.clone(),
            parent_thread_id: self.parent_thread_id.clone(),
            resource_id: self.resource_id.clone(),
            mode_id: self.mode_id.clone(),
            model_id: Arc::clone(&self.model_id),
        }
    }

    fn call_ctx(&self, tool_name: &str, call_id: &str) -> ToolCallCtx {
        ToolCallCtx {
            base: self.base(Phase::Act),
            tool_name: tool_name.to_owned(),
            call_id: call_id.to_owned(),
            category: self.category_of(tool_name),
            session: self.session.as_ref().map(|s| s.view()).unwrap_or_default(),
        }
    }

    fn category_of(&self, tool_name: &str) -> Option<ToolCategory> {
        if let Some(resolve) = &self.config.category_resolver
            && let Some(category) = resolve(tool_name)
        {
            return Some(category);
        }
        self.tools.get(tool_name).map(|t| t.tool.category())
    }

    /// Tells the observer, if any; the event is built only then.
    fn notify(&self, event: impl FnOnce() -> KernelEvent) {
        if let Some(observer) = &self.observer {
            observer.on_event(event());
        }
    }

    fn add_message(&mut self, message: KernelMessage) {
        apply(&mut self.state, Transition::AddMessage(message));
        if let (Some(observer), Some(message)) = (&self.observer, self.state.messages.last()) {
            observer.on_event(KernelEvent::MessageAdded {
                message: message.clone(),
            });
        }
    }

    fn last_assistant_text(&self) -> Option<String> {
        self.state
            .messages
            .iter()
            .rev()
            .find_map(|message| match message {
                KernelMessage::Assistant { content, .. } => Some(content.clone()),
                _ => None,
            })
    }

    async fn drive(&mut self) -> End {
        let message = self.input.take().unwrap_or_else(|| KernelMessage::user(""));
        let input_text = message.content().to_owned();
        let ctx = self.base(Phase::Bootstrap);
        let message = match self
            .kernel
            .pipeline
            .emit::<MessageUserTask>(message, &ctx)
            .await
        {
            Ok(EmitOutcome::Continue(message)) => message,
            Ok(EmitOutcome::Suppressed { by }) => {
                return End::failed(KernelError::Rejected {
                    handler: by.to_string(),
                });
            }
            Err(error) => return End::failed(KernelError::Handler(error)),
        };
        drop(ctx);
        self.add_message(message);

        let start = RunStart {
            run_id: self.run_id.to_string(),
            input: input_text,
            model_id: self.model_id.to_string(),
            max_steps: self.config.max_steps,
        };
        let ctx = self.base(Phase::Bootstrap);
        // An observe-only tag: handler failures are reported through the sink, the run goes on.
        let _ = self
            .kernel
            .pipeline
            .emit::<LifecycleStart>(start, &ctx)
            .await;
        drop(ctx);
        self.notify(|| KernelEvent::RunStarted {
            run_id: self.run_id.to_string(),
        });

        loop {
            if self.abort.is_cancelled() {
                return End::aborted();
            }
            if self.iteration >= self.config.max_steps.saturating_add(self.extra_steps) {
                let last = self.last_assistant_text();
                if self
                    .terminate(TerminateReason::MaxSteps, last.clone())
                    .await
                {
                    return End {
                        outcome: RunOutcome::MaxSteps,
                        final_text: last,
                        error: None,
                    };
                }
                self.extra_steps += 1;
            }
            if let StepFlow::End(end) = self.step().await {
                return end;
            }
        }
    }

    async fn step(&mut self) -> StepFlow {
        self.refresh_sourced_tools().await;
        self.iteration += 1;
        apply(&mut self.state, Transition::Iteration(self.iteration));
        let response = match self.think().await {
            Ok(Some(response)) => response,
            Ok(None) => return StepFlow::Continue,
            Err(end) => return StepFlow::End(end),
        };

        if response.content.trim().is_empty()
            && response.tool_calls.is_empty()
            && response.finish_reason != FinishReason::Length
        {
            self.failure(
                FailureReason::ModelError,
                "the model returned an empty response".to_owned(),
            )
            .await;
            return match self.after_failure().await {
                Decision::End(end) => StepFlow::End(end),
                Decision::Switched | Decision::Escalated => StepFlow::Continue,
                Decision::Continue => {
                    self.add_message(KernelMessage::system(
                        "Your last response was empty. Answer the user, or call a tool.",
                    ));
                    StepFlow::Continue
                }
            };
        }

        let finish_reason = response.finish_reason;
        let assistant = KernelMessage::Assistant {
            content: response.content,
            tool_calls: response.tool_calls,
            thinking: response.thinking,
        };
        let ctx = self.base(Phase::Think);
        let assistant = match self
            .kernel
            .pipeline
            .emit::<MessageAssistant>(assistant, &ctx)
            .await
        {
            Ok(EmitOutcome::Continue(message)) => message,
            Ok(EmitOutcome::Suppressed { .. }) => return StepFlow::Continue,
            Err(error) => return StepFlow::End(End::failed(KernelError::Handler(error))),
        };
        drop(ctx);
        let (text, calls) = match &assistant {
            KernelMessage::Assistant {
                content,
                tool_calls,
                ..
            } => (content.clone(), tool_calls.clone()),
            other => (other.content().to_owned(), Vec::new()),
        };
        self.add_message(assistant);

        if !calls.is_empty() {
            if let Some(end) = self.act(&calls).await {
                return StepFlow::End(end);
            }
            self.observe_loops(&text, &calls).await;
            if let Some(stop) = &self.config.stop_when
                && stop(&self.state)
                && self
                    .terminate(TerminateReason::StopWhen, self.last_assistant_text())
                    .await
            {
                return StepFlow::End(End::complete(self.last_assistant_text()));
            }
            return StepFlow::Continue;
        }

        match finish_reason {
            FinishReason::Refusal | FinishReason::ContentFilter => {
                let message = if text.trim().is_empty() {
                    "the model refused to answer".to_owned()
                } else {
                    text.clone()
                };
                self.failure(FailureReason::LlmRefusal, message).await;
                match self.after_failure().await {
                    Decision::End(end) => return StepFlow::End(end),
                    Decision::Switched | Decision::Escalated => return StepFlow::Continue,
                    Decision::Continue => {}
                }
            }
            FinishReason::Length if self.nudges.recoveries < self.config.max_tokens_recoveries => {
                self.nudges.recoveries += 1;
                let prompt = "Your answer was cut off by the output limit. Continue exactly where \
                              you stopped, without repeating anything."
                    .to_owned();
                let ctx = self.base(Phase::Think);
                match self
                    .kernel
                    .pipeline
                    .emit::<MessageMaxTokensRecovery>(prompt, &ctx)
                    .await
                {
                    Ok(EmitOutcome::Continue(prompt)) => {
                        drop(ctx);
                        self.add_message(KernelMessage::user(prompt));
                        return StepFlow::Continue;
                    }
                    Ok(EmitOutcome::Suppressed { .. }) => {
                        return StepFlow::End(End::complete(Some(text)));
                    }
                    Err(error) => return StepFlow::End(End::failed(KernelError::Handler(error))),
                }
            }
            _ => {}
        }
        self.verify(text).await
    }

    /// Takes the tool sources' current tools (an MCP server's list may have changed).
    async fn refresh_sourced_tools(&mut self) {
        let ctx = ToolSourceCtx {
            pipeline: &self.kernel.pipeline,
            abort: &self.abort,
        };
        let Some((generation, all)) = self
            .kernel
            .sources
            .changed(&self.kernel.tools, self.tools_generation, ctx)
            .await
        else {
            return;
        };
        self.tools_generation = generation;
        self.tools = match &self.strategies[self.strategy].tools {
            Some(names) => all.subset(names.iter().map(String::as_str)),
            None => all.clone(),
        };
        self.all_tools = Some(all);
    }

    async fn finish(mut self, end: End, started: Instant) -> RunResult {
        // A fail-closed handler that ended the run with a reason (observational memory, a
        // guard) is reported like the kernel's own failures.
        if let Some(KernelError::Handler(error)) = &end.error
            && let Some(failure) = error.failure().error.downcast_ref::<RunFailure>()
        {
            self.failure(failure.reason, failure.message.clone()).await;
        }
        let duration = started.elapsed();
        let run_end = RunEnd {
            run_id: self.run_id.to_string(),
            outcome: end.outcome,
            steps: self.iteration,
            usage: self.state.usage,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            final_text: end.final_text.clone(),
            error: end.error.as_ref().map(ToString::to_string),
        };
        let ctx = self.base(Phase::Complete);
        let reported = match self
            .kernel
            .pipeline
            .emit::<LifecycleComplete>(run_end.clone(), &ctx)
            .await
        {
            Ok(EmitOutcome::Continue(reported)) => reported,
            _ => run_end,
        };
        drop(ctx);
        self.notify(|| KernelEvent::RunFinished { end: reported });
        RunResult {
            run_id: self.run_id.to_string(),
            outcome: end.outcome,
            usage: self.state.usage,
            state: self.state,
            final_text: end.final_text,
            error: end.error,
            steps: self.iteration,
            duration,
        }
    }
}
