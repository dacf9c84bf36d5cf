//! The journal and webhooks: what happened across sessions, listed, streamed and resumed (also
//! by another server on the same database), and sent signed to the webhooks that asked.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use harness_core::model::{Scripted, ScriptedModel};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::{Client, TOKEN, frames, frames_until, serve, serve_with};

fn answers() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::text("ok"))
        .cycling()
}

fn kinds(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["type"].as_str().unwrap().to_owned())
        .collect()
}

async fn event_stream(client: &Client, last_event_id: Option<&str>) -> reqwest::Response {
    let mut request = client
        .http()
        .get(client.url("/events/stream"))
        .bearer_auth(TOKEN);
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_lists_streams_and_resumes_across_servers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let served = serve(&db, answers).await;
    let session = served.session().await;
    let execution = served.execute(&session, "hi").await;
    frames(served.attach(&execution, None).await, None).await;

    let listed = served.get("/events").await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(
        kinds(&listed.body),
        [
            "execution.completed",
            "execution.started",
            "session.created"
        ]
    );
    let completed = &listed.body["data"][0];
    assert_eq!(completed["data"]["execution_id"], execution.as_str());
    assert_eq!(completed["data"]["status"], "completed");
    assert!(completed["data"]["usage"].is_object());
    let only = served.get("/events?type=session.created").await;
    assert_eq!(only.body["data"][0]["data"]["session_id"], session.as_str());
    assert_eq!(
        served.get("/events?since=2999-01-01T00:00:00Z").await.body["total"],
        0
    );
    assert_eq!(served.get("/events?type=nothing").await.status, 400);

    // From the start, then live.
    let stream = event_stream(&served, None).await;
    let ended = served
        .request("DELETE", &format!("/sessions/{session}"), None)
        .await;
    assert_eq!(ended.status, 204);
    let seen = frames_until(stream, |frame| frame.event == "session.ended").await;
    let events: Vec<&str> = seen.iter().map(|frame| frame.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "session.created",
            "execution.started",
            "execution.completed",
            "session.ended"
        ]
    );
    assert_eq!(seen[3].data["session_id"], session.as_str());
    let ids: Vec<u64> = seen.iter().map(|frame| frame.id.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");

    // Another server on the same database goes on after the last id a client saw.
    let other = serve(&db, answers).await;
    let resumed = event_stream(&other, Some(&seen[1].id)).await;
    other.session().await;
    let rest = frames_until(resumed, |frame| frame.event == "session.created").await;
    let events: Vec<&str> = rest.iter().map(|frame| frame.event.as_str()).collect();
    assert_eq!(
        events,
        ["execution.completed", "session.ended", "session.created"]
    );
    assert!(rest[2].id.parse::<u64>().unwrap() > ids[3]);
}

type Deliveries = mpsc::UnboundedSender<(HeaderMap, Value)>;

async fn receive(State(deliveries): State<Deliveries>, headers: HeaderMap, body: Bytes) {
    let secret_check = harness_server::sign("webhook-secret-0123456789", &body);
    let mut headers = headers;
    headers.insert("x-expected-signature", secret_check.parse().unwrap());
    let _ = deliveries.send((headers, serde_json::from_slice(&body).unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_receive_the_events_they_asked_for_signed() {
    let (sender, mut deliveries) = mpsc::unbounded_channel();
    let app = Router::new()
        .route("/kept", post(receive))
        .route("/deleted", post(receive))
        .with_state(sender);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        answers,
        Arc::new(|b| b),
        |config| {
            config.loopback_callbacks = true;
        },
    )
    .await;
    let register = |path: &str| {
        json!({
            "url": format!("{base}{path}"),
            "events": ["execution.completed"],
            "secret": "webhook-secret-0123456789"
        })
    };
    let kept = served.post("/webhooks", register("/kept")).await;
    assert_eq!(kept.status, 201, "{:?}", kept.body);
    assert_eq!(kept.body["webhook"]["enabled"], true);
    let deleted = served.post("/webhooks", register("/deleted")).await;
    let deleted_id = deleted.body["webhook"]["id"].as_str().unwrap().to_owned();
    for (body, field) in [
        (
            json!({ "url": "http://example.com/x", "events": ["*"] }),
            "url",
        ),
        (
            json!({ "url": format!("{base}/x"), "events": [] }),
            "events",
        ),
        (
            json!({ "url": format!("{base}/x"), "events": ["nothing"] }),
            "events",
        ),
    ] {
        let refused = served.post("/webhooks", body).await;
        assert_eq!(refused.status, 400, "{:?}", refused.body);
        assert_eq!(refused.body["error"]["details"]["field"], field);
    }

    let session = served.session().await;
    let first = served.execute(&session, "one").await;
    frames(served.attach(&first, None).await, None).await;
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(deliveries.recv().await.unwrap());
    }
    for (headers, body) in &got {
        assert_eq!(body["event"], "execution.completed");
        assert_eq!(body["execution_id"], first.as_str());
        assert_eq!(body["harness_id"], "local");
        assert_eq!(body["status"], "completed");
        assert!(body["artifacts"].is_array() && body["usage"].is_object());
        assert!(body["completed_at"].is_string());
        assert_eq!(
            headers["x-openharness-signature"],
            headers["x-expected-signature"]
        );
        assert_eq!(headers["x-openharness-event"], "execution.completed");
    }

    let removed = served
        .request("DELETE", &format!("/webhooks/{deleted_id}"), None)
        .await;
    assert_eq!(removed.status, 204);
    assert_eq!(
        served
            .request("DELETE", &format!("/webhooks/{deleted_id}"), None)
            .await
            .status,
        404
    );
    assert_eq!(
        served.get("/webhooks").await.body["webhooks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let second = served.execute(&session, "two").await;
    frames(served.attach(&second, None).await, None).await;
    let (_, body) = deliveries.recv().await.unwrap();
    assert_eq!(body["execution_id"], second.as_str());
    // The deleted webhook was not among those sent to: nothing else arrives.
    assert!(deliveries.try_recv().is_err());
}
