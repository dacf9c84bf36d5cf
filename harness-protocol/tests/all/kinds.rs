//! One source for an event's `type`: `HarnessEvent::kind()` against serde, for every variant.

use std::collections::BTreeSet;
use std::sync::Arc;

use harness_protocol::{
    AgentEndReason, DisplayState, HarnessEvent, HarnessMessage, MessageRole, ModelScope,
    OmProgress, OmRole, OmTrigger, OutputStream, PartKind, TaskItem, TaskStatus, ThreadInfo,
};
use harness_tags::{ToolCategory, Usage};
use serde_json::{Value, json};

/// One event of every variant (the test below fails when a variant is missing here).
pub(crate) fn one_of_each() -> Vec<HarnessEvent> {
    let message = Arc::new(HarnessMessage {
        id: "m1".into(),
        role: MessageRole::Assistant,
        content: Vec::new(),
        created_at: 1,
        stop_reason: None,
        error_message: None,
    });
    let text = |s: &str| s.to_owned();
    vec![
        HarnessEvent::ModeChanged {
            mode_id: text("build"),
            previous_mode_id: Some(text("plan")),
        },
        HarnessEvent::ModelChanged {
            model_id: text("openai/gpt-4o"),
            scope: ModelScope::Mode,
            mode_id: Some(text("build")),
        },
        HarnessEvent::ThreadChanged {
            thread_id: text("t2"),
            previous_thread_id: None,
        },
        HarnessEvent::ThreadCreated {
            thread: ThreadInfo {
                id: text("t2"),
                resource_id: text("r"),
                title: None,
                created_at: 1,
                updated_at: 2,
            },
        },
        HarnessEvent::ThreadDeleted {
            thread_id: text("t1"),
        },
        HarnessEvent::StateChanged {
            state: json!({"yolo": true}),
            changed_keys: vec![text("yolo")],
        },
        HarnessEvent::AgentStart { run_id: text("r1") },
        HarnessEvent::AgentEnd {
            run_id: text("r1"),
            reason: AgentEndReason::Complete,
            error: None,
        },
        HarnessEvent::MessageStart {
            message: Arc::clone(&message),
        },
        HarnessEvent::MessageUpdate {
            message: Arc::clone(&message),
        },
        HarnessEvent::MessageDelta {
            message_id: "m1".into(),
            part: 0,
            kind: PartKind::Text,
            delta: text("more"),
        },
        HarnessEvent::MessageEnd { message },
        HarnessEvent::ToolStart {
            tool_call_id: text("c1"),
            tool_name: text("read_file"),
            args: json!({"path": "a"}),
            category: Some(ToolCategory::Read),
        },
        HarnessEvent::ToolApprovalRequired {
            tool_call_id: text("c1"),
            tool_name: text("shell"),
            args: json!({}),
            category: None,
            reason: Some(text("asks")),
        },
        HarnessEvent::ToolApprovalAnswered {
            tool_call_id: text("c1"),
            approved: true,
        },
        HarnessEvent::ToolSuspended {
            tool_call_id: text("c1"),
            tool_name: text("ask_user"),
            args: json!({}),
            suspend_payload: json!({"question": "?"}),
            resume_schema: None,
        },
        HarnessEvent::ToolUpdate {
            tool_call_id: text("c1"),
            partial_result: json!(1),
        },
        HarnessEvent::ToolEnd {
            tool_call_id: text("c1"),
            result: text("ok"),
            is_error: false,
        },
        HarnessEvent::ToolInputStart {
            tool_call_id: text("c1"),
            tool_name: text("t"),
        },
        HarnessEvent::ToolInputDelta {
            tool_call_id: text("c1"),
            args_text_delta: text("{"),
        },
        HarnessEvent::ToolInputEnd {
            tool_call_id: text("c1"),
        },
        HarnessEvent::ShellOutput {
            tool_call_id: text("c1"),
            output: text("hi\n"),
            stream: OutputStream::Stdout,
        },
        HarnessEvent::UsageUpdate {
            usage: Usage::default(),
        },
        HarnessEvent::Info {
            message: text("note"),
        },
        HarnessEvent::Error {
            error: text("broke"),
            error_type: Some(text("storage")),
            retryable: Some(true),
            retry_delay_ms: None,
        },
        HarnessEvent::FollowUpQueued {
            count: 1,
            follow_ups: vec![text("next")],
        },
        HarnessEvent::SubagentStart {
            tool_call_id: text("c1"),
            agent_type: text("explore"),
            task: text("look"),
            model_id: text("scripted/a"),
            forked: false,
        },
        HarnessEvent::SubagentTextDelta {
            tool_call_id: text("c1"),
            agent_type: text("explore"),
            text_delta: text("found"),
        },
        HarnessEvent::SubagentToolStart {
            tool_call_id: text("c1"),
            agent_type: text("explore"),
            sub_tool_name: text("grep"),
            sub_tool_args: json!({}),
        },
        HarnessEvent::SubagentToolEnd {
            tool_call_id: text("c1"),
            agent_type: text("explore"),
            sub_tool_name: text("grep"),
            sub_tool_result: text("none"),
            is_error: false,
        },
        HarnessEvent::SubagentEnd {
            tool_call_id: text("c1"),
            agent_type: text("explore"),
            result: text("done"),
            is_error: false,
            duration_ms: 5,
        },
        HarnessEvent::TaskUpdated {
            tasks: vec![TaskItem {
                id: text("a"),
                content: text("A"),
                status: TaskStatus::Pending,
                active_form: None,
            }],
        },
        HarnessEvent::DisplayStateChanged {
            display_state: Arc::new(DisplayState::default()),
        },
        HarnessEvent::OmStatus {
            progress: OmProgress::default(),
        },
        HarnessEvent::OmObservationStart { pending_tokens: 1 },
        HarnessEvent::OmObservationEnd {
            observed_messages: 1,
            observation_tokens: 2,
            duration_ms: 3,
        },
        HarnessEvent::OmObservationFailed {
            error: text("x"),
            attempt: 1,
        },
        HarnessEvent::OmReflectionStart {
            observation_tokens: 1,
        },
        HarnessEvent::OmReflectionEnd {
            observation_tokens: 1,
            generation_count: 1,
            duration_ms: 2,
        },
        HarnessEvent::OmReflectionFailed {
            error: text("x"),
            attempt: 1,
        },
        HarnessEvent::OmBufferingStart { pending_tokens: 1 },
        HarnessEvent::OmBufferingEnd {
            buffered: 1,
            tokens: 2,
        },
        HarnessEvent::OmBufferingFailed { error: text("x") },
        HarnessEvent::OmActivation {
            triggered_by: OmTrigger::Threshold,
            activated_tokens: 1,
        },
        HarnessEvent::OmModelChanged {
            role: OmRole::Observer,
            model_id: text("scripted/o"),
        },
    ]
}

