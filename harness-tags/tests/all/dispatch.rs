//! Dispatch semantics of the compiled pipeline: patterns and ordering, flows, failure
//! policies, panics, tower layers, taps and their bounded queues, plugins.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_tags::Phase;
use harness_tags::prelude::*;
use harness_tags::{
    BuildError, EmitError, EmitOutcome, FailureKind, FailurePolicy, HandlerFailure, Pattern,
    TagRequest, TapOverflow, TapQueueConfig, on, on_async, on_json, on_service, tap_async,
};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tower::ServiceExt;
use tower::timeout::TimeoutLayer;

/// A tag under `demo` with a nested namespace, to exercise `.*` against `.**`.
#[derive(Tag)]
#[tag(name = "demo.nested.beta", phase = Act, payload = String, ctx = BaseCtx, suppressible)]
pub(crate) struct DemoNestedBeta;

/// A tag directly under `demo`.
#[derive(Tag)]
#[tag(name = "demo.alpha", phase = Think, payload = String, ctx = BaseCtx)]
pub(crate) struct DemoAlpha;

type Failures = Arc<Mutex<Vec<HandlerFailure>>>;

fn sink() -> (Failures, impl Fn(&HandlerFailure) + Send + Sync + 'static) {
    let failures: Failures = Arc::default();
    let clone = Arc::clone(&failures);
    (failures, move |failure: &HandlerFailure| {
        clone.lock().unwrap().push(failure.clone())
    })
}

fn ctx() -> BaseCtx {
    BaseCtx {
        strategy: "react".into(),
        ..BaseCtx::default()
    }
}

fn append_json(suffix: &'static str) -> impl Fn(&Value, &harness_tags::TagInfo<'_>) -> Value {
    move |payload, _| Value::String(format!("{}>{suffix}", payload.as_str().unwrap()))
}

async fn emit_string<T: Tag<Payload = String, Ctx = BaseCtx>>(
    pipeline: &Pipeline,
    payload: &str,
) -> Result<EmitOutcome<String>, EmitError> {
    pipeline.emit::<T>(payload.to_owned(), &ctx()).await
}

#[tokio::test]
async fn handlers_run_broad_to_narrow_then_in_registration_order() {
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on(DemoNestedBeta, |s: &String, _: &BaseCtx| format!("{s}>E1"))
                .on_json("demo.**", append_json("D"))
                .on_json("**", append_json("A"))
                .on_json("demo.nested.*", append_json("S"))
                .on_json(
                    Pattern::predicate(|tag| tag.name().ends_with("beta")),
                    append_json("P"),
                )
                .on_json("demo.nested.beta", append_json("J"))
                .on(DemoNestedBeta, |s: &String, _: &BaseCtx| format!("{s}>E2"))
        })
        .build()
        .unwrap();
    let outcome = emit_string::<DemoNestedBeta>(&pipeline, "x").await.unwrap();
    assert_eq!(
        outcome,
        EmitOutcome::Continue("x>A>D>S>P>E1>J>E2".to_owned())
    );
}

#[tokio::test]
async fn each_pattern_form_selects_its_tags() {
    let seen: Arc<Mutex<Vec<(String, &'static str)>>> = Arc::default();
    let record = |pattern: &'static str| {
        let seen = Arc::clone(&seen);
        move |_: &Value, info: &harness_tags::TagInfo<'_>| {
            seen.lock().unwrap().push((pattern.to_owned(), info.name()));
        }
    };
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.tap_json("demo.alpha", record("demo.alpha"))
                .tap_json("demo.*", record("demo.*"))
                .tap_json("demo.**", record("demo.**"))
                .tap_json("**", record("**"))
                .tap_json(
                    Pattern::predicate(|tag| tag.phase() == Phase::Act),
                    record("act"),
                )
        })
        .build()
        .unwrap();
    emit_string::<DemoAlpha>(&pipeline, "a").await.unwrap();
    emit_string::<DemoNestedBeta>(&pipeline, "b").await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let for_tag = |name: &str| -> Vec<String> {
        seen.iter()
            .filter(|(_, tag)| *tag == name)
            .map(|(p, _)| p.clone())
            .collect()
    };
    assert_eq!(
        for_tag("demo.alpha"),
        ["demo.alpha", "demo.*", "demo.**", "**"]
    );
    assert_eq!(for_tag("demo.nested.beta"), ["demo.**", "**", "act"]);
}

