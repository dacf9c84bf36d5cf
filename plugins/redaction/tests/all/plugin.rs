#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The plugin in a real pipeline: every target, the vault round trip through `tool.call`,
//! and fail-closed behaviour.

use std::sync::Arc;

use harness_redaction::{Operator, Redaction, RedactionConfig, Redactor, Target, TargetPolicy};
use harness_tags::tags::{
    DisplayToolResultTag, MessageAssistant, MessageToolError, MessageToolResult, MessageUserTask,
    ModelRequestTag, ObservationCompressionSummary, ObservationToolResult, ThreadCloned,
    ThreadDeleted, ToolCallTag,
};
use harness_tags::{
    BaseCtx, DisplayToolResult, EmitError, EmitOutcome, KernelMessage, MemoryCtx, ModelCtx,
    ModelRequest, ObservationStep, Pipeline, Tag, TagContext, ThreadChange, ThreadCtx, ToolCall,
    ToolCallCtx, ToolResultCtx,
};
use serde_json::json;

const SECRET_TEXT: &str = "user bob@example.com, ssn 123-45-6789";
const REDACTED: &str = "user <EMAIL_ADDRESS>, ssn <US_SSN>";

fn emit<T: Tag>(
    pipeline: &Pipeline,
    payload: T::Payload,
    ctx: &T::Ctx,
) -> Result<T::Payload, EmitError>
where
    T::Ctx: TagContext,
{
    match pipeline.emit::<T>(payload, ctx).now() {
        Ok(Ok(EmitOutcome::Continue(payload))) => Ok(payload),
        Ok(Ok(EmitOutcome::Suppressed { by })) => panic!("suppressed by {by}"),
        Ok(Err(error)) => Err(error),
        Err(_) => panic!("the redaction handlers are synchronous"),
    }
}

fn base(thread: &str) -> BaseCtx {
    BaseCtx {
        thread_id: Some(Arc::from(thread)),
        ..BaseCtx::default()
    }
}

fn tool_ctx(thread: &str) -> ToolResultCtx {
    ToolResultCtx {
        base: base(thread),
        tool_name: "crm".to_owned(),
        call_id: "call_1".to_owned(),
        ..ToolResultCtx::default()
    }
}

#[test]
fn tool_results_and_errors_are_redacted_by_default() {
    let pipeline = Pipeline::builder()
        .plugin(Redaction::default())
        .build()
        .unwrap();
    let msg = KernelMessage::tool_result("call_1", "crm", SECRET_TEXT, false);
    let out = emit::<MessageToolResult>(&pipeline, msg, &tool_ctx("t")).unwrap();
    assert_eq!(out.content(), REDACTED);
    let msg = KernelMessage::tool_result("call_1", "crm", SECRET_TEXT, true);
    let out = emit::<MessageToolError>(&pipeline, msg, &tool_ctx("t")).unwrap();
    assert_eq!(out.content(), REDACTED);
    // Other targets are off by default.
    let out =
        emit::<MessageUserTask>(&pipeline, KernelMessage::user(SECRET_TEXT), &base("t")).unwrap();
    assert_eq!(out.content(), SECRET_TEXT);
}

