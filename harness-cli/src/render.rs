//! Terminal rendering: pure functions from the display state to text, and the [`View`] that
//! prints what changed.
//!
//! A [`View`] folds every event into its own [`DisplayState`] with the harness's reducer
//! ([`harness_core::display::reduce`], the one the harness's snapshots come from) and renders
//! what the event changed, reading the state: streamed text, tools with their output and
//! results, approval prompts, questions, plans, the task list and subagents. Folding events
//! itself rather than waiting for batched snapshots means no streamed word is lost between two
//! snapshots (a message's last words and its end often share one). After missing events the
//! view adopts the harness's snapshot ([`View::resync`]).
//!
//! ```
//! use harness_cli::render::{Style, View};
//! use harness_core::event::HarnessEvent;
//!
//! let mut view = View::new(Style::plain(), true);
//! let text = view.apply(&HarnessEvent::ToolStart {
//!     tool_call_id: "c1".into(),
//!     tool_name: "read_file".into(),
//!     args: serde_json::json!({"path": "src/main.rs"}),
//!     category: None,
//! });
//! assert_eq!(text, "• read_file src/main.rs\n");
//! ```

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;

use harness_core::display::{DisplayState, PendingApproval, PendingSuspension, reduce};
use harness_core::event::{AgentEndReason, HarnessEvent, HarnessMessage, MessageRole};
use harness_core::task::{TaskItem, TaskStatus};
use serde_json::Value;

/// The longest one-line summary of arguments or results.
const SUMMARY: usize = 100;

/// Whether and how to colour output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    color: bool,
}

impl Style {
    /// No colour.
    pub fn plain() -> Style {
        Style { color: false }
    }

    /// Colour on or off.
    pub fn new(color: bool) -> Style {
        Style { color }
    }

    /// Colour when standard output is a terminal and `NO_COLOR` is not set.
    pub fn for_stdout() -> Style {
        Style::new(std::io::stdout().is_terminal() && color_allowed())
    }

    /// Colour when standard error is a terminal and `NO_COLOR` is not set.
    pub fn for_stderr() -> Style {
        Style::new(std::io::stderr().is_terminal() && color_allowed())
    }

    /// True if output is coloured.
    pub fn color(self) -> bool {
        self.color
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Bold.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Dimmed.
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Red.
    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    /// Green.
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Yellow.
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Cyan.
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
}

/// False when `NO_COLOR` is set to anything but the empty string (<https://no-color.org>).
pub fn color_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// Text with its line-start bookkeeping.
struct Out {
    text: String,
    at_line_start: bool,
}

impl Out {
    /// Writes raw text.
    fn raw(&mut self, text: &str) {
        if !text.is_empty() {
            self.text.push_str(text);
            self.at_line_start = text.ends_with('\n');
        }
    }

    /// Ends the current line, if one is open.
    fn newline(&mut self) {
        if !self.at_line_start {
            self.raw("\n");
        }
    }

    /// Writes a block of whole lines on lines of its own.
    fn block(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.newline();
        self.raw(text);
        self.newline();
    }
}

/// What has been printed of a run, and the state it was printed from.
#[derive(Debug)]
pub struct View {
    style: Style,
    interactive: bool,
    state: DisplayState,
    /// The streaming message's id and how many bytes of its text were printed.
    text: Option<(String, usize)>,
    started: HashSet<String>,
    finished: HashSet<String>,
    shell: HashMap<String, usize>,
    tasks: Vec<TaskItem>,
    at_line_start: bool,
}

impl View {
    /// A view; `interactive` adds answer hints to prompts.
    pub fn new(style: Style, interactive: bool) -> View {
        View {
            style,
            interactive,
            state: DisplayState::default(),
            text: None,
            started: HashSet::new(),
            finished: HashSet::new(),
            shell: HashMap::new(),
            tasks: Vec::new(),
            at_line_start: true,
        }
    }

    /// The state folded so far.
    pub fn state(&self) -> &DisplayState {
        &self.state
    }

