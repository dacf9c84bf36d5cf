#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every rule of the display-state reducer.

use std::sync::Arc;

use harness_core::display::{
    DisplayState, ModifiedFile, SubagentStatus, ToolStatus, reduce, reduce_with_clock,
};
use harness_core::event::{
    AgentEndReason, HarnessEvent, HarnessMessage, MessagePart, MessageRole, OmProgress, OmStatus,
    OmTrigger, OutputStream, ThreadInfo,
};
use harness_core::task::{TaskItem, TaskStatus};
use harness_tags::{ToolCategory, Usage};
use serde_json::{Value, json};

fn fold(events: &[HarnessEvent]) -> DisplayState {
    let mut state = DisplayState::default();
    fold_into(&mut state, events);
    state
}

fn fold_into(state: &mut DisplayState, events: &[HarnessEvent]) {
    for event in events {
        reduce_with_clock(state, event, &|| 1_000);
    }
}

fn message(id: &str, role: MessageRole, text: &str) -> Arc<HarnessMessage> {
    Arc::new(HarnessMessage {
        id: id.into(),
        role,
        content: vec![MessagePart::Text { text: text.into() }],
        created_at: 0,
        stop_reason: None,
        error_message: None,
    })
}

fn agent_start() -> HarnessEvent {
    HarnessEvent::AgentStart { run_id: "r".into() }
}

fn agent_end(reason: AgentEndReason) -> HarnessEvent {
    HarnessEvent::AgentEnd {
        run_id: "r".into(),
        reason,
        error: None,
    }
}

fn tool_start(id: &str, name: &str, args: Value, category: Option<ToolCategory>) -> HarnessEvent {
    HarnessEvent::ToolStart {
        tool_call_id: id.into(),
        tool_name: name.into(),
        args,
        category,
    }
}

fn tool_end(id: &str, result: &str, is_error: bool) -> HarnessEvent {
    HarnessEvent::ToolEnd {
        tool_call_id: id.into(),
        result: result.into(),
        is_error,
    }
}

fn approval(id: &str) -> HarnessEvent {
    HarnessEvent::ToolApprovalRequired {
        tool_call_id: id.into(),
        tool_name: "bash".into(),
        args: json!({"command": "ls"}),
        category: Some(ToolCategory::Execute),
        reason: Some("asks".into()),
    }
}

fn suspended(id: &str) -> HarnessEvent {
    HarnessEvent::ToolSuspended {
        tool_call_id: id.into(),
        tool_name: "ask_user".into(),
        args: json!({"question": "which?"}),
        suspend_payload: json!({"question": "which?"}),
        resume_schema: None,
    }
}

fn subagent_start(id: &str) -> HarnessEvent {
    HarnessEvent::SubagentStart {
        tool_call_id: id.into(),
        agent_type: "explore".into(),
        task: "look around".into(),
        model_id: "m/1".into(),
        forked: true,
    }
}

fn task(id: &str, status: TaskStatus) -> TaskItem {
    TaskItem {
        id: id.into(),
        content: id.into(),
        status,
        active_form: None,
    }
}

fn follow_ups(count: usize, texts: &[&str]) -> HarnessEvent {
    HarnessEvent::FollowUpQueued {
        count,
        follow_ups: texts.iter().map(|text| (*text).to_owned()).collect(),
    }
}

#[test]
fn agent_start_resets_the_run_view_but_keeps_suspensions() {
    let mut state = fold(&[
        HarnessEvent::ToolInputStart {
            tool_call_id: "t0".into(),
            tool_name: "write".into(),
        },
        tool_start("t1", "read", json!({}), None),
        HarnessEvent::MessageStart {
            message: message("m", MessageRole::Assistant, "hi"),
        },
        approval("t2"),
        suspended("t3"),
        HarnessEvent::UsageUpdate {
            usage: Usage {
                input_tokens: 5,
                ..Usage::default()
            },
        },
    ]);
    reduce(&mut state, &agent_start());
    assert!(state.is_running);
    assert!(state.active_tools.is_empty());
    assert!(state.tool_input_buffers.is_empty());
    assert!(state.current_message.is_none());
    assert!(state.pending_approvals.is_empty());
    assert_eq!(state.pending_suspensions.len(), 1);
    assert_eq!(state.token_usage.input_tokens, 5);
}

