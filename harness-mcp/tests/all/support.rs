//! What the tests share: finding the servers, building harnesses on a scripted model, reading
//! what the model was sent, and waiting for events.

use std::path::Path;
use std::sync::Arc;

use harness_core::event::{EventEnvelope, HarnessEvent, Subscription};
use harness_core::harness::{Harness, HarnessBuilder, HarnessError, Mode, RunSummary};
use harness_core::model::{Model, ModelRequest, Scripted, ScriptedModel};
use harness_mcp::{McpClient, McpHarnessExt, McpServer};
use harness_tags::KernelMessage;
use tokio::task::JoinHandle;

pub(crate) use harness_tests::mcp_servers::{everything, filesystem, program, time};

/// The badly behaved fixture server, in `mode` (`serve`, `exit-at-start`, `silent-start`).
pub(crate) fn misbehaving(name: &str, mode: &str, dir: &Path) -> Option<McpServer> {
    program("python3")?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/misbehaving_server.py");
    Some(
        McpServer::stdio(name, "python3")
            .args([
                "-u".to_owned(),
                script.display().to_string(),
                mode.to_owned(),
            ])
            .cwd(dir),
    )
}

/// A harness on `model` with these clients' servers (and whatever `configure` adds).
pub(crate) fn harness(
    model: &Arc<ScriptedModel>,
    clients: &[&McpClient],
    configure: impl FnOnce(HarnessBuilder) -> HarnessBuilder,
) -> Harness {
    let model = Arc::clone(model);
    let mut builder = Harness::builder("mcp-test")
        .mode(Mode::new("build").default_model("scripted/mcp"))
        .model_resolver(move |_| Ok(Arc::clone(&model) as Arc<dyn Model>));
    for client in clients {
        builder = builder.mcp_client((*client).clone());
    }
    configure(builder).build().expect("the harness builds")
}

/// A scripted model that plays these turns.
pub(crate) fn model(turns: impl IntoIterator<Item = Scripted>) -> Arc<ScriptedModel> {
    Arc::new(
        turns
            .into_iter()
            .fold(ScriptedModel::new("scripted/mcp"), ScriptedModel::then),
    )
}

/// The tool names a request offered.
pub(crate) fn offered(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|tool| tool.name.clone()).collect()
}

/// The result the model was sent for the call `call_id`, and whether it was an error.
pub(crate) fn tool_result(request: &ModelRequest, call_id: &str) -> (String, bool) {
    request
        .messages
        .iter()
        .find_map(|message| match message {
            KernelMessage::ToolResult {
                tool_call_id,
                content,
                is_error,
                ..
            } if tool_call_id == call_id => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call_id} in {:#?}", request.messages))
}

/// Sends `text` from a task of its own, so that the test can act while the run is going.
pub(crate) fn send_in_background(
    harness: &Harness,
    text: &'static str,
) -> JoinHandle<Result<RunSummary, HarnessError>> {
    let harness = harness.clone();
    tokio::spawn(async move { harness.send_message(text).await })
}

/// Waits until a tool reports progress (the call is running on the server), and returns it.
pub(crate) async fn wait_for_progress(events: &mut Subscription) -> Arc<EventEnvelope> {
    wait_for(events, |e| matches!(e, HarnessEvent::ToolUpdate { .. })).await
}

pub(crate) use harness_tests::harness::wait_for;

/// Kills a process the way a crash or the OOM killer would.
pub(crate) fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -KILL {pid} failed");
}
