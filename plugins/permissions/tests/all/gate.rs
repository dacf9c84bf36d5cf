//! The plugin in a pipeline: verdicts, hidden tools, and a property test that a per-tool deny
//! can never be loosened, whatever the rules, grants, yolo, category or later handlers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use harness_permissions::{Permissions, Policy, Rules};
use harness_tags::tags::{ToolGateResult, ToolSchema};
use harness_tags::{
    BaseCtx, GateDecision, GateVerdict, Pipeline, SessionView, ToolCallCtx, ToolCategory, ToolSpec,
};
use proptest::prelude::*;
use serde_json::json;

fn ctx(tool: &str, category: Option<ToolCategory>, session: SessionView) -> ToolCallCtx {
    ToolCallCtx {
        tool_name: tool.into(),
        call_id: "c1".into(),
        category,
        session,
        ..ToolCallCtx::default()
    }
}

fn gate(pipeline: &Pipeline, ctx: &ToolCallCtx) -> GateVerdict {
    pipeline
        .emit::<ToolGateResult>(GateVerdict::allow(), ctx)
        .now()
        .unwrap()
        .unwrap()
        .into_payload()
        .unwrap()
}

#[test]
fn the_gate_turns_decisions_into_verdicts() {
    let pipeline = Pipeline::builder()
        .plugin(
            Permissions::builder()
                .tool("rm", Policy::Deny)
                .category(ToolCategory::Read, Policy::Allow)
                .build(),
        )
        .build()
        .unwrap();
    let denied = gate(&pipeline, &ctx("rm", None, SessionView::default()));
    assert_eq!(
        (denied.decision, denied.hard_deny),
        (GateDecision::Deny, true)
    );
    let read = gate(
        &pipeline,
        &ctx("cat", Some(ToolCategory::Read), SessionView::default()),
    );
    assert_eq!(read.decision, GateDecision::Allow);
    let unknown = gate(&pipeline, &ctx("launch", None, SessionView::default()));
    assert_eq!(unknown.decision, GateDecision::Ask);
    assert_eq!(unknown.reason.as_deref(), Some("no rule allows it"));
}

#[test]
fn denied_tools_are_not_offered() {
    let pipeline = Pipeline::builder()
        .plugin(Permissions::builder().tool("rm", Policy::Deny).build())
        .build()
        .unwrap();
    let spec = |name: &str| ToolSpec {
        name: name.into(),
        description: String::new(),
        input_schema: Arc::new(json!({})),
        category: None,
    };
    let offered = pipeline
        .emit::<ToolSchema>(vec![spec("cat"), spec("rm")].into(), &BaseCtx::default())
        .now()
        .unwrap()
        .unwrap()
        .into_payload()
        .unwrap();
    assert_eq!(
        offered.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["cat"]
    );
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![Just(Policy::Allow), Just(Policy::Ask), Just(Policy::Deny)]
}

fn category() -> impl Strategy<Value = ToolCategory> {
    prop::sample::select(ToolCategory::ALL.to_vec())
}

const TOOLS: [&str; 5] = ["read_file", "write_file", "shell", "fetch", "mcp_query"];

fn tool() -> impl Strategy<Value = &'static str> {
    prop::sample::select(TOOLS.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_per_tool_deny_is_never_executed(
        tools in prop::collection::btree_map(tool(), policy(), 0..5),
        categories in prop::collection::btree_map(category(), policy(), 0..5),
        granted_tools in prop::collection::btree_set(tool(), 0..5),
        granted_categories in prop::collection::btree_set(category(), 0..5),
        yolo in any::<bool>(),
        called in tool(),
        called_category in prop::option::of(category()),
        loosen in any::<bool>(),
    ) {
        let rules = Rules {
            tools: tools.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect::<BTreeMap<_, _>>(),
            categories,
        };
        let denied = rules.tools.get(called) == Some(&Policy::Deny);
        let session = SessionView {
            state: Arc::new(json!({ "yolo": yolo })),
            granted_tools: Arc::new(granted_tools.iter().map(|t| (*t).to_owned()).collect::<BTreeSet<_>>()),
            granted_categories: Arc::new(granted_categories),
        };
        let mut builder = Pipeline::builder().plugin(Permissions::new(rules));
        if loosen {
            // A later handler that tries to allow everything.
            builder = builder.compose(|c| c.on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| GateVerdict::allow()));
        }
        let pipeline = builder.build().unwrap();
        let verdict = gate(&pipeline, &ctx(called, called_category, session));
        if denied {
            prop_assert_eq!(verdict.decision, GateDecision::Deny);
            prop_assert!(verdict.hard_deny);
        }
    }
}

proptest! {
    /// A permissions file of any content gives rules or an error naming the file, never a
    /// panic (the CI-side smoke of the `permissions` fuzz target).
    #[test]
    fn any_file_content_loads_or_fails_naming_the_file(text in any::<String>()) {
        for result in [
            Permissions::from_toml_str(&text, "perm.toml"),
            Permissions::from_json_str(&text, "perm.json"),
        ] {
            if let Err(error) = result {
                prop_assert!(error.to_string().contains("perm."), "{}", error);
            }
        }
    }
}
