//! `harness run "TASK"`: one headless run, printed as text or as JSON lines.
//!
//! No one is at the keyboard, so the run answers for itself (see [`crate::answers`]): with
//! `--yes` it approves calls and plans and grants access requests; without it, it declines
//! them with a message the model sees. Questions are answered with a note that no one can
//! answer. Ctrl-C aborts the run.

use std::io::IsTerminal;
use std::process::ExitCode;

use futures_util::{FutureExt, StreamExt};
use harness_core::display::PendingSuspension;
use harness_core::event::{Delivery, EventEnvelope, HarnessEvent};
use harness_core::harness::{Harness, RunOutcome, RunSummary};

use crate::answers::{headless_answer, headless_approval};
use crate::args::{Global, RunArgs};
use crate::commands::write_stdout;
use crate::progress::Progress;
use crate::render::{Style, View, strip_controls, truncate};
use crate::setup::{Setup, ThreadChoice};
use crate::{CliError, demo_pace};

/// Exit status of an aborted run (as after SIGINT).
pub const ABORTED: u8 = 130;

/// Runs `harness run`.
pub async fn run(global: &Global, args: RunArgs) -> Result<ExitCode, CliError> {
    let person = !args.json && std::io::stdout().is_terminal();
    let setup = Setup::open(global, &args.model, demo_pace(person)).await?;
    setup.print_notice();
    let result = drive(&setup, &args).await;
    setup.harness.destroy().await;
    result
}

/// Prints events as text or JSON and answers for the user.
struct Printer {
    harness: Harness,
    json: bool,
    yes: bool,
    view: View,
    progress: Progress,
    style: Style,
}

impl Printer {
    fn show(&mut self, text: &str) -> Result<(), CliError> {
        if text.is_empty() {
            return Ok(());
        }
        let mut result = Ok(());
        self.progress
            .print(self.view.at_line_start(), || result = write_stdout(text));
        result
    }

    fn handle(&mut self, delivery: Delivery) -> Result<(), CliError> {
        let envelope = match delivery {
            Delivery::Event(envelope) => envelope,
            Delivery::Missed(count) => {
                let missed = format!("{count} events were missed (the output could not keep up)");
                if self.json {
                    // The gap in `seq` tells a reader of the JSON lines; a person gets a note.
                    eprintln!("harness: {missed}");
                    return Ok(());
                }
                self.view.resync((*self.harness.display_state()).clone());
                let line = format!("{}\n", self.style.dim(&missed));
                return self.show(&line);
            }
        };
        if self.json {
            self.json_line(&envelope)?;
        } else {
            let text = self.view.apply(&envelope.event);
            self.show(&text)?;
        }
        self.answer(&envelope.event)?;
        let state = self.view.state();
        let waiting = state.is_running
            && state.pending_approvals.is_empty()
            && state.pending_suspensions.is_empty();
        self.progress.set(waiting.then_some("working"));
        Ok(())
    }

    fn json_line(&mut self, envelope: &EventEnvelope) -> Result<(), CliError> {
        let line = serde_json::to_string(envelope).map_err(|error| CliError::Io {
            what: "cannot print an event".to_owned(),
            source: error.into(),
        })?;
        write_stdout(&(line + "\n"))
    }

