//! Planning writes and the plan stream: a client edits the session's task list, which is
//! stored at once, and watches it change while an execution runs.

use std::sync::Arc;
use std::time::Duration;

use harness_core::model::{Scripted, ScriptedModel};
use harness_tests::fixtures::hang;
use serde_json::{Value, json};

use crate::support::{TOKEN, frames, frames_until, serve, serve_with};

fn answers() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::text("ok"))
        .cycling()
}

fn hangs() -> ScriptedModel {
    ScriptedModel::new("scripted/test").then(Scripted::tool_call("hang", json!({})))
}

fn ids(tasks: &Value) -> Vec<String> {
    tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|task| task["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_rewrites_the_plan_and_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let served = serve(&db, answers).await;
    let session = served.session().await;
    let execution = served.execute(&session, "plan").await;
    frames(served.attach(&execution, None).await, None).await;
    let plan = format!("/executions/{execution}/plan");

    let written = served
        .request(
            "PATCH",
            &plan,
            Some(json!({ "tasks": [
                { "content": "Ship it", "order": 2.0 },
                { "id": "tests", "content": "Write the tests", "status": "in_progress", "order": 1 },
                { "content": "Celebrate" }
            ] })),
        )
        .await;
    assert_eq!(written.status, 200, "{:?}", written.body);
    let tasks = &written.body["plan"]["tasks"];
    assert_eq!(ids(tasks), ["tests", "ship_it", "celebrate"]);
    assert_eq!(tasks[0]["status"], "in_progress");
    assert_eq!(tasks[2]["order"], 2);

    let done = served
        .request(
            "PATCH",
            &format!("{plan}/tasks/tests"),
            Some(json!({ "status": "completed" })),
        )
        .await;
    assert_eq!(done.status, 200, "{:?}", done.body);
    assert_eq!(done.body["task"]["status"], "completed");
    for (path, body, status) in [
        (
            format!("{plan}/tasks/nothing"),
            json!({ "status": "completed" }),
            404,
        ),
        (format!("{plan}/tasks/ship_it"), json!({}), 200),
        (format!("{plan}/tasks/nothing"), json!({}), 404),
        (
            format!("{plan}/tasks/ship_it"),
            json!({ "content": "" }),
            400,
        ),
        (
            plan.clone(),
            json!({ "tasks": [
            { "content": "a", "status": "in_progress" },
            { "content": "b", "status": "in_progress" }
        ] }),
            409,
        ),
        (plan.clone(), json!({ "tasks": [{ "content": "" }] }), 400),
        (
            plan.clone(),
            json!({ "tasks": [{ "content": "a", "order": 1.5 }] }),
            400,
        ),
        (
            plan.clone(),
            json!({ "tasks": [{ "content": "a", "order": -1 }] }),
            400,
        ),
    ] {
        let refused = served.request("PATCH", &path, Some(body.clone())).await;
        assert_eq!(refused.status, status, "{path} {body}: {:?}", refused.body);
    }

    // Stored at once, in the thread.
    let store = harness_core::store::SqliteStore::open(&db).unwrap();
    let thread = harness_core::store::Store::thread(&store, &session)
        .await
        .unwrap()
        .unwrap();
    let stored = &thread.metadata[harness_store::metadata::TASKS];
    assert_eq!(ids(stored), ["tests", "ship_it", "celebrate"]);
    assert_eq!(stored[0]["status"], "completed");
    let listed = served.get(&format!("{plan}/tasks?status=pending")).await;
    assert_eq!(ids(&listed.body["tasks"]), ["ship_it", "celebrate"]);
    // The stream of an execution that is over: the list, then the end.
    let over = served
        .http()
        .get(served.url(&format!("{plan}/stream")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let seen = frames(over, None).await;
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|frame| frame.event == "task.added"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_stream_follows_a_running_execution_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        hangs,
        Arc::new(|builder| builder.tool(hang(Duration::from_secs(3600)))),
        |_| {},
    )
    .await;
    let session = served.session().await;
    let execution = served.execute(&session, "work").await;
    // Running: its tool has started.
    frames_until(served.attach(&execution, None).await, |frame| {
        frame.event == "tool_call_start"
    })
    .await;
    let plan = format!("/executions/{execution}/plan");
    let stream = served
        .http()
        .get(served.url(&format!("{plan}/stream")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let reader = tokio::spawn(frames(stream, None));
    let first = served
        .request(
            "PATCH",
            &plan,
            Some(json!({ "tasks": [{ "content": "One" }, { "content": "Two" }] })),
        )
        .await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let second = served
        .request(
            "PATCH",
            &format!("{plan}/tasks/one"),
            Some(json!({ "status": "in_progress" })),
        )
        .await;
    assert_eq!(second.status, 200, "{:?}", second.body);
    let reordered = served
        .request(
            "PATCH",
            &plan,
            Some(json!({ "tasks": [
            { "id": "two", "content": "Two" },
            { "id": "one", "content": "One", "status": "in_progress" }
        ] })),
        )
        .await;
    assert_eq!(reordered.status, 200, "{:?}", reordered.body);
    let cancelled = served
        .post(&format!("/executions/{execution}/cancel"), json!({}))
        .await;
    assert_eq!(cancelled.status, 200, "{:?}", cancelled.body);

    let seen = reader.await.unwrap();
    let events: Vec<&str> = seen.iter().map(|frame| frame.event.as_str()).collect();
    assert_eq!(
        events,
        ["task.added", "task.added", "task.updated", "plan.reordered"],
        "{seen:?}"
    );
    assert_eq!(seen[2].data["task"]["status"], "in_progress");
    assert_eq!(seen[3].data["task_ids"], json!(["two", "one"]));
}
