//! The reducer: folds one [`HarnessEvent`] into a [`DisplayState`].
//!
//! The rules follow the Mastra Harness reference:
//!
//! - `agent_start`: running; clears active tools, tool input buffers, the current message and
//!   the pending approvals; keeps pending suspensions (a resumed run answers them).
//! - `agent_end`: not running; clears the pending approvals and the subagents; clears pending
//!   suspensions unless the reason is `suspended`; tools still streaming input or running end as
//!   errors (except, for a suspended run, the tools that are suspended).
//! - `message_start` / `message_update` of an assistant message make it the current message;
//!   `message_delta` appends its text to the current message's part (or starts the part when
//!   it is the next one; a delta of another message, or for a part that does not fit, is
//!   ignored); `message_end` clears it. The current message is shared with the snapshots that
//!   hold it: a delta copies it only when a snapshot still holds the previous text.
//! - `tool_input_start` / `_delta` / `_end` fill `tool_input_buffers` and an [`ActiveTool`] in
//!   `streaming_input`; at `tool_input_end` the buffer is parsed as the tool's arguments (left
//!   `null` if it is not JSON) and dropped.
//! - `tool_start`: the tool runs with its arguments and category; `tool_update` sets its partial
//!   result; `shell_output` appends to its output; `tool_end` completes it (or marks it failed)
//!   with its result. A successful `edit`-category tool with a `path`, `file_path` or `filePath`
//!   string argument records the path in `modified_files` (the tool's name is appended to the
//!   file's operations; `first_modified` comes from the clock the first time).
//! - `tool_approval_required` adds a pending approval (replacing one of the same call: several
//!   wait at once when subagents ask together), which `tool_approval_answered`, `tool_start` or
//!   `tool_end` of the same call removes. `tool_suspended` adds a pending suspension (replacing
//!   one of the same call) and keeps the tool running; `tool_end` of that call removes it.
//! - `usage_update` sets the token usage; `task_updated` moves `tasks` to `previous_tasks` and
//!   sets the new list.
//! - `follow_up_queued` sets the queued follow-ups to the event's texts; the list's length is
//!   the event's `count` (texts beyond it are cut, missing ones are empty strings, at most
//!   1,024 of them).
//! - `subagent_*` maintain `active_subagents` by the parent's call id.
//! - `om_*` maintain `om_progress`: status observing / reflecting / idle, token counts and their
//!   percentages of the thresholds, buffered chunks, generation count.
//! - `thread_changed` and `thread_created` reset the thread view: current message, tools, input
//!   buffers, approvals, suspensions, subagents, modified files, tasks, OM progress and the
//!   follow-up queue (running flag and token usage are left to their own events).
//! - Mode, model, state and thread-deleted changes, `info`, `error` and `display_state_changed`
//!   change nothing here (the scheduler still flushes on most of them).
//!
//! Events about a call id or subagent the state does not know (e.g. a `tool_end` whose
//! `tool_start` was missed) are ignored rather than guessed at.

use std::sync::Arc;

use harness_tags::ToolCategory;
use harness_tags::util::unix_ms;
use serde_json::Value;

use crate::display::{
    ActiveSubagent, ActiveTool, DisplayState, ModifiedFile, PendingApproval, PendingSuspension,
    SubagentStatus, SubagentToolCall, ToolStatus,
};
use crate::event::{AgentEndReason, HarnessEvent};
use crate::memory::{OmProgress, OmStatus};
use crate::message::{MessagePart, MessageRole, PartKind};

/// How long the follow-up list may grow from a count without texts.
const MAX_FOLLOW_UP_PLACEHOLDERS: usize = 1024;

/// The argument names that carry a file path for edit-category tools.
const PATH_ARGUMENTS: [&str; 3] = ["path", "file_path", "filePath"];

/// Folds `event` into `state`, reading the system clock if the event modifies a file.
pub fn reduce(state: &mut DisplayState, event: &HarnessEvent) {
    reduce_with_clock(state, event, &unix_ms);
}

