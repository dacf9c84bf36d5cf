//! Verify: whether an answer ends the run (required tools, open tasks, the verifier,
//! `decision.terminate`).

use harness_tags::tags::{
    DecisionTerminate, NudgeRequiredToolsPending, NudgeTasksIncomplete, NudgeVerifierRetry,
};
use harness_tags::{
    FailureReason, KernelMessage, Phase, Severity, TerminateDecision, TerminateReason,
};

use crate::kernel::Verdict;

use super::{Decision, End, Run, StepFlow};

impl Run<'_> {
    /// Verify: the checks before a final answer ends the run.
    pub(super) async fn verify(&mut self, answer: String) -> StepFlow {
        let pending: Vec<&str> = self
            .config
            .required_tools
            .iter()
            .filter(|tool| !self.succeeded_tools.contains(*tool))
            .map(String::as_str)
            .collect();
        if !pending.is_empty() && self.nudges.required < self.config.max_nudges {
            self.nudges.required += 1;
            let text = format!(
                "Before you finish, you must call these tools: {}.",
                pending.join(", ")
            );
            if self
                .nudge::<NudgeRequiredToolsPending>(text, "required-tools-pending", Severity::Warn)
                .await
            {
                self.observe_loops(&answer, &[]).await;
                return StepFlow::Continue;
            }
        }

        let open = self
            .tasks
            .as_ref()
            .map(|t| t.open_tasks())
            .unwrap_or_default();
        if !open.is_empty() && self.nudges.tasks < self.config.max_nudges {
            self.nudges.tasks += 1;
            let text = format!(
                "These tasks are still open: {}. Finish them or update the task list before you \
                 end.",
                open.join("; ")
            );
            if self
                .nudge::<NudgeTasksIncomplete>(text, "tasks-incomplete", Severity::Warn)
                .await
            {
                self.observe_loops(&answer, &[]).await;
                return StepFlow::Continue;
            }
        }

        if let Some(verifier) = self.config.verifier.clone()
            && self.nudges.verifier < self.config.max_nudges
            && let Verdict::Reject(reason) = verifier.verify(&answer, &self.state).await
        {
            self.nudges.verifier += 1;
            self.failure(FailureReason::VerifierRejection, reason.clone())
                .await;
            match self.after_failure().await {
                Decision::End(end) => return StepFlow::End(end),
                Decision::Switched | Decision::Escalated => return StepFlow::Continue,
                Decision::Continue => {}
            }
            let text = format!("Your answer was rejected: {reason}. Fix it and answer again.");
            if self
                .nudge::<NudgeVerifierRetry>(text, "verifier-rejection", Severity::Warn)
                .await
            {
                return StepFlow::Continue;
            }
        }

        if self
            .terminate(TerminateReason::FinalAnswer, Some(answer.clone()))
            .await
        {
            StepFlow::End(End::complete(Some(answer)))
        } else {
            self.observe_loops(&answer, &[]).await;
            StepFlow::Continue
        }
    }

    /// Emits `decision.terminate`; true if the run ends, false if a handler vetoed (the veto's
    /// message is then in the conversation).
    pub(super) async fn terminate(
        &mut self,
        reason: TerminateReason,
        final_text: Option<String>,
    ) -> bool {
        let decision = TerminateDecision {
            reason,
            final_text,
            continue_with: None,
        };
        let ctx = self.base(Phase::Verify);
        let veto = match self
            .kernel
            .pipeline
            .emit::<DecisionTerminate>(decision, &ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().and_then(|d| d.continue_with),
            Err(_) => None,
        };
        drop(ctx);
        match veto {
            Some(message) if self.nudges.vetoes < self.config.max_terminate_vetoes => {
                self.nudges.vetoes += 1;
                self.add_message(KernelMessage::user(message));
                false
            }
            _ => true,
        }
    }
}