#[test]
fn agent_end_clears_the_run_and_fails_unfinished_tools() {
    let state = fold(&[
        agent_start(),
        tool_start("done", "read", json!({}), None),
        tool_end("done", "ok", false),
        tool_start("hung", "bash", json!({}), None),
        HarnessEvent::ToolInputStart {
            tool_call_id: "streaming".into(),
            tool_name: "write".into(),
        },
        approval("hung"),
        suspended("asking"),
        subagent_start("sub"),
        agent_end(AgentEndReason::Aborted),
    ]);
    assert!(!state.is_running);
    assert!(state.pending_approvals.is_empty());
    assert!(state.pending_suspensions.is_empty());
    assert!(state.active_subagents.is_empty());
    assert_eq!(state.active_tools["done"].status, ToolStatus::Completed);
    for id in ["hung", "streaming", "asking"] {
        assert_eq!(state.active_tools[id].status, ToolStatus::Error, "{id}");
        assert!(state.active_tools[id].is_error, "{id}");
    }
}

#[test]
fn agent_end_suspended_keeps_suspensions_and_their_tools_running() {
    let state = fold(&[
        agent_start(),
        tool_start("other", "bash", json!({}), None),
        suspended("asking"),
        agent_end(AgentEndReason::Suspended),
    ]);
    assert!(!state.is_running);
    assert_eq!(state.pending_suspensions.len(), 1);
    assert_eq!(state.pending_suspensions[0].tool_call_id, "asking");
    assert_eq!(state.active_tools["asking"].status, ToolStatus::Running);
    assert_eq!(state.active_tools["other"].status, ToolStatus::Error);
}

#[test]
fn assistant_messages_become_current_until_they_end() {
    let mut state = fold(&[HarnessEvent::MessageStart {
        message: message("u", MessageRole::User, "question"),
    }]);
    assert!(
        state.current_message.is_none(),
        "user messages are not streamed"
    );

    let first = message("a", MessageRole::Assistant, "he");
    fold_into(
        &mut state,
        &[HarnessEvent::MessageStart {
            message: Arc::clone(&first),
        }],
    );
    assert!(Arc::ptr_eq(state.current_message.as_ref().unwrap(), &first));

    let grown = message("a", MessageRole::Assistant, "hello");
    fold_into(
        &mut state,
        &[HarnessEvent::MessageUpdate {
            message: Arc::clone(&grown),
        }],
    );
    assert_eq!(state.current_message.as_deref(), Some(&*grown));

    fold_into(
        &mut state,
        &[HarnessEvent::MessageEnd {
            message: message("u2", MessageRole::User, "x"),
        }],
    );
    assert!(
        state.current_message.is_some(),
        "another user message does not end it"
    );

    fold_into(&mut state, &[HarnessEvent::MessageEnd { message: grown }]);
    assert!(state.current_message.is_none());
}

#[test]
fn tool_input_streams_into_a_buffer_and_becomes_the_arguments() {
    let mut state = fold(&[
        HarnessEvent::ToolInputStart {
            tool_call_id: "t".into(),
            tool_name: "write".into(),
        },
        HarnessEvent::ToolInputDelta {
            tool_call_id: "t".into(),
            args_text_delta: "{\"path\":".into(),
        },
        HarnessEvent::ToolInputDelta {
            tool_call_id: "t".into(),
            args_text_delta: "\"a.rs\"}".into(),
        },
    ]);
    assert_eq!(state.tool_input_buffers["t"], "{\"path\":\"a.rs\"}");
    let tool = &state.active_tools["t"];
    assert_eq!(tool.status, ToolStatus::StreamingInput);
    assert_eq!(tool.name, "write");
    assert_eq!(tool.args, Value::Null);

    fold_into(
        &mut state,
        &[HarnessEvent::ToolInputEnd {
            tool_call_id: "t".into(),
        }],
    );
    assert!(state.tool_input_buffers.is_empty());
    assert_eq!(state.active_tools["t"].args, json!({"path": "a.rs"}));
    assert_eq!(state.active_tools["t"].status, ToolStatus::StreamingInput);
}