/// Folds `event` into `state`; `now` (Unix milliseconds) is called only when a file is
/// recorded as modified.
pub fn reduce_with_clock(state: &mut DisplayState, event: &HarnessEvent, now: &dyn Fn() -> i64) {
    match event {
        HarnessEvent::AgentStart { .. } => {
            state.is_running = true;
            state.active_tools.clear();
            state.tool_input_buffers.clear();
            state.current_message = None;
            state.pending_approvals.clear();
        }
        HarnessEvent::AgentEnd { reason, .. } => agent_end(state, *reason),
        HarnessEvent::MessageStart { message } | HarnessEvent::MessageUpdate { message } => {
            if message.role == MessageRole::Assistant {
                state.current_message = Some(Arc::clone(message));
            }
        }
        HarnessEvent::MessageDelta {
            message_id,
            part,
            kind,
            delta,
        } => message_delta(state, message_id, *part, *kind, delta),
        HarnessEvent::MessageEnd { message } => {
            let ends_current = state
                .current_message
                .as_ref()
                .is_some_and(|current| current.id == message.id);
            if ends_current || message.role == MessageRole::Assistant {
                state.current_message = None;
            }
        }
        HarnessEvent::ToolInputStart {
            tool_call_id,
            tool_name,
        } => {
            state
                .tool_input_buffers
                .insert(tool_call_id.clone(), String::new());
            state.active_tools.insert(
                tool_call_id.clone(),
                new_tool(tool_name, Value::Null, None, ToolStatus::StreamingInput),
            );
        }
        HarnessEvent::ToolInputDelta {
            tool_call_id,
            args_text_delta,
        } => {
            if let Some(buffer) = state.tool_input_buffers.get_mut(tool_call_id) {
                buffer.push_str(args_text_delta);
            }
        }
        HarnessEvent::ToolInputEnd { tool_call_id } => {
            let buffer = state.tool_input_buffers.remove(tool_call_id);
            let tool = state.active_tools.get_mut(tool_call_id);
            if let (Some(buffer), Some(tool)) = (buffer, tool)
                && let Ok(args) = serde_json::from_str::<Value>(&buffer)
            {
                tool.args = args;
            }
        }
        HarnessEvent::ToolStart {
            tool_call_id,
            tool_name,
            args,
            category,
        } => {
            state.tool_input_buffers.remove(tool_call_id);
            clear_approval_of(state, tool_call_id);
            let tool = state
                .active_tools
                .entry(tool_call_id.clone())
                .or_insert_with(|| new_tool(tool_name, Value::Null, None, ToolStatus::Running));
            tool.name.clone_from(tool_name);
            tool.args.clone_from(args);
            tool.category = *category;
            tool.status = ToolStatus::Running;
        }
        HarnessEvent::ToolUpdate {
            tool_call_id,
            partial_result,
        } => {
            if let Some(tool) = state.active_tools.get_mut(tool_call_id) {
                tool.partial_result = Some(partial_result.clone());
            }
        }
        HarnessEvent::ShellOutput {
            tool_call_id,
            output,
            ..
        } => {
            if let Some(tool) = state.active_tools.get_mut(tool_call_id) {
                tool.shell_output.push_str(output);
            }
        }
        HarnessEvent::ToolEnd {
            tool_call_id,
            result,
            is_error,
        } => tool_end(state, tool_call_id, result, *is_error, now),
        HarnessEvent::ToolApprovalRequired {
            tool_call_id,
            tool_name,
            args,
            category,
            reason,
        } => {
            let approval = PendingApproval {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                args: args.clone(),
                category: *category,
                reason: reason.clone(),
            };
            // The same event twice (a replay) is one approval.
            match state
                .pending_approvals
                .iter_mut()
                .find(|pending| pending.tool_call_id == *tool_call_id)
            {
                Some(pending) => *pending = approval,
                None => state.pending_approvals.push(approval),
            }
        }
        HarnessEvent::ToolApprovalAnswered { tool_call_id, .. } => {
            clear_approval_of(state, tool_call_id);
        }
        HarnessEvent::ToolSuspended {
            tool_call_id,
            tool_name,
            args,
            suspend_payload,
            resume_schema,
        } => {
            let tool = state
                .active_tools
                .entry(tool_call_id.clone())
                .or_insert_with(|| new_tool(tool_name, args.clone(), None, ToolStatus::Running));
            tool.status = ToolStatus::Running;
            let suspension = PendingSuspension {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                suspend_payload: suspend_payload.clone(),
                resume_schema: resume_schema.clone(),
            };
            match state
                .pending_suspensions
                .iter_mut()
                .find(|pending| pending.tool_call_id == *tool_call_id)
            {
                Some(pending) => *pending = suspension,
                None => state.pending_suspensions.push(suspension),
            }
        }
        HarnessEvent::UsageUpdate { usage } => state.token_usage = *usage,
        HarnessEvent::FollowUpQueued { count, follow_ups } => {
            // A count far beyond the texts is bad input: pad with at most a bounded number of
            // placeholders rather than allocate whatever it says.
            let length = (*count).min(follow_ups.len().max(MAX_FOLLOW_UP_PLACEHOLDERS));
            state.queued_follow_ups.clone_from(follow_ups);
            state.queued_follow_ups.resize(length, String::new());
        }
        HarnessEvent::TaskUpdated { tasks } => {
            state.previous_tasks = std::mem::replace(&mut state.tasks, tasks.clone());
        }
        HarnessEvent::SubagentStart {
            tool_call_id,
            agent_type,
            task,
            model_id,
            forked,
        } => {
            state.active_subagents.insert(
                tool_call_id.clone(),
                ActiveSubagent {
                    agent_type: agent_type.clone(),
                    task: task.clone(),
                    model_id: model_id.clone(),
                    forked: *forked,
                    tool_calls: Vec::new(),
                    text: String::new(),
                    status: SubagentStatus::Running,
                    duration_ms: None,
                    result: None,
                },
            );
        }
        HarnessEvent::SubagentTextDelta {
            tool_call_id,
            text_delta,
            ..
        } => {
            if let Some(subagent) = state.active_subagents.get_mut(tool_call_id) {
                subagent.text.push_str(text_delta);
            }
        }
        HarnessEvent::SubagentToolStart {
            tool_call_id,
            sub_tool_name,
            sub_tool_args,
            ..
        } => {
            if let Some(subagent) = state.active_subagents.get_mut(tool_call_id) {
                subagent.tool_calls.push(SubagentToolCall {
                    name: sub_tool_name.clone(),
                    args: sub_tool_args.clone(),
                    result: None,
                    is_error: false,
                });
            }
        }
        HarnessEvent::SubagentToolEnd {
            tool_call_id,
            sub_tool_name,
            sub_tool_result,
            is_error,
            ..
        } => {
            if let Some(subagent) = state.active_subagents.get_mut(tool_call_id) {
                let open_call = subagent
                    .tool_calls
                    .iter_mut()
                    .rev()
                    .find(|call| call.name == *sub_tool_name && call.result.is_none());
                match open_call {
                    Some(call) => {
                        call.result = Some(sub_tool_result.clone());
                        call.is_error = *is_error;
                    }
                    None => subagent.tool_calls.push(SubagentToolCall {
                        name: sub_tool_name.clone(),
                        args: Value::Null,
                        result: Some(sub_tool_result.clone()),
                        is_error: *is_error,
                    }),
                }
            }
        }
        HarnessEvent::SubagentEnd {
            tool_call_id,
            result,
            is_error,
            duration_ms,
            ..
        } => {
            if let Some(subagent) = state.active_subagents.get_mut(tool_call_id) {
                subagent.status = if *is_error {
                    SubagentStatus::Error
                } else {
                    SubagentStatus::Completed
                };
                subagent.result = Some(result.clone());
                subagent.duration_ms = Some(*duration_ms);
            }
        }
        HarnessEvent::ThreadChanged { .. } | HarnessEvent::ThreadCreated { .. } => {
            reset_thread_view(state);
        }
        HarnessEvent::OmStatus { progress } => state.om_progress = progress.clone(),
        HarnessEvent::OmObservationStart { pending_tokens } => {
            let om = &mut state.om_progress;
            om.status = OmStatus::Observing;
            om.pending_tokens = *pending_tokens;
            update_percents(om);
        }
        HarnessEvent::OmObservationEnd {
            observation_tokens, ..
        } => {
            let om = &mut state.om_progress;
            om.status = OmStatus::Idle;
            om.pending_tokens = 0;
            om.observation_tokens = *observation_tokens;
            update_percents(om);
        }
        HarnessEvent::OmReflectionStart { observation_tokens } => {
            let om = &mut state.om_progress;
            om.status = OmStatus::Reflecting;
            om.observation_tokens = *observation_tokens;
            update_percents(om);
        }
        HarnessEvent::OmReflectionEnd {
            observation_tokens,
            generation_count,
            ..
        } => {
            let om = &mut state.om_progress;
            om.status = OmStatus::Idle;
            om.observation_tokens = *observation_tokens;
            om.generation_count = *generation_count;
            update_percents(om);
        }
        HarnessEvent::OmObservationFailed { .. } | HarnessEvent::OmReflectionFailed { .. } => {
            state.om_progress.status = OmStatus::Idle;
        }
        HarnessEvent::OmBufferingEnd { buffered, .. } => state.om_progress.buffered = *buffered,
        HarnessEvent::OmActivation {
            activated_tokens, ..
        } => {
            let om = &mut state.om_progress;
            om.buffered = 0;
            om.pending_tokens = om.pending_tokens.saturating_sub(*activated_tokens);
            update_percents(om);
        }
        // Nothing to draw: these only (possibly) trigger a flush, or are the scheduler's own.
        HarnessEvent::ModeChanged { .. }
        | HarnessEvent::ModelChanged { .. }
        | HarnessEvent::ThreadDeleted { .. }
        | HarnessEvent::StateChanged { .. }
        | HarnessEvent::Info { .. }
        | HarnessEvent::Error { .. }
        | HarnessEvent::DisplayStateChanged { .. }
        | HarnessEvent::OmBufferingStart { .. }
        | HarnessEvent::OmBufferingFailed { .. }
        | HarnessEvent::OmModelChanged { .. } => {}
    }
}

