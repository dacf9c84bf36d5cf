#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The display scheduler and the event hub, on Tokio's paused clock: batching window and
//! ceiling, immediate flushes, snapshots on the bus, latest-value subscribers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_events::{
    Delivery, DisplayConfig, DisplayScheduler, EventHub, EventHubConfig, Subscription,
    flushes_at_once,
};
use harness_protocol::display::{DisplayState, ToolStatus};
use harness_protocol::event::{AgentEndReason, HarnessEvent, ModelScope, OutputStream, ThreadInfo};
use harness_protocol::{HarnessMessage, MessageRole};
use harness_tags::{ToolCategory, Usage};
use serde_json::json;
use tokio::time::Instant;

const WINDOW: Duration = Duration::from_millis(250);
const CEILING: Duration = Duration::from_millis(500);

/// An ordinary (batched) event that leaves a visible trace: output tokens = `n`.
fn usage(n: u64) -> HarnessEvent {
    HarnessEvent::UsageUpdate {
        usage: Usage {
            output_tokens: n,
            ..Usage::default()
        },
    }
}

fn tokens(state: &DisplayState) -> u64 {
    state.token_usage.output_tokens
}

/// One event of every kind that must flush at once.
fn critical_events() -> Vec<HarnessEvent> {
    vec![
        HarnessEvent::AgentStart { run_id: "r".into() },
        HarnessEvent::AgentEnd {
            run_id: "r".into(),
            reason: AgentEndReason::Complete,
            error: None,
        },
        HarnessEvent::FollowUpQueued {
            count: 1,
            follow_ups: vec!["next".into()],
        },
        HarnessEvent::Error {
            error: "boom".into(),
            error_type: None,
            retryable: Some(true),
            retry_delay_ms: None,
        },
        HarnessEvent::ToolApprovalRequired {
            tool_call_id: "a".into(),
            tool_name: "bash".into(),
            args: json!({}),
            category: None,
            reason: None,
        },
        HarnessEvent::ToolSuspended {
            tool_call_id: "s".into(),
            tool_name: "ask_user".into(),
            args: json!({}),
            suspend_payload: json!({}),
            resume_schema: None,
        },
        HarnessEvent::ThreadChanged {
            thread_id: "t2".into(),
            previous_thread_id: None,
        },
        HarnessEvent::ThreadCreated {
            thread: ThreadInfo {
                id: "t3".into(),
                resource_id: "r".into(),
                title: None,
                created_at: 0,
                updated_at: 0,
            },
        },
        HarnessEvent::ThreadDeleted {
            thread_id: "t1".into(),
        },
        HarnessEvent::ModeChanged {
            mode_id: "build".into(),
            previous_mode_id: Some("plan".into()),
        },
        HarnessEvent::ModelChanged {
            model_id: "a/b".into(),
            scope: ModelScope::Thread,
            mode_id: None,
        },
        HarnessEvent::StateChanged {
            state: json!({}),
            changed_keys: vec![],
        },
        HarnessEvent::ToolInputEnd {
            tool_call_id: "i".into(),
        },
        HarnessEvent::ToolEnd {
            tool_call_id: "a".into(),
            result: "ok".into(),
            is_error: false,
        },
        HarnessEvent::SubagentEnd {
            tool_call_id: "sub".into(),
            agent_type: "explore".into(),
            result: "done".into(),
            is_error: false,
            duration_ms: 3,
        },
    ]
}

