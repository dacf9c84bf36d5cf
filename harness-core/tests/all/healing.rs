//! Tool-call healing: names, wrapped and renamed arguments, type coercion.

use harness_core::kernel::*;
use harness_core::tool::*;
use harness_core::tool::{ToolContext, ToolError, tool_fn};
use harness_tags::{HealingKind, HealingReport, ToolCall};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)] // only its schema matters here
struct ReadArgs {
    path: String,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    recursive: Option<bool>,
    #[serde(default)]
    globs: Option<Vec<String>>,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)] // only its schema matters here
struct SearchArgs {
    query: String,
}

fn tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            tool_fn("read_file", "Reads.", |_: ReadArgs, _: ToolContext| async {
                Ok::<_, ToolError>("")
            })
            .aliases(["cat"]),
        )
        .unwrap();
    tools
        .register(tool_fn(
            "search",
            "Searches.",
            |_: SearchArgs, _: ToolContext| async { Ok::<_, ToolError>("") },
        ))
        .unwrap();
    tools
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments,
    }
}

fn repaired(name: &str, arguments: Value) -> HealingReport {
    match heal_tool_call(&call(name, arguments), &tools()) {
        Healing::Repaired(report) => report,
        other => panic!("not repaired: {other:?}"),
    }
}

fn kinds(report: &HealingReport) -> Vec<HealingKind> {
    report.steps.iter().map(|s| s.kind).collect()
}

#[test]
fn a_valid_call_passes_untouched() {
    let healing = heal_tool_call(&call("read_file", json!({"path": "a"})), &tools());
    assert_eq!(
        healing,
        Healing::Valid(call("read_file", json!({"path": "a"})))
    );
}

#[test]
fn tool_names_heal_by_alias_spelling_and_edit_distance() {
    assert_eq!(repaired("cat", json!({"path": "a"})).tool_name, "read_file");
    assert_eq!(
        repaired("ReadFile", json!({"path": "a"})).tool_name,
        "read_file"
    );
    assert_eq!(
        repaired("read_fil", json!({"path": "a"})).tool_name,
        "read_file"
    );
    assert_eq!(repaired("serch", json!({"query": "x"})).tool_name, "search");
    let Healing::Failed(failure) = heal_tool_call(&call("delete_everything", json!({})), &tools())
    else {
        panic!()
    };
    assert_eq!(failure.trigger, "unknown-tool");
    assert!(
        failure.message.contains("read_file, search"),
        "{}",
        failure.message
    );
}

#[test]
fn malformed_json_is_repaired_or_explained() {
    let report = repaired("read_file", Value::String("{path: 'a.rs',}".into()));
    assert_eq!(report.arguments, json!({"path": "a.rs"}));
    assert_eq!(kinds(&report), [HealingKind::JsonRepair]);
    assert_eq!(
        report.original_arguments,
        Value::String("{path: 'a.rs',}".into())
    );
    let Healing::Failed(failure) = heal_tool_call(
        &call("read_file", Value::String("path = a.rs".into())),
        &tools(),
    ) else {
        panic!()
    };
    assert_eq!(failure.trigger, "invalid-json");
    assert!(
        failure.message.contains("`path` (string, required)"),
        "{}",
        failure.message
    );
}

#[test]
fn wrappers_near_misses_lone_missing_params_and_types_heal() {
    let report = repaired("read_file", json!({"arguments": {"path": "a"}}));
    assert_eq!(report.arguments, json!({"path": "a"}));
    assert_eq!(kinds(&report), [HealingKind::UnwrapWrapper]);

    let report = repaired("read_file", json!({"Path": "a", "recursve": "true"}));
    assert_eq!(report.arguments, json!({"path": "a", "recursive": true}));

    let report = repaired("read_file", json!({"file": "a", "limit": 3}));
    assert_eq!(report.arguments, json!({"path": "a", "limit": 3}));
    assert_eq!(kinds(&report), [HealingKind::RemapMissingParameter]);

    let report = repaired(
        "read_file",
        json!({"path": "a", "limit": "10", "globs": "*.rs"}),
    );
    assert_eq!(
        report.arguments,
        json!({"path": "a", "limit": 10, "globs": ["*.rs"]})
    );
    assert!(
        kinds(&report)
            .iter()
            .all(|k| *k == HealingKind::TypeCoercion)
    );

    let report = repaired("search", Value::String("\"rust\"".into()));
    assert_eq!(report.arguments, json!({"query": "rust"}));
}

#[test]
fn what_cannot_heal_fails_with_the_schema_errors() {
    let Healing::Failed(failure) =
        heal_tool_call(&call("read_file", json!({"limit": "many"})), &tools())
    else {
        panic!()
    };
    assert_eq!(failure.trigger, "invalid-arguments");
    assert_eq!(failure.tool_name.as_deref(), Some("read_file"));
    assert!(
        failure
            .message
            .starts_with("Invalid arguments for `read_file`"),
        "{}",
        failure.message
    );
}

proptest::proptest! {
    /// Any name and argument text a model could send heals to a registered tool or fails,
    /// never panics (the CI-side smoke of the `healing` fuzz target).
    #[test]
    fn any_call_heals_to_a_registered_tool_or_fails(
        name in "[a-zA-Z_ .-]{0,16}",
        text in proptest::prelude::any::<String>(),
        as_text in proptest::prelude::any::<bool>(),
    ) {
        let arguments = if as_text {
            Value::String(text)
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        match heal_tool_call(&call(&name, arguments), &tools()) {
            Healing::Valid(call) => proptest::prop_assert!(["read_file", "search"].contains(&call.name.as_str())),
            Healing::Repaired(report) => proptest::prop_assert!(["read_file", "search"].contains(&report.tool_name.as_str())),
            Healing::Failed(_) => {}
        }
    }
}
