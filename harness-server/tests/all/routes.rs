//! From the router's own route table: every route is `401` without a token; with one, every
//! spec route answers (never `404` or `405`): the routes provided with a body valid against
//! the spec's type (transcribed in `spec_types.rs`) and the served OpenAPI document, the others
//! `501` with the spec's error body.

use harness_core::model::{Scripted, ScriptedModel};
use harness_server::{SPEC_ROUTES, SpecRoute, Transport};
use serde_json::{Value, json};

use crate::support::{Served, answer, frames, serve};

/// Tool calls (one writes a file), then an answer: every listing has something in it.
fn answers() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_calls([
            ("echo", json!({ "text": "x" })),
            ("write_file", json!({ "path": "out.txt", "content": "out" })),
        ]))
        .then(Scripted::text("ok"))
        .cycling()
}

/// A hook that is never called (`custom`), to a URL no test reaches.
fn never_called() -> Value {
    json!({ "event": "custom", "handler": { "type": "webhook", "url": "https://hooks.example.com/x" } })
}

/// A custom tool the model never calls, to a URL no test reaches.
fn never_run() -> Value {
    json!({
        "name": format!("tool_{}", harness_core::harness::default_id()),
        "description": "never run",
        "input_schema": { "type": "object" },
        "handler": { "type": "webhook", "url": "https://tools.example.com/x" }
    })
}

/// A streamable HTTP server nobody listens at (connecting only records it; a run that tries
/// to start it fails at once), named uniquely.
fn elsewhere() -> Value {
    json!({
        "name": format!("r{}", harness_core::harness::default_id()),
        "transport": { "type": "http", "url": "https://127.0.0.1:1/mcp" }
    })
}

/// A webhook for events nothing in this test produces.
fn never_notified() -> Value {
    json!({ "url": "https://hooks.example.com/never", "events": ["hook.triggered"] })
}

/// The ids a route's path takes.
struct Ids {
    session: String,
    execution: String,
    hook: String,
    agent: String,
    tool: String,
    subagent: String,
    /// A server connected over the API (changed and disconnected by the routes).
    mcp_connected: String,
    webhook: String,
    /// The agent's memory as `memory.export` wrote it.
    snapshot: Vec<u8>,
}

/// The route's path with real ids.
fn path(route: &SpecRoute, ids: &Ids) -> String {
    let mut path = format!("/v1{}", route.path);
    for (name, value) in [
        ("{harnessId}", "local"),
        ("{sessionId}", ids.session.as_str()),
        ("{executionId}", ids.execution.as_str()),
        ("{hookId}", ids.hook.as_str()),
        ("{agentId}", ids.agent.as_str()),
        (
            "{toolId}",
            if route.id.starts_with("tools.invoke") {
                // The scripted harness's own: it answers at once.
                "echo"
            } else {
                ids.tool.as_str()
            },
        ),
        ("{subagentId}", ids.subagent.as_str()),
        (
            "{serverId}",
            if matches!(route.id, "mcp.update" | "mcp.disconnect") {
                ids.mcp_connected.as_str()
            } else {
                // The configured one: it answers.
                "everything"
            },
        ),
        ("{artifactId}", "art_1"),
        ("{label}", "notes"),
        ("{taskId}", "t1"),
        ("{webhookId}", ids.webhook.as_str()),
        ("{path}", "notes.txt"),
    ] {
        path = path.replace(name, value);
    }
    // Every other id names nothing: a `501` route must not care.
    while let (Some(start), Some(end)) = (path.find('{'), path.find('}')) {
        path.replace_range(start..=end, "x");
    }
    path
}