/// One event of every kind that is batched.
fn ordinary_events() -> Vec<HarnessEvent> {
    let message = Arc::new(HarnessMessage {
        id: "m".into(),
        role: MessageRole::Assistant,
        content: vec![],
        created_at: 0,
        stop_reason: None,
        error_message: None,
    });
    vec![
        HarnessEvent::MessageStart {
            message: Arc::clone(&message),
        },
        HarnessEvent::MessageUpdate {
            message: Arc::clone(&message),
        },
        HarnessEvent::MessageEnd { message },
        HarnessEvent::ToolInputStart {
            tool_call_id: "t".into(),
            tool_name: "x".into(),
        },
        HarnessEvent::ToolInputDelta {
            tool_call_id: "t".into(),
            args_text_delta: "{".into(),
        },
        HarnessEvent::ToolStart {
            tool_call_id: "t".into(),
            tool_name: "x".into(),
            args: json!({}),
            category: None,
        },
        HarnessEvent::ToolUpdate {
            tool_call_id: "t".into(),
            partial_result: json!(1),
        },
        HarnessEvent::ShellOutput {
            tool_call_id: "t".into(),
            output: "x".into(),
            stream: OutputStream::Stdout,
        },
        usage(1),
        HarnessEvent::Info {
            message: "fyi".into(),
        },
        HarnessEvent::TaskUpdated { tasks: vec![] },
        HarnessEvent::SubagentStart {
            tool_call_id: "s".into(),
            agent_type: "a".into(),
            task: "t".into(),
            model_id: "m".into(),
            forked: false,
        },
        HarnessEvent::SubagentTextDelta {
            tool_call_id: "s".into(),
            agent_type: "a".into(),
            text_delta: "x".into(),
        },
        HarnessEvent::OmObservationStart { pending_tokens: 1 },
        HarnessEvent::OmBufferingEnd {
            buffered: 1,
            tokens: 1,
        },
    ]
}

