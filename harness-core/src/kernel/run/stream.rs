//! The live stream of a model call: each delta goes through `message.text-delta` before the
//! observer (and so any subscriber) sees it.
//!
//! Without a handler for the tag, deltas go straight to the observer. With one, every delta
//! is emitted, and each part that streamed (the answer text, the reasoning, each tool call's
//! arguments) gets one more emit with `end` set when it ends: when the stream switches
//! between reasoning and text, when a tool call's arguments are complete, and when the call
//! ends. A handler that holds text back (a streaming redactor waiting to see whether a card
//! number goes on) returns it then.

use std::sync::Arc;

use harness_tags::tags::MessageTextDelta;
use harness_tags::{DeltaKind, EmitOutcome, ModelCtx, Phase, TextDelta};

use crate::kernel::KernelEvent;
use crate::model::StreamEvent;

use super::Run;

/// What one model call attempt streams.
pub(super) struct Live {
    /// The assistant message the call produces: one id per attempt.
    message_id: Arc<str>,
    /// The context of `message.text-delta`, when a handler is registered.
    ctx: Option<ModelCtx>,
    /// Tool call ids by their index in the stream.
    call_ids: Vec<(usize, String)>,
    /// The parts that streamed and have not ended (only tracked for handlers).
    open: Vec<(DeltaKind, Option<String>)>,
}

impl Run<'_> {
    /// The live stream of a model call attempt.
    pub(super) fn live(&self, attempt: u32) -> Live {
        let reshaped = self.kernel.pipeline.has_handlers::<MessageTextDelta>();
        Live {
            message_id: Arc::from(format!("{}-{}.{attempt}", self.run_id, self.iteration)),
            ctx: reshaped.then(|| ModelCtx {
                base: self.base(Phase::Think),
                provider: self.model.id().provider().to_owned(),
                model: self.model.id().name().to_owned(),
                attempt,
            }),
            call_ids: Vec::new(),
            open: Vec::new(),
        }
    }

    /// Streams what `event` adds to the observer.
    pub(super) async fn forward(&self, live: &mut Live, event: &StreamEvent) {
        match event {
            StreamEvent::TextDelta(text) => {
                self.end_part(live, DeltaKind::Thinking, None).await;
                self.delta(live, DeltaKind::Text, None, text.clone()).await;
            }
            StreamEvent::ThinkingDelta(text) => {
                self.end_part(live, DeltaKind::Text, None).await;
                self.delta(live, DeltaKind::Thinking, None, text.clone())
                    .await;
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                live.call_ids.push((*index, id.clone()));
                self.notify(|| KernelEvent::ToolInputStarted {
                    call_id: id.clone(),
                    tool_name: name.clone(),
                });
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let id = call_id(live, *index);
                self.delta(live, DeltaKind::ToolArguments, Some(id), arguments.clone())
                    .await;
            }
            StreamEvent::ToolCallEnd { index } => {
                let id = call_id(live, *index);
                self.end_part(live, DeltaKind::ToolArguments, Some(id.clone()))
                    .await;
                self.notify(|| KernelEvent::ToolInputEnded { call_id: id });
            }
            StreamEvent::ThinkingSignature(_) | StreamEvent::Usage(_) | StreamEvent::Finish(_) => {}
        }
    }

    /// Ends the parts still open: the model call ended.
    pub(super) async fn finish_live(&self, live: &mut Live) {
        for (kind, call_id) in std::mem::take(&mut live.open) {
            self.deliver(live, kind, call_id, String::new(), true).await;
        }
    }

    async fn end_part(&self, live: &mut Live, kind: DeltaKind, call_id: Option<String>) {
        let Some(at) = live
            .open
            .iter()
            .position(|(open, id)| *open == kind && *id == call_id)
        else {
            return;
        };
        live.open.remove(at);
        self.deliver(live, kind, call_id, String::new(), true).await;
    }

    async fn delta(&self, live: &mut Live, kind: DeltaKind, call_id: Option<String>, text: String) {
        if live.ctx.is_some()
            && !live
                .open
                .iter()
                .any(|(open, id)| *open == kind && *id == call_id)
        {
            live.open.push((kind, call_id.clone()));
        }
        self.deliver(live, kind, call_id, text, false).await;
    }

    /// Runs a delta through `message.text-delta` (when handled) and tells the observer the
    /// text that came out, if any.
    async fn deliver(
        &self,
        live: &Live,
        kind: DeltaKind,
        call_id: Option<String>,
        text: String,
        end: bool,
    ) {
        let text = match &live.ctx {
            None => text,
            Some(ctx) => {
                let delta = TextDelta {
                    message_id: live.message_id.to_string(),
                    kind,
                    call_id: call_id.clone(),
                    text,
                    end,
                };
                match self
                    .kernel
                    .pipeline
                    .emit::<MessageTextDelta>(delta, ctx)
                    .await
                {
                    Ok(EmitOutcome::Continue(delta)) => delta.text,
                    // Suppressed, or a handler failed (a fail-closed redactor): nothing of
                    // this delta may be shown.
                    Ok(EmitOutcome::Suppressed { .. }) | Err(_) => return,
                }
            }
        };
        if text.is_empty() {
            return;
        }
        let message_id = Arc::clone(&live.message_id);
        self.notify(|| match kind {
            DeltaKind::Text => KernelEvent::TextDelta { message_id, text },
            DeltaKind::Thinking => KernelEvent::ThinkingDelta { message_id, text },
            DeltaKind::ToolArguments => KernelEvent::ToolInputDelta {
                call_id: call_id.unwrap_or_default(),
                delta: text,
            },
        });
    }
}

/// The id of the tool call at `index` of the stream (empty if the stream never started it).
fn call_id(live: &Live, index: usize) -> String {
    live.call_ids
        .iter()
        .find(|(i, _)| *i == index)
        .map(|(_, id)| id.clone())
        .unwrap_or_default()
}
