//! The `events` suite: the event hub (reducer + display scheduler + bus) under load.
//!
//! - `events_per_s_1sub` / `_16sub`: events emitted through `EventHub::emit` per second of wall
//!   time, each one read by every subscriber, on a one-thread Tokio runtime (so the figure is
//!   the whole cost on one core). The producer emits batches of 256 and yields until every
//!   subscriber has read them, so nothing is missed (the suite checks and reports misses). The
//!   feed repeats 8 `message_update` (one prebuilt shared message), 1 `tool_update` and 1
//!   `usage_update`. Baseline: the same loop over a bare `tokio::sync::broadcast` of
//!   `Arc<HarnessEvent>` with no reducer or scheduler.
//! - `snapshots_per_s_streaming`: real time. For 3 s a producer emits a `message_update` (a
//!   new, growing message) every millisecond; a display subscriber counts the snapshots it
//!   receives. Snapshots per second = snapshots / seconds streamed.
//! - `critical_flush_ms_p99`: on a two-worker runtime, after 20 ordinary events, the producer
//!   emits a `tool_approval_required` and measures the time until a display subscriber (another
//!   task) holds a snapshot showing that approval; 1,000 rounds after 100 of warm-up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use harness_core::event::{
    Delivery, EventHub, HarnessEvent, HarnessMessage, MessagePart, MessageRole,
};
use harness_tags::Usage;
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio::sync::{broadcast, mpsc};

use crate::alloc;
use crate::measure::{median, round2};

const BATCH: u64 = 256;
const TOOL_CALL: &str = "call-1";

fn current_thread() -> Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("no tokio runtime: {error}"),
    }
}

fn message(id: &str, text: String) -> Arc<HarnessMessage> {
    Arc::new(HarnessMessage {
        id: id.to_owned(),
        role: MessageRole::Assistant,
        content: vec![MessagePart::Text { text }],
        created_at: 0,
        stop_reason: None,
        error_message: None,
    })
}

/// The ordinary events of a streaming run.
struct Feed {
    message: Arc<HarnessMessage>,
    n: u64,
}

impl Feed {
    fn new() -> Self {
        Feed {
            message: message(
                "m-1",
                "Streaming the answer, one token at a time.".repeat(4),
            ),
            n: 0,
        }
    }

    fn next(&mut self) -> HarnessEvent {
        self.n += 1;
        match self.n % 10 {
            0 => HarnessEvent::UsageUpdate {
                usage: Usage {
                    output_tokens: self.n,
                    ..Usage::default()
                },
            },
            5 => HarnessEvent::ToolUpdate {
                tool_call_id: TOOL_CALL.to_owned(),
                partial_result: Value::from(self.n),
            },
            _ => HarnessEvent::MessageUpdate {
                message: Arc::clone(&self.message),
            },
        }
    }
}

/// Where a subscriber is: events read (or reported missed), and events missed.
#[derive(Default)]
struct Progress {
    read: AtomicU64,
    missed: AtomicU64,
}

async fn wait_for(readers: &[Arc<Progress>], produced: u64) {
    while readers
        .iter()
        .any(|reader| reader.read.load(Ordering::Acquire) < produced)
    {
        tokio::task::yield_now().await;
    }
}

/// Emits `count` events in batches, waiting after each batch until every reader has it.
async fn produce(
    hub: &EventHub,
    readers: &[Arc<Progress>],
    feed: &mut Feed,
    produced: &mut u64,
    count: u64,
) -> Duration {
    let started = Instant::now();
    let mut left = count;
    while left > 0 {
        let batch = left.min(BATCH);
        for _ in 0..batch {
            hub.emit(feed.next());
        }
        *produced += batch;
        left -= batch;
        wait_for(readers, *produced).await;
    }
    started.elapsed()
}

struct Throughput {
    events_per_s: f64,
    missed: u64,
    allocations_per_event: f64,
}

