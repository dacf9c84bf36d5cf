//! MCP servers, against `@modelcontextprotocol/server-everything` (the reference server, run
//! as CI installs it): a configured stdio server shared by every session, and a streamable
//! HTTP server connected, renamed and disconnected over the API.

use std::sync::Arc;

use harness_core::model::{Scripted, ScriptedModel};
use harness_tests::mcp_servers::{everything, everything_over_http};
use serde_json::{Value, json};

use crate::support::{Served, frames, serve_with};

fn calls_local_echo() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call(
            "everything__echo",
            json!({ "message": "from a session" }),
        ))
        .then(Scripted::text("done"))
        .cycling()
}

fn calls_remote_echo() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call(
            "remote__echo",
            json!({ "message": "over http" }),
        ))
        .then(Scripted::text("done"))
        .cycling()
}

/// Runs `message` on a new session; the text of its first tool result.
async fn echoed(served: &Served, message: &str) -> (bool, String) {
    let session = served.session().await;
    let execution = served.execute(&session, message).await;
    let seen = frames(served.attach(&execution, None).await, None).await;
    let result = seen
        .iter()
        .find(|frame| frame.event == "tool_result")
        .unwrap_or_else(|| panic!("no tool result in {seen:?}"));
    (
        result.data["success"] == true,
        result.data["output"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn names(list: &Value, key: &str, field: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item[field].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_server_is_listed_inspected_and_shared_by_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = everything("everything", dir.path()) else {
        return;
    };
    let served = serve_with(
        &dir.path().join("h.db"),
        calls_local_echo,
        Arc::new(|builder| builder),
        move |config| config.mcp_servers = vec![server],
    )
    .await;
    let listed = served.get("/mcp-servers").await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(listed.body["total"], 1);
    let first = &listed.body["data"][0];
    assert_eq!(first["id"], "everything");
    assert_eq!(first["configured"], true);
    assert_eq!(first["transport"]["type"], "stdio");
    assert_eq!(first["transport"]["command"], "node");
    assert_eq!(
        first["status"], "disconnected",
        "not started before it is needed"
    );

    let tools = served.get("/mcp-servers/everything/tools").await;
    assert_eq!(tools.status, 200, "{:?}", tools.body);
    let echo = tools.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "echo")
        .unwrap();
    assert_eq!(echo["tool_id"], "everything__echo");
    assert_eq!(echo["input_schema"]["type"], "object");
    let resources = served.get("/mcp-servers/everything/resources").await;
    assert!(
        !resources.body["resources"].as_array().unwrap().is_empty(),
        "{:?}",
        resources.body
    );
    let prompts = served.get("/mcp-servers/everything/prompts").await;
    assert!(
        names(&prompts.body, "prompts", "name")
            .iter()
            .any(|name| name.contains("simple")),
        "{:?}",
        prompts.body
    );
    let health = served
        .post("/mcp-servers/everything/health", json!({}))
        .await;
    assert_eq!(health.body["status"], "healthy", "{:?}", health.body);
    assert_eq!(
        served.get("/mcp-servers/everything").await.body["server"]["status"],
        "connected"
    );
    let offered = served.get("/tools?source=mcp&limit=100").await;
    assert!(names(&offered.body, "data", "id").contains(&"everything__echo".to_owned()));
    assert_eq!(
        served.get("/tools/everything__echo").await.body["tool"]["source"],
        "mcp"
    );

    // Two sessions call it through the one server.
    for _ in 0..2 {
        let (success, text) = echoed(&served, "echo").await;
        assert!(success, "{text}");
        assert_eq!(text, "Echo: from a session");
    }

    let changed = served
        .request(
            "PATCH",
            "/mcp-servers/everything",
            Some(json!({ "name": "other" })),
        )
        .await;
    assert_eq!(changed.status, 409, "{:?}", changed.body);
    assert_eq!(
        served
            .request("DELETE", "/mcp-servers/everything", None)
            .await
            .status,
        409
    );
    assert_eq!(served.get("/mcp-servers/nothing/tools").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_connected_over_the_api_serves_sessions_until_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let Some(remote) = everything_over_http(dir.path(), 0).await else {
        return;
    };
    let db = dir.path().join("h.db");
    let strict = serve_with(&db, calls_remote_echo, Arc::new(|b| b), |_| {}).await;
    let loopback = json!({ "name": "remote", "transport": { "type": "http", "url": remote.url } });
    let refused = strict.post("/mcp-servers", loopback.clone()).await;
    assert_eq!(refused.status, 400, "{:?}", refused.body);
    assert_eq!(refused.body["error"]["details"]["field"], "transport.url");
    drop(strict);

    let served = serve_with(&db, calls_remote_echo, Arc::new(|b| b), |config| {
        config.loopback_callbacks = true;
    })
    .await;
    for (body, status) in [
        (
            json!({ "name": "cmd", "transport": { "type": "stdio", "command": "sh" } }),
            403,
        ),
        (
            json!({ "name": "old", "transport": { "type": "sse", "url": remote.url } }),
            400,
        ),
        (
            json!({ "name": "bad name", "transport": { "type": "http", "url": remote.url } }),
            400,
        ),
        (
            json!({ "name": "x", "transport": { "type": "http", "url": remote.url, "headers": {} } }),
            400,
        ),
        (json!({ "name": "x" }), 400),
        (
            json!({ "name": "x", "transport": { "type": "http", "url": remote.url }, "auto_reconnect": false }),
            400,
        ),
    ] {
        let answered = served.post("/mcp-servers", body.clone()).await;
        assert_eq!(answered.status, status, "{body}: {:?}", answered.body);
    }

    let connected = served.post("/mcp-servers", loopback.clone()).await;
    assert_eq!(connected.status, 201, "{:?}", connected.body);
    let id = connected.body["server"]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("mcp_"), "{id}");
    assert_eq!(connected.body["server"]["configured"], false);
    assert_eq!(served.post("/mcp-servers", loopback).await.status, 409);

    let (success, text) = echoed(&served, "echo").await;
    assert!(success, "{text}");
    assert_eq!(text, "Echo: over http");

    let renamed = served
        .request(
            "PATCH",
            &format!("/mcp-servers/{id}"),
            Some(json!({ "name": "renamed" })),
        )
        .await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.body);
    let tools = served.get(&format!("/mcp-servers/{id}/tools")).await;
    assert!(names(&tools.body, "tools", "tool_id").contains(&"renamed__echo".to_owned()));
    drop(served);

    // Kept across a restart.
    let again = serve_with(&db, calls_remote_echo, Arc::new(|b| b), |_| {}).await;
    let listed = again.get("/mcp-servers").await;
    assert_eq!(names(&listed.body, "data", "name"), ["renamed"]);
    let gone = again
        .request("DELETE", &format!("/mcp-servers/{id}"), None)
        .await;
    assert_eq!(gone.status, 204, "{:?}", gone.body);
    assert_eq!(again.get(&format!("/mcp-servers/{id}")).await.status, 404);
    assert_eq!(again.get("/mcp-servers").await.body["total"], 0);
    assert!(names(&again.get("/tools?source=mcp").await.body, "data", "id").is_empty());
}
