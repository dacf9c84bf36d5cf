//! `@modelcontextprotocol/server-everything` (the reference test server) over stdio: listing,
//! calls, structured and binary content, resources, progress, abort, list changes and a kill.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness_core::event::HarnessEvent;
use harness_core::model::Scripted;
use harness_mcp::{McpClient, McpState};
use harness_tags::tags::McpToolsListed;
use harness_tags::{McpCtx, McpListReason, McpToolList, Pipeline, RunOutcome, ToolCategory};
use serde_json::json;

use crate::support;

/// Every `mcp.tools-listed` a tap saw, with its reason.
type Listings = Arc<Mutex<Vec<(McpListReason, McpToolList)>>>;

#[tokio::test]
async fn its_tools_resources_and_prompts_are_listed_with_names_schemas_and_hints() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = support::everything("everything", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    let seen: Listings = Arc::default();
    let record = Arc::clone(&seen);
    let pipeline = Pipeline::builder()
        .compose(move |c| {
            c.tap(McpToolsListed, move |list: &McpToolList, ctx: &McpCtx| {
                record.lock().unwrap().push((ctx.reason, list.clone()));
            })
        })
        .build()
        .unwrap();

    let status = client.connect(&pipeline).await.unwrap();
    assert_eq!(status.state, McpState::Connected);
    assert_eq!(
        status.server_info.as_deref(),
        Some("mcp-servers/everything 2.0.0")
    );
    assert!(status.pid.is_some());

    let echo = status
        .tools
        .iter()
        .find(|tool| tool.name == "everything__echo")
        .expect("echo is listed under the server's prefix");
    assert_eq!(echo.server_tool, "echo");
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
    assert_eq!(echo.input_schema["required"], json!(["message"]));
    assert_eq!(
        echo.category,
        ToolCategory::Mcp,
        "hints are not trusted by default"
    );
    assert_eq!(echo.annotations.read_only_hint, Some(true));
    let structured = status
        .tools
        .iter()
        .find(|tool| tool.server_tool == "get-structured-content")
        .unwrap();
    assert_eq!(
        structured.output_schema.as_ref().unwrap()["properties"]["humidity"]["type"],
        "number"
    );
    assert!(
        status
            .resources
            .iter()
            .any(|r| r.uri.starts_with("demo://resource/static/document/") && !r.template)
    );
    assert!(
        status
            .resources
            .iter()
            .any(|r| r.uri == "demo://resource/dynamic/text/{resourceId}" && r.template)
    );
    assert!(status.prompts.iter().any(|p| p.name == "simple-prompt"));
    let args = status
        .prompts
        .iter()
        .find(|p| p.name == "args-prompt")
        .unwrap();
    assert!(args.arguments.contains(&("city".to_owned(), true)));

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, McpListReason::Connect);
    assert_eq!(seen[0].1.server, "everything");
    assert_eq!(seen[0].1.tools, status.tools);
}

#[tokio::test]
async fn a_harness_calls_its_tools_and_the_model_reads_text_structured_binary_and_resources() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = support::everything("everything", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    let model = support::model([
        Scripted::tool_call(
            "everything__echo",
            json!({"message": "hello from the harness"}),
        ),
        Scripted::tool_call("everything__get-sum", json!({"a": 2, "b": 40})),
        Scripted::tool_call(
            "everything__get-structured-content",
            json!({"location": "Chicago"}),
        ),
        Scripted::tool_call("everything__get-tiny-image", json!({})),
        Scripted::tool_call(
            "everything__read_resource",
            json!({"uri": "demo://resource/dynamic/text/7"}),
        ),
        Scripted::tool_call(
            "everything__get-resource-reference",
            json!({"resourceType": "Text", "resourceId": -3}),
        ),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| b);
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    let summary = harness.send_message("use the tools").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");
    let started =
        support::wait_for(&mut events, |e| matches!(e, HarnessEvent::ToolStart { .. })).await;
    let HarnessEvent::ToolStart {
        tool_name,
        category,
        ..
    } = &started.event
    else {
        unreachable!()
    };
    assert_eq!(
        (tool_name.as_str(), *category),
        ("everything__echo", Some(ToolCategory::Mcp)),
        "user interfaces see an MCP tool's category"
    );

    let requests = model.requests();
    let first = &requests[0];
    let offered = support::offered(first);
    assert!(
        offered.contains(&"everything__echo".to_owned()),
        "{offered:?}"
    );
    assert!(offered.contains(&"everything__read_resource".to_owned()));
    let echo = first
        .tools
        .iter()
        .find(|t| t.name == "everything__echo")
        .unwrap();
    assert_eq!(echo.category, Some(ToolCategory::Mcp));
    assert_eq!(
        echo.input_schema["properties"]["message"]["description"],
        "Message to echo"
    );

    let last = requests.last().unwrap();
    assert_eq!(
        support::tool_result(last, "call_0"),
        ("Echo: hello from the harness".to_owned(), false)
    );
    let (sum, _) = support::tool_result(last, "call_1");
    assert!(sum.contains("42"), "{sum}");
    let (weather, error) = support::tool_result(last, "call_2");
    assert!(!error);
    let weather: serde_json::Value = serde_json::from_str(&weather).unwrap();
    assert_eq!(weather["conditions"], "Light rain / drizzle");
    let (image, _) = support::tool_result(last, "call_3");
    assert!(
        image.contains("[image: image/png,") && image.contains("bytes, not shown]"),
        "{image}"
    );
    assert!(!image.contains("iVBOR"), "no base64 reaches the model");
    let (resource, error) = support::tool_result(last, "call_4");
    assert!(!error);
    assert!(
        resource.starts_with("[resource demo://resource/dynamic/text/7]\n"),
        "{resource}"
    );
    // Arguments the schema allows and the tool refuses: a readable error, and the run goes on.
    let (refused, error) = support::tool_result(last, "call_5");
    assert!(error, "{refused}");
    assert!(refused.contains("Invalid resourceId: -3"), "{refused}");
}

#[tokio::test]
async fn progress_reaches_the_user_and_an_abort_stops_a_slow_call_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = support::everything("everything", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    let model = support::model([
        Scripted::tool_call(
            "everything__trigger-long-running-operation",
            json!({"duration": 60, "steps": 120}),
        ),
        Scripted::tool_call("everything__echo", json!({"message": "still here"})),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| b);
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    let started = Instant::now();
    let run = support::send_in_background(&harness, "run the slow one");
    let update = support::wait_for_progress(&mut events).await;
    let HarnessEvent::ToolUpdate { partial_result, .. } = &update.event else {
        unreachable!()
    };
    assert_eq!(partial_result["total"].as_f64(), Some(120.0));
    let pid = client.status().pid;
    harness.abort();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Aborted);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the abort did not wait for the 60 s operation"
    );

    // The same server process answers the next call.
    let summary = harness.send_message("go on").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");
    let last = model.requests().last().unwrap().clone();
    assert_eq!(support::tool_result(&last, "call_1").0, "Echo: still here");
    assert_eq!(client.status().pid, pid);
}

