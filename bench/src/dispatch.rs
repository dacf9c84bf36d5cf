//! The `dispatch` suite: the cost of an emit through the compiled pipeline.
//!
//! Cases: a tag nobody registered for, 1 and 8 synchronous `on` handlers, and 8 synchronous
//! taps. The baseline is a `Vec` of boxed `dyn Fn` closures doing the same work (the same
//! arithmetic on the same payload), measured in the same run. Allocations per emit are
//! counted over the sync path with 8 `on` handlers and 8 taps.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use harness_tags::{BaseCtx, EmitOutcome, Pipeline, Tag};
use serde_json::json;

use crate::alloc;
use crate::measure::{interleaved, poll_once, round2};

/// The payload every case reshapes.
#[derive(Tag)]
#[tag(name = "bench.counter", phase = Act, payload = u64, ctx = BaseCtx)]
/// A benchmark tag: a counter that `on` handlers step and taps observe.
pub(crate) struct BenchCounter;

/// A tag nobody registers for.
#[derive(Tag)]
#[tag(name = "bench.unobserved", phase = Act, payload = u64, ctx = BaseCtx)]
pub(crate) struct BenchUnobserved;

const HANDLERS: usize = 8;

fn step(value: u64, salt: u64) -> u64 {
    value.wrapping_mul(6364136223846793005).wrapping_add(salt)
}

static OBSERVED: AtomicU64 = AtomicU64::new(0);

fn observe(value: u64) {
    OBSERVED.fetch_add(value & 1, Ordering::Relaxed);
}

fn pipeline(on: usize, taps: usize) -> Pipeline {
    Pipeline::builder()
        .compose(|mut c| {
            for salt in 0..on as u64 {
                c = c.on(BenchCounter, move |value: &u64, _: &BaseCtx| {
                    step(*value, salt)
                });
            }
            for _ in 0..taps {
                c = c.tap(BenchCounter, |value: &u64, _: &BaseCtx| observe(*value));
            }
            c
        })
        .build()
        .unwrap_or_else(|error| panic!("the bench pipeline does not build: {error}"))
}

type OnFn = Box<dyn Fn(u64, &BaseCtx) -> u64>;
type Case<'a> = Box<dyn FnMut(u64) + 'a>;
type TapFn = Box<dyn Fn(&u64, &BaseCtx)>;

fn baseline_on(count: usize) -> Vec<OnFn> {
    (0..count as u64)
        .map(|salt| Box::new(move |value: u64, _: &BaseCtx| step(value, salt)) as OnFn)
        .collect()
}

fn baseline_taps(count: usize) -> Vec<TapFn> {
    (0..count)
        .map(|_| Box::new(|value: &u64, _: &BaseCtx| observe(*value)) as TapFn)
        .collect()
}

#[inline(always)]
fn run_baseline(on: &[OnFn], taps: &[TapFn], value: u64, ctx: &BaseCtx) -> u64 {
    let mut value = value;
    for handler in on {
        value = handler(value, ctx);
    }
    for tap in taps {
        tap(&value, ctx);
    }
    value
}

#[inline(always)]
fn run_pipeline<T: Tag<Payload = u64, Ctx = BaseCtx>>(
    pipeline: &Pipeline,
    value: u64,
    ctx: &BaseCtx,
) -> u64 {
    // Consumed by value, so that the happy path drops nothing: matching by reference left a
    // drop of the whole result after the match, which the compiler stopped inlining once the
    // binary grew, and that call cost more than the emit itself.
    poll_once(pipeline.emit::<T>(value, ctx))
        .and_then(Result::ok)
        .and_then(EmitOutcome::into_payload)
        .unwrap_or_else(|| panic!("the bench emit did not complete synchronously"))
}

