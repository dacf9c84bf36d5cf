#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A fail-closed handler that returns a `RunFailure` ends the run with a `lifecycle.failure` of
//! that reason.

use std::sync::{Arc, Mutex};

use harness_core::kernel::{Kernel, KernelError, RunInput};
use harness_core::model::{Scripted, ScriptedModel};
use harness_tags::tags::{LifecycleFailureTag, ModelRequestTag};
use harness_tags::{
    BaseCtx, FailureReason, LifecycleFailure, ModelCtx, ModelRequest, Pipeline, RunFailure,
    RunOutcome, on,
};

#[tokio::test]
async fn a_handler_can_fail_the_run_with_a_reason() {
    let failures: Arc<Mutex<Vec<LifecycleFailure>>> = Arc::default();
    let kernel = Kernel::builder()
        .model(ScriptedModel::new("scripted/demo").then(Scripted::text("never sent")))
        .pipeline(
            Pipeline::builder()
                .compose({
                    let failures = Arc::clone(&failures);
                    move |c| {
                        c.register(
                            on(ModelRequestTag, |_: &ModelRequest, _: &ModelCtx| {
                                Err::<ModelRequest, _>(RunFailure::new(
                                    FailureReason::OmFailure,
                                    "the observer is down",
                                ))
                            })
                            .fail_closed(),
                        )
                        .tap(
                            LifecycleFailureTag,
                            move |failure: &LifecycleFailure, _: &BaseCtx| {
                                failures.lock().unwrap().push(failure.clone())
                            },
                        )
                    }
                })
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let result = kernel.run(RunInput::new("hello")).await;
    assert_eq!(result.outcome, RunOutcome::Error);
    assert!(matches!(result.error, Some(KernelError::Handler(_))));
    let failures = failures.lock().unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].reason, FailureReason::OmFailure);
    assert_eq!(failures[0].error_message, "the observer is down");
}