#[tokio::test]
async fn a_list_change_is_listed_again_before_the_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = support::everything("everything", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    let reasons: Listings = Arc::default();
    let record = Arc::clone(&reasons);
    let model = support::model([
        Scripted::tool_call("everything__echo", json!({"message": "one"})),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], move |b| {
        b.compose(move |c| {
            c.tap(McpToolsListed, move |list: &McpToolList, ctx: &McpCtx| {
                record.lock().unwrap().push((ctx.reason, list.clone()));
            })
        })
    });
    harness.init().await.unwrap();
    harness.send_message("hi").await.unwrap();

    // server-everything registers its capability-dependent tools once the client says it is
    // initialized, and announces them with notifications/tools/list_changed.
    let reasons = reasons.lock().unwrap();
    let kinds: Vec<McpListReason> = reasons.iter().map(|(reason, _)| *reason).collect();
    assert_eq!(kinds, [McpListReason::Connect, McpListReason::ListChanged]);
    assert!(
        reasons[1]
            .1
            .tools
            .iter()
            .any(|tool| tool.server_tool == "simulate-research-query")
    );
    let second = &model.requests()[1];
    assert!(support::offered(second).contains(&"everything__simulate-research-query".to_owned()));
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_readably_and_is_restarted_on_next_use() {
    let dir = tempfile::tempdir().unwrap();
    let (Some(server), Some(other)) = (
        support::everything("everything", dir.path()),
        support::everything("spare", dir.path()),
    ) else {
        return;
    };
    let client = McpClient::new(server);
    let spare = McpClient::new(other);
    let model = support::model([
        Scripted::tool_call(
            "everything__trigger-long-running-operation",
            json!({"duration": 60, "steps": 120}),
        ),
        Scripted::tool_call("spare__echo", json!({"message": "the other server"})),
        Scripted::text("the first server died"),
        Scripted::tool_call("everything__echo", json!({"message": "back"})),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client, &spare], |b| b);
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    let run = support::send_in_background(&harness, "run the slow one");
    support::wait_for_progress(&mut events).await;
    let first_pid = client.status().pid.unwrap();
    support::kill(first_pid);
    let reported = support::wait_for(
        &mut events,
        |e| matches!(e, HarnessEvent::Error { error_type: Some(kind), .. } if kind == "mcp_server"),
    )
    .await;
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");

    let HarnessEvent::Error { error, .. } = &reported.event else {
        unreachable!()
    };
    assert!(error.contains("MCP server `everything` stopped"), "{error}");
    let requests = model.requests();
    let (failure, is_error) = support::tool_result(&requests[1], "call_0");
    assert!(is_error);
    assert!(
        failure.contains("stopped while handling `everything__trigger-long-running-operation`")
            && failure.contains("killed by signal 9")
            && failure.contains("restarted on the next call"),
        "{failure}"
    );
    assert!(matches!(client.status().state, McpState::Failed { .. }));
    assert_eq!(
        support::tool_result(&requests[2], "call_1"),
        ("Echo: the other server".to_owned(), false)
    );

    let summary = harness.send_message("try again").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");
    let last = model.requests().last().unwrap().clone();
    assert_eq!(
        support::tool_result(&last, "call_2"),
        ("Echo: back".to_owned(), false)
    );
    let status = client.status();
    assert_eq!(status.state, McpState::Connected);
    assert_ne!(status.pid, Some(first_pid));
}