#[test]
fn tool_input_that_is_not_json_leaves_the_arguments_null() {
    let state = fold(&[
        HarnessEvent::ToolInputStart {
            tool_call_id: "t".into(),
            tool_name: "write".into(),
        },
        HarnessEvent::ToolInputDelta {
            tool_call_id: "t".into(),
            args_text_delta: "{broken".into(),
        },
        HarnessEvent::ToolInputEnd {
            tool_call_id: "t".into(),
        },
        // A delta for a call that never started is ignored.
        HarnessEvent::ToolInputDelta {
            tool_call_id: "unknown".into(),
            args_text_delta: "x".into(),
        },
    ]);
    assert_eq!(state.active_tools["t"].args, Value::Null);
    assert!(state.tool_input_buffers.is_empty());
}

#[test]
fn a_tool_runs_reports_progress_and_output_then_completes() {
    let mut state = fold(&[
        HarnessEvent::ToolInputStart {
            tool_call_id: "t".into(),
            tool_name: "bash".into(),
        },
        tool_start(
            "t",
            "bash",
            json!({"command": "make"}),
            Some(ToolCategory::Execute),
        ),
    ]);
    let tool = &state.active_tools["t"];
    assert_eq!(tool.status, ToolStatus::Running);
    assert_eq!(tool.args, json!({"command": "make"}));
    assert_eq!(tool.category, Some(ToolCategory::Execute));
    assert!(state.tool_input_buffers.is_empty());

    fold_into(
        &mut state,
        &[
            HarnessEvent::ToolUpdate {
                tool_call_id: "t".into(),
                partial_result: json!({"step": 1}),
            },
            HarnessEvent::ShellOutput {
                tool_call_id: "t".into(),
                output: "building\n".into(),
                stream: OutputStream::Stdout,
            },
            HarnessEvent::ShellOutput {
                tool_call_id: "t".into(),
                output: "warning\n".into(),
                stream: OutputStream::Stderr,
            },
        ],
    );
    let tool = &state.active_tools["t"];
    assert_eq!(tool.partial_result, Some(json!({"step": 1})));
    assert_eq!(tool.shell_output, "building\nwarning\n");

    fold_into(&mut state, &[tool_end("t", "built", false)]);
    let tool = &state.active_tools["t"];
    assert_eq!(tool.status, ToolStatus::Completed);
    assert_eq!(tool.result.as_deref(), Some("built"));
    assert!(!tool.is_error);
}

#[test]
fn a_failed_tool_ends_in_error_and_unknown_calls_are_ignored() {
    let state = fold(&[
        tool_start("t", "bash", json!({}), None),
        tool_end("t", "exit 1", true),
        tool_end("ghost", "?", false),
        HarnessEvent::ToolUpdate {
            tool_call_id: "ghost".into(),
            partial_result: json!(1),
        },
        HarnessEvent::ShellOutput {
            tool_call_id: "ghost".into(),
            output: "x".into(),
            stream: OutputStream::Stdout,
        },
    ]);
    assert_eq!(state.active_tools.len(), 1);
    assert_eq!(state.active_tools["t"].status, ToolStatus::Error);
    assert!(state.active_tools["t"].is_error);
    assert_eq!(state.active_tools["t"].result.as_deref(), Some("exit 1"));
}

