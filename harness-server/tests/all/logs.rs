//! The logs routes: the kept entries listed and filtered, streamed live and resumed, and a
//! stream that ends when the server shuts down.

use std::sync::Arc;

use harness_core::model::{Scripted, ScriptedModel};
use harness_core::store::{SqliteStore, Store};
use harness_server::{LogLevel, Server, ServerConfig, ServerLogs};
use serde_json::{Map, Value, json};

use crate::support::{Client, TOKEN, answer, frames, frames_until, serve_with};

fn answers() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::text("ok"))
        .cycling()
}

fn context(key: &str, value: &str) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert(key.to_owned(), Value::from(value));
    context
}

async fn log_stream(
    client: &Client,
    query: &str,
    last_event_id: Option<&str>,
) -> reqwest::Response {
    let mut request = client
        .http()
        .get(client.url(&format!("/logs/stream{query}")))
        .bearer_auth(TOKEN);
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_entries_are_listed_newest_first_and_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let logs = ServerLogs::new(100);
    let served = serve_with(&dir.path().join("h.db"), answers, Arc::new(|b| b), {
        let logs = logs.clone();
        move |config| config.logs = logs
    })
    .await;
    logs.push(LogLevel::Debug, "detail".into(), Map::new());
    logs.push(LogLevel::Info, "started".into(), context("session", "s1"));
    logs.push(LogLevel::Error, "failed".into(), Map::new());

    let all = served.get("/logs").await;
    assert_eq!(all.status, 200, "{:?}", all.body);
    assert_eq!(all.body["total"], 3);
    let messages: Vec<&str> = all.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["failed", "started", "detail"]);
    assert_eq!(all.body["data"][1]["context"]["session"], "s1");
    assert_eq!(all.body["data"][1]["level"], "info");

    let warnings = served.get("/logs?level=warn").await;
    assert_eq!(warnings.body["total"], 1);
    assert_eq!(warnings.body["data"][0]["message"], "failed");
    let paged = served.get("/logs?limit=1&offset=1").await;
    assert_eq!(paged.body["data"][0]["message"], "started");
    assert_eq!(paged.body["has_more"], true);
    let later = served.get("/logs?since=2999-01-01T00:00:00Z").await;
    assert_eq!(later.body["total"], 0);
    let earlier = served.get("/logs?since=2000-01-01T00:00:00%2B02:00").await;
    assert_eq!(earlier.body["total"], 3);

    for (query, field) in [("since=yesterday", "since"), ("level=loud", "level")] {
        let refused = served.get(&format!("/logs?{query}")).await;
        assert_eq!(refused.status, 400, "{query}: {:?}", refused.body);
        assert!(
            refused.body["error"].to_string().contains(field),
            "{:?}",
            refused.body
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_sends_kept_entries_then_new_ones_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let logs = ServerLogs::new(100);
    let served = serve_with(&dir.path().join("h.db"), answers, Arc::new(|b| b), {
        let logs = logs.clone();
        move |config| config.logs = logs
    })
    .await;
    logs.push(LogLevel::Info, "one".into(), Map::new());
    logs.push(LogLevel::Debug, "quiet".into(), Map::new());

    let response = log_stream(&served, "?level=info", None).await;
    let writer = {
        let logs = logs.clone();
        // Pushed once the stream answered: these come live, not from the ring.
        tokio::spawn(async move {
            logs.push(LogLevel::Debug, "quiet again".into(), Map::new());
            logs.push(LogLevel::Warn, "two".into(), Map::new());
        })
    };
    let seen = frames(response, Some(2)).await;
    writer.await.unwrap();
    let messages: Vec<&str> = seen
        .iter()
        .map(|f| f.data["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["one", "two"]);
    assert!(seen.iter().all(|frame| frame.event == "log"));
    let first: u64 = seen[0].id.parse().unwrap();
    assert_eq!(seen[1].id.parse::<u64>().unwrap(), first + 3);

    // Resumed after the first: the rest, then the next new one.
    let resumed = log_stream(&served, "", Some(&seen[0].id)).await;
    logs.push(LogLevel::Error, "three".into(), Map::new());
    let again = frames_until(resumed, |frame| frame.data["message"] == "three").await;
    let messages: Vec<&str> = again
        .iter()
        .map(|f| f.data["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["quiet", "quiet again", "two", "three"]);

    let refused = answer(log_stream(&served, "", Some("x")).await).await;
    assert_eq!(refused.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_log_stream_ends_when_the_server_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("h.db")).unwrap();
    let shared: Arc<dyn Store> = Arc::new(store.clone());
    let logs = ServerLogs::new(10);
    let mut config = ServerConfig::new(TOKEN);
    config.logs = logs.clone();
    let factory = Arc::new(move || {
        Ok(harness_core::harness::Harness::builder("logs")
            .mode(harness_core::harness::Mode::new("build"))
            .model(answers())
            .sqlite(store.clone()))
    });
    let server = Server::new(config, shared, factory).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = Client::new(&format!("http://{}", listener.local_addr().unwrap()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    logs.push(LogLevel::Info, "before".into(), Map::new());
    let response = log_stream(&client, "", None).await;
    stop.send(()).unwrap();
    let seen = frames(response, None).await;
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].data,
        json!({ "timestamp": seen[0].data["timestamp"], "level": "info", "message": "before" })
    );
    serving.await.unwrap().unwrap();
}
