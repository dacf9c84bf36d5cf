//! `harness tags` and `harness redact`.

use std::io::{Read, Write};
use std::process::ExitCode;

use harness_tags::TagDescriptor;

use crate::CliError;
use crate::render::truncate;

/// The catalog as a text table: name, phase, payload, suppressible and the first sentence of
/// the description.
pub fn tags_table(tags: &[&'static TagDescriptor]) -> String {
    let width = |f: fn(&TagDescriptor) -> usize| tags.iter().map(|t| f(t)).max().unwrap_or(0);
    let name_width = width(|t| t.name().len()).max(4);
    let phase_width = width(|t| t.phase().to_string().len()).max(5);
    let payload_width = width(|t| t.payload_type().len()).max(7);
    let mut out = format!(
        "{:name_width$}  {:phase_width$}  {:payload_width$}  {}\n",
        "TAG", "PHASE", "PAYLOAD", "WHAT"
    );
    for tag in tags {
        let summary: Vec<&str> = tag
            .description()
            .lines()
            .map(str::trim)
            .take_while(|line| !line.is_empty())
            .collect();
        let suppressible = if tag.suppressible() {
            " (suppressible)"
        } else {
            ""
        };
        out.push_str(&format!(
            "{:name_width$}  {:phase_width$}  {:payload_width$}  {}\n",
            tag.name(),
            tag.phase().to_string(),
            tag.payload_type(),
            truncate(&format!("{}{suppressible}", summary.join(" ")), 90),
        ));
    }
    out.push_str(&format!(
        "\n{} tags; TAGS.md has their payloads, contexts and emit sites. `--json` adds the \
         JSON Schemas.\n",
        tags.len()
    ));
    out
}

/// `harness tags [--json]`.
pub fn tags(json: bool) -> Result<ExitCode, CliError> {
    let catalog = harness_tags::catalog();
    let text = if json {
        let rendered = harness_tags::tag::render_json(catalog);
        serde_json::to_string_pretty(&rendered).map_err(|error| CliError::Io {
            what: "cannot print the catalog".to_owned(),
            source: error.into(),
        })? + "\n"
    } else {
        tags_table(catalog)
    };
    write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// What `harness redact` prints for `text`: the redacted text, or with `json` the findings
/// and the text as one JSON object and a newline (the `redact` example prints the same).
pub fn redact_text(text: &str, json: bool) -> Result<String, CliError> {
    if json {
        let report = harness_redaction::report(text)?;
        let line = serde_json::to_string(&report).map_err(|error| CliError::Io {
            what: "cannot print the report".to_owned(),
            source: error.into(),
        })?;
        Ok(line + "\n")
    } else {
        Ok(harness_redaction::redact(text)?)
    }
}

/// `harness redact [--json]`: standard input to standard output.
pub fn redact(json: bool) -> Result<ExitCode, CliError> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .map_err(|source| CliError::Io {
            what: "cannot read standard input".to_owned(),
            source,
        })?;
    let text = String::from_utf8(input).map_err(|_| {
        CliError::Usage("the input is not UTF-8; convert it first (e.g. with iconv)".to_owned())
    })?;
    write_stdout(&redact_text(&text, json)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes to standard output; a closed pipe is not an error worth a message.
pub(crate) fn write_stdout(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::Io {
            what: "cannot write to standard output".to_owned(),
            source: error,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_tag() {
        let table = tags_table(harness_tags::catalog());
        assert!(table.starts_with("TAG"));
        let prompt = table
            .lines()
            .find(|l| l.starts_with("prompt.system"))
            .unwrap();
        assert!(prompt.contains("String"), "{prompt}");
        assert!(table.contains(&format!("{} tags;", harness_tags::catalog().len())));
    }

    #[test]
    fn redaction_matches_the_library() {
        let text = "Alice <alice@example.com> paid with 4111 1111 1111 1111";
        assert_eq!(
            redact_text(text, false).unwrap(),
            "Alice <<EMAIL_ADDRESS>> paid with <CREDIT_CARD>"
        );
        let json: serde_json::Value =
            serde_json::from_str(&redact_text(text, true).unwrap()).unwrap();
        assert_eq!(json["findings"][0]["entity_type"], "EMAIL_ADDRESS");
    }
}