#[test]
fn every_target_can_be_turned_on() {
    let pipeline = Pipeline::builder()
        .plugin(Redaction::default().everywhere())
        .build()
        .unwrap();
    let out =
        emit::<MessageUserTask>(&pipeline, KernelMessage::user(SECRET_TEXT), &base("t")).unwrap();
    assert_eq!(out.content(), REDACTED);
    let out =
        emit::<MessageAssistant>(&pipeline, KernelMessage::assistant(SECRET_TEXT), &base("t"))
            .unwrap();
    assert_eq!(out.content(), REDACTED);

    let request = ModelRequest {
        model: "openai/gpt".to_owned(),
        system: format!("context: {SECRET_TEXT}"),
        messages: Arc::new(vec![
            KernelMessage::user("hi"),
            KernelMessage::user(SECRET_TEXT),
        ]),
        ..ModelRequest::default()
    };
    let ctx = ModelCtx {
        base: base("t"),
        ..ModelCtx::default()
    };
    let out = emit::<ModelRequestTag>(&pipeline, request, &ctx).unwrap();
    assert_eq!(out.system, format!("context: {REDACTED}"));
    assert_eq!(out.messages[0].content(), "hi");
    assert_eq!(out.messages[1].content(), REDACTED);

    let step = ObservationStep {
        kind: "tool-result".to_owned(),
        content: Some(SECRET_TEXT.to_owned()),
        metadata: json!({"args": {"to": "bob@example.com"}, "n": 1})
            .as_object()
            .cloned(),
    };
    let out = emit::<ObservationToolResult>(&pipeline, step.clone(), &tool_ctx("t")).unwrap();
    assert_eq!(out.content.as_deref(), Some(REDACTED));
    assert_eq!(
        serde_json::Value::Object(out.metadata.unwrap()),
        json!({"args": {"to": "<EMAIL_ADDRESS>"}, "n": 1})
    );
    // `observation.*` covers every observation tag, whatever its context.
    let out =
        emit::<ObservationCompressionSummary>(&pipeline, step, &MemoryCtx::default()).unwrap();
    assert_eq!(out.content.as_deref(), Some(REDACTED));

    // UIs see bullets, from what the tool returned, while the model sees entity names.
    let shown = DisplayToolResult {
        tool_call_id: "call_1".to_owned(),
        tool_name: "crm".to_owned(),
        content: REDACTED.to_owned(),
        tool_output: SECRET_TEXT.to_owned(),
        is_error: false,
    };
    let out = emit::<DisplayToolResultTag>(&pipeline, shown, &tool_ctx("t")).unwrap();
    assert_eq!(out.content, "user ••••••, ssn ••••••");
    // Nothing to hide in the output: the screen shows what the model sees.
    let plain = DisplayToolResult {
        tool_call_id: "call_2".to_owned(),
        tool_name: "crm".to_owned(),
        content: "3 rows".to_owned(),
        tool_output: "3 rows".to_owned(),
        is_error: false,
    };
    let out = emit::<DisplayToolResultTag>(&pipeline, plain, &tool_ctx("t")).unwrap();
    assert_eq!(out.content, "3 rows");
}

#[test]
fn a_target_can_have_its_own_operator() {
    let plugin = Redaction::default().target_operator(Target::UserTask, Operator::mask(4));
    assert_eq!(
        plugin.policy(Target::UserTask),
        TargetPolicy {
            enabled: true,
            operator: Some(Operator::mask(4))
        }
    );
    let pipeline = Pipeline::builder().plugin(plugin).build().unwrap();
    let out = emit::<MessageUserTask>(
        &pipeline,
        KernelMessage::user("ssn 123-45-6789"),
        &base("t"),
    )
    .unwrap();
    assert_eq!(out.content(), "ssn *******6789");
}

#[test]
fn pseudonyms_come_back_as_real_values_in_tool_calls() {
    let redactor = Redactor::builder()
        .operator(Operator::Pseudonym)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder()
        .plugin(Redaction::new(redactor))
        .build()
        .unwrap();

    // The model sees a pseudonym in the tool result...
    let msg = KernelMessage::tool_result("call_1", "crm", "owner: bob@example.com", false);
    let seen = emit::<MessageToolResult>(&pipeline, msg, &tool_ctx("thread-1")).unwrap();
    let pseudonym = seen.content().trim_start_matches("owner: ").to_owned();
    assert!(pseudonym.starts_with("<EMAIL_ADDRESS_"), "{pseudonym}");
    assert!(!seen.content().contains("bob@example.com"));

    // ...passes it back in a tool call, and the tool receives the real value.
    let call = ToolCall {
        id: "call_2".to_owned(),
        name: "send_email".to_owned(),
        arguments: json!({"to": pseudonym, "cc": [format!("x {pseudonym}")], "n": 3}),
    };
    let ctx = ToolCallCtx {
        base: base("thread-1"),
        tool_name: "send_email".to_owned(),
        call_id: "call_2".to_owned(),
        ..ToolCallCtx::default()
    };
    let call = emit::<ToolCallTag>(&pipeline, call, &ctx).unwrap();
    assert_eq!(
        call.arguments,
        json!({"to": "bob@example.com", "cc": ["x bob@example.com"], "n": 3})
    );

    // The same value gets the same pseudonym again in the thread.
    let msg = KernelMessage::tool_result("call_3", "crm", "owner: bob@example.com", false);
    let again = emit::<MessageToolResult>(&pipeline, msg, &tool_ctx("thread-1")).unwrap();
    assert_eq!(again.content(), seen.content());

    // Another thread cannot resolve it; a cloned thread can; a deleted thread forgets it.
    let other = ToolCallCtx {
        base: base("thread-2"),
        ..ctx.clone()
    };
    let call2 = ToolCall {
        id: "c".to_owned(),
        name: "send_email".to_owned(),
        arguments: json!({"to": pseudonym}),
    };
    let out = emit::<ToolCallTag>(&pipeline, call2.clone(), &other).unwrap();
    assert_eq!(out.arguments, json!({"to": pseudonym}));

    let thread_ctx = ThreadCtx::default();
    let cloned = ThreadChange {
        thread_id: "thread-2".to_owned(),
        source_thread_id: Some("thread-1".to_owned()),
        ..ThreadChange::default()
    };
    emit::<ThreadCloned>(&pipeline, cloned, &thread_ctx).unwrap();
    let out = emit::<ToolCallTag>(&pipeline, call2.clone(), &other).unwrap();
    assert_eq!(out.arguments, json!({"to": "bob@example.com"}));

    let deleted = ThreadChange {
        thread_id: "thread-1".to_owned(),
        ..ThreadChange::default()
    };
    emit::<ThreadDeleted>(&pipeline, deleted, &thread_ctx).unwrap();
    let out = emit::<ToolCallTag>(&pipeline, call2, &ctx).unwrap();
    assert_eq!(out.arguments, json!({"to": pseudonym}));
}

