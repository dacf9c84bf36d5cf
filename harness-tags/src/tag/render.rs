//! Renders the catalog as Markdown (`TAGS.md`) and as JSON.

use std::fmt::Write as _;

use serde_json::json;

use super::TagDescriptor;

/// Renders tags as the Markdown document checked in as `TAGS.md`: a summary table, then one
/// section per tag with its full description.
pub fn render_markdown(tags: &[&'static TagDescriptor]) -> String {
    let mut out = String::new();
    out.push_str("# Tag catalog\n\n");
    out.push_str(
        "Generated from `harness_tags::catalog()`; do not edit by hand. Regenerate with\n\
         `UPDATE_TAGS_MD=1 cargo test -p harness-tags --test all catalog`.\n\n\
         Every tag is an interception point: `on` handlers reshape its payload, `tap` handlers\n\
         observe the final payload. A tag marked *suppressible* lets an `on` handler return\n\
         `Flow::Suppress`; the emit site says what that means.\n\n",
    );
    let _ = writeln!(out, "{} tags.\n", tags.len());
    out.push_str("| tag | phase | payload | context | suppressible | summary |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for tag in tags {
        let summary = summary(tag.description());
        let _ = writeln!(
            out,
            "| [`{name}`](#{anchor}) | {phase} | `{payload}` | `{ctx}` | {supp} | {summary} |",
            name = tag.name(),
            anchor = anchor(tag.name()),
            phase = tag.phase(),
            payload = tag.payload_type(),
            ctx = tag.ctx_type(),
            supp = if tag.suppressible() { "yes" } else { "no" },
        );
    }
    for tag in tags {
        let _ = write!(
            out,
            "\n## `{name}`\n\n- phase: `{phase}`\n- payload: `{payload}`\n- context: `{ctx}`\n\
             - suppressible: {supp}\n- declared in: `{module}`\n\n{description}\n",
            name = tag.name(),
            phase = tag.phase(),
            payload = tag.payload_type(),
            ctx = tag.ctx_type(),
            supp = if tag.suppressible() { "yes" } else { "no" },
            module = tag.module_path(),
            description = tag.description(),
        );
    }
    out
}

/// Renders tags as a JSON array: name, phase, description, suppressible, payload and context
/// types and JSON Schemas, and the declaring crate.
pub fn render_json(tags: &[&'static TagDescriptor]) -> serde_json::Value {
    tags.iter()
        .map(|tag| {
            json!({
                "name": tag.name(),
                "phase": tag.phase(),
                "description": tag.description(),
                "suppressible": tag.suppressible(),
                "payloadType": tag.payload_type(),
                "ctxType": tag.ctx_type(),
                "crate": tag.crate_name(),
                "payloadSchema": tag.payload_schema(),
                "ctxSchema": tag.ctx_schema(),
            })
        })
        .collect()
}

/// The first paragraph of a description, on one line.
fn summary(description: &str) -> String {
    description
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The anchor GitHub generates for a `## \`name\`` heading.
fn anchor(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}
