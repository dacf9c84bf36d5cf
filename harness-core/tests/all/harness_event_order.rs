#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A run's events reach subscribers in the order things happened: a tool's output after its
//! start, a task list after the `task_write` call that wrote it, an approval request after
//! the message that made the call. The messages and tool starts go through the recorder
//! (which stores them first); everything else waits its turn behind them.

use std::sync::Arc;

use futures_util::StreamExt;
use harness_core::event::{Delivery, EventEnvelope, HarnessEvent};
use harness_core::harness::{Harness, Mode};
use harness_core::model::{FinishReason, ModelResponse, Scripted, ScriptedModel, ToolCall};
use harness_core::store::SqliteStore;
use harness_core::tool::{
    ApprovalAnswer, ShellStream, ToolContext, ToolError, ToolProgress, tool_fn,
};
use harness_tags::tags::ToolGateResult;
use harness_tags::{GateVerdict, ToolCallCtx, ToolCategory};
use serde_json::{Value, json};

fn said_then_called(text: &str, tool: &str, args: Value) -> Scripted {
    Scripted::Response(ModelResponse {
        content: text.to_owned(),
        tool_calls: vec![ToolCall {
            id: String::new(),
            name: tool.to_owned(),
            arguments: args,
        }],
        finish_reason: FinishReason::ToolCalls,
        ..ModelResponse::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_tool_output_and_tasks_come_after_what_caused_them() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(
        ScriptedModel::new("scripted/order")
            .then(said_then_called(
                "Let me plan.",
                "task_write",
                json!({"tasks": [{"content": "Build", "status": "in_progress"}]}),
            ))
            .then(said_then_called("Building.", "build", json!({})))
            .then(said_then_called("Deploying.", "deploy", json!({})))
            .then(Scripted::text("Done.")),
    );
    let harness = Harness::builder("order")
        .mode(Mode::new("build").default_model("scripted/order"))
        .model_resolver(move |_| Ok(model.clone() as _))
        .sqlite(SqliteStore::open(dir.path().join("threads.db")).unwrap())
        .tool(tool_fn(
            "build",
            "Builds.",
            |_: Value, ctx: ToolContext| async move {
                for line in ["compiling\n", "finished\n"] {
                    ctx.progress(ToolProgress::Shell {
                        output: line.to_owned(),
                        stream: ShellStream::Stdout,
                    });
                }
                Ok::<_, ToolError>("built")
            },
        ))
        .tool(
            tool_fn("deploy", "Deploys.", |_: Value, _| async {
                Ok::<_, ToolError>("deployed")
            })
            .category(ToolCategory::Execute),
        )
        .compose(|c| {
            c.on(
                ToolGateResult,
                |verdict: &GateVerdict, ctx: &ToolCallCtx| {
                    if ctx.tool_name == "deploy" {
                        GateVerdict::ask("deploys change production")
                    } else {
                        verdict.clone()
                    }
                },
            )
        })
        .build()
        .unwrap();
    let mut events = harness.subscribe();
    let run = tokio::spawn({
        let harness = harness.clone();
        async move { harness.send_message("ship it").await }
    });

    let mut seen: Vec<Arc<EventEnvelope>> = Vec::new();
    while let Some(delivery) = events.next().await {
        let Delivery::Event(event) = delivery else {
            panic!("no event may be missed here");
        };
        if let HarnessEvent::ToolApprovalRequired { tool_call_id, .. } = &event.event {
            harness
                .respond_to_tool_approval(ApprovalAnswer::Approve, Some(tool_call_id))
                .unwrap();
        }
        let end = matches!(&event.event, HarnessEvent::AgentEnd { .. });
        seen.push(event);
        if end {
            break;
        }
    }
    run.await.unwrap().unwrap();

    let position = |what: &str, found: &dyn Fn(&HarnessEvent) -> bool| {
        seen.iter()
            .position(|e| found(&e.event))
            .unwrap_or_else(|| panic!("no {what} in {seen:#?}"))
    };
    let said = |text: &'static str| move |e: &HarnessEvent| matches!(e, HarnessEvent::MessageEnd { message } if message.text() == text);
    let started = |tool: &'static str| move |e: &HarnessEvent| matches!(e, HarnessEvent::ToolStart { tool_name, .. } if tool_name == tool);
    let planned = position("plan", &said("Let me plan."));
    let task_write = position("task_write", &started("task_write"));
    let tasks = position(
        "tasks",
        &|e| matches!(e, HarnessEvent::TaskUpdated { tasks } if !tasks.is_empty()),
    );
    assert!(planned < task_write && task_write < tasks, "{seen:#?}");

    let build = position("build", &started("build"));
    let output = position("output", &|e| matches!(e, HarnessEvent::ShellOutput { .. }));
    assert!(build < output, "{seen:#?}");

    let deploying = position("deploying", &said("Deploying."));
    let approval = position("approval", &|e| {
        matches!(e, HarnessEvent::ToolApprovalRequired { .. })
    });
    assert!(deploying < approval, "{seen:#?}");

    // So the display state, folded from the events, keeps the tool's output.
    let state = harness.display_state();
    let build_tool = state
        .active_tools
        .values()
        .find(|t| t.name == "build")
        .unwrap();
    assert_eq!(build_tool.shell_output, "compiling\nfinished\n");
}
