//! The observer's and reflector's instructions, how messages are shown to them, and how their
//! answers are read back.
//!
//! The log format: observations grouped under a `Date:` line, one line each, starting with the
//! time and a priority marker (`[high]`, `[medium]`, `[low]`, or `[done]` for finished work);
//! what the user asserted is kept apart from what the user asked. The current task and the
//! suggested continuation are separate sections, rendered *after* the log, so that the stable
//! part of the memory stays at the front of the prompt and the provider's cache keeps it.

use harness_tags::KernelMessage;

use crate::record::{Observed, OmRecord};

/// The observer's system prompt.
pub const OBSERVER_INSTRUCTIONS: &str = "\
You are the memory of a coding agent. You read the newest part of its conversation with a user \
and write down what must be remembered once those messages are gone: decisions, facts learned, \
the state of files and commands, what the user asserted, what the user asked, what was finished.

Write observations, one per line, grouped by day:

<observations>
Date: YYYY-MM-DD
- HH:MM [high] User asserts: ... (a requirement, a preference, a fact about their system)
- HH:MM [high] User asks: ... (a question or request, kept apart from assertions)
- HH:MM [medium] ... (what the agent learned or changed: files, commands, results)
- HH:MM [low] ... (details that may help later)
- HH:MM [done] ... (work that is finished)
</observations>
<current-task>
What the agent is working on right now, in one or two lines.
</current-task>
<suggested-continuation>
The next concrete step, in one or two lines.
</suggested-continuation>

Rules: use the times shown with the messages. Keep names, paths, numbers, errors and decisions \
exactly. Do not repeat what the existing observations already say. Be brief: one line per fact, \
no commentary. Never invent anything.";

/// The reflector's system prompt.
pub const REFLECTOR_INSTRUCTIONS: &str = "\
You maintain the long-term memory of a coding agent. You receive its observation log and rewrite \
it into a shorter log that keeps what still matters: merge repeated or superseded lines, fold \
finished work into [done] lines, drop details that no longer matter. Keep the format exactly: \
`Date: YYYY-MM-DD` headings, one line per observation starting with `HH:MM` and a priority \
marker ([high], [medium], [low], [done]), user assertions kept apart from user questions. Keep \
dates, names, paths, numbers and decisions exact. Answer with the rewritten log inside \
<observations></observations>, then the current task inside <current-task></current-task> and \
the next step inside <suggested-continuation></suggested-continuation>.";

/// Extra guidance for each reflection retry, stronger each time.
pub fn compression_guidance(attempt: u32, target_tokens: u64) -> String {
    match attempt {
        0 | 1 => format!("Keep the rewritten log under {target_tokens} tokens."),
        2 => format!(
            "Your last rewrite was too long. The log MUST fit in {target_tokens} tokens: drop \
             [low] lines, merge all [done] lines of a day into one, keep one line per decision."
        ),
        _ => format!(
            "Your rewrites are still too long. Keep ONLY [high] lines and one [done] summary line \
             per day, at most {} tokens in all.",
            target_tokens / 2
        ),
    }
}

/// Shows messages to the observer: each with its time, role and full content.
pub fn render_messages<'m>(messages: impl IntoIterator<Item = (i64, &'m KernelMessage)>) -> String {
    let mut text = String::new();
    for (created_at, message) in messages {
        text.push_str(&format!("[{}] ", format_minute(created_at)));
        match message {
            KernelMessage::User { content } => {
                text.push_str("user: ");
                text.push_str(content);
            }
            KernelMessage::System { content } => {
                text.push_str("system: ");
                text.push_str(content);
            }
            KernelMessage::Assistant {
                content,
                tool_calls,
                ..
            } => {
                text.push_str("agent: ");
                text.push_str(content);
                for call in tool_calls {
                    text.push_str(&format!("\n  -> calls {} {}", call.name, call.arguments));
                }
            }
            KernelMessage::ToolResult {
                tool_name,
                content,
                is_error,
                ..
            } => {
                let label = if *is_error { "failed" } else { "returned" };
                text.push_str(&format!("tool {tool_name} {label}: {content}"));
            }
        }
        text.push('\n');
    }
    text
}

/// The observer's user message: what it already knows, then the messages to observe.
pub fn observer_input(record: &OmRecord, messages: &str) -> String {
    let mut text = String::new();
    if record.has_memory() {
        text.push_str("Existing observations (do not repeat them):\n");
        text.push_str(&memory_log(record));
        text.push_str("\n\n");
    }
    text.push_str("New messages to observe:\n");
    text.push_str(messages);
    text
}

