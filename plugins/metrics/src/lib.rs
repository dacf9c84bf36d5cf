//! Metrics for a harness: taps that record tool durations, failures, strategy evaluations,
//! token usage, model latency and run outcomes through the [`metrics`] facade, so any
//! exporter works; and Prometheus text exposition.
//!
//! ```
//! use harness_metrics::Metrics;
//! use harness_tags::Pipeline;
//!
//! // A dedicated Prometheus recorder: nothing global, several harnesses can coexist.
//! let (metrics, prometheus) = Metrics::prometheus();
//! let pipeline = Pipeline::builder().plugin(metrics).build().unwrap();
//! # let _ = pipeline;
//! let text = prometheus.render(); // serve this at /metrics
//! assert!(text.is_empty() || text.contains("harness_"));
//! ```
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `harness_tool_calls_total` | counter | `tool`, `outcome` (`ok`, `error`) |
//! | `harness_tool_duration_seconds` | histogram | `tool`, `outcome` |
//! | `harness_failures_total` | counter | `reason` (`tool-error`, `model-error`, ...) |
//! | `harness_strategy_evaluations_total` | counter | `strategy`, `action` |
//! | `harness_model_calls_total` | counter | `model`, `finish` |
//! | `harness_model_tokens_total` | counter | `model`, `kind` (`input`, `output`, `cache_read`, `cache_write`, `reasoning`) |
//! | `harness_model_latency_seconds` | histogram | `model` |
//! | `harness_runs_total` | counter | `outcome` |
//! | `harness_run_duration_seconds` | histogram | `outcome` |
//!
//! Without a dedicated recorder ([`Metrics::new`]), the taps record into the process-wide
//! recorder installed with `metrics::set_global_recorder`, whatever exporter that is.

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use harness_tags::tags::{
    ControlStrategyEvaluated, LifecycleComplete, LifecycleFailureTag, ModelRequestTag,
    ModelResponseTag, ObservationToolResult,
};
use harness_tags::{
    BaseCtx, Compose, LifecycleFailure, ModelCtx, ModelRequest, ModelResponse, ObservationStep,
    Plugin, RunEnd, StrategyEvaluation, ToolResultCtx,
};
use metrics::{Key, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::PrometheusBuilder;
pub use metrics_exporter_prometheus::PrometheusHandle;

/// Bucket bounds of the duration histograms, in seconds: 5 ms to 5 min.
pub const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The metrics plugin. Add it with `builder.plugin(Metrics::new())`.
#[derive(Clone)]
pub struct Metrics {
    sink: Sink,
    /// When each model call started, by run, iteration and attempt.
    started: Arc<Mutex<HashMap<String, Instant>>>,
}

#[derive(Clone)]
enum Sink {
    Global,
    Recorder(Arc<dyn Recorder + Send + Sync>),
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sink = match self.sink {
            Sink::Global => "global",
            Sink::Recorder(_) => "dedicated",
        };
        f.debug_struct("Metrics").field("recorder", &sink).finish()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Records into the process-wide recorder of the `metrics` facade.
    pub fn new() -> Self {
        Metrics {
            sink: Sink::Global,
            started: Arc::default(),
        }
    }

    /// Records into this recorder (any exporter's).
    pub fn with_recorder(recorder: impl Recorder + Send + Sync + 'static) -> Self {
        Metrics {
            sink: Sink::Recorder(Arc::new(recorder)),
            started: Arc::default(),
        }
    }

    /// Records into a new Prometheus recorder; its handle renders the text exposition.
    pub fn prometheus() -> (Metrics, PrometheusHandle) {
        let builder = PrometheusBuilder::new();
        // Bucket bounds are constant and valid, so this cannot fail; fall back to summaries
        // rather than panicking if it ever did.
        let builder = match builder.set_buckets(DURATION_BUCKETS) {
            Ok(with_buckets) => with_buckets,
            Err(_) => PrometheusBuilder::new(),
        };
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        (Metrics::with_recorder(recorder), handle)
    }

    fn counter(&self, name: &'static str, labels: Vec<Label>, value: u64) {
        match &self.sink {
            Sink::Global => metrics::counter!(name, labels).increment(value),
            Sink::Recorder(recorder) => recorder
                .register_counter(&Key::from_parts(name, labels), &metadata())
                .increment(value),
        }
    }

    fn histogram(&self, name: &'static str, labels: Vec<Label>, value: f64) {
        match &self.sink {
            Sink::Global => metrics::histogram!(name, labels).record(value),
            Sink::Recorder(recorder) => recorder
                .register_histogram(&Key::from_parts(name, labels), &metadata())
                .record(value),
        }
    }

    fn started(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        // A map of start times has no invariant a panicking holder could break.
        self.started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tool_result(&self, step: &ObservationStep, ctx: &ToolResultCtx) {
        let failed = step
            .metadata
            .as_ref()
            .and_then(|m| m.get("isError"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let labels = || {
            vec![
                Label::new("tool", ctx.tool_name.clone()),
                Label::new("outcome", if failed { "error" } else { "ok" }),
            ]
        };
        self.counter("harness_tool_calls_total", labels(), 1);
        self.histogram(
            "harness_tool_duration_seconds",
            labels(),
            ctx.duration_ms as f64 / 1000.0,
        );
    }

    fn failure(&self, failure: &LifecycleFailure) {
        let reason = serde_json::to_value(failure.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.counter(
            "harness_failures_total",
            vec![Label::new("reason", reason)],
            1,
        );
    }

    fn evaluation(&self, evaluation: &StrategyEvaluation) {
        let action = serde_json::to_value(evaluation.recommended_action)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let labels = vec![
            Label::new("strategy", evaluation.current_strategy.clone()),
            Label::new("action", action),
        ];
        self.counter("harness_strategy_evaluations_total", labels, 1);
    }

    fn request(&self, ctx: &ModelCtx) {
        self.started().insert(call_key(ctx), Instant::now());
    }

    fn response(&self, response: &ModelResponse, ctx: &ModelCtx) {
        let model = ctx.base.model_id.to_string();
        let finish = serde_json::to_value(response.finish_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.counter(
            "harness_model_calls_total",
            vec![
                Label::new("model", model.clone()),
                Label::new("finish", finish),
            ],
            1,
        );
        let usage = &response.usage;
        for (kind, tokens) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("reasoning", usage.reasoning_tokens),
        ] {
            if tokens > 0 {
                let labels = vec![Label::new("model", model.clone()), Label::new("kind", kind)];
                self.counter("harness_model_tokens_total", labels, tokens);
            }
        }
        if let Some(started) = self.started().remove(&call_key(ctx)) {
            let latency = started.elapsed().as_secs_f64();
            self.histogram(
                "harness_model_latency_seconds",
                vec![Label::new("model", model)],
                latency,
            );
        }
    }

    fn run_end(&self, end: &RunEnd) {
        let outcome = serde_json::to_value(end.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let labels = || vec![Label::new("outcome", outcome.clone())];
        self.counter("harness_runs_total", labels(), 1);
        self.histogram(
            "harness_run_duration_seconds",
            labels(),
            end.duration_ms as f64 / 1000.0,
        );
        // Calls of a run that ended mid-call never get a response: forget them.
        let prefix = format!("{}/", end.run_id);
        self.started().retain(|key, _| !key.starts_with(&prefix));
    }
}

fn metadata() -> Metadata<'static> {
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()))
}

fn call_key(ctx: &ModelCtx) -> String {
    format!("{}/{}/{}", ctx.base.run_id, ctx.base.iteration, ctx.attempt)
}

impl Plugin for Metrics {
    fn name(&self) -> &str {
        "metrics"
    }

    fn compose(&self, c: Compose) -> Compose {
        let (tools, failures, evaluations, requests, responses, runs) = (
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
        );
        c.tap(
            ObservationToolResult,
            move |step: &ObservationStep, ctx: &ToolResultCtx| tools.tool_result(step, ctx),
        )
        .tap(
            LifecycleFailureTag,
            move |failure: &LifecycleFailure, _: &BaseCtx| failures.failure(failure),
        )
        .tap(
            ControlStrategyEvaluated,
            move |evaluation: &StrategyEvaluation, _: &BaseCtx| evaluations.evaluation(evaluation),
        )
        .tap(ModelRequestTag, move |_: &ModelRequest, ctx: &ModelCtx| {
            requests.request(ctx)
        })
        .tap(
            ModelResponseTag,
            move |response: &ModelResponse, ctx: &ModelCtx| responses.response(response, ctx),
        )
        .tap(LifecycleComplete, move |end: &RunEnd, _: &BaseCtx| {
            runs.run_end(end)
        })
    }

    fn settings(&self) -> serde_json::Value {
        serde_json::json!({
            "recorder": match self.sink { Sink::Global => "global", Sink::Recorder(_) => "dedicated" },
            "durationBuckets": DURATION_BUCKETS,
        })
    }
}
