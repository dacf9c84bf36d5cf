//! The files routes: the workspace's files, and nothing outside it.

use std::sync::Arc;

use harness_core::model::{Scripted, ScriptedModel};
use serde_json::json;

use crate::support::{Served, TOKEN, answer, serve, serve_with};

fn answers() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::text("ok"))
        .cycling()
}

async fn served(root: &std::path::Path, db: &std::path::Path) -> Served {
    let root = root.to_path_buf();
    serve_with(db, answers, Arc::new(|builder| builder), move |config| {
        config.workspace = Some(root);
    })
    .await
}

async fn put(served: &Served, path: &str, body: &str) -> crate::support::Answer {
    let response = served
        .http()
        .put(served.url(&format!("/files/{path}")))
        .bearer_auth(TOKEN)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    answer(response).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_written_read_listed_and_deleted_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let served = served(workspace.path(), &dir.path().join("h.db")).await;

    let created = put(&served, "docs/notes.md", "# Notes\n").await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["created"], true);
    assert_eq!(created.body["file"]["path"], "docs/notes.md");
    assert_eq!(created.body["file"]["mime_type"], "text/markdown");
    let replaced = put(&served, "docs/notes.md", "# Notes, again\n").await;
    assert_eq!(replaced.status, 200);
    assert_eq!(replaced.body["created"], false);
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("docs/notes.md")).unwrap(),
        "# Notes, again\n"
    );

    let read = served
        .http()
        .get(served.url("/files/docs/notes.md"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(read.headers()["content-type"], "text/markdown");
    assert_eq!(read.text().await.unwrap(), "# Notes, again\n");
    let download = served
        .http()
        .get(served.url("/files/docs/notes.md/download"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        download.headers()["content-disposition"],
        "attachment; filename=\"notes.md\""
    );

    let made = served.post("/files/mkdir", json!({ "path": "a/b" })).await;
    assert_eq!(made.status, 201);
    assert_eq!(made.body["file"]["type"], "directory");
    let listed = served.get("/files").await;
    let names: Vec<&str> = listed.body["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["path"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "docs"]);
    let all = served.get("/files?recursive=true").await;
    assert_eq!(all.body["files"].as_array().unwrap().len(), 4);
    let directory = served.get("/files/docs").await;
    assert_eq!(directory.status, 409);
    let root = served.post("/files/mkdir", json!({ "path": "/" })).await;
    assert_eq!(root.body["error"]["details"]["field"], "path");

    let not_empty = served.request("DELETE", "/files/docs", None).await;
    assert_eq!(not_empty.status, 409);
    assert_eq!(
        served
            .request("DELETE", "/files/docs?recursive=true", None)
            .await
            .status,
        204
    );
    assert!(!workspace.path().join("docs").exists());
    assert_eq!(served.get("/files/docs/notes.md").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_outside_the_workspace_is_reached() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), workspace.path().join("link")).unwrap();
    let served = served(workspace.path(), &dir.path().join("h.db")).await;

    for path in ["..%2Fsecret.txt", "link/secret.txt", "%2Fetc%2Fpasswd"] {
        let refused = served.get(&format!("/files/{path}")).await;
        assert_eq!(refused.status, 403, "{path}: {:?}", refused.body);
        assert!(
            refused.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("outside the workspace"),
            "{path}: {:?}",
            refused.body
        );
    }
    let written = put(&served, "link/planted.txt", "x").await;
    assert_eq!(written.status, 403, "{:?}", written.body);
    assert!(!outside.path().join("planted.txt").exists());
    let deleted = served
        .request("DELETE", "/files/link/secret.txt", None)
        .await;
    assert_eq!(deleted.status, 403);
    assert!(outside.path().join("secret.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_workspace_the_files_routes_are_501() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), answers).await;
    let listed = served.get("/files").await;
    assert_eq!(listed.status, 501);
    assert_eq!(listed.body["error"]["operation"], "files.list");
    let read = served.get("/files/a.txt").await;
    assert_eq!(read.body["error"]["operation"], "files.read");
}

fn writes() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call(
            "write_file",
            json!({ "path": "report/summary.md", "content": "# Summary\n" }),
        ))
        .then(Scripted::text("written"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executions_artifacts_are_the_files_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().to_path_buf();
    let tools = harness_workspace::Workspace::new(&root).unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        writes,
        Arc::new(move |builder| builder.tool(tools.write_file())),
        move |config| config.workspace = Some(root),
    )
    .await;
    let session = served.session().await;
    let execution = served.execute(&session, "write the summary").await;
    crate::support::frames(served.attach(&execution, None).await, None).await;
    let listed = served
        .get(&format!("/executions/{execution}/artifacts"))
        .await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let artifact = &listed.body["artifacts"][0];
    assert_eq!(artifact["id"], "art_1");
    assert_eq!(artifact["name"], "summary.md");
    assert_eq!(artifact["mime_type"], "text/markdown");
    assert_eq!(artifact["size_bytes"], 10);
    let state = served.get(&format!("/executions/{execution}")).await;
    assert_eq!(state.body["execution"]["artifacts_count"], 1);
    let result = served.get(&format!("/executions/{execution}/result")).await;
    assert_eq!(result.body["result"]["artifacts"][0]["id"], "art_1");
    let download = served
        .http()
        .get(served.url(&format!("/executions/{execution}/artifacts/art_1")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        download.headers()["content-disposition"],
        "attachment; filename=\"summary.md\""
    );
    assert_eq!(download.text().await.unwrap(), "# Summary\n");
    let missing = served
        .get(&format!("/executions/{execution}/artifacts/art_2"))
        .await;
    assert_eq!(missing.status, 404);
}