#[tokio::test]
async fn an_invalid_pattern_is_a_build_error_naming_the_handler() {
    let error = Pipeline::builder()
        .compose(|c| {
            c.register(
                on_json("demo.**.x", |_: &Value, _: &harness_tags::TagInfo<'_>| {
                    Flow::Keep
                })
                .named("bad"),
            )
        })
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::InvalidPattern { .. }));
    assert!(
        error.to_string().contains("bad") && error.to_string().contains("demo.**.x"),
        "{error}"
    );
}

#[tokio::test]
async fn a_tag_without_handlers_returns_its_payload_synchronously() {
    let pipeline = Pipeline::builder().build().unwrap();
    assert!(!pipeline.has_handlers::<PromptSystem>());
    let outcome = pipeline
        .emit::<PromptSystem>("sys".to_owned(), &ctx())
        .now()
        .unwrap();
    assert_eq!(outcome.unwrap(), EmitOutcome::Continue("sys".to_owned()));
}

#[tokio::test]
async fn returning_none_or_keep_leaves_the_payload_and_results_convert() {
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on(PromptSystem, |_: &String, _: &BaseCtx| None::<String>)
                .on(PromptSystem, |_: &String, _: &BaseCtx| Flow::<String>::Keep)
                .on(PromptSystem, |s: &String, _: &BaseCtx| {
                    Ok::<_, String>(format!("{s}!"))
                })
                .on(PromptSystem, |s: &String, _: &BaseCtx| {
                    Ok::<_, std::io::Error>(Some(format!("{s}?")))
                })
        })
        .build()
        .unwrap();
    let outcome = emit_string::<PromptSystem>(&pipeline, "hi").await.unwrap();
    assert_eq!(outcome.into_payload().unwrap(), "hi!?");
}

#[tokio::test]
async fn suppress_at_a_typed_handler_stops_the_emit_and_skips_taps() {
    let tapped = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&tapped);
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.register(
                on(MessageUserTask, |msg: &KernelMessage, _: &BaseCtx| {
                    if msg.content().contains("forbidden") {
                        Flow::Suppress
                    } else {
                        Flow::Keep
                    }
                })
                .named("guard"),
            )
            .on(
                MessageUserTask,
                |_: &KernelMessage, _: &BaseCtx| -> KernelMessage {
                    unreachable!("runs after a suppress")
                },
            )
            .tap(MessageUserTask, move |_: &KernelMessage, _: &BaseCtx| {
                *counter.lock().unwrap() += 1
            })
        })
        .build()
        .unwrap();
    let outcome = pipeline
        .emit::<MessageUserTask>(KernelMessage::user("a forbidden request"), &ctx())
        .await
        .unwrap();
    let EmitOutcome::Suppressed { by } = outcome else {
        panic!("not suppressed: {outcome:?}")
    };
    assert_eq!(by.as_str(), "guard");
    assert_eq!(*tapped.lock().unwrap(), 0);
}

#[tokio::test]
async fn suppress_at_a_json_handler_stops_the_emit() {
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on_json("demo.**", |_: &Value, _: &harness_tags::TagInfo<'_>| {
                Flow::Suppress
            })
        })
        .build()
        .unwrap();
    let outcome = emit_string::<DemoNestedBeta>(&pipeline, "x").await.unwrap();
    assert!(outcome.is_suppressed());
}

#[tokio::test]
async fn suppressing_a_tag_that_cannot_be_suppressed_is_a_failure() {
    let (failures, sink) = sink();
    let pipeline = Pipeline::builder()
        .error_sink(sink)
        .compose(|c| {
            c.on(PromptSystem, |_: &String, _: &BaseCtx| Flow::Suppress)
                .on_json("prompt.*", |_: &Value, _: &harness_tags::TagInfo<'_>| {
                    Flow::Suppress
                })
        })
        .build()
        .unwrap();
    let outcome = emit_string::<PromptSystem>(&pipeline, "sys").await.unwrap();
    assert_eq!(outcome, EmitOutcome::Continue("sys".to_owned()));
    let failures = failures.lock().unwrap();
    assert_eq!(failures.len(), 2);
    assert!(
        failures
            .iter()
            .all(|f| f.kind == FailureKind::NotSuppressible)
    );
}

