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
