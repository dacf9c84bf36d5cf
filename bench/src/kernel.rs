//! The `kernel` suite: harness overhead of a run, everything but the model.
//!
//! One run: a user message, the model asks for one tool, the tool's result, the final answer,
//! on the scripted model with nothing recorded and no handlers, many times. The figures are
//! per run: latency percentiles, throughput and bytes allocated.

use std::hint::black_box;
use std::time::Instant;

use harness_core::kernel::{Kernel, RunInput};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ToolContext, ToolError, tool_fn};
use harness_tags::RunOutcome;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::alloc;
use crate::measure::round2;

/// Arguments of the bench tool.
#[derive(Deserialize, JsonSchema)]
struct Lookup {
    /// The key to look up.
    key: String,
}

/// The kernel of the suite: the scripted model asks for `lookup`, then answers.
pub(crate) fn kernel() -> Kernel {
    let model = ScriptedModel::new("scripted/bench")
        .then(Scripted::tool_call("lookup", json!({"key": "answer"})))
        .then(Scripted::text("The answer is 42."))
        .cycling()
        .without_recording();
    Kernel::builder()
        .model(model)
        .instructions("You are a benchmark agent.")
        .tool(tool_fn(
            "lookup",
            "Looks a key up.",
            |args: Lookup, _: ToolContext| async move {
                Ok::<_, ToolError>(format!("{} = 42", args.key))
            },
        ))
        .build()
        .unwrap_or_else(|error| panic!("the bench kernel does not build: {error}"))
}

/// One run of the suite's kernel; panics unless it completes.
pub(crate) async fn run_once(kernel: &Kernel) {
    let result = kernel.run(RunInput::new("What is the answer?")).await;
    if result.outcome != RunOutcome::Complete {
        panic!("the bench run did not complete: {:?}", result.error);
    }
    black_box(result);
}

pub(crate) fn run() -> serde_json::Value {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("no tokio runtime: {error}"),
    };
    let kernel = kernel();
    let runs = 20_000usize;
    let warmup = 2_000usize;

    let (mut samples, bytes) = runtime.block_on(async {
        for _ in 0..warmup {
            run_once(&kernel).await;
        }
        let mut samples = Vec::with_capacity(runs);
        let before = alloc::snapshot();
        for _ in 0..runs {
            let started = Instant::now();
            run_once(&kernel).await;
            samples.push(started.elapsed().as_nanos() as f64 / 1_000.0);
        }
        let allocated = before.until(alloc::snapshot());
        (samples, allocated)
    });
    samples.sort_by(f64::total_cmp);
    let p50 = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    let bytes_per_run = bytes.bytes / runs as u64;
    let allocations_per_run = bytes.allocations / runs as u64;

    println!("{:<28} {:>12}", "figure", "value");
    println!("{:<28} {:>12.2}", "run p50 (us)", p50);
    println!("{:<28} {:>12.2}", "run p99 (us)", p99);
    println!("{:<28} {:>12.0}", "runs per second", 1e6 / mean);
    println!("{:<28} {:>12}", "bytes allocated per run", bytes_per_run);
    println!("{:<28} {:>12}", "allocations per run", allocations_per_run);
    json!({
        "suite": "kernel",
        "run_p50_us": round2(p50),
        "run_p99_us": round2(p99),
        "runs_per_s": (1e6 / mean).round(),
        "bytes_allocated_per_run": bytes_per_run,
        "allocations_per_run": allocations_per_run,
    })
}
