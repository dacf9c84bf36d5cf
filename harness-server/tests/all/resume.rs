//! Streams are the event log: a client cut off, or a server restarted, resumes with
//! `Last-Event-ID` and receives exactly the rest, byte for byte.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use harness_core::model::{Scripted, ScriptedModel};
use harness_tests::child::{kill, next_report, park_until_killed, say, spawn};
use harness_tests::fixtures::hang;
use serde_json::json;

use crate::support::{Frame, frames, frames_until, serve, serve_with, text};

/// 40 echo calls at once (three frames each), then an answer: 120+ frames.
fn many_calls() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_calls(
            (0..40).map(|i| ("echo", json!({ "text": format!("call {i}") }))),
        ))
        .then(Scripted::text("All done."))
}

/// The same 40 calls, then a tool that never returns: a run to kill the server in.
fn calls_then_hang() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_calls(
            (0..40).map(|i| ("echo", json!({ "text": format!("call {i}") }))),
        ))
        .then(Scripted::tool_call("hang", json!({})))
        .then(Scripted::text("never"))
}

fn assert_complete(whole: &[Frame]) {
    assert!(whole.len() >= 100, "{} frames", whole.len());
    assert_eq!(whole.last().unwrap().event, "done");
    for (at, frame) in whole.iter().enumerate() {
        assert_eq!(frame.id, (at + 1).to_string());
        assert_eq!(frame.event, frame.data["type"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cut_off_resumes_with_exactly_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&dir.path().join("h.db"), many_calls).await;
    let session = served.session().await;
    let execution = served.execute(&session, "go").await;

    // Cut while the run is (likely) still going, then read the rest.
    let first = frames(served.attach(&execution, None).await, Some(50)).await;
    let rest = frames(
        served
            .attach(&execution, Some(&first.last().unwrap().id))
            .await,
        None,
    )
    .await;
    let whole = frames(served.attach(&execution, None).await, None).await;
    assert_complete(&whole);
    assert_eq!(text(&first) + &text(&rest), text(&whole));

    for k in [1, 2, 64, whole.len() - 1, whole.len()] {
        let first = frames(served.attach(&execution, None).await, Some(k)).await;
        let rest = frames(
            served
                .attach(&execution, Some(&first.last().unwrap().id))
                .await,
            None,
        )
        .await;
        assert_eq!(text(&first) + &text(&rest), text(&whole), "cut after {k}");
    }
    assert_eq!(served.calls.lock().unwrap().len(), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_stream_reads_the_same_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let (execution, whole) = {
        let served = serve(&db, many_calls).await;
        let session = served.session().await;
        let execution = served.execute(&session, "go").await;
        let whole = frames(served.attach(&execution, None).await, None).await;
        (execution, whole)
    };
    assert_complete(&whole);
    let served = serve(&db, many_calls).await;
    let again = frames(served.attach(&execution, None).await, None).await;
    assert_eq!(text(&again), text(&whole));
    let rest = frames(served.attach(&execution, Some("70")).await, None).await;
    assert_eq!(text(&whole[..70]) + &text(&rest), text(&whole));
}

/// The server of [`a_server_killed_mid_run_ends_the_run_with_error_then_done`], in a child
/// process; a no-op in a normal test run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_child() {
    let Ok(db) = std::env::var("HARNESS_SERVER_CHILD_DB") else {
        return;
    };
    let served = serve_with(
        Path::new(&db),
        calls_then_hang,
        Arc::new(|builder| builder.tool(hang(Duration::from_secs(3600)))),
        |_| {},
    )
    .await;
    say(&served.base);
    tokio::task::spawn_blocking(park_until_killed)
        .await
        .unwrap();
}

async fn start_child(db: &Path) -> (std::process::Child, String) {
    let db = db.display().to_string();
    tokio::task::spawn_blocking(move || {
        let (child, mut reports) = spawn(
            "resume::server_child",
            [("HARNESS_SERVER_CHILD_DB", db.as_str())],
        );
        let base = next_report(&mut reports).expect("the server child reports its address");
        (child, base)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_ends_the_run_with_error_then_done() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let (child, base) = start_child(&db).await;
    let client = crate::support::Client::new(&base);
    let session = client.session().await;
    let execution = client.execute(&session, "go").await;
    // Everything up to the call that hangs: the run is mid-way when the server dies.
    let before = frames_until(client.attach(&execution, None).await, |frame| {
        frame.event == "tool_call_start" && frame.data["name"] == "hang"
    })
    .await;
    assert!(before.len() > 100, "{} frames", before.len());
    tokio::task::spawn_blocking(move || kill(child))
        .await
        .unwrap();

    let (child, base) = start_child(&db).await;
    let client = crate::support::Client::new(&base);
    let rest = frames(
        client
            .attach(&execution, Some(&before.last().unwrap().id))
            .await,
        None,
    )
    .await;
    let kinds: Vec<&str> = rest.iter().map(|frame| frame.event.as_str()).collect();
    assert_eq!(kinds, ["error", "done"]);
    assert_eq!(rest[0].data["code"], "server_restarted");
    let whole = frames(client.attach(&execution, None).await, None).await;
    assert_eq!(text(&before) + &text(&rest), text(&whole));
    let record = client.get(&format!("/executions/{execution}")).await;
    assert_eq!(record.body["execution"]["status"], "failed");
    // The session's lock died with the process: it takes new executions.
    let next = client.execute(&session, "again").await;
    let first = frames(client.attach(&next, None).await, Some(1)).await;
    assert_eq!(first[0].id, "1");
    tokio::task::spawn_blocking(move || kill(child))
        .await
        .unwrap();
}
