//! Agents and memory blocks: what a session created for an agent sends the model.

use std::sync::Arc;

use harness_core::model::{Scripted, ScriptedModel};
use serde_json::json;

use crate::support::{frames, serve_with};

fn echo_then_answer() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call("echo", json!({ "text": "hi" })))
        .then(Scripted::text("done"))
        .cycling()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_prompt_blocks_and_tool_lists_reach_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(echo_then_answer());
    let served = serve_with(
        &dir.path().join("h.db"),
        echo_then_answer,
        {
            let model = Arc::clone(&model);
            Arc::new(move |builder| builder.model(Arc::clone(&model)))
        },
        |_| {},
    )
    .await;
    let created = served
        .post(
            "/agents",
            json!({
                "name": "Quill Writer",
                "description": "writes",
                "config": {
                    "system_prompt": "You are Quill, a careful writer.",
                    "tools_access": { "deny": ["ech*"] }
                }
            }),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let agent = created.body["agent"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created.body["agent"]["slug"], "quill-writer");
    let block = served
        .post(
            &format!("/agents/{agent}/memory/blocks"),
            json!({ "label": "human", "value": "The user's name is Ada." }),
        )
        .await;
    assert_eq!(block.status, 201, "{:?}", block.body);
    let taken = served
        .post(
            &format!("/agents/{agent}/memory/blocks"),
            json!({ "label": "human", "value": "again" }),
        )
        .await;
    assert_eq!(taken.status, 409);
    let bad = served
        .post(
            &format!("/agents/{agent}/memory/blocks"),
            json!({ "label": "Not Kebab", "value": "x" }),
        )
        .await;
    assert_eq!(bad.body["error"]["details"]["field"], "label");

    let session = served.post("/sessions", json!({ "agent_id": agent })).await;
    assert_eq!(session.status, 201, "{:?}", session.body);
    let session = session.body["session"]["id"].as_str().unwrap().to_owned();
    let execution = served.execute(&session, "write").await;
    let seen = frames(served.attach(&execution, None).await, None).await;
    let result = seen
        .iter()
        .find(|frame| frame.event == "tool_result")
        .unwrap();
    assert_eq!(
        result.data["success"], false,
        "a denied tool ran: {result:?}"
    );

    let requests = model.requests();
    let first = &requests[0];
    assert!(
        first.system.contains("You are Quill, a careful writer."),
        "{}",
        first.system
    );
    assert!(
        first.system.contains(
            "<memory_blocks>\n<human>\nThe user's name is Ada.\n</human>\n</memory_blocks>"
        ),
        "{}",
        first.system
    );
    assert!(first.tools.iter().all(|tool| tool.name != "echo"));

    // An edit reaches the next model call.
    let changed = served
        .request(
            "PUT",
            &format!("/agents/{agent}/memory/blocks/human"),
            Some(json!({ "value": "The user's name is Grace." })),
        )
        .await;
    assert_eq!(changed.status, 200);
    let next = served.execute(&session, "again").await;
    frames(served.attach(&next, None).await, None).await;
    let requests = model.requests();
    assert!(requests.last().unwrap().system.contains("Grace"));

    let memory = served.get(&format!("/agents/{agent}/memory")).await;
    assert_eq!(memory.body["memory"]["blocks"][0]["label"], "human");
    let by_agent = served.get(&format!("/sessions?agent_id={agent}")).await;
    assert_eq!(by_agent.body["total"], 1);
    let mismatch = served
        .post(
            "/execute",
            json!({ "message": "x", "session_id": session, "agent_id": "agent_other" }),
        )
        .await;
    assert_eq!(mismatch.status, 404);
    let deleted = served
        .request("DELETE", &format!("/agents/{agent}"), None)
        .await;
    assert_eq!(deleted.status, 204);
    assert_eq!(
        served
            .get(&format!("/agents/{agent}/memory/blocks/human"))
            .await
            .status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_archive_is_searched_exported_and_imported() {
    let dir = tempfile::tempdir().unwrap();
    let served = crate::support::serve(&dir.path().join("h.db"), echo_then_answer).await;
    let create = |name: &str| json!({ "name": name });
    let agent = served.post("/agents", create("Keeper")).await;
    let agent = agent.body["agent"]["id"].as_str().unwrap().to_owned();
    let memory = format!("/agents/{agent}/memory");
    served
        .post(
            &format!("{memory}/blocks"),
            json!({ "label": "project", "value": "Orion ships in March." }),
        )
        .await;
    let added = served
        .post(
            &format!("{memory}/archive"),
            json!({ "content": "The launch window for Orion moved to March.", "metadata": { "source": "call" } }),
        )
        .await;
    assert_eq!(added.status, 201, "{:?}", added.body);
    let again = served
        .post(
            &format!("{memory}/archive"),
            json!({ "content": "The launch window for Orion moved to March." }),
        )
        .await;
    assert_eq!(again.status, 200, "the same passage is kept once");
    assert_eq!(again.body["entry"]["id"], added.body["entry"]["id"]);
    served
        .post(
            &format!("{memory}/archive"),
            json!({ "content": "Budget review on Friday." }),
        )
        .await;
    assert_eq!(served.get(&memory).await.body["memory"]["archive_size"], 2);
    let listed = served.get(&format!("{memory}/archive")).await;
    assert_eq!(listed.body["total"], 2);
    assert_eq!(
        listed.body["data"][0]["content"],
        "Budget review on Friday."
    );

    let found = served
        .post(
            &format!("{memory}/search"),
            json!({ "query": "Orion March" }),
        )
        .await;
    assert_eq!(found.status, 200, "{:?}", found.body);
    let results = found.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["source"], "block");
    assert_eq!(results[0]["label"], "project");
    assert_eq!(results[1]["source"], "archive");
    let half = served
        .post(
            &format!("{memory}/search"),
            json!({ "query": "budget meeting", "include_archive": true, "limit": 5 }),
        )
        .await;
    assert_eq!(half.body["results"][0]["relevance_score"], 0.5);
    let blocks_only = served
        .post(
            &format!("{memory}/search"),
            json!({ "query": "budget", "include_archive": false }),
        )
        .await;
    assert_eq!(blocks_only.body["results"], json!([]));

    let cloned = served
        .post(
            &format!("/agents/{agent}/clone"),
            json!({ "new_name": "Keeper Two", "include_memory": true }),
        )
        .await;
    assert_eq!(cloned.status, 201, "{:?}", cloned.body);
    let twin = cloned.body["agent"]["id"].as_str().unwrap().to_owned();
    assert_ne!(twin, agent);
    assert_eq!(cloned.body["agent"]["slug"], "keeper-two");
    let twin_memory = served.get(&format!("/agents/{twin}/memory")).await;
    assert_eq!(twin_memory.body["memory"]["archive_size"], 2);
    assert_eq!(twin_memory.body["memory"]["blocks"][0]["label"], "project");
    let bare = served
        .post(
            &format!("/agents/{agent}/clone"),
            json!({ "new_name": "Bare" }),
        )
        .await;
    let bare = bare.body["agent"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        served.get(&format!("/agents/{bare}/memory")).await.body["memory"]["archive_size"],
        0
    );

    let exported = served
        .http()
        .post(served.url(&format!("{memory}/export")))
        .bearer_auth(crate::support::TOKEN)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(exported.status(), 200);
    let disposition = exported.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        disposition.starts_with("attachment; filename=\"keeper-memory-"),
        "{disposition}"
    );
    let snapshot = exported.bytes().await.unwrap().to_vec();

    // Into another agent that has a read-only block of the same label and nothing else.
    let other = served.post("/agents", create("Other")).await;
    let other = other.body["agent"]["id"].as_str().unwrap().to_owned();
    let imported = |strategy: &'static str| {
        let served = &served;
        let snapshot = snapshot.clone();
        let path = format!("/agents/{other}/memory/import");
        async move {
            let (content_type, body) = crate::support::multipart(&[
                ("merge_strategy", None, strategy.as_bytes()),
                ("snapshot", Some("memory.zip"), &snapshot),
            ]);
            let response = served
                .http()
                .post(served.url(&path))
                .bearer_auth(crate::support::TOKEN)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            crate::support::answer(response).await
        }
    };
    let first = imported("overwrite").await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["blocks_imported"], 1);
    assert_eq!(first.body["archive_entries_imported"], 2);
    assert_eq!(first.body["conflicts"], 0);
    let merged = imported("merge").await;
    assert_eq!(merged.body["conflicts"], 1);
    assert_eq!(
        merged.body["archive_entries_imported"], 0,
        "entries are kept once"
    );
    let block = served
        .get(&format!("/agents/{other}/memory/blocks/project"))
        .await;
    assert_eq!(
        block.body["block"]["value"],
        "Orion ships in March.\n\nOrion ships in March."
    );
    let skipped = imported("skip").await;
    assert_eq!(skipped.body["blocks_imported"], 0);
    assert_eq!(imported("sideways").await.status, 400);

    let not_zip = {
        let (content_type, body) =
            crate::support::multipart(&[("snapshot", Some("memory.zip"), b"not a zip")]);
        served
            .http()
            .post(served.url(&format!("/agents/{other}/memory/import")))
            .bearer_auth(crate::support::TOKEN)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap()
    };
    assert_eq!(not_zip.status(), 422);
    for (path, body) in [
        (format!("{memory}/search"), json!({ "query": "" })),
        (
            format!("{memory}/search"),
            json!({ "query": "x", "limit": 0 }),
        ),
        (format!("{memory}/archive"), json!({ "content": "" })),
    ] {
        assert_eq!(served.post(&path, body.clone()).await.status, 400, "{body}");
    }
    assert_eq!(
        served
            .post("/agents/agent_none/memory/search", json!({ "query": "x" }))
            .await
            .status,
        404
    );
}
