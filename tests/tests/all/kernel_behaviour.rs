//! The kernel under bad input and at its edges: malformed calls, unknown tools, tools that
//! panic or hang, empty responses, dropped streams, parallel calls, aborts, limits, and the
//! back-channel for approvals and escalations. Every case ends in a defined outcome.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use harness_core::kernel::{Kernel, KernelBuilder, KernelError, RunInput};
use harness_core::model::{
    Model, ModelError, ModelId, ModelStream, RetryPolicy, Scripted, ScriptedModel, StreamEvent,
};
use harness_core::tool::{
    ApprovalAnswer, ApprovalRequest, HarnessChannel, SuspendError, Suspension, ToolProgress,
};
use harness_tags::prelude::*;
use harness_tests::fixtures::{Calls, Recorder, Seen, echo, explode, hang, meet};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn scripted(turns: impl IntoIterator<Item = Scripted>) -> Arc<ScriptedModel> {
    let mut model = ScriptedModel::new("scripted/test");
    for turn in turns {
        model = model.then(turn);
    }
    Arc::new(model)
}

fn kernel(model: &Arc<ScriptedModel>, calls: &Calls) -> KernelBuilder {
    Kernel::builder()
        .model(Arc::clone(model) as Arc<dyn Model>)
        .tool(echo(Arc::clone(calls)))
        .tool(explode())
        .tool(hang(Duration::from_secs(5)))
        .tool(meet(2))
}

