//! Timing helpers: interleaved rounds, medians, and a waker-free poll for ready futures.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// Runs each case for `iterations` per round, for `rounds` rounds interleaved so that
/// machine noise hits every case alike, and returns each case's median ns per iteration.
pub(crate) fn interleaved(
    rounds: usize,
    iterations: u64,
    cases: &mut [&mut dyn FnMut(u64)],
) -> Vec<f64> {
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); cases.len()];
    for case in cases.iter_mut() {
        case(iterations / 10); // warm up
    }
    for _ in 0..rounds {
        for (case, samples) in cases.iter_mut().zip(samples.iter_mut()) {
            let started = Instant::now();
            case(iterations);
            samples.push(started.elapsed().as_nanos() as f64 / iterations as f64);
        }
    }
    samples.into_iter().map(median).collect()
}

/// The median of some samples.
pub(crate) fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let middle = samples.len() / 2;
    if samples.len().is_multiple_of(2) {
        (samples[middle - 1] + samples[middle]) / 2.0
    } else {
        samples[middle]
    }
}

/// Polls a future once with a no-op waker; `None` if it is not ready. Inlined, as `.await`
/// inlines the poll of a ready future.
#[inline(always)]
pub(crate) fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// Rounds to two decimals for the JSON line.
pub(crate) fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}