#[test]
fn successful_edit_tools_record_modified_files() {
    let ticks = std::cell::Cell::new(0);
    let mut state = DisplayState::default();
    let events = [
        tool_start(
            "1",
            "write_file",
            json!({"path": "src/a.rs"}),
            Some(ToolCategory::Edit),
        ),
        tool_end("1", "ok", false),
        tool_start(
            "2",
            "edit_file",
            json!({"file_path": "src/a.rs"}),
            Some(ToolCategory::Edit),
        ),
        tool_end("2", "ok", false),
        tool_start(
            "3",
            "patch",
            json!({"filePath": "b.rs"}),
            Some(ToolCategory::Edit),
        ),
        tool_end("3", "ok", false),
        // Not recorded: failed, not an edit tool, no path, path not a string, empty path.
        tool_start(
            "4",
            "write_file",
            json!({"path": "c.rs"}),
            Some(ToolCategory::Edit),
        ),
        tool_end("4", "denied", true),
        tool_start(
            "5",
            "read_file",
            json!({"path": "d.rs"}),
            Some(ToolCategory::Read),
        ),
        tool_end("5", "ok", false),
        tool_start("6", "write_file", json!({"path": "e.rs"}), None),
        tool_end("6", "ok", false),
        tool_start(
            "7",
            "write_file",
            json!({"content": "x"}),
            Some(ToolCategory::Edit),
        ),
        tool_end("7", "ok", false),
        tool_start(
            "8",
            "write_file",
            json!({"path": 3}),
            Some(ToolCategory::Edit),
        ),
        tool_end("8", "ok", false),
        tool_start(
            "9",
            "write_file",
            json!({"path": ""}),
            Some(ToolCategory::Edit),
        ),
        tool_end("9", "ok", false),
    ];
    for event in &events {
        reduce_with_clock(&mut state, event, &|| {
            ticks.set(ticks.get() + 1);
            ticks.get() * 100
        });
    }
    assert_eq!(state.modified_files.len(), 2);
    assert_eq!(
        state.modified_files["src/a.rs"],
        ModifiedFile {
            operations: vec!["write_file".into(), "edit_file".into()],
            first_modified: 100,
        }
    );
    assert_eq!(state.modified_files["b.rs"].first_modified, 200);
    assert_eq!(
        ticks.get(),
        2,
        "the clock is read only when a file is first recorded"
    );
}

#[test]
fn approval_is_pending_until_that_call_starts_or_ends() {
    let mut state = fold(&[approval("t")]);
    let pending = state.pending_approvals[0].clone();
    assert_eq!(pending.tool_call_id, "t");
    assert_eq!(pending.tool_name, "bash");
    assert_eq!(pending.category, Some(ToolCategory::Execute));
    assert_eq!(pending.reason.as_deref(), Some("asks"));

    fold_into(&mut state, &[tool_start("other", "read", json!({}), None)]);
    assert_eq!(
        state.pending_approvals.len(),
        1,
        "another call does not answer it"
    );
    fold_into(&mut state, &[tool_start("t", "bash", json!({}), None)]);
    assert!(state.pending_approvals.is_empty());

    fold_into(
        &mut state,
        &[approval("d"), tool_end("d", "declined", true)],
    );
    assert!(state.pending_approvals.is_empty());
}

#[test]
fn approvals_asked_at_once_are_all_pending_until_each_is_answered() {
    let mut state = fold(&[approval("a"), approval("b"), approval("a")]);
    let ids = |state: &DisplayState| -> Vec<String> {
        state
            .pending_approvals
            .iter()
            .map(|p| p.tool_call_id.clone())
            .collect()
    };
    assert_eq!(
        ids(&state),
        ["a", "b"],
        "oldest first; a replay is one approval"
    );
    fold_into(
        &mut state,
        &[HarnessEvent::ToolApprovalAnswered {
            tool_call_id: "b".into(),
            approved: false,
        }],
    );
    assert_eq!(ids(&state), ["a"]);
    fold_into(
        &mut state,
        &[HarnessEvent::ToolApprovalAnswered {
            tool_call_id: "a".into(),
            approved: true,
        }],
    );
    assert!(state.pending_approvals.is_empty());
}

#[test]
fn a_suspended_tool_keeps_running_until_it_ends() {
    let mut state = fold(&[tool_start("q", "ask_user", json!({}), None), suspended("q")]);
    assert_eq!(state.active_tools["q"].status, ToolStatus::Running);
    assert_eq!(state.pending_suspensions.len(), 1);
    assert_eq!(
        state.pending_suspensions[0].suspend_payload,
        json!({"question": "which?"})
    );

    // Suspending the same call again replaces its entry; another call adds one; a suspension
    // of a call not seen before creates its tool.
    fold_into(&mut state, &[suspended("q"), suspended("p")]);
    assert_eq!(state.pending_suspensions.len(), 2);
    assert_eq!(state.active_tools["p"].status, ToolStatus::Running);
    assert_eq!(state.active_tools["p"].name, "ask_user");

    fold_into(&mut state, &[tool_end("q", "User answered: a", false)]);
    assert_eq!(state.pending_suspensions.len(), 1);
    assert_eq!(state.pending_suspensions[0].tool_call_id, "p");
    assert_eq!(state.active_tools["q"].status, ToolStatus::Completed);
}

