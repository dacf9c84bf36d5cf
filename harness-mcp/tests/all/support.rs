//! What the tests share: finding the servers, building harnesses on a scripted model, reading
//! what the model was sent, and waiting for events.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_core::event::{EventEnvelope, HarnessEvent, Subscription};
use harness_core::harness::{Harness, HarnessBuilder, HarnessError, Mode, RunSummary};
use harness_core::model::{Model, ModelRequest, Scripted, ScriptedModel};
use harness_mcp::{McpClient, McpHarnessExt, McpServer};
use harness_tags::KernelMessage;
use tokio::task::JoinHandle;

/// Where `.ci/install-mcp-servers` puts the third-party servers.
pub(crate) fn servers_dir() -> PathBuf {
    match std::env::var_os("HARNESS_MCP_SERVERS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-servers"),
    }
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !value.is_empty() && value != "false" && value != "0")
}

/// `path` if it exists. Otherwise, outside CI, a notice on stderr and `None` (the test then
/// passes without running); in CI (`CI` set) a failure, because CI must prove these tests.
pub(crate) fn installed(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let notice = format!(
        "{what} is not installed at {}; run .ci/install-mcp-servers (or set HARNESS_MCP_SERVERS)",
        path.display()
    );
    assert!(!in_ci(), "{notice}");
    eprintln!("SKIPPED: {notice}");
    None
}

/// A program on PATH, or `None` with a notice (a failure in CI).
pub(crate) fn program(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    found.or_else(|| installed(PathBuf::from(name), &format!("`{name}` (on PATH)")))
}

fn npm_server(package: &str) -> Option<PathBuf> {
    program("node")?;
    installed(
        servers_dir().join(format!(
            "node/node_modules/@modelcontextprotocol/{package}/dist/index.js"
        )),
        &format!("@modelcontextprotocol/{package}"),
    )
}

/// `@modelcontextprotocol/server-everything` over stdio, run in `dir`.
pub(crate) fn everything(name: &str, dir: &Path) -> Option<McpServer> {
    let entry = npm_server("server-everything")?;
    Some(
        McpServer::stdio(name, "node")
            .arg(entry.display().to_string())
            .arg("stdio")
            .cwd(dir),
    )
}

/// The entry point of `@modelcontextprotocol/server-everything`, for the HTTP tests.
pub(crate) fn everything_entry() -> Option<PathBuf> {
    npm_server("server-everything")
}

/// `@modelcontextprotocol/server-filesystem` over stdio, allowed into `root` only.
pub(crate) fn filesystem(name: &str, root: &Path) -> Option<McpServer> {
    let entry = npm_server("server-filesystem")?;
    Some(
        McpServer::stdio(name, "node")
            .arg(entry.display().to_string())
            .arg(root.display().to_string())
            .cwd(root),
    )
}

/// `mcp-server-time` from PyPI, in its venv.
pub(crate) fn time(name: &str, dir: &Path) -> Option<McpServer> {
    let program = installed(
        servers_dir().join("python/bin/mcp-server-time"),
        "mcp-server-time (PyPI)",
    )?;
    Some(
        McpServer::stdio(name, program.display().to_string())
            .arg("--local-timezone=UTC")
            .cwd(dir),
    )
}

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
