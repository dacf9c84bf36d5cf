//! Hooks over HTTP: signed deliveries to a local receiver, retried after a `500`, none once a
//! hook is disabled or deleted, and a `pre_tool` hook that blocks a call before it runs.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ToolError, tool_fn};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;

use crate::support::{Served, frames, serve_with};

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Delivery {
    endpoint: String,
    id: String,
    event: String,
    signature: String,
    body: Bytes,
}

#[derive(Clone)]
struct Receiver {
    seen: mpsc::UnboundedSender<Delivery>,
    /// Delivery ids the `flaky` endpoint already failed once.
    failed: Arc<Mutex<HashSet<String>>>,
}

async fn receive(
    State(receiver): State<Receiver>,
    Path(endpoint): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let delivery = Delivery {
        endpoint: endpoint.clone(),
        id: header("x-openharness-delivery"),
        event: header("x-openharness-event"),
        signature: header("x-openharness-signature"),
        body,
    };
    let first_try = receiver.failed.lock().unwrap().insert(delivery.id.clone());
    let _ = receiver.seen.send(delivery);
    match endpoint.as_str() {
        "flaky" if first_try => (StatusCode::INTERNAL_SERVER_ERROR, String::new()),
        "block" => (
            StatusCode::OK,
            json!({ "decision": "block", "reason": "no deploys on Fridays" }).to_string(),
        ),
        _ => (StatusCode::OK, "{}".to_owned()),
    }
}

/// A receiver on a loopback port: its base URL and the deliveries it gets.
async fn receiver() -> (String, mpsc::UnboundedReceiver<Delivery>) {
    let (seen, deliveries) = mpsc::unbounded_channel();
    let app = Router::new()
        .route("/{endpoint}", post(receive))
        .with_state(Receiver {
            seen,
            failed: Arc::default(),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, deliveries)
}

async fn next(deliveries: &mut mpsc::UnboundedReceiver<Delivery>) -> Delivery {
    tokio::time::timeout(Duration::from_secs(30), deliveries.recv())
        .await
        .expect("no delivery within 30 s")
        .unwrap()
}

fn deploys() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call("deploy", json!({ "service": "api" })))
        .then(Scripted::text("done"))
        .cycling()
}

async fn served(counter: Arc<AtomicUsize>) -> (Served, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        deploys,
        Arc::new(move |builder| {
            let counter = Arc::clone(&counter);
            builder.tool(tool_fn(
                "deploy",
                "Deploys a service.",
                move |_: Value, _| {
                    let counter = Arc::clone(&counter);
                    async move {
                        counter.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ToolError>("deployed")
                    }
                },
            ))
        }),
        |config| {
            config.loopback_callbacks = true;
            config.hook_retry_after = Duration::from_millis(20);
        },
    )
    .await;
    (served, dir)
}