/// The form of the routes that take `multipart/form-data`.
fn form<'a>(route: &SpecRoute, ids: &'a Ids) -> Option<Vec<crate::support::Part<'a>>> {
    match route.id {
        "memory.import" => Some(vec![("snapshot", Some("memory.zip"), &ids.snapshot)]),
        "files.upload" => Some(vec![
            ("path", None, b"uploaded.txt"),
            ("overwrite", None, b"true"),
            ("file", Some("uploaded.txt"), b"up"),
        ]),
        "files.uploadBatch" => Some(vec![
            ("overwrite", None, b"true"),
            ("files", Some("batch/a.txt"), b"a"),
        ]),
        _ => None,
    }
}

/// A valid body for the routes provided that take one.
fn body(route: &SpecRoute, session: &str) -> Option<Value> {
    Some(match route.id {
        "sessions.create" => json!({ "name": "routes" }),
        "sessions.update" => json!({ "name": "renamed" }),
        "sessions.fork" => json!({}),
        "sessions.sendMessage" | "sessions.sendMessageStream" => json!({ "content": "hi" }),
        "execution.run" | "execution.stream" => json!({ "message": "hi", "session_id": session }),
        "execution.sendInput" => json!({ "data": "yes" }),
        "hooks.register" => never_called(),
        "agents.create" => json!({ "name": "routes" }),
        "tools.register" => never_run(),
        "agents.update" => json!({ "description": "changed" }),
        "memory.createBlock" => json!({ "label": "more", "value": "v" }),
        "files.mkdir" => json!({ "path": "made/here" }),
        "memory.updateBlock" => json!({ "value": "changed" }),
        "subagents.spawn" => json!({ "name": "routes", "description": "a subagent" }),
        "mcp.connect" => elsewhere(),
        "tools.invoke" | "tools.invokeStream" => json!({ "input": { "text": "hi" } }),
        "planning.update" => json!({ "tasks": [{ "id": "t1", "content": "route task" }] }),
        "planning.updateTask" => json!({ "status": "completed" }),
        "webhooks.register" => never_notified(),
        "files.search" => json!({ "glob": "*.txt" }),
        "files.downloadBatch" => json!({ "paths": ["notes.txt"] }),
        "memory.search" => json!({ "query": "v" }),
        "agents.clone" => json!({ "new_name": "copy" }),
        "memory.addToArchive" => json!({ "content": "kept" }),
        "mcp.update" => json!({ "auto_reconnect": true }),
        "subagents.delegate" | "subagents.delegateStream" => json!({ "task": "hi" }),
        _ if route.method == "POST" || route.method == "PUT" || route.method == "PATCH" => {
            json!({})
        }
        _ => return None,
    })
}

/// The schema of `route`'s answer `status` in the document, as a validator.
fn validator(document: &Value, route: &SpecRoute, status: u16) -> Option<jsonschema::Validator> {
    let operation =
        &document["paths"][format!("/v1{}", route.path)][route.method.to_ascii_lowercase()];
    let response = &operation["responses"][status.to_string()];
    assert!(
        !response.is_null(),
        "{} answered {status}, which the document does not list",
        route.id
    );
    let schema = response["content"]["application/json"]["schema"].clone();
    if schema.is_null() {
        return None;
    }
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": document["components"],
        "allOf": [schema],
    });
    Some(jsonschema::validator_for(&root).unwrap())
}

