#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Flow control from other tasks while a run streams: follow-ups drain in order, `steer`
//! redirects, `abort` stops; and the events and display state a UI sees meanwhile.

use std::sync::Arc;

use harness_core::event::{AgentEndReason, HarnessEvent};
use harness_core::harness::RunOutcome;
use harness_core::harness::{FollowUp, HarnessError};
use harness_core::store::StoredMessage;
use harness_tags::KernelMessage;
use harness_tests::harness::{GatedModel, builder_with, drain, next_matching};

fn transcript(messages: &[StoredMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match &m.message {
            KernelMessage::User { content } => format!("user: {content}"),
            KernelMessage::Assistant { content, .. } => format!("assistant: {content}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_queue_behind_the_run_and_drain_in_order() {
    let (model, mut gate) = GatedModel::new("gated/one");
    let harness = builder_with(model).build().unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();
    let queue_sizes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let _recording = harness.listen({
        let queue_sizes = Arc::clone(&queue_sizes);
        move |event| {
            if let HarnessEvent::FollowUpQueued { count, .. } = &event.event {
                queue_sizes.lock().unwrap().push(*count);
            }
        }
    });

    let first = tokio::spawn({
        let harness = harness.clone();
        async move { harness.send_message("first").await }
    });
    assert_eq!(gate.next_call().await, "first");

    // From other tasks, while the first run streams.
    let queued = tokio::spawn({
        let harness = harness.clone();
        async move {
            let second = harness.follow_up("second").await.unwrap();
            let third = harness.follow_up("third").await.unwrap();
            (second, third)
        }
    })
    .await
    .unwrap();
    assert_eq!(queued.0, FollowUp::Queued { count: 1 });
    assert_eq!(queued.1, FollowUp::Queued { count: 2 });
    assert!(matches!(
        harness.send_message("now").await,
        Err(HarnessError::Busy)
    ));
    assert_eq!(harness.session().queued_follow_ups(), ["second", "third"]);

    let announced = next_matching(&mut events, |e| match e {
        HarnessEvent::FollowUpQueued {
            count: 2,
            follow_ups,
        } => Some(follow_ups.clone()),
        _ => None,
    })
    .await;
    assert_eq!(announced, ["second", "third"]);
    harness_tests::harness::display_where(&harness, |s| s.queued_follow_ups == ["second", "third"])
        .await;

    gate.release();
    let summary = first.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete);
    assert_eq!(summary.final_text.as_deref(), Some("on it: first (done)"));

    assert_eq!(gate.next_call().await, "second");
    gate.release();
    assert_eq!(gate.next_call().await, "third");
    gate.release();
    let mut runs_ended = 0;
    next_matching(&mut events, |e| {
        runs_ended += usize::from(matches!(e, HarnessEvent::AgentEnd { .. }));
        (runs_ended == 3).then_some(())
    })
    .await;

    let messages = harness.list_messages(None).await.unwrap();
    assert_eq!(
        transcript(&messages),
        [
            "user: first",
            "assistant: on it: first (done)",
            "user: second",
            "assistant: on it: second (done)",
            "user: third",
            "assistant: on it: third (done)",
        ]
    );
    assert!(harness.session().queued_follow_ups().is_empty());
    // Each drained follow-up announced the shorter queue.
    assert_eq!(*queue_sizes.lock().unwrap(), [1, 2, 1, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_runs_at_once_when_idle() {
    let (model, mut gate) = GatedModel::new("gated/one");
    let harness = builder_with(model).build().unwrap();
    let waiter = tokio::spawn({
        let harness = harness.clone();
        async move { harness.follow_up("hello").await }
    });
    assert_eq!(gate.next_call().await, "hello");
    gate.release();
    match waiter.await.unwrap().unwrap() {
        FollowUp::Completed(summary) => assert_eq!(summary.outcome, RunOutcome::Complete),
        other => panic!("expected a completed run, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_from_another_task_stops_the_stream_and_keeps_the_queue() {
    let (model, mut gate) = GatedModel::new("gated/one");
    let harness = builder_with(model).build().unwrap();
    let mut events = harness.subscribe();

    let first = tokio::spawn({
        let harness = harness.clone();
        async move { harness.send_message("long task").await }
    });
    assert_eq!(gate.next_call().await, "long task");
    harness.follow_up("afterwards").await.unwrap();

    tokio::spawn({
        let harness = harness.clone();
        async move { harness.abort() }
    })
    .await
    .unwrap();
    let summary = first.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Aborted);
    let reason = next_matching(&mut events, |e| match e {
        HarnessEvent::AgentEnd { reason, .. } => Some(*reason),
        _ => None,
    })
    .await;
    assert_eq!(reason, AgentEndReason::Aborted);

    // The queued follow-up still runs.
    assert_eq!(gate.next_call().await, "afterwards");
    gate.release();
    next_matching(&mut events, |e| {
        matches!(e, HarnessEvent::AgentEnd { .. }).then_some(())
    })
    .await;
    let messages = transcript(&harness.list_messages(None).await.unwrap());
    assert_eq!(
        messages.first().map(String::as_str),
        Some("user: long task")
    );
    assert!(messages.contains(&"user: afterwards".to_owned()));
    assert_eq!(
        messages.last().map(String::as_str),
        Some("assistant: on it: afterwards (done)")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_aborts_clears_the_queue_and_runs_the_new_message() {
    let (model, mut gate) = GatedModel::new("gated/one");
    let harness = builder_with(model).build().unwrap();

    let first = tokio::spawn({
        let harness = harness.clone();
        async move { harness.send_message("write the parser").await }
    });
    assert_eq!(gate.next_call().await, "write the parser");
    harness.follow_up("then the docs").await.unwrap();

    let steered = tokio::spawn({
        let harness = harness.clone();
        async move { harness.steer("stop, write the lexer first").await }
    });
    assert_eq!(first.await.unwrap().unwrap().outcome, RunOutcome::Aborted);
    assert_eq!(gate.next_call().await, "stop, write the lexer first");
    gate.release();
    let summary = steered.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete);

    let messages = transcript(&harness.list_messages(None).await.unwrap());
    assert!(
        !messages.iter().any(|m| m.contains("then the docs")),
        "{messages:?}"
    );
    assert_eq!(
        messages.last().map(String::as_str),
        Some("assistant: on it: stop, write the lexer first (done)")
    );
    assert!(!harness.session().is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_when_idle_is_a_plain_send() {
    let (model, mut gate) = GatedModel::new("gated/one");
    let harness = builder_with(model).build().unwrap();
    let steered = tokio::spawn({
        let harness = harness.clone();
        async move { harness.steer("go").await }
    });
    assert_eq!(gate.next_call().await, "go");
    gate.release();
    assert_eq!(
        steered.await.unwrap().unwrap().outcome,
        RunOutcome::Complete
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_emits_the_reference_event_sequence_and_the_display_state_follows() {
    let (model, mut gate) = GatedModel::new("gated/one");
    let harness = builder_with(model).build().unwrap();
    let mut events = harness.subscribe();
    let mut snapshots = harness.subscribe_display_state();

    let run = tokio::spawn({
        let harness = harness.clone();
        async move { harness.send_message("hi").await }
    });
    gate.next_call().await;
    // The run start flushes the display state at once.
    loop {
        let snapshot = futures_util::StreamExt::next(&mut snapshots).await.unwrap();
        if snapshot.is_running {
            break;
        }
    }
    let streaming = next_matching(&mut events, |e| match e {
        HarnessEvent::MessageStart { message }
            if message.role == harness_core::event::MessageRole::Assistant =>
        {
            Some(Arc::clone(message))
        }
        _ => None,
    })
    .await;
    // A streamed message starts empty; its text comes in deltas.
    assert_eq!(streaming.text(), "");
    let delta = next_matching(&mut events, |e| match e {
        HarnessEvent::MessageDelta {
            message_id,
            part,
            delta,
            ..
        } => Some((message_id.to_string(), *part, delta.clone())),
        _ => None,
    })
    .await;
    assert_eq!(delta, (streaming.id.clone(), 0, "on it: hi".to_owned()));
    gate.release();
    run.await.unwrap().unwrap();

    let kinds: Vec<&str> = drain(&mut events).iter().map(|e| e.kind()).collect();
    assert!(kinds.contains(&"usage_update"), "{kinds:?}");
    let wanted = ["message_end", "agent_end"];
    let mut at = 0;
    for kind in &kinds {
        if at < wanted.len() && *kind == wanted[at] {
            at += 1;
        }
    }
    assert_eq!(
        at,
        wanted.len(),
        "expected {wanted:?} in order within {kinds:?}"
    );

    harness.events().flush_display_state();
    let state = harness.display_state();
    assert!(!state.is_running);
    assert_eq!(state.token_usage.input_tokens, 100);
    assert_eq!(state.token_usage.output_tokens, 10);
    assert_eq!(harness.session().token_usage().input_tokens, 100);
}