#[tokio::test]
async fn fail_open_keeps_the_previous_payload_and_reports() {
    let (failures, sink) = sink();
    let pipeline = Pipeline::builder()
        .error_sink(sink)
        .compose(|c| {
            c.on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+1"))
                .register(
                    on(PromptSystem, |_: &String, _: &BaseCtx| {
                        Err::<String, _>("typed boom")
                    })
                    .named("typed"),
                )
                .on(PromptSystem, |_: &String, _: &BaseCtx| {
                    Flow::<String>::fail("flow boom")
                })
                .register(
                    on_json(
                        "prompt.system",
                        |_: &Value, _: &harness_tags::TagInfo<'_>| Err::<Value, _>("json boom"),
                    )
                    .named("json"),
                )
                .on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+2"))
        })
        .build()
        .unwrap();
    let outcome = emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    assert_eq!(outcome.into_payload().unwrap(), "p+1+2");
    let failures = failures.lock().unwrap();
    let messages: Vec<&str> = failures.iter().map(|f| f.error.message()).collect();
    assert_eq!(messages, ["typed boom", "flow boom", "json boom"]);
    assert_eq!(failures[0].handler.as_str(), "typed");
    assert_eq!(failures[1].handler.as_str(), "on prompt.system");
    assert_eq!(failures[2].handler.as_str(), "json");
    assert!(
        failures
            .iter()
            .all(|f| f.kind == FailureKind::Failed && f.policy == FailurePolicy::FailOpen)
    );
    assert!(failures.iter().all(|f| f.tag.name() == "prompt.system"));
}

#[tokio::test]
async fn typed_handlers_behave_alike_on_the_fast_and_the_general_path() {
    // Typed synchronous handlers alone take the fast path; an async handler after them sends
    // the same handlers down the general path.
    for general in [false, true] {
        let (failures, sink) = sink();
        let pipeline = Pipeline::builder()
            .error_sink(sink)
            .compose(|c| {
                let c = c
                    .on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+1"))
                    .on(PromptSystem, |_: &String, _: &BaseCtx| {
                        Flow::<String>::fail("boom")
                    })
                    .on(PromptSystem, |_: &String, _: &BaseCtx| -> String {
                        panic!("bang")
                    })
                    .on(PromptSystem, |_: &String, _: &BaseCtx| Flow::<String>::Keep)
                    .on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+2"));
                if general {
                    c.on_async(
                        PromptSystem,
                        |s: String, _: BaseCtx| async move { s + "+3" },
                    )
                } else {
                    c
                }
            })
            .build()
            .unwrap();
        let outcome = emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
        let expected = if general { "p+1+2+3" } else { "p+1+2" };
        assert_eq!(outcome.into_payload().unwrap(), expected);
        let failures = failures.lock().unwrap();
        let kinds: Vec<_> = failures
            .iter()
            .map(|f| (f.kind, f.error.message()))
            .collect();
        assert_eq!(
            kinds,
            [
                (FailureKind::Failed, "boom"),
                (FailureKind::Panicked, "panicked: bang")
            ]
        );
    }
}

#[tokio::test]
async fn a_json_handler_sees_what_a_typed_handler_before_it_returned() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on_json(
                "prompt.*",
                move |payload: &Value, _: &harness_tags::TagInfo<'_>| {
                    record.lock().unwrap().push(payload.clone());
                    Flow::<Value>::Keep
                },
            )
            .on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+typed"))
            .register(on_json("prompt.system", append_json("json")))
        })
        .build()
        .unwrap();
    let outcome = emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    assert_eq!(outcome.into_payload().unwrap(), "p+typed>json");
    assert_eq!(*seen.lock().unwrap(), [json!("p")]);
}

