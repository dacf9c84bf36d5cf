//! `harness tags`, `harness redact`, `harness trust` and `harness untrust`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use harness_tags::TagDescriptor;

use crate::CliError;
use crate::args::{TrustArgs, UntrustArgs};
use crate::config::{DEFAULT_FILE, Settings, TrustLevel, TrustList, user_config_dir};
use crate::render::{show_controls, truncate};

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

/// `harness trust [PATH] [--list]`.
pub fn trust(args: TrustArgs) -> Result<ExitCode, CliError> {
    let dir = config_dir()?;
    if args.list {
        write_stdout(&trust_listing(&TrustList::load(&dir)?))?;
        return Ok(ExitCode::SUCCESS);
    }
    let folder = folder(args.path.as_deref())?;
    // What its harness.toml sets that trust lets through (nothing to say if it has errors).
    let file = folder.join(DEFAULT_FILE);
    let widened = Settings::load_from(Some(&file), None)
        .map(|settings| settings.trust().ignored.clone())
        .unwrap_or_default();
    record(&dir, &folder, TrustLevel::Trusted)?;
    let mut text = format!("trusted {} and the folders beneath it\n", folder.display());
    if !widened.is_empty() {
        text.push_str(&format!(
            "its {DEFAULT_FILE} now applies in full, including: {}\n",
            show_controls(&widened.join(", "))
        ));
    }
    write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `harness untrust [PATH]`.
pub fn untrust(args: UntrustArgs) -> Result<ExitCode, CliError> {
    let dir = config_dir()?;
    let folder = folder(args.path.as_deref())?;
    record(&dir, &folder, TrustLevel::Untrusted)?;
    write_stdout(&format!(
        "untrusted {}: its {DEFAULT_FILE} may not widen what runs or where keys go\n",
        folder.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Records a decision in the trust list of `dir`.
pub fn record(dir: &Path, folder: &Path, level: TrustLevel) -> Result<(), CliError> {
    let mut list = TrustList::load(dir)?;
    list.set(folder.to_path_buf(), level);
    Ok(list.save()?)
}

/// The decisions, one a line, and where they are kept.
pub fn trust_listing(list: &TrustList) -> String {
    let mut out = String::new();
    for (folder, level) in list.entries() {
        let level = match level {
            TrustLevel::Trusted => "trusted  ",
            TrustLevel::Untrusted => "untrusted",
        };
        out.push_str(&format!("{level}  {}\n", folder.display()));
    }
    if out.is_empty() {
        out.push_str("No folder is trusted or untrusted yet; `harness trust [PATH]` trusts one.\n");
    }
    out.push_str(&format!("(kept in {})\n", list.file().display()));
    out
}

fn config_dir() -> Result<PathBuf, CliError> {
    user_config_dir(&|var| std::env::var_os(var)).ok_or_else(|| {
        CliError::Usage(
            "there is no configuration directory to keep the trust list in: set HOME, \
             XDG_CONFIG_HOME or HARNESS_CONFIG_DIR"
                .to_owned(),
        )
    })
}

/// The folder a trust command names (default: the current directory), canonical.
fn folder(path: Option<&Path>) -> Result<PathBuf, CliError> {
    let path = path.unwrap_or(Path::new("."));
    let folder = path.canonicalize().map_err(|source| CliError::Io {
        what: format!("cannot find the folder `{}`", path.display()),
        source,
    })?;
    if !folder.is_dir() {
        return Err(CliError::Usage(format!(
            "`{}` is not a folder; trust the folder that holds its {DEFAULT_FILE}",
            path.display()
        )));
    }
    Ok(folder)
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
