//! `harness threads list | show | rename | delete`.

use std::process::ExitCode;
use std::time::Duration;

use harness_core::store::{StoredMessage, ThreadRecord, WriteOp, metadata};
use harness_tags::KernelMessage;
use serde_json::{Value, json};

use crate::CliError;
use crate::args::{Global, ModelArgs, ThreadsCommand};
use crate::commands::write_stdout;
use crate::render::{Style, call_summary, strip_controls, truncate};
use crate::setup::Setup;

/// Runs a `threads` subcommand.
pub async fn threads(global: &Global, command: ThreadsCommand) -> Result<ExitCode, CliError> {
    let setup = Setup::open(global, &ModelArgs::default(), Duration::ZERO).await?;
    setup.print_notice();
    let harness = &setup.harness;
    let style = Style::for_stdout();
    let result = async {
        match command {
            ThreadsCommand::List { json } => {
                let threads = harness.list_threads(false).await?;
                let mut rows = Vec::new();
                for thread in &threads {
                    let count = harness.list_messages(Some(&thread.id)).await?.len();
                    rows.push((thread, count));
                }
                if json {
                    let list: Vec<Value> = rows
                        .iter()
                        .map(|(t, count)| {
                            json!({
                                "id": t.id,
                                "title": t.title,
                                "createdAt": t.created_at,
                                "updatedAt": t.updated_at,
                                "mode": mode_of(t),
                                "messages": count,
                            })
                        })
                        .collect();
                    write_stdout(&(Value::Array(list).to_string() + "\n"))
                } else {
                    write_stdout(&thread_table(&rows, style))
                }
            }
            ThreadsCommand::Show { id, json } => {
                let thread = find(&setup, &id).await?;
                let messages = harness.list_messages(Some(&thread.id)).await?;
                if json {
                    let value = json!({"thread": thread, "messages": messages});
                    write_stdout(&(value.to_string() + "\n"))
                } else {
                    write_stdout(&transcript(&thread, &messages, style))
                }
            }
            ThreadsCommand::Rename { id, title } => {
                let mut thread = find(&setup, &id).await?;
                thread.title = Some(title.clone());
                thread.updated_at = harness_tags::util::unix_ms();
                harness
                    .store()
                    .write(vec![WriteOp::UpdateThread(thread)])
                    .await?;
                write_stdout(&format!("renamed {id} to \"{title}\"\n"))
            }
            ThreadsCommand::Delete { id } => {
                find(&setup, &id).await?;
                harness.delete_thread(&id).await?;
                write_stdout(&format!("deleted {id}\n"))
            }
        }
    }
    .await;
    harness.destroy().await;
    result.map(|()| ExitCode::SUCCESS)
}

async fn find(setup: &Setup, id: &str) -> Result<ThreadRecord, CliError> {
    setup.harness.store().thread(id).await?.ok_or_else(|| {
        CliError::Usage(format!(
            "thread `{id}` does not exist in `{}`; list the threads with `harness threads \
                 list`",
            setup.db.display()
        ))
    })
}

fn mode_of(thread: &ThreadRecord) -> Option<&str> {
    thread
        .metadata
        .get(metadata::CURRENT_MODE)
        .and_then(Value::as_str)
}

/// The thread list as a table: id, last change (UTC), mode, messages, title.
pub fn thread_table(rows: &[(&ThreadRecord, usize)], style: Style) -> String {
    if rows.is_empty() {
        return "No threads yet; start one with `harness run \"...\"` or `harness chat`.\n"
            .to_owned();
    }
    let id_width = rows
        .iter()
        .map(|(t, _)| t.id.len())
        .max()
        .unwrap_or(2)
        .max(2);
    let mut out = style.bold(&format!(
        "{:id_width$}  {:16}  {:8}  {:>8}  TITLE",
        "ID", "UPDATED (UTC)", "MODE", "MESSAGES"
    ));
    out.push('\n');
    for (thread, count) in rows {
        out.push_str(&format!(
            "{:id_width$}  {:16}  {:8}  {:>8}  {}\n",
            thread.id,
            utc(thread.updated_at),
            mode_of(thread).unwrap_or("-"),
            count,
            strip_controls(thread.title.as_deref().unwrap_or("(untitled)"))
        ));
    }
    out
}

