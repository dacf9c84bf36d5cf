#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Observational memory in a running harness, with scripted agent, observer and reflector
//! models: the threshold, buffering ahead of it, the idle and provider-change triggers, the
//! exactly-once invariant over randomized conversations, reflection retry bounds, clones,
//! failures and a restart on SQLite.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use harness_core::event::{Delivery, HarnessEvent, OmRole, OmTrigger, Subscription};
use harness_core::harness::{CloneOptions, Harness, HarnessBuilder, Mode, RunOutcome};
use harness_core::model::{Model, ModelError, ModelId, ModelRequest, Scripted, ScriptedModel};
use harness_core::store::SqliteStore;
use harness_core::tool::{ToolError, tool_fn};
use harness_om::{
    CONTINUE_FROM_MEMORY, IdleTrigger, ObservationalMemory, OmConfig, OmRetry, TokenCounter,
};
use harness_tags::tags::{LifecycleFailureTag, MemoryContextTag};
use harness_tags::{
    BaseCtx, FailureReason, KernelMessage, LifecycleFailure, MemoryContext, MemoryCtx,
};
use harness_tests::harness;
use serde_json::{Value, json};

/// `count` filler words (about one token each), after a marker.
fn text(marker: &str, count: usize) -> String {
    const WORDS: [&str; 8] = [
        "alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "field",
    ];
    let mut text = String::from(marker);
    for i in 0..count {
        text.push(' ');
        text.push_str(WORDS[i % WORDS.len()]);
    }
    text
}

/// Markers (`M3`, `T0`, ...) in a text.
fn markers(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| {
            w.len() > 1
                && (w.starts_with('M') || w.starts_with('T'))
                && w[1..].bytes().all(|b| b.is_ascii_digit())
        })
        .map(str::to_owned)
        .collect()
}

/// A model that answers every request with `answer(request)`.
fn responder(
    id: &str,
    answer: impl Fn(&ModelRequest) -> Scripted + Send + Sync + 'static,
) -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new(id)
            .then(Scripted::Respond(Arc::new(answer)))
            .cycling(),
    )
}

/// An observer that writes one line naming the markers of the messages it was given.
fn marker_observer(id: &str) -> Arc<ScriptedModel> {
    responder(id, |request| {
        let input = request
            .messages
            .last()
            .map(KernelMessage::content)
            .unwrap_or_default();
        let new = input
            .split("New messages to observe:")
            .nth(1)
            .unwrap_or_default();
        let seen = markers(new).join(" ");
        Scripted::text(format!(
            "<observations>\nDate: 2026-11-22\n- 10:00 [medium] saw {seen}\n</observations>\n<current-task>testing</current-task>"
        ))
    })
}

struct Models {
    by_id: HashMap<String, Arc<ScriptedModel>>,
}

impl Models {
    fn new(models: impl IntoIterator<Item = Arc<ScriptedModel>>) -> Arc<Self> {
        Arc::new(Models {
            by_id: models
                .into_iter()
                .map(|m| (m.id().to_string(), m))
                .collect(),
        })
    }

    fn resolver(
        self: &Arc<Self>,
    ) -> impl Fn(&ModelId) -> Result<Arc<dyn Model>, ModelError> + Send + Sync + 'static {
        let models = Arc::clone(self);
        move |id| {
            models
                .by_id
                .get(id.as_str())
                .map(|m| Arc::clone(m) as Arc<dyn Model>)
                .ok_or_else(|| ModelError::UnknownModel(id.to_string()))
        }
    }
}

fn harness_with(models: &Arc<Models>, memory: &ObservationalMemory) -> HarnessBuilder {
    Harness::builder("om-test")
        .mode(Mode::new("build").default_model("test/agent"))
        .model_resolver(models.resolver())
        .plugin(memory.clone())
        .interactive(false)
}

fn config(threshold: u64) -> OmConfig {
    OmConfig {
        observer_model: Some("test/observer".into()),
        reflector_model: Some("test/reflector".into()),
        observation_threshold: threshold,
        reflection_threshold: 1_000_000,
        idle: IdleTrigger::Off,
        retry: OmRetry {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_total_wait: Duration::from_millis(50),
        },
        ..OmConfig::default()
    }
}

