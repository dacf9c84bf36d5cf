//! `@modelcontextprotocol/server-everything` over streamable HTTP, on loopback: listing, a
//! call, progress over the event stream, and an abort.

use std::time::{Duration, Instant};

use harness_core::model::Scripted;
use harness_mcp::{McpClient, McpError, McpServer, McpState};
use harness_tags::{Pipeline, RunOutcome};
use serde_json::json;

use crate::support;

use harness_tests::mcp_servers::everything_over_http as start;

#[tokio::test]
async fn tools_are_listed_and_called_over_streamable_http_with_progress_and_abort() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start(dir.path(), 0).await else {
        return;
    };
    // A header whose value is read from the environment when the client connects.
    let client =
        McpClient::new(McpServer::http("remote", &server.url).header("X-Search-Path", "${PATH}"));
    let status = client.connect(&Pipeline::default()).await.unwrap();
    assert_eq!(status.state, McpState::Connected);
    assert!(status.tools.iter().any(|t| t.name == "remote__echo"));
    assert_eq!(status.pid, None);

    let model = support::model([
        Scripted::tool_call("remote__echo", json!({"message": "over http"})),
        Scripted::tool_call(
            "remote__get-structured-content",
            json!({"location": "New York"}),
        ),
        Scripted::text("done"),
        Scripted::tool_call(
            "remote__trigger-long-running-operation",
            json!({"duration": 60, "steps": 120}),
        ),
    ]);
    let harness = support::harness(&model, &[&client], |b| b);
    harness.init().await.unwrap();
    let summary = harness.send_message("call it").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");
    let last = model.requests().last().unwrap().clone();
    assert_eq!(
        support::tool_result(&last, "call_0"),
        ("Echo: over http".to_owned(), false)
    );
    let (weather, _) = support::tool_result(&last, "call_1");
    assert!(weather.contains("\"conditions\":\"Cloudy\""), "{weather}");

    let mut events = harness.subscribe();
    let started = Instant::now();
    let run = support::send_in_background(&harness, "the slow one");
    support::wait_for_progress(&mut events).await;
    harness.abort();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Aborted);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn a_server_nobody_listens_for_fails_to_start_with_the_address_and_the_cause() {
    // A port that was free a moment ago: connecting is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = McpClient::new(
        McpServer::http("gone", format!("http://127.0.0.1:{port}/mcp"))
            .startup_timeout(Duration::from_secs(10)),
    );
    let error = client.connect(&Pipeline::default()).await.unwrap_err();
    assert!(matches!(error, McpError::Start { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "http://127.0.0.1:{port}/mcp did not complete the MCP handshake (Client error: error \
             sending request for url (http://127.0.0.1:{port}/mcp))"
        )),
        "{message}"
    );
    assert!(matches!(client.status().state, McpState::Failed { .. }));

    let missing = McpClient::new(
        McpServer::http("keyed", "http://127.0.0.1:9/mcp")
            .header("Authorization", "Bearer ${HARNESS_MCP_TEST_UNSET_TOKEN}"),
    );
    let error = missing.connect(&Pipeline::default()).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`HARNESS_MCP_TEST_UNSET_TOKEN`, which is not set"),
        "{error}"
    );
}

#[tokio::test]
async fn a_server_that_dies_mid_call_fails_it_within_seconds_and_is_reconnected_when_back() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut server) = start(dir.path(), 0).await else {
        return;
    };
    let client = McpClient::new(McpServer::http("remote", &server.url));
    let model = support::model([
        Scripted::tool_call(
            "remote__trigger-long-running-operation",
            json!({"duration": 60, "steps": 120}),
        ),
        Scripted::text("it died"),
        Scripted::tool_call("remote__echo", json!({"message": "back"})),
        Scripted::text("done"),
    ]);
    let harness = support::harness(&model, &[&client], |b| b);
    harness.init().await.unwrap();
    let mut events = harness.subscribe();
    let started = Instant::now();
    let run = support::send_in_background(&harness, "the slow one");
    support::wait_for_progress(&mut events).await;
    server.process.kill().await.unwrap();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the call did not wait out its 60 s timeout"
    );
    let (failure, is_error) = support::tool_result(&model.requests()[1], "call_0");
    assert!(is_error);
    assert_eq!(
        failure,
        "MCP server `remote` stopped while handling `remote__trigger-long-running-operation`: \
         the connection closed. It will be restarted on the next call."
    );

    // The server comes back where it was; the next call connects again.
    let _again = start(dir.path(), server.port).await.unwrap();
    let summary = harness.send_message("again").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{summary:?}");
    let last = model.requests().last().unwrap().clone();
    assert_eq!(
        support::tool_result(&last, "call_1"),
        ("Echo: back".to_owned(), false)
    );
    assert_eq!(client.status().state, McpState::Connected);
}
