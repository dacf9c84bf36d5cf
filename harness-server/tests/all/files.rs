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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_is_searched_by_glob_and_grep_within_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    std::fs::create_dir_all(root.join("docs/deep")).unwrap();
    std::fs::write(root.join("docs/guide.md"), "intro\nthe needle here\nend\n").unwrap();
    std::fs::write(root.join("docs/deep/more.md"), "needle again\n").unwrap();
    std::fs::write(root.join("main.rs"), "fn main() { needle(); }\n").unwrap();
    std::fs::write(root.join(".hidden.md"), "needle hidden\n").unwrap();
    let served = served(root, &dir.path().join("h.db")).await;
    let search = |body: serde_json::Value| {
        let served = &served;
        async move { served.post("/files/search", body).await }
    };

    let by_name = search(json!({ "glob": "*.md" })).await;
    assert_eq!(by_name.status, 200, "{:?}", by_name.body);
    let paths: Vec<&str> = by_name.body["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|found| found["file"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["docs/deep/more.md", "docs/guide.md"]);
    assert!(by_name.body["matches"][0]["line_matches"].is_null());

    let lines = search(json!({ "grep": "needle", "path": "docs", "glob": "docs/*.md" })).await;
    assert_eq!(lines.status, 200, "{:?}", lines.body);
    let only = &lines.body["matches"];
    assert_eq!(only.as_array().unwrap().len(), 1);
    assert_eq!(only[0]["file"]["name"], "guide.md");
    assert_eq!(
        only[0]["line_matches"],
        json!([{ "line_number": 2, "content": "the needle here" }])
    );
    assert_eq!(lines.body["truncated"], false);

    let capped = search(json!({ "grep": "needle", "max_results": 1.0 })).await;
    assert_eq!(capped.body["matches"].as_array().unwrap().len(), 1);
    assert_eq!(capped.body["truncated"], true);

    for (body, status) in [
        (json!({ "grep": "(" }), 400),
        (json!({ "glob": "a{" }), 400),
        (json!({ "max_results": 0 }), 400),
        (json!({ "max_results": 2.5 }), 400),
        (json!({ "grep": "x", "path": ".." }), 403),
        (json!({ "grep": "x", "path": "/etc" }), 403),
        (json!({ "grep": "x", "path": "nowhere" }), 404),
    ] {
        let refused = search(body.clone()).await;
        assert_eq!(refused.status, status, "{body}: {:?}", refused.body);
    }
}

async fn upload(
    served: &Served,
    path: &str,
    parts: &[crate::support::Part<'_>],
) -> crate::support::Answer {
    let (content_type, body) = crate::support::multipart(parts);
    let response = served
        .http()
        .post(served.url(path))
        .bearer_auth(TOKEN)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    answer(response).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_uploaded_one_or_many_and_downloaded_as_a_zip() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    let served = served(root, &dir.path().join("h.db")).await;

    // Larger than the 1 MiB JSON body limit: uploads have their own.
    let big = vec![b'x'; 3 * 1024 * 1024];
    let one = upload(
        &served,
        "/files/upload",
        &[
            ("path", None, b"in/big.bin"),
            ("file", Some("big.bin"), &big),
        ],
    )
    .await;
    assert_eq!(one.status, 201, "{:?}", one.body);
    assert_eq!(one.body["created"], true);
    assert_eq!(one.body["file"]["size_bytes"], 3 * 1024 * 1024);
    assert_eq!(
        std::fs::read(root.join("in/big.bin")).unwrap().len(),
        big.len()
    );
    let again = upload(
        &served,
        "/files/upload",
        &[
            ("path", None, b"in/big.bin"),
            ("file", Some("big.bin"), b"small"),
        ],
    )
    .await;
    assert_eq!(again.status, 409, "{:?}", again.body);
    let replaced = upload(
        &served,
        "/files/upload",
        &[
            ("path", None, b"in/big.bin"),
            ("overwrite", None, b"true"),
            ("file", Some("big.bin"), b"small"),
        ],
    )
    .await;
    assert_eq!(replaced.status, 200, "{:?}", replaced.body);
    assert_eq!(std::fs::read(root.join("in/big.bin")).unwrap(), b"small");
    for (parts, status) in [
        (
            vec![
                ("path", None, &b"../out.txt"[..]),
                ("file", Some("f"), &b"x"[..]),
            ],
            403,
        ),
        (vec![("file", Some("f"), &b"x"[..])], 400),
        (vec![("path", None, &b"a.txt"[..])], 400),
        (
            vec![
                ("path", None, &b"a.txt"[..]),
                ("extra", None, &b"x"[..]),
                ("file", Some("f"), &b"x"[..]),
            ],
            400,
        ),
    ] {
        let refused = upload(&served, "/files/upload", &parts).await;
        assert_eq!(refused.status, status, "{:?}", refused.body);
    }
    assert!(!root.parent().unwrap().join("out.txt").exists());
    let not_a_form = served.post("/files/upload", json!({ "path": "a" })).await;
    assert_eq!(not_a_form.status, 415, "{:?}", not_a_form.body);

    let batch = upload(
        &served,
        "/files/upload-batch",
        &[
            ("base_path", None, b"site"),
            ("files", Some("index.html"), b"<h1>hi</h1>"),
            ("files", Some("css/app.css"), b"h1 {}"),
            ("files", Some("../../escape.txt"), b"no"),
        ],
    )
    .await;
    assert_eq!(batch.status, 200, "{:?}", batch.body);
    let uploaded: Vec<&str> = batch.body["uploaded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["path"].as_str().unwrap())
        .collect();
    assert_eq!(uploaded, ["site/index.html", "site/css/app.css"]);
    assert_eq!(batch.body["errors"][0]["path"], "site/../../escape.txt");
    let repeated = upload(
        &served,
        "/files/upload-batch",
        &[
            ("base_path", None, b"site"),
            ("files", Some("index.html"), b"again"),
        ],
    )
    .await;
    assert_eq!(repeated.body["skipped"], json!(["site/index.html"]));
    let empty = upload(
        &served,
        "/files/upload-batch",
        &[("overwrite", None, b"false")],
    )
    .await;
    assert_eq!(empty.status, 400, "{:?}", empty.body);
    let unnamed = upload(&served, "/files/upload-batch", &[("files", None, b"{}")]).await;
    assert_eq!(unnamed.status, 400, "{:?}", unnamed.body);

    let zipped = served
        .http()
        .post(served.url("/files/download-batch"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(json!({ "paths": ["site/index.html", "site/css/app.css"] }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(zipped.status(), 200);
    assert_eq!(zipped.headers()["content-type"], "application/zip");
    let bytes = zipped.bytes().await.unwrap();
    let archive = dir.path().join("files.zip");
    std::fs::write(&archive, &bytes).unwrap();
    // Read by an implementation nobody here wrote: Python's zipfile.
    let listed = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; \
             print('\\n'.join(f'{i.filename}={z.read(i).decode()}' for i in z.infolist()))",
        ])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert_eq!(
        String::from_utf8(listed.stdout).unwrap(),
        "site/index.html=<h1>hi</h1>\nsite/css/app.css=h1 {}\n"
    );
    for (paths, status) in [
        (json!(["site/missing.txt"]), 404),
        (json!(["../etc/passwd"]), 403),
        (json!(["site"]), 409),
        (json!([]), 400),
    ] {
        let refused = served
            .post("/files/download-batch", json!({ "paths": paths }))
            .await;
        assert_eq!(refused.status, status, "{paths}: {:?}", refused.body);
    }
}