fn new_tool(
    name: &str,
    args: Value,
    category: Option<ToolCategory>,
    status: ToolStatus,
) -> ActiveTool {
    ActiveTool {
        name: name.to_owned(),
        args,
        category,
        status,
        partial_result: None,
        result: None,
        is_error: false,
        shell_output: String::new(),
    }
}

fn message_delta(
    state: &mut DisplayState,
    message_id: &str,
    part: usize,
    kind: PartKind,
    delta: &str,
) {
    let Some(current) = state
        .current_message
        .as_mut()
        .filter(|current| *current.id == *message_id)
    else {
        return;
    };
    let fits = match current.content.get(part) {
        Some(MessagePart::Text { .. }) => kind == PartKind::Text,
        Some(MessagePart::Thinking { .. }) => kind == PartKind::Thinking,
        Some(_) => false,
        None => part == current.content.len(),
    };
    if !fits {
        return;
    }
    let content = &mut Arc::make_mut(current).content;
    match content.get_mut(part) {
        Some(MessagePart::Text { text } | MessagePart::Thinking { text }) => text.push_str(delta),
        _ => content.push(match kind {
            PartKind::Text => MessagePart::Text {
                text: delta.to_owned(),
            },
            PartKind::Thinking => MessagePart::Thinking {
                text: delta.to_owned(),
            },
        }),
    }
}