#[test]
fn usage_update_sets_the_token_usage() {
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 4,
        cache_read_tokens: 2,
        ..Usage::default()
    };
    let state = fold(&[HarnessEvent::UsageUpdate { usage }]);
    assert_eq!(state.token_usage, usage);
}

#[test]
fn follow_ups_follow_the_queue() {
    let mut state = fold(&[follow_ups(2, &["first", "second"])]);
    assert_eq!(state.queued_follow_ups, ["first", "second"]);
    fold_into(&mut state, &[follow_ups(1, &["second"])]);
    assert_eq!(state.queued_follow_ups, ["second"]);
    // A sender that only knows the count gets placeholders; extra texts are cut.
    fold_into(&mut state, &[follow_ups(3, &[])]);
    assert_eq!(state.queued_follow_ups, ["", "", ""]);
    fold_into(&mut state, &[follow_ups(1, &["a", "b"])]);
    assert_eq!(state.queued_follow_ups, ["a"]);
    fold_into(&mut state, &[follow_ups(0, &[])]);
    assert!(state.queued_follow_ups.is_empty());
    // An absurd count does not allocate what it says.
    fold_into(&mut state, &[follow_ups(usize::MAX, &["x"])]);
    assert_eq!(state.queued_follow_ups.len(), 1024);
}

#[test]
fn follow_up_texts_default_to_empty_when_absent_from_json() {
    let event: HarnessEvent =
        serde_json::from_value(json!({"type": "follow_up_queued", "count": 2})).unwrap();
    let state = fold(&[event]);
    assert_eq!(state.queued_follow_ups.len(), 2);
}

#[test]
fn task_updates_keep_the_previous_list() {
    let first = vec![task("a", TaskStatus::InProgress)];
    let second = vec![
        task("a", TaskStatus::Completed),
        task("b", TaskStatus::Pending),
    ];
    let state = fold(&[
        HarnessEvent::TaskUpdated {
            tasks: first.clone(),
        },
        HarnessEvent::TaskUpdated {
            tasks: second.clone(),
        },
    ]);
    assert_eq!(state.tasks, second);
    assert_eq!(state.previous_tasks, first);
}

#[test]
fn subagents_are_tracked_from_start_to_end() {
    let mut state = fold(&[
        subagent_start("s"),
        HarnessEvent::SubagentTextDelta {
            tool_call_id: "s".into(),
            agent_type: "explore".into(),
            text_delta: "Look".into(),
        },
        HarnessEvent::SubagentTextDelta {
            tool_call_id: "s".into(),
            agent_type: "explore".into(),
            text_delta: "ing".into(),
        },
        HarnessEvent::SubagentToolStart {
            tool_call_id: "s".into(),
            agent_type: "explore".into(),
            sub_tool_name: "grep".into(),
            sub_tool_args: json!({"pattern": "x"}),
        },
    ]);
    let subagent = &state.active_subagents["s"];
    assert_eq!(subagent.agent_type, "explore");
    assert_eq!(subagent.task, "look around");
    assert_eq!(subagent.model_id, "m/1");
    assert!(subagent.forked);
    assert_eq!(subagent.text, "Looking");
    assert_eq!(subagent.status, SubagentStatus::Running);
    assert_eq!(subagent.tool_calls.len(), 1);
    assert_eq!(subagent.tool_calls[0].result, None);

    fold_into(
        &mut state,
        &[
            HarnessEvent::SubagentToolEnd {
                tool_call_id: "s".into(),
                agent_type: "explore".into(),
                sub_tool_name: "grep".into(),
                sub_tool_result: "3 hits".into(),
                is_error: false,
            },
            HarnessEvent::SubagentEnd {
                tool_call_id: "s".into(),
                agent_type: "explore".into(),
                result: "found it".into(),
                is_error: false,
                duration_ms: 42,
            },
            HarnessEvent::SubagentEnd {
                tool_call_id: "ghost".into(),
                agent_type: "explore".into(),
                result: String::new(),
                is_error: true,
                duration_ms: 1,
            },
        ],
    );
    let subagent = &state.active_subagents["s"];
    assert_eq!(subagent.tool_calls[0].result.as_deref(), Some("3 hits"));
    assert_eq!(subagent.status, SubagentStatus::Completed);
    assert_eq!(subagent.result.as_deref(), Some("found it"));
    assert_eq!(subagent.duration_ms, Some(42));
    assert_eq!(state.active_subagents.len(), 1);

    fold_into(
        &mut state,
        &[
            subagent_start("f"),
            HarnessEvent::SubagentEnd {
                tool_call_id: "f".into(),
                agent_type: "explore".into(),
                result: "Subagent explore failed: boom".into(),
                is_error: true,
                duration_ms: 5,
            },
        ],
    );
    assert_eq!(state.active_subagents["f"].status, SubagentStatus::Error);
}

