//! `@modelcontextprotocol/server-filesystem` inside a harness with the permissions and
//! redaction plugins: a file's content reaches the model redacted, a tool denied by name is
//! never offered and never runs, and the `mcp` category's policy gates the rest.

use harness_core::model::Scripted;
use harness_mcp::McpClient;
use harness_permissions::{Permissions, Policy};
use harness_redaction::Redaction;
use harness_tags::{RunOutcome, ToolCategory};
use serde_json::json;

use crate::support;

const TICKET: &str = "Ticket 1042: Jane Roe <jane.roe@example.com> was charged twice on card \
                      4111 1111 1111 1111 and wants a refund.\n";

#[tokio::test]
async fn a_file_reaches_the_model_redacted_and_a_denied_tool_is_never_offered_nor_run() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    std::fs::write(root.join("ticket.txt"), TICKET).unwrap();
    let Some(server) = support::filesystem("fs", &root) else {
        return;
    };
    let client = McpClient::new(server);
    let copy = root.join("copy.txt");
    let model = support::model([
        Scripted::tool_call(
            "fs__read_text_file",
            json!({"path": root.join("ticket.txt").display().to_string()}),
        ),
        Scripted::tool_call(
            "fs__write_file",
            json!({"path": copy.display().to_string(), "content": "copied"}),
        ),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| {
        b.plugin(Redaction::default()).plugin(
            Permissions::builder()
                .tool("fs__write_file", Policy::Deny)
                .category(ToolCategory::Mcp, Policy::Allow)
                .build(),
        )
    });
    harness.init().await.unwrap();
    let summary = harness.send_message("refund ticket 1042").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");

    let requests = model.requests();
    for request in &requests {
        let offered = support::offered(request);
        assert!(
            offered.contains(&"fs__read_text_file".to_owned()),
            "{offered:?}"
        );
        assert!(
            !offered.contains(&"fs__write_file".to_owned()),
            "{offered:?}"
        );
    }
    let (content, is_error) = support::tool_result(&requests[1], "call_0");
    assert!(!is_error, "{content}");
    assert_eq!(
        content,
        "Ticket 1042: Jane Roe <<EMAIL_ADDRESS>> was charged twice on card <CREDIT_CARD> and \
         wants a refund.\n"
    );
    for request in &requests {
        let sent = serde_json::to_string(&request.messages).unwrap();
        assert!(!sent.contains("jane.roe@example.com") && !sent.contains("4111 1111"));
    }
    let (denied, is_error) = support::tool_result(&requests[2], "call_1");
    assert!(is_error);
    assert!(
        denied.starts_with("Permission denied for `fs__write_file`"),
        "{denied}"
    );
    assert!(!copy.exists(), "the denied tool never ran");
}

#[tokio::test]
async fn the_mcp_category_policy_gates_every_server_tool() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let Some(server) = support::filesystem("fs", &root) else {
        return;
    };
    let client = McpClient::new(server);
    let dir = root.join("made-by-the-model");
    let model = support::model([
        Scripted::tool_call(
            "fs__create_directory",
            json!({"path": dir.display().to_string()}),
        ),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| {
        b.plugin(
            Permissions::builder()
                .category(ToolCategory::Mcp, Policy::Deny)
                .build(),
        )
    });
    harness.init().await.unwrap();
    harness.send_message("make a directory").await.unwrap();
    let (denied, is_error) = support::tool_result(&model.requests()[1], "call_0");
    assert!(is_error);
    assert!(
        denied.starts_with("Permission denied for `fs__create_directory`"),
        "{denied}"
    );
    assert!(!dir.exists());
}