fn tool_results(state: &KernelState) -> Vec<(String, String, bool)> {
    state
        .messages
        .iter()
        .filter_map(|m| match m {
            KernelMessage::ToolResult {
                tool_name,
                content,
                is_error,
                ..
            } => Some((tool_name.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn malformed_json_arguments_are_healed_and_the_tool_runs() {
    let model = scripted([
        Scripted::malformed_tool_call("echo", "{text: 'hi there',}"),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    assert_eq!(*calls.lock().unwrap(), ["hi there"]);
    assert_eq!(result.outcome, RunOutcome::Complete);
}

#[tokio::test]
async fn unrepairable_json_and_unknown_tools_become_errors_the_model_sees() {
    let model = scripted([
        Scripted::malformed_tool_call("echo", "text = hi"),
        Scripted::tool_call("launch_rockets", json!({})),
        Scripted::text("I could not do it."),
    ]);
    let calls = Calls::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    let results = tool_results(&result.state);
    assert!(results[0].1.contains("are not valid JSON"), "{results:?}");
    assert!(
        results[1]
            .1
            .starts_with("There is no tool named `launch_rockets`"),
        "{results:?}"
    );
    assert!(results.iter().all(|r| r.2));
    assert_eq!(result.outcome, RunOutcome::Complete);
    assert!(calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_panicking_tool_is_an_error_result_and_the_run_goes_on() {
    let model = scripted([
        Scripted::tool_call("explode", json!({})),
        Scripted::text("recovered"),
    ]);
    let calls = Calls::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    assert_eq!(
        tool_results(&result.state),
        [(
            "explode".into(),
            "`explode` crashed: panicked: the tool blew up".into(),
            true
        )]
    );
    assert_eq!(result.final_text.as_deref(), Some("recovered"));
}

#[tokio::test(start_paused = true)]
async fn a_hanging_tool_is_stopped_by_its_timeout() {
    let model = scripted([
        Scripted::tool_call("hang", json!({})),
        Scripted::text("moved on"),
    ]);
    let calls = Calls::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    assert_eq!(
        tool_results(&result.state),
        [(
            "hang".into(),
            "`hang` did not finish within 5 s and was stopped.".into(),
            true
        )]
    );
    assert_eq!(result.final_text.as_deref(), Some("moved on"));
}

#[tokio::test]
async fn an_empty_response_is_a_failure_the_model_is_told_about() {
    let model = scripted([Scripted::text(""), Scripted::text("here")]);
    let calls = Calls::default();
    let recorder = Recorder::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go").observer(Arc::new(recorder.clone())))
        .await;
    assert_eq!(result.final_text.as_deref(), Some("here"));
    assert!(
        model.requests()[1]
            .messages
            .contains(&KernelMessage::system(
                "Your last response was empty. Answer the user, or call a tool."
            ))
    );
    assert!(recorder.events().contains(&Seen::Failure(
        "model-error".into(),
        "the model returned an empty response".into()
    )));
}

fn dropped_stream() -> Scripted {
    Scripted::Events(vec![
        Ok(StreamEvent::TextDelta("partial ".into())),
        Err(ModelError::Connection {
            provider: "scripted".into(),
            message: "connection reset".into(),
        }),
    ])
}

#[tokio::test(start_paused = true)]
async fn a_dropped_stream_is_retried_with_backoff() {
    let model = scripted([dropped_stream(), Scripted::text("complete answer")]);
    let calls = Calls::default();
    let recorder = Recorder::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go").observer(Arc::new(recorder.clone())))
        .await;
    assert_eq!(result.final_text.as_deref(), Some("complete answer"));
    assert_eq!(
        result.state.messages.len(),
        2,
        "the partial answer was never stored"
    );
    assert!(recorder.events().contains(&Seen::Retry(1)));
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn exhausted_retries_end_the_run_with_the_model_error() {
    let model = scripted((0..4).map(|_| dropped_stream()));
    let calls = Calls::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    assert_eq!(result.outcome, RunOutcome::Error);
    assert!(matches!(
        result.error,
        Some(KernelError::Model(ModelError::Connection { .. }))
    ));
    assert!(
        result
            .error
            .unwrap()
            .to_string()
            .contains("connection reset")
    );
    assert_eq!(
        model.requests().len(),
        4,
        "RetryPolicy::default makes 4 attempts"
    );

    let auth = ModelError::Auth {
        provider: "openai".into(),
        message: "invalid key".into(),
        env_var: Some("OPENAI_API_KEY".into()),
    };
    let model = scripted([Scripted::Error(auth)]);
    let result = kernel(&model, &calls)
        .retry(RetryPolicy::default())
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    assert_eq!(model.requests().len(), 1, "an auth failure is not retried");
    assert!(result.error.unwrap().to_string().contains("OPENAI_API_KEY"));
}

#[tokio::test]
async fn parallel_calls_run_at_once_and_results_keep_call_order() {
    let model = scripted([
        Scripted::tool_calls([
            ("meet", json!({"text": "first"})),
            ("meet", json!({"text": "second"})),
        ]),
        Scripted::text("both met"),
    ]);
    let calls = Calls::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    // `meet` waits for two concurrent calls: run one by one, this would hang.
    assert_eq!(
        tool_results(&result.state),
        [
            ("meet".into(), "met: first".into(), false),
            ("meet".into(), "met: second".into(), false)
        ]
    );
}

#[tokio::test]
async fn aborting_while_a_tool_runs_ends_aborted_with_every_call_answered() {
    let model = scripted([
        Scripted::tool_calls([("hang", json!({})), ("echo", json!({"text": "x"}))]),
        Scripted::text("never"),
    ]);
    let calls = Calls::default();
    let abort = CancellationToken::new();
    let trigger = abort.clone();
    let observer = move |event: harness_core::kernel::KernelEvent| {
        if let harness_core::kernel::KernelEvent::ToolStarted { call } = event
            && call.name == "hang"
        {
            trigger.cancel();
        }
    };
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(
            RunInput::new("go")
                .abort(abort)
                .observer(Arc::new(observer)),
        )
        .await;
    assert_eq!(result.outcome, RunOutcome::Aborted);
    // Both calls are answered: the finished one with its result, the stuck one as aborted.
    assert_eq!(
        tool_results(&result.state),
        [
            (
                "hang".into(),
                "Aborted by the user before the tool ran or finished.".into(),
                true
            ),
            ("echo".into(), "echo: x".into(), false),
        ]
    );
    assert_eq!(model.requests().len(), 1);
}

/// A model whose stream never yields, to abort in the middle of a model call.
struct Silent(ModelId);

#[async_trait]
impl Model for Silent {
    fn id(&self) -> &ModelId {
        &self.0
    }

    async fn stream(&self, _: &ModelRequest) -> Result<ModelStream, ModelError> {
        Ok(futures_util::stream::pending().boxed())
    }
}

#[tokio::test]
async fn aborting_during_a_model_call_leaves_no_half_written_state() {
    let abort = CancellationToken::new();
    let kernel = Kernel::builder()
        .model(Silent(ModelId::new("test/silent").unwrap()))
        .build()
        .unwrap();
    let run = tokio::spawn({
        let abort = abort.clone();
        async move { kernel.run(RunInput::new("hello").abort(abort)).await }
    });
    tokio::task::yield_now().await;
    abort.cancel();
    let result = run.await.unwrap();
    assert_eq!(result.outcome, RunOutcome::Aborted);
    assert_eq!(*result.state.messages, [KernelMessage::user("hello")]);
}

#[tokio::test]
async fn max_steps_and_stop_when_end_the_run() {
    let model = Arc::new(
        ScriptedModel::new("scripted/test")
            .then(Scripted::tool_call("echo", json!({"text": "again"})))
            .cycling(),
    );
    let calls = Calls::default();
    let result = kernel(&model, &calls)
        .max_steps(3)
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    assert_eq!((result.outcome, result.steps), (RunOutcome::MaxSteps, 3));

    let model = Arc::new(
        ScriptedModel::new("scripted/test")
            .then(Scripted::tool_call("echo", json!({"text": "x"})))
            .cycling(),
    );
    let result = kernel(&model, &calls)
        .stop_when(|state: &KernelState| state.steps.iter().any(|s| s.kind == "tool-result"))
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    assert_eq!((result.outcome, result.steps), (RunOutcome::Complete, 1));
}

#[tokio::test]
async fn usage_adds_up_over_the_run() {
    let model = scripted([
        Scripted::tool_call("echo", json!({"text": "x"})),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let result = kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go"))
        .await;
    assert_eq!(
        (result.usage.input_tokens, result.usage.output_tokens),
        (20, 10)
    );
    assert_eq!(result.state.usage, result.usage);
}

#[derive(Default)]
struct Channel {
    approve: bool,
    escalation_answer: Option<String>,
    approvals: Mutex<Vec<String>>,
}

#[async_trait]
impl HarnessChannel for Channel {
    async fn suspend(&self, _: Suspension) -> Result<Value, SuspendError> {
        Err(SuspendError::Unavailable)
    }

    fn progress(&self, _: &str, _: ToolProgress) {}

    async fn approve(&self, request: ApprovalRequest) -> ApprovalAnswer {
        self.approvals
            .lock()
            .unwrap()
            .push(request.call.name.clone());
        if self.approve {
            ApprovalAnswer::Approve
        } else {
            ApprovalAnswer::Decline {
                reason: "not now".into(),
            }
        }
    }

    async fn escalate(&self, _: &str) -> Option<String> {
        self.escalation_answer.clone()
    }
}

fn asking() -> Pipeline {
    Pipeline::builder()
        .compose(|c| {
            c.on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| {
                GateVerdict::ask("it echoes")
            })
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn ask_verdicts_go_to_the_back_channel() {
    for approve in [true, false] {
        let model = scripted([
            Scripted::tool_call("echo", json!({"text": "x"})),
            Scripted::text("done"),
        ]);
        let calls = Calls::default();
        let channel = Arc::new(Channel {
            approve,
            ..Channel::default()
        });
        let result = kernel(&model, &calls)
            .pipeline(asking())
            .build()
            .unwrap()
            .run(RunInput::new("go").channel(Arc::clone(&channel) as Arc<dyn HarnessChannel>))
            .await;
        assert_eq!(*channel.approvals.lock().unwrap(), ["echo"]);
        let results = tool_results(&result.state);
        if approve {
            assert_eq!(results, [("echo".into(), "echo: x".into(), false)]);
        } else {
            assert_eq!(
                results,
                [(
                    "echo".into(),
                    "The user declined `echo`: not now".into(),
                    true
                )]
            );
        }
    }
}

#[tokio::test]
async fn escalation_asks_the_back_channel_and_continues_with_the_answer() {
    let escalate = Pipeline::builder()
        .compose(|c| {
            c.on(
                ControlStrategyEvaluated,
                |e: &StrategyEvaluation, _: &BaseCtx| StrategyEvaluation {
                    recommended_action: harness_tags::StrategyAction::Escalate,
                    ..e.clone()
                },
            )
        })
        .build()
        .unwrap();
    let model = scripted([
        Scripted::tool_call("explode", json!({})),
        Scripted::text("ok, skipping it"),
    ]);
    let calls = Calls::default();
    let channel = Arc::new(Channel {
        escalation_answer: Some("Skip that tool.".into()),
        ..Channel::default()
    });
    let result = kernel(&model, &calls)
        .pipeline(escalate)
        .build()
        .unwrap()
        .run(RunInput::new("go").channel(channel))
        .await;
    assert_eq!(result.final_text.as_deref(), Some("ok, skipping it"));
    assert_eq!(
        model.requests()[1].messages.last(),
        Some(&KernelMessage::user("Skip that tool."))
    );
}

#[tokio::test]
async fn the_observer_sees_the_run_unfold_in_order() {
    let model = scripted([
        Scripted::tool_call("echo", json!({"text": "x"})),
        Scripted::text("done"),
    ]);
    let calls = Calls::default();
    let recorder = Recorder::default();
    kernel(&model, &calls)
        .build()
        .unwrap()
        .run(RunInput::new("go").observer(Arc::new(recorder.clone())))
        .await;
    let events = recorder.events();
    let position = |wanted: &Seen| {
        events
            .iter()
            .position(|e| e == wanted)
            .unwrap_or_else(|| panic!("{wanted:?} missing in {events:?}"))
    };
    let started = position(&Seen::RunStarted);
    let input = position(&Seen::ToolInput("echo".into()));
    let ran = position(&Seen::ToolStarted("echo".into(), json!({"text": "x"})));
    let finished = position(&Seen::ToolFinished("echo".into(), "echo: x".into(), false));
    let text = position(&Seen::Text("done".into()));
    assert!(started < input && input < ran && ran < finished && finished < text);
    assert!(matches!(events.last(), Some(Seen::Finished(end)) if end["outcome"] == "complete"));
}

#[tokio::test]
async fn a_kernel_without_a_model_says_so() {
    let result = Kernel::builder()
        .build()
        .unwrap()
        .run(RunInput::new("hi"))
        .await;
    assert_eq!(result.outcome, RunOutcome::Error);
    assert!(matches!(result.error, Some(KernelError::NoModel)));
}
