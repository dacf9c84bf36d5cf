//! Servers that fail: they do not start, hang, crash, break the protocol or answer too much.
//! Each failure is a tool error the model can read, the harness and other servers go on, and a
//! server that stopped is started again on its next use.
//!
//! The server here is `tests/fixtures/misbehaving_server.py` (Python's standard library only):
//! no published server misbehaves on request.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness_core::event::HarnessEvent;
use harness_core::model::Scripted;
use harness_core::tool::{
    ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSource, ToolSourceCtx,
};
use harness_mcp::{McpClient, McpError, McpServer, McpState};
use harness_tags::tags::McpToolsListed;
use harness_tags::{McpCtx, McpListReason, McpToolList, Pipeline, RunOutcome};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;

/// The client's tools, as a kernel gets them before a step.
async fn tools(client: &McpClient) -> Arc<ToolRegistry> {
    let pipeline = Pipeline::default();
    let abort = CancellationToken::new();
    client
        .tools(ToolSourceCtx {
            pipeline: &pipeline,
            abort: &abort,
        })
        .await
}

async fn call(client: &McpClient, tool: &str, arguments: Value) -> Result<ToolOutput, ToolError> {
    let registry = tools(client).await;
    let registered = registry
        .get(tool)
        .unwrap_or_else(|| panic!("{tool} is not offered: {registry:?}"));
    registered
        .tool
        .execute(arguments, ToolContext::detached(tool, "call"))
        .await
}

fn fixture(name: &str, mode: &str, dir: &std::path::Path) -> Option<McpServer> {
    support::misbehaving(name, mode, dir)
}

#[tokio::test]
async fn servers_that_cannot_start_say_why_and_back_off() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exits) = fixture("exits", "exit-at-start", dir.path()) else {
        return;
    };
    let pipeline = Pipeline::default();

    let missing = McpClient::new(McpServer::stdio("missing", "harness-mcp-no-such-server"));
    let error = missing.connect(&pipeline).await.unwrap_err().to_string();
    assert!(
        error.contains("`harness-mcp-no-such-server` was not found; check `command` and PATH"),
        "{error}"
    );

    let client = McpClient::new(exits);
    let error = client.connect(&pipeline).await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("MCP server `exits` could not be started: it exited with status 2"),
        "{message}"
    );
    assert!(
        message.contains("cannot open the database at /nonexistent/db.sqlite"),
        "the server's stderr is shown: {message}"
    );
    assert!(matches!(client.status().state, McpState::Failed { .. }));
    // A second attempt right away waits out the backoff instead of starting it again.
    let error = client.connect(&pipeline).await.unwrap_err();
    let McpError::Restarting { retry_in, .. } = &error else {
        panic!("{error:?}");
    };
    assert!(*retry_in <= Duration::from_secs(1));
    assert!(
        error.to_string().contains("it will be started again in"),
        "{error}"
    );

    let Some(silent) = fixture("silent", "silent-start", dir.path()) else {
        return;
    };
    let silent = McpClient::new(silent.startup_timeout(Duration::from_millis(300)));
    let error = silent.connect(&pipeline).await.unwrap_err().to_string();
    assert!(
        error.contains("did not complete the MCP handshake within 0.3 s (`startup_timeout_ms`)"),
        "{error}"
    );
}

#[tokio::test]
async fn an_abort_while_a_server_starts_ends_the_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let Some(silent) = fixture("silent", "silent-start", dir.path()) else {
        return;
    };
    let client = McpClient::new(silent.startup_timeout(Duration::from_secs(60)));
    let model = support::model([Scripted::text("unreachable")]);
    let harness = support::harness(&model, &[&client], |b| b);
    harness.init().await.unwrap();
    let mut events = harness.subscribe();
    let started = Instant::now();
    let run = support::send_in_background(&harness, "hi");
    support::wait_for(&mut events, |e| {
        matches!(e, HarnessEvent::AgentStart { .. })
    })
    .await;
    harness.abort();
    assert_eq!(run.await.unwrap().unwrap().outcome, RunOutcome::Aborted);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the start was not waited out"
    );
    assert!(model.requests().is_empty());
    assert_eq!(client.status().state, McpState::NotStarted);
}