#[test]
fn om_events_maintain_the_progress() {
    let mut state = fold(&[HarnessEvent::OmStatus {
        progress: OmProgress {
            threshold: 40_000,
            reflection_threshold: 50_000,
            observation_tokens: 5_000,
            ..OmProgress::default()
        },
    }]);
    fold_into(
        &mut state,
        &[HarnessEvent::OmObservationStart {
            pending_tokens: 20_000,
        }],
    );
    let om = &state.om_progress;
    assert_eq!(om.status, OmStatus::Observing);
    assert_eq!(om.pending_tokens, 20_000);
    assert_eq!(om.threshold_percent, 50.0);
    assert_eq!(om.reflection_threshold_percent, 10.0);

    fold_into(
        &mut state,
        &[HarnessEvent::OmObservationEnd {
            observed_messages: 12,
            observation_tokens: 25_000,
            duration_ms: 900,
        }],
    );
    let om = &state.om_progress;
    assert_eq!(om.status, OmStatus::Idle);
    assert_eq!(om.pending_tokens, 0);
    assert_eq!(om.threshold_percent, 0.0);
    assert_eq!(om.observation_tokens, 25_000);
    assert_eq!(om.reflection_threshold_percent, 50.0);

    fold_into(
        &mut state,
        &[HarnessEvent::OmReflectionStart {
            observation_tokens: 26_000,
        }],
    );
    assert_eq!(state.om_progress.status, OmStatus::Reflecting);
    assert_eq!(state.om_progress.reflection_threshold_percent, 52.0);
    fold_into(
        &mut state,
        &[HarnessEvent::OmReflectionEnd {
            observation_tokens: 10_000,
            generation_count: 3,
            duration_ms: 1_000,
        }],
    );
    let om = &state.om_progress;
    assert_eq!(om.status, OmStatus::Idle);
    assert_eq!(om.generation_count, 3);
    assert_eq!(om.reflection_threshold_percent, 20.0);

    fold_into(
        &mut state,
        &[
            HarnessEvent::OmBufferingStart {
                pending_tokens: 8_000,
            },
            HarnessEvent::OmBufferingEnd {
                buffered: 2,
                tokens: 8_000,
            },
        ],
    );
    assert_eq!(state.om_progress.buffered, 2);

    fold_into(
        &mut state,
        &[
            HarnessEvent::OmObservationStart {
                pending_tokens: 30_000,
            },
            HarnessEvent::OmActivation {
                triggered_by: OmTrigger::Threshold,
                activated_tokens: 8_000,
            },
        ],
    );
    let om = &state.om_progress;
    assert_eq!(om.buffered, 0);
    assert_eq!(om.pending_tokens, 22_000);
    assert_eq!(om.threshold_percent, 55.0);

    for failure in [
        HarnessEvent::OmObservationFailed {
            error: "x".into(),
            attempt: 1,
        },
        HarnessEvent::OmReflectionFailed {
            error: "x".into(),
            attempt: 1,
        },
    ] {
        fold_into(
            &mut state,
            &[
                HarnessEvent::OmReflectionStart {
                    observation_tokens: 1,
                },
                failure,
            ],
        );
        assert_eq!(state.om_progress.status, OmStatus::Idle);
    }
}

#[test]
fn om_percentages_are_zero_without_thresholds() {
    let state = fold(&[HarnessEvent::OmObservationStart {
        pending_tokens: 100,
    }]);
    assert_eq!(state.om_progress.threshold_percent, 0.0);
    assert_eq!(state.om_progress.reflection_threshold_percent, 0.0);
}