#[tokio::test]
async fn fail_closed_fails_the_emit_at_typed_and_json_handlers() {
    for json_handler in [false, true] {
        let (failures, sink) = sink();
        let registration: harness_tags::Registration = if json_handler {
            on_json("prompt.*", |_: &Value, _: &harness_tags::TagInfo<'_>| {
                Flow::<Value>::fail("closed")
            })
            .named("redactor")
            .fail_closed()
            .into()
        } else {
            on(PromptSystem, |_: &String, _: &BaseCtx| {
                Flow::<String>::fail("closed")
            })
            .named("redactor")
            .fail_closed()
            .into()
        };
        let pipeline = Pipeline::builder()
            .error_sink(sink)
            .compose(|c| {
                c.register(registration)
                    .on(PromptSystem, |_: &String, _: &BaseCtx| -> String {
                        unreachable!()
                    })
            })
            .build()
            .unwrap();
        let error = emit_string::<PromptSystem>(&pipeline, "secret")
            .await
            .unwrap_err();
        assert_eq!(
            (error.tag(), error.handler().as_str(), error.kind()),
            ("prompt.system", "redactor", FailureKind::Failed)
        );
        assert_eq!(error.failure().error.message(), "closed");
        assert!(error.to_string().contains("failed closed"));
        assert_eq!(
            failures.lock().unwrap()[0].policy,
            FailurePolicy::FailClosed
        );
    }
}

#[tokio::test]
async fn a_json_handler_that_reshapes_validly_changes_the_typed_payload() {
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on_json(
                "message.*",
                |payload: &Value, info: &harness_tags::TagInfo<'_>| {
                    assert_eq!(info.name(), "message.tool-result");
                    assert_eq!(info.ctx::<ToolResultCtx>().unwrap().tool_name, "read_file");
                    let mut payload = payload.clone();
                    payload["content"] = json!("[redacted]");
                    payload
                },
            )
        })
        .build()
        .unwrap();
    let ctx = ToolResultCtx {
        tool_name: "read_file".into(),
        ..ToolResultCtx::default()
    };
    let message = KernelMessage::tool_result("c1", "read_file", "api_key=123", false);
    let outcome = pipeline
        .emit::<MessageToolResult>(message, &ctx)
        .await
        .unwrap();
    assert_eq!(outcome.into_payload().unwrap().content(), "[redacted]");
}

#[tokio::test]
async fn a_json_handler_returning_an_invalid_payload_is_a_handler_failure() {
    let (failures, sink) = sink();
    let pipeline = Pipeline::builder()
        .error_sink(sink)
        .compose(|c| {
            c.on_json("message.tool-result", |_: &Value, _: &harness_tags::TagInfo<'_>| json!({"role": "tool_result", "content": 7}))
        })
        .build()
        .unwrap();
    let message = KernelMessage::tool_result("c1", "read_file", "ok", false);
    let outcome = pipeline
        .emit::<MessageToolResult>(message.clone(), &ToolResultCtx::default())
        .await
        .unwrap();
    assert_eq!(
        outcome.into_payload().unwrap(),
        message,
        "FailOpen keeps the valid payload"
    );
    let failures = failures.lock().unwrap().clone();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].kind, FailureKind::InvalidPayload);
    assert!(
        failures[0]
            .error
            .message()
            .contains("does not match the schema"),
        "{}",
        failures[0].error
    );

    let closed = Pipeline::builder()
        .compose(|c| {
            c.register(
                on_json(
                    "message.tool-result",
                    |_: &Value, _: &harness_tags::TagInfo<'_>| json!("nope"),
                )
                .fail_closed(),
            )
        })
        .build()
        .unwrap();
    let error = closed
        .emit::<MessageToolResult>(message, &ToolResultCtx::default())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), FailureKind::InvalidPayload);
}

