//! The `om` suite: what observational memory costs when it has nothing to do.
//!
//! - Token counting: exact o200k counts of 1 MB of mixed tool output (the redaction suite's
//!   corpus), against splitting the same text on whitespace, measured in the same run
//!   (`count_mb_per_s`: the same text again and again, so the counter's per-thread cache of
//!   short pieces is warm); and once per text on a fresh thread, each time another 1 MB
//!   (`count_cold_mb_per_s`: nothing cached, the first message of a process).
//! - Step overhead: the time a harness model step takes with the memory plugin attached
//!   (thresholds out of reach, so nothing is due: the plugin tracks the new messages' tokens
//!   and leaves the request as it is) minus the time without it, both harnesses on the
//!   scripted model and the in-memory store, interleaved in rounds. Exact counts run on the
//!   plugin's counting thread, off the step's path; the step pays the estimate and the
//!   bookkeeping.

use std::cell::Cell;
use std::hint::black_box;
use std::sync::Arc;

use harness_core::harness::{Harness, Mode};
use harness_core::model::{Model, ModelId, Scripted, ScriptedModel};
use harness_om::{IdleTrigger, ObservationalMemory, OmConfig, TokenCounter};

use crate::measure::{interleaved, round2};
use crate::redaction::corpus;

const CORPUS_BYTES: usize = 1 << 20;
/// Model steps per harness per round.
const STEPS: u64 = 50;

fn harness(memory: Option<ObservationalMemory>) -> Harness {
    let model: Arc<dyn Model> = Arc::new(
        ScriptedModel::new("scripted/agent")
            .then(Scripted::text("Noted; the build is green again."))
            .cycling()
            .without_recording(),
    );
    let mut builder = Harness::builder("om-bench")
        .mode(Mode::new("build").default_model("scripted/agent"))
        .model_resolver(move |_: &ModelId| Ok(Arc::clone(&model)))
        .interactive(false);
    if let Some(memory) = memory {
        builder = builder.plugin(memory);
    }
    builder
        .build()
        .unwrap_or_else(|error| panic!("the bench harness does not build: {error}"))
}

fn idle_memory() -> ObservationalMemory {
    ObservationalMemory::new(OmConfig {
        observer_model: Some("scripted/agent".into()),
        reflector_model: Some("scripted/agent".into()),
        observation_threshold: u64::MAX / 4,
        reflection_threshold: u64::MAX / 4,
        idle: IdleTrigger::Off,
        provider_change: false,
        ..OmConfig::default()
    })
    .unwrap_or_else(|error| panic!("the memory plugin does not build: {error}"))
}

pub(crate) fn run() -> serde_json::Value {
    let text = corpus(CORPUS_BYTES, 0x5eed);
    let counter = TokenCounter::global();
    let tokens = counter.count(&text);
    let mut exact = |n: u64| {
        for _ in 0..n {
            black_box(counter.count(black_box(&text)));
        }
    };
    let mut words = |n: u64| {
        for _ in 0..n {
            black_box(black_box(&text).split_whitespace().count());
        }
    };
    let ns = interleaved(7, 2, &mut [&mut exact, &mut words]);
    let mb = text.len() as f64 / 1e6;
    let count_mb_per_s = mb / (ns[0] / 1e9);
    let words_mb_per_s = mb / (ns[1] / 1e9);
    let count_cold_mb_per_s = cold_count_mb_per_s(counter);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("no tokio runtime: {error}"));
    let plain = harness(None);
    let with_memory = harness(Some(idle_memory()));
    runtime.block_on(async {
        for harness in [&plain, &with_memory] {
            if let Err(error) = harness.init().await {
                panic!("the bench harness does not start: {error}");
            }
        }
    });
    let turn = Cell::new(0u64);
    let mut step_plain = |n: u64| steps(&runtime, &plain, &turn, n);
    let mut step_memory = |n: u64| steps(&runtime, &with_memory, &turn, n);
    let per_run = interleaved(15, STEPS, &mut [&mut step_plain, &mut step_memory]);
    let step_us = per_run[0] / 1e3;
    let step_with_memory_us = per_run[1] / 1e3;
    // Signed: within the machine's noise it may come out below zero.
    let step_overhead_us = step_with_memory_us - step_us;
    runtime.block_on(async {
        plain.destroy().await;
        with_memory.destroy().await;
    });

    println!("{:<44} {:>12}", "case", "figure");
    println!(
        "{:<44} {:>12.1}",
        "count o200k, 1 MB (MB/s)", count_mb_per_s
    );
    println!(
        "{:<44} {:>12.1}",
        "count o200k, 1 MB never seen (MB/s)", count_cold_mb_per_s
    );
    println!(
        "{:<44} {:>12.1}",
        "split on whitespace, 1 MB (MB/s)", words_mb_per_s
    );
    println!("{:<44} {:>12}", "tokens in the corpus", tokens);
    println!("{:<44} {:>12.1}", "model step without memory (us)", step_us);
    println!(
        "{:<44} {:>12.1}",
        "model step with memory, nothing due (us)", step_with_memory_us
    );
    println!(
        "{:<44} {:>12.2}",
        "memory's overhead per step (us)", step_overhead_us
    );
    serde_json::json!({
        "suite": "om",
        "count_mb_per_s": round2(count_mb_per_s),
        "count_cold_mb_per_s": round2(count_cold_mb_per_s),
        "baseline_split_mb_per_s": round2(words_mb_per_s),
        "step_us": round2(step_us),
        "step_with_memory_us": round2(step_with_memory_us),
        "step_overhead_us": round2(step_overhead_us),
    })
}

/// Sends `n` user messages of about 350 bytes, one model step each.
/// The median over five texts of counting 1 MB once on a thread that counted nothing before.
fn cold_count_mb_per_s(counter: &'static TokenCounter) -> f64 {
    let mut rates: Vec<f64> = (1..=5u64)
        .map(|seed| {
            let text = corpus(CORPUS_BYTES, 0xc01d + seed);
            std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        let started = std::time::Instant::now();
                        black_box(counter.count(black_box(&text)));
                        text.len() as f64 / 1e6 / started.elapsed().as_secs_f64()
                    })
                    .join()
                    .unwrap_or_else(|_| panic!("the counting thread panicked"))
            })
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn steps(runtime: &tokio::runtime::Runtime, harness: &Harness, turn: &Cell<u64>, n: u64) {
    runtime.block_on(async {
        for _ in 0..n {
            let at = turn.get() + 1;
            turn.set(at);
            let message = format!(
                "Turn {at}: the deploy of build {at} to node-{} failed; the log says the cache \
                 was cold and the retry succeeded after a timeout. Check the warnings on the \
                 staging cluster and tell me whether the migration that rewrote three tables \
                 needs to run again before we ship version 2.{at}.",
                at % 7
            );
            if let Err(error) = harness.send_message(message).await {
                panic!("a bench step failed: {error}");
            }
        }
    });
}
