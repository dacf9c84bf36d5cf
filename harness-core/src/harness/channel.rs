//! The harness side of a run's back-channel: approvals, suspensions (questions, plans, access
//! requests), tool progress and escalations, answered through the [`Harness`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

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

impl<T> PendingAnswer<T> {
    /// False once the waiter went away (its run was aborted, its tool timed out).
    pub(crate) fn is_waiting(&self) -> bool {
        !self.reply.is_closed()
    }
}

/// What kind of answer a list of [`PendingAnswer`]s waits for, for the errors.
#[derive(Clone, Copy)]
enum Awaited {
    Approval,
    Suspension,
}

/// The position in `pending` of the call to answer: `call_id`'s, or with none the only one.
/// Waiters that went away are dropped first. Two waiters with one id (models that number
/// their calls per response can repeat an id across subagents) are answered oldest first.
fn find_pending<T>(
    pending: &mut Vec<PendingAnswer<T>>,
    call_id: Option<&str>,
    awaited: Awaited,
) -> Result<usize, HarnessError> {
    pending.retain(PendingAnswer::is_waiting);
    let ids = || {
        pending
            .iter()
            .map(|p| p.call_id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match call_id {
        Some(id) => {
            pending
                .iter()
                .position(|p| p.call_id == id)
                .ok_or_else(|| HarnessError::NotPending {
                    call_id: id.to_owned(),
                    what: match awaited {
                        Awaited::Approval => "an approval",
                        Awaited::Suspension => "an answer",
                    },
                    waiting: ids(),
                })
        }
        None => match (pending.len(), awaited) {
            (0, Awaited::Approval) => Err(HarnessError::NothingPending("a tool approval")),
            (0, Awaited::Suspension) => Err(HarnessError::NothingPending("a suspended tool")),
            (1, _) => Ok(0),
            (_, Awaited::Approval) => Err(HarnessError::AmbiguousApproval(ids())),
            (_, Awaited::Suspension) => Err(HarnessError::AmbiguousSuspension(ids())),
        },
    }
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

    /// The answer to the approval of `call_id`, or a decline once the input timeout passes
    /// with no answer. `Err` if the run was aborted.
    async fn approval_answer(
        &self,
        call_id: &str,
        answer: oneshot::Receiver<ApprovalAnswer>,
    ) -> Result<ApprovalAnswer, oneshot::error::RecvError> {
        let Some(limit) = self.harness.input_timeout else {
            return answer.await;
        };
        match answer_in_time(&self.harness.session.approvals, call_id, limit, answer).await {
            Some(answered) => answered,
            None => Ok(ApprovalAnswer::Decline {
                reason: format!(
                    "it needs the user's approval and no one answered within {} s, so it did not \
                 run. Continue without it, or explain what you need.",
                    limit.as_secs_f64()
                ),
            }),
        }
    }

    async fn wait_for_answer(&self, suspension: Suspension) -> Result<Value, SuspendError> {
        if !self.harness.interactive() {
            return Err(SuspendError::Unavailable);
        }
        let (reply, answer) = oneshot::channel();
        let call_id = suspension.call_id.clone();
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
        let answered = match self.harness.input_timeout {
            None => answer.await,
            Some(limit) => {
                let suspensions = &self.harness.session.suspensions;
                match answer_in_time(suspensions, &call_id, limit, answer).await {
                    Some(answered) => answered,
                    // Nobody answered in time: go on as a harness without a user does.
                    None => return Err(SuspendError::Unavailable),
                }
            }
        };
        answered.map_err(|_| SuspendError::Aborted)
    }
}

/// The answer to the call `call_id` waiting in `pending`, or `None` once `limit` passed with
/// no answer (the call is then withdrawn). An answer taken as the time ran out still counts.
async fn answer_in_time<T>(
    pending: &Mutex<Vec<PendingAnswer<T>>>,
    call_id: &str,
    limit: Duration,
    mut answer: oneshot::Receiver<T>,
) -> Option<Result<T, oneshot::error::RecvError>> {
    if let Ok(answered) = tokio::time::timeout(limit, &mut answer).await {
        return Some(answered);
    }
    let withdrawn = {
        let mut waiting = lock(pending);
        let before = waiting.len();
        waiting.retain(|call| call.call_id != call_id);
        waiting.len() < before
    };
    if withdrawn { None } else { Some(answer.await) }
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
        // Keyed by call id: subagents running in parallel ask at the same time.
        lock(&self.harness.session.approvals).push(PendingAnswer {
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
        let Ok(answer) = self.approval_answer(&call.id, answer).await else {
            return ApprovalAnswer::Decline {
                reason: "the run was aborted".to_owned(),
            };
        };
        self.harness
            .emit_in_order(HarnessEvent::ToolApprovalAnswered {
                tool_call_id: call.id.clone(),
                approved: answer.approves(),
            });
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
    /// Answers the tool call waiting for approval with id `call_id`; with `None`, the only
    /// one waiting. `AlwaysAllowTool` and `AlwaysAllowCategory` also become session grants
    /// (see [`Session::grants`](super::Session::grants)).
    ///
    /// Several calls wait at once when subagents running in parallel ask together (see
    /// [`Session::pending_approvals`](super::Session::pending_approvals) and the display
    /// state's `pending_approvals`): answer each by its id. Without an id the answer is
    /// refused then ([`HarnessError::AmbiguousApproval`] lists the ids) rather than given to a
    /// call the user may not have meant. An id that is not waiting is
    /// [`HarnessError::NotPending`], which lists the ones that are.
    pub fn respond_to_tool_approval(
        &self,
        answer: ApprovalAnswer,
        call_id: Option<&str>,
    ) -> Result<(), HarnessError> {
        let mut approvals = lock(&self.session().approvals);
        let index = find_pending(&mut approvals, call_id, Awaited::Approval)?;
        let pending = approvals.remove(index);
        drop(approvals);
        pending
            .reply
            .send(answer)
            .map_err(|_| HarnessError::NothingPending("a tool approval"))
    }

    /// Resumes a suspended tool with the user's answer. The call id is required when several
    /// tools are suspended; the answer must match the schema the tool gave. Errors are those
    /// of [`respond_to_tool_approval`](Self::respond_to_tool_approval).
    ///
    /// Strategy escalations are suspended under the tool name `escalate`: answer with a
    /// message for the model to go on, or `null` to end the run.
    pub fn respond_to_tool_suspension(
        &self,
        resume: Value,
        call_id: Option<&str>,
    ) -> Result<(), HarnessError> {
        let mut suspensions = lock(&self.session().suspensions);
        let index = find_pending(&mut suspensions, call_id, Awaited::Suspension)?;
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