#[tokio::test]
async fn a_panicking_handler_is_isolated() {
    let (failures, sink) = sink();
    let pipeline = Pipeline::builder()
        .error_sink(sink)
        .compose(|c| {
            c.on(PromptSystem, |s: &String, _: &BaseCtx| {
                format!("{s}+before")
            })
            .on(PromptSystem, |_: &String, _: &BaseCtx| -> String {
                panic!("handler exploded")
            })
            .on_json(
                "prompt.*",
                |_: &Value, _: &harness_tags::TagInfo<'_>| -> Value { panic!("json exploded") },
            )
            .on_async(PromptSystem, |_: String, _: BaseCtx| async {
                panic!("async exploded") as String
            })
            .tap(PromptSystem, |_: &String, _: &BaseCtx| -> () {
                panic!("tap exploded")
            })
            .on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+after"))
        })
        .build()
        .unwrap();
    let outcome = emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    assert_eq!(outcome.into_payload().unwrap(), "p+before+after");
    let failures = failures.lock().unwrap().clone();
    let messages: Vec<&str> = failures.iter().map(|f| f.error.message()).collect();
    // `prompt.*` is broader than the exact typed handlers, so the JSON handler runs first.
    assert_eq!(
        messages,
        [
            "panicked: json exploded",
            "panicked: handler exploded",
            "panicked: async exploded",
            "panicked: tap exploded"
        ]
    );
    assert!(failures.iter().all(|f| f.kind == FailureKind::Panicked));

    let closed = Pipeline::builder()
        .compose(|c| {
            c.register(
                on(PromptSystem, |_: &String, _: &BaseCtx| -> String {
                    panic!("closed")
                })
                .fail_closed(),
            )
        })
        .build()
        .unwrap();
    let error = emit_string::<PromptSystem>(&closed, "p").await.unwrap_err();
    assert_eq!(error.kind(), FailureKind::Panicked);
}

#[tokio::test]
async fn async_and_service_handlers_reshape_in_order() {
    let service = tower::service_fn(|request: TagRequest<PromptSystem>| async move {
        Ok::<_, std::convert::Infallible>(Flow::Continue(format!("{}+service", request.payload)))
    });
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+sync"))
                .on_async(PromptSystem, |s: String, ctx: BaseCtx| async move {
                    tokio::task::yield_now().await;
                    format!("{s}+async({})", ctx.strategy)
                })
                .register(on_service(PromptSystem, service))
                .on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+last"))
        })
        .build()
        .unwrap();
    let ctx = ctx();
    let emit = pipeline.emit::<PromptSystem>("p".to_owned(), &ctx);
    let emit = emit
        .now()
        .expect_err("an async handler makes the emit asynchronous");
    assert_eq!(
        emit.await.unwrap().into_payload().unwrap(),
        "p+sync+async(react)+service+last"
    );
}

#[tokio::test(start_paused = true)]
async fn a_timeout_layer_bounds_a_slow_async_handler() {
    let (failures, sink) = sink();
    let pipeline = Pipeline::builder()
        .error_sink(sink)
        .compose(|c| {
            c.register(
                on_async(PromptSystem, |s: String, _: BaseCtx| async move {
                    std::future::pending::<()>().await;
                    s
                })
                .named("slow")
                .layer(TimeoutLayer::new(Duration::from_millis(50))),
            )
            .register(
                on(PromptSystem, |s: &String, _: &BaseCtx| {
                    format!("{s}+sync-wrapped")
                })
                .layer(TimeoutLayer::new(Duration::from_millis(50))),
            )
        })
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let outcome = emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    assert_eq!(outcome.into_payload().unwrap(), "p+sync-wrapped");
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    let failures = failures.lock().unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].handler.as_str(), "slow");
    assert!(failures[0].error.is::<tower::timeout::error::Elapsed>());
}

#[tokio::test]
async fn taps_see_the_final_payload_after_every_on_handler() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (sync_seen, async_seen, json_seen) =
        (Arc::clone(&seen), Arc::clone(&seen), Arc::clone(&seen));
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.tap(PromptSystem, move |s: &String, _: &BaseCtx| {
                sync_seen.lock().unwrap().push(format!("sync:{s}"))
            })
            .tap_async(PromptSystem, move |s: String, _: BaseCtx| {
                let seen = Arc::clone(&async_seen);
                async move { seen.lock().unwrap().push(format!("async:{s}")) }
            })
            .tap_json(
                "prompt.*",
                move |v: &Value, _: &harness_tags::TagInfo<'_>| {
                    json_seen
                        .lock()
                        .unwrap()
                        .push(format!("json:{}", v.as_str().unwrap()));
                },
            )
            // Registered after the taps, still runs before them.
            .on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}+final"))
        })
        .build()
        .unwrap();
    let outcome = emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    assert_eq!(
        outcome.into_payload().unwrap(),
        "p+final",
        "taps cannot change the payload"
    );
    pipeline.flush_taps().await;
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, ["async:p+final", "json:p+final", "sync:p+final"]);
}