#[test]
fn a_text_over_the_limit_fails_the_emit_instead_of_passing() {
    let redactor = Redactor::builder().max_input_bytes(16).build().unwrap();
    let pipeline = Pipeline::builder()
        .plugin(Redaction::new(redactor))
        .build()
        .unwrap();
    let msg = KernelMessage::tool_result("call_1", "crm", SECRET_TEXT, false);
    let error = emit::<MessageToolResult>(&pipeline, msg, &tool_ctx("t")).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("redaction"), "{text}");
    assert!(text.contains("max_input_bytes"), "{text}");
}

#[test]
fn an_invalid_configuration_fails_start_and_every_emit() {
    let config: RedactionConfig = serde_json::from_value(json!({
        "custom": [{"entity": "BROKEN", "pattern": "(unclosed"}]
    }))
    .unwrap();
    assert!(Redaction::try_from_config(config.clone()).is_err());

    let plugin = Redaction::from_config(config);
    assert!(plugin.redactor().is_err());
    let pipeline = Pipeline::builder().plugin(plugin).build().unwrap();
    let started = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(pipeline.start());
    assert!(started.is_err());

    let msg = KernelMessage::tool_result("call_1", "crm", SECRET_TEXT, false);
    let error = emit::<MessageToolResult>(&pipeline, msg, &tool_ctx("t")).unwrap_err();
    assert!(error.to_string().contains("fix the pattern"), "{error}");
    // Even a text without findings does not pass.
    let msg = KernelMessage::tool_result("call_1", "crm", "nothing here", false);
    assert!(emit::<MessageToolResult>(&pipeline, msg, &tool_ctx("t")).is_err());
}

#[test]
fn configuration_from_json() {
    let config: RedactionConfig = serde_json::from_value(json!({
        "operator": {"type": "replace"},
        "operators": {"US_SSN": {"type": "mask", "keepLast": 4}},
        "deny": [{"entity": "PROJECT", "values": ["Falcon"]}],
        "allow": ["bob@example.com"],
        "targets": {"user-task": {"enabled": true}, "tool-error": {"enabled": false}}
    }))
    .unwrap();
    let plugin = Redaction::try_from_config(config).unwrap();
    let settings = harness_tags::Plugin::settings(&plugin);
    assert_eq!(settings["targets"]["message.user-task"]["enabled"], true);
    let pipeline = Pipeline::builder().plugin(plugin).build().unwrap();
    let out = emit::<MessageUserTask>(
        &pipeline,
        KernelMessage::user("Falcon: bob@example.com 123-45-6789"),
        &base("t"),
    )
    .unwrap();
    assert_eq!(out.content(), "<PROJECT>: bob@example.com *******6789");
    let msg = KernelMessage::tool_result("c", "crm", SECRET_TEXT, true);
    let out = emit::<MessageToolError>(&pipeline, msg, &tool_ctx("t")).unwrap();
    assert_eq!(out.content(), SECRET_TEXT);
}