#[tokio::test]
async fn a_hanging_call_times_out_and_the_server_is_told_to_cancel_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = fixture("fix", "serve", dir.path()) else {
        return;
    };
    let client = McpClient::new(server.timeout(Duration::from_millis(400)));
    let started = Instant::now();
    let error = call(&client, "fix__hang", json!({})).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        error.message().starts_with(
            "MCP server `fix` did not answer `fix__hang` within 0.4 s; the request was cancelled"
        ),
        "{error}"
    );
    let cancelled = call(&client, "fix__cancelled", json!({})).await.unwrap();
    let cancelled: Value = serde_json::from_str(&cancelled.content).unwrap();
    assert_eq!(
        cancelled[0]["reason"], "the client's timeout passed",
        "{cancelled}"
    );
}

#[tokio::test]
async fn an_abort_cancels_the_call_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = fixture("fix", "serve", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    let model = support::model([
        Scripted::tool_call("fix__hang", json!({})),
        Scripted::tool_call("fix__cancelled", json!({})),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| b);
    harness.init().await.unwrap();
    let mut events = harness.subscribe();
    let run = support::send_in_background(&harness, "hang");
    // The fixture reports progress once it has the request.
    support::wait_for_progress(&mut events).await;
    harness.abort();
    assert_eq!(run.await.unwrap().unwrap().outcome, RunOutcome::Aborted);

    let summary = harness.send_message("what was cancelled?").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");
    let last = model.requests().last().unwrap().clone();
    let (cancelled, _) = support::tool_result(&last, "call_1");
    let cancelled: Value = serde_json::from_str(&cancelled).unwrap();
    assert_eq!(cancelled[0]["reason"], "the run was aborted", "{cancelled}");
}

#[tokio::test]
async fn malformed_json_rpc_fails_the_call_at_once_and_the_server_is_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = fixture("fix", "serve", dir.path()) else {
        return;
    };
    let client = McpClient::new(server.timeout(Duration::from_secs(60)));
    let first = {
        tools(&client).await;
        client.status().pid
    };
    let started = Instant::now();
    let error = call(&client, "fix__garbage", json!({})).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "not a timeout");
    let message = error.message();
    assert!(
        message.starts_with("MCP server `fix` stopped while handling `fix__garbage`: it sent a malformed JSON-RPC message"),
        "{message}"
    );
    assert!(message.contains("restarted on the next call"), "{message}");

    let echoed = call(&client, "fix__echo", json!({"text": "again"}))
        .await
        .unwrap();
    assert_eq!(echoed.content, "again");
    assert_ne!(client.status().pid, first);
}

#[tokio::test]
async fn an_invalid_answer_fails_only_its_own_call() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = fixture("fix", "serve", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    tools(&client).await;
    let pid = client.status().pid;

    let error = call(&client, "fix__bad_answer", json!({}))
        .await
        .unwrap_err();
    assert!(
        error
            .message()
            .contains("answered `fix__bad_answer` with something MCP does not allow"),
        "{error}"
    );
    let error = call(&client, "fix__bad_envelope", json!({}))
        .await
        .unwrap_err();
    assert!(
        error.message().contains(
            "rejected `fix__bad_envelope`: the server's answer is not a valid JSON-RPC response"
        ),
        "{error}"
    );
    let echoed = call(&client, "fix__echo", json!({"text": "fine"}))
        .await
        .unwrap();
    assert_eq!(echoed.content, "fine");
    assert_eq!(client.status().pid, pid, "the server kept running");
}

