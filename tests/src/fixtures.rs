//! Shared pieces of the kernel tests: tools that succeed, fail, panic, hang or wait for each
//! other, and an observer that records what it sees.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_core::kernel::{KernelEvent, KernelObserver};
use harness_core::tool::{Tool, ToolContext, ToolError, tool_fn};
use harness_tags::ToolCategory;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Barrier;

/// Arguments of the `echo` tool.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EchoArgs {
    /// The text to echo.
    pub text: String,
}

/// Records every argument object `echo` was called with.
pub type Calls = Arc<Mutex<Vec<String>>>;

/// `echo`: returns `echo: <text>` and records the text it received.
pub fn echo(calls: Calls) -> impl Tool {
    tool_fn(
        "echo",
        "Echoes the text back.",
        move |args: EchoArgs, _: ToolContext| {
            let calls = Arc::clone(&calls);
            async move {
                calls
                    .lock()
                    .map_err(|e| e.to_string())?
                    .push(args.text.clone());
                Ok::<_, ToolError>(format!("echo: {}", args.text))
            }
        },
    )
    .category(ToolCategory::Read)
}

/// Arguments of tools that take nothing.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// `fail`: always fails with `disk full`.
pub fn fail() -> impl Tool {
    tool_fn("fail", "Always fails.", |_: NoArgs, _: ToolContext| async {
        Err::<String, _>(ToolError::new("disk full"))
    })
}

/// `explode`: panics.
pub fn explode() -> impl Tool {
    tool_fn("explode", "Panics.", |_: NoArgs, _: ToolContext| async {
        if true {
            panic!("the tool blew up");
        }
        Ok::<String, ToolError>(String::new())
    })
}

/// `hang`: never finishes, and ignores its abort signal (the worst case), with a timeout.
pub fn hang(timeout: Duration) -> impl Tool {
    tool_fn(
        "hang",
        "Never returns.",
        |_: NoArgs, _: ToolContext| async move {
            std::future::pending::<()>().await;
            Ok::<String, ToolError>(String::new())
        },
    )
    .timeout(timeout)
}

/// `meet`: waits until `parties` calls of it are running at once, then returns its label. A
/// run that executes calls one by one never gets past the barrier.
pub fn meet(parties: usize) -> impl Tool {
    let barrier = Arc::new(Barrier::new(parties));
    tool_fn(
        "meet",
        "Waits for the others.",
        move |args: EchoArgs, _: ToolContext| {
            let barrier = Arc::clone(&barrier);
            async move {
                barrier.wait().await;
                Ok::<_, ToolError>(format!("met: {}", args.text))
            }
        },
    )
}

/// A kernel event, owned, for assertions.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    /// `RunStarted`.
    RunStarted,
    /// `MessageAdded`, with the message's JSON.
    Message(Value),
    /// `TextDelta`.
    Text(String),
    /// `ToolInputStarted`.
    ToolInput(String),
    /// `ToolStarted`, with the tool's name and arguments.
    ToolStarted(String, Value),
    /// `ToolFinished`, with the tool's name, content and error flag.
    ToolFinished(String, String, bool),
    /// `ModelRetry`, with the attempt.
    Retry(u32),
    /// `Failure`, with the reason and message.
    Failure(String, String),
    /// `RunFinished`, with the outcome and final text.
    Finished(Value),
}

/// An observer that keeps every event.
#[derive(Clone, Default)]
pub struct Recorder {
    events: Arc<Mutex<Vec<Seen>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    /// What was seen so far.
    pub fn events(&self) -> Vec<Seen> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl KernelObserver for Recorder {
    fn on_event(&self, event: KernelEvent) {
        let seen = match event {
            KernelEvent::RunStarted { .. } => Seen::RunStarted,
            KernelEvent::MessageAdded { message } => {
                Seen::Message(serde_json::to_value(message).unwrap_or_default())
            }
            KernelEvent::TextDelta { text, .. } => Seen::Text(text),
            KernelEvent::ToolInputStarted { tool_name, .. } => Seen::ToolInput(tool_name),
            KernelEvent::ToolStarted { call } => Seen::ToolStarted(call.name, call.arguments),
            KernelEvent::ToolFinished(finished) => {
                Seen::ToolFinished(finished.tool_name, finished.content, finished.is_error)
            }
            KernelEvent::ModelRetry { attempt, .. } => Seen::Retry(attempt),
            KernelEvent::Failure { failure } => Seen::Failure(
                serde_json::to_value(failure.reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                failure.error_message,
            ),
            KernelEvent::RunFinished { end } => {
                Seen::Finished(serde_json::to_value(end).unwrap_or_default())
            }
            _ => return,
        };
        if let Ok(mut events) = self.events.lock() {
            events.push(seen);
        }
    }
}
