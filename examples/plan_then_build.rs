//! Plan, then build: a read-only `plan` mode submits a plan with `submit_plan`; once the user
//! approves it, the harness switches to `build`, with build's own model.
//!
//! Shows modes with their own instructions, tools and models, `transitions_to`, a plan
//! rejected with feedback and resubmitted, the approval answered from code through
//! `respond_to_tool_suspension`, the `mode_changed` and `model_changed` events, and the next
//! message running in build mode on the builder's model. Offline, on two scripted models.
//!
//! Run it with `cargo run -p harness-examples --example plan_then_build`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use harness_core::event::HarnessEvent;
use harness_core::harness::{Harness, Mode};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{Tool, ToolError, tool_fn};
use harness_examples::scripted_models;
use serde_json::{Value, json};

type Files = Arc<Mutex<BTreeMap<String, String>>>;

fn read_file(files: &Files) -> Arc<dyn Tool> {
    let files = Arc::clone(files);
    Arc::new(tool_fn(
        "read_file",
        "Reads a file.",
        move |args: Value, _| {
            let files = Arc::clone(&files);
            async move {
                let path = args["path"].as_str().unwrap_or_default();
                let files = files.lock().map_err(|e| e.to_string())?;
                files
                    .get(path)
                    .cloned()
                    .ok_or_else(|| ToolError::new(format!("no file {path}")))
            }
        },
    ))
}

fn write_file(files: &Files) -> Arc<dyn Tool> {
    let files = Arc::clone(files);
    Arc::new(tool_fn(
        "write_file",
        "Writes a file.",
        move |args: Value, _| {
            let files = Arc::clone(&files);
            async move {
                let path = args["path"].as_str().unwrap_or_default().to_owned();
                let content = args["content"].as_str().unwrap_or_default().to_owned();
                files
                    .lock()
                    .map_err(|e| e.to_string())?
                    .insert(path.clone(), content);
                Ok::<_, ToolError>(format!("wrote {path}"))
            }
        },
    ))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Files = Arc::default();
    files.lock().map_err(|e| e.to_string())?.insert(
        "src/server.rs".into(),
        "fn routes() -> Router { Router::new().route(\"/\", get(index)) }".into(),
    );
    let planner = Arc::new(
        ScriptedModel::new("scripted/planner")
            .then(Scripted::tool_call("read_file", json!({"path": "src/server.rs"})))
            .then(Scripted::tool_call(
                "submit_plan",
                json!({"title": "Health check", "plan": "1. Add GET /health to routes()"}),
            ))
            .then(Scripted::tool_call(
                "submit_plan",
                json!({"title": "Health check", "plan": "1. Add GET /health to routes()\n2. Test it returns 200"}),
            ))
            .then(Scripted::text("The plan is approved.")),
    );
    let builder = Arc::new(
        ScriptedModel::new("scripted/builder")
            .then(Scripted::tool_call(
                "write_file",
                json!({"path": "src/server.rs", "content": "fn routes() -> Router { Router::new().route(\"/\", get(index)).route(\"/health\", get(health)) }"}),
            ))
            .then(Scripted::text("Added /health.")),
    );
    let harness = Harness::builder("coder")
        .instructions("You are a coding agent.")
        .mode(
            Mode::new("plan")
                .instructions("Read, then submit a plan. Do not change files.")
                .default_model("scripted/planner")
                .tools([read_file(&files)])
                .transitions_to("build")
                .default(),
        )
        .mode(
            Mode::new("build")
                .instructions("Carry out the approved plan.")
                .default_model("scripted/builder")
                .tools([read_file(&files), write_file(&files)]),
        )
        .model_resolver(scripted_models(&[
            Arc::clone(&planner),
            Arc::clone(&builder),
        ]))
        .build()?;

    // The user interface: reject the first plan with feedback, approve the second.
    let plans = Arc::new(Mutex::new(0));
    let ui = harness.clone();
    let _reviewer = harness.listen(move |envelope| match &envelope.event {
        HarnessEvent::ToolSuspended {
            tool_call_id,
            tool_name,
            suspend_payload,
            ..
        } if tool_name == "submit_plan" => {
            let Ok(mut seen) = plans.lock() else { return };
            *seen += 1;
            println!(
                "plan #{seen}:\n{}",
                suspend_payload["plan"].as_str().unwrap_or("")
            );
            let answer = if *seen == 1 {
                println!("  -> rejected: add a test");
                json!({"action": "rejected", "feedback": "Add a test for the endpoint."})
            } else {
                println!("  -> approved");
                json!({"action": "approved"})
            };
            if let Err(error) = ui.respond_to_tool_suspension(answer, Some(tool_call_id)) {
                eprintln!("could not answer: {error}");
            }
        }
        HarnessEvent::ModeChanged {
            mode_id,
            previous_mode_id,
        } => {
            println!(
                "mode: {} -> {mode_id}",
                previous_mode_id.as_deref().unwrap_or("-")
            );
        }
        HarnessEvent::ModelChanged { model_id, .. } => println!("model: {model_id}"),
        _ => {}
    });
    harness.init().await?;

    println!("mode: {}", harness.session().mode_id());
    let planned = harness.send_message("Add a health check endpoint").await?;
    println!("planner: {}", planned.final_text.unwrap_or_default());
    let mode = harness.session().mode_id();
    let model = harness
        .session()
        .model_id()
        .map(|m| m.to_string())
        .unwrap_or_default();
    let built = harness.send_message("Go ahead").await?;
    println!("builder: {}", built.final_text.unwrap_or_default());

    let server = files
        .lock()
        .map_err(|e| e.to_string())?
        .get("src/server.rs")
        .cloned()
        .unwrap_or_default();
    println!("src/server.rs: {server}");
    let plan_tools: Vec<String> = planner
        .requests()
        .first()
        .map(|r| r.tools.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default();
    if mode != "build"
        || model != "scripted/builder"
        || !server.contains("/health")
        || plan_tools.iter().any(|t| t == "write_file")
        || builder.requests().len() != 2
    {
        return Err(
            format!("unexpected: mode {mode}, model {model}, plan tools {plan_tools:?}").into(),
        );
    }
    harness.destroy().await;
    Ok(())
}
