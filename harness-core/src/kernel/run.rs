//! One run of the agent loop.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use harness_tags::tags::{
    ControlStrategyEvaluated, DecisionTerminate, LifecycleComplete, LifecycleFailureTag,
    LifecycleStart, MessageAssistant, MessageMaxTokensRecovery, MessageToolError,
    MessageToolResult, MessageUserTask, ModelRequestTag, ModelResponseTag, NudgeHealingApplied,
    NudgeHealingFailure, NudgeLoopDetected, NudgeRequiredToolsPending, NudgeStrategyHandoff,
    NudgeTasksIncomplete, NudgeVerifierRetry, ObservationToolResult, PromptSystem, ToolCallTag,
    ToolGateResult, ToolHealing, ToolSchema,
};
use harness_tags::{
    BaseCtx, EmitOutcome, FailureReason, FinishReason, GateDecision, GateVerdict, KernelMessage,
    KernelState, LifecycleFailure, ModelCtx, ModelRequest, ModelResponse, NudgeCtx,
    ObservationStep, Phase, RunEnd, RunFailure, RunOutcome, RunStart, Severity, StrategyAction,
    Tag, TerminateDecision, TerminateReason, ToolCall, ToolCallCtx, ToolCategory, ToolResultCtx,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::healing::{Healing, heal_tool_call};
use super::loops::LoopDetector;
use super::state::{Transition, apply};
use super::strategy::{RunHealth, Strategy, evaluate, next_untried};
use super::{
    KernelConfig, KernelError, KernelEvent, KernelInner, KernelObserver, OpenTasks, RunInput,
    RunResult, SessionSource, Verdict,
};
use crate::model::{Model, ModelError, ResponseAssembler, StreamEvent};
use crate::tool::{
    ApprovalRequest, HarnessChannel, RegisteredTool, ToolContext, ToolOutput, ToolRegistry,
    ToolSourceCtx,
};

pub(crate) async fn run(kernel: &KernelInner, input: RunInput) -> RunResult {
    let started = Instant::now();
    let model = match input.model.clone().or_else(|| kernel.model.clone()) {
        Some(model) => model,
        None => {
            return RunResult {
                run_id: input.run_id.unwrap_or_else(new_run_id),
                outcome: RunOutcome::Error,
                state: Arc::new(KernelState {
                    messages: Arc::new(input.history),
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

fn new_run_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
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

/// What happens to one tool call.
enum Action {
    Run(RegisteredTool),
    /// Do not run it; this is the error result the model sees.
    Answer(String),
}

struct Prepared {
    call: ToolCall,
    healed: bool,
    action: Action,
}

struct Executed {
    content: String,
    is_error: bool,
    duration_ms: u64,
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
            messages: Arc::new(input.history),
            strategy: strategy_name.to_string(),
            ..KernelState::default()
        });
        Run {
            kernel,
            config,
            run_id: Arc::from(input.run_id.unwrap_or_else(new_run_id)),
            thread_id: input.thread_id,
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

    fn notify(&self, event: KernelEvent<'_>) {
        if let Some(observer) = &self.observer {
            observer.on_event(event);
        }
    }

    fn add_message(&mut self, message: KernelMessage) {
        apply(&mut self.state, Transition::AddMessage(message));
        if let (Some(observer), Some(message)) = (&self.observer, self.state.messages.last()) {
            observer.on_event(KernelEvent::MessageAdded { message });
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
        self.notify(KernelEvent::RunStarted {
            run_id: &self.run_id,
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

    fn system_prompt(&self) -> String {
        match &self.strategies[self.strategy].instructions {
            Some(extra) if self.config.instructions.is_empty() => extra.clone(),
            Some(extra) => format!("{}\n\n{extra}", self.config.instructions),
            None => self.config.instructions.clone(),
        }
    }

    /// Think: prompt, tools, the model call with retries. `Ok(None)` means the step failed
    /// but the run goes on (a new strategy or the user's answer to an escalation).
    async fn think(&mut self) -> Result<Option<ModelResponse>, End> {
        let ctx = self.base(Phase::Think);
        let system = match self
            .kernel
            .pipeline
            .emit::<PromptSystem>(self.system_prompt(), &ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().unwrap_or_default(),
            Err(error) => return Err(End::failed(KernelError::Handler(error))),
        };
        let tools = match self
            .kernel
            .pipeline
            .emit::<ToolSchema>(self.tools.specs().to_vec(), &ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().unwrap_or_default(),
            Err(error) => return Err(End::failed(KernelError::Handler(error))),
        };
        drop(ctx);
        let request = ModelRequest {
            model: self.model_id.to_string(),
            system,
            messages: Arc::clone(&self.state.messages),
            tools,
            temperature: self.config.temperature,
            max_tokens: self.config.max_output_tokens,
        };

        let reshapes_requests = self.kernel.pipeline.has_handlers::<ModelRequestTag>();
        let mut attempt = 0;
        loop {
            attempt += 1;
            if self.abort.is_cancelled() {
                return Err(End::aborted());
            }
            let ctx = ModelCtx {
                base: self.base(Phase::Think),
                provider: self.model.id().provider().to_owned(),
                model: self.model.id().name().to_owned(),
                attempt,
            };
            // Each attempt reshapes the original request, so handlers never apply twice.
            let reshaped;
            let sent = if reshapes_requests {
                reshaped = match self
                    .kernel
                    .pipeline
                    .emit::<ModelRequestTag>(request.clone(), &ctx)
                    .await
                {
                    Ok(outcome) => outcome.into_payload().unwrap_or_default(),
                    Err(error) => return Err(End::failed(KernelError::Handler(error))),
                };
                &reshaped
            } else {
                &request
            };
            match self.call_model(sent).await {
                Ok(response) => {
                    let response = match self
                        .kernel
                        .pipeline
                        .emit::<ModelResponseTag>(response, &ctx)
                        .await
                    {
                        Ok(outcome) => outcome.into_payload().unwrap_or_default(),
                        Err(error) => return Err(End::failed(KernelError::Handler(error))),
                    };
                    drop(ctx);
                    apply(&mut self.state, Transition::Usage(response.usage));
                    self.notify(KernelEvent::Usage {
                        usage: &self.state.usage,
                    });
                    return Ok(Some(response));
                }
                Err(None) => return Err(End::aborted()),
                Err(Some(error)) => {
                    drop(ctx);
                    if let Some(wait) = self.config.retry.backoff(attempt, &error) {
                        self.notify(KernelEvent::ModelRetry {
                            attempt,
                            error: &error,
                            wait,
                        });
                        tokio::select! {
                            biased;
                            () = self.abort.cancelled() => return Err(End::aborted()),
                            () = tokio::time::sleep(wait) => continue,
                        }
                    }
                    self.failure(FailureReason::ModelError, error.to_string())
                        .await;
                    return match self.after_failure().await {
                        Decision::Switched | Decision::Escalated => Ok(None),
                        Decision::Continue => Err(End::failed(KernelError::Model(error))),
                        Decision::End(end) => Err(end),
                    };
                }
            }
        }
    }

    /// One model call, streamed and assembled. `Err(None)` means the run was aborted.
    async fn call_model(
        &self,
        request: &ModelRequest,
    ) -> Result<ModelResponse, Option<ModelError>> {
        let mut stream = tokio::select! {
            biased;
            () = self.abort.cancelled() => return Err(None),
            stream = self.model.stream(request) => stream.map_err(Some)?,
        };
        let mut assembler = ResponseAssembler::default();
        let mut call_ids: Vec<(usize, String)> = Vec::new();
        loop {
            let next = tokio::select! {
                biased;
                () = self.abort.cancelled() => return Err(None),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Ok(event)) => {
                    if self.observer.is_some() {
                        self.forward(&event, &mut call_ids);
                    }
                    assembler.push(event);
                }
                Some(Err(error)) => return Err(Some(error)),
            }
        }
        Ok(assembler.finish())
    }

    /// Streams deltas to the observer as they arrive.
    fn forward(&self, event: &StreamEvent, call_ids: &mut Vec<(usize, String)>) {
        let call_id = |index: usize, ids: &[(usize, String)]| {
            ids.iter()
                .find(|(i, _)| *i == index)
                .map(|(_, id)| id.clone())
                .unwrap_or_default()
        };
        match event {
            StreamEvent::TextDelta(text) => self.notify(KernelEvent::TextDelta { text }),
            StreamEvent::ThinkingDelta(text) => self.notify(KernelEvent::ThinkingDelta { text }),
            StreamEvent::ToolCallStart { index, id, name } => {
                call_ids.push((*index, id.clone()));
                self.notify(KernelEvent::ToolInputStarted {
                    call_id: id,
                    tool_name: name,
                });
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let id = call_id(*index, call_ids);
                self.notify(KernelEvent::ToolInputDelta {
                    call_id: &id,
                    delta: arguments,
                });
            }
            StreamEvent::ToolCallEnd { index } => {
                let id = call_id(*index, call_ids);
                self.notify(KernelEvent::ToolInputEnded { call_id: &id });
            }
            StreamEvent::ThinkingSignature(_) | StreamEvent::Usage(_) | StreamEvent::Finish(_) => {}
        }
    }

    /// Act: heal, reshape and gate each call, run the allowed ones in parallel, and add the
    /// results in call order. `Some` ends the run.
    async fn act(&mut self, calls: &[ToolCall]) -> Option<End> {
        let mut prepared = Vec::with_capacity(calls.len());
        let mut nudges = Vec::new();
        for call in calls {
            if self.abort.is_cancelled() {
                break;
            }
            prepared.push(self.prepare(call, &mut nudges).await);
        }
        let (executed, aborted) = if self.abort.is_cancelled() {
            (Vec::new(), true)
        } else {
            self.execute(&prepared).await
        };
        if aborted {
            // Every call gets an answer, so the conversation stays valid for the next run:
            // what finished keeps its result, the rest is marked aborted.
            let mut executed = executed.into_iter();
            for (index, call) in calls.iter().enumerate() {
                match (prepared.get(index), executed.next().flatten()) {
                    (Some(prepared), Some(executed)) => {
                        self.add_tool_result(prepared, executed).await
                    }
                    _ => {
                        let content = "Aborted by the user before the tool ran or finished.";
                        self.add_message(KernelMessage::tool_result(
                            &call.id, &call.name, content, true,
                        ));
                    }
                }
            }
            return Some(End::aborted());
        }
        let executed = executed.into_iter().flatten();

        let mut failures = Vec::new();
        for (prepared, executed) in prepared.iter().zip(executed) {
            if executed.is_error {
                failures.push(format!(
                    "`{}` failed: {}",
                    prepared.call.name, executed.content
                ));
            } else {
                self.succeeded_tools.insert(prepared.call.name.clone());
            }
            self.add_tool_result(prepared, executed).await;
        }
        for nudge in nudges {
            self.add_message(nudge);
        }
        if failures.is_empty() {
            if self.health.failure_streak > 0 {
                self.health.failure_streak = 0;
                apply(&mut self.state, Transition::FailureStreak(0));
            }
            return None;
        }
        for failure in failures {
            self.failure(FailureReason::ToolError, failure).await;
        }
        match self.after_failure().await {
            Decision::End(end) => Some(end),
            Decision::Continue | Decision::Switched | Decision::Escalated => None,
        }
    }

    /// Heals, reshapes and gates one call.
    async fn prepare(&mut self, call: &ToolCall, nudges: &mut Vec<KernelMessage>) -> Prepared {
        let answer = |call: ToolCall, healed: bool, message: String| Prepared {
            call,
            healed,
            action: Action::Answer(message),
        };
        let (call, healed) = match heal_tool_call(call, &self.tools) {
            Healing::Valid(call) => (call, false),
            Healing::Repaired(report) => {
                let ctx = self.call_ctx(&report.tool_name, &report.call_id);
                match self.kernel.pipeline.emit::<ToolHealing>(report, &ctx).await {
                    Ok(EmitOutcome::Continue(report)) => {
                        drop(ctx);
                        let steps: Vec<&str> =
                            report.steps.iter().map(|s| s.detail.as_str()).collect();
                        let text = format!(
                            "Your call to `{}` was repaired before it ran ({}). Use the corrected \
                             form next time.",
                            report.tool_name,
                            steps.join("; ")
                        );
                        if let Some(nudge) = self
                            .nudge_text::<NudgeHealingApplied>(
                                text,
                                "healing-applied",
                                Severity::Info,
                            )
                            .await
                        {
                            nudges.push(KernelMessage::system(nudge));
                        }
                        let healed = ToolCall {
                            id: report.call_id,
                            name: report.tool_name,
                            arguments: report.arguments,
                        };
                        (healed, true)
                    }
                    Ok(EmitOutcome::Suppressed { by }) => {
                        let message = format!(
                            "This call is invalid and a policy ({by}) rejected the automatic \
                             repair. Check the tool's name and its arguments against its schema."
                        );
                        return answer(call.clone(), false, message);
                    }
                    Err(error) => {
                        let message =
                            format!("This call is invalid and could not be repaired ({error}).");
                        return answer(call.clone(), false, message);
                    }
                }
            }
            Healing::Failed(failure) => {
                self.health.healing_failures += 1;
                let text = format!(
                    "Your `{}` call could not be repaired automatically. Read its error and \
                     correct the call.",
                    call.name
                );
                if let Some(nudge) = self
                    .nudge_text::<NudgeHealingFailure>(text, failure.trigger, Severity::Warn)
                    .await
                {
                    nudges.push(KernelMessage::system(nudge));
                }
                return answer(call.clone(), false, failure.message);
            }
        };

        let ctx = self.call_ctx(&call.name, &call.id);
        let call = match self
            .kernel
            .pipeline
            .emit::<ToolCallTag>(call.clone(), &ctx)
            .await
        {
            Ok(EmitOutcome::Continue(reshaped)) => reshaped,
            Ok(EmitOutcome::Suppressed { by }) => {
                let message = format!(
                    "The `{}` call was blocked by a policy ({by}) and did not run.",
                    call.name
                );
                return answer(call, healed, message);
            }
            Err(error) => {
                let message = format!(
                    "The `{}` call was blocked because a safety check failed ({error}).",
                    call.name
                );
                return answer(call, healed, message);
            }
        };
        drop(ctx);
        let Some(tool) = self.tools.get(&call.name).cloned() else {
            let message = format!("There is no tool named `{}` in this step.", call.name);
            return answer(call, healed, message);
        };
        if !tool.validator.is_valid(&call.arguments) {
            let message = format!(
                "The arguments of this `{}` call were changed by a handler into invalid ones; it \
                 did not run.",
                call.name
            );
            return answer(call, healed, message);
        }

        let ctx = self.call_ctx(&call.name, &call.id);
        let category = ctx.category;
        let verdict = match self
            .kernel
            .pipeline
            .emit::<ToolGateResult>(GateVerdict::allow(), &ctx)
            .await
        {
            Ok(outcome) => outcome
                .into_payload()
                .unwrap_or_else(|| GateVerdict::deny("the permission check was suppressed")),
            // The permission check failed closed: nothing runs without a verdict.
            Err(error) => GateVerdict::hard_deny(format!("the permission check failed ({error})")),
        };
        drop(ctx);
        let reason = verdict
            .reason
            .clone()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        match verdict.decision {
            GateDecision::Allow if !verdict.hard_deny => Prepared {
                call,
                healed,
                action: Action::Run(tool),
            },
            GateDecision::Allow | GateDecision::Deny => {
                let message = format!("Permission denied for `{}`{reason}.", call.name);
                answer(call, healed, message)
            }
            GateDecision::Ask => {
                let Some(channel) = self.channel.clone() else {
                    let message = format!(
                        "`{}` needs the user's approval{reason}, and no one is attached to give \
                         it, so it did not run. Continue without it, or explain what you need.",
                        call.name
                    );
                    return answer(call, healed, message);
                };
                let request = ApprovalRequest {
                    call: call.clone(),
                    category,
                    verdict,
                };
                let approval = tokio::select! {
                    biased;
                    () = self.abort.cancelled() => None,
                    approval = channel.approve(request) => Some(approval),
                };
                match approval {
                    Some(approval) if approval.approves() => Prepared {
                        call,
                        healed,
                        action: Action::Run(tool),
                    },
                    Some(crate::tool::ApprovalAnswer::Decline { reason }) => {
                        let message = format!("The user declined `{}`: {reason}", call.name);
                        answer(call, healed, message)
                    }
                    _ => answer(call, healed, "Aborted before approval.".to_owned()),
                }
            }
        }
    }

    /// Runs the allowed calls in parallel. Returns each call's result (in call order; `None`
    /// for a call that had not finished) and whether the run was aborted meanwhile.
    async fn execute(&self, prepared: &[Prepared]) -> (Vec<Option<Executed>>, bool) {
        let mut results: Vec<Option<Executed>> = prepared.iter().map(|_| None).collect();
        let mut running: FuturesUnordered<_> = prepared
            .iter()
            .enumerate()
            .map(|(index, prepared)| async move {
                let executed = match &prepared.action {
                    Action::Answer(message) => Executed {
                        content: message.clone(),
                        is_error: true,
                        duration_ms: 0,
                    },
                    Action::Run(tool) => self.run_tool(tool, &prepared.call).await,
                };
                (index, executed)
            })
            .collect();
        loop {
            tokio::select! {
                biased;
                () = self.abort.cancelled() => return (results, true),
                next = running.next() => match next {
                    Some((index, executed)) => results[index] = Some(executed),
                    None => return (results, false),
                },
            }
        }
    }

    async fn run_tool(&self, tool: &RegisteredTool, call: &ToolCall) -> Executed {
        let timeout = tool.tool.timeout().unwrap_or(self.config.tool_timeout);
        let abort = self.abort.child_token();
        let ctx = ToolContext {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            abort: abort.clone(),
            channel: self.channel.clone(),
            thread_id: self.thread_id.clone(),
        };
        self.notify(KernelEvent::ToolStarted { call });
        let started = Instant::now();
        let execution =
            AssertUnwindSafe(tool.tool.execute(call.arguments.clone(), ctx)).catch_unwind();
        let outcome = tokio::time::timeout(timeout, execution).await;
        // Tell a tool that outlived its timeout (and anything it spawned) to stop.
        abort.cancel();
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (content, is_error) = match outcome {
            Ok(Ok(Ok(ToolOutput { content, .. }))) => (content, false),
            Ok(Ok(Err(error))) => (error.message().to_owned(), true),
            Ok(Err(panic)) => (
                format!(
                    "`{}` crashed: {}",
                    call.name,
                    harness_tags::TagError::from_panic(&*panic).message()
                ),
                true,
            ),
            Err(_elapsed) => (
                format!(
                    "`{}` did not finish within {} and was stopped.",
                    call.name,
                    format_duration(timeout)
                ),
                true,
            ),
        };
        Executed {
            content,
            is_error,
            duration_ms,
        }
    }

    /// Adds a tool's result to the conversation and records it as a step.
    async fn add_tool_result(&mut self, prepared: &Prepared, executed: Executed) {
        let call = &prepared.call;
        // The tool's own output is kept apart only when a handler may change what the model
        // sees; otherwise the two are the same text.
        let reshaped_by_handlers = if executed.is_error {
            self.kernel.pipeline.has_handlers::<MessageToolError>()
        } else {
            self.kernel.pipeline.has_handlers::<MessageToolResult>()
        };
        let output = reshaped_by_handlers.then(|| executed.content.clone());
        let message =
            KernelMessage::tool_result(&call.id, &call.name, executed.content, executed.is_error);
        let ctx = ToolResultCtx {
            base: self.base(Phase::Act),
            tool_name: call.name.clone(),
            call_id: call.id.clone(),
            healed: prepared.healed,
            duration_ms: executed.duration_ms,
        };
        let reshaped = if executed.is_error {
            self.kernel
                .pipeline
                .emit::<MessageToolError>(message, &ctx)
                .await
        } else {
            self.kernel
                .pipeline
                .emit::<MessageToolResult>(message, &ctx)
                .await
        };
        let message = match reshaped {
            Ok(outcome) => outcome.into_payload(),
            Err(_) => None,
        }
        .unwrap_or_else(|| {
            // A fail-closed handler failed: the result must not reach the model as it was.
            KernelMessage::tool_result(
                &call.id,
                &call.name,
                "The result was withheld because a safety handler could not process it.",
                true,
            )
        });
        let (content, is_error) = match &message {
            KernelMessage::ToolResult {
                content, is_error, ..
            } => (content.clone(), *is_error),
            other => (other.content().to_owned(), executed.is_error),
        };
        let mut metadata = Map::new();
        metadata.insert("toolName".into(), Value::String(call.name.clone()));
        metadata.insert("callId".into(), Value::String(call.id.clone()));
        metadata.insert("isError".into(), Value::Bool(is_error));
        metadata.insert("durationMs".into(), Value::from(executed.duration_ms));
        metadata.insert("healed".into(), Value::Bool(prepared.healed));
        let step = ObservationStep {
            kind: "tool-result".to_owned(),
            content: Some(content.clone()),
            metadata: Some(metadata),
        };
        let step = match self
            .kernel
            .pipeline
            .emit::<ObservationToolResult>(step, &ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload(),
            Err(_) => None,
        }
        .unwrap_or_else(|| ObservationStep {
            kind: "tool-result".to_owned(),
            content: None,
            metadata: None,
        });
        drop(ctx);
        self.add_message(message);
        apply(&mut self.state, Transition::AddStep(step));
        self.notify(KernelEvent::ToolFinished {
            call_id: &call.id,
            tool_name: &call.name,
            content: &content,
            output: output.as_deref().unwrap_or(&content),
            is_error,
            healed: prepared.healed,
            duration_ms: executed.duration_ms,
        });
    }

    async fn observe_loops(&mut self, text: &str, calls: &[ToolCall]) {
        let Some(signal) = self.loops.observe(text, calls) else {
            return;
        };
        if let Some(nudge) = self
            .nudge_text::<NudgeLoopDetected>(signal.message, signal.trigger, signal.severity)
            .await
        {
            self.add_message(KernelMessage::system(nudge));
        }
    }

    /// Emits a nudge tag; the text to inject, unless a handler suppressed it or failed.
    async fn nudge_text<T>(&self, text: String, trigger: &str, severity: Severity) -> Option<String>
    where
        T: Tag<Payload = String, Ctx = NudgeCtx>,
    {
        let ctx = NudgeCtx {
            base: self.base(T::PHASE),
            trigger: trigger.to_owned(),
            severity,
        };
        match self.kernel.pipeline.emit::<T>(text, &ctx).await {
            Ok(outcome) => outcome.into_payload(),
            Err(_) => None,
        }
    }

    /// Emits a nudge and injects it; true if it was injected.
    async fn nudge<T>(&mut self, text: String, trigger: &str, severity: Severity) -> bool
    where
        T: Tag<Payload = String, Ctx = NudgeCtx>,
    {
        match self.nudge_text::<T>(text, trigger, severity).await {
            Some(text) => {
                self.add_message(KernelMessage::system(text));
                true
            }
            None => false,
        }
    }

    /// Verify: the checks before a final answer ends the run.
    async fn verify(&mut self, answer: String) -> StepFlow {
        let pending: Vec<&str> = self
            .config
            .required_tools
            .iter()
            .filter(|tool| !self.succeeded_tools.contains(*tool))
            .map(String::as_str)
            .collect();
        if !pending.is_empty() && self.nudges.required < self.config.max_nudges {
            self.nudges.required += 1;
            let text = format!(
                "Before you finish, you must call these tools: {}.",
                pending.join(", ")
            );
            if self
                .nudge::<NudgeRequiredToolsPending>(text, "required-tools-pending", Severity::Warn)
                .await
            {
                self.observe_loops(&answer, &[]).await;
                return StepFlow::Continue;
            }
        }

        let open = self
            .tasks
            .as_ref()
            .map(|t| t.open_tasks())
            .unwrap_or_default();
        if !open.is_empty() && self.nudges.tasks < self.config.max_nudges {
            self.nudges.tasks += 1;
            let text = format!(
                "These tasks are still open: {}. Finish them or update the task list before you \
                 end.",
                open.join("; ")
            );
            if self
                .nudge::<NudgeTasksIncomplete>(text, "tasks-incomplete", Severity::Warn)
                .await
            {
                self.observe_loops(&answer, &[]).await;
                return StepFlow::Continue;
            }
        }

        if let Some(verifier) = self.config.verifier.clone()
            && self.nudges.verifier < self.config.max_nudges
            && let Verdict::Reject(reason) = verifier.verify(&answer, &self.state).await
        {
            self.nudges.verifier += 1;
            self.failure(FailureReason::VerifierRejection, reason.clone())
                .await;
            match self.after_failure().await {
                Decision::End(end) => return StepFlow::End(end),
                Decision::Switched | Decision::Escalated => return StepFlow::Continue,
                Decision::Continue => {}
            }
            let text = format!("Your answer was rejected: {reason}. Fix it and answer again.");
            if self
                .nudge::<NudgeVerifierRetry>(text, "verifier-rejection", Severity::Warn)
                .await
            {
                return StepFlow::Continue;
            }
        }

        if self
            .terminate(TerminateReason::FinalAnswer, Some(answer.clone()))
            .await
        {
            StepFlow::End(End::complete(Some(answer)))
        } else {
            self.observe_loops(&answer, &[]).await;
            StepFlow::Continue
        }
    }

    /// Emits `decision.terminate`; true if the run ends, false if a handler vetoed (the veto's
    /// message is then in the conversation).
    async fn terminate(&mut self, reason: TerminateReason, final_text: Option<String>) -> bool {
        let decision = TerminateDecision {
            reason,
            final_text,
            continue_with: None,
        };
        let ctx = self.base(Phase::Verify);
        let veto = match self
            .kernel
            .pipeline
            .emit::<DecisionTerminate>(decision, &ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().and_then(|d| d.continue_with),
            Err(_) => None,
        };
        drop(ctx);
        match veto {
            Some(message) if self.nudges.vetoes < self.config.max_terminate_vetoes => {
                self.nudges.vetoes += 1;
                self.add_message(KernelMessage::user(message));
                false
            }
            _ => true,
        }
    }

    /// Records a failure: `lifecycle.failure`, the streak, a step.
    async fn failure(&mut self, reason: FailureReason, message: String) {
        self.health.failure_streak += 1;
        apply(
            &mut self.state,
            Transition::FailureStreak(self.health.failure_streak),
        );
        let failure = LifecycleFailure {
            reason,
            error_message: message,
            attempt_number: self.iteration,
            failure_streak: self.health.failure_streak,
            current_strategy: self.strategy_name.to_string(),
        };
        let ctx = self.base(Phase::Observe);
        let failure = match self
            .kernel
            .pipeline
            .emit::<LifecycleFailureTag>(failure.clone(), &ctx)
            .await
        {
            Ok(EmitOutcome::Continue(reshaped)) => reshaped,
            _ => failure,
        };
        drop(ctx);
        let mut metadata = Map::new();
        metadata.insert(
            "reason".into(),
            serde_json::to_value(failure.reason).unwrap_or(Value::Null),
        );
        metadata.insert("failureStreak".into(), Value::from(failure.failure_streak));
        apply(
            &mut self.state,
            Transition::AddStep(ObservationStep {
                kind: "failure".to_owned(),
                content: Some(failure.error_message.clone()),
                metadata: Some(metadata),
            }),
        );
        self.notify(KernelEvent::Failure { failure: &failure });
    }

    /// Scores the strategy after a failure and acts on the (reshaped) recommendation.
    async fn after_failure(&mut self) -> Decision {
        let health = RunHealth {
            loop_hits: self.loops.hits(),
            ..self.health
        };
        let evaluation = evaluate(
            &self.config.strategy,
            &self.strategies,
            self.strategy,
            &self.tried,
            health,
        );
        let ctx = self.base(Phase::Observe);
        let evaluation = match self
            .kernel
            .pipeline
            .emit::<ControlStrategyEvaluated>(evaluation.clone(), &ctx)
            .await
        {
            Ok(EmitOutcome::Continue(reshaped)) => reshaped,
            _ => evaluation,
        };
        drop(ctx);
        match evaluation.recommended_action {
            StrategyAction::Continue => Decision::Continue,
            StrategyAction::Switch => match next_untried(self.strategy, &self.tried) {
                Some(next) => self.switch_to(next).await,
                None => self.escalate().await,
            },
            StrategyAction::Escalate => self.escalate().await,
        }
    }

    async fn switch_to(&mut self, next: usize) -> Decision {
        self.tried[next] = true;
        let strategy = self.strategies[next].clone();
        if let Some(model_id) = &strategy.model {
            let resolved = match &self.kernel.resolver {
                Some(resolve) => resolve(model_id),
                None => crate::model::resolve_model(model_id.as_str()),
            };
            match resolved {
                Ok(model) => {
                    self.model_id = Arc::from(model.id().as_str());
                    self.model = model;
                }
                Err(error) => return Decision::End(End::failed(KernelError::Model(error))),
            }
        }
        let all = self.all_tools.as_ref().unwrap_or(&self.kernel.tools);
        self.tools = match &strategy.tools {
            Some(names) => all.subset(names.iter().map(String::as_str)),
            None => all.clone(),
        };
        self.strategy = next;
        self.strategy_name = Arc::from(strategy.name.as_str());
        apply(&mut self.state, Transition::Strategy(strategy.name.clone()));
        self.health.failure_streak = 0;
        apply(&mut self.state, Transition::FailureStreak(0));
        let mut text = format!(
            "Switching to the `{}` strategy after repeated failures.",
            strategy.name
        );
        if let Some(instructions) = &strategy.instructions {
            text.push(' ');
            text.push_str(instructions);
        }
        self.nudge::<NudgeStrategyHandoff>(text, "strategy-switch", Severity::Warn)
            .await;
        Decision::Switched
    }

    async fn escalate(&mut self) -> Decision {
        let reason = format!(
            "the `{}` strategy keeps failing ({} failures in a row) and no other strategy is left",
            self.strategy_name, self.health.failure_streak
        );
        let Some(channel) = self.channel.clone() else {
            return Decision::End(End::failed(KernelError::Escalated { reason }));
        };
        let answer = tokio::select! {
            biased;
            () = self.abort.cancelled() => return Decision::End(End::aborted()),
            answer = channel.escalate(&reason) => answer,
        };
        match answer {
            Some(message) => {
                self.add_message(KernelMessage::user(message));
                self.health.failure_streak = 0;
                apply(&mut self.state, Transition::FailureStreak(0));
                Decision::Escalated
            }
            None => Decision::End(End::failed(KernelError::Escalated { reason })),
        }
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
        self.notify(KernelEvent::RunFinished { end: &reported });
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

fn format_duration(duration: Duration) -> String {
    if duration.as_secs() >= 1 && duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}