/// A thread's messages as text.
pub fn transcript(thread: &ThreadRecord, messages: &[StoredMessage], style: Style) -> String {
    let mut out = format!(
        "{}\n{}\n",
        style.bold(&strip_controls(
            thread.title.as_deref().unwrap_or("(untitled)")
        )),
        style.dim(&format!(
            "thread {} · created {} UTC · {} messages",
            thread.id,
            utc(thread.created_at),
            messages.len()
        ))
    );
    for stored in messages {
        match &stored.message {
            KernelMessage::User { content } => {
                let content = strip_controls(content);
                out.push_str(&format!("\n{} {content}\n", style.cyan("you:")));
            }
            KernelMessage::System { content } => {
                out.push_str(&style.dim(&format!("system: {}", strip_controls(content))));
                out.push('\n');
            }
            KernelMessage::Assistant {
                content,
                tool_calls,
                ..
            } => {
                if !content.is_empty() {
                    let content = strip_controls(content);
                    out.push_str(&format!("\n{} {content}\n", style.green("agent:")));
                }
                for call in tool_calls.iter().filter(|c| !is_task_tool(&c.name)) {
                    out.push_str(&format!(
                        "{} {}\n",
                        style.bold(&format!("• {}", strip_controls(&call.name))),
                        call_summary(&call.name, &call.arguments)
                    ));
                }
            }
            KernelMessage::ToolResult { tool_name, .. } if is_task_tool(tool_name) => {}
            KernelMessage::ToolResult {
                tool_name,
                content,
                is_error,
                ..
            } => {
                let content = strip_controls(content);
                let first = truncate(content.lines().next().unwrap_or(""), 100);
                let line = format!("  ↳ {}: {first}", strip_controls(tool_name));
                out.push_str(&if *is_error {
                    style.red(&line)
                } else {
                    style.dim(&line)
                });
                out.push('\n');
            }
        }
    }
    out
}

fn is_task_tool(name: &str) -> bool {
    name.starts_with("task_")
}

/// `YYYY-MM-DD HH:MM` in UTC for Unix milliseconds.
pub fn utc(ms: i64) -> String {
    let seconds = ms.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let minutes = seconds.rem_euclid(86_400) / 60;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        minutes / 60,
        minutes % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(id: &str, title: Option<&str>) -> ThreadRecord {
        ThreadRecord {
            id: id.into(),
            resource_id: "default".into(),
            title: title.map(Into::into),
            created_at: 0,
            updated_at: 1_741_010_700_000,
            metadata: serde_json::Map::new(),
        }
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00");
        assert_eq!(utc(1_741_010_700_000), "2025-03-03 14:05");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00");
    }

    #[test]
    fn the_table_and_the_transcript() {
        let a = thread("t1", Some("Refund"));
        let table = thread_table(&[(&a, 4)], Style::plain());
        assert_eq!(
            table,
            "ID  UPDATED (UTC)     MODE      MESSAGES  TITLE\nt1  2025-03-03 14:05  -                4  Refund\n"
        );
        assert!(thread_table(&[], Style::plain()).starts_with("No threads yet"));
        let messages = vec![
            StoredMessage {
                id: "m1".into(),
                thread_id: "t1".into(),
                created_at: 0,
                run_id: None,
                message: KernelMessage::user("refund 1042"),
            },
            StoredMessage {
                id: "m2".into(),
                thread_id: "t1".into(),
                created_at: 0,
                run_id: None,
                message: KernelMessage::tool_result(
                    "c1",
                    "lookup_order",
                    "<EMAIL_ADDRESS>\nmore",
                    false,
                ),
            },
        ];
        let text = transcript(&a, &messages, Style::plain());
        assert!(
            text.ends_with("\nyou: refund 1042\n  ↳ lookup_order: <EMAIL_ADDRESS>\n"),
            "{text}"
        );
    }
}