async fn setup(served: &Served, workspace: &std::path::Path) -> Ids {
    std::fs::write(workspace.join("notes.txt"), "notes").unwrap();
    let session = served.session().await;
    let execution = served.execute(&session, "hi").await;
    let seen = frames(served.attach(&execution, None).await, None).await;
    assert_eq!(seen.last().unwrap().event, "done");
    let planned = served
        .request(
            "PATCH",
            &format!("/executions/{execution}/plan"),
            Some(json!({ "tasks": [{ "id": "t1", "content": "route task" }] })),
        )
        .await;
    assert_eq!(planned.status, 200, "{:?}", planned.body);
    let hook = served.post("/hooks", never_called()).await;
    let agent = served.post("/agents", json!({ "name": "routes" })).await;
    let agent = agent.body["agent"]["id"].as_str().unwrap().to_owned();
    served
        .post(
            &format!("/agents/{agent}/memory/blocks"),
            json!({ "label": "notes", "value": "v" }),
        )
        .await;
    let tool = served.post("/tools", never_run()).await;
    let subagents = format!("/agents/{agent}/subagents");
    let subagent = served
        .post(
            &subagents,
            json!({ "name": "routes", "description": "a subagent" }),
        )
        .await;
    let subagent = subagent.body["subagent"]["id"].as_str().unwrap().to_owned();
    let delegated = served
        .post(
            &format!("{subagents}/{subagent}/delegate"),
            json!({ "task": "hi" }),
        )
        .await;
    assert_eq!(
        delegated.body["status"], "completed",
        "{:?}",
        delegated.body
    );
    let connected = served.post("/mcp-servers", elsewhere()).await;
    assert_eq!(connected.status, 201, "{:?}", connected.body);
    let webhook = served.post("/webhooks", never_notified()).await;
    assert_eq!(webhook.status, 201, "{:?}", webhook.body);
    let exported = served
        .http()
        .post(served.url(&format!("/agents/{agent}/memory/export")))
        .bearer_auth(crate::support::TOKEN)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(exported.status(), 200);
    let snapshot = exported.bytes().await.unwrap().to_vec();
    Ids {
        session,
        execution,
        hook: hook.body["hook"]["id"].as_str().unwrap().to_owned(),
        agent,
        tool: tool.body["tool"]["id"].as_str().unwrap().to_owned(),
        subagent,
        mcp_connected: connected.body["server"]["id"].as_str().unwrap().to_owned(),
        webhook: webhook.body["webhook"]["id"].as_str().unwrap().to_owned(),
        snapshot,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_needs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), answers).await;
    let http = served.http().clone();
    assert_eq!(SPEC_ROUTES.len(), 115);
    for route in SPEC_ROUTES {
        let ids = Ids {
            session: "s".into(),
            execution: "e".into(),
            hook: "h".into(),
            agent: "a".into(),
            tool: "t".into(),
            subagent: "sa".into(),
            mcp_connected: "m".into(),
            webhook: "w".into(),
            snapshot: Vec::new(),
        };
        let url = format!("{}{}", served.base, path(route, &ids));
        let method = reqwest::Method::from_bytes(route.method.as_bytes()).unwrap();
        let refused = answer(http.request(method, &url).send().await.unwrap()).await;
        assert_eq!(refused.status, 401, "{} {url}", route.id);
        assert_eq!(refused.body["error"]["code"], "UNAUTHORIZED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spec_route_answers_its_documented_body_or_501() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().to_path_buf();
    let tools = harness_workspace::Workspace::new(&root).unwrap();
    let Some(server) = harness_tests::mcp_servers::everything("everything", dir.path()) else {
        return;
    };
    let served = crate::support::serve_with(
        &dir.path().join("h.db"),
        answers,
        std::sync::Arc::new(move |builder| builder.tool(tools.write_file())),
        move |config| {
            config.mcp_servers = vec![server];
            config.workspace = Some(root);
            config.logs.push(
                harness_server::LogLevel::Info,
                "kept".into(),
                Default::default(),
            );
        },
    )
    .await;
    let document: Value = served
        .http()
        .get(format!("{}/openapi.json", served.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let http = served.http().clone();
    let mut provided = 0;
    // Destructive routes last, each on a session and execution of its own.
    let mut routes: Vec<&SpecRoute> = SPEC_ROUTES.iter().collect();
    routes.sort_by_key(|route| route.method == "DELETE" || route.id.ends_with(".cancel"));
    for route in routes {
        let ids = setup(&served, workspace.path()).await;
        let url = format!("{}{}", served.base, path(route, &ids));
        let method = reqwest::Method::from_bytes(route.method.as_bytes()).unwrap();
        let mut request = http
            .request(method, &url)
            .bearer_auth(crate::support::TOKEN);
        if let Some(parts) = form(route, &ids) {
            let (content_type, body) = crate::support::multipart(&parts);
            request = request.header("content-type", content_type).body(body);
        } else if let Some(body) = body(route, &ids.session) {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        assert!(
            status != 404 && status != 405,
            "{} {url}: {status}",
            route.id
        );
        if route.id == "files.downloadBatch" || route.id == "memory.export" {
            assert_eq!(status, 200, "{}", route.id);
            assert_eq!(response.headers()["content-type"], "application/zip");
            provided += 1;
            continue;
        }
        if matches!(
            route.id,
            "files.read" | "files.download" | "execution.downloadArtifact"
        ) {
            assert_eq!(status, 200, "{}", route.id);
            let expected = if route.id == "execution.downloadArtifact" {
                "out"
            } else {
                "notes"
            };
            assert_eq!(response.bytes().await.unwrap(), expected);
            provided += 1;
            continue;
        }
        if route.id == "sessions.connect" {
            // A WebSocket: asked without the upgrade, it says so (tests/all/connect.rs opens it).
            assert_eq!(status, 426, "{}", route.id);
            let answered = answer(response).await;
            assert_eq!(answered.body["error"]["code"], "UPGRADE_REQUIRED");
            provided += 1;
            continue;
        }
        if route.id == "hooks.streamEvents" {
            assert_eq!(status, 200);
            // The journal's stream stays open: its first event is enough.
            let seen = frames(response, Some(1)).await;
            assert_eq!(seen[0].event, "session.created");
            provided += 1;
            continue;
        }
        if route.id == "diagnostics.streamLogs" {
            assert_eq!(status, 200);
            // The log stream stays open: its first entry is enough.
            let seen = frames(response, Some(1)).await;
            assert_eq!(seen[0].event, "log");
            assert_eq!(seen[0].data["message"], "kept");
            provided += 1;
            continue;
        }
        if route.transport == Transport::Sse && status == 200 {
            let seen = frames(response, None).await;
            let last = if route.id == "planning.stream" {
                // The plan of an execution that is over: its tasks, then the end.
                "task.added"
            } else {
                "done"
            };
            assert_eq!(seen.last().unwrap().event, last, "{}", route.id);
            provided += 1;
            continue;
        }
        let answered = answer(response).await;
        if status == 501 {
            assert_eq!(answered.body["error"]["code"], "CAPABILITY_NOT_SUPPORTED");
            assert_eq!(answered.body["error"]["operation"], route.id);
        } else {
            provided += 1;
            assert!(
                (200..300).contains(&status)
                    || route.id == "execution.sendInput"
                    || route.id == "execution.cancel",
                "{} {url}: {status} {}",
                route.id,
                answered.body
            );
        }
        // Against the spec's own types, transcribed apart from the server's document.
        let spec_type = if (200..300).contains(&status) {
            crate::spec_types::response(route.id)
        } else {
            Some(crate::spec_types::error())
        };
        match spec_type {
            Some(schema) => {
                let validator = jsonschema::validator_for(&schema).unwrap();
                let problems: Vec<String> = validator
                    .iter_errors(&answered.body)
                    .map(|error| format!("{error} at {}", error.instance_path()))
                    .collect();
                assert!(
                    problems.is_empty(),
                    "{} is not the spec's type: {problems:?} in {}",
                    route.id,
                    answered.body
                );
            }
            None => assert!(
                answered.body.is_null(),
                "{}: no spec type for a body: {}",
                route.id,
                answered.body
            ),
        }
        if let Some(validator) = validator(&document, route, status) {
            let problems: Vec<String> = validator
                .iter_errors(&answered.body)
                .map(|error| error.to_string())
                .collect();
            assert!(
                problems.is_empty(),
                "{}: {problems:?} in {}",
                route.id,
                answered.body
            );
        }
    }
    assert_eq!(provided, 94);
}
