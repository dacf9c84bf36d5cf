//! After a scripted run with two tool calls (one failing), the Prometheus text holds the
//! expected series with the expected counts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use harness_core::kernel::{Kernel, RunInput};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ToolContext, ToolError, tool_fn};
use harness_metrics::Metrics;
use harness_tags::{Pipeline, RunOutcome};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {}

fn line<'t>(text: &'t str, series: &str) -> Option<&'t str> {
    text.lines().find(|l| l.starts_with(series))
}

fn value(text: &str, series: &str) -> f64 {
    let line = line(text, series).unwrap_or_else(|| panic!("no series `{series}` in:\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_run_with_one_failing_tool_is_counted() {
    let (metrics, prometheus) = Metrics::prometheus();
    let pipeline = Pipeline::builder().plugin(metrics).build().unwrap();
    let model = ScriptedModel::new("scripted/metrics")
        .then(Scripted::tool_calls([
            ("lookup", json!({})),
            ("broken", json!({})),
        ]))
        .then(Scripted::text("done"));
    let kernel = Kernel::builder()
        .model(model)
        .pipeline(pipeline)
        .tool(tool_fn(
            "lookup",
            "Looks up.",
            |_: Args, _: ToolContext| async { Ok::<_, ToolError>("42") },
        ))
        .tool(tool_fn(
            "broken",
            "Fails.",
            |_: Args, _: ToolContext| async { Err::<String, _>(ToolError::new("boom")) },
        ))
        .build()
        .unwrap();
    let result = kernel.run(RunInput::new("go")).await;
    assert_eq!(result.outcome, RunOutcome::Complete);

    let text = prometheus.render();
    assert_eq!(
        value(
            &text,
            r#"harness_tool_calls_total{tool="lookup",outcome="ok"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_tool_calls_total{tool="broken",outcome="error"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_tool_duration_seconds_count{tool="lookup",outcome="ok"}"#
        ),
        1.0
    );
    assert!(
        line(
            &text,
            r#"harness_tool_duration_seconds_bucket{tool="broken",outcome="error",le="0.005"}"#
        )
        .is_some()
    );
    assert_eq!(
        value(&text, r#"harness_failures_total{reason="tool-error"}"#),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_strategy_evaluations_total{strategy="default",action="continue"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_model_calls_total{model="scripted/metrics",finish="tool_calls"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_model_calls_total{model="scripted/metrics",finish="stop"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_model_tokens_total{model="scripted/metrics",kind="input"}"#
        ),
        20.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_model_tokens_total{model="scripted/metrics",kind="output"}"#
        ),
        10.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_model_latency_seconds_count{model="scripted/metrics"}"#
        ),
        2.0
    );
    assert_eq!(
        value(&text, r#"harness_runs_total{outcome="complete"}"#),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"harness_run_duration_seconds_count{outcome="complete"}"#
        ),
        1.0
    );
}

#[tokio::test]
async fn dedicated_recorders_do_not_share_series() {
    let (first, first_text) = Metrics::prometheus();
    let (_second, second_text) = Metrics::prometheus();
    let pipeline = Pipeline::builder().plugin(first).build().unwrap();
    let kernel = Kernel::builder()
        .model(ScriptedModel::new("scripted/a").then(Scripted::text("hi")))
        .pipeline(pipeline)
        .build()
        .unwrap();
    kernel.run(RunInput::new("go")).await;
    assert!(first_text.render().contains("harness_runs_total"));
    assert!(!second_text.render().contains("harness_runs_total"));
}
