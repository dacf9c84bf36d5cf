//! `mcp-server-time` (PyPI, on the official Python SDK): read-only hints mapped to the `read`
//! category where the configuration trusts them, structured results, and a tool error.

use harness_core::model::Scripted;
use harness_mcp::McpClient;
use harness_permissions::{Permissions, Policy};
use harness_tags::{RunOutcome, ToolCategory};
use serde_json::{Value, json};

use crate::support;

#[tokio::test]
async fn a_python_server_answers_with_structured_results_and_readable_errors() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = support::time("time", dir.path()) else {
        return;
    };
    // Trusted hints put its read-only tools in `read`, which this policy allows while it
    // denies every other MCP tool.
    let client = McpClient::new(server.trust_read_only_hint(true));
    let model = support::model([
        Scripted::tool_call(
            "time__convert_time",
            json!({"source_timezone": "Europe/Berlin", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        ),
        Scripted::tool_call(
            "time__get_current_time",
            json!({"timezone": "Mars/Olympus_Mons"}),
        ),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| {
        b.plugin(
            Permissions::builder()
                .category(ToolCategory::Read, Policy::Allow)
                .category(ToolCategory::Mcp, Policy::Deny)
                .build(),
        )
    });
    harness.init().await.unwrap();
    let summary = harness
        .send_message("what time is it in Tokyo at noon in Berlin?")
        .await
        .unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");

    let requests = model.requests();
    let convert = requests[0]
        .tools
        .iter()
        .find(|tool| tool.name == "time__convert_time")
        .unwrap();
    assert_eq!(convert.category, Some(ToolCategory::Read));
    assert_eq!(
        convert.input_schema["required"],
        json!(["source_timezone", "time", "target_timezone"])
    );

    let (converted, is_error) = support::tool_result(&requests[1], "call_0");
    assert!(!is_error, "{converted}");
    let converted: Value = serde_json::from_str(&converted).unwrap();
    assert_eq!(converted["source"]["timezone"], "Europe/Berlin");
    assert_eq!(converted["target"]["timezone"], "Asia/Tokyo");
    assert!(
        converted["target"]["datetime"]
            .as_str()
            .unwrap()
            .contains("T19:00:00")
            || converted["target"]["datetime"]
                .as_str()
                .unwrap()
                .contains("T20:00:00"),
        "{converted}"
    );

    let (failed, is_error) = support::tool_result(&requests[2], "call_1");
    assert!(is_error);
    assert!(failed.contains("Invalid timezone"), "{failed}");
}
