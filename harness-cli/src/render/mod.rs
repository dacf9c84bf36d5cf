//! Terminal rendering: pure functions from the display state to text, and the [`View`] that
//! prints what changed.
//!
//! A [`View`] folds every event into its own [`DisplayState`] with the harness's reducer
//! ([`harness_core::display::reduce`], the one the harness's snapshots come from) and renders
//! what the event changed, reading the state: streamed text, tools with their output, progress
//! (an MCP server's progress notifications, any tool's partial results) and results, approval
//! prompts, questions, plans, the task list and subagents. Folding events
//! itself rather than waiting for batched snapshots means no streamed word is lost between two
//! snapshots (a message's last words and its end often share one). After missing events the
//! view adopts the harness's snapshot ([`View::resync`]).
//!
//! Everything a model, a tool or a server wrote is printed through [`strip_controls`] (or, in
//! approval prompts, [`show_controls`]), so no escape sequence or control character of theirs
//! reaches the terminal.
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

mod prompts;
mod terminal;

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;

use harness_core::display::{DisplayState, reduce};
use harness_core::event::{AgentEndReason, HarnessEvent, HarnessMessage, MessageRole};
use harness_core::task::TaskItem;
use serde_json::Value;

pub use prompts::{render_approval, render_suspension, render_tasks};
pub use terminal::{show_controls, strip_controls};

/// The longest one-line summary of arguments or results.
const SUMMARY: usize = 100;
/// The most progress lines printed for one tool call: a server may report progress without
/// end, and the result line says how it ended.
const MAX_PROGRESS_LINES: usize = 20;

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
    /// Per tool call: the last progress line printed and how many were.
    progress: HashMap<String, (String, usize)>,
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
            progress: HashMap::new(),
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
            HarnessEvent::ToolUpdate {
                tool_call_id,
                partial_result,
            } => {
                self.tool_started(tool_call_id, &mut out);
                self.tool_progress(tool_call_id, partial_result, &mut out);
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
                    .pending_approvals
                    .iter()
                    .find(|p| p.tool_call_id == *tool_call_id)
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
                    style.cyan(&format!("↳ {}", strip_controls(agent_type))),
                    style.dim(&format!(
                        "{} ({}{how})",
                        one_line(&strip_controls(task)),
                        strip_controls(model_id)
                    ))
                ));
            }
            HarnessEvent::SubagentEnd {
                agent_type,
                is_error,
                duration_ms,
                ..
            } => {
                let line = format!(
                    "↳ {} {} in {:.1} s",
                    strip_controls(agent_type),
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
                        strip_controls(error.as_deref().unwrap_or("unknown error"))
                    ))
                )),
                AgentEndReason::Complete | AgentEndReason::Suspended => out.newline(),
            },
            HarnessEvent::Error { error, .. } => {
                out.block(&format!(
                    "{}\n",
                    style.red(&format!("✗ {}", strip_controls(error)))
                ));
            }
            HarnessEvent::Info { message } => {
                out.block(&format!("{}\n", style.dim(&strip_controls(message))));
            }
            HarnessEvent::ModeChanged { mode_id, .. } => {
                let line = format!("mode: {}", strip_controls(mode_id));
                out.block(&format!("{}\n", style.cyan(&line)));
            }
            HarnessEvent::ModelChanged { model_id, .. } => {
                let line = format!("model: {}", strip_controls(model_id));
                out.block(&format!("{}\n", style.cyan(&line)));
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
            out.raw(&strip_controls(new));
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
        let name = self
            .style
            .bold(&format!("• {}", strip_controls(&tool.name)));
        let line = match call_summary(&tool.name, &tool.args) {
            summary if summary.is_empty() => format!("{name}\n"),
            summary => format!("{name} {summary}\n"),
        };
        out.block(&line);
    }

    /// Prints a progress line when it says something new, up to [`MAX_PROGRESS_LINES`].
    fn tool_progress(&mut self, id: &str, partial: &Value, out: &mut Out) {
        if self.finished.contains(id) {
            return;
        }
        let line = progress_summary(partial);
        if line.is_empty() {
            return;
        }
        let (last, printed) = self.progress.entry(id.to_owned()).or_default();
        if *last == line || *printed > MAX_PROGRESS_LINES {
            return;
        }
        *printed += 1;
        let shown = if *printed > MAX_PROGRESS_LINES {
            "(further progress not shown)"
        } else {
            line.as_str()
        };
        out.block(&format!("  {}\n", self.style.dim(&format!("⋯ {shown}"))));
        *last = line;
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
        let indented: String = strip_controls(new)
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
    truncate(&one_line(&strip_controls(&summary)), SUMMARY)
}