    /// True if the last text printed ended a line.
    pub fn at_line_start(&self) -> bool {
        self.at_line_start
    }

    /// Adopts a snapshot after events were missed; what it shows as done is not printed again.
    pub fn resync(&mut self, state: DisplayState) {
        for (id, tool) in &state.active_tools {
            self.started.insert(id.clone());
            if tool.result.is_some() {
                self.finished.insert(id.clone());
            }
            self.shell.insert(id.clone(), tool.shell_output.len());
        }
        self.tasks = state.tasks.clone();
        self.text = state
            .current_message
            .as_ref()
            .map(|m| (m.id.clone(), m.text().len()));
        self.state = state;
    }

    /// Ends an open line (before a prompt of the caller's).
    pub fn finish_line(&mut self) -> String {
        let mut out = self.out();
        out.newline();
        self.close(out)
    }

    fn out(&self) -> Out {
        Out {
            text: String::new(),
            at_line_start: self.at_line_start,
        }
    }

    fn close(&mut self, out: Out) -> String {
        self.at_line_start = out.at_line_start;
        out.text
    }

    /// Folds `event` into the state and returns the text that shows what changed.
    pub fn apply(&mut self, event: &HarnessEvent) -> String {
        reduce(&mut self.state, event);
        let mut out = self.out();
        let style = self.style;
        match event {
            HarnessEvent::MessageStart { message } | HarnessEvent::MessageUpdate { message } => {
                self.stream(message, &mut out);
            }
            HarnessEvent::MessageEnd { message } => {
                self.stream(message, &mut out);
                if message.role == MessageRole::Assistant {
                    out.newline();
                }
            }
            HarnessEvent::ToolStart { tool_call_id, .. } => {
                self.tool_started(tool_call_id, &mut out)
            }
            HarnessEvent::ShellOutput { tool_call_id, .. } => {
                self.tool_started(tool_call_id, &mut out);
                self.shell_output(tool_call_id, &mut out);
            }
            HarnessEvent::ToolEnd {
                tool_call_id,
                result,
                is_error,
                ..
            } => {
                self.tool_started(tool_call_id, &mut out);
                if self.finished.insert(tool_call_id.clone()) {
                    out.block(&result_line(result, *is_error, style));
                }
            }
            HarnessEvent::ToolApprovalRequired { tool_call_id, .. } => {
                if let Some(pending) = self
                    .state
                    .pending_approval
                    .as_ref()
                    .filter(|p| p.tool_call_id == *tool_call_id)
                {
                    out.block(&render_approval(pending, self.interactive, style));
                }
            }
            HarnessEvent::ToolSuspended { tool_call_id, .. } => {
                if let Some(pending) = self
                    .state
                    .pending_suspensions
                    .iter()
                    .find(|p| p.tool_call_id == *tool_call_id)
                {
                    out.block(&render_suspension(pending, self.interactive, style));
                }
            }
            HarnessEvent::TaskUpdated { .. } if self.state.tasks != self.tasks => {
                self.tasks = self.state.tasks.clone();
                if !self.tasks.is_empty() {
                    out.block(&render_tasks(&self.tasks, style));
                }
            }
            HarnessEvent::ThreadChanged { .. } | HarnessEvent::ThreadCreated { .. } => {
                // Another thread: its list is not news.
                self.tasks = self.state.tasks.clone();
            }
            HarnessEvent::SubagentStart {
                agent_type,
                task,
                model_id,
                forked,
                ..
            } => {
                let how = if *forked { ", forked" } else { "" };
                out.block(&format!(
                    "{} {}\n",
                    style.cyan(&format!("↳ {agent_type}")),
                    style.dim(&format!("{} ({model_id}{how})", one_line(task)))
                ));
            }
            HarnessEvent::SubagentEnd {
                agent_type,
                is_error,
                duration_ms,
                ..
            } => {
                let line = format!(
                    "↳ {agent_type} {} in {:.1} s",
                    if *is_error { "failed" } else { "done" },
                    *duration_ms as f64 / 1000.0
                );
                let line = if *is_error {
                    style.red(&line)
                } else {
                    style.cyan(&line)
                };
                out.block(&format!("{line}\n"));
            }
            HarnessEvent::AgentEnd { reason, error, .. } => match reason {
                AgentEndReason::Aborted => out.block(&format!("{}\n", style.yellow("⏹ aborted"))),
                AgentEndReason::Error => out.block(&format!(
                    "{}\n",
                    style.red(&format!(
                        "✗ the run failed: {}",
                        error.as_deref().unwrap_or("unknown error")
                    ))
                )),
                AgentEndReason::Complete | AgentEndReason::Suspended => out.newline(),
            },
            HarnessEvent::Error { error, .. } => {
                out.block(&format!("{}\n", style.red(&format!("✗ {error}"))));
            }
            HarnessEvent::Info { message } => out.block(&format!("{}\n", style.dim(message))),
            HarnessEvent::ModeChanged { mode_id, .. } => {
                out.block(&format!("{}\n", style.cyan(&format!("mode: {mode_id}"))));
            }
            HarnessEvent::ModelChanged { model_id, .. } => {
                out.block(&format!("{}\n", style.cyan(&format!("model: {model_id}"))));
            }
            HarnessEvent::FollowUpQueued { count, .. } if *count > 0 => {
                let plural = if *count == 1 { "" } else { "s" };
                out.block(&format!(
                    "{}\n",
                    style.dim(&format!("{count} follow-up{plural} queued"))
                ));
            }
            _ => {}
        }
        self.close(out)
    }

