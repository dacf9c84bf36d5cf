//! Subagents: spawned under an agent, given tasks in a session of their own, and the frames of
//! a subagent the model spawns.

use std::sync::Arc;

use harness_core::harness::SubagentDef;
use harness_core::model::{Scripted, ScriptedModel};
use serde_json::json;

use crate::support::{TOKEN, frames, serve, serve_with};

fn answers() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::text("summary ready"))
        .cycling()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_runs_delegated_tasks_with_its_prompt_and_its_parents_memory() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(answers());
    let served = serve_with(
        &dir.path().join("h.db"),
        answers,
        {
            let model = Arc::clone(&model);
            Arc::new(move |builder| builder.model(Arc::clone(&model)))
        },
        |_| {},
    )
    .await;
    let agent = served
        .post(
            "/agents",
            json!({ "name": "Lead", "config": { "system_prompt": "You lead.",
                "tools_access": { "deny": ["echo"] } } }),
        )
        .await;
    let agent = agent.body["agent"]["id"].as_str().unwrap().to_owned();
    served
        .post(
            &format!("/agents/{agent}/memory/blocks"),
            json!({ "label": "project", "value": "The project is Orion." }),
        )
        .await;
    let subagents = format!("/agents/{agent}/subagents");

    let spawned = served
        .post(
            &subagents,
            json!({ "name": "Summarizer", "description": "Summarizes notes.",
                "system_prompt": "You summarize, briefly." }),
        )
        .await;
    assert_eq!(spawned.status, 201, "{:?}", spawned.body);
    let subagent = &spawned.body["subagent"];
    assert_eq!(subagent["status"], "idle");
    assert_eq!(subagent["parent_agent_id"], agent.as_str());
    let id = subagent["id"].as_str().unwrap().to_owned();
    let one = format!("{subagents}/{id}");

    let early = served.get(&format!("{one}/result")).await;
    assert_eq!(early.status, 409, "{:?}", early.body);
    assert_eq!(served.get(&format!("{one}/stream")).await.status, 409);

    let delegated = served
        .post(
            &format!("{one}/delegate"),
            json!({ "task": "Summarize the notes.", "context": { "notes": "a, b" } }),
        )
        .await;
    assert_eq!(delegated.status, 200, "{:?}", delegated.body);
    assert_eq!(delegated.body["status"], "completed");
    let request = model.requests().last().unwrap().clone();
    assert!(
        request.system.contains("You summarize, briefly."),
        "{}",
        request.system
    );
    assert!(!request.system.contains("You lead."), "{}", request.system);
    assert!(
        request.system.contains("The project is Orion."),
        "{}",
        request.system
    );
    assert!(request.tools.iter().all(|tool| tool.name != "echo"));
    let sent = serde_json::to_string(&request.messages).unwrap();
    assert!(
        sent.contains("Summarize the notes.") && sent.contains("\\\"notes\\\": \\\"a, b\\\""),
        "{sent}"
    );

    let got = served.get(&one).await;
    assert_eq!(got.body["subagent"]["status"], "completed");
    let result = served.get(&format!("{one}/result")).await;
    assert_eq!(result.status, 200, "{:?}", result.body);
    assert_eq!(result.body["result"]["output"], "summary ready");
    assert_eq!(
        result.body["result"]["execution_id"],
        delegated.body["execution_id"]
    );
    let replay = frames(
        served
            .http()
            .get(served.url(&format!("{one}/stream")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
        None,
    )
    .await;
    assert_eq!(replay.last().unwrap().event, "done");

    let streamed = served
        .http()
        .post(served.url(&format!("{one}/delegate/stream")))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(json!({ "task": "Again." }).to_string())
        .send()
        .await
        .unwrap();
    let streamed = frames(streamed, None).await;
    assert!(streamed.iter().any(|frame| frame.event == "text"));
    assert_eq!(streamed.last().unwrap().event, "done");

    let listed = served.get(&subagents).await;
    assert_eq!(listed.body["subagents"].as_array().unwrap().len(), 1);
    let session = listed.body["subagents"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let terminated = served.request("DELETE", &one, None).await;
    assert_eq!(terminated.status, 204, "{:?}", terminated.body);
    assert_eq!(served.get(&one).await.status, 404);
    assert_eq!(
        served.get(&format!("/sessions/{session}")).await.status,
        404
    );
    assert_eq!(served.get(&subagents).await.body["subagents"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_subagent_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), answers).await;
    let missing = served
        .post(
            "/agents/agent_none/subagents",
            json!({ "name": "a", "description": "b" }),
        )
        .await;
    assert_eq!(missing.status, 404);
    let agent = served.post("/agents", json!({ "name": "Lead" })).await;
    let agent = agent.body["agent"]["id"].as_str().unwrap().to_owned();
    let subagents = format!("/agents/{agent}/subagents");
    for (body, field) in [
        (json!({ "name": "", "description": "b" }), "name"),
        (json!({ "name": "a", "description": "" }), "description"),
        (
            json!({ "name": "a", "description": "b", "skills": ["x"] }),
            "skills",
        ),
        (
            json!({ "name": "a", "description": "b", "model": "no-slash" }),
            "model",
        ),
    ] {
        let refused = served.post(&subagents, body).await;
        assert_eq!(refused.status, 400, "{:?}", refused.body);
        assert_eq!(refused.body["error"]["details"]["field"], field);
    }
    // Nothing was made for the refused ones.
    assert_eq!(served.get("/sessions").await.body["total"], 0);
    assert_eq!(served.get(&subagents).await.body["subagents"], json!([]));
    assert_eq!(
        served.get(&format!("{subagents}/sub_none")).await.status,
        404
    );
    let other = served.post("/agents", json!({ "name": "Other" })).await;
    let other = other.body["agent"]["id"].as_str().unwrap().to_owned();
    let spawned = served
        .post(&subagents, json!({ "name": "a", "description": "b" }))
        .await;
    let id = spawned.body["subagent"]["id"].as_str().unwrap();
    // A subagent is found under its own parent only.
    assert_eq!(
        served
            .get(&format!("/agents/{other}/subagents/{id}"))
            .await
            .status,
        404
    );
    let empty = served
        .post(&format!("{subagents}/{id}/delegate"), json!({ "task": "" }))
        .await;
    assert_eq!(empty.body["error"]["details"]["field"], "task");
}

fn spawns_a_subagent() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call(
            "subagent",
            json!({ "agentType": "scout", "task": "Look around." }),
        ))
        .then(Scripted::text("nothing here"))
        .then(Scripted::text("the scout found nothing"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_the_model_spawns_shows_in_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        spawns_a_subagent,
        Arc::new(|builder| {
            builder.subagent(SubagentDef::new(
                "scout",
                "Scout",
                "Looks around.",
                "You look around.",
            ))
        }),
        |_| {},
    )
    .await;
    let session = served.session().await;
    let execution = served.execute(&session, "explore").await;
    let seen = frames(served.attach(&execution, None).await, None).await;
    let events: Vec<&str> = seen.iter().map(|frame| frame.event.as_str()).collect();
    let start = seen
        .iter()
        .find(|frame| frame.event == "subagent_start")
        .unwrap_or_else(|| panic!("no subagent_start in {events:?}"));
    assert_eq!(start.data["agent_type"], "scout");
    assert_eq!(start.data["task"], "Look around.");
    let call = seen
        .iter()
        .find(|frame| frame.event == "tool_call_start")
        .unwrap();
    assert_eq!(start.data["call_id"], call.data["id"]);
    let end = seen
        .iter()
        .position(|frame| frame.event == "subagent_end")
        .unwrap();
    assert_eq!(seen[end].data["success"], true);
    let result = seen
        .iter()
        .position(|frame| frame.event == "tool_result")
        .unwrap();
    assert!(end < result, "{events:?}");
    assert_eq!(seen.last().unwrap().event, "done");
}