#[test]
fn the_flush_at_once_list_is_the_reference_list() {
    for event in critical_events() {
        assert!(
            flushes_at_once(&event),
            "{} should flush at once",
            event.kind()
        );
    }
    for event in ordinary_events() {
        assert!(
            !flushes_at_once(&event),
            "{} should be batched",
            event.kind()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_ordinary_event_is_published_one_window_later() {
    let hub = EventHub::new();
    let mut frames = hub.subscribe_display_state();
    assert_eq!(
        tokens(&frames.recv().await.unwrap()),
        0,
        "the current frame comes first"
    );

    let start = Instant::now();
    hub.emit(usage(1));
    assert_eq!(tokens(&hub.display_state()), 0, "not published yet");
    let frame = frames.recv().await.unwrap();
    assert_eq!(tokens(&frame), 1);
    assert_eq!(start.elapsed(), WINDOW);
    assert!(Arc::ptr_eq(&frame, &hub.display_state()));
}

#[tokio::test(start_paused = true)]
async fn each_event_restarts_the_window() {
    let hub = EventHub::new();
    let mut frames = hub.subscribe_display_state();
    frames.recv().await.unwrap();

    let start = Instant::now();
    hub.emit(usage(1));
    tokio::time::sleep(Duration::from_millis(100)).await;
    hub.emit(usage(2));
    tokio::time::sleep(Duration::from_millis(100)).await;
    hub.emit(usage(3));
    let frame = frames.recv().await.unwrap();
    assert_eq!(tokens(&frame), 3, "one frame holds the whole batch");
    assert_eq!(start.elapsed(), Duration::from_millis(200) + WINDOW);
}

#[tokio::test(start_paused = true)]
async fn a_steady_stream_is_published_within_the_ceiling() {
    let hub = EventHub::new();
    let mut frames = hub.subscribe_display_state();
    frames.recv().await.unwrap();

    let start = Instant::now();
    let step = Duration::from_millis(100);
    let last = 30;
    let producer = {
        let hub = hub.clone();
        tokio::spawn(async move {
            for n in 1..=last {
                hub.emit(usage(n));
                tokio::time::sleep(step).await;
            }
        })
    };
    let mut received = Vec::new();
    while let Some(frame) = frames.recv().await {
        received.push((start.elapsed(), tokens(&frame)));
        if tokens(&frame) == last {
            break;
        }
    }
    producer.await.unwrap();

    // Event n went out at (n - 1) * 100 ms; the first frame that shows it must come at most
    // one ceiling later.
    for n in 1..=last {
        let emitted = step * (n as u32 - 1);
        let (shown, _) = received
            .iter()
            .find(|(_, seen)| *seen >= n)
            .unwrap_or_else(|| panic!("event {n} never shown"));
        assert!(
            *shown <= emitted + CEILING,
            "event {n} emitted at {emitted:?} shown at {shown:?}"
        );
    }
    // Three seconds of events every 100 ms: about two frames a second, not one per event.
    assert!(
        received.len() <= 7,
        "{} frames: {received:?}",
        received.len()
    );
}

#[tokio::test(start_paused = true)]
async fn events_that_matter_to_a_human_flush_at_once_with_the_batch() {
    let hub = EventHub::new();
    let mut frames = hub.subscribe_display_state();
    frames.recv().await.unwrap();
    for (n, event) in critical_events().into_iter().enumerate() {
        let kind = event.kind();
        let n = n as u64 + 1;
        hub.emit(usage(n)); // batched...
        let start = Instant::now();
        hub.emit(event); // ...and flushed with this one
        assert_eq!(tokens(&hub.display_state()), n, "{kind}");
        let frame = frames.recv().await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "{kind} waited for a timer");
        assert_eq!(tokens(&frame), n, "{kind}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_held_snapshot_never_changes() {
    let hub = EventHub::new();
    hub.emit(HarnessEvent::AgentStart { run_id: "r".into() });
    let held = hub.display_state();
    let copy = (*held).clone();
    hub.emit(HarnessEvent::ToolApprovalRequired {
        tool_call_id: "a".into(),
        tool_name: "bash".into(),
        args: json!({}),
        category: None,
        reason: None,
    });
    hub.emit(HarnessEvent::AgentEnd {
        run_id: "r".into(),
        reason: AgentEndReason::Aborted,
        error: None,
    });
    assert_eq!(*held, copy);
    assert!(held.is_running);
    assert!(!hub.display_state().is_running);
}

#[tokio::test(start_paused = true)]
async fn a_slow_display_subscriber_gets_the_newest_frame() {
    let hub = EventHub::new();
    let mut frames = hub.subscribe_display_state();
    for n in 1..=5 {
        hub.emit(usage(n));
        hub.emit(HarnessEvent::ModeChanged {
            mode_id: "m".into(),
            previous_mode_id: None,
        });
    }
    assert_eq!(tokens(&frames.recv().await.unwrap()), 5);
}

async fn next_kind(events: &mut Subscription) -> String {
    match events.recv().await.unwrap() {
        Delivery::Event(event) => event.event.kind().to_owned(),
        Delivery::Missed(n) => panic!("missed {n} events"),
    }
}

#[tokio::test(start_paused = true)]
async fn snapshots_are_announced_on_the_bus_after_the_events_they_hold() {
    let hub = EventHub::new();
    let mut events = hub.subscribe();
    hub.emit(usage(1));
    hub.emit(HarnessEvent::AgentStart { run_id: "r".into() });
    assert_eq!(next_kind(&mut events).await, "usage_update");
    assert_eq!(next_kind(&mut events).await, "agent_start");
    match events.recv().await.unwrap() {
        Delivery::Event(event) => match &event.event {
            HarnessEvent::DisplayStateChanged { display_state } => {
                assert!(display_state.is_running);
                assert_eq!(tokens(display_state), 1);
                assert!(Arc::ptr_eq(display_state, &hub.display_state()));
            }
            other => panic!("expected display_state_changed, got {other:?}"),
        },
        other => panic!("expected an event, got {other:?}"),
    }

    // A timed flush is announced too.
    let start = Instant::now();
    hub.emit(usage(2));
    assert_eq!(next_kind(&mut events).await, "usage_update");
    match events.recv().await.unwrap().event() {
        Some(HarnessEvent::DisplayStateChanged { display_state }) => {
            assert_eq!(tokens(display_state), 2);
        }
        other => panic!("expected display_state_changed, got {other:?}"),
    }
    assert_eq!(start.elapsed(), WINDOW);
}

#[tokio::test(start_paused = true)]
async fn snapshot_announcements_can_be_turned_off() {
    let hub = EventHub::with_config(EventHubConfig {
        display_state_events: false,
        ..EventHubConfig::default()
    });
    let mut events = hub.subscribe();
    hub.emit(HarnessEvent::AgentStart { run_id: "r".into() });
    hub.emit(HarnessEvent::Info {
        message: "x".into(),
    });
    assert_eq!(next_kind(&mut events).await, "agent_start");
    assert_eq!(next_kind(&mut events).await, "info");
    assert!(hub.display_state().is_running);
}

#[tokio::test(start_paused = true)]
async fn listeners_see_the_event_then_its_snapshot() {
    let hub = EventHub::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let _guard = hub.listen(move |event| sink.lock().unwrap().push(event.event.kind()));
    hub.emit(HarnessEvent::AgentStart { run_id: "r".into() });
    hub.emit(usage(1));
    assert_eq!(
        *seen.lock().unwrap(),
        ["agent_start", "display_state_changed", "usage_update"]
    );
    let mut frames = hub.subscribe_display_state();
    frames.recv().await.unwrap();
    frames.recv().await.unwrap(); // the timed flush
    assert_eq!(seen.lock().unwrap().last(), Some(&"display_state_changed"));
}

#[tokio::test(start_paused = true)]
async fn the_hub_stamps_modified_files_with_its_clock() {
    let hub = EventHub::with_config(EventHubConfig {
        display: DisplayConfig {
            clock: Arc::new(|| 1_234),
            ..DisplayConfig::default()
        },
        ..EventHubConfig::default()
    });
    hub.emit(HarnessEvent::ToolStart {
        tool_call_id: "w".into(),
        tool_name: "write_file".into(),
        args: json!({"path": "a.rs"}),
        category: Some(ToolCategory::Edit),
    });
    hub.emit(HarnessEvent::ToolEnd {
        tool_call_id: "w".into(),
        result: "ok".into(),
        is_error: false,
    });
    let state = hub.display_state();
    assert_eq!(state.active_tools["w"].status, ToolStatus::Completed);
    assert_eq!(state.modified_files["a.rs"].first_modified, 1_234);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_hub_ends_its_streams() {
    let hub = EventHub::new();
    let mut frames = hub.subscribe_display_state();
    let mut events = hub.subscribe();
    frames.recv().await.unwrap();
    hub.emit(usage(1)); // starts the timer
    drop(hub);
    assert_eq!(next_kind(&mut events).await, "usage_update");
    assert!(events.recv().await.is_none());
    assert!(frames.recv().await.is_none());
}

#[test]
fn without_a_runtime_batches_wait_for_a_flush_or_a_later_event() {
    let hub = EventHub::new();
    hub.emit(usage(1));
    assert_eq!(tokens(&hub.display_state()), 0);
    hub.flush_display_state();
    assert_eq!(tokens(&hub.display_state()), 1);
    hub.emit(usage(2));
    hub.emit(HarnessEvent::AgentStart { run_id: "r".into() });
    assert_eq!(tokens(&hub.display_state()), 2);

    // With a zero window, the next event finds the batch overdue and publishes it.
    let scheduler = DisplayScheduler::new(DisplayConfig {
        window: Duration::ZERO,
        ceiling: Duration::ZERO,
        ..DisplayConfig::default()
    });
    scheduler.fold(&usage(3));
    scheduler.fold(&usage(4));
    assert_eq!(tokens(&scheduler.latest()), 4);
}

#[test]
fn the_timer_restarts_in_a_new_runtime_after_the_old_one_shut_down() {
    let paused_runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    };
    let scheduler = DisplayScheduler::default();
    let first = paused_runtime();
    first.block_on(async {
        let mut frames = scheduler.subscribe();
        frames.recv().await.unwrap();
        scheduler.fold(&usage(1));
        assert_eq!(tokens(&frames.recv().await.unwrap()), 1);
        scheduler.fold(&usage(2)); // the timer is sleeping when the runtime goes away
    });
    drop(first);
    scheduler.flush();
    assert_eq!(tokens(&scheduler.latest()), 2);

    paused_runtime().block_on(async {
        let mut frames = scheduler.subscribe();
        frames.recv().await.unwrap();
        let start = Instant::now();
        scheduler.fold(&usage(3));
        let frame = tokio::time::timeout(Duration::from_secs(5), frames.recv())
            .await
            .expect("no timer published the batch");
        assert_eq!(tokens(&frame.unwrap()), 3);
        assert_eq!(start.elapsed(), WINDOW);
    });
}

#[tokio::test(start_paused = true)]
async fn a_standalone_scheduler_folds_and_publishes() {
    let scheduler = DisplayScheduler::default();
    let mut frames = scheduler.subscribe();
    frames.recv().await.unwrap();
    scheduler.fold(&HarnessEvent::AgentStart { run_id: "r".into() });
    assert!(frames.recv().await.unwrap().is_running);
    scheduler.fold(&usage(7));
    assert_eq!(tokens(&frames.recv().await.unwrap()), 7);
}