fn ack_agent() -> Arc<ScriptedModel> {
    responder("test/agent", |_| Scripted::text("ack"))
}

/// Every event currently on the subscription, without waiting.
fn drain(events: &mut Subscription) -> Vec<HarnessEvent> {
    harness::drain(events)
        .iter()
        .map(|envelope| envelope.event.clone())
        .collect()
}

async fn wait_for(
    events: &mut Subscription,
    wanted: impl Fn(&HarnessEvent) -> bool,
) -> HarnessEvent {
    harness::wait_for(events, wanted).await.event.clone()
}

fn memory_of(request: &ModelRequest) -> Option<&str> {
    request
        .system
        .find("<memory>")
        .map(|at| &request.system[at..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_past_the_threshold_is_observed_and_the_context_shrinks() {
    let document = text("DOC", 4_150);
    let document_tokens = TokenCounter::global().count(&document);
    assert!(
        (4_000..4_400).contains(&document_tokens),
        "{document_tokens}"
    );

    let agent = Arc::new(
        ScriptedModel::new("test/agent")
            .then(Scripted::tool_call("read_doc", json!({})))
            .then(Scripted::text("The design doc is about a river.")),
    );
    let models = Models::new([agent.clone(), marker_observer("test/observer")]);
    let memory = ObservationalMemory::new(config(3_000)).unwrap();
    let contexts: Arc<Mutex<Vec<MemoryContext>>> = Arc::default();
    let harness = harness_with(&models, &memory)
        .tool(tool_fn(
            "read_doc",
            "Reads the design doc.",
            move |_: Value, _| {
                let document = document.clone();
                async move { Ok::<_, ToolError>(document) }
            },
        ))
        .compose({
            let contexts = Arc::clone(&contexts);
            move |c| {
                c.tap(
                    MemoryContextTag,
                    move |context: &MemoryContext, _: &MemoryCtx| {
                        contexts.lock().unwrap().push(context.clone())
                    },
                )
            }
        })
        .build()
        .unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    let summary = harness
        .send_message("Read the design doc, please")
        .await
        .unwrap();
    assert_eq!(
        summary.final_text.as_deref(),
        Some("The design doc is about a river.")
    );

    let requests = agent.requests();
    assert!(
        memory_of(&requests[0]).is_none(),
        "nothing to observe before the document"
    );
    let after = &requests[1];
    let memory_text = memory_of(after).expect("the second call carries the memory");
    assert!(
        memory_text.contains("saw DOC") || memory_text.contains("[medium] saw"),
        "{memory_text}"
    );
    assert!(
        !after
            .messages
            .iter()
            .any(|m| m.content().contains("DOC alpha")),
        "the raw document is gone"
    );
    assert_eq!(*after.messages, [KernelMessage::user(CONTINUE_FROM_MEMORY)]);
    let context_tokens: u64 = TokenCounter::global().count(&after.system)
        + after
            .messages
            .iter()
            .map(|m| TokenCounter::global().count_message(m))
            .sum::<u64>();
    assert!(
        context_tokens < 500,
        "the context shrank from over 4,200 tokens to {context_tokens}"
    );

    let seen = drain(&mut events);
    let activation = seen.iter().find_map(|e| match e {
        HarnessEvent::OmActivation {
            triggered_by,
            activated_tokens,
        } => Some((*triggered_by, *activated_tokens)),
        _ => None,
    });
    let (trigger, activated) = activation.expect("om_activation");
    assert_eq!(trigger, OmTrigger::Threshold);
    assert!(activated >= document_tokens, "{activated}");
    assert!(seen.iter().any(|e| matches!(
        e,
        HarnessEvent::OmObservationEnd {
            observed_messages: 3,
            ..
        }
    )));
    assert_eq!(
        contexts.lock().unwrap().len(),
        1,
        "memory.context was emitted for the call with memory"
    );
    let record = memory.record().await.unwrap().unwrap();
    assert_eq!(record.observed_count, 3);
    assert_eq!(record.current_task.as_deref(), Some("testing"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffering_runs_ahead_so_activation_needs_no_observer_call() {
    let observer = marker_observer("test/observer");
    let models = Models::new([ack_agent(), observer.clone()]);
    let memory = ObservationalMemory::new(OmConfig {
        keep_recent: 0.4,
        ..config(1_000)
    })
    .unwrap();
    let harness = harness_with(&models, &memory).build().unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    let mut buffered_before_activation = 0;
    let mut activation = None;
    for turn in 0..20 {
        harness
            .send_message(text(&format!("M{turn}"), 120))
            .await
            .unwrap();
        // Background passes started by this turn finish before the next one (deterministic).
        let mut running = 0;
        let mut pending = drain(&mut events);
        loop {
            for event in pending.drain(..) {
                match event {
                    HarnessEvent::OmBufferingStart { .. } => running += 1,
                    HarnessEvent::OmBufferingEnd { tokens, .. } => {
                        running -= 1;
                        if activation.is_none() && tokens > 0 {
                            buffered_before_activation += 1;
                        }
                    }
                    HarnessEvent::OmBufferingFailed { error, .. } => {
                        panic!("buffering failed: {error}")
                    }
                    HarnessEvent::OmActivation { triggered_by, .. } => {
                        activation = Some(triggered_by)
                    }
                    HarnessEvent::OmObservationStart { .. } => {
                        panic!("activation called the observer synchronously")
                    }
                    _ => {}
                }
            }
            if running == 0 {
                break;
            }
            match events.next().await {
                Some(Delivery::Event(event)) => pending.push(event.event.clone()),
                Some(_) => {}
                None => panic!("the event stream ended"),
            }
        }
        if activation.is_some() {
            break;
        }
    }
    assert_eq!(activation, Some(OmTrigger::Threshold));
    assert!(
        buffered_before_activation >= 2,
        "chunks were buffered ahead: {buffered_before_activation}"
    );
    let record = memory.record().await.unwrap().unwrap();
    assert!(record.observed_count > 0 && record.has_memory());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_thread_is_observed_once_its_cache_expired() {
    let now = Arc::new(AtomicI64::new(1_800_000_000_000));
    let clock = Arc::clone(&now);
    let models = Models::new([ack_agent(), marker_observer("test/observer")]);
    let memory = ObservationalMemory::new(OmConfig {
        idle: IdleTrigger::Auto,
        ..config(10_000)
    })
    .unwrap()
    .with_clock(move || clock.load(Ordering::SeqCst));
    let harness = harness_with(&models, &memory).build().unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    harness.send_message(text("M0", 2_100)).await.unwrap();
    harness.send_message(text("M1", 10)).await.unwrap();
    // Buffering may have started on the large message; let it end.
    for event in drain(&mut events) {
        assert!(
            !matches!(event, HarnessEvent::OmActivation { .. }),
            "no activation while the cache is warm"
        );
    }
    // Four minutes later: still warm (5 minutes for this provider).
    now.fetch_add(4 * 60_000, Ordering::SeqCst);
    harness.send_message(text("M2", 10)).await.unwrap();
    assert!(
        !drain(&mut events)
            .iter()
            .any(|e| matches!(e, HarnessEvent::OmActivation { .. }))
    );
    // Six minutes after the last call: expired.
    now.fetch_add(6 * 60_000, Ordering::SeqCst);
    harness.send_message(text("M3", 10)).await.unwrap();
    let activation = drain(&mut events).into_iter().find_map(|e| match e {
        HarnessEvent::OmActivation { triggered_by, .. } => Some(triggered_by),
        _ => None,
    });
    assert_eq!(activation, Some(OmTrigger::Ttl));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_change_triggers_observation() {
    let other = responder("other/agent", |_| Scripted::text("ack from elsewhere"));
    let models = Models::new([ack_agent(), other.clone(), marker_observer("test/observer")]);
    let memory = ObservationalMemory::new(config(10_000)).unwrap();
    let harness = harness_with(&models, &memory).build().unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    harness.send_message(text("M0", 2_100)).await.unwrap();
    assert!(
        !drain(&mut events)
            .iter()
            .any(|e| matches!(e, HarnessEvent::OmActivation { .. }))
    );
    harness.switch_model("other/agent").await.unwrap();
    harness.send_message(text("M1", 10)).await.unwrap();
    let activation = drain(&mut events).into_iter().find_map(|e| match e {
        HarnessEvent::OmActivation { triggered_by, .. } => Some(triggered_by),
        _ => None,
    });
    assert_eq!(activation, Some(OmTrigger::ProviderChange));
    assert!(
        memory_of(&other.requests()[0]).is_some(),
        "the new provider got the compact picture"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_retries_are_bounded_and_never_loop() {
    let reflector_calls = Arc::new(AtomicUsize::new(0));
    let calls = Arc::clone(&reflector_calls);
    let stubborn = responder("test/reflector", move |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        Scripted::text(format!("<observations>{}</observations>", text("R", 400)))
    });
    // Observations of about 300 tokens each.
    let verbose = responder("test/observer", |_| {
        Scripted::text(format!("<observations>{}</observations>", text("O", 300)))
    });
    let models = Models::new([ack_agent(), verbose, stubborn]);
    let memory = ObservationalMemory::new(OmConfig {
        reflection_threshold: 100,
        reflection_attempts: 3,
        ..config(500)
    })
    .unwrap();
    let harness = harness_with(&models, &memory).build().unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    harness.send_message(text("M0", 700)).await.unwrap();
    let seen = drain(&mut events);
    assert!(
        seen.iter()
            .any(|e| matches!(e, HarnessEvent::OmActivation { .. }))
    );
    assert_eq!(
        reflector_calls.load(Ordering::SeqCst),
        3,
        "three attempts, then it gives up"
    );
    let failures = seen
        .iter()
        .filter(|e| matches!(e, HarnessEvent::OmReflectionFailed { .. }))
        .count();
    assert_eq!(failures, 3);
    // The next call does not try again: the observations did not grow.
    harness.send_message(text("M1", 10)).await.unwrap();
    assert_eq!(reflector_calls.load(Ordering::SeqCst), 3);
    let record = memory.record().await.unwrap().unwrap();
    assert_eq!(record.generation, 0);
    assert!(
        record.reflection.is_none(),
        "a reflection that does not shrink is not applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflection_that_shrinks_replaces_the_observations() {
    let compact = responder("test/reflector", |_| {
        Scripted::text(
            "<observations>Date: 2026-11-22\n- 10:00 [done] everything so far</observations>",
        )
    });
    let verbose = responder("test/observer", |_| {
        Scripted::text(format!("<observations>{}</observations>", text("O", 300)))
    });
    let models = Models::new([ack_agent(), verbose, compact]);
    let memory = ObservationalMemory::new(OmConfig {
        reflection_threshold: 100,
        ..config(500)
    })
    .unwrap();
    let harness = harness_with(&models, &memory).build().unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();
    harness.send_message(text("M0", 700)).await.unwrap();
    let end = drain(&mut events).into_iter().find_map(|e| match e {
        HarnessEvent::OmReflectionEnd {
            generation_count,
            observation_tokens,
            ..
        } => Some((generation_count, observation_tokens)),
        _ => None,
    });
    let (generation, tokens) = end.expect("om_reflection_end");
    assert_eq!(generation, 1);
    assert!(tokens < 100);
    let record = memory.record().await.unwrap().unwrap();
    assert!(record.observations.is_empty());
    assert!(
        record
            .reflection
            .unwrap()
            .contains("[done] everything so far")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_carries_the_memory_with_renamed_message_ids() {
    let agent = ack_agent();
    let models = Models::new([agent.clone(), marker_observer("test/observer")]);
    let memory = ObservationalMemory::new(config(500)).unwrap();
    let harness = harness_with(&models, &memory).build().unwrap();
    harness.init().await.unwrap();
    harness.send_message(text("M0", 700)).await.unwrap();
    let source = memory.record().await.unwrap().unwrap();
    assert!(source.observed_count > 0);
    let source_messages = harness.list_messages(None).await.unwrap();

    harness.clone_thread(CloneOptions::default()).await.unwrap();
    let copy = memory
        .record()
        .await
        .unwrap()
        .expect("the clone has memory");
    let clone_messages = harness.list_messages(None).await.unwrap();
    let last = source.observed_count as usize - 1;
    assert_eq!(
        source.last_observed_id.as_deref(),
        Some(source_messages[last].id.as_str())
    );
    assert_eq!(
        copy.last_observed_id.as_deref(),
        Some(clone_messages[last].id.as_str())
    );
    assert_eq!(copy.observations, source.observations);

    harness.send_message(text("M1", 10)).await.unwrap();
    let request = agent.requests().last().cloned().unwrap();
    assert!(memory_of(&request).unwrap().contains("saw M0"));
    assert!(
        !request
            .messages
            .iter()
            .any(|m| m.content().starts_with("M0"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_observer_fails_the_run_cleanly_and_loses_nothing() {
    let healthy = Arc::new(AtomicUsize::new(0));
    let flag = Arc::clone(&healthy);
    let observer = responder("test/observer", move |request| {
        if flag.load(Ordering::SeqCst) == 0 {
            Scripted::Error(ModelError::Unavailable {
                provider: "test".into(),
                status: 529,
                message: "observer overloaded".into(),
                retry_after: None,
            })
        } else {
            let input = request
                .messages
                .last()
                .map(KernelMessage::content)
                .unwrap_or_default();
            let new = input
                .split("New messages to observe:")
                .nth(1)
                .unwrap_or_default();
            Scripted::text(format!(
                "<observations>- 10:00 [low] saw {}</observations>",
                markers(new).join(" ")
            ))
        }
    });
    let failures: Arc<Mutex<Vec<LifecycleFailure>>> = Arc::default();
    let models = Models::new([ack_agent(), observer.clone()]);
    let memory = ObservationalMemory::new(config(500)).unwrap();
    let harness = harness_with(&models, &memory)
        .compose({
            let failures = Arc::clone(&failures);
            move |c| {
                c.tap(
                    LifecycleFailureTag,
                    move |f: &LifecycleFailure, _: &BaseCtx| {
                        failures.lock().unwrap().push(f.clone())
                    },
                )
            }
        })
        .build()
        .unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();

    let summary = harness.send_message(text("M0", 700)).await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Error);
    assert!(
        summary
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("observer overloaded"),
        "{summary:?}"
    );
    let failed = drain(&mut events)
        .iter()
        .filter(|e| matches!(e, HarnessEvent::OmObservationFailed { .. }))
        .count();
    assert_eq!(failed, 3, "bounded retries");
    assert_eq!(
        failures.lock().unwrap().last().map(|f| f.reason),
        Some(FailureReason::OmFailure)
    );
    assert!(
        memory
            .record()
            .await
            .unwrap()
            .is_none_or(|r| r.observed_count == 0)
    );

    // Once the observer is back, the same messages are observed, once.
    healthy.store(1, Ordering::SeqCst);
    let summary = harness.send_message(text("M1", 10)).await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete);
    let record = memory.record().await.unwrap().unwrap();
    let seen: Vec<String> = record
        .observations
        .iter()
        .flat_map(|o| markers(o))
        .collect();
    assert_eq!(seen.iter().filter(|m| *m == "M0").count(), 1, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_and_memory_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");
    let agent = ack_agent();
    let models = Models::new([
        agent.clone(),
        marker_observer("test/observer"),
        marker_observer("test/observer-two"),
    ]);

    let thread_id = {
        let memory = ObservationalMemory::new(config(40_000)).unwrap();
        let harness = harness_with(&models, &memory)
            .sqlite(SqliteStore::open(&db).unwrap())
            .build()
            .unwrap();
        harness.init().await.unwrap();
        let thread = harness.create_thread(None).await.unwrap();
        memory
            .set_thresholds(Some(500), Some(90_000))
            .await
            .unwrap();
        let mut events = harness.subscribe();
        memory
            .switch_model(OmRole::Observer, "test/observer-two")
            .await
            .unwrap();
        let changed = wait_for(&mut events, |e| {
            matches!(e, HarnessEvent::OmModelChanged { .. })
        })
        .await;
        assert!(matches!(
            changed,
            HarnessEvent::OmModelChanged {
                role: OmRole::Observer,
                ..
            }
        ));
        harness.send_message(text("M0", 700)).await.unwrap();
        assert!(memory.record().await.unwrap().unwrap().observed_count > 0);
        harness.destroy().await;
        thread.id
    };

    let memory = ObservationalMemory::new(config(40_000)).unwrap();
    let harness = harness_with(&models, &memory)
        .sqlite(SqliteStore::open(&db).unwrap())
        .build()
        .unwrap();
    harness.init().await.unwrap();
    harness.switch_thread(&thread_id).await.unwrap();
    let settings = memory.settings().await.unwrap();
    assert_eq!(settings.observation_threshold, Some(500));
    assert_eq!(settings.reflection_threshold, Some(90_000));
    assert_eq!(
        memory.model_id(OmRole::Observer).await.unwrap().as_deref(),
        Some("test/observer-two")
    );
    let progress = memory.load_progress().await.unwrap();
    assert_eq!(progress.threshold, 500);
    assert!(progress.observation_tokens > 0);

    harness.send_message(text("M1", 10)).await.unwrap();
    let request = agent.requests().last().cloned().unwrap();
    assert!(
        memory_of(&request).unwrap().contains("saw M0"),
        "the memory came back with the thread"
    );
}

mod exactly_once {
    use super::*;
    use proptest::prelude::*;

    /// Checks one request: every marker of the conversation so far appears exactly once,
    /// raw or in the memory.
    fn check(request: &ModelRequest, user_turns: usize, tool_results: usize) -> Result<(), String> {
        let mut seen: Vec<String> = markers(memory_of(request).unwrap_or_default());
        for message in request.messages.iter() {
            seen.extend(markers(&harness_om::message_text(message)));
        }
        let mut expected: Vec<String> = (0..user_turns).map(|i| format!("M{i}")).collect();
        expected.extend((0..tool_results).map(|i| format!("T{i}")));
        seen.sort();
        expected.sort();
        if seen == expected {
            Ok(())
        } else {
            Err(format!("expected {expected:?}, the model got {seen:?}"))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

        #[test]
        fn every_message_reaches_the_model_exactly_once(
            threshold in 200u64..1_500,
            buffer_interval in 0.1f64..0.6,
            keep_recent in 0.0f64..0.6,
            turns in proptest::collection::vec((5usize..500, any::<bool>()), 4..14),
        ) {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            let outcome: Result<(), String> = runtime.block_on(async move {
                let tool_count = Arc::new(AtomicUsize::new(0));
                let counter = Arc::clone(&tool_count);
                // On a fetching turn the agent calls `fetch` once, then acknowledges. The turn
                // decides rather than the user's text, which memory may have observed already.
                let fetch_next = Arc::new(AtomicBool::new(false));
                let fetching = Arc::clone(&fetch_next);
                let agent = responder("test/agent", move |_| {
                    if fetching.swap(false, Ordering::SeqCst) {
                        Scripted::tool_call("fetch", json!({}))
                    } else {
                        Scripted::text("ack")
                    }
                });
                let models = Models::new([agent.clone(), marker_observer("test/observer")]);
                let memory = ObservationalMemory::new(OmConfig { buffer_interval, keep_recent, ..config(threshold) }).unwrap();
                let harness = harness_with(&models, &memory)
                    .tool(tool_fn("fetch", "Fetches.", move |_: Value, _| {
                        let n = counter.fetch_add(1, Ordering::SeqCst);
                        async move { Ok::<_, ToolError>(text(&format!("T{n}"), 150)) }
                    }))
                    .build()
                    .unwrap();
                harness.init().await.unwrap();
                let mut checked = 0;
                for (turn, (size, fetch)) in turns.iter().enumerate() {
                    fetch_next.store(*fetch, Ordering::SeqCst);
                    harness.send_message(text(&format!("M{turn}"), *size)).await.map_err(|e| e.to_string())?;
                    let requests = agent.requests();
                    let tools_before = tool_count.load(Ordering::SeqCst) - usize::from(*fetch);
                    for (index, request) in requests.iter().enumerate().skip(checked) {
                        // The second call of a fetching turn also carries the tool's result.
                        let tools = tools_before + usize::from(*fetch && index + 1 == requests.len() && requests.len() - checked == 2);
                        check(request, turn + 1, tools)?;
                    }
                    checked = requests.len();
                }
                harness.destroy().await;
                Ok(())
            });
            prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
        }
    }
}
