//! A third-party tag: a plugin crate declares its own interception point with
//! `#[derive(Tag)]`, a custom tool emits it, and other plugins reshape or observe it like any
//! standard tag.
//!
//! Shows:
//!
//! - `acme.refund-notice`, declared here with a typed payload; it joins
//!   `harness_tags::catalog()` (and so `harness tags`) in any binary that links this code;
//! - a custom `issue_refund` tool that emits it through the harness's pipeline and uses the
//!   reshaped payload (or holds the refund when a handler suppresses it);
//! - a `Compliance` plugin that suppresses refunds over a limit and signs the others, a typed
//!   `tap` and a JSON `tap` over `acme.*`.
//!
//! Run it with `cargo run -p harness-examples --example custom_tag_plugin`.

use std::sync::{Arc, Mutex, OnceLock};

use harness_core::harness::{Harness, Mode};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ToolContext, ToolError, tool_fn};
use harness_tags::{BaseCtx, Compose, Flow, Pipeline, Plugin, Tag, TagInfo};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A refund about to be announced to the customer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefundNotice {
    /// The order.
    pub order_id: String,
    /// The amount, in cents.
    pub amount_cents: u64,
    /// What the customer is told.
    pub message: String,
}

/// Emitted by `issue_refund` before a refund is sent; the reshaped notice is what the
/// customer receives, and suppressing it holds the refund for a human.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "acme.refund-notice", phase = Act, payload = RefundNotice, ctx = BaseCtx, suppressible)]
pub struct RefundNoticeTag;

/// Arguments of `issue_refund`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct RefundArgs {
    /// The order.
    order_id: String,
    /// The amount, in cents.
    amount_cents: u64,
}

/// The compliance team's plugin: large refunds wait for a human, the rest are signed.
struct Compliance {
    limit_cents: u64,
}

impl Plugin for Compliance {
    fn name(&self) -> &str {
        "compliance"
    }

    fn compose(&self, c: Compose) -> Compose {
        let limit = self.limit_cents;
        c.on(
            RefundNoticeTag,
            move |notice: &RefundNotice, _: &BaseCtx| {
                if notice.amount_cents > limit {
                    return Flow::Suppress;
                }
                Flow::Continue(RefundNotice {
                    message: format!("{}\n-- ACME Customer Care", notice.message),
                    ..notice.clone()
                })
            },
        )
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let descriptor =
        harness_tags::lookup("acme.refund-notice").ok_or("the tag is not in the catalog")?;
    println!(
        "catalog: {} ({}, payload {}, suppressible: {}), declared in {}",
        descriptor.name(),
        descriptor.phase(),
        descriptor.payload_type(),
        descriptor.suppressible(),
        descriptor.crate_name()
    );

    // The tool emits through the harness's pipeline, which exists once the harness is built.
    let pipeline: Arc<OnceLock<Pipeline>> = Arc::default();
    let tool_pipeline = Arc::clone(&pipeline);
    let refund = tool_fn(
        "issue_refund",
        "Refunds an order and tells the customer.",
        move |args: RefundArgs, ctx: ToolContext| {
            let pipeline = Arc::clone(&tool_pipeline);
            async move {
                let pipeline = pipeline.get().ok_or("the harness is not built yet")?;
                let notice = RefundNotice {
                    order_id: args.order_id.clone(),
                    amount_cents: args.amount_cents,
                    message: format!("Your refund for order {} is on its way.", args.order_id),
                };
                let base = BaseCtx {
                    thread_id: ctx.thread_id.clone(),
                    ..BaseCtx::default()
                };
                let outcome = pipeline
                    .emit::<RefundNoticeTag>(notice, &base)
                    .await
                    .map_err(|e| ToolError::new(e.to_string()))?;
                match outcome.into_payload() {
                    Some(notice) => Ok(format!("refunded; the customer reads: {}", notice.message)),
                    None => Err(ToolError::new(format!(
                        "the refund for order {} is held for review (over the limit)",
                        args.order_id
                    ))),
                }
            }
        },
    );

    let observed: Arc<Mutex<Vec<String>>> = Arc::default();
    let typed = Arc::clone(&observed);
    let any = Arc::clone(&observed);
    let model = Arc::new(
        ScriptedModel::new("scripted/care")
            .then(Scripted::tool_calls([
                (
                    "issue_refund",
                    json!({"orderId": "A-17", "amountCents": 4_900}),
                ),
                (
                    "issue_refund",
                    json!({"orderId": "B-99", "amountCents": 120_000}),
                ),
            ]))
            .then(Scripted::text("One refund sent, one held for review.")),
    );
    let harness = Harness::builder("care")
        .mode(Mode::new("care").default_model("scripted/care"))
        .model(Arc::clone(&model))
        .tool(refund)
        .plugin(Compliance {
            limit_cents: 50_000,
        })
        .compose(move |c| {
            c.tap(
                RefundNoticeTag,
                move |notice: &RefundNotice, _: &BaseCtx| {
                    if let Ok(mut seen) = typed.lock() {
                        seen.push(format!("typed tap: {} sent", notice.order_id));
                    }
                },
            )
            // JSON handlers match third-party tags by pattern like any other.
            .tap_json(
                "acme.*",
                move |payload: &serde_json::Value, info: &TagInfo<'_>| {
                    if let Ok(mut seen) = any.lock() {
                        seen.push(format!(
                            "json tap on {}: order {}",
                            info.name(),
                            payload["orderId"]
                        ));
                    }
                },
            )
        })
        .build()?;
    pipeline
        .set(harness.pipeline().clone())
        .map_err(|_| "the pipeline was set twice")?;
    harness.init().await?;
    let summary = harness.send_message("Refund A-17 and B-99").await?;

    let requests = model.requests();
    let results = requests
        .last()
        .map(|request| request.tool_results())
        .unwrap_or_default();
    for result in &results {
        println!("tool result: {result}");
    }
    let observed = observed.lock().map_err(|e| e.to_string())?.clone();
    for line in &observed {
        println!("{line}");
    }
    println!("agent: {}", summary.final_text.unwrap_or_default());

    let signed = results
        .first()
        .is_some_and(|r| r.ends_with("-- ACME Customer Care"));
    let held = results
        .get(1)
        .is_some_and(|r| r.contains("held for review"));
    let tapped = observed.contains(&"typed tap: A-17 sent".to_owned())
        && observed
            .iter()
            .filter(|l| l.starts_with("json tap"))
            .count()
            == 1;
    if !(signed && held && tapped) {
        return Err(format!("unexpected results: {results:?} {observed:?}").into());
    }
    harness.destroy().await;
    Ok(())
}