/// A tool's partial result in one line: `3/10 message` for progress (what an MCP server's
/// progress notifications become), else the text or the JSON.
pub fn progress_summary(partial: &Value) -> String {
    let number = |value: &Value| {
        value.as_f64().map(|n| {
            if n.fract() == 0.0 && n.abs() < 1e15 {
                format!("{}", n as i64)
            } else {
                format!("{n:.1}")
            }
        })
    };
    let summary = match partial {
        Value::Object(fields) if fields.get("progress").is_some_and(Value::is_number) => {
            let mut line = fields.get("progress").and_then(number).unwrap_or_default();
            if let Some(total) = fields.get("total").and_then(number) {
                line = format!("{line}/{total}");
            }
            if let Some(message) = fields.get("message").and_then(Value::as_str) {
                line = format!("{line} {message}");
            }
            line
        }
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    truncate(&one_line(&strip_controls(&summary)), SUMMARY)
}

/// A tool result in one line: its first line, and how many more there are.
pub fn result_line(result: &str, is_error: bool, style: Style) -> String {
    let result = strip_controls(result);
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

    use harness_core::display::PendingSuspension;
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
    fn nothing_the_model_or_a_tool_writes_reaches_the_terminal_raw() {
        let mut view = View::new(Style::plain(), true);
        let text = render(
            &mut view,
            &[
                HarnessEvent::MessageUpdate {
                    message: message("m1", "Done.\x1b]0;"),
                },
                HarnessEvent::MessageEnd {
                    message: message("m1", "Done.\x1b]0;\x1b[2J"),
                },
                HarnessEvent::ToolStart {
                    tool_call_id: "c1".into(),
                    tool_name: "shell".into(),
                    args: json!({"command": "cat log\x1b[8m"}),
                    category: Some(ToolCategory::Execute),
                },
                HarnessEvent::ShellOutput {
                    tool_call_id: "c1".into(),
                    output: "\x1b[31mred\x1b[0m\r\n\x07".into(),
                    stream: harness_core::event::OutputStream::Stdout,
                },
                HarnessEvent::ToolEnd {
                    tool_call_id: "c1".into(),
                    result: "exit code: 0\x1bc".into(),
                    is_error: false,
                },
                HarnessEvent::Error {
                    error: "server said \x1b]52;c;aGk=\x07".into(),
                    error_type: None,
                    retryable: None,
                    retry_delay_ms: None,
                },
            ],
        );
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert_eq!(
            text,
            "Done.0;\n• shell `cat log`\n  red\n  ↳ exit code: 0\n✗ server said \n"
        );
    }

    #[test]
    fn mcp_tools_show_like_any_other_with_their_progress_bounded() {
        let mut view = View::new(Style::plain(), false);
        let update = |progress: f64, message: &str| HarnessEvent::ToolUpdate {
            tool_call_id: "c1".into(),
            partial_result: json!({"progress": progress, "total": 3, "message": message}),
        };
        let text = render(
            &mut view,
            &[
                HarnessEvent::ToolStart {
                    tool_call_id: "c1".into(),
                    tool_name: "everything__trigger-long-running-operation".into(),
                    args: json!({"duration": 3, "steps": 3}),
                    category: Some(ToolCategory::Mcp),
                },
                update(1.0, "step 1\x1b[2J"),
                update(1.0, "step 1\x1b[2J"),
                update(2.5, "step 2"),
                HarnessEvent::ToolEnd {
                    tool_call_id: "c1".into(),
                    result: "Long running operation completed.".into(),
                    is_error: false,
                },
                update(3.0, "late"),
            ],
        );
        assert_eq!(
            text,
            "• everything__trigger-long-running-operation {\"duration\":3,\"steps\":3}\n  \
             ⋯ 1/3 step 1\n  ⋯ 2.5/3 step 2\n  ↳ Long running operation completed.\n",
            "a repeated update is not printed again, nor one after the end"
        );

        let mut view = View::new(Style::plain(), false);
        let flood: Vec<HarnessEvent> = (0..1000)
            .map(|step| HarnessEvent::ToolUpdate {
                tool_call_id: "c2".into(),
                partial_result: json!({ "progress": step }),
            })
            .collect();
        view.apply(&HarnessEvent::ToolStart {
            tool_call_id: "c2".into(),
            tool_name: "slow__job".into(),
            args: json!({}),
            category: Some(ToolCategory::Mcp),
        });
        let text = render(&mut view, &flood);
        assert_eq!(text.lines().count(), MAX_PROGRESS_LINES + 1, "{text}");
        assert!(text.ends_with("⋯ (further progress not shown)\n"), "{text}");
        assert_eq!(progress_summary(&json!("halfway")), "halfway");
        assert_eq!(progress_summary(&json!({"rows": 5})), "{\"rows\":5}");
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