/// The reflector's user message: the whole log.
pub fn reflector_input(record: &OmRecord, guidance: &str) -> String {
    format!("{}\n\n{guidance}", memory_log(record))
}

/// The reflection and the observation blocks, oldest first.
pub fn memory_log(record: &OmRecord) -> String {
    record
        .reflection
        .iter()
        .chain(record.observations.iter())
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads an observer's or reflector's answer: the `<observations>` block (the whole answer
/// if the model left the tags out), the current task and the suggested continuation.
pub fn parse(answer: &str) -> Observed {
    let section = |tag: &str| -> Option<String> {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        let start = answer.find(&open)? + open.len();
        let end = answer[start..]
            .find(&close)
            .map_or(answer.len(), |at| start + at);
        let text = answer[start..end].trim();
        (!text.is_empty()).then(|| text.to_owned())
    };
    let observations = section("observations").unwrap_or_else(|| {
        let cut = ["<current-task>", "<suggested-continuation>"]
            .iter()
            .filter_map(|tag| answer.find(tag))
            .min()
            .unwrap_or(answer.len());
        answer[..cut].trim().to_owned()
    });
    Observed {
        observations,
        current_task: section("current-task"),
        suggested_continuation: section("suggested-continuation"),
    }
}

/// The memory as the agent sees it, appended to its system prompt: the stable log first, the
/// task sections after it.
pub fn render_memory(reflections: &[String], observations: &[String], record: &OmRecord) -> String {
    let mut text = String::from(
        "\n\n<memory>\nWhat happened earlier in this conversation, as observed (older messages are \
         no longer shown):\n",
    );
    if !reflections.is_empty() {
        text.push_str("<reflections>\n");
        text.push_str(&reflections.join("\n"));
        text.push_str("\n</reflections>\n");
    }
    if !observations.is_empty() {
        text.push_str("<observations>\n");
        text.push_str(&observations.join("\n"));
        text.push_str("\n</observations>\n");
    }
    if let Some(task) = &record.current_task {
        text.push_str(&format!("<current-task>\n{task}\n</current-task>\n"));
    }
    if let Some(next) = &record.suggested_continuation {
        text.push_str(&format!(
            "<suggested-continuation>\n{next}\n</suggested-continuation>\n"
        ));
    }
    text.push_str("</memory>");
    text
}

/// `YYYY-MM-DD HH:MM` (UTC) of a Unix time in milliseconds.
pub fn format_minute(unix_ms: i64) -> String {
    let seconds = unix_ms.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let in_day = seconds.rem_euclid(86_400);
    let (year, month, day) = harness_tags::util::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        in_day / 3600,
        in_day % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_calendar_dates() {
        assert_eq!(format_minute(0), "1970-01-01 00:00");
        assert_eq!(format_minute(951_782_400_000), "2000-02-29 00:00");
        assert_eq!(format_minute(1_795_349_100_000), "2026-11-22 12:05");
        assert_eq!(format_minute(-60_000), "1969-12-31 23:59");
    }

    #[test]
    fn answers_are_split_into_their_sections() {
        let answer = "Here you go.\n<observations>\nDate: 2026-11-22\n- 08:05 [high] User asserts: \
                      Postgres only\n</observations>\n<current-task>\nMigrating the schema\n</current-task>\n\
                      <suggested-continuation>Run the migration</suggested-continuation>";
        let observed = parse(answer);
        assert_eq!(
            observed.observations,
            "Date: 2026-11-22\n- 08:05 [high] User asserts: Postgres only"
        );
        assert_eq!(
            observed.current_task.as_deref(),
            Some("Migrating the schema")
        );
        assert_eq!(
            observed.suggested_continuation.as_deref(),
            Some("Run the migration")
        );

        let bare = parse("- 09:00 [done] Tests pass\n<current-task>none</current-task>");
        assert_eq!(bare.observations, "- 09:00 [done] Tests pass");
        assert_eq!(bare.current_task.as_deref(), Some("none"));
    }

    #[test]
    fn the_memory_puts_the_task_sections_after_the_log() {
        let record = OmRecord {
            current_task: Some("the parser".into()),
            suggested_continuation: Some("write tests".into()),
            ..OmRecord::default()
        };
        let text = render_memory(&["old".into()], &["new".into()], &record);
        let at = |needle: &str| text.find(needle).unwrap();
        assert!(at("<reflections>") < at("<observations>"));
        assert!(at("<observations>") < at("<current-task>"));
        assert!(at("<current-task>") < at("<suggested-continuation>"));
    }
}