/// A tap that reports when it starts and then waits for the test to release it.
fn gated_tap(config: TapQueueConfig) -> (Pipeline, mpsc::UnboundedReceiver<String>, Arc<Notify>) {
    let (started_tx, started_rx) = mpsc::unbounded_channel();
    let gate = Arc::new(Notify::new());
    let release = Arc::clone(&gate);
    let pipeline = Pipeline::builder()
        .compose(move |c| {
            c.register(
                tap_async(PromptSystem, move |s: String, _: BaseCtx| {
                    let started = started_tx.clone();
                    let gate = Arc::clone(&gate);
                    async move {
                        started.send(s).unwrap();
                        gate.notified().await;
                    }
                })
                .named("gated")
                .queue(config),
            )
        })
        .build()
        .unwrap();
    (pipeline, started_rx, release)
}

#[tokio::test]
async fn a_full_tap_queue_drops_and_counts_under_the_drop_policy() {
    let config = TapQueueConfig {
        capacity: 1,
        overflow: TapOverflow::Drop,
    };
    let (pipeline, mut started, gate) = gated_tap(config);
    emit_string::<PromptSystem>(&pipeline, "1").await.unwrap();
    assert_eq!(
        started.recv().await.unwrap(),
        "1",
        "the worker holds request 1"
    );
    // Request 2 fills the queue; request 3 finds it full and is dropped, without waiting.
    let ctx = ctx();
    let second = pipeline.emit::<PromptSystem>("2".to_owned(), &ctx).now();
    assert!(
        second.is_ok(),
        "a queue with room never makes the emit wait"
    );
    let third = pipeline.emit::<PromptSystem>("3".to_owned(), &ctx).now();
    assert!(third.is_ok(), "the drop policy never makes the emit wait");
    let stats = &pipeline.tap_stats()[0];
    assert_eq!((stats.dropped, stats.pending), (1, 2));
    assert_eq!(stats.handler.as_str(), "gated");

    gate.notify_one();
    assert_eq!(started.recv().await.unwrap(), "2");
    gate.notify_one();
    pipeline.flush_taps().await;
    let stats = &pipeline.tap_stats()[0];
    assert_eq!((stats.delivered, stats.dropped, stats.pending), (2, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_full_tap_queue_waits_with_backpressure_within_its_bound() {
    let config = TapQueueConfig {
        capacity: 1,
        overflow: TapOverflow::Wait(Duration::from_secs(5)),
    };
    let (pipeline, mut started, gate) = gated_tap(config);
    emit_string::<PromptSystem>(&pipeline, "1").await.unwrap();
    assert_eq!(started.recv().await.unwrap(), "1");
    emit_string::<PromptSystem>(&pipeline, "2").await.unwrap();

    // The queue is full: the tag's tower service is not ready, and an emit has to wait.
    let mut service = pipeline.service::<PromptSystem>();
    assert!(
        futures_util::poll!(std::future::poll_fn(|cx| tower::Service::poll_ready(
            &mut service,
            cx
        )))
        .is_pending()
    );
    // A service that reported "not ready" holds its place in line until it is polled or dropped.
    drop(service);
    let ctx = ctx();
    let third = pipeline.emit::<PromptSystem>("3".to_owned(), &ctx);
    let mut third = third.now().expect_err("the emit waits for room");
    assert!(futures_util::poll!(&mut third).is_pending());

    // Room appears when the tap takes request 2; the waiting emit completes without a drop.
    gate.notify_one();
    assert_eq!(started.recv().await.unwrap(), "2");
    third.await.unwrap();
    assert_eq!(pipeline.tap_stats()[0].dropped, 0);

    // The tap is stuck on 2 and 3 fills the queue: a fourth emit waits out its bound, then
    // drops its request and counts it.
    let waited = tokio::time::Instant::now();
    emit_string::<PromptSystem>(&pipeline, "4").await.unwrap();
    assert_eq!(waited.elapsed(), Duration::from_secs(5));
    assert_eq!(pipeline.tap_stats()[0].dropped, 1);
    gate.notify_waiters();
}

#[tokio::test]
async fn failing_async_taps_are_reported_and_counted() {
    let (failures, sink) = sink();
    let pipeline = Pipeline::builder()
        .error_sink(sink)
        .compose(|c| {
            c.tap_async(PromptSystem, |_: String, _: BaseCtx| async {
                Err::<(), _>("metrics backend down")
            })
            .tap_async(PromptSystem, |_: String, _: BaseCtx| async {
                panic!("tap worker panic") as ()
            })
        })
        .build()
        .unwrap();
    emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    pipeline.flush_taps().await;
    let stats = pipeline.tap_stats();
    assert!(stats.iter().all(|s| s.delivered == 2 && s.failed == 2));
    let failures = failures.lock().unwrap();
    assert_eq!(failures.len(), 4);
    assert!(failures.iter().any(|f| f.kind == FailureKind::Panicked));
    assert!(
        failures
            .iter()
            .any(|f| f.error.message() == "metrics backend down")
    );
}

#[test]
fn an_async_tap_without_a_runtime_is_reported_not_lost_silently() {
    let (failures, sink) = sink();
    let pipeline = Pipeline::builder()
        .error_sink(sink)
        .compose(|c| c.tap_async(PromptSystem, |_: String, _: BaseCtx| async {}))
        .build()
        .unwrap();
    let outcome = pipeline
        .emit::<PromptSystem>("p".to_owned(), &ctx())
        .now()
        .unwrap();
    assert!(outcome.is_ok());
    assert_eq!(pipeline.tap_stats()[0].dropped, 1);
    assert_eq!(
        failures.lock().unwrap()[0].kind,
        FailureKind::TapUndeliverable
    );
}

#[tokio::test]
async fn the_tag_service_runs_the_compiled_chain() {
    let pipeline = Pipeline::builder()
        .compose(|c| c.on(PromptSystem, |s: &String, _: &BaseCtx| s.to_uppercase()))
        .build()
        .unwrap();
    let request = TagRequest::<PromptSystem> {
        payload: "loud".into(),
        ctx: ctx(),
    };
    let outcome = pipeline
        .service::<PromptSystem>()
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(outcome.into_payload().unwrap(), "LOUD");
}

#[tokio::test]
async fn stacked_tower_layers_apply_policies() {
    use harness_tags::layer::terminal;
    use tower::ServiceBuilder;
    let closed = ServiceBuilder::new()
        .layer(
            on(PromptSystem, |_: &String, _: &BaseCtx| {
                Flow::<String>::fail("no")
            })
            .fail_closed(),
        )
        .service(terminal::<PromptSystem>());
    let request = TagRequest::<PromptSystem> {
        payload: "p".into(),
        ctx: ctx(),
    };
    assert!(closed.oneshot(request.clone()).await.is_err());

    let open = ServiceBuilder::new()
        .layer(on(PromptSystem, |_: &String, _: &BaseCtx| -> String {
            panic!("layer panic")
        }))
        .layer(on(PromptSystem, |s: &String, _: &BaseCtx| format!("{s}!")))
        .service(terminal::<PromptSystem>());
    assert_eq!(
        open.oneshot(request).await.unwrap().into_payload().unwrap(),
        "p!"
    );
}

struct Recorder {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    fail_start: bool,
}

#[async_trait::async_trait]
impl Plugin for Recorder {
    fn name(&self) -> &str {
        self.name
    }

    fn compose(&self, c: Compose) -> Compose {
        let name = self.name;
        c.on(
            PromptSystem,
            move |s: &String, _: &BaseCtx| -> Result<String, String> {
                if name == "faulty" {
                    Err("plugin handler failed".into())
                } else {
                    Ok(format!("{s}+{name}"))
                }
            },
        )
    }

    fn settings(&self) -> Value {
        json!({ "name": self.name })
    }

    async fn start(&self, _: &Pipeline) -> Result<(), harness_tags::BoxError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("start {}", self.name));
        if self.fail_start {
            Err("cannot start".into())
        } else {
            Ok(())
        }
    }

    async fn stop(&self, _: &Pipeline) -> Result<(), harness_tags::BoxError> {
        self.log.lock().unwrap().push(format!("stop {}", self.name));
        Ok(())
    }
}

#[tokio::test]
async fn plugins_start_in_order_stop_in_reverse_and_name_their_handlers() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let plugin = |name, fail_start| Recorder {
        name,
        log: Arc::clone(&log),
        fail_start,
    };
    let (failures, sink) = sink();
    let pipeline = Pipeline::builder()
        .error_sink(sink)
        .plugin(plugin("a", false))
        .plugin(plugin("faulty", false))
        .plugin(plugin("b", false))
        .build()
        .unwrap();
    pipeline.start().await.unwrap();
    let outcome = emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    assert_eq!(outcome.into_payload().unwrap(), "p+a+b");
    assert_eq!(
        failures.lock().unwrap()[0].handler.as_str(),
        "faulty: on prompt.system"
    );
    assert!(pipeline.shutdown().await.is_empty());
    assert_eq!(
        *log.lock().unwrap(),
        [
            "start a",
            "start faulty",
            "start b",
            "stop b",
            "stop faulty",
            "stop a"
        ]
    );
    let settings: Vec<Value> = pipeline.plugins().map(|p| p.settings()).collect();
    assert_eq!(settings[0], json!({"name": "a"}));

    log.lock().unwrap().clear();
    let failing = Pipeline::builder()
        .plugin(plugin("a", false))
        .plugin(plugin("b", true))
        .plugin(plugin("c", false))
        .build()
        .unwrap();
    let error = failing.start().await.unwrap_err();
    assert_eq!(error.plugin, "b");
    assert_eq!(*log.lock().unwrap(), ["start a", "start b", "stop a"]);
}

