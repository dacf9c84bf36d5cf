//! The observational-memory observer's requests go through `model.request` like every model
//! call: the redaction plugin reshapes them whichever order the two plugins were added in,
//! and the memory plugin does not observe its own calls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use harness_core::harness::{Harness, Mode};
use harness_core::model::{Model, ModelError, ModelId, ModelRequest, Scripted, ScriptedModel};
use harness_om::{IdleTrigger, ObservationalMemory, OmConfig};
use harness_redaction::{Redaction, Target};
use harness_tags::KernelMessage;

const EMAIL: &str = "carol.jones@example.org";

fn observer() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new("test/observer")
            .then(Scripted::text(
                "<observations>\nDate: 2026-11-24\n- 10:00 [medium] the user wrote\n</observations>",
            ))
            .cycling(),
    )
}

fn text_of(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .map(KernelMessage::content)
        .collect::<Vec<_>>()
        .join("\n")
}

async fn observer_requests(redaction_first: bool) -> Vec<ModelRequest> {
    let agent = Arc::new(
        ScriptedModel::new("test/agent")
            .then(Scripted::text("noted"))
            .cycling(),
    );
    let observer = observer();
    let models: Vec<Arc<ScriptedModel>> = vec![agent, Arc::clone(&observer)];
    let memory = ObservationalMemory::new(OmConfig {
        observer_model: Some("test/observer".into()),
        reflector_model: Some("test/observer".into()),
        observation_threshold: 300,
        reflection_threshold: 1_000_000,
        idle: IdleTrigger::Off,
        ..OmConfig::default()
    })
    .unwrap();
    let redaction = Redaction::default().target(Target::ModelRequest, true);
    let builder = Harness::builder("om-redaction")
        .mode(Mode::new("build").default_model("test/agent"))
        .model_resolver(move |id: &ModelId| {
            models
                .iter()
                .find(|m| m.id() == id)
                .map(|m| Arc::clone(m) as Arc<dyn Model>)
                .ok_or_else(|| ModelError::UnknownModel(id.to_string()))
        })
        .interactive(false);
    let builder = if redaction_first {
        builder.plugin(redaction).plugin(memory)
    } else {
        builder.plugin(memory).plugin(redaction)
    };
    let harness = builder.build().unwrap();
    harness.init().await.unwrap();
    for turn in 0..12 {
        harness
            .send_message(format!(
                "Turn {turn}: please write to {EMAIL} about the quarterly report, the budget \
                 review and the schedule for the offsite; keep it short and friendly."
            ))
            .await
            .unwrap();
    }
    observer.requests()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observer_is_sent_redacted_text_whatever_the_plugin_order() {
    for redaction_first in [true, false] {
        let requests = observer_requests(redaction_first).await;
        assert!(
            !requests.is_empty(),
            "the observer never ran (redaction first: {redaction_first})"
        );
        for request in &requests {
            let text = text_of(request);
            assert!(
                !text.contains(EMAIL),
                "the observer saw the raw value (redaction first: {redaction_first}): {text}"
            );
            assert!(text.contains("<EMAIL_ADDRESS>"), "{text}");
        }
    }
}
