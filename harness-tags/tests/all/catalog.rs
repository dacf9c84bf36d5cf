//! The standard catalog: its size, order, schemas and rendering, and the JSON form of its
//! payload and context types against the way the reference documents them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use harness_tags::{
    GateDecision, GateVerdict, KernelMessage, LifecycleFailure, NudgeCtx, ObservationStep, Phase,
    Severity, StrategyAction, StrategyEvaluation, Tag, ToolCall, ToolResultCtx, catalog,
    duplicate_names, lookup,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

#[test]
fn the_standard_catalog_has_every_v1_tag_sorted_with_schemas() {
    let tags = catalog();
    assert!(tags.len() >= 30, "only {} tags", tags.len());
    assert!(
        tags.windows(2).all(|w| w[0].name() < w[1].name()),
        "not sorted or duplicated"
    );
    assert!(duplicate_names().is_empty());

    for expected in [
        "prompt.system",
        "message.user-task",
        "message.assistant",
        "message.tool-result",
        "message.tool-error",
        "message.max-tokens-recovery",
        "message.subagent-handoff",
        "model.request",
        "model.response",
        "tool.schema",
        "tool.call",
        "tool.gate-result",
        "tool.healing",
        "nudge.loop-detected",
        "nudge.healing-failure",
        "nudge.healing-applied",
        "nudge.required-tools-pending",
        "nudge.verifier-retry",
        "nudge.strategy-handoff",
        "nudge.tasks-incomplete",
        "observation.tool-result",
        "observation.compression-summary",
        "observation.reflection",
        "memory.context",
        "lifecycle.start",
        "lifecycle.failure",
        "lifecycle.complete",
        "control.strategy-evaluated",
        "decision.terminate",
        "subagent.result",
        "display.tool-result",
        "thread.cloned",
        "thread.deleted",
        "mcp.tools-listed",
    ] {
        let tag = lookup(expected).unwrap_or_else(|| panic!("{expected} is missing"));
        assert_eq!(tag.crate_name(), "harness-tags");
        assert!(!tag.description().is_empty());
        assert!(
            tag.description().contains("- Emitted by:"),
            "{expected} does not say where it is emitted"
        );
        let payload = tag.payload_schema();
        assert!(
            payload.is_object() && payload.get("$schema").is_some(),
            "{expected}: {payload}"
        );
        let ctx = tag.ctx_schema();
        assert!(ctx.is_object(), "{expected}: {ctx}");
        jsonschema::validator_for(payload).expect("payload schemas compile");
    }
}

#[test]
fn tag_constants_and_descriptors_agree() {
    use harness_tags::tags::{MessageUserTask, PromptSystem, ToolCallTag};
    assert_eq!(PromptSystem::NAME, "prompt.system");
    assert_eq!(PromptSystem::PHASE, Phase::Think);
    const { assert!(!PromptSystem::SUPPRESSIBLE) };
    const { assert!(MessageUserTask::SUPPRESSIBLE) };
    let descriptor = ToolCallTag::descriptor();
    assert_eq!(descriptor.name(), "tool.call");
    assert_eq!(descriptor.payload_type(), "ToolCall");
    assert_eq!(descriptor.ctx_type(), "ToolCallCtx");
    assert!(std::ptr::eq(descriptor, lookup("tool.call").unwrap()));
}

#[test]
fn the_ctx_schema_describes_the_flattened_base() {
    let schema = lookup("message.tool-result").unwrap().ctx_schema();
    let properties = schema["properties"].as_object().unwrap();
    for field in [
        "toolName",
        "callId",
        "healed",
        "durationMs",
        "iteration",
        "runId",
        "state",
    ] {
        assert!(properties.contains_key(field), "missing {field}: {schema}");
    }
}

#[test]
fn json_rendering_lists_every_tag_with_schemas() {
    let rendered = harness_tags::tag::render_json(catalog());
    let rendered = rendered.as_array().unwrap();
    assert_eq!(rendered.len(), catalog().len());
    let first = &rendered[0];
    for key in [
        "name",
        "phase",
        "description",
        "payloadSchema",
        "ctxSchema",
        "crate",
    ] {
        assert!(first.get(key).is_some(), "missing {key}");
    }
}

