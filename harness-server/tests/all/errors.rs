//! Bad input: every error is the spec's body, with the status the spec gives.

use harness_core::model::{Scripted, ScriptedModel};
use serde_json::json;

use crate::support::{TOKEN, answer, frames, serve, serve_with};

fn answers() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::text("ok"))
        .cycling()
}

fn assert_error(status: u16, body: &serde_json::Value, expected: u16, code: &str) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_content_types_routes_and_methods() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), answers).await;
    let http = served.http().clone();
    let post = |path: &str, content_type: &str, body: &str| {
        http.post(served.url(path))
            .bearer_auth(TOKEN)
            .header("content-type", content_type)
            .body(body.to_owned())
            .send()
    };

    let malformed = answer(
        post("/execute", "application/json", "{message:")
            .await
            .unwrap(),
    )
    .await;
    assert_error(malformed.status, &malformed.body, 400, "MALFORMED_JSON");
    let wrong_type = answer(post("/execute", "text/plain", "{}").await.unwrap()).await;
    assert_error(
        wrong_type.status,
        &wrong_type.body,
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    );
    let missing = answer(post("/execute", "application/json", "{}").await.unwrap()).await;
    assert_error(missing.status, &missing.body, 400, "INVALID_REQUEST");
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("message")
    );

    let array = served.post("/sessions", json!([null, null])).await;
    assert_error(array.status, &array.body, 400, "INVALID_REQUEST");
    let unknown = served
        .post(
            "/execute",
            json!({ "message": "hi", "harness_credentials": {} }),
        )
        .await;
    assert_error(unknown.status, &unknown.body, 400, "INVALID_REQUEST");
    assert!(
        unknown.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("harness_credentials")
    );
    let temperature = served
        .post("/execute", json!({ "message": "hi", "temperature": 0.5 }))
        .await;
    assert_eq!(temperature.body["error"]["details"]["field"], "temperature");
    let malformed_model = served
        .post("/execute", json!({ "message": "hi", "model": "no-slash" }))
        .await;
    assert_eq!(malformed_model.status, 400);
    assert_eq!(malformed_model.body["error"]["details"]["field"], "model");

    let empty = served.post("/execute", json!({ "message": "" })).await;
    assert_error(empty.status, &empty.body, 400, "INVALID_REQUEST");
    assert_eq!(empty.body["error"]["details"]["field"], "message");
    let long = served
        .post("/sessions", json!({ "name": "n".repeat(101) }))
        .await;
    assert_eq!(long.body["error"]["details"]["field"], "name");
    let limit = served.get("/sessions?limit=0").await;
    assert_error(limit.status, &limit.body, 400, "INVALID_REQUEST");
    assert_eq!(limit.body["error"]["details"]["field"], "limit");
    let offset = served.get("/executions?offset=-1").await;
    assert_eq!(offset.body["error"]["details"]["field"], "offset");
    let query = served.get("/sessions?limit=many").await;
    assert_error(query.status, &query.body, 400, "INVALID_QUERY");

    let route = served.get("/no-such-thing").await;
    assert_error(route.status, &route.body, 404, "ROUTE_NOT_FOUND");
    let outside = answer(
        http.get(format!("{}/nowhere", served.base))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_error(outside.status, &outside.body, 404, "ROUTE_NOT_FOUND");
    let method = served.request("PUT", "/sessions", None).await;
    assert_error(method.status, &method.body, 405, "METHOD_NOT_ALLOWED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ids_are_404_naming_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), answers).await;
    for path in [
        "/sessions/s-404",
        "/sessions/s-404/history",
        "/executions/e-404",
        "/executions/e-404/stream",
        "/executions/e-404/result",
    ] {
        let missing = served.get(path).await;
        assert_error(missing.status, &missing.body, 404, "NOT_FOUND");
        assert!(
            missing.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("-404")
        );
    }
    let execute = served
        .post(
            "/execute",
            json!({ "message": "hi", "session_id": "s-404" }),
        )
        .await;
    assert_eq!(execute.body["error"]["details"]["id"], "s-404");
    let agent = served
        .post("/execute", json!({ "message": "hi", "agent_id": "a-404" }))
        .await;
    assert_eq!(agent.status, 404);
    let other = served
        .http()
        .clone()
        .get(format!("{}/v1/harnesses/other/sessions", served.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let other = answer(other).await;
    assert_error(other.status, &other.body, 404, "NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_required_and_bodies_are_limited() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        answers,
        std::sync::Arc::new(|builder| builder),
        |config| config.body_limit = 1024,
    )
    .await;
    let http = served.http().clone();
    for token in [None, Some("wrong"), Some("test-token-012345678"), Some("")] {
        let mut request = http.get(served.url("/sessions"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let refused = request.send().await.unwrap();
        assert_eq!(
            refused.headers()["www-authenticate"].to_str().unwrap(),
            "Bearer"
        );
        let refused = answer(refused).await;
        assert_error(refused.status, &refused.body, 401, "UNAUTHORIZED");
    }
    let big = json!({ "message": "x".repeat(2048) });
    let refused = served.post("/execute", big).await;
    assert_error(refused.status, &refused.body, 413, "PAYLOAD_TOO_LARGE");
    let session = served.session().await;
    let execution = served.execute(&session, "hi").await;
    let bad_id = served.attach(&execution, Some("not-a-number")).await;
    let bad_id = answer(bad_id).await;
    assert_error(bad_id.status, &bad_id.body, 400, "INVALID_REQUEST");
    assert_eq!(bad_id.body["error"]["details"]["field"], "Last-Event-ID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_past_its_retention_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let execution = {
        let served = serve(&db, answers).await;
        let session = served.session().await;
        let execution = served.execute(&session, "hi").await;
        let seen = frames(served.attach(&execution, None).await, None).await;
        assert_eq!(seen.last().unwrap().event, "done");
        execution
    };
    // A server that keeps completed streams for no time drops it at start; the record stays.
    let served = serve_with(
        &db,
        answers,
        std::sync::Arc::new(|builder| builder),
        |config| config.retention = std::time::Duration::ZERO,
    )
    .await;
    let gone = answer(served.attach(&execution, None).await).await;
    assert_error(gone.status, &gone.body, 410, "GONE");
    let record = served.get(&format!("/executions/{execution}")).await;
    assert_eq!(record.body["execution"]["status"], "completed");
}
