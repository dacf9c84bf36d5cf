//! `Harness::invoke_tool`: one tool called outside a run, through the same handlers and gate
//! as a model's call.

use std::sync::Arc;

use harness_core::harness::{Harness, HarnessBuilder, Mode};
use harness_core::kernel::Refusal;
use harness_core::model::ScriptedModel;
use harness_tags::tags::{MessageToolResult, ToolCallTag, ToolGateResult};
use harness_tags::{GateVerdict, KernelMessage, ToolCallCtx, ToolResultCtx};
use harness_tests::fixtures::{Calls, echo};
use serde_json::json;

fn harness(calls: &Calls, compose: fn(harness_tags::Compose) -> harness_tags::Compose) -> Harness {
    let builder: HarnessBuilder = Harness::builder("invoke")
        .mode(Mode::new("build"))
        .model(ScriptedModel::new("scripted/invoke"))
        .tool(echo(Arc::clone(calls)))
        .compose(compose);
    builder.build().unwrap()
}

fn nothing(c: harness_tags::Compose) -> harness_tags::Compose {
    c
}

#[tokio::test]
async fn a_valid_call_runs_and_a_bad_one_is_refused_before_it_runs() {
    let calls = Calls::default();
    let harness = harness(&calls, nothing);
    let done = harness
        .invoke_tool("echo", json!({ "text": "hi" }))
        .await
        .unwrap();
    assert!(done.refused.is_none() && !done.is_error, "{done:?}");
    assert_eq!(done.content, "echo: hi");
    assert!(done.call.id.starts_with("invoke_"));

    let invalid = harness
        .invoke_tool("echo", json!({ "text": 3 }))
        .await
        .unwrap();
    assert_eq!(invalid.refused, Some(Refusal::InvalidArguments));
    assert!(invalid.is_error);
    assert!(
        invalid.content.contains("input schema"),
        "{}",
        invalid.content
    );
    let unknown = harness.invoke_tool("nope", json!({})).await.unwrap();
    assert_eq!(unknown.refused, Some(Refusal::UnknownTool));
    assert!(
        unknown.content.contains("no tool named `nope`"),
        "{}",
        unknown.content
    );
    assert_eq!(*calls.lock().unwrap(), ["hi"]);
}

fn denies_echo(c: harness_tags::Compose) -> harness_tags::Compose {
    c.on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| {
        GateVerdict::deny("not today")
    })
}

fn asks_for_echo(c: harness_tags::Compose) -> harness_tags::Compose {
    c.on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| {
        GateVerdict::ask("echo needs a look")
    })
}

#[tokio::test]
async fn the_gate_refuses_and_nobody_is_asked() {
    for compose in [denies_echo as fn(_) -> _, asks_for_echo] {
        let calls = Calls::default();
        let harness = harness(&calls, compose);
        let refused = harness
            .invoke_tool("echo", json!({ "text": "hi" }))
            .await
            .unwrap();
        assert_eq!(refused.refused, Some(Refusal::Blocked), "{refused:?}");
        assert!(refused.is_error);
        assert!(calls.lock().unwrap().is_empty(), "the tool ran");
    }
}

fn reshapes(c: harness_tags::Compose) -> harness_tags::Compose {
    c.on(
        ToolCallTag,
        |call: &harness_tags::ToolCall, _: &ToolCallCtx| {
            let mut call = call.clone();
            call.arguments = json!({ "text": "reshaped" });
            call
        },
    )
    .on(
        MessageToolResult,
        |message: &KernelMessage, _: &ToolResultCtx| match message {
            KernelMessage::ToolResult {
                tool_call_id,
                tool_name,
                content,
                ..
            } => KernelMessage::tool_result(
                tool_call_id,
                tool_name,
                content.replace("reshaped", "[REDACTED]"),
                false,
            ),
            other => other.clone(),
        },
    )
}

#[tokio::test]
async fn the_call_and_its_result_pass_the_handlers() {
    let calls = Calls::default();
    let harness = harness(&calls, reshapes);
    let done = harness
        .invoke_tool("echo", json!({ "text": "secret" }))
        .await
        .unwrap();
    assert_eq!(done.call.arguments, json!({ "text": "reshaped" }));
    assert_eq!(*calls.lock().unwrap(), ["reshaped"]);
    assert_eq!(done.content, "echo: [REDACTED]");
}