fn busy_thread() -> DisplayState {
    fold(&[
        agent_start(),
        HarnessEvent::MessageStart {
            message: message("m", MessageRole::Assistant, "hi"),
        },
        HarnessEvent::ToolInputStart {
            tool_call_id: "i".into(),
            tool_name: "write".into(),
        },
        tool_start("w", "write", json!({"path": "a"}), Some(ToolCategory::Edit)),
        tool_end("w", "ok", false),
        approval("x"),
        suspended("q"),
        subagent_start("s"),
        HarnessEvent::TaskUpdated {
            tasks: vec![task("a", TaskStatus::Pending)],
        },
        HarnessEvent::TaskUpdated {
            tasks: vec![task("b", TaskStatus::Pending)],
        },
        HarnessEvent::OmObservationStart { pending_tokens: 5 },
        follow_ups(1, &["later"]),
        HarnessEvent::UsageUpdate {
            usage: Usage {
                output_tokens: 7,
                ..Usage::default()
            },
        },
    ])
}

fn assert_thread_view_reset(state: &DisplayState) {
    assert!(state.current_message.is_none());
    assert!(state.active_tools.is_empty());
    assert!(state.tool_input_buffers.is_empty());
    assert!(state.pending_approvals.is_empty());
    assert!(state.pending_suspensions.is_empty());
    assert!(state.active_subagents.is_empty());
    assert!(state.modified_files.is_empty());
    assert!(state.tasks.is_empty());
    assert!(state.previous_tasks.is_empty());
    assert_eq!(state.om_progress, OmProgress::default());
    assert!(state.queued_follow_ups.is_empty());
    // Left to their own events.
    assert!(state.is_running);
    assert_eq!(state.token_usage.output_tokens, 7);
}

#[test]
fn thread_changes_reset_the_thread_view() {
    let mut state = busy_thread();
    assert!(!state.modified_files.is_empty());
    reduce(
        &mut state,
        &HarnessEvent::ThreadChanged {
            thread_id: "t2".into(),
            previous_thread_id: Some("t1".into()),
        },
    );
    assert_thread_view_reset(&state);

    let mut state = busy_thread();
    reduce(
        &mut state,
        &HarnessEvent::ThreadCreated {
            thread: ThreadInfo {
                id: "t3".into(),
                resource_id: "r".into(),
                title: None,
                created_at: 0,
                updated_at: 0,
            },
        },
    );
    assert_thread_view_reset(&state);
}

#[test]
fn events_without_display_effects_change_nothing() {
    let before = busy_thread();
    let mut state = before.clone();
    fold_into(
        &mut state,
        &[
            HarnessEvent::ModeChanged {
                mode_id: "plan".into(),
                previous_mode_id: None,
            },
            HarnessEvent::ModelChanged {
                model_id: "a/b".into(),
                scope: harness_core::event::ModelScope::Mode,
                mode_id: Some("plan".into()),
            },
            HarnessEvent::ThreadDeleted {
                thread_id: "old".into(),
            },
            HarnessEvent::StateChanged {
                state: json!({"yolo": true}),
                changed_keys: vec!["yolo".into()],
            },
            HarnessEvent::Info {
                message: "fyi".into(),
            },
            HarnessEvent::Error {
                error: "boom".into(),
                error_type: None,
                retryable: None,
                retry_delay_ms: None,
            },
            HarnessEvent::DisplayStateChanged {
                display_state: Arc::new(DisplayState::default()),
            },
            HarnessEvent::OmBufferingFailed { error: "x".into() },
            HarnessEvent::OmModelChanged {
                role: harness_core::event::OmRole::Observer,
                model_id: "a/b".into(),
            },
        ],
    );
    assert_eq!(state, before);
}

#[test]
fn the_state_serializes_with_camel_case_fields() {
    let value = serde_json::to_value(busy_thread()).unwrap();
    for key in [
        "isRunning",
        "currentMessage",
        "queuedFollowUps",
        "tokenUsage",
        "activeTools",
        "toolInputBuffers",
        "pendingApprovals",
        "pendingSuspensions",
        "activeSubagents",
        "omProgress",
        "modifiedFiles",
        "tasks",
        "previousTasks",
    ] {
        assert!(value.get(key).is_some(), "{key} missing from {value}");
    }
    assert_eq!(value["activeTools"]["w"]["status"], "completed");
    assert_eq!(value["omProgress"]["status"], "observing");
}