#[tokio::test]
async fn oversized_messages_and_results_are_refused_with_their_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = fixture("fix", "serve", dir.path()) else {
        return;
    };
    let client = McpClient::new(server.max_message_bytes(64 * 1024).max_result_bytes(1000));

    let error = call(&client, "fix__huge", json!({"size": 200_000}))
        .await
        .unwrap_err();
    assert!(
        error
            .message()
            .contains("it sent a message of more than 65536 bytes (`max_message_bytes`)"),
        "{error}"
    );
    let error = call(&client, "fix__huge", json!({"size": 5000}))
        .await
        .unwrap_err();
    assert_eq!(
        error.message(),
        "the result of `fix__huge` is 5000 bytes, more than the 1000 bytes MCP server `fix` may \
         return (`max_result_bytes`); ask for less, e.g. a narrower query or a smaller range"
    );
    let small = call(&client, "fix__huge", json!({"size": 10}))
        .await
        .unwrap();
    assert_eq!(small.content, "x".repeat(10));
}

#[tokio::test]
async fn a_crash_shows_the_servers_last_words_and_other_servers_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let (Some(crashing), Some(steady)) = (
        fixture("fix", "serve", dir.path()),
        fixture("steady", "serve", dir.path()),
    ) else {
        return;
    };
    let client = McpClient::new(crashing);
    let other = McpClient::new(steady);
    let model = support::model([
        Scripted::tool_calls([
            ("fix__crash", json!({})),
            ("steady__echo", json!({"text": "unaffected"})),
        ]),
        Scripted::tool_call("fix__echo", json!({"text": "restarted"})),
        Scripted::text("done"),
    ]);
    let listings: Arc<Mutex<Vec<(String, McpListReason)>>> = Arc::default();
    let record = Arc::clone(&listings);
    let harness = support::harness(&model, &[&client, &other], |b| {
        b.compose(move |c| {
            c.tap(McpToolsListed, move |list: &McpToolList, ctx: &McpCtx| {
                record
                    .lock()
                    .unwrap()
                    .push((list.server.clone(), ctx.reason));
            })
        })
    });
    harness.init().await.unwrap();
    let summary = harness.send_message("crash it").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");

    let requests = model.requests();
    let (crash, is_error) = support::tool_result(&requests[1], "call_0");
    assert!(is_error);
    assert!(
        crash.starts_with(
            "MCP server `fix` stopped while handling `fix__crash`: it exited with status 3."
        ) && crash.contains("fatal: simulated crash while handling the call"),
        "{crash}"
    );
    assert_eq!(
        support::tool_result(&requests[1], "call_1"),
        ("unaffected".to_owned(), false)
    );
    assert_eq!(
        support::tool_result(&requests[2], "call_2"),
        ("restarted".to_owned(), false)
    );
    assert_eq!(client.status().state, McpState::Connected);
    // The restart's tools were listed again before the step after it.
    let fix: Vec<McpListReason> = listings
        .lock()
        .unwrap()
        .iter()
        .filter(|(server, _)| server == "fix")
        .map(|(_, reason)| *reason)
        .collect();
    assert_eq!(fix, [McpListReason::Connect, McpListReason::Reconnect]);
}

#[tokio::test]
async fn a_tool_added_at_run_time_is_offered_at_the_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = fixture("fix", "serve", dir.path()) else {
        return;
    };
    let client = McpClient::new(server);
    let model = support::model([
        Scripted::tool_call("fix__add_tool", json!({})),
        Scripted::tool_call("fix__extra", json!({})),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| b);
    harness.init().await.unwrap();
    harness.send_message("add a tool").await.unwrap();
    let requests = model.requests();
    assert!(!support::offered(&requests[0]).contains(&"fix__extra".to_owned()));
    assert!(support::offered(&requests[1]).contains(&"fix__extra".to_owned()));
    // The fixture answers calls of tools it does not handle with a JSON-RPC error.
    let (answer, is_error) = support::tool_result(&requests[2], "call_1");
    assert!(is_error);
    assert_eq!(
        answer,
        "MCP server `fix` rejected `fix__extra`: Unknown tool: extra (JSON-RPC error -32602)"
    );
}