fn agent_end(state: &mut DisplayState, reason: AgentEndReason) {
    state.is_running = false;
    state.pending_approvals.clear();
    state.active_subagents.clear();
    let suspended = reason == AgentEndReason::Suspended;
    if !suspended {
        state.pending_suspensions.clear();
    }
    for (call_id, tool) in &mut state.active_tools {
        let unfinished = matches!(
            tool.status,
            ToolStatus::Running | ToolStatus::StreamingInput
        );
        let waits_on_user = suspended
            && state
                .pending_suspensions
                .iter()
                .any(|pending| pending.tool_call_id == *call_id);
        if unfinished && !waits_on_user {
            tool.status = ToolStatus::Error;
            tool.is_error = true;
        }
    }
}

fn tool_end(
    state: &mut DisplayState,
    tool_call_id: &str,
    result: &str,
    is_error: bool,
    now: &dyn Fn() -> i64,
) {
    state.tool_input_buffers.remove(tool_call_id);
    clear_approval_of(state, tool_call_id);
    state
        .pending_suspensions
        .retain(|pending| pending.tool_call_id != tool_call_id);
    let Some(tool) = state.active_tools.get_mut(tool_call_id) else {
        return;
    };
    tool.status = if is_error {
        ToolStatus::Error
    } else {
        ToolStatus::Completed
    };
    tool.result = Some(result.to_owned());
    tool.is_error = is_error;
    if is_error || tool.category != Some(ToolCategory::Edit) {
        return;
    }
    let path = PATH_ARGUMENTS
        .iter()
        .find_map(|key| tool.args.get(key).and_then(Value::as_str))
        .filter(|path| !path.is_empty());
    if let Some(path) = path {
        state
            .modified_files
            .entry(path.to_owned())
            .or_insert_with(|| ModifiedFile {
                operations: Vec::new(),
                first_modified: now(),
            })
            .operations
            .push(tool.name.clone());
    }
}

fn clear_approval_of(state: &mut DisplayState, tool_call_id: &str) {
    state
        .pending_approvals
        .retain(|pending| pending.tool_call_id != tool_call_id);
}

fn reset_thread_view(state: &mut DisplayState) {
    state.current_message = None;
    state.active_tools.clear();
    state.tool_input_buffers.clear();
    state.pending_approvals.clear();
    state.pending_suspensions.clear();
    state.active_subagents.clear();
    state.modified_files.clear();
    state.tasks.clear();
    state.previous_tasks.clear();
    state.om_progress = OmProgress::default();
    state.queued_follow_ups.clear();
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn update_percents(om: &mut OmProgress) {
    om.threshold_percent = percent(om.pending_tokens, om.threshold);
    om.reflection_threshold_percent = percent(om.observation_tokens, om.reflection_threshold);
}
