//! Live output through the redaction plugin in a real harness: a model that streams secrets
//! split across small deltas (answer text, reasoning, tool-call arguments) and a tool that
//! streams them split across output chunks. No subscriber ever sees a raw value, in any event
//! or display-state snapshot, and what streams is the whole redacted text, in order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures_util::stream;
use futures_util::{FutureExt, StreamExt};
use harness_core::event::HarnessEvent;
use harness_core::harness::{Harness, Mode};
use harness_core::model::{
    FinishReason, Model, ModelError, ModelId, ModelRequest, ModelStream, StreamEvent,
};
use harness_core::tool::{ShellStream, ToolError, ToolProgress, tool_fn};
use harness_redaction::{Redaction, Target};
use harness_tags::KernelMessage;
use serde_json::Value;

const EMAIL: &str = "bob.smith@example.com";
const CARD: &str = "4111 1111 1111 1111";
const AWS_KEY: &str = "AKIAIOSFODNN7EXAMPLE";

/// Cuts `text` into pieces of `size` bytes (on character boundaries).
fn pieces(text: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if current.len() >= size {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn answer() -> String {
    format!("Write to {EMAIL} and charge {CARD}; the key {AWS_KEY} leaked. Done.")
}

fn reasoning() -> String {
    format!("The user {EMAIL} owns card {CARD}.")
}

fn arguments() -> String {
    format!(r#"{{"to": "{EMAIL}", "note": "key {AWS_KEY}"}}"#)
}

fn output() -> String {
    format!("looking up {EMAIL}...\ncard on file: {CARD}\naws: {AWS_KEY}\nok\n")
}

/// Streams reasoning, an answer and a `notify` call in 3-byte deltas, then answers "done".
struct LeakyModel {
    id: ModelId,
    calls: AtomicUsize,
}

#[async_trait]
impl Model for LeakyModel {
    fn id(&self) -> &ModelId {
        &self.id
    }

    async fn stream(&self, _request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let mut events = Vec::new();
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            events.extend(
                pieces(&reasoning(), 3)
                    .into_iter()
                    .map(StreamEvent::ThinkingDelta),
            );
            events.extend(pieces(&answer(), 3).into_iter().map(StreamEvent::TextDelta));
            events.push(StreamEvent::ToolCallStart {
                index: 0,
                id: "call-1".into(),
                name: "notify".into(),
            });
            events.extend(pieces(&arguments(), 3).into_iter().map(|arguments| {
                StreamEvent::ToolCallDelta {
                    index: 0,
                    arguments,
                }
            }));
            events.push(StreamEvent::ToolCallEnd { index: 0 });
            events.push(StreamEvent::Finish(FinishReason::ToolCalls));
        } else {
            events.push(StreamEvent::TextDelta("done".into()));
            events.push(StreamEvent::Finish(FinishReason::Stop));
        }
        Ok(stream::iter(events.into_iter().map(Ok)).boxed())
    }
}

/// Everything subscribers got: each envelope and each display snapshot as JSON text, and the
/// streamed text by where it went.
#[derive(Default)]
struct Seen {
    json: Vec<String>,
    text: String,
    thinking: String,
    arguments: String,
    output: String,
}

fn harness() -> Harness {
    let model = Arc::new(LeakyModel {
        id: ModelId::new("test/leaky").unwrap(),
        calls: AtomicUsize::new(0),
    });
    Harness::builder("live")
        .mode(Mode::new("build").default_model("test/leaky"))
        .model_resolver(move |_| Ok(model.clone() as Arc<dyn Model>))
        .tool(tool_fn(
            "notify",
            "Notifies someone, streaming what it does.",
            |_: Value, ctx| async move {
                for chunk in pieces(&output(), 5) {
                    ctx.progress(ToolProgress::Shell {
                        output: chunk,
                        stream: ShellStream::Stdout,
                    });
                }
                Ok::<_, ToolError>("sent")
            },
        ))
        .plugin(Redaction::default().target(Target::Assistant, true))
        .build()
        .unwrap()
}

fn assert_nothing_raw(seen: &Seen) {
    for json in &seen.json {
        for secret in [EMAIL, CARD, AWS_KEY, "4111111111111111"] {
            assert!(
                !json.contains(secret),
                "{secret} reached a subscriber: {json}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_text_reasoning_arguments_and_tool_output_reach_no_subscriber_raw() {
    let harness = harness();
    harness.init().await.unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let listener = harness.listen({
        let seen = Arc::clone(&seen);
        move |envelope| {
            let mut seen = seen.lock().unwrap();
            seen.json.push(serde_json::to_string(envelope).unwrap());
            match &envelope.event {
                HarnessEvent::MessageDelta { kind, delta, .. } => {
                    let json = serde_json::to_value(kind).unwrap();
                    if json == "thinking" {
                        seen.thinking.push_str(delta);
                    } else {
                        seen.text.push_str(delta);
                    }
                }
                HarnessEvent::ToolInputDelta {
                    args_text_delta, ..
                } => {
                    seen.arguments.push_str(args_text_delta);
                }
                HarnessEvent::ShellOutput { output, .. } => seen.output.push_str(output),
                _ => {}
            }
        }
    });
    let snapshots = Arc::new(Mutex::new(Vec::new()));
    let mut display = harness.subscribe_display_state();
    let (run_done, mut done) = tokio::sync::oneshot::channel::<()>();
    let watcher = tokio::spawn({
        let snapshots = Arc::clone(&snapshots);
        async move {
            // Every frame until the run is over, then the latest one.
            loop {
                tokio::select! {
                    biased;
                    Some(snapshot) = display.next() => snapshots
                        .lock()
                        .unwrap()
                        .push(serde_json::to_string(&*snapshot).unwrap()),
                    _ = &mut done => break,
                }
            }
            while let Some(Some(snapshot)) = display.next().now_or_never() {
                snapshots
                    .lock()
                    .unwrap()
                    .push(serde_json::to_string(&*snapshot).unwrap());
            }
        }
    });

    harness.send_message("go").await.unwrap();
    let stored = harness.list_messages(None).await.unwrap();
    run_done.send(()).unwrap();
    watcher.await.unwrap();
    drop(listener);

    let mut seen = Arc::into_inner(seen).unwrap().into_inner().unwrap();
    seen.json
        .extend(Arc::into_inner(snapshots).unwrap().into_inner().unwrap());
    assert!(seen.json.len() > 50, "{} frames", seen.json.len());
    assert_nothing_raw(&seen);

    // Everything streamed, redacted whole and in order (the `end` deltas released the rest).
    assert_eq!(
        seen.text,
        "Write to <EMAIL_ADDRESS> and charge <CREDIT_CARD>; the key <API_KEY> leaked. Done.done"
    );
    assert_eq!(
        seen.thinking,
        "The user <EMAIL_ADDRESS> owns card <CREDIT_CARD>."
    );
    assert_eq!(
        seen.arguments,
        r#"{"to": "<EMAIL_ADDRESS>", "note": "key <API_KEY>"}"#
    );
    assert_eq!(
        seen.output,
        "looking up <EMAIL_ADDRESS>...\ncard on file: <CREDIT_CARD>\naws: <API_KEY>\nok\n"
    );

    // The stored assistant message: text, unsigned reasoning and arguments redacted too.
    let assistant = stored
        .iter()
        .find_map(|m| match &m.message {
            KernelMessage::Assistant {
                content,
                tool_calls,
                thinking,
            } if !tool_calls.is_empty() => Some((content, tool_calls, thinking)),
            _ => None,
        })
        .unwrap();
    let stored_json = serde_json::to_string(&assistant).unwrap();
    for secret in [EMAIL, CARD, AWS_KEY] {
        assert!(!stored_json.contains(secret), "{stored_json}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prose_streams_through_at_once() {
    let harness = harness();
    harness.init().await.unwrap();
    let deltas = Arc::new(Mutex::new(Vec::new()));
    let _listener = harness.listen({
        let deltas = Arc::clone(&deltas);
        move |envelope| {
            if let HarnessEvent::MessageDelta { kind, delta, .. } = &envelope.event
                && serde_json::to_value(kind).unwrap() == "text"
            {
                deltas.lock().unwrap().push(delta.clone());
            }
        }
    });
    harness.send_message("go").await.unwrap();
    let deltas = deltas.lock().unwrap().clone();
    // The answer arrived in 3-byte deltas; the redactor holds back only what an entity could
    // still continue, so the prose before the first value streams out word by word, not at
    // the end of the stream.
    assert!(deltas.len() >= 10, "{deltas:?}");
    assert!(
        deltas[0].starts_with('W') && deltas[0].len() < 12,
        "the first words were held back: {deltas:?}"
    );
}
