//! The mapping of a run's harness events to the Open Harness API's execution events: the
//! documented table, event by event, and the events' wire form.

use std::sync::Arc;

use harness_protocol::open_harness::{ExecutionEvent, ExecutionStream, UsageStats};
use harness_protocol::{AgentEndReason, HarnessEvent, PartKind, TaskItem, TaskStatus};
use harness_tags::Usage;
use serde_json::{Value, json};

fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
        ..Usage::default()
    }
}

fn delta(kind: PartKind, text: &str) -> HarnessEvent {
    HarnessEvent::MessageDelta {
        message_id: Arc::from("m1"),
        part: 0,
        kind,
        delta: text.into(),
    }
}

fn end(reason: AgentEndReason, error: Option<&str>) -> HarnessEvent {
    HarnessEvent::AgentEnd {
        run_id: "r1".into(),
        reason,
        error: error.map(str::to_owned),
    }
}

fn task(content: &str, status: TaskStatus) -> TaskItem {
    TaskItem {
        id: content.to_lowercase().replace(' ', "-"),
        content: content.into(),
        status,
        active_form: None,
    }
}

fn map_all(stream: &mut ExecutionStream, events: &[HarnessEvent]) -> Vec<Value> {
    events
        .iter()
        .flat_map(|event| stream.map(event))
        .map(|event| serde_json::to_value(event).unwrap())
        .collect()
}

#[test]
fn a_run_maps_to_the_spec_events_with_done_last() {
    // The thread had used 100/20 tokens before this execution.
    let mut stream = ExecutionStream::new(usage(100, 20));
    let events = [
        HarnessEvent::AgentStart {
            run_id: "r1".into(),
        },
        delta(PartKind::Thinking, "Look first."),
        delta(PartKind::Text, "I'll "),
        delta(PartKind::Text, "write it."),
        HarnessEvent::ToolInputStart {
            tool_call_id: "tc_1".into(),
            tool_name: "write_file".into(),
        },
        HarnessEvent::ToolStart {
            tool_call_id: "tc_1".into(),
            tool_name: "write_file".into(),
            args: json!({"path": "src/index.ts", "content": "x"}),
            category: None,
        },
        HarnessEvent::ToolApprovalRequired {
            tool_call_id: "tc_1".into(),
            tool_name: "write_file".into(),
            args: json!({}),
            category: None,
            reason: None,
        },
        HarnessEvent::ToolEnd {
            tool_call_id: "tc_1".into(),
            result: "wrote 1 byte".into(),
            is_error: false,
        },
        HarnessEvent::TaskUpdated {
            tasks: vec![
                task("Write the file", TaskStatus::Completed),
                task("Run the tests", TaskStatus::InProgress),
                task("Report", TaskStatus::Pending),
            ],
        },
        HarnessEvent::UsageUpdate {
            usage: usage(250, 60),
        },
        HarnessEvent::ToolEnd {
            tool_call_id: "tc_2".into(),
            result: "exit 1".into(),
            is_error: true,
        },
        HarnessEvent::Error {
            error: "rate limited".into(),
            error_type: Some("rate_limit".into()),
            retryable: Some(true),
            retry_delay_ms: Some(1000),
        },
        end(AgentEndReason::Complete, None),
        delta(PartKind::Text, "after the end"),
    ];
    assert_eq!(
        map_all(&mut stream, &events),
        [
            json!({"type": "thinking", "content": "Look first."}),
            json!({"type": "text", "content": "I'll "}),
            json!({"type": "text", "content": "write it."}),
            json!({"type": "tool_call_start", "id": "tc_1", "name": "write_file",
                   "input": {"path": "src/index.ts", "content": "x"}}),
            json!({"type": "tool_result", "id": "tc_1", "success": true,
                   "output": {"text": "wrote 1 byte"}}),
            json!({"type": "tool_call_end", "id": "tc_1"}),
            json!({"type": "progress", "percentage": 33.3, "step": "Run the tests",
                   "step_number": 2, "total_steps": 3}),
            json!({"type": "tool_result", "id": "tc_2", "success": false,
                   "output": {"text": "exit 1"}}),
            json!({"type": "tool_call_end", "id": "tc_2"}),
            json!({"type": "error", "code": "rate_limit", "message": "rate limited",
                   "recoverable": true}),
            json!({"type": "done", "usage": {"input_tokens": 150, "output_tokens": 40,
                   "total_tokens": 190}}),
        ]
    );
    assert!(stream.is_done());
}

