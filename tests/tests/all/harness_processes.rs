//! A harness on a SQLite file across processes: a child killed with SIGKILL in the middle of
//! a streaming run loses nothing it acknowledged (messages, mode, model, token usage), two
//! processes racing for one thread get exactly one winner, and a thread another process runs
//! in cannot be deleted under it.
//!
//! The children are this test binary re-run with `HARNESS_CHILD_ROLE` set: the test
//! `child_process_entry_point` plays the role and reports on stdout, one `child-says:` line at
//! a time; the parent acts on those lines (no sleeps).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::stream::{self, StreamExt};
use harness_core::event::HarnessEvent;
use harness_core::harness::{Harness, HarnessError, Mode};
use harness_core::model::{
    FinishReason, Model, ModelError, ModelId, ModelRequest, ModelStream, StreamEvent, Usage,
};
use harness_core::store::SqliteStore;
use harness_tags::KernelMessage;
use harness_tests::child::{self, Reports, kill, next_report, park_until_killed, say};
use serde_json::{Value, json};

const ROLE: &str = "HARNESS_CHILD_ROLE";
const DB: &str = "HARNESS_CHILD_DB";
const THREAD: &str = "HARNESS_CHILD_THREAD";

/// Streams `chunk ` deltas and finishes with usage; a message that says `hang` streams a
/// little and then never finishes, like a provider in the middle of a long answer.
struct StreamingModel {
    id: ModelId,
}

#[async_trait]
impl Model for StreamingModel {
    fn id(&self) -> &ModelId {
        &self.id
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let hang = matches!(request.messages.last(), Some(KernelMessage::User { content }) if content == "hang");
        let deltas = stream::iter((0..5).map(|_| Ok(StreamEvent::TextDelta("chunk ".into()))));
        if hang {
            return Ok(deltas.chain(stream::pending()).boxed());
        }
        let end = stream::iter([
            Ok(StreamEvent::Usage(Usage {
                input_tokens: 1000,
                output_tokens: 50,
                ..Usage::default()
            })),
            Ok(StreamEvent::Finish(FinishReason::Stop)),
        ]);
        Ok(deltas.chain(end).boxed())
    }
}

fn harness_on(db: &Path) -> Harness {
    Harness::builder("crash-test")
        .mode(Mode::new("build").default_model("scripted/builder"))
        .mode(Mode::new("plan").default_model("scripted/planner"))
        .sqlite(SqliteStore::open(db).unwrap())
        .model_resolver(|id: &ModelId| {
            Ok(Arc::new(StreamingModel { id: id.clone() }) as Arc<dyn Model>)
        })
        .interactive(false)
        .build()
        .unwrap()
}

/// Not a test of its own: plays a child process's role when `HARNESS_CHILD_ROLE` is set.
#[test]
fn child_process_entry_point() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let db = PathBuf::from(std::env::var(DB).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let harness = harness_on(&db);
        harness.init().await.unwrap();
        match role.as_str() {
            "converse" => converse(&harness).await,
            "report" => {
                let thread_id = std::env::var(THREAD).unwrap();
                harness.switch_thread(&thread_id).await.unwrap();
                let messages = harness.list_messages(None).await.unwrap();
                let report = json!({
                    "mode": harness.session().mode_id(),
                    "model": harness.session().model_id().map(|m| m.to_string()),
                    "usage": harness.session().token_usage(),
                    "messages": messages.iter().map(|m| m.id.clone()).collect::<Vec<_>>(),
                });
                say(&report.to_string());
            }
            "race" => {
                let thread_id = std::env::var(THREAD).unwrap();
                let mut go = String::new();
                std::io::stdin().read_line(&mut go).unwrap();
                match harness.switch_thread(&thread_id).await {
                    Ok(()) => {
                        say("won");
                        park_until_killed();
                    }
                    Err(error @ HarnessError::Lock(_)) => say(&format!("lost: {error}")),
                    Err(other) => say(&format!("failed: {other}")),
                }
            }
            "hold" => {
                let thread_id = std::env::var(THREAD).unwrap();
                harness.switch_thread(&thread_id).await.unwrap();
                say(&format!("holding {}", std::process::id()));
                park_until_killed();
            }
            other => panic!("unknown child role {other}"),
        }
    });
}

/// Creates a thread in plan mode with a chosen model, runs five turns, then starts one that
/// never ends; reports every stored message and usage as the harness announces them.
async fn converse(harness: &Harness) {
    let _reporter = harness.listen(|envelope| match &envelope.event {
        HarnessEvent::MessageEnd { message } => say(&format!("acked {}", message.id)),
        HarnessEvent::UsageUpdate { usage } => {
            say(&format!("usage {}", serde_json::to_string(usage).unwrap()))
        }
        HarnessEvent::MessageDelta { .. } => say("streaming"),
        _ => {}
    });
    let thread = harness.create_thread(Some("crash".into())).await.unwrap();
    harness.switch_mode("plan").await.unwrap();
    harness.switch_model("scripted/planner-v2").await.unwrap();
    say(&format!("thread {}", thread.id));
    for turn in 0..5 {
        harness.send_message(format!("turn {turn}")).await.unwrap();
    }
    say("hanging");
    harness.send_message("hang").await.unwrap();
    unreachable!("the last run never ends");
}

