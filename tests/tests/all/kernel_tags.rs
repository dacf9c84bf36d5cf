//! Every tag the kernel emits, one test each: an `on` handler changes the payload, and the test
//! observes the change downstream (the request the model received, the stored conversation,
//! the arguments a tool ran with, the run's outcome).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use harness_core::kernel::{
    Kernel, KernelBuilder, OpenTasks, RunInput, Strategy, Verdict, Verifier,
};
use harness_core::model::{Model, ModelId, Scripted, ScriptedModel};
use harness_tags::prelude::*;
use harness_tags::{RunEnd, RunStart, StrategyAction};
use harness_tests::fixtures::{Calls, Recorder, Seen, echo, fail};
use serde_json::json;

fn scripted(turns: impl IntoIterator<Item = Scripted>) -> Arc<ScriptedModel> {
    let mut model = ScriptedModel::new("scripted/test");
    for turn in turns {
        model = model.then(turn);
    }
    Arc::new(model)
}

fn builder(model: &Arc<ScriptedModel>, pipeline: Pipeline, calls: &Calls) -> KernelBuilder {
    Kernel::builder()
        .model(Arc::clone(model) as Arc<dyn Model>)
        .instructions("You are a test agent.")
        .pipeline(pipeline)
        .tool(echo(Arc::clone(calls)))
        .tool(fail())
}

fn handlers(compose: impl FnOnce(Compose) -> Compose) -> Pipeline {
    Pipeline::builder().compose(compose).build().unwrap()
}

