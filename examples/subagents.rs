//! Subagents: the agent hands side tasks to subagents, fresh or forked.
//!
//! Shows two `SubagentDef`s and the `subagent` tool the harness adds for them:
//!
//! - `explore` (not forked): a fresh context with its own instructions, its own `grep` tool,
//!   its own model and a step limit; the parent only sees its final answer;
//! - `review` (forked): a hidden copy of the parent's thread with the parent's prompt, tools
//!   and model (so the prompt cache stays warm), whose `subagent` and task tools are stubs;
//!   the parent's thread is left untouched.
//!
//! It prints the `subagent_*` events a user interface shows. Offline, on scripted models.
//!
//! Run it with `cargo run -p harness-examples --example subagents`.

use std::sync::Arc;

use harness_core::event::HarnessEvent;
use harness_core::harness::{Harness, Mode, SubagentDef};
use harness_core::model::{KernelMessage, ModelId, Scripted, ScriptedModel};
use harness_core::tool::{ToolError, tool_fn};
use harness_examples::scripted_models;
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let parent = Arc::new(
        ScriptedModel::new("scripted/parent")
            .then(Scripted::text("Noted."))
            .then(Scripted::tool_call(
                "subagent",
                json!({"agentType": "explore", "task": "Where is the config loaded?"}),
            ))
            .then(Scripted::tool_call(
                "subagent",
                json!({"agentType": "review", "task": "Review the change we discussed.", "forked": true}),
            ))
            // The fork runs on the parent's model: this is its answer.
            .then(Scripted::text("The change looks right; add a test for a missing file."))
            .then(Scripted::text("Config is loaded in src/config.rs; the reviewer wants a test.")),
    );
    let explorer = Arc::new(
        ScriptedModel::new("scripted/explorer")
            .then(Scripted::tool_call(
                "grep",
                json!({"pattern": "fn load_config"}),
            ))
            .then(Scripted::text("src/config.rs:12 defines load_config.")),
    );
    let harness = Harness::builder("coder")
        .instructions("You are a coding agent. Delegate searches and reviews.")
        .mode(Mode::new("build").default_model("scripted/parent"))
        .model_resolver(scripted_models(&[
            Arc::clone(&parent),
            Arc::clone(&explorer),
        ]))
        .tool(tool_fn("read_file", "Reads a file.", |_: Value, _| async {
            Ok::<_, ToolError>("fn main() { load_config(); }")
        }))
        .subagent(
            SubagentDef::new(
                "explore",
                "Explorer",
                "Searches the code base and reports where things are.",
                "You search code. Answer with file:line references only.",
            )
            .tool(tool_fn("grep", "Searches the code.", |_: Value, _| async {
                Ok::<_, ToolError>("src/config.rs:12: pub fn load_config() -> Config {")
            }))
            .allowed_harness_tools(["read_file"])
            .default_model(ModelId::new("scripted/explorer")?)
            .max_steps(10),
        )
        .subagent(
            SubagentDef::new(
                "review",
                "Reviewer",
                "Reviews the work so far with the whole conversation in mind.",
                "You review changes.",
            )
            .forked(true),
        )
        .build()?;
    let _ui = harness.listen(|envelope| match &envelope.event {
        HarnessEvent::SubagentStart {
            agent_type,
            task,
            model_id,
            forked,
            ..
        } => println!("↳ {agent_type} starts on {model_id} (forked: {forked}): {task}"),
        HarnessEvent::SubagentToolStart {
            agent_type,
            sub_tool_name,
            sub_tool_args,
            ..
        } => println!("  {agent_type} calls {sub_tool_name} {sub_tool_args}"),
        HarnessEvent::SubagentEnd {
            agent_type, result, ..
        } => println!("↳ {agent_type} answers: {result}"),
        _ => {}
    });
    harness.init().await?;
    harness.send_message("We changed how config loads.").await?;
    let summary = harness
        .send_message("Find the config loader and review the change")
        .await?;
    println!("agent: {}", summary.final_text.unwrap_or_default());

    let explorer_saw = explorer.requests();
    let fresh = explorer_saw
        .first()
        .map(|r| {
            *r.messages == [KernelMessage::user("Where is the config loaded?")]
                && r.tools.iter().any(|t| t.name == "grep")
                && !r.tools.iter().any(|t| t.name == "subagent")
        })
        .unwrap_or(false);
    // The fork's call is the parent model's fourth request: the whole conversation so far.
    let forked_with_history = parent.requests().get(3).is_some_and(|r| {
        r.messages
            .iter()
            .any(|m| *m == KernelMessage::user("We changed how config loads."))
            && r.tools.iter().any(|t| t.name == "read_file")
    });
    let all = harness.list_threads(true).await?;
    let visible = harness.list_threads(false).await?;
    println!(
        "threads: {} visible, {} with the hidden fork",
        visible.len(),
        all.len()
    );
    if !fresh || !forked_with_history || all.len() != visible.len() + 1 {
        return Err("the subagents did not run as described".into());
    }
    harness.destroy().await;
    Ok(())
}
