//! The `harness` suite: a `Harness::send_message` round trip, against the kernel's run.
//!
//! One round trip: the user's message, the scripted model asks for `add(1, 2)`, the
//! permissions plugin allows it, the tool runs, the model answers; everything the harness does
//! around the kernel included (the thread, the store writes, the events, the display state).
//! It runs on threads that already hold 10 and 2,000 messages, over the in-memory store and
//! over SQLite (a temporary file, the default durability), and the kernel suite's run (the
//! kernel alone, nothing recorded) is the baseline, measured in the same process.
//!
//! The cases are interleaved in rounds so that machine noise hits them alike. Each round gives
//! every case a fresh thread filled to its size through the store (which the harness has to
//! notice), one untimed run that loads the conversation, then `RUNS` timed round trips: the
//! thread grows by 4 messages a run, so it stays within 10% of its nominal size. Bytes are
//! counted over the timed runs of the memory cases (the allocator counts every thread, and
//! SQLite's work runs on other threads too).
//!
//! `HARNESS_BENCH_CASES=memory_2000,...` runs only the cases named (for a profiler; the
//! figures of the others are then missing).
//!
//! Figures: the median round trip per case (`rt_p50_us_*`), bytes and allocations per run,
//! `growth_ratio_memory` (2,000 messages over 10: flat is 1.0) and
//! `overhead_ratio_memory_2000` (the round trip over the kernel's run).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use harness_core::harness::{Harness, Mode, RunOutcome};
use harness_core::kernel::Kernel;
use harness_core::model::{Model, ModelId, Scripted, ScriptedModel};
use harness_core::store::{MemoryStore, SqliteStore, Store, WriteOp};
use harness_core::tool::{ToolContext, ToolError, tool_fn};
use harness_permissions::{Permissions, Policy};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::runtime::Runtime;

use crate::alloc;
use crate::measure::{median, round2};
use crate::store::TempDb;

/// Timed round trips per case per round.
const RUNS: usize = 50;
/// Rounds; each case is measured `ROUNDS * RUNS` times.
const ROUNDS: usize = 12;

/// Arguments of the bench tool.
#[derive(Deserialize, JsonSchema)]
struct Add {
    /// The first term.
    a: i64,
    /// The second term.
    b: i64,
}

fn harness(store: Backend) -> Harness {
    let model: Arc<dyn Model> = Arc::new(
        ScriptedModel::new("scripted/bench")
            .then(Scripted::tool_call("add", json!({"a": 1, "b": 2})))
            .then(Scripted::text("1 + 2 = 3"))
            .cycling()
            .without_recording(),
    );
    let builder =
        Harness::builder("harness-bench")
            .mode(Mode::new("build").default_model("scripted/bench"))
            .instructions("You are a benchmark agent.")
            .model_resolver(move |_: &ModelId| Ok(Arc::clone(&model)))
            .tool(tool_fn(
                "add",
                "Adds two integers.",
                |args: Add, _: ToolContext| async move {
                    Ok::<_, ToolError>((args.a + args.b).to_string())
                },
            ))
            .plugin(Permissions::builder().tool("add", Policy::Allow).build())
            .interactive(false);
    let builder = match store {
        Backend::Memory(store) => builder.store(store),
        Backend::Sqlite(store) => builder.sqlite(store),
    };
    builder
        .build()
        .unwrap_or_else(|error| panic!("the bench harness does not build: {error}"))
}

/// The store a case runs on.
enum Backend {
    Memory(Arc<dyn Store>),
    Sqlite(SqliteStore),
}

/// One measured case: a harness, its store, the size its threads start at.
struct Case {
    name: &'static str,
    harness: Harness,
    store: Arc<dyn Store>,
    messages: usize,
    samples: Vec<f64>,
    counted: alloc::Snapshot,
}

impl Case {
    fn new(name: &'static str, store: Backend, messages: usize) -> Case {
        let harness = harness(store);
        let store = Arc::clone(harness.store());
        Case {
            name,
            harness,
            store,
            messages,
            samples: Vec::with_capacity(ROUNDS * RUNS),
            counted: alloc::Snapshot {
                allocations: 0,
                bytes: 0,
            },
        }
    }

    /// A fresh thread of `messages` messages (written through the store, as another writer
    /// would), the previous one deleted, and one untimed run that loads it.
    async fn prepare(&self, round: usize) {
        if let Some(previous) = self.harness.session().thread_id() {
            must(self.harness.delete_thread(&previous).await);
        }
        let thread = must(self.harness.create_thread(None).await);
        let prefix = format!("{}-{round}", self.name);
        let messages = (0..self.messages)
            .map(|n| crate::store::message(&prefix, n))
            .collect();
        must(
            self.store
                .write(vec![WriteOp::AppendMessages {
                    thread_id: thread.id,
                    messages,
                }])
                .await,
        );
        round_trip(&self.harness).await;
    }

