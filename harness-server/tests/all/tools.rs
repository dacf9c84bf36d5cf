//! Custom tools registered at runtime: the model's arguments reach the webhook, its answer
//! reaches the model.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use harness_core::model::{Scripted, ScriptedModel};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::{frames, serve_with};

type Calls = mpsc::UnboundedSender<(String, Value)>;

async fn weather(
    State(calls): State<Calls>,
    headers: HeaderMap,
    Json(call): Json<Value>,
) -> Json<Value> {
    let signature = headers
        .get("x-openharness-signature")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let city = call["input"]["city"]
        .as_str()
        .unwrap_or("nowhere")
        .to_owned();
    let _ = calls.send((signature, call));
    Json(json!({ "output": format!("sunny in {city}") }))
}

fn forecast() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call("weather", json!({ "city": "Oslo" })))
        .then(Scripted::text("done"))
        .cycling()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_tool_registered_at_runtime_is_called_with_the_models_arguments() {
    let (sender, mut calls) = mpsc::unbounded_channel();
    let app = Router::new()
        .route("/weather", post(weather))
        .with_state(sender);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/weather", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        forecast,
        Arc::new(|builder| builder),
        |config| config.loopback_callbacks = true,
    )
    .await;
    let builtin = served.get("/tools?source=builtin").await;
    assert!(
        builtin.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "echo"),
        "{:?}",
        builtin.body
    );
    // A session hosted before the registration offers the tool from its next step.
    let session = served.session().await;
    let registered = served
        .post(
            "/tools",
            json!({
                "name": "weather",
                "description": "Today's weather in a city.",
                "input_schema": {
                    "type": "object",
                    "properties": { "city": { "type": "string" } },
                    "required": ["city"]
                },
                "handler": { "type": "webhook", "url": url },
                "secret": "a-secret-of-some-length"
            }),
        )
        .await;
    assert_eq!(registered.status, 201, "{:?}", registered.body);
    assert_eq!(registered.body["tool"]["source"], "custom");
    let again = served
        .post(
            "/tools",
            json!({
                "name": "echo",
                "description": "taken",
                "input_schema": { "type": "object" },
                "handler": { "type": "webhook", "url": url }
            }),
        )
        .await;
    assert_eq!(again.status, 409);

    let execution = served.execute(&session, "weather in Oslo?").await;
    let seen = frames(served.attach(&execution, None).await, None).await;
    let result = seen
        .iter()
        .find(|frame| frame.event == "tool_result")
        .unwrap();
    assert_eq!(result.data["success"], true, "{result:?}");
    assert_eq!(result.data["output"]["text"], "sunny in Oslo");
    let (signature, call) = tokio::time::timeout(Duration::from_secs(30), calls.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(call["tool"], "weather");
    assert_eq!(call["input"], json!({ "city": "Oslo" }));
    assert_eq!(call["session_id"], session.as_str());
    let body = serde_json::to_vec(&call).unwrap();
    assert_eq!(
        signature,
        harness_server::sign("a-secret-of-some-length", &body)
    );

    assert_eq!(
        served.get("/tools/weather").await.body["tool"]["name"],
        "weather"
    );
    assert_eq!(
        served.request("DELETE", "/tools/echo", None).await.status,
        409
    );
    assert_eq!(
        served
            .request("DELETE", "/tools/weather", None)
            .await
            .status,
        204
    );
    assert_eq!(served.get("/tools/weather").await.status, 404);
    let bad = served
        .post(
            "/tools",
            json!({
                "name": "bad name",
                "description": "x",
                "input_schema": { "type": "object" },
                "handler": { "type": "webhook", "url": url }
            }),
        )
        .await;
    assert_eq!(bad.body["error"]["details"]["field"], "name");
}