#[test]
fn a_failed_or_aborted_run_ends_with_error_then_done() {
    for (reason, error, code, message) in [
        (
            AgentEndReason::Error,
            Some("the model failed"),
            "run_failed",
            "the model failed",
        ),
        (AgentEndReason::Error, None, "run_failed", "the run failed"),
        (
            AgentEndReason::Aborted,
            None,
            "aborted",
            "the run was aborted",
        ),
    ] {
        let mut stream = ExecutionStream::new(Usage::default());
        let mapped = stream.map(&end(reason, error));
        assert_eq!(
            mapped,
            [
                ExecutionEvent::Error {
                    code: code.into(),
                    message: message.into(),
                    recoverable: false,
                },
                ExecutionEvent::Done {
                    usage: UsageStats::default()
                },
            ]
        );
    }
}

#[test]
fn a_suspended_run_is_not_done() {
    let mut stream = ExecutionStream::new(Usage::default());
    assert!(stream.map(&end(AgentEndReason::Suspended, None)).is_empty());
    assert!(!stream.is_done());
    assert_eq!(stream.map(&delta(PartKind::Text, "resumed")).len(), 1);
    assert_eq!(
        stream.map(&end(AgentEndReason::Complete, None))[0].kind(),
        "done"
    );
}

#[test]
fn progress_follows_the_task_list() {
    let mut stream = ExecutionStream::new(Usage::default());
    let progress = |stream: &mut ExecutionStream, tasks: Vec<TaskItem>| {
        stream
            .map(&HarnessEvent::TaskUpdated { tasks })
            .into_iter()
            .map(|event| serde_json::to_value(event).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(progress(&mut stream, vec![]), Vec::<Value>::new());
    let mut writing = task("Write the tests", TaskStatus::Pending);
    writing.active_form = Some("Writing the tests".into());
    assert_eq!(
        progress(&mut stream, vec![writing.clone()]),
        [
            json!({"type": "progress", "percentage": 0.0, "step": "Writing the tests",
                "step_number": 1, "total_steps": 1})
        ]
    );
    writing.status = TaskStatus::Completed;
    assert_eq!(
        progress(&mut stream, vec![writing]),
        [
            json!({"type": "progress", "percentage": 100.0, "step": "done",
                "step_number": 1, "total_steps": 1})
        ]
    );
}

#[test]
fn each_kind_is_its_serialized_type() {
    let events = [
        ExecutionEvent::Text {
            content: "a".into(),
        },
        ExecutionEvent::Thinking {
            content: "b".into(),
        },
        ExecutionEvent::ToolCallStart {
            id: "t".into(),
            name: "n".into(),
            input: json!({}),
        },
        ExecutionEvent::ToolCallDelta {
            id: "t".into(),
            input_delta: json!({"path": "/src"}),
        },
        ExecutionEvent::ToolCallEnd { id: "t".into() },
        ExecutionEvent::ToolResult {
            id: "t".into(),
            success: true,
            output: None,
        },
        ExecutionEvent::Artifact {
            id: "a".into(),
            name: "index.ts".into(),
            mime_type: "text/typescript".into(),
            size_bytes: 1024,
        },
        ExecutionEvent::Progress {
            percentage: 50.0,
            step: "s".into(),
            step_number: 1,
            total_steps: 2,
        },
        ExecutionEvent::Error {
            code: "c".into(),
            message: "m".into(),
            recoverable: false,
        },
        ExecutionEvent::Done {
            usage: UsageStats::default(),
        },
    ];
    for event in events {
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], event.kind(), "{json}");
        let back: ExecutionEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }
}
