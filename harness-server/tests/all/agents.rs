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