/// `TAGS.md` at the repository root is generated from the catalog and must not go stale.
#[test]
fn tags_md_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../TAGS.md");
    // The other test modules of this binary declare tags of their own; TAGS.md lists the
    // standard catalog.
    let standard: Vec<_> = catalog()
        .iter()
        .copied()
        .filter(|tag| {
            tag.crate_name() == "harness-tags" && tag.module_path().starts_with("harness_tags::")
        })
        .collect();
    let expected = harness_tags::tag::render_markdown(&standard);
    if std::env::var_os("UPDATE_TAGS_MD").is_some() {
        std::fs::write(&path, &expected).unwrap();
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "TAGS.md is stale; regenerate it with:\n    UPDATE_TAGS_MD=1 cargo test -p harness-tags --test all catalog\n"
    );
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(json: Value) -> T {
    let value: T = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(serde_json::to_value(&value).unwrap(), json);
    value
}

#[test]
fn kernel_messages_use_the_reference_wire_form() {
    let result: KernelMessage = round_trip(json!({
        "role": "tool_result",
        "toolCallId": "call_1",
        "toolName": "read_file",
        "content": "fn main() {}",
        "isError": true
    }));
    assert_eq!(
        result,
        KernelMessage::tool_result("call_1", "read_file", "fn main() {}", true)
    );

    let ok: KernelMessage = round_trip(json!({
        "role": "tool_result", "toolCallId": "c", "toolName": "t", "content": "x"
    }));
    assert_eq!(ok, KernelMessage::tool_result("c", "t", "x", false));

    let assistant: KernelMessage = round_trip(json!({
        "role": "assistant",
        "content": "Reading it.",
        "toolCalls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "src/main.rs"}}]
    }));
    let KernelMessage::Assistant { tool_calls, .. } = assistant else {
        panic!()
    };
    assert_eq!(
        tool_calls,
        vec![ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: json!({"path": "src/main.rs"})
        }]
    );

    let user: KernelMessage = round_trip(json!({"role": "user", "content": "hi"}));
    assert_eq!(user, KernelMessage::user("hi"));
    let system: KernelMessage = round_trip(json!({"role": "system", "content": "be brief"}));
    assert_eq!(system, KernelMessage::system("be brief"));

    let unknown = serde_json::from_value::<KernelMessage>(json!({"role": "robot", "content": "x"}));
    assert!(unknown.is_err());
}

#[test]
fn lifecycle_and_strategy_payloads_match_the_reference() {
    let failure: LifecycleFailure = round_trip(json!({
        "reason": "tool-error",
        "errorMessage": "file not found",
        "attemptNumber": 2,
        "failureStreak": 3,
        "currentStrategy": "react"
    }));
    assert_eq!(failure.failure_streak, 3);

    let evaluation: StrategyEvaluation = round_trip(json!({
        "currentStrategy": "react",
        "score": 0.25,
        "failureStreak": 3,
        "recommendedAction": "escalate",
        "availableStrategies": ["react", "plan-execute"]
    }));
    assert_eq!(evaluation.recommended_action, StrategyAction::Escalate);

    let step: ObservationStep = round_trip(json!({
        "type": "tool-result",
        "content": "3 files",
        "metadata": {"tool": "list_dir"}
    }));
    assert_eq!(step.kind, "tool-result");
    let bare: ObservationStep = round_trip(json!({"type": "note"}));
    assert_eq!(bare.content, None);

    let verdict: GateVerdict =
        round_trip(json!({"decision": "deny", "reason": "rm -rf", "hardDeny": true}));
    assert_eq!(verdict.decision, GateDecision::Deny);
}

#[test]
fn contexts_flatten_the_base_context() {
    let ctx: ToolResultCtx = serde_json::from_value(json!({
        "iteration": 4,
        "phase": "act",
        "state": {"messages": [], "steps": [], "iteration": 4, "failureStreak": 0, "strategy": "react",
                  "usage": {"inputTokens": 10, "outputTokens": 5}},
        "strategy": "react",
        "runId": "run_1",
        "threadId": null,
        "resourceId": null,
        "modeId": "build",
        "modelId": "openai/gpt-4o",
        "toolName": "read_file",
        "callId": "call_1",
        "healed": true,
        "durationMs": 12
    }))
    .unwrap();
    assert_eq!(ctx.base.iteration, 4);
    assert_eq!(&*ctx.base.run_id, "run_1");
    assert!(ctx.healed);
    assert_eq!(ctx.base.state.usage.total(), 15);

    let nudge = NudgeCtx {
        trigger: "repeated-tool-call".into(),
        severity: Severity::Warn,
        ..NudgeCtx::default()
    };
    let json = serde_json::to_value(&nudge).unwrap();
    assert_eq!(json["severity"], "warn");
    assert_eq!(json["trigger"], "repeated-tool-call");
    assert_eq!(json["phase"], "bootstrap");
}
