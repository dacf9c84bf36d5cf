//! Act: heal, reshape and gate each tool call, run the allowed ones in parallel, and add
//! their results in call order.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use harness_tags::tags::{
    MessageToolError, MessageToolResult, NudgeHealingApplied, NudgeHealingFailure,
    ObservationToolResult, ToolCallTag, ToolGateResult, ToolHealing,
};
use harness_tags::{
    EmitOutcome, FailureReason, GateDecision, GateVerdict, KernelMessage, ObservationStep, Phase,
    Severity, ToolCall, ToolResultCtx,
};
use serde_json::{Map, Value};

use crate::kernel::healing::{Healing, heal_tool_call};
use crate::kernel::state::{Transition, apply};
use crate::kernel::{FinishedCall, KernelEvent, Refusal, ToolInvocation};
use crate::tool::{ApprovalRequest, RegisteredTool, ToolContext, ToolOutput};

use super::{Decision, End, Run};

/// What happens to one tool call.
pub(super) enum Action {
    Run(RegisteredTool),
    /// Do not run it; this is the error result the model sees.
    Answer(String),
}

pub(super) struct Prepared {
    pub(super) call: ToolCall,
    pub(super) healed: bool,
    pub(super) action: Action,
}

pub(super) struct Executed {
    pub(super) content: String,
    pub(super) is_error: bool,
    pub(super) duration_ms: u64,
}

impl Run<'_> {
    /// Act: heal, reshape and gate each call, run the allowed ones in parallel, and add the
    /// results in call order. `Some` ends the run.
    pub(super) async fn act(&mut self, calls: &[ToolCall]) -> Option<End> {
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
                        self.add_tool_result(prepared, executed).await;
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
            let failed = executed.is_error;
            if !failed {
                self.succeeded_tools.insert(prepared.call.name.clone());
            }
            // The failure is recorded with the error as `message.tool-error` left it (a
            // redactor's work), never the tool's raw text.
            let content = self.add_tool_result(prepared, executed).await;
            if failed {
                failures.push(format!("`{}` failed: {content}", prepared.call.name));
            }
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
    pub(super) async fn prepare(
        &mut self,
        call: &ToolCall,
        nudges: &mut Vec<KernelMessage>,
    ) -> Prepared {
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

        self.admit(call, healed).await
    }

    /// Reshapes (`tool.call`) and gates a call whose arguments are valid.
    async fn admit(&mut self, call: ToolCall, healed: bool) -> Prepared {
        let answer = |call: ToolCall, healed: bool, message: String| Prepared {
            call,
            healed,
            action: Action::Answer(message),
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

    /// One call from outside the loop ([`Kernel::invoke`](crate::kernel::Kernel::invoke)):
    /// its arguments must be valid as they are (nothing heals them), then it is reshaped,
    /// gated, run and its result reshaped as a model's call is.
    pub(super) async fn invoke(&mut self, call: ToolCall) -> ToolInvocation {
        self.refresh_sourced_tools().await;
        let refusal = match self.tools.get(&call.name) {
            None => Some((
                Refusal::UnknownTool,
                format!("There is no tool named `{}`.", call.name),
            )),
            Some(tool) => tool
                .validator
                .iter_errors(&call.arguments)
                .next()
                .map(|error| {
                    let message = format!(
                        "The arguments do not fit `{}`'s input schema: {error} at `{}`.",
                        call.name,
                        error.instance_path()
                    );
                    (Refusal::InvalidArguments, message)
                }),
        };
        let (prepared, refused) = match refusal {
            Some((refusal, message)) => (
                Prepared {
                    call,
                    healed: false,
                    action: Action::Answer(message),
                },
                Some(refusal),
            ),
            None => {
                let prepared = self.admit(call, false).await;
                let blocked = matches!(prepared.action, Action::Answer(_));
                (prepared, blocked.then_some(Refusal::Blocked))
            }
        };
        let executed = match &prepared.action {
            Action::Answer(message) => Executed {
                content: message.clone(),
                is_error: true,
                duration_ms: 0,
            },
            Action::Run(tool) => self.run_tool(tool, &prepared.call).await,
        };
        let duration_ms = executed.duration_ms;
        let failed = executed.is_error;
        let content = self.add_tool_result(&prepared, executed).await;
        let is_error = match self.state.messages.last() {
            Some(KernelMessage::ToolResult { is_error, .. }) => *is_error,
            _ => failed,
        };
        ToolInvocation {
            call: prepared.call,
            content,
            is_error,
            refused,
            duration_ms,
        }
    }

    /// Runs the allowed calls in parallel. Returns each call's result (in call order; `None`
    /// for a call that had not finished) and whether the run was aborted meanwhile.
    pub(super) async fn execute(&self, prepared: &[Prepared]) -> (Vec<Option<Executed>>, bool) {
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

    pub(super) async fn run_tool(&self, tool: &RegisteredTool, call: &ToolCall) -> Executed {
        let timeout = tool.tool.timeout().unwrap_or(self.config.tool_timeout);
        let abort = self.abort.child_token();
        let ctx = ToolContext {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            abort: abort.clone(),
            channel: self.channel.clone(),
            thread_id: self.thread_id.clone(),
        };
        self.notify(|| KernelEvent::ToolStarted { call: call.clone() });
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

    /// Adds a tool's result to the conversation and records it as a step; returns the text the
    /// model sees (after `message.tool-result` / `message.tool-error` handlers).
    pub(super) async fn add_tool_result(
        &mut self,
        prepared: &Prepared,
        executed: Executed,
    ) -> String {
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
        self.notify(|| {
            KernelEvent::ToolFinished(FinishedCall {
                call_id: call.id.clone(),
                tool_name: call.name.clone(),
                output: output.unwrap_or_else(|| content.clone()),
                content: content.clone(),
                is_error,
                healed: prepared.healed,
                duration_ms: executed.duration_ms,
            })
        });
        content
    }
}

fn format_duration(duration: Duration) -> String {
    if duration.as_secs() >= 1 && duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}
