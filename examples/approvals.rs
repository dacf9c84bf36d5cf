//! Approvals: a permissions file decides which tool calls run, which are refused and which
//! wait for an answer, and the answers are given in code.
//!
//! Shows `harness-permissions` loaded from `examples/permissions.toml` (read allowed, edits
//! and commands ask, `delete_everything` denied), tool categories, a `listen` callback that
//! answers `tool_approval_required` the way a user interface would (approve once, decline
//! with a reason, always allow a tool), and the session grant that makes the second deploy
//! run without asking. Offline, on the scripted model.
//!
//! Run it with `cargo run -p harness-examples --example approvals`.

use std::sync::{Arc, Mutex};

use harness_core::event::HarnessEvent;
use harness_core::harness::{Harness, Mode};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ApprovalAnswer, Tool, ToolError, tool_fn};
use harness_permissions::Permissions;
use harness_tags::ToolCategory;
use serde_json::{Value, json};

type Log = Arc<Mutex<Vec<String>>>;

fn tool(name: &'static str, category: ToolCategory, ran: &Log) -> impl Tool {
    let ran = Arc::clone(ran);
    tool_fn(name, "An example tool.", move |_: Value, _| {
        let ran = Arc::clone(&ran);
        async move {
            ran.lock().map_err(|e| e.to_string())?.push(name.to_owned());
            Ok::<_, ToolError>(format!("{name}: done"))
        }
    })
    .category(category)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/permissions.toml");
    let permissions = Permissions::from_file(rules)?;
    println!("rules from {rules}:\n{:?}\n", permissions.rules());

    let model = Arc::new(
        ScriptedModel::new("scripted/ops")
            .then(Scripted::tool_calls([
                ("read_config", json!({})),
                ("edit_config", json!({"key": "replicas", "value": 3})),
                ("deploy", json!({"env": "staging"})),
                ("restart", json!({})),
                ("delete_everything", json!({})),
            ]))
            .then(Scripted::text("Staging is deployed; I did not restart."))
            .then(Scripted::tool_call("deploy", json!({"env": "production"})))
            .then(Scripted::text("Production is deployed.")),
    );
    let ran: Log = Arc::default();
    let harness = Harness::builder("ops")
        .mode(Mode::new("ops").default_model("scripted/ops"))
        .model(Arc::clone(&model))
        .tool(tool("read_config", ToolCategory::Read, &ran))
        .tool(tool("edit_config", ToolCategory::Edit, &ran))
        .tool(tool("deploy", ToolCategory::Execute, &ran))
        .tool(tool("restart", ToolCategory::Execute, &ran))
        .tool(tool("delete_everything", ToolCategory::Execute, &ran))
        .plugin(permissions)
        .build()?;

    // The user interface: answers each approval from code.
    let asked: Log = Arc::default();
    let ui = harness.clone();
    let asked_log = Arc::clone(&asked);
    let _answers = harness.listen(move |event| {
        let HarnessEvent::ToolApprovalRequired {
            tool_call_id,
            tool_name,
            reason,
            ..
        } = &event.event
        else {
            return;
        };
        let answer = match tool_name.as_str() {
            "edit_config" => ApprovalAnswer::Approve,
            "deploy" => ApprovalAnswer::AlwaysAllowTool,
            _ => ApprovalAnswer::Decline {
                reason: "not during business hours".into(),
            },
        };
        println!(
            "approval asked for {tool_name} ({}) -> {answer:?}",
            reason.as_deref().unwrap_or("no reason")
        );
        if let Ok(mut asked) = asked_log.lock() {
            asked.push(tool_name.clone());
        }
        if let Err(error) = ui.respond_to_tool_approval(answer, Some(tool_call_id)) {
            eprintln!("could not answer: {error}");
        }
    });
    harness.init().await?;

    let first = harness
        .send_message("Scale staging to 3 and deploy it")
        .await?;
    println!("agent: {}", first.final_text.unwrap_or_default());
    let offered: Vec<String> = model
        .requests()
        .first()
        .map(|r| r.tools.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default();
    let requests = model.requests();
    let results = requests
        .get(1)
        .map(|request| request.tool_results())
        .unwrap_or_default();
    for result in &results {
        println!("  the model saw: {result}");
    }

    let second = harness.send_message("Now production").await?;
    println!("agent: {}", second.final_text.unwrap_or_default());
    println!("grants: {:?}", harness.session().grants());

    let ran = ran.lock().map_err(|e| e.to_string())?.clone();
    let asked = asked.lock().map_err(|e| e.to_string())?.clone();
    println!("ran: {ran:?}\nasked: {asked:?}");
    let expected_ran = ["read_config", "edit_config", "deploy", "deploy"];
    let mut sorted = ran.clone();
    sorted.sort();
    let mut expected: Vec<String> = expected_ran.iter().map(|s| (*s).to_owned()).collect();
    expected.sort();
    if sorted != expected
        || asked != ["edit_config", "deploy", "restart"]
        || offered.iter().any(|t| t == "delete_everything")
    {
        return Err("the rules did not decide as the permissions file says".into());
    }
    harness.destroy().await;
    Ok(())
}