fn system_messages(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            KernelMessage::System { content } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

fn echo_call(text: &str) -> Scripted {
    Scripted::tool_call("echo", json!({ "text": text }))
}

#[tokio::test]
async fn prompt_system_is_the_system_prompt_sent() {
    let model = scripted([Scripted::text("hi")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(PromptSystem, |text: &String, ctx: &BaseCtx| {
            format!("[tenant: {}]\n{text}", ctx.strategy)
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    kernel.run(RunInput::new("hello")).await;
    assert_eq!(
        model.requests()[0].system,
        "[tenant: default]\nYou are a test agent."
    );
}

#[tokio::test]
async fn message_user_task_is_stored_and_sent_or_rejected() {
    let model = scripted([Scripted::text("ok")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(MessageUserTask, |msg: &KernelMessage, _: &BaseCtx| {
            if msg.content().contains("forbidden") {
                Flow::Suppress
            } else {
                Flow::Continue(msg.with_content(msg.content().to_uppercase()))
            }
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("hello")).await;
    assert_eq!(
        model.requests()[0].messages[0],
        KernelMessage::user("HELLO")
    );
    assert_eq!(result.state.messages[0], KernelMessage::user("HELLO"));

    let rejected = kernel.run(RunInput::new("a forbidden thing")).await;
    assert_eq!(rejected.outcome, RunOutcome::Error);
    assert!(rejected.state.messages.is_empty(), "nothing is stored");
    assert!(rejected.error.unwrap().to_string().contains("rejected"));
    assert_eq!(
        model.requests().len(),
        1,
        "no model call for a rejected message"
    );
}

#[tokio::test]
async fn message_assistant_is_what_is_stored_and_shown() {
    let model = scripted([Scripted::text("The answer is 42.")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(MessageAssistant, |msg: &KernelMessage, _: &BaseCtx| {
            msg.with_content(msg.content().replace("42", "forty-two"))
        })
    });
    let recorder = Recorder::default();
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel
        .run(RunInput::new("?").observer(Arc::new(recorder.clone())))
        .await;
    assert_eq!(
        result.state.messages[1].content(),
        "The answer is forty-two."
    );
    assert_eq!(
        result.final_text.as_deref(),
        Some("The answer is forty-two.")
    );
    assert!(recorder.events().contains(&Seen::Message(
        json!({"role": "assistant", "content": "The answer is forty-two."})
    )));
}

#[tokio::test]
async fn message_tool_result_is_what_the_model_sees() {
    let model = scripted([echo_call("password=hunter2"), Scripted::text("done")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(
            MessageToolResult,
            |msg: &KernelMessage, ctx: &ToolResultCtx| {
                assert_eq!(ctx.tool_name, "echo");
                msg.with_content(msg.content().replace("hunter2", "<PASSWORD>"))
            },
        )
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    kernel.run(RunInput::new("echo it")).await;
    let second = &model.requests()[1];
    assert_eq!(
        second.messages[2],
        KernelMessage::tool_result("call_0", "echo", "echo: password=<PASSWORD>", false)
    );
}

#[tokio::test]
async fn message_tool_error_is_what_the_model_sees() {
    let model = scripted([
        Scripted::tool_call("fail", json!({})),
        Scripted::text("sorry"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(
            MessageToolError,
            |msg: &KernelMessage, _: &ToolResultCtx| {
                msg.with_content(format!("{} (try a smaller file)", msg.content()))
            },
        )
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    kernel.run(RunInput::new("go")).await;
    assert_eq!(
        model.requests()[1].messages[2],
        KernelMessage::tool_result("call_0", "fail", "disk full (try a smaller file)", true)
    );
}

fn truncated(text: &str) -> Scripted {
    Scripted::Response(ModelResponse {
        content: text.into(),
        finish_reason: FinishReason::Length,
        ..ModelResponse::default()
    })
}

#[tokio::test]
async fn message_max_tokens_recovery_is_the_continuation_prompt_or_ends_the_run() {
    let model = scripted([truncated("Part one, "), Scripted::text("part two.")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(MessageMaxTokensRecovery, |_: &String, _: &BaseCtx| {
            "Go on.".to_owned()
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("write")).await;
    assert_eq!(
        model.requests()[1].messages.last(),
        Some(&KernelMessage::user("Go on."))
    );
    assert_eq!(result.final_text.as_deref(), Some("part two."));

    let model = scripted([truncated("Part one, ")]);
    let pipeline = handlers(|c| {
        c.on(MessageMaxTokensRecovery, |_: &String, _: &BaseCtx| {
            Flow::Suppress
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("write")).await;
    assert_eq!(result.outcome, RunOutcome::Complete);
    assert_eq!(result.final_text.as_deref(), Some("Part one, "));
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn model_request_is_what_the_provider_gets() {
    let model = scripted([Scripted::text("ok")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(ModelRequestTag, |request: &ModelRequest, ctx: &ModelCtx| {
            assert_eq!((ctx.provider.as_str(), ctx.attempt), ("scripted", 1));
            let mut request = request.clone();
            request.temperature = Some(0.1);
            Arc::make_mut(&mut request.messages)
                .insert(0, KernelMessage::system("Memory: the user likes Rust."));
            request
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("hi")).await;
    let sent = &model.requests()[0];
    assert_eq!(sent.temperature, Some(0.1));
    assert_eq!(
        sent.messages[0],
        KernelMessage::system("Memory: the user likes Rust.")
    );
    assert_eq!(
        result.state.messages[0],
        KernelMessage::user("hi"),
        "the request, not the state, was reshaped"
    );
}

#[tokio::test]
async fn model_response_is_what_the_kernel_acts_on() {
    let model = scripted([
        Scripted::text("I will not use tools."),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let first = Arc::new(Mutex::new(true));
    let pipeline = handlers(move |c| {
        c.on(
            ModelResponseTag,
            move |response: &ModelResponse, _: &ModelCtx| {
                let mut first = first.lock().unwrap();
                if !*first {
                    return None;
                }
                *first = false;
                let mut response = response.clone();
                response.tool_calls.push(ToolCall {
                    id: "injected".into(),
                    name: "echo".into(),
                    arguments: json!({"text": "from a handler"}),
                });
                response.finish_reason = FinishReason::ToolCalls;
                Some(response)
            },
        )
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(*calls.lock().unwrap(), ["from a handler"]);
    assert_eq!(result.final_text.as_deref(), Some("done"));
}

#[tokio::test]
async fn tool_schema_is_the_list_offered() {
    let model = scripted([Scripted::text("ok")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(ToolSchema, |tools: &Arc<[ToolSpec]>, _: &BaseCtx| {
            tools
                .iter()
                .filter(|t| t.name != "fail")
                .cloned()
                .collect::<Arc<[_]>>()
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    kernel.run(RunInput::new("hi")).await;
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, ["echo"]);
}

#[tokio::test]
async fn tool_call_arguments_are_the_ones_used_and_suppress_blocks() {
    let model = scripted([
        echo_call("original"),
        echo_call("blocked"),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(ToolCallTag, |call: &ToolCall, ctx: &ToolCallCtx| {
            assert_eq!(ctx.category, Some(ToolCategory::Read));
            match call.arguments["text"].as_str() {
                Some("blocked") => Flow::Suppress,
                _ => Flow::Continue(ToolCall {
                    arguments: json!({"text": "rewritten"}),
                    ..call.clone()
                }),
            }
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(
        *calls.lock().unwrap(),
        ["rewritten"],
        "the blocked call never ran"
    );
    let blocked = &result.state.messages[4];
    assert!(
        blocked.content().contains("blocked by a policy"),
        "{blocked:?}"
    );
}

#[tokio::test]
async fn tool_gate_result_is_applied() {
    let model = scripted([echo_call("a"), Scripted::text("done")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| {
            GateVerdict::deny("read-only session")
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert!(calls.lock().unwrap().is_empty());
    assert_eq!(
        result.state.messages[2],
        KernelMessage::tool_result(
            "call_0",
            "echo",
            "Permission denied for `echo`: read-only session.",
            true
        )
    );

    // `ask` with nobody attached declines, with a message the model can act on.
    let model = scripted([echo_call("a"), Scripted::text("done")]);
    let pipeline = handlers(|c| {
        c.on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| {
            GateVerdict::ask("writes files")
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert!(calls.lock().unwrap().is_empty());
    assert!(
        result.state.messages[2]
            .content()
            .contains("needs the user's approval")
    );
}

#[tokio::test]
async fn tool_healing_repairs_are_applied_or_rejected() {
    let model = scripted([
        Scripted::tool_call("Echo", json!({"txt": "healed"})),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(ToolHealing, |report: &HealingReport, _: &ToolCallCtx| {
            assert_eq!(report.original_name, "Echo");
            let mut report = report.clone();
            report.arguments = json!({"text": "healed and reviewed"});
            report
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(*calls.lock().unwrap(), ["healed and reviewed"]);
    assert!(
        matches!(&result.state.messages[2], KernelMessage::ToolResult { tool_name, .. } if tool_name == "echo")
    );

    let calls = Calls::default();
    let model = scripted([
        Scripted::tool_call("Echo", json!({"text": "x"})),
        Scripted::text("done"),
    ]);
    let pipeline = handlers(|c| {
        c.on(ToolHealing, |_: &HealingReport, _: &ToolCallCtx| {
            Flow::Suppress
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert!(
        calls.lock().unwrap().is_empty(),
        "a rejected repair does not run"
    );
    assert!(
        result.state.messages[2]
            .content()
            .contains("rejected the automatic repair")
    );
}

#[tokio::test]
async fn nudge_healing_applied_is_injected() {
    let model = scripted([
        Scripted::tool_call("ECHO", json!({"text": "x"})),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(NudgeHealingApplied, |_: &String, ctx: &NudgeCtx| {
            format!("custom note ({})", ctx.trigger)
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    kernel.run(RunInput::new("go")).await;
    assert_eq!(
        system_messages(&model.requests()[1]),
        ["custom note (healing-applied)"]
    );
    assert_eq!(*calls.lock().unwrap(), ["x"]);
}

#[tokio::test]
async fn nudge_healing_failure_is_injected_or_suppressed() {
    let model = scripted([
        Scripted::tool_call("delete_all", json!({})),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(NudgeHealingFailure, |_: &String, ctx: &NudgeCtx| {
            format!("stick to the tools ({})", ctx.trigger)
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    let second = &model.requests()[1];
    assert_eq!(
        system_messages(second),
        ["stick to the tools (unknown-tool)"]
    );
    assert!(
        result.state.messages[2]
            .content()
            .contains("There is no tool named `delete_all`. Available tools: echo, fail.")
    );

    let model = scripted([
        Scripted::tool_call("delete_all", json!({})),
        Scripted::text("done"),
    ]);
    let pipeline = handlers(|c| {
        c.on(NudgeHealingFailure, |_: &String, _: &NudgeCtx| {
            Flow::Suppress
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    kernel.run(RunInput::new("go")).await;
    assert!(system_messages(&model.requests()[1]).is_empty());
}

#[tokio::test]
async fn nudge_loop_detected_is_injected_or_suppressed() {
    let repeat = || echo_call("same");
    for suppress in [false, true] {
        let model = scripted([repeat(), repeat(), repeat(), Scripted::text("done")]);
        let calls = Calls::default();
        let pipeline = handlers(move |c| {
            c.on(NudgeLoopDetected, move |text: &String, ctx: &NudgeCtx| {
                assert_eq!(
                    (ctx.trigger.as_str(), ctx.severity),
                    ("repeated-tool-call", Severity::Warn)
                );
                if suppress {
                    Flow::Suppress
                } else {
                    Flow::Continue(format!("LOOP: {text}"))
                }
            })
        });
        let kernel = builder(&model, pipeline, &calls).build().unwrap();
        kernel.run(RunInput::new("go")).await;
        let nudges = system_messages(&model.requests()[3]);
        if suppress {
            assert!(nudges.is_empty());
        } else {
            assert_eq!(nudges.len(), 1);
            assert!(
                nudges[0]
                    .starts_with("LOOP: You have called `echo` with the same arguments 3 times"),
                "{nudges:?}"
            );
        }
    }
}

#[tokio::test]
async fn nudge_required_tools_pending_is_injected() {
    let model = scripted([
        Scripted::text("done early"),
        echo_call("x"),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(NudgeRequiredToolsPending, |text: &String, _: &NudgeCtx| {
            format!("REQUIRED: {text}")
        })
    });
    let kernel = builder(&model, pipeline, &calls)
        .required_tools(["echo"])
        .build()
        .unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(
        system_messages(&model.requests()[1]),
        ["REQUIRED: Before you finish, you must call these tools: echo."]
    );
    assert_eq!(result.final_text.as_deref(), Some("done"));

    let model = scripted([Scripted::text("done early")]);
    let pipeline = handlers(|c| {
        c.on(NudgeRequiredToolsPending, |_: &String, _: &NudgeCtx| {
            Flow::Suppress
        })
    });
    let kernel = builder(&model, pipeline, &calls)
        .required_tools(["echo"])
        .build()
        .unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(
        result.final_text.as_deref(),
        Some("done early"),
        "suppressed: the run may finish"
    );
}

struct OpenList(Mutex<Vec<String>>);

impl OpenTasks for OpenList {
    fn open_tasks(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

#[tokio::test]
async fn nudge_tasks_incomplete_is_injected() {
    let model = scripted([
        Scripted::text("all done"),
        Scripted::text("now really done"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(NudgeTasksIncomplete, |text: &String, _: &NudgeCtx| {
            text.replace("These tasks", "Tasks")
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let tasks = Arc::new(OpenList(Mutex::new(vec!["write tests".into()])));
    let result = kernel.run(RunInput::new("go").tasks(tasks)).await;
    assert_eq!(
        system_messages(&model.requests()[1]),
        ["Tasks are still open: write tests. Finish them or update the task list before you end."]
    );
    assert_eq!(result.final_text.as_deref(), Some("now really done"));
}

struct NoShortAnswers;

#[async_trait::async_trait]
impl Verifier for NoShortAnswers {
    async fn verify(&self, answer: &str, _: &KernelState) -> Verdict {
        if answer.len() < 10 {
            Verdict::Reject("too short".into())
        } else {
            Verdict::Accept
        }
    }
}

#[tokio::test]
async fn nudge_verifier_retry_is_injected_after_a_rejection() {
    let model = scripted([Scripted::text("42"), Scripted::text("The answer is 42.")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(NudgeVerifierRetry, |text: &String, _: &NudgeCtx| {
            format!("VERIFIER: {text}")
        })
    });
    let recorder = Recorder::default();
    let kernel = builder(&model, pipeline, &calls)
        .verifier(NoShortAnswers)
        .build()
        .unwrap();
    let result = kernel
        .run(RunInput::new("?").observer(Arc::new(recorder.clone())))
        .await;
    assert_eq!(
        system_messages(&model.requests()[1]),
        ["VERIFIER: Your answer was rejected: too short. Fix it and answer again."]
    );
    assert_eq!(result.final_text.as_deref(), Some("The answer is 42."));
    assert!(recorder.events().contains(&Seen::Failure(
        "verifier-rejection".into(),
        "too short".into()
    )));
}

#[tokio::test]
async fn nudge_strategy_handoff_is_injected_when_the_strategy_switches() {
    let fallback = scripted([Scripted::text("solved with the fallback model")]);
    let primary = scripted([
        Scripted::tool_call("fail", json!({})),
        Scripted::tool_call("fail", json!({})),
        Scripted::tool_call("fail", json!({})),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(NudgeStrategyHandoff, |text: &String, _: &NudgeCtx| {
            format!("HANDOFF: {text}")
        })
    });
    let resolver_model = Arc::clone(&fallback);
    let kernel = builder(&primary, pipeline, &calls)
        .strategy(Strategy::new("fast"))
        .strategy(
            Strategy::new("careful")
                .model(ModelId::new("scripted/fallback").unwrap())
                .instructions("Think step by step."),
        )
        .model_resolver(move |_| Ok(Arc::clone(&resolver_model) as Arc<dyn Model>))
        .build()
        .unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(
        result.final_text.as_deref(),
        Some("solved with the fallback model")
    );
    let request = &fallback.requests()[0];
    // Three identical failing calls also trip the loop detector; the handoff comes first.
    assert_eq!(
        system_messages(request)[0],
        "HANDOFF: Switching to the `careful` strategy after repeated failures. Think step by step."
    );
    assert!(request.system.ends_with("Think step by step."));
    assert_eq!(result.state.strategy, "careful");
}

#[tokio::test]
async fn observation_tool_result_is_the_recorded_step() {
    let model = scripted([echo_call("x"), Scripted::text("done")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(
            ObservationToolResult,
            |step: &ObservationStep, ctx: &ToolResultCtx| ObservationStep {
                kind: format!("{}-observed", step.kind),
                content: Some(format!("{} took {} ms", ctx.tool_name, ctx.duration_ms)),
                metadata: None,
            },
        )
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    let step = result
        .state
        .steps
        .iter()
        .find(|s| s.kind == "tool-result-observed")
        .unwrap();
    assert!(
        step.content.as_deref().unwrap().starts_with("echo took "),
        "{step:?}"
    );
}

#[tokio::test]
async fn lifecycle_start_and_complete_are_observed_and_complete_is_reported() {
    let model = scripted([Scripted::text("fine")]);
    let calls = Calls::default();
    let started: Arc<Mutex<Option<RunStart>>> = Arc::default();
    let seen = Arc::clone(&started);
    let pipeline = handlers(move |c| {
        c.tap(LifecycleStart, move |start: &RunStart, _: &BaseCtx| {
            *seen.lock().unwrap() = Some(start.clone())
        })
        .on(LifecycleComplete, |end: &RunEnd, _: &BaseCtx| RunEnd {
            final_text: Some("[reviewed] fine".into()),
            ..end.clone()
        })
    });
    let recorder = Recorder::default();
    let kernel = builder(&model, pipeline, &calls)
        .max_steps(7)
        .build()
        .unwrap();
    let result = kernel
        .run(
            RunInput::new("how are you?")
                .run_id("run-1")
                .observer(Arc::new(recorder.clone())),
        )
        .await;
    let start = started.lock().unwrap().clone().unwrap();
    assert_eq!(
        (
            start.run_id.as_str(),
            start.input.as_str(),
            start.model_id.as_str(),
            start.max_steps
        ),
        ("run-1", "how are you?", "scripted/test", 7)
    );
    let Some(Seen::Finished(end)) = recorder.events().last().cloned() else {
        panic!()
    };
    assert_eq!(end["finalText"], "[reviewed] fine");
    assert_eq!(end["outcome"], "complete");
    assert_eq!(
        result.final_text.as_deref(),
        Some("fine"),
        "the run's own answer is unchanged"
    );
}

#[tokio::test]
async fn lifecycle_failure_reason_and_message_are_recorded() {
    let model = scripted([
        Scripted::tool_call("fail", json!({})),
        Scripted::text("gave up"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(
            LifecycleFailureTag,
            |failure: &LifecycleFailure, _: &BaseCtx| {
                assert_eq!(
                    (failure.reason, failure.failure_streak),
                    (FailureReason::ToolError, 1)
                );
                LifecycleFailure {
                    error_message: "storage is full".into(),
                    ..failure.clone()
                }
            },
        )
    });
    let recorder = Recorder::default();
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel
        .run(RunInput::new("go").observer(Arc::new(recorder.clone())))
        .await;
    let step = result
        .state
        .steps
        .iter()
        .find(|s| s.kind == "failure")
        .unwrap();
    assert_eq!(step.content.as_deref(), Some("storage is full"));
    assert!(recorder.events().contains(&Seen::Failure(
        "tool-error".into(),
        "storage is full".into()
    )));
}

#[tokio::test]
async fn control_strategy_evaluated_recommendation_is_acted_on() {
    let model = scripted([
        Scripted::tool_call("fail", json!({})),
        Scripted::text("unreachable"),
    ]);
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(
            ControlStrategyEvaluated,
            |evaluation: &StrategyEvaluation, _: &BaseCtx| {
                assert_eq!(evaluation.recommended_action, StrategyAction::Continue);
                StrategyEvaluation {
                    recommended_action: StrategyAction::Escalate,
                    ..evaluation.clone()
                }
            },
        )
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(result.outcome, RunOutcome::Error);
    assert!(
        result.error.unwrap().to_string().contains("escalated"),
        "no back-channel: escalation ends the run"
    );
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn decision_terminate_vetoes_continue_the_run_a_bounded_number_of_times() {
    let model = scripted([Scripted::text("first"), Scripted::text("second")]);
    let calls = Calls::default();
    let vetoed = Arc::new(Mutex::new(false));
    let pipeline = handlers(move |c| {
        c.on(
            DecisionTerminate,
            move |decision: &TerminateDecision, _: &BaseCtx| {
                let mut vetoed = vetoed.lock().unwrap();
                if *vetoed {
                    return None;
                }
                *vetoed = true;
                assert_eq!(decision.final_text.as_deref(), Some("first"));
                Some(TerminateDecision {
                    continue_with: Some("Double-check your answer.".into()),
                    ..decision.clone()
                })
            },
        )
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(
        model.requests()[1].messages.last(),
        Some(&KernelMessage::user("Double-check your answer."))
    );
    assert_eq!(result.final_text.as_deref(), Some("second"));

    // A handler that always vetoes is bounded.
    let model = Arc::new(
        ScriptedModel::new("scripted/test")
            .then(Scripted::text("again"))
            .cycling(),
    );
    let pipeline = handlers(|c| {
        c.on(DecisionTerminate, |d: &TerminateDecision, _: &BaseCtx| {
            TerminateDecision {
                continue_with: Some("no".into()),
                ..d.clone()
            }
        })
    });
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(result.outcome, RunOutcome::Complete);
    assert_eq!(model.requests().len(), 4, "three vetoes, then the run ends");
}

#[tokio::test]
async fn taps_never_change_what_the_kernel_uses() {
    let model = scripted([Scripted::text("untouched")]);
    let calls = Calls::default();
    let pipeline = handlers(|c| c.tap(MessageAssistant, |_: &KernelMessage, _: &BaseCtx| {}));
    let kernel = builder(&model, pipeline, &calls).build().unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(result.final_text.as_deref(), Some("untouched"));
}

/// The same tags, end to end through a real provider client: the reshaped request and the
/// reshaped tool result are what the HTTP server receives.
#[tokio::test]
async fn reshaped_requests_and_results_reach_a_real_provider_over_http() {
    use harness_core::model::{OpenAiModel, ProviderConfig};
    use harness_tests::mock_llm::{MockLlm, openai};

    let server = MockLlm::start().await.unwrap();
    server
        .push(openai::tool_calls(&[(
            "call_1",
            "echo",
            json!({"text": "token=abc123"}),
        )]))
        .push(openai::text("Done."));
    let model = OpenAiModel::new("openai/gpt-4o", ProviderConfig::new(server.url())).unwrap();
    let calls = Calls::default();
    let pipeline = handlers(|c| {
        c.on(ModelRequestTag, |request: &ModelRequest, _: &ModelCtx| {
            let mut request = request.clone();
            Arc::make_mut(&mut request.messages)
                .insert(0, KernelMessage::system("Memory: prefers short answers."));
            request
        })
        .on(
            MessageToolResult,
            |msg: &KernelMessage, _: &ToolResultCtx| {
                msg.with_content(msg.content().replace("abc123", "<SECRET>"))
            },
        )
    });
    let kernel = Kernel::builder()
        .model(model)
        .instructions("Be brief.")
        .pipeline(pipeline)
        .tool(echo(Arc::clone(&calls)))
        .build()
        .unwrap();
    let result = kernel.run(RunInput::new("echo the token")).await;
    assert_eq!(
        result.final_text.as_deref(),
        Some("Done."),
        "{:?}",
        result.error
    );
    assert_eq!(
        *calls.lock().unwrap(),
        ["token=abc123"],
        "the tool got the real value"
    );

    let requests = server.requests();
    let first = requests[0].body_json();
    assert_eq!(
        first["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(
        first["messages"][1],
        json!({"role": "system", "content": "Memory: prefers short answers."})
    );
    let second = requests[1].body_json();
    let tool_message = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert_eq!(tool_message["content"], "echo: token=<SECRET>");
}