pub(crate) fn run() -> serde_json::Value {
    let ctx = BaseCtx::default();
    let on1 = pipeline(1, 0);
    let on8 = pipeline(HANDLERS, 0);
    let tap8 = pipeline(0, HANDLERS);
    let both = pipeline(HANDLERS, HANDLERS);
    let empty = pipeline(1, 0); // has a chain for bench.counter only
    let (base_on1, base_on8, base_taps) = (
        baseline_on(1),
        baseline_on(HANDLERS),
        baseline_taps(HANDLERS),
    );

    let iterations = 2_000_000;
    let mut cases: Vec<(&str, Case)> = vec![
        (
            "emit, no handlers",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_pipeline::<BenchUnobserved>(&empty, black_box(i), &ctx));
                }
            }),
        ),
        (
            "baseline, no closures",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_baseline(&[], &[], black_box(i), &ctx));
                }
            }),
        ),
        (
            "emit, 1 on",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_pipeline::<BenchCounter>(&on1, black_box(i), &ctx));
                }
            }),
        ),
        (
            "baseline, 1 closure",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_baseline(&base_on1, &[], black_box(i), &ctx));
                }
            }),
        ),
        (
            "emit, 8 on",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_pipeline::<BenchCounter>(&on8, black_box(i), &ctx));
                }
            }),
        ),
        (
            "baseline, 8 closures",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_baseline(&base_on8, &[], black_box(i), &ctx));
                }
            }),
        ),
        (
            "emit, 8 taps",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_pipeline::<BenchCounter>(&tap8, black_box(i), &ctx));
                }
            }),
        ),
        (
            "baseline, 8 tap closures",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_baseline(&[], &base_taps, black_box(i), &ctx));
                }
            }),
        ),
        (
            "emit, 8 on + 8 taps",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_pipeline::<BenchCounter>(&both, black_box(i), &ctx));
                }
            }),
        ),
        (
            "baseline, 8 + 8 closures",
            Box::new(|n| {
                for i in 0..n {
                    black_box(run_baseline(&base_on8, &base_taps, black_box(i), &ctx));
                }
            }),
        ),
    ];
    let mut runners: Vec<&mut dyn FnMut(u64)> = cases
        .iter_mut()
        .map(|(_, f)| f.as_mut() as &mut dyn FnMut(u64))
        .collect();
    let ns = interleaved(15, iterations, &mut runners);
    drop(runners);
    let names: Vec<&str> = cases.iter().map(|(name, _)| *name).collect();
    drop(cases);

    // Allocations on the sync path: 8 on handlers and 8 taps, many emits.
    let emits = 100_000u64;
    let before = alloc::snapshot();
    let mut checksum = 0u64;
    for i in 0..emits {
        checksum ^= run_pipeline::<BenchCounter>(&both, black_box(i), &ctx);
    }
    let allocated = before.until(alloc::snapshot());
    black_box(checksum);
    let allocs_per_emit = allocated.allocations as f64 / emits as f64;

    println!("{:<28} {:>10}", "case", "ns/emit");
    for (name, ns) in names.iter().zip(&ns) {
        println!("{name:<28} {ns:>10.2}");
    }
    let ratio = |ours: f64, baseline: f64| round2(ours / baseline);
    println!(
        "ratios: on1 {:.2}  on8 {:.2}  tap8 {:.2}  on8+tap8 {:.2}; allocations per sync emit: {allocs_per_emit}",
        ns[2] / ns[3],
        ns[4] / ns[5],
        ns[6] / ns[7],
        ns[8] / ns[9]
    );
    json!({
        "suite": "dispatch",
        "emit_none_ns": round2(ns[0]),
        "baseline_none_ns": round2(ns[1]),
        "on1_ns": round2(ns[2]),
        "baseline_on1_ns": round2(ns[3]),
        "on1_ratio": ratio(ns[2], ns[3]),
        "on8_ns": round2(ns[4]),
        "baseline_on8_ns": round2(ns[5]),
        "on8_ratio": ratio(ns[4], ns[5]),
        "tap8_ns": round2(ns[6]),
        "baseline_tap8_ns": round2(ns[7]),
        "tap8_ratio": ratio(ns[6], ns[7]),
        "on8_tap8_ns": round2(ns[8]),
        "baseline_on8_tap8_ns": round2(ns[9]),
        "on8_tap8_ratio": ratio(ns[8], ns[9]),
        "allocs_per_emit_sync": allocs_per_emit,
    })
}