    /// `RUNS` timed round trips; the allocations they make are counted.
    async fn measure(&mut self) {
        let before = alloc::snapshot();
        for _ in 0..RUNS {
            let started = Instant::now();
            round_trip(&self.harness).await;
            self.samples
                .push(started.elapsed().as_nanos() as f64 / 1_000.0);
        }
        let used = before.until(alloc::snapshot());
        self.counted.allocations += used.allocations;
        self.counted.bytes += used.bytes;
    }

    fn p50(&self) -> f64 {
        median(self.samples.clone())
    }

    fn per_run(&self) -> (u64, u64) {
        let runs = self.samples.len().max(1) as u64;
        (self.counted.bytes / runs, self.counted.allocations / runs)
    }
}

async fn round_trip(harness: &Harness) {
    let summary = must(harness.send_message("What is 1 + 2?").await);
    if summary.outcome != RunOutcome::Complete || summary.final_text.as_deref() != Some("1 + 2 = 3")
    {
        panic!(
            "the bench round trip did not complete: {:?} {:?}",
            summary.outcome, summary.error
        );
    }
    black_box(summary);
}

fn must<T, E: std::fmt::Display>(result: Result<T, E>) -> T {
    result.unwrap_or_else(|error| panic!("a bench step failed: {error}"))
}

/// The kernel suite's run, timed one by one.
async fn kernel_runs(kernel: &Kernel, samples: &mut Vec<f64>) {
    for _ in 0..RUNS {
        let started = Instant::now();
        crate::kernel::run_once(kernel).await;
        samples.push(started.elapsed().as_nanos() as f64 / 1_000.0);
    }
}

pub(crate) fn run() -> serde_json::Value {
    let runtime: Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("no tokio runtime: {error}"));
    let files = [TempDb::new("harness-10"), TempDb::new("harness-2000")];
    let sqlite = |file: &TempDb| {
        Backend::Sqlite(
            SqliteStore::open(&file.0)
                .unwrap_or_else(|error| panic!("the bench store does not open: {error}")),
        )
    };
    let memory = || Backend::Memory(Arc::new(MemoryStore::new()));
    let mut cases = vec![
        Case::new("memory_10", memory(), 10),
        Case::new("memory_2000", memory(), 2_000),
        Case::new("sqlite_10", sqlite(&files[0]), 10),
        Case::new("sqlite_2000", sqlite(&files[1]), 2_000),
    ];
    if let Ok(only) = std::env::var("HARNESS_BENCH_CASES") {
        cases.retain(|case| only.split(',').any(|name| name.trim() == case.name));
    }
    let kernel = crate::kernel::kernel();
    let mut kernel_samples = Vec::with_capacity(ROUNDS * RUNS);

    runtime.block_on(async {
        for case in &cases {
            must(case.harness.init().await);
        }
        for _ in 0..200 {
            crate::kernel::run_once(&kernel).await;
        }
        for round in 0..ROUNDS {
            for case in &mut cases {
                case.prepare(round).await;
                case.measure().await;
            }
            kernel_runs(&kernel, &mut kernel_samples).await;
        }
        for case in &cases {
            case.harness.destroy().await;
        }
    });

    let kernel_p50 = median(kernel_samples);
    let p50 = |name: &str| {
        cases
            .iter()
            .find(|case| case.name == name)
            .map_or(f64::NAN, Case::p50)
    };
    let per_run = |name: &str| {
        cases
            .iter()
            .find(|case| case.name == name)
            .map_or((0, 0), Case::per_run)
    };

    println!(
        "{:<24} {:>10} {:>14} {:>14}",
        "case", "p50 (us)", "bytes per run", "allocs per run"
    );
    for case in &cases {
        let (bytes, allocations) = case.per_run();
        let counted = case.name.starts_with("memory");
        println!(
            "{:<24} {:>10.2} {:>14} {:>14}",
            format!("round trip, {}", case.name),
            case.p50(),
            if counted {
                bytes.to_string()
            } else {
                "-".into()
            },
            if counted {
                allocations.to_string()
            } else {
                "-".into()
            },
        );
    }
    println!("{:<24} {:>10.2}", "kernel run (baseline)", kernel_p50);

    let growth = p50("memory_2000") / p50("memory_10");
    let overhead = p50("memory_2000") / kernel_p50;
    println!("{:<24} {:>10.2}", "growth 2000 / 10 (memory)", growth);
    println!("{:<24} {:>10.2}", "round trip / kernel", overhead);
    json!({
        "suite": "harness",
        "rt_p50_us_memory_10": round2(p50("memory_10")),
        "rt_p50_us_memory_2000": round2(p50("memory_2000")),
        "rt_p50_us_sqlite_10": round2(p50("sqlite_10")),
        "rt_p50_us_sqlite_2000": round2(p50("sqlite_2000")),
        "rt_bytes_per_run_memory_10": per_run("memory_10").0,
        "rt_bytes_per_run_memory_2000": per_run("memory_2000").0,
        "rt_allocations_per_run_memory_2000": per_run("memory_2000").1,
        "growth_ratio_memory": round2(growth),
        "growth_ratio_sqlite": round2(p50("sqlite_2000") / p50("sqlite_10")),
        "kernel_p50_us": round2(kernel_p50),
        "overhead_ratio_memory_2000": round2(overhead),
    })
}