    /// The headless answers: approvals and suspensions by `--yes`.
    fn answer(&mut self, event: &HarnessEvent) -> Result<(), CliError> {
        let note = match event {
            HarnessEvent::ToolApprovalRequired { tool_call_id, .. } => {
                let answer = headless_approval(self.yes);
                let approved = answer.approves();
                if self
                    .harness
                    .respond_to_tool_approval(answer, Some(tool_call_id))
                    .is_err()
                {
                    return Ok(());
                }
                if approved {
                    self.style.green("  → approved (--yes)")
                } else {
                    self.style
                        .yellow("  → declined: no one can approve here; run with --yes to allow")
                }
            }
            HarnessEvent::ToolSuspended {
                tool_call_id,
                tool_name,
                suspend_payload,
                resume_schema,
                ..
            } => {
                let pending = PendingSuspension {
                    tool_call_id: tool_call_id.clone(),
                    tool_name: tool_name.clone(),
                    suspend_payload: suspend_payload.clone(),
                    resume_schema: resume_schema.clone(),
                };
                let answer = headless_answer(&pending, self.yes);
                if self
                    .harness
                    .respond_to_tool_suspension(answer.clone(), Some(tool_call_id))
                    .is_err()
                {
                    return Ok(());
                }
                let shown = match &answer {
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                self.style.yellow(&format!(
                    "  → answered: {}",
                    truncate(&strip_controls(&shown), 120)
                ))
            }
            _ => return Ok(()),
        };
        if self.json {
            return Ok(());
        }
        let line = format!("{note}\n");
        self.show(&line)
    }
}

async fn drive(setup: &Setup, args: &RunArgs) -> Result<ExitCode, CliError> {
    let harness = &setup.harness;
    let style = Style::for_stdout();
    let mut printer = Printer {
        harness: harness.clone(),
        json: args.json,
        yes: args.yes,
        view: View::new(style, false),
        progress: if args.json {
            Progress::new(false)
        } else {
            Progress::for_stderr()
        },
        style,
    };
    let mut events = harness.subscribe();
    if let Some(notice) = setup.choice.notice() {
        if args.json {
            // Through the harness, so that it is printed in an envelope like every event.
            harness.emit(HarnessEvent::Info { message: notice });
        } else {
            printer.show(&format!("{}\n", style.yellow(&notice)))?;
        }
    }
    let thread = match &args.thread {
        Some(id) => ThreadChoice::Id(id.clone()),
        None => ThreadChoice::New(Some(truncate(args.task.trim(), 60))),
    };
    let thread = setup.bind(thread).await?;

    let mut send = tokio::spawn({
        let harness = harness.clone();
        let task = args.task.clone();
        async move { harness.send_message(task).await }
    });
    let mut interrupted = false;
    let mut listening = true;
    let finished = loop {
        tokio::select! {
            delivery = events.next(), if listening => match delivery {
                Some(delivery) => printer.handle(delivery)?,
                None => listening = false,
            },
            done = &mut send => break done,
            _ = tokio::signal::ctrl_c(), if !interrupted => {
                interrupted = true;
                harness.abort();
            }
        }
    };
    // Everything the run published is in the subscription by now.
    while let Some(Some(delivery)) = events.next().now_or_never() {
        printer.handle(delivery)?;
    }
    printer.progress.set(None);
    let summary =
        finished.map_err(|error| CliError::Usage(format!("the run's task failed: {error}")))??;
    if !args.json {
        let end = printer.view.finish_line();
        printer.show(&end)?;
        eprintln!("{}", style_footer(&summary, &thread.id));
    }
    Ok(exit_code(&summary, args.json))
}

fn style_footer(summary: &RunSummary, thread: &str) -> String {
    let style = Style::for_stderr();
    style.dim(&format!(
        "thread {thread} · {} tokens in, {} out · continue with `harness resume {thread}`",
        summary.usage.input_tokens, summary.usage.output_tokens
    ))
}

fn exit_code(summary: &RunSummary, json: bool) -> ExitCode {
    match summary.outcome {
        RunOutcome::Complete | RunOutcome::Suspended => ExitCode::SUCCESS,
        RunOutcome::Aborted => ExitCode::from(ABORTED),
        RunOutcome::MaxSteps | RunOutcome::Error => {
            if json && let Some(error) = &summary.error {
                eprintln!("harness: the run failed: {}", strip_controls(error));
            }
            if summary.outcome == RunOutcome::MaxSteps {
                eprintln!("harness: the run reached its step limit before finishing");
            }
            ExitCode::FAILURE
        }
    }
}
