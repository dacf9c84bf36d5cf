//! `mcp.tools-listed`: what its `on` handlers leave is what the model is offered and calls.

use harness_core::model::Scripted;
use harness_mcp::McpClient;
use harness_tags::tags::McpToolsListed;
use harness_tags::{Flow, McpCtx, McpListReason, McpToolList, ToolCategory};
use serde_json::json;

use crate::support;

#[tokio::test]
async fn a_handler_filters_renames_describes_and_recategorizes_the_tools_offered() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = support::misbehaving("fix", "serve", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    let model = support::model([
        Scripted::tool_call("say", json!({"text": "renamed and still working"})),
        Scripted::tool_call("fix__read_resource", json!({"uri": "x"})),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| {
        b.compose(|c| {
            c.on(McpToolsListed, |list: &McpToolList, ctx: &McpCtx| {
                assert_eq!(&*ctx.server, "fix");
                assert_eq!(ctx.reason, McpListReason::Connect);
                let mut list = list.clone();
                list.tools
                    .retain(|tool| tool.server_tool == "echo" || tool.server_tool == "huge");
                for tool in &mut list.tools {
                    if tool.server_tool == "echo" {
                        tool.name = "say".to_owned();
                        tool.description = "Says the text back.".to_owned();
                        tool.category = ToolCategory::Read;
                    }
                }
                list
            })
        })
    });
    harness.init().await.unwrap();
    harness.send_message("say something").await.unwrap();

    let requests = model.requests();
    let offered = support::offered(&requests[0]);
    assert_eq!(
        offered
            .iter()
            .filter(|name| name.starts_with("fix__") || *name == "say")
            .count(),
        2,
        "{offered:?}"
    );
    assert!(offered.contains(&"fix__huge".to_owned()));
    let say = requests[0]
        .tools
        .iter()
        .find(|tool| tool.name == "say")
        .unwrap();
    assert_eq!(say.description, "Says the text back.");
    assert_eq!(say.category, Some(ToolCategory::Read));
    assert_eq!(say.input_schema["required"], json!(["text"]));
    assert_eq!(
        support::tool_result(&requests[1], "call_0"),
        ("renamed and still working".to_owned(), false)
    );
    // The fixture offers no resources, so there is no resource tool.
    let (missing, is_error) = support::tool_result(&requests[2], "call_1");
    assert!(
        is_error && missing.contains("no tool named `fix__read_resource`"),
        "{missing}"
    );
    assert_eq!(client.status().tools.len(), 2);
}

#[tokio::test]
async fn suppressing_the_list_withholds_every_tool_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = support::misbehaving("fix", "serve", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    let model = support::model([Scripted::text("nothing to call")]);
    let harness = support::harness(&model, &[&client], |b| {
        b.compose(|c| {
            c.on(McpToolsListed, |_: &McpToolList, _: &McpCtx| {
                Flow::<McpToolList>::Suppress
            })
        })
    });
    harness.init().await.unwrap();
    harness.send_message("hi").await.unwrap();
    let offered = support::offered(&model.requests()[0]);
    assert!(
        !offered.iter().any(|name| name.starts_with("fix__")),
        "{offered:?}"
    );
}