#[tokio::test]
async fn a_panicking_error_sink_does_not_break_the_emit() {
    let pipeline = Pipeline::builder()
        .error_sink(|_: &HandlerFailure| panic!("sink exploded"))
        .compose(|c| {
            c.on(PromptSystem, |_: &String, _: &BaseCtx| {
                Flow::<String>::fail("x")
            })
        })
        .build()
        .unwrap();
    let outcome = emit_string::<PromptSystem>(&pipeline, "p").await.unwrap();
    assert_eq!(outcome.into_payload().unwrap(), "p");
}

#[tokio::test]
async fn a_hard_deny_cannot_be_loosened_by_any_later_handler() {
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| {
                GateVerdict::hard_deny("rm -rf is forbidden")
            })
            .on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| GateVerdict::allow())
            .on_json("tool.gate-result", |_: &Value, _: &harness_tags::TagInfo<'_>| {
                json!({"decision": "allow", "hardDeny": false})
            })
        })
        .build()
        .unwrap();
    let verdict = pipeline
        .emit::<ToolGateResult>(GateVerdict::allow(), &ToolCallCtx::default())
        .await
        .unwrap()
        .into_payload()
        .unwrap();
    assert_eq!(verdict, GateVerdict::hard_deny("rm -rf is forbidden"));

    // A handler that sets the flag with another decision still denies.
    let sloppy = Pipeline::builder()
        .compose(|c| {
            c.on(ToolGateResult, |_: &GateVerdict, _: &ToolCallCtx| {
                GateVerdict {
                    decision: GateDecision::Allow,
                    reason: None,
                    hard_deny: true,
                }
            })
        })
        .build()
        .unwrap();
    let verdict = sloppy
        .emit::<ToolGateResult>(GateVerdict::allow(), &ToolCallCtx::default())
        .await
        .unwrap()
        .into_payload()
        .unwrap();
    assert_eq!(verdict.decision, GateDecision::Deny);
}