async fn hook(served: &Served, event: &str, url: &str) -> (String, String) {
    let created = served
        .post(
            "/hooks",
            json!({ "event": event, "handler": { "type": "webhook", "url": url } }),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let hook = &created.body["hook"];
    assert_eq!(hook["enabled"], true);
    (
        hook["id"].as_str().unwrap().to_owned(),
        hook["secret"].as_str().unwrap().to_owned(),
    )
}

async fn run(served: &Served, session: &str) -> Vec<crate::support::Frame> {
    let execution = served.execute(session, "deploy").await;
    frames(served.attach(&execution, None).await, None).await
}

fn verify(secret: &str, delivery: &Delivery) {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&delivery.body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert_eq!(delivery.signature, format!("sha256={expected}"));
    let body: Value = serde_json::from_slice(&delivery.body).unwrap();
    assert_eq!(body["id"], delivery.id.as_str());
    assert_eq!(body["event"], delivery.event.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hooks_two_executions_two_signed_deliveries_each() {
    let (base, mut deliveries) = receiver().await;
    let (served, _dir) = served(Arc::default()).await;
    let (first, first_secret) = hook(&served, "stop", &format!("{base}/first")).await;
    let (flaky, flaky_secret) = hook(&served, "stop", &format!("{base}/flaky")).await;
    let (third, third_secret) = hook(&served, "stop", &format!("{base}/third")).await;
    let secrets: HashMap<&str, &str> = [
        ("first", first_secret.as_str()),
        ("flaky", flaky_secret.as_str()),
        ("third", third_secret.as_str()),
    ]
    .into();
    let listed = served.get("/hooks?event=stop").await;
    assert_eq!(listed.body["hooks"].as_array().unwrap().len(), 3);

    let session = served.session().await;
    run(&served, &session).await;
    run(&served, &session).await;
    // Two deliveries to each hook, and the flaky one's two failed first tries.
    let mut unique: HashMap<String, HashSet<String>> = HashMap::new();
    let mut requests: HashMap<String, usize> = HashMap::new();
    for _ in 0..8 {
        let delivery = next(&mut deliveries).await;
        verify(secrets[delivery.endpoint.as_str()], &delivery);
        assert_eq!(delivery.event, "stop");
        let body: Value = serde_json::from_slice(&delivery.body).unwrap();
        assert_eq!(body["data"]["status"], "completed");
        assert_eq!(body["data"]["session_id"], session.as_str());
        *requests.entry(delivery.endpoint.clone()).or_default() += 1;
        unique
            .entry(delivery.endpoint)
            .or_default()
            .insert(delivery.id);
    }
    for endpoint in ["first", "flaky", "third"] {
        assert_eq!(unique[endpoint].len(), 2, "{endpoint}: {unique:?}");
    }
    assert_eq!(requests["flaky"], 4, "each flaky delivery is tried twice");

    // Disabled and deleted hooks get nothing more.
    let disabled = served
        .request(
            "PATCH",
            &format!("/hooks/{first}"),
            Some(json!({ "enabled": false })),
        )
        .await;
    assert_eq!(disabled.body["hook"]["enabled"], false);
    let deleted = served
        .request("DELETE", &format!("/hooks/{flaky}"), None)
        .await;
    assert_eq!(deleted.status, 204);
    assert_eq!(served.get(&format!("/hooks/{flaky}")).await.status, 404);
    run(&served, &session).await;
    let delivery = next(&mut deliveries).await;
    assert_eq!(delivery.endpoint, "third");
    let fourth = served.get(&format!("/hooks/{third}")).await;
    assert_eq!(fourth.body["hook"]["event"], "stop");
    run(&served, &session).await;
    let delivery = next(&mut deliveries).await;
    assert_eq!(delivery.endpoint, "third");
    assert!(
        deliveries.try_recv().is_err(),
        "a disabled or deleted hook was called"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_pre_tool_hook_keeps_the_tool_from_running() {
    let (base, mut deliveries) = receiver().await;
    let counter = Arc::new(AtomicUsize::new(0));
    let (served, _dir) = served(Arc::clone(&counter)).await;
    let (blocker, secret) = hook(&served, "pre_tool", &format!("{base}/block")).await;
    let (_, post_secret) = hook(&served, "post_tool", &format!("{base}/after")).await;
    let session = served.session().await;
    let seen = run(&served, &session).await;
    let result = seen
        .iter()
        .find(|frame| frame.event == "tool_result")
        .unwrap();
    assert_eq!(result.data["success"], false);
    assert!(
        result.data["output"]["text"]
            .as_str()
            .unwrap()
            .contains("no deploys on Fridays"),
        "{result:?}"
    );
    assert_eq!(counter.load(Ordering::SeqCst), 0, "the tool ran");
    let asked = next(&mut deliveries).await;
    assert_eq!(asked.endpoint, "block");
    verify(&secret, &asked);
    let body: Value = serde_json::from_slice(&asked.body).unwrap();
    assert_eq!(body["data"]["tool"]["name"], "deploy");
    assert_eq!(body["data"]["tool"]["input"], json!({ "service": "api" }));
    let after = next(&mut deliveries).await;
    assert_eq!(after.endpoint, "after");
    verify(&post_secret, &after);

    // Without the blocker, the call runs.
    served
        .request("DELETE", &format!("/hooks/{blocker}"), None)
        .await;
    let seen = run(&served, &session).await;
    let result = seen
        .iter()
        .find(|frame| frame.event == "tool_result")
        .unwrap();
    assert_eq!(result.data["success"], true);
    assert_eq!(counter.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callback_urls_are_https_or_allowed_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let strict = serve_with(
        &dir.path().join("h.db"),
        deploys,
        Arc::new(|builder| builder),
        |_| {},
    )
    .await;
    for (handler, field) in [
        (
            json!({ "type": "webhook", "url": "http://example.com/hook" }),
            "handler.url",
        ),
        (
            json!({ "type": "webhook", "url": "http://127.0.0.1:9/hook" }),
            "handler.url",
        ),
        (
            json!({ "type": "webhook", "url": "not a url" }),
            "handler.url",
        ),
    ] {
        let refused = strict
            .post("/hooks", json!({ "event": "stop", "handler": handler }))
            .await;
        assert_eq!(refused.status, 400, "{:?}", refused.body);
        assert_eq!(refused.body["error"]["details"]["field"], field);
    }
    let command = strict
        .post(
            "/hooks",
            json!({ "event": "stop", "handler": { "type": "command", "command": "rm -rf /" } }),
        )
        .await;
    assert_eq!(command.status, 400);
    let https = strict
        .post(
            "/hooks",
            json!({ "event": "stop", "handler": { "type": "webhook", "url": "https://hooks.example.com/x" } }),
        )
        .await;
    assert_eq!(https.status, 201);
}
