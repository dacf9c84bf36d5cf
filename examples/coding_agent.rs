//! A coding agent: real workspace tools against any model, confined to one directory.
//!
//! Shows a harness with the CLI's workspace tools (`read_file` and `list_dir` and `grep` in the
//! `read` category, `write_file` in `edit`, `shell` in `execute`), all confined to a directory,
//! the permissions of `examples/permissions.toml` (reads run; edits and commands ask), the
//! approvals answered in code (or on the terminal for a real model), and the terminal view the
//! `harness` CLI prints, folded from the event stream.
//!
//! By default it runs offline: the scripted demo model fixes a bug in a small project it
//! writes to a temporary directory. Point it at a real model and your own directory:
//!
//! ```text
//! cargo run -p harness-examples --example coding_agent
//! cargo run -p harness-examples --example coding_agent -- --dir . --model openai/gpt-4.1 "Explain src/"
//! cargo run -p harness-examples --example coding_agent -- --base-url http://localhost:11434/v1 \
//!     --model ollama/qwen2.5-coder --dir /tmp/project "Fix the failing test"
//! ```
//!
//! Keys come from the usual variables (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, ...); with
//! `--base-url`, `OPENAI_API_KEY` is sent if it is set. `--yes` approves every edit and
//! command; without it a real model's requests are asked on the terminal.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt;
use harness_cli::render::{Style, View};
use harness_core::event::{Delivery, HarnessEvent};
use harness_core::harness::{Harness, Mode};
use harness_core::model::{
    Model, OpenAiModel, ProviderConfig, Scripted, ScriptedModel, resolve_model,
};
use harness_core::tool::ApprovalAnswer;
use harness_permissions::Permissions;
use harness_workspace::Workspace;
use serde_json::json;

const BUGGY: &str = "/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
const FIXED: &str = "/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";

struct Args {
    dir: Option<PathBuf>,
    model: Option<String>,
    base_url: Option<String>,
    yes: bool,
    task: String,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        dir: None,
        model: None,
        base_url: None,
        yes: false,
        task: "The add function gives wrong results. Find and fix it.".to_owned(),
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        let mut value = || words.next().ok_or(format!("{word} needs a value"));
        match word.as_str() {
            "--dir" => args.dir = Some(PathBuf::from(value()?)),
            "--model" => args.model = Some(value()?),
            "--base-url" => args.base_url = Some(value()?),
            "--yes" => args.yes = true,
            flag if flag.starts_with("--") => {
                return Err(format!(
                    "unknown flag {flag}; use --dir DIR, --model PROVIDER/NAME, --base-url URL, --yes"
                ));
            }
            _ => args.task = word,
        }
    }
    Ok(args)
}

/// The offline script: look around, find the bug, fix it, check the fix.
fn demo_model() -> ScriptedModel {
    ScriptedModel::new("scripted/coder")
        .then(Scripted::tool_call("list_dir", json!({})))
        .then(Scripted::tool_call("grep", json!({"pattern": "fn add"})))
        .then(Scripted::tool_call(
            "read_file",
            json!({"path": "src/math.rs"}),
        ))
        .then(Scripted::tool_call(
            "write_file",
            json!({"path": "src/math.rs", "content": FIXED}),
        ))
        .then(Scripted::tool_call(
            "shell",
            json!({"command": "grep -n 'a + b' src/math.rs"}),
        ))
        .then(Scripted::text(
            "Fixed `add` in src/math.rs: it subtracted; it adds now.",
        ))
}

/// Asks on the terminal whether a call may run.
fn ask_terminal(tool: &str) -> ApprovalAnswer {
    print!("allow {tool}? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    if line.trim().eq_ignore_ascii_case("y") {
        ApprovalAnswer::Approve
    } else {
        ApprovalAnswer::Decline {
            reason: "the user said no".into(),
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    let demo = args.model.is_none() && args.base_url.is_none();
    let model: Arc<dyn Model> = match (&args.base_url, &args.model) {
        (Some(url), model) => {
            let mut config = ProviderConfig::new(url.clone());
            if let Ok(key) = std::env::var("OPENAI_API_KEY") {
                config = config.with_api_key(key);
            }
            Arc::new(OpenAiModel::new(
                model.as_deref().unwrap_or("local/default"),
                config,
            )?)
        }
        (None, Some(id)) => resolve_model(id)?,
        (None, None) => Arc::new(demo_model()),
    };

    // The directory the tools may touch: yours, or a throwaway project for the demo.
    let scratch = tempfile::tempdir()?;
    let root = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            std::fs::create_dir_all(scratch.path().join("src"))?;
            std::fs::write(scratch.path().join("src/math.rs"), BUGGY)?;
            std::fs::write(scratch.path().join("README.md"), "A tiny math crate.\n")?;
            scratch.path().to_path_buf()
        }
    };
    let workspace = Workspace::new(&root)?;
    println!("workspace: {}", workspace.root().display());
    let permissions =
        Permissions::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/permissions.toml"))?;

    let model_id = model.id().to_string();
    let mut builder = Harness::builder("coding-agent")
        .instructions(format!(
            "You are a careful coding agent working in {}. Read before you change anything, \
             keep changes small, and check them with a command when you can.",
            workspace.root().display()
        ))
        .mode(Mode::new("build").default_model(model_id.clone()))
        .model(model)
        .plugin(permissions)
        .interactive(true);
    for tool in workspace.tools() {
        builder = builder.tool(tool);
    }
    let harness = builder.build()?;
    harness.init().await?;

    // The terminal: print what happens, answer approvals.
    let mut events = harness.subscribe();
    let ui = harness.clone();
    let auto = demo || args.yes;
    let printer = tokio::spawn(async move {
        let mut view = View::new(Style::for_stdout(), false);
        let mut approved = Vec::new();
        while let Some(delivery) = events.next().await {
            let Delivery::Event(event) = delivery else {
                continue;
            };
            print!("{}", view.apply(&event.event));
            let _ = std::io::stdout().flush();
            match &event.event {
                HarnessEvent::ToolApprovalRequired {
                    tool_call_id,
                    tool_name,
                    ..
                } => {
                    let answer = if auto {
                        println!("  → approved in code");
                        ApprovalAnswer::Approve
                    } else {
                        let name = tool_name.clone();
                        tokio::task::spawn_blocking(move || ask_terminal(&name))
                            .await
                            .unwrap_or(ApprovalAnswer::Decline {
                                reason: "no answer".into(),
                            })
                    };
                    if answer.approves() {
                        approved.push(tool_name.clone());
                    }
                    if let Err(error) = ui.respond_to_tool_approval(answer, Some(tool_call_id)) {
                        eprintln!("could not answer: {error}");
                    }
                }
                HarnessEvent::AgentEnd { .. } => return approved,
                _ => {}
            }
        }
        approved
    });

    let summary = harness.send_message(args.task.clone()).await?;
    let approved = printer.await?;
    println!(
        "\nrun: {:?} · {} tokens",
        summary.outcome,
        summary.usage.total()
    );
    if demo {
        let fixed = std::fs::read_to_string(root.join("src/math.rs"))?;
        if fixed != FIXED || approved != ["write_file", "shell"] {
            return Err(
                format!("the demo did not fix the bug: {fixed:?}, approved {approved:?}").into(),
            );
        }
    }
    harness.destroy().await;
    Ok(())
}