fn spawn_child(role: &str, db: &Path, thread_id: &str) -> (Child, Reports) {
    child::spawn(
        "harness_processes::child_process_entry_point",
        [
            (ROLE, role.as_ref()),
            (DB, db.as_os_str()),
            (THREAD, thread_id.as_ref()),
        ],
    )
}

#[test]
fn a_harness_killed_mid_stream_loses_nothing_it_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");

    let (child, mut reports) = spawn_child("converse", &db, "");
    let mut thread_id = None;
    let mut acked = Vec::new();
    let mut last_usage = Value::Null;
    let mut hanging = false;
    loop {
        let report =
            next_report(&mut reports).expect("the child stopped before the last run streamed");
        if let Some(id) = report.strip_prefix("thread ") {
            thread_id = Some(id.to_owned());
        } else if let Some(id) = report.strip_prefix("acked ") {
            acked.push(id.to_owned());
        } else if let Some(usage) = report.strip_prefix("usage ") {
            last_usage = serde_json::from_str(usage).unwrap();
        } else if report == "hanging" {
            hanging = true;
        } else if report == "streaming" && hanging {
            break;
        }
    }
    kill(child);
    let thread_id = thread_id.unwrap();
    // Five turns of a user and an assistant message, and the last run's user message.
    assert_eq!(acked.len(), 11, "{acked:?}");

    // A new process reopens the thread (the dead process's lock is gone with it).
    let (mut reader, mut reports) = spawn_child("report", &db, &thread_id);
    let report: Value = serde_json::from_str(&next_report(&mut reports).unwrap()).unwrap();
    reader.wait().unwrap();
    let stored: Vec<String> = serde_json::from_value(report["messages"].clone()).unwrap();
    for id in &acked {
        assert!(
            stored.contains(id),
            "acknowledged message {id} was lost: {stored:?}"
        );
    }
    assert_eq!(report["mode"], "plan");
    assert_eq!(report["model"], "scripted/planner-v2");
    assert_eq!(report["usage"], last_usage);
    assert_eq!(report["usage"]["inputTokens"], 5000);
}

#[test]
fn two_processes_racing_for_one_thread_get_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");
    let thread_id = {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let harness = harness_on(&db);
            let thread = harness
                .create_thread(Some("contested".into()))
                .await
                .unwrap();
            harness.destroy().await;
            thread.id
        })
    };

    let mut racers: Vec<_> = (0..2)
        .map(|_| spawn_child("race", &db, &thread_id))
        .collect();
    for (child, _) in &mut racers {
        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    }
    let mut outcomes: Vec<String> = racers
        .iter_mut()
        .map(|(_, reports)| next_report(reports).unwrap())
        .collect();
    outcomes.sort();
    assert_eq!(outcomes[1], "won", "{outcomes:?}");
    assert!(outcomes[0].starts_with("lost: "), "{outcomes:?}");
    assert!(
        outcomes[0].contains(&thread_id),
        "the loser is told which thread: {outcomes:?}"
    );
    assert!(
        outcomes[0].contains("in use by another harness"),
        "and why: {outcomes:?}"
    );
    for (child, _) in racers {
        kill(child);
    }
}

#[test]
fn a_thread_another_process_runs_in_is_not_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let harness = harness_on(&db);
    let thread_id = runtime.block_on(async {
        let thread = harness.create_thread(Some("busy".into())).await.unwrap();
        harness
            .create_thread(Some("elsewhere".into()))
            .await
            .unwrap();
        thread.id
    });

    let (child, mut reports) = spawn_child("hold", &db, &thread_id);
    let report = next_report(&mut reports).unwrap();
    let pid = report.strip_prefix("holding ").unwrap();
    let error = runtime
        .block_on(harness.delete_thread(&thread_id))
        .unwrap_err();
    assert!(matches!(error, HarnessError::Lock(_)), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&thread_id), "{message}");
    assert!(
        message.contains(&format!("process {pid}")),
        "the holder is named: {message}"
    );
    let listed = runtime.block_on(harness.list_threads(false)).unwrap();
    assert!(
        listed.iter().any(|t| t.id == thread_id),
        "the thread and its messages are still there"
    );

    // Once its holder is gone, the thread can be deleted.
    kill(child);
    runtime.block_on(harness.delete_thread(&thread_id)).unwrap();
    let listed = runtime.block_on(harness.list_threads(false)).unwrap();
    assert!(listed.iter().all(|t| t.id != thread_id));
}
