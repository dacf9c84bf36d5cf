//! Sessions: CRUD, history, forks, messages; executions of one session run in order, and
//! sessions never see each other's frames.

use std::sync::Arc;

use harness_core::model::{Scripted, ScriptedModel};
use harness_tests::harness::last_user_text;
use serde_json::json;

use crate::support::{frames, serve};

/// Echoes the user's message through the `echo` tool, then answers `done: <message>`.
fn echo_back() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::Respond(Arc::new(|request| {
            Scripted::tool_call("echo", json!({ "text": last_user_text(request) }))
        })))
        .then(Scripted::Respond(Arc::new(|request| {
            Scripted::text(format!("done: {}", last_user_text(request)))
        })))
        .cycling()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_created_listed_renamed_paused_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), echo_back).await;
    let created = served.post("/sessions", json!({ "name": "first" })).await;
    assert_eq!(created.status, 201);
    let id = created.body["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created.body["session"]["status"], "active");
    assert_eq!(created.body["session"]["message_count"], 0);
    assert!(
        created.body["connect_url"]
            .as_str()
            .unwrap()
            .ends_with("/connect")
    );
    served.session().await;

    let listed = served.get("/sessions").await;
    assert_eq!(listed.body["total"], 2);
    let diagnostics = served.get("/diagnostics").await;
    assert_eq!(diagnostics.body["active_sessions"], 2);
    assert_eq!(diagnostics.body["active_executions"], 0);
    assert!(diagnostics.body["config"].get("token").is_none());
    assert_eq!(listed.body["has_more"], false);
    let page = served.get("/sessions?limit=1&offset=1").await;
    assert_eq!(page.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(page.body["has_more"], false);

    let renamed = served
        .request(
            "PATCH",
            &format!("/sessions/{id}"),
            Some(json!({ "name": "renamed", "status": "paused" })),
        )
        .await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.body);
    assert_eq!(renamed.body["session"]["name"], "renamed");
    assert_eq!(renamed.body["session"]["status"], "paused");
    let paused = served.get("/sessions?status=paused").await;
    assert_eq!(paused.body["total"], 1);
    let resumed = served
        .post(&format!("/sessions/{id}/resume"), json!({}))
        .await;
    assert_eq!(resumed.body["session"]["status"], "active");

    let ended = served
        .request("DELETE", &format!("/sessions/{id}"), None)
        .await;
    assert_eq!(ended.status, 204);
    let after = served.get(&format!("/sessions/{id}")).await;
    assert_eq!(after.body["session"]["status"], "ended");
    let deleted = served
        .request(
            "DELETE",
            &format!("/sessions/{id}?delete_history=true"),
            None,
        )
        .await;
    assert_eq!(deleted.status, 204);
    assert_eq!(served.get(&format!("/sessions/{id}")).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_messages_to_one_session_run_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), echo_back).await;
    let session = served.session().await;
    let first = served.execute(&session, "one").await;
    let second = served.execute(&session, "two").await;
    let second_frames = frames(served.attach(&second, None).await, None).await;
    let first_frames = frames(served.attach(&first, None).await, None).await;
    let said = |all: &[crate::support::Frame]| {
        all.iter()
            .filter(|frame| frame.event == "text")
            .map(|frame| frame.data["content"].as_str().unwrap().to_owned())
            .collect::<String>()
    };
    assert_eq!(said(&first_frames), "done: one");
    assert_eq!(said(&second_frames), "done: two");
    assert_eq!(*served.calls.lock().unwrap(), ["one", "two"]);

    let history = served.get(&format!("/sessions/{session}/history")).await;
    let messages = history.body["data"].as_array().unwrap();
    let shown: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shown,
        [
            ("user", "one"),
            ("assistant", ""),
            ("assistant", "done: one"),
            ("user", "two"),
            ("assistant", ""),
            ("assistant", "done: two"),
        ]
    );
    let call = &messages[1]["tool_calls"][0];
    assert_eq!(call["name"], "echo");
    assert_eq!(call["input"], json!({ "text": "one" }));
    assert_eq!(call["output"], json!({ "text": "echo: one" }));
    assert_eq!(call["status"], "completed");

    let listed = served.get("/executions?status=completed").await;
    assert_eq!(listed.body["total"], 2);
    let calls = served
        .get(&format!("/executions/{second}/tool-calls"))
        .await;
    assert_eq!(
        calls.body["tool_calls"][0]["input"],
        json!({ "text": "two" })
    );
    let result = served.get(&format!("/executions/{second}/result")).await;
    assert_eq!(result.body["result"]["output"], "done: two");
    assert_eq!(result.body["result"]["tool_calls"][0]["success"], true);
    assert_eq!(result.body["result"]["usage"]["total_tokens"], 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_sessions_at_once_never_see_each_others_frames() {
    let dir = tempfile::tempdir().unwrap();
    let served = Arc::new(serve(&dir.path().join("h.db"), echo_back).await);
    let mut runs = Vec::new();
    for i in 0..10 {
        let served = Arc::clone(&served);
        runs.push(tokio::spawn(async move {
            let session = served.session().await;
            let message = format!("session {i}");
            let execution = served.execute(&session, &message).await;
            (
                message,
                frames(served.attach(&execution, None).await, None).await,
            )
        }));
    }
    for run in runs {
        let (message, seen) = run.await.unwrap();
        assert_eq!(seen.last().unwrap().event, "done");
        for frame in &seen {
            let text = frame.data.to_string();
            for other in 0..10 {
                let other = format!("session {other}");
                if other != message {
                    assert!(
                        !text.contains(&format!("{other}\"")),
                        "{message} saw {text}"
                    );
                }
            }
        }
        assert!(
            seen.iter()
                .any(|frame| frame.data["input"]["text"] == message)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_waits_for_its_answer_and_a_fork_copies_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), echo_back).await;
    let session = served.session().await;
    let sent = served
        .post(
            &format!("/sessions/{session}/message"),
            json!({ "content": "hello" }),
        )
        .await;
    assert_eq!(sent.status, 200, "{:?}", sent.body);
    assert_eq!(sent.body["message"]["role"], "user");
    assert_eq!(sent.body["message"]["content"], "hello");
    assert_eq!(sent.body["response"]["content"], "done: hello");

    let fork = served
        .post(
            &format!("/sessions/{session}/fork"),
            json!({ "new_name": "copy" }),
        )
        .await;
    assert_eq!(fork.status, 201, "{:?}", fork.body);
    assert_eq!(fork.body["forked_from"], session.as_str());
    assert_eq!(fork.body["message_count"], 4);
    let copy = fork.body["session"]["id"].as_str().unwrap();
    assert_ne!(copy, session);
    let streamed = served
        .http()
        .clone()
        .post(served.url(&format!("/sessions/{copy}/message/stream")))
        .bearer_auth(crate::support::TOKEN)
        .header("content-type", "application/json")
        .body(json!({ "content": "again" }).to_string())
        .send()
        .await
        .unwrap();
    let seen = frames(streamed, None).await;
    assert_eq!(seen.last().unwrap().event, "done");
    let history = served
        .get(&format!("/sessions/{copy}/history?limit=100"))
        .await;
    assert_eq!(history.body["total"], 6);
    let original = served.get(&format!("/sessions/{session}/history")).await;
    assert_eq!(original.body["total"], 3);

    // A fork up to a message keeps it and those before it.
    let first = original.body["data"][0]["id"].as_str().unwrap();
    let partial = served
        .post(
            &format!("/sessions/{session}/fork"),
            json!({ "from_message_id": first }),
        )
        .await;
    assert_eq!(partial.status, 201, "{:?}", partial.body);
    assert_eq!(partial.body["message_count"], 1);
    let missing = served
        .post(
            &format!("/sessions/{session}/fork"),
            json!({ "from_message_id": "m-404" }),
        )
        .await;
    assert_eq!(missing.status, 422);
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("m-404")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_dropped_and_loads_again_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), echo_back).await;
    let session = served.session().await;
    let first = served.execute(&session, "one").await;
    frames(served.attach(&first, None).await, None).await;
    assert_eq!(served.server.evict_idle(std::time::Duration::ZERO).await, 1);
    assert_eq!(served.server.evict_idle(std::time::Duration::ZERO).await, 0);
    let second = served.execute(&session, "two").await;
    let seen = frames(served.attach(&second, None).await, None).await;
    assert_eq!(seen.last().unwrap().event, "done");
    let history = served.get(&format!("/sessions/{session}/history")).await;
    assert_eq!(history.body["total"], 6);
}

fn plans() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call(
            "task_write",
            json!({ "tasks": [
                { "content": "Read the code", "status": "completed" },
                { "content": "Fix the bug", "status": "in_progress" }
            ] }),
        ))
        .then(Scripted::text("working on it"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executions_plan_is_its_sessions_task_list() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), plans).await;
    let session = served.session().await;
    let execution = served.execute(&session, "fix it").await;
    let seen = frames(served.attach(&execution, None).await, None).await;
    let progress = seen.iter().find(|frame| frame.event == "progress").unwrap();
    assert_eq!(progress.data["total_steps"], 2);
    let plan = served.get(&format!("/executions/{execution}/plan")).await;
    assert_eq!(plan.status, 200, "{:?}", plan.body);
    let tasks = plan.body["plan"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["content"], "Read the code");
    assert_eq!(tasks[0]["status"], "completed");
    assert_eq!(tasks[1]["status"], "in_progress");
    assert_eq!(tasks[1]["order"], 1);
    let open = served
        .get(&format!(
            "/executions/{execution}/plan/tasks?status=in_progress"
        ))
        .await;
    assert_eq!(open.body["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(served.get("/executions/nope/plan").await.status, 404);
}
