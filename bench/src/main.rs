//! The harness's performance suites, one binary: `cargo run --release -p harness-bench -- SUITE`.
//!
//! Every suite prints a table and ends with one line of JSON figures. Timings are reported
//! against a baseline measured in the same run, because shared machines are noisy.

mod alloc;
mod dispatch;
mod events;
mod harness;
mod kernel;
mod measure;
mod om;
mod redaction;
mod store;

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

/// A suite: its name, what it measures, and the function that runs it and returns its figures.
type Suite = (&'static str, &'static str, fn() -> serde_json::Value);

const SUITES: &[Suite] = &[
    (
        "dispatch",
        "ns per emit with 0, 1 and 8 `on` handlers and 8 taps, against boxed closures",
        dispatch::run,
    ),
    (
        "events",
        "events/s through reducer + scheduler + bus to 1 and 16 subscribers, snapshots, flush latency",
        events::run,
    ),
    (
        "harness",
        "a send_message round trip on threads of 10 and 2,000 messages, memory and SQLite, against the kernel",
        harness::run,
    ),
    (
        "kernel",
        "harness overhead of a single-tool run on the scripted model",
        kernel::run,
    ),
    (
        "om",
        "observational memory: o200k token counting MB/s, overhead per model step when nothing is due",
        om::run,
    ),
    (
        "redaction",
        "MB/s redacting 1 MB of mixed tool output, against one RegexSet pass",
        redaction::run,
    ),
    (
        "store",
        "SQLite store: appends per second (single, concurrent, batched), resume of 10k messages",
        store::run,
    ),
];

fn main() -> ExitCode {
    let requested: Vec<String> = std::env::args().skip(1).collect();
    if requested.is_empty() || requested.iter().any(|a| a == "--help" || a == "-h") {
        print_usage();
        return if requested.is_empty() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; run with --release for meaningful figures");
    }
    for name in &requested {
        let Some((_, _, run)) = SUITES.iter().find(|(suite, _, _)| suite == name) else {
            eprintln!("unknown suite `{name}`");
            print_usage();
            return ExitCode::from(2);
        };
        let figures = run();
        println!("{figures}");
    }
    ExitCode::SUCCESS
}

fn print_usage() {
    eprintln!("usage: cargo run --release -p harness-bench -- SUITE [SUITE...]\n\nsuites:");
    for (name, about, _) in SUITES {
        eprintln!("  {name:<10} {about}");
    }
}
