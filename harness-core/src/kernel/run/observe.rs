//! Observe: loop detection and the nudges the kernel injects.

use harness_tags::tags::NudgeLoopDetected;
use harness_tags::{KernelMessage, NudgeCtx, Severity, Tag, ToolCall};

use super::Run;

impl Run<'_> {
    pub(super) async fn observe_loops(&mut self, text: &str, calls: &[ToolCall]) {
        let Some(signal) = self.loops.observe(text, calls) else {
            return;
        };
        if let Some(nudge) = self
            .nudge_text::<NudgeLoopDetected>(signal.message, signal.trigger, signal.severity)
            .await
        {
            self.add_message(KernelMessage::system(nudge));
        }
    }

    /// Emits a nudge tag; the text to inject, unless a handler suppressed it or failed.
    pub(super) async fn nudge_text<T>(
        &self,
        text: String,
        trigger: &str,
        severity: Severity,
    ) -> Option<String>
    where
        T: Tag<Payload = String, Ctx = NudgeCtx>,
    {
        let ctx = NudgeCtx {
            base: self.base(T::PHASE),
            trigger: trigger.to_owned(),
            severity,
        };
        match self.kernel.pipeline.emit::<T>(text, &ctx).await {
            Ok(outcome) => outcome.into_payload(),
            Err(_) => None,
        }
    }

    /// Emits a nudge and injects it; true if it was injected.
    pub(super) async fn nudge<T>(&mut self, text: String, trigger: &str, severity: Severity) -> bool
    where
        T: Tag<Payload = String, Ctx = NudgeCtx>,
    {
        match self.nudge_text::<T>(text, trigger, severity).await {
            Some(text) => {
                self.add_message(KernelMessage::system(text));
                true
            }
            None => false,
        }
    }
}
