//! The harness side of a run's back-channel: approvals, suspensions (questions, plans, access
//! requests), tool progress and escalations, answered through the [`Harness`].

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Harness, HarnessError, HarnessInner};
use crate::event::HarnessEvent;
use crate::tool::{
    ApprovalAnswer, ApprovalRequest, HarnessChannel, SuspendError, Suspension, ToolProgress,
};
use harness_tags::util::lock;

/// Someone waiting for the user's answer.
pub(crate) struct PendingAnswer<T> {
    pub(crate) call_id: String,
    pub(crate) tool_name: String,
    pub(crate) resume_schema: Option<Value>,
    pub(crate) reply: oneshot::Sender<T>,
}

/// The tool name an escalation is suspended under.
pub const ESCALATION: &str = "escalate";

pub(crate) struct SessionChannel {
    harness: Arc<HarnessInner>,
}

impl SessionChannel {
    pub(crate) fn new(harness: Arc<HarnessInner>) -> Self {
        SessionChannel { harness }
    }

    async fn wait_for_answer(&self, suspension: Suspension) -> Result<Value, SuspendError> {
        if !self.harness.interactive() {
            return Err(SuspendError::Unavailable);
        }
        let (reply, answer) = oneshot::channel();
        lock(&self.harness.session.suspensions).push(PendingAnswer {
            call_id: suspension.call_id.clone(),
            tool_name: suspension.tool_name.clone(),
            resume_schema: suspension.resume_schema.clone(),
            reply,
        });
        self.harness.emit_in_order(HarnessEvent::ToolSuspended {
            tool_call_id: suspension.call_id,
            tool_name: suspension.tool_name,
            args: suspension.payload.clone(),
            suspend_payload: suspension.payload,
            resume_schema: suspension.resume_schema,
        });
        // The sender is dropped when the run is aborted.
        answer.await.map_err(|_| SuspendError::Aborted)
    }
}

#[async_trait]
impl HarnessChannel for SessionChannel {
    async fn suspend(&self, request: Suspension) -> Result<Value, SuspendError> {
        self.wait_for_answer(request).await
    }

    fn progress(&self, call_id: &str, progress: ToolProgress) {
        self.harness.report_output(call_id, progress);
    }

    async fn approve(&self, request: ApprovalRequest) -> ApprovalAnswer {
        if !self.harness.interactive() {
            return ApprovalAnswer::Decline {
                reason:
                    "it needs the user's approval and no one is attached to give it, so it did \
                         not run. Continue without it, or explain what you need."
                        .to_owned(),
            };
        }
        let (reply, answer) = oneshot::channel();
        let call = request.call;
        *lock(&self.harness.session.approval) = Some(PendingAnswer {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            resume_schema: None,
            reply,
        });
        self.harness
            .emit_in_order(HarnessEvent::ToolApprovalRequired {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
                category: request.category,
                reason: request.verdict.reason.clone(),
            });
        let Ok(answer) = answer.await else {
            return ApprovalAnswer::Decline {
                reason: "the run was aborted".to_owned(),
            };
        };
        let granted = {
            let mut grants = lock(&self.harness.session.grants);
            let added = match &answer {
                ApprovalAnswer::AlwaysAllowTool => grants.tools.insert(call.name.clone()),
                ApprovalAnswer::AlwaysAllowCategory => request
                    .category
                    .is_some_and(|category| grants.categories.insert(category)),
                ApprovalAnswer::Approve | ApprovalAnswer::Decline { .. } => false,
            };
            added.then(|| grants.clone())
        };
        if let Some(grants) = granted.filter(|_| self.harness.persist_grants) {
            let saved = serde_json::to_value(grants).unwrap_or(Value::Null);
            if let Err(error) = self
                .harness
                .update_metadata(|meta| {
                    meta.insert(crate::store::metadata::GRANTS.into(), saved);
                })
                .await
            {
                self.harness.emit(super::storage_error(&error));
            }
        }
        answer
    }

    async fn escalate(&self, reason: &str) -> Option<String> {
        let suspension = Suspension {
            call_id: format!("{ESCALATION}-{}", self.harness.new_id()),
            tool_name: ESCALATION.to_owned(),
            payload: json!({ "reason": reason }),
            resume_schema: Some(json!({ "type": ["string", "null"] })),
        };
        match self.wait_for_answer(suspension).await {
            Ok(Value::String(message)) if !message.trim().is_empty() => Some(message),
            _ => None,
        }
    }
}

impl Harness {
    /// Answers the pending tool approval. `AlwaysAllowTool` and `AlwaysAllowCategory` also
    /// become session grants (see [`Session::grants`](super::Session::grants)).
    pub fn respond_to_tool_approval(&self, answer: ApprovalAnswer) -> Result<(), HarnessError> {
        let pending = lock(&self.session().approval)
            .take()
            .ok_or(HarnessError::NothingPending("a tool approval"))?;
        pending
            .reply
            .send(answer)
            .map_err(|_| HarnessError::NothingPending("a tool approval"))
    }

    /// Resumes a suspended tool with the user's answer. The call id is required when several
    /// tools are suspended; the answer must match the schema the tool gave.
    ///
    /// Strategy escalations are suspended under the tool name `escalate`: answer with a
    /// message for the model to go on, or `null` to end the run.
    pub fn respond_to_tool_suspension(
        &self,
        resume: Value,
        call_id: Option<&str>,
    ) -> Result<(), HarnessError> {
        let mut suspensions = lock(&self.session().suspensions);
        let index = match call_id {
            Some(id) => suspensions
                .iter()
                .position(|p| p.call_id == id)
                .ok_or(HarnessError::NothingPending("that tool call"))?,
            None => match suspensions.len() {
                0 => return Err(HarnessError::NothingPending("a suspended tool")),
                1 => 0,
                _ => {
                    let ids: Vec<&str> = suspensions.iter().map(|p| p.call_id.as_str()).collect();
                    return Err(HarnessError::AmbiguousSuspension(ids.join(", ")));
                }
            },
        };
        if let Some(schema) = &suspensions[index].resume_schema {
            let validator = jsonschema::validator_for(schema).map_err(|e| {
                HarnessError::InvalidAnswer(format!("the tool's answer schema is invalid: {e}"))
            })?;
            if let Some(problem) = validator.iter_errors(&resume).next() {
                return Err(HarnessError::InvalidAnswer(problem.to_string()));
            }
        }
        let pending = suspensions.remove(index);
        drop(suspensions);
        pending
            .reply
            .send(resume)
            .map_err(|_| HarnessError::NothingPending("that tool call"))
    }
}