/// The `type` constants the JSON Schema allows for an event (generated from serde's
/// attributes by schemars).
fn schema_kinds() -> BTreeSet<String> {
    let schema = harness_protocol::envelope_schema();
    let event = &schema["$defs"]["HarnessEvent"];
    let variants = event["oneOf"]
        .as_array()
        .expect("HarnessEvent is a oneOf of its variants");
    variants
        .iter()
        .map(|variant| {
            variant["properties"]["type"]["const"]
                .as_str()
                .unwrap_or_else(|| panic!("a variant without a `type` constant: {variant}"))
                .to_owned()
        })
        .collect()
}

#[test]
fn every_kind_is_its_serialized_type() {
    let events = one_of_each();
    for event in &events {
        let json = serde_json::to_value(event).expect("an event serializes");
        assert_eq!(json["type"], Value::from(event.kind()), "{event:?}");
        let back: HarnessEvent = serde_json::from_value(json).expect("an event deserializes");
        assert_eq!(back.kind(), event.kind());
    }
    let covered: BTreeSet<String> = events.iter().map(|e| e.kind().to_owned()).collect();
    assert_eq!(covered.len(), events.len(), "one event of each variant");
    assert_eq!(
        covered,
        schema_kinds(),
        "every variant of HarnessEvent has an instance in `one_of_each`"
    );
}