    /// Prints the part of an assistant message's text not printed yet.
    fn stream(&mut self, message: &HarnessMessage, out: &mut Out) {
        if message.role != MessageRole::Assistant {
            return;
        }
        let text = message.text();
        let printed = match &self.text {
            Some((id, printed)) if *id == message.id => *printed,
            _ => {
                if !text.is_empty() {
                    out.newline();
                }
                0
            }
        };
        if let Some(new) = text.get(printed..) {
            out.raw(new);
        }
        self.text = Some((message.id.clone(), text.len().max(printed)));
    }

    fn tool_started(&mut self, id: &str, out: &mut Out) {
        if self.started.contains(id) {
            return;
        }
        let Some(tool) = self.state.active_tools.get(id) else {
            return;
        };
        self.started.insert(id.to_owned());
        if is_quiet_tool(&tool.name) {
            self.finished.insert(id.to_owned());
            return;
        }
        let name = self.style.bold(&format!("• {}", tool.name));
        let line = match call_summary(&tool.name, &tool.args) {
            summary if summary.is_empty() => format!("{name}\n"),
            summary => format!("{name} {summary}\n"),
        };
        out.block(&line);
    }

    fn shell_output(&mut self, id: &str, out: &mut Out) {
        let Some(tool) = self.state.active_tools.get(id) else {
            return;
        };
        let printed = self.shell.get(id).copied().unwrap_or(0);
        let Some(new) = tool.shell_output.get(printed..) else {
            return;
        };
        if new.is_empty() {
            return;
        }
        self.shell.insert(id.to_owned(), tool.shell_output.len());
        out.newline();
        let indented: String = new
            .split_inclusive('\n')
            .map(|line| format!("  {}", self.style.dim(line.trim_end_matches('\n'))) + "\n")
            .collect();
        out.raw(&indented);
    }
}

/// Tools whose calls the view does not list: the task list shows what the task tools did, and
/// the prompts show what the interactive ones asked.
fn is_quiet_tool(name: &str) -> bool {
    matches!(
        name,
        "task_write"
            | "task_update"
            | "task_complete"
            | "task_check"
            | "ask_user"
            | "submit_plan"
            | "request_access"
    )
}

/// A one-line summary of a tool call: its main argument, or its arguments as JSON.
pub fn call_summary(tool: &str, args: &Value) -> String {
    let main = [
        "path", "command", "pattern", "question", "orderId", "task", "title",
    ]
    .iter()
    .find_map(|key| args.get(key).and_then(Value::as_str));
    let summary = match (tool, main) {
        ("shell", Some(command)) => format!("`{command}`"),
        ("grep", Some(_)) => {
            let pattern = args.get("pattern").and_then(Value::as_str).unwrap_or("");
            match args.get("path").and_then(Value::as_str) {
                Some(path) => format!("/{pattern}/ in {path}"),
                None => format!("/{pattern}/"),
            }
        }
        (_, Some(main)) => main.to_owned(),
        (_, None) if args.as_object().is_some_and(|o| o.is_empty()) || args.is_null() => {
            String::new()
        }
        (_, None) => args.to_string(),
    };
    truncate(&one_line(&summary), SUMMARY)
}

/// A tool result in one line: its first line, and how many more there are.
pub fn result_line(result: &str, is_error: bool, style: Style) -> String {
    let result = result.trim();
    let lines = result.lines().count();
    let first = truncate(result.lines().next().unwrap_or(""), SUMMARY);
    let more = if lines > 1 {
        style.dim(&format!(" (+{} lines)", lines - 1))
    } else {
        String::new()
    };
    if is_error {
        format!("  ↳ {}{more}\n", style.red(&format!("✗ {first}")))
    } else {
        format!("  ↳ {}{more}\n", style.dim(&first))
    }
}

/// The task list, one line a task: `[x]` done, `[>]` in progress (in its progressive form),
/// `[ ]` pending.
pub fn render_tasks(tasks: &[TaskItem], style: Style) -> String {
    if tasks.is_empty() {
        return style.dim("Tasks: none\n");
    }
    let mut out = format!("{}\n", style.bold("Tasks"));
    for task in tasks {
        let line = match task.status {
            TaskStatus::Completed => style.green(&format!("  [x] {}", task.content)),
            TaskStatus::InProgress => style.yellow(&format!(
                "  [>] {}",
                task.active_form.as_deref().unwrap_or(&task.content)
            )),
            TaskStatus::Pending => format!("  [ ] {}", task.content),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// An approval prompt: the tool, its arguments, category and reason, and (interactive) the
/// answers.
pub fn render_approval(pending: &PendingApproval, interactive: bool, style: Style) -> String {
    let category = pending
        .category
        .map(|c| {
            format!(
                " [{}]",
                serde_json::to_value(c)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            )
        })
        .unwrap_or_default();
    let mut out = format!(
        "{} {} {}{}\n",
        style.yellow("?"),
        style.bold(&format!("{} wants to run:", pending.tool_name)),
        truncate(&pending.args.to_string(), 200),
        style.dim(&category)
    );
    if let Some(reason) = &pending.reason {
        out.push_str(&style.dim(&format!("  ({reason})\n")));
    }
    if interactive {
        out.push_str("  allow? [y]es / [n]o / [a]lways for this tool\n");
    }
    out
}

/// A question, plan or access request the agent waits on, with (interactive) how to answer.
pub fn render_suspension(pending: &PendingSuspension, interactive: bool, style: Style) -> String {
    let payload = &pending.suspend_payload;
    let text = |key: &str| payload.get(key).and_then(Value::as_str).unwrap_or("");
    let mut out = String::new();
    match pending.tool_name.as_str() {
        "ask_user" => {
            out.push_str(&format!(
                "{} {}\n",
                style.yellow("?"),
                style.bold(text("question"))
            ));
            let options = payload.get("options").and_then(Value::as_array);
            for (index, option) in options.into_iter().flatten().enumerate() {
                let label = option.get("label").and_then(Value::as_str).unwrap_or("");
                let detail = option
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|d| style.dim(&format!(" - {d}")))
                    .unwrap_or_default();
                out.push_str(&format!("  {}. {label}{detail}\n", index + 1));
            }
            if interactive {
                let multi =
                    payload.get("selectionMode").and_then(Value::as_str) == Some("multi_select");
                out.push_str(match (options.is_some(), multi) {
                    (true, true) => "  answer with numbers (e.g. 1,3) or your own words\n",
                    (true, false) => "  answer with a number or your own words\n",
                    (false, _) => "  type your answer\n",
                });
            }
        }
        "submit_plan" => {
            out.push_str(&format!(
                "{}\n",
                style.bold(&format!("Plan: {}", text("title")))
            ));
            for line in text("plan").lines() {
                out.push_str(&format!("  {line}\n"));
            }
            out.push_str(&format!("{} approve the plan?\n", style.yellow("?")));
            if interactive {
                out.push_str("  [y]es, or [n]o followed by what to change\n");
            }
        }
        "request_access" => {
            out.push_str(&format!(
                "{} {} {}\n",
                style.yellow("?"),
                style.bold(&format!("grant access to {}?", text("resource"))),
                style.dim(&format!("({})", text("reason")))
            ));
            if interactive {
                out.push_str("  [y]es / [n]o\n");
            }
        }
        harness_core::harness::ESCALATION => {
            out.push_str(&format!(
                "{} {}\n",
                style.yellow("?"),
                style.bold(&format!("the agent is stuck: {}", text("reason")))
            ));
            if interactive {
                out.push_str("  type a hint to go on, or press Enter to stop the run\n");
            }
        }
        other => {
            out.push_str(&format!(
                "{} {} {}\n",
                style.yellow("?"),
                style.bold(&format!("{other} waits for an answer:")),
                truncate(&payload.to_string(), 200)
            ));
            if interactive {
                out.push_str("  type the answer (text or JSON)\n");
            }
        }
    }
    out
}

/// The text on one line: newlines and runs of spaces become one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` characters, with `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use harness_core::event::{HarnessMessage, MessagePart};
    use harness_tags::ToolCategory;
    use serde_json::json;

    use super::*;

    fn message(id: &str, text: &str) -> Arc<HarnessMessage> {
        Arc::new(HarnessMessage {
            id: id.into(),
            role: MessageRole::Assistant,
            content: vec![MessagePart::Text { text: text.into() }],
            created_at: 0,
            stop_reason: None,
            error_message: None,
        })
    }

    fn render(view: &mut View, events: &[HarnessEvent]) -> String {
        events.iter().map(|e| view.apply(e)).collect()
    }

    #[test]
    fn streamed_text_is_printed_once_even_when_updates_skip_words() {
        let mut view = View::new(Style::plain(), true);
        let text = render(
            &mut view,
            &[
                HarnessEvent::AgentStart { run_id: "r".into() },
                HarnessEvent::MessageStart {
                    message: message("m1", ""),
                },
                HarnessEvent::MessageUpdate {
                    message: message("m1", "Hello"),
                },
                HarnessEvent::MessageUpdate {
                    message: message("m1", "Hello wor"),
                },
                HarnessEvent::MessageEnd {
                    message: message("m1", "Hello world."),
                },
                HarnessEvent::MessageEnd {
                    message: message("m2", "Second."),
                },
            ],
        );
        assert_eq!(text, "Hello world.\nSecond.\n");
        assert!(view.at_line_start());
    }

    #[test]
    fn tools_show_their_call_output_and_result() {
        let mut view = View::new(Style::plain(), true);
        let text = render(
            &mut view,
            &[
                HarnessEvent::MessageUpdate {
                    message: message("m1", "Let me look"),
                },
                HarnessEvent::ToolStart {
                    tool_call_id: "c1".into(),
                    tool_name: "shell".into(),
                    args: json!({"command": "cargo test"}),
                    category: Some(ToolCategory::Execute),
                },
                HarnessEvent::ShellOutput {
                    tool_call_id: "c1".into(),
                    output: "running 2 tests\nok".into(),
                    stream: harness_core::event::OutputStream::Stdout,
                },
                HarnessEvent::ToolEnd {
                    tool_call_id: "c1".into(),
                    result: "exit code: 101\nstdout:\n...".into(),
                    is_error: true,
                },
                HarnessEvent::ToolEnd {
                    tool_call_id: "c1".into(),
                    result: "again".into(),
                    is_error: true,
                },
            ],
        );
        assert_eq!(
            text,
            "Let me look\n• shell `cargo test`\n  running 2 tests\n  ok\n  ↳ ✗ exit code: 101 (+2 lines)\n"
        );
    }

    #[test]
    fn approvals_questions_and_plans_are_prompts() {
        let mut view = View::new(Style::plain(), true);
        let approval = view.apply(&HarnessEvent::ToolApprovalRequired {
            tool_call_id: "c1".into(),
            tool_name: "issue_refund".into(),
            args: json!({"amount": "49.00"}),
            category: Some(ToolCategory::Execute),
            reason: None,
        });
        assert_eq!(
            approval,
            "? issue_refund wants to run: {\"amount\":\"49.00\"} [execute]\n  allow? [y]es / [n]o / [a]lways for this tool\n"
        );
        let question = view.apply(&HarnessEvent::ToolSuspended {
            tool_call_id: "c2".into(),
            tool_name: "ask_user".into(),
            args: Value::Null,
            suspend_payload: json!({
                "question": "How?",
                "options": [{"label": "Card", "description": "slow"}, {"label": "Credit"}],
                "selectionMode": "single_select",
            }),
            resume_schema: None,
        });
        assert_eq!(
            question,
            "? How?\n  1. Card - slow\n  2. Credit\n  answer with a number or your own words\n"
        );
        let plan = render_suspension(
            &PendingSuspension {
                tool_call_id: "c3".into(),
                tool_name: "submit_plan".into(),
                suspend_payload: json!({"title": "Fix it", "plan": "1. a\n2. b"}),
                resume_schema: None,
            },
            false,
            Style::plain(),
        );
        assert_eq!(plan, "Plan: Fix it\n  1. a\n  2. b\n? approve the plan?\n");
    }

    #[test]
    fn the_task_list_marks_progress() {
        let tasks = vec![
            TaskItem {
                id: "a".into(),
                content: "Read".into(),
                status: TaskStatus::Completed,
                active_form: None,
            },
            TaskItem {
                id: "b".into(),
                content: "Write".into(),
                status: TaskStatus::InProgress,
                active_form: Some("Writing".into()),
            },
            TaskItem {
                id: "c".into(),
                content: "Ship".into(),
                status: TaskStatus::Pending,
                active_form: None,
            },
        ];
        assert_eq!(
            render_tasks(&tasks, Style::plain()),
            "Tasks\n  [x] Read\n  [>] Writing\n  [ ] Ship\n"
        );
        assert_eq!(
            render_tasks(&tasks[..1], Style::new(true)),
            "\x1b[1mTasks\x1b[0m\n\x1b[32m  [x] Read\x1b[0m\n"
        );
    }

    #[test]
    fn run_ends_and_errors_are_reported() {
        let mut view = View::new(Style::plain(), false);
        let text = render(
            &mut view,
            &[
                HarnessEvent::MessageUpdate {
                    message: message("m", "half"),
                },
                HarnessEvent::AgentEnd {
                    run_id: "r".into(),
                    reason: AgentEndReason::Aborted,
                    error: None,
                },
                HarnessEvent::AgentEnd {
                    run_id: "r".into(),
                    reason: AgentEndReason::Error,
                    error: Some("OPENAI_API_KEY is not set".into()),
                },
            ],
        );
        assert_eq!(
            text,
            "half\n⏹ aborted\n✗ the run failed: OPENAI_API_KEY is not set\n"
        );
    }

    #[test]
    fn summaries_pick_the_main_argument() {
        assert_eq!(
            call_summary("grep", &json!({"pattern": "fn", "path": "src"})),
            "/fn/ in src"
        );
        assert_eq!(call_summary("task_check", &json!({})), "");
        assert_eq!(call_summary("x", &json!({"a": 1})), "{\"a\":1}");
        assert_eq!(truncate("abcdef", 4), "abc…");
    }
}