/// Events per second through the hub to `subscribers` readers: the median of 3 rounds.
fn hub_throughput(subscribers: usize, events: u64) -> Throughput {
    current_thread().block_on(async {
        let hub = EventHub::new();
        hub.emit(HarnessEvent::AgentStart {
            run_id: "run-1".into(),
        });
        hub.emit(HarnessEvent::ToolStart {
            tool_call_id: TOOL_CALL.into(),
            tool_name: "bash".into(),
            args: json!({"command": "make"}),
            category: None,
        });
        let mut readers = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..subscribers {
            let progress = Arc::new(Progress::default());
            readers.push(Arc::clone(&progress));
            let mut subscription = hub.subscribe();
            tasks.push(tokio::spawn(async move {
                while let Some(delivery) = subscription.recv().await {
                    match delivery {
                        Delivery::Event(event) => {
                            if !matches!(event.event, HarnessEvent::DisplayStateChanged { .. }) {
                                progress.read.fetch_add(1, Ordering::Release);
                            }
                        }
                        Delivery::Missed(missed) => {
                            progress.missed.fetch_add(missed, Ordering::Relaxed);
                            progress.read.fetch_add(missed, Ordering::Release);
                        }
                    }
                }
            }));
        }
        let mut feed = Feed::new();
        let mut produced = 0u64;
        produce(&hub, &readers, &mut feed, &mut produced, events / 10).await; // warm up
        let before = alloc::snapshot();
        let mut rates = Vec::new();
        for _ in 0..3 {
            let elapsed = produce(&hub, &readers, &mut feed, &mut produced, events).await;
            rates.push(events as f64 / elapsed.as_secs_f64());
        }
        let allocated = before.until(alloc::snapshot());
        drop(hub);
        for task in tasks {
            let _ = task.await;
        }
        Throughput {
            events_per_s: median(rates),
            missed: readers
                .iter()
                .map(|reader| reader.missed.load(Ordering::Relaxed))
                .sum(),
            allocations_per_event: allocated.allocations as f64 / (3 * events) as f64,
        }
    })
}

