//! Quickstart: the tag pipeline in one file, offline.
//!
//! Shows `.compose()` blocks reshaping tags with `on` handlers (a system-prompt prefix, a
//! redaction of tool results, a suppressed nudge), observing them with `tap` handlers (typed,
//! and a JSON tap over every tag), a plugin, and the outcome each emit site receives.
//!
//! Run it with `cargo run -p harness-examples --example quickstart`.

use std::sync::{Arc, Mutex};

use harness_tags::prelude::*;
use harness_tags::{HandlerFailure, TagInfo};

/// A plugin is a named bundle of compose blocks: here, one that signs every system prompt.
struct Signature;

impl Plugin for Signature {
    fn name(&self) -> &str {
        "signature"
    }

    fn compose(&self, c: Compose) -> Compose {
        c.on(PromptSystem, |text: &String, _: &BaseCtx| {
            format!("{text}\nEnd every answer with \"-- your agent\".")
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seen_tags: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let seen = Arc::clone(&seen_tags);

    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on(PromptSystem, |text: &String, ctx: &BaseCtx| {
                format!("[tenant: {}]\n{text}", ctx.strategy)
            })
            // Redact before the model ever sees a tool result.
            .on(
                MessageToolResult,
                |msg: &KernelMessage, _: &ToolResultCtx| {
                    msg.content().contains("sk-").then(|| {
                        msg.with_content(msg.content().replace("sk-live-123", "<API_KEY>"))
                    })
                },
            )
            // Loop nudges are noise for this agent: suppress them (the tag is suppressible).
            .on(NudgeLoopDetected, |_: &String, _: &NudgeCtx| Flow::Suppress)
            // The metrics tap of the reference: record each tool's duration.
            .tap(
                ObservationToolResult,
                |step: &ObservationStep, ctx: &ToolResultCtx| {
                    println!(
                        "  metric tool.duration{{tool={}}} {} ms ({})",
                        ctx.tool_name, ctx.duration_ms, step.kind
                    );
                },
            )
            // A JSON tap sees every tag, whatever its payload type.
            .tap_json("**", move |_: &serde_json::Value, info: &TagInfo<'_>| {
                seen.lock()
                    .map(|mut tags| tags.push(info.name()))
                    .map_err(|e| e.to_string())
            })
        })
        .plugin(Signature)
        .error_sink(|failure: &HandlerFailure| eprintln!("  handler failure: {failure}"))
        .build()?;

    println!("harness quickstart: the tag pipeline, offline\n");

    let base = BaseCtx {
        strategy: "acme".into(),
        ..BaseCtx::default()
    };
    let system = pipeline
        .emit::<PromptSystem>("You are a careful coding agent.".into(), &base)
        .await?
        .into_payload()
        .unwrap_or_default();
    println!("prompt.system ->\n{system}\n");

    let tool_ctx = ToolResultCtx {
        tool_name: "read_env".into(),
        call_id: "call_1".into(),
        duration_ms: 12,
        ..ToolResultCtx::default()
    };
    let result =
        KernelMessage::tool_result("call_1", "read_env", "OPENAI_API_KEY=sk-live-123", false);
    let outcome = pipeline
        .emit::<MessageToolResult>(result, &tool_ctx)
        .await?;
    println!(
        "message.tool-result -> {:?}\n",
        outcome.into_payload().map(|m| m.content().to_owned())
    );

    let step = ObservationStep {
        kind: "tool-result".into(),
        ..ObservationStep::default()
    };
    pipeline
        .emit::<ObservationToolResult>(step, &tool_ctx)
        .await?;

    let nudge_ctx = NudgeCtx {
        trigger: "repeated-tool-call".into(),
        severity: Severity::Warn,
        ..NudgeCtx::default()
    };
    let nudge = pipeline
        .emit::<NudgeLoopDetected>("You keep calling read_env.".into(), &nudge_ctx)
        .await?;
    println!(
        "\nnudge.loop-detected suppressed: {}",
        nudge.is_suppressed()
    );

    let seen = seen_tags.lock().map_err(|e| e.to_string())?;
    println!("the JSON tap saw: {seen:?}");
    println!(
        "\n{} tags in the catalog; see TAGS.md",
        harness_tags::catalog().len()
    );
    Ok(())
}