fn never_called() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_invoked_directly_runs_through_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        never_called,
        Arc::new(|builder| builder),
        |config| {
            config.loopback_callbacks = true;
            config.hook_retry_after = Duration::from_millis(5);
        },
    )
    .await;
    let done = served
        .post("/tools/echo/invoke", json!({ "input": { "text": "hi" } }))
        .await;
    assert_eq!(done.status, 200, "{:?}", done.body);
    assert_eq!(done.body["success"], true);
    assert_eq!(done.body["output"]["text"], "echo: hi");
    assert!(done.body["error"].is_null());
    assert_eq!(*served.calls.lock().unwrap(), ["hi"]);

    for (path, body, status) in [
        ("/tools/echo/invoke", json!({ "input": { "text": 3 } }), 400),
        ("/tools/echo/invoke", json!({}), 400),
        ("/tools/echo/invoke", json!({ "input": [1] }), 400),
        ("/tools/nothing/invoke", json!({ "input": {} }), 404),
    ] {
        let refused = served.post(path, body.clone()).await;
        assert_eq!(refused.status, status, "{path} {body}: {:?}", refused.body);
    }

    let streamed = served
        .http()
        .post(served.url("/tools/echo/invoke/stream"))
        .bearer_auth(crate::support::TOKEN)
        .header("content-type", "application/json")
        .body(json!({ "input": { "text": "streamed" } }).to_string())
        .send()
        .await
        .unwrap();
    let seen = frames(streamed, None).await;
    let events: Vec<&str> = seen.iter().map(|frame| frame.event.as_str()).collect();
    assert_eq!(events, ["output", "done"]);
    assert_eq!(seen[0].data["data"]["text"], "echo: streamed");
    assert_eq!(seen[1].data["success"], true);

    // A `pre_tool` hook nobody answers refuses the call, direct or not: it does not run.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let hook = served
        .post(
            "/hooks",
            json!({ "event": "pre_tool", "handler": { "type": "webhook", "url": url } }),
        )
        .await;
    assert_eq!(hook.status, 201, "{:?}", hook.body);
    let blocked = served
        .post(
            "/tools/echo/invoke",
            json!({ "input": { "text": "blocked" } }),
        )
        .await;
    assert_eq!(blocked.status, 403, "{:?}", blocked.body);
    assert_eq!(*served.calls.lock().unwrap(), ["hi", "streamed"]);
}

fn command_tool(name: &str) -> Value {
    json!({
        "name": name,
        "description": "Answers with what it was sent.",
        "input_schema": { "type": "object", "properties": { "x": { "type": "string" } } },
        "handler": {
            "type": "command",
            "command": "sh",
            "args": ["-c", "read call; echo \"{\\\"output\\\": $call}\""]
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_tools_run_only_where_the_server_allows_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let strict = serve_with(&db, never_called, Arc::new(|builder| builder), |_| {}).await;
    let refused = strict.post("/tools", command_tool("echoer")).await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    drop(strict);

    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().to_path_buf();
    let served = serve_with(
        &db,
        never_called,
        Arc::new(|builder| builder),
        move |config| {
            config.command_tools = true;
            config.workspace = Some(root);
        },
    )
    .await;
    let registered = served.post("/tools", command_tool("echoer")).await;
    assert_eq!(registered.status, 201, "{:?}", registered.body);
    let called = served
        .post("/tools/echoer/invoke", json!({ "input": { "x": "ping" } }))
        .await;
    assert_eq!(called.status, 200, "{:?}", called.body);
    assert_eq!(called.body["success"], true);
    // The command read the call from its standard input.
    let call: Value =
        serde_json::from_str(called.body["output"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(call["tool"], "echoer");
    assert_eq!(call["input"], json!({ "x": "ping" }));

    let failing = json!({
        "name": "failing",
        "description": "Fails.",
        "input_schema": { "type": "object" },
        "handler": { "type": "command", "command": "sh", "args": ["-c", "echo broken >&2; exit 3"] }
    });
    assert_eq!(served.post("/tools", failing).await.status, 201);
    let failed = served
        .post("/tools/failing/invoke", json!({ "input": {} }))
        .await;
    assert_eq!(failed.body["success"], false);
    assert!(
        failed.body["error"].as_str().unwrap().contains("broken"),
        "{:?}",
        failed.body
    );
    let missing = json!({
        "name": "missing",
        "description": "Is not there.",
        "input_schema": { "type": "object" },
        "handler": { "type": "command", "command": "/nonexistent/program" }
    });
    assert_eq!(served.post("/tools", missing).await.status, 201);
    let absent = served
        .post("/tools/missing/invoke", json!({ "input": {} }))
        .await;
    assert!(
        absent.body["error"]
            .as_str()
            .unwrap()
            .contains("did not start"),
        "{:?}",
        absent.body
    );
}