/// The same loop over a bare broadcast queue: no reducer, no scheduler, no listeners.
fn broadcast_throughput(events: u64) -> f64 {
    current_thread().block_on(async {
        let (sender, mut receiver) = broadcast::channel::<Arc<HarnessEvent>>(1024);
        let progress = Arc::new(Progress::default());
        let reader = Arc::clone(&progress);
        let task = tokio::spawn(async move {
            loop {
                match receiver.recv().await {
                    Ok(_) => {
                        reader.read.fetch_add(1, Ordering::Release);
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        reader.read.fetch_add(missed, Ordering::Release);
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        let readers = [progress];
        let mut feed = Feed::new();
        let mut produced = 0u64;
        let mut rates = Vec::new();
        for round in 0..4 {
            let count = if round == 0 { events / 10 } else { events };
            let started = Instant::now();
            let mut left = count;
            while left > 0 {
                let batch = left.min(BATCH);
                for _ in 0..batch {
                    let _ = sender.send(Arc::new(feed.next()));
                }
                produced += batch;
                left -= batch;
                wait_for(&readers, produced).await;
            }
            if round > 0 {
                rates.push(count as f64 / started.elapsed().as_secs_f64());
            }
        }
        drop(sender);
        let _ = task.await;
        median(rates)
    })
}

/// Snapshots per second seen by a display subscriber while `message_update`s stream at
/// 1,000 per second, in real time.
fn streaming_snapshots(duration: Duration) -> (f64, f64) {
    current_thread().block_on(async {
        let hub = EventHub::new();
        let mut frames = hub.subscribe_display_state();
        let _current = frames.recv().await;
        let seen = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&seen);
        let reader = tokio::spawn(async move {
            while frames.recv().await.is_some() {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        let mut ticks = tokio::time::interval(Duration::from_millis(1));
        let mut text = String::new();
        let mut emitted = 0u64;
        let started = Instant::now();
        while started.elapsed() < duration {
            ticks.tick().await;
            text.push_str("token ");
            hub.emit(HarnessEvent::MessageUpdate {
                message: message("m-1", text.clone()),
            });
            emitted += 1;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let snapshots = seen.load(Ordering::Relaxed);
        drop(hub);
        let _ = reader.await;
        (snapshots as f64 / elapsed, emitted as f64 / elapsed)
    })
}

/// Milliseconds from emitting `tool_approval_required` to a display subscriber holding the
/// snapshot that shows it: (p50, p99).
fn critical_flush(rounds: usize, warmup: usize) -> (f64, f64) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("no tokio runtime: {error}"),
    };
    runtime.block_on(async {
        let hub = EventHub::new();
        let (ack, mut acks) = mpsc::unbounded_channel::<(usize, Instant)>();
        let mut frames = hub.subscribe_display_state();
        let reader = tokio::spawn(async move {
            let mut last = None;
            while let Some(frame) = frames.recv().await {
                let received = Instant::now();
                let round = frame
                    .pending_approvals
                    .last()
                    .and_then(|pending| pending.tool_call_id.strip_prefix("approve-"))
                    .and_then(|round| round.parse::<usize>().ok());
                if round.is_some() && round != last {
                    last = round;
                    if let Some(round) = round {
                        let _ = ack.send((round, received));
                    }
                }
            }
        });
        let mut feed = Feed::new();
        let mut samples = Vec::with_capacity(rounds);
        for round in 0..warmup + rounds {
            for _ in 0..20 {
                hub.emit(feed.next());
            }
            let started = Instant::now();
            hub.emit(HarnessEvent::ToolApprovalRequired {
                tool_call_id: format!("approve-{round}"),
                tool_name: "bash".into(),
                args: json!({"command": "rm -rf build"}),
                category: None,
                reason: None,
            });
            let received = loop {
                match acks.recv().await {
                    Some((acked, at)) if acked == round => break at,
                    Some(_) => continue,
                    None => panic!("the display subscriber stopped"),
                }
            };
            if round >= warmup {
                samples.push(received.duration_since(started).as_secs_f64() * 1_000.0);
            }
            // Answered, as a user would: the state holds one waiting approval per round, not
            // every round's (each snapshot would copy them all).
            hub.emit(HarnessEvent::ToolApprovalAnswered {
                tool_call_id: format!("approve-{round}"),
                approved: true,
            });
        }
        drop(hub);
        let _ = reader.await;
        samples.sort_by(f64::total_cmp);
        let p50 = samples[samples.len() / 2];
        let p99 = samples[samples.len() * 99 / 100];
        (p50, p99)
    })
}

pub(crate) fn run() -> serde_json::Value {
    let one = hub_throughput(1, 2_000_000);
    let sixteen = hub_throughput(16, 200_000);
    let baseline = broadcast_throughput(2_000_000);
    let (snapshots_per_s, streamed_per_s) = streaming_snapshots(Duration::from_secs(3));
    let (flush_p50, flush_p99) = critical_flush(1_000, 100);

    println!("{:<36} {:>14}", "figure", "value");
    println!(
        "{:<36} {:>14.0}",
        "events/s, hub, 1 subscriber", one.events_per_s
    );
    println!(
        "{:<36} {:>14.0}",
        "events/s, bare broadcast, 1 sub", baseline
    );
    println!(
        "{:<36} {:>14.2}",
        "hub cost / bare broadcast",
        baseline / one.events_per_s
    );
    println!(
        "{:<36} {:>14.1}",
        "ns per event, hub, 1 subscriber",
        1e9 / one.events_per_s
    );
    println!(
        "{:<36} {:>14.2}",
        "allocations per event, 1 sub", one.allocations_per_event
    );
    println!(
        "{:<36} {:>14.0}",
        "events/s, hub, 16 subscribers", sixteen.events_per_s
    );
    println!(
        "{:<36} {:>14}",
        "events missed (1 and 16 subs)",
        one.missed + sixteen.missed
    );
    println!(
        "{:<36} {:>14.0}",
        "events/s streamed (real time)", streamed_per_s
    );
    println!(
        "{:<36} {:>14.2}",
        "snapshots/s while streaming", snapshots_per_s
    );
    println!("{:<36} {:>14.3}", "critical flush p50 (ms)", flush_p50);
    println!("{:<36} {:>14.3}", "critical flush p99 (ms)", flush_p99);
    json!({
        "suite": "events",
        "events_per_s_1sub": one.events_per_s.round(),
        "events_per_s_16sub": sixteen.events_per_s.round(),
        "baseline_broadcast_per_s_1sub": baseline.round(),
        "hub_over_broadcast_ratio": round2(baseline / one.events_per_s),
        "allocations_per_event_1sub": round2(one.allocations_per_event),
        "events_missed": one.missed + sixteen.missed,
        "streamed_events_per_s": streamed_per_s.round(),
        "snapshots_per_s_streaming": round2(snapshots_per_s),
        "critical_flush_ms_p50": (flush_p50 * 1_000.0).round() / 1_000.0,
        "critical_flush_ms_p99": (flush_p99 * 1_000.0).round() / 1_000.0,
    })
}
