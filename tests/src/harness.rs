//! Helpers for tests that drive a [`Harness`]: a model that holds its stream until the test
//! releases it, and waiting on the event stream and the display state.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a broken expectation is a failed test

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::FutureExt;
use futures_util::stream::{self, StreamExt};
use harness_core::event::{Delivery, EventEnvelope, HarnessEvent, Subscription};
use harness_core::harness::{Harness, HarnessBuilder, Mode};
use harness_core::model::{
    FinishReason, Model, ModelError, ModelId, ModelRequest, ModelStream, StreamEvent, Usage,
};
use harness_tags::KernelMessage;
use tokio::sync::{Semaphore, mpsc};

/// A model that answers `on it: <message>`, then holds the stream open until the test
/// releases it, so that a run can be caught mid-stream. Each call reports the latest user
/// message on `started`.
#[derive(Debug)]
pub struct GatedModel {
    id: ModelId,
    gate: Arc<Semaphore>,
    started: mpsc::UnboundedSender<String>,
}

/// The test's end of a [`GatedModel`].
#[derive(Debug)]
pub struct Gate {
    gate: Arc<Semaphore>,
    started: mpsc::UnboundedReceiver<String>,
}

impl GatedModel {
    /// A gated model with id `id`, and the test's end of it.
    pub fn new(id: &str) -> (Arc<Self>, Gate) {
        let gate = Arc::new(Semaphore::new(0));
        let (started, receiver) = mpsc::unbounded_channel();
        let model = GatedModel {
            id: ModelId::new(id).unwrap(),
            gate: Arc::clone(&gate),
            started,
        };
        (
            Arc::new(model),
            Gate {
                gate,
                started: receiver,
            },
        )
    }
}

impl Gate {
    /// Waits for the next model call and returns the user message it answers.
    pub async fn next_call(&mut self) -> String {
        self.started.recv().await.expect("the model is gone")
    }

    /// Lets one held stream finish.
    pub fn release(&self) {
        self.gate.add_permits(1);
    }
}

/// The text of the last user message in `request`.
pub fn last_user_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            KernelMessage::User { content } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[async_trait]
impl Model for GatedModel {
    fn id(&self) -> &ModelId {
        &self.id
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let text = last_user_text(request);
        let _ = self.started.send(text.clone());
        let gate = Arc::clone(&self.gate);
        let head = stream::iter([Ok(StreamEvent::TextDelta(format!("on it: {text}")))]);
        let tail = stream::once(async move {
            gate.acquire()
                .await
                .expect("the gate is never closed")
                .forget();
            stream::iter([
                Ok(StreamEvent::TextDelta(" (done)".into())),
                Ok(StreamEvent::Usage(Usage {
                    input_tokens: 100,
                    output_tokens: 10,
                    ..Usage::default()
                })),
                Ok(StreamEvent::Finish(FinishReason::Stop)),
            ])
        })
        .flatten();
        Ok(head.chain(tail).boxed())
    }
}

/// A builder with one `build` mode whose model is `model`.
pub fn builder_with(model: Arc<dyn Model>) -> HarnessBuilder {
    let id = model.id().to_string();
    Harness::builder("test-agent")
        .mode(Mode::new("build").default_model(id))
        .model_resolver(move |_| Ok(Arc::clone(&model)))
}

/// The next event on `events` that `pick` accepts, skipping the rest.
pub async fn next_matching<T>(
    events: &mut Subscription,
    mut pick: impl FnMut(&HarnessEvent) -> Option<T>,
) -> T {
    while let Some(delivery) = events.next().await {
        if let Delivery::Event(event) = delivery
            && let Some(found) = pick(&event.event)
        {
            return found;
        }
    }
    panic!("the event stream ended");
}

/// Every event currently buffered on `events`, without waiting.
pub fn drain(events: &mut Subscription) -> Vec<Arc<EventEnvelope>> {
    let mut seen = Vec::new();
    while let Some(Some(delivery)) = events.next().now_or_never() {
        if let Delivery::Event(event) = delivery {
            seen.push(event);
        }
    }
    seen
}

/// Waits for the first display-state snapshot that `holds` accepts (snapshots are published
/// just after the events they contain reach subscribers).
pub async fn display_where(
    harness: &Harness,
    holds: impl Fn(&harness_core::display::DisplayState) -> bool,
) -> Arc<harness_core::display::DisplayState> {
    let mut snapshots = harness.subscribe_display_state();
    while let Some(snapshot) = snapshots.next().await {
        if holds(&snapshot) {
            return snapshot;
        }
    }
    panic!("the display state stream ended");
}

/// Waits for the first event `matches` accepts, and returns its envelope.
pub async fn wait_for(
    events: &mut Subscription,
    matches: impl Fn(&HarnessEvent) -> bool,
) -> Arc<EventEnvelope> {
    while let Some(delivery) = events.next().await {
        if let Delivery::Event(envelope) = delivery
            && matches(&envelope.event)
        {
            return envelope;
        }
    }
    panic!("the event stream ended");
}
