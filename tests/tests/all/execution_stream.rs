//! A real harness run, logged with the event log writer to a SQLite file and replayed through
//! the Open Harness mapping: what a server would stream for an execution, read back from the
//! log as a client that resumes would read it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use harness_core::event::{EventLogWriter, next_seq};
use harness_core::harness::{Harness, Mode};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::protocol::EventEnvelope;
use harness_core::protocol::open_harness::{ExecutionEvent, ExecutionStream};
use harness_core::store::{SqliteStore, Store};
use harness_tags::Usage;
use harness_tests::fixtures::{Calls, echo};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logged_run_replays_as_the_spec_execution_events() {
    let dir = tempfile::tempdir().unwrap();
    let log_store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path().join("events.db")).unwrap());
    let model = ScriptedModel::new("scripted/test")
        // Malformed arguments: the tool runs with the healed ones, and so does the stream.
        .then(Scripted::malformed_tool_call("echo", "{text: 'hi there',}"))
        .then(Scripted::text("All done."));
    let calls = Calls::default();
    let harness = Harness::builder("server")
        .mode(Mode::new("build"))
        .model(model)
        .tool(echo(Arc::clone(&calls)))
        .build()
        .unwrap();
    harness.init().await.unwrap();
    assert_eq!(next_seq(&*log_store, "h1").await.unwrap(), 1);
    let writer = EventLogWriter::start(harness.events(), Arc::clone(&log_store), "h1");
    let summary = harness.send_message("go").await.unwrap();
    writer.flush().await.unwrap();

    // What a client reads back from the log, after a cut or a restart.
    let envelopes: Vec<EventEnvelope> = log_store
        .events("h1", 0, usize::MAX)
        .await
        .unwrap()
        .iter()
        .map(|event| serde_json::from_str(&event.envelope).unwrap())
        .collect();
    let run_id = summary.run_id.clone();
    let mut stream = ExecutionStream::new(Usage::default());
    let execution: Vec<ExecutionEvent> = envelopes
        .iter()
        .filter(|envelope| envelope.run_id.as_deref() == Some(run_id.as_str()))
        .flat_map(|envelope| stream.map(&envelope.event))
        .collect();
    let kinds: Vec<&str> = execution.iter().map(ExecutionEvent::kind).collect();

    assert_eq!(*calls.lock().unwrap(), ["hi there"]);
    assert!(stream.is_done());
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    let start = kinds.iter().position(|kind| *kind == "tool_call_start");
    let result = kinds.iter().position(|kind| *kind == "tool_result");
    let end = kinds.iter().position(|kind| *kind == "tool_call_end");
    assert!(
        matches!((start, result, end), (Some(s), Some(r), Some(e)) if s < r && r < e),
        "{kinds:?}"
    );
    assert!(execution.contains(&ExecutionEvent::ToolCallStart {
        id: match &execution[start.unwrap()] {
            ExecutionEvent::ToolCallStart { id, .. } => id.clone(),
            other => panic!("{other:?}"),
        },
        name: "echo".into(),
        input: json!({"text": "hi there"}),
    }));
    let text: String = execution
        .iter()
        .filter_map(|event| match event {
            ExecutionEvent::Text { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "All done.");
    // seqs in the log are unbroken from the writer's start.
    assert!(
        envelopes
            .windows(2)
            .all(|pair| pair[1].seq == pair[0].seq + 1)
    );
}
