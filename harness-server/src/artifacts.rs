//! An execution's artifacts: the files its `write_file` calls wrote, as the execution routes
//! and the `execution.completed` webhooks report them.

use harness_workspace::Workspace;
use serde::Serialize;
use utoipa::ToSchema;

use crate::host::ExecutionRecord;

/// A file an execution produced.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ArtifactSummary {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) mime_type: String,
    pub(crate) size_bytes: u64,
}

/// The files an execution wrote: the paths of its `write_file` calls that completed (the
/// workspace tool's), first write first; an artifact's id is `art_<n>`, from 1.
pub(crate) fn artifact_paths(record: &ExecutionRecord) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for call in &record.tool_calls {
        if call.name == "write_file"
            && call.status == "completed"
            && let Some(path) = call.input["path"].as_str()
            && !paths.iter().any(|known| known == path)
        {
            paths.push(path.to_owned());
        }
    }
    paths
}

/// The artifacts of an execution, with their current size in the workspace (0 without one,
/// or once deleted).
pub(crate) fn artifacts(
    workspace: Option<&Workspace>,
    record: &ExecutionRecord,
) -> Vec<ArtifactSummary> {
    artifact_paths(record)
        .into_iter()
        .zip(1..)
        .map(|(path, n): (String, u32)| {
            let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
            let size_bytes = workspace
                .and_then(|workspace| workspace.entry(&path).ok())
                .map_or(0, |entry| entry.size);
            ArtifactSummary {
                id: format!("art_{n}"),
                mime_type: mime(&name).to_owned(),
                name,
                size_bytes,
            }
        })
        .collect()
}

/// A MIME type from a file name's extension.
pub(crate) fn mime(name: &str) -> &'static str {
    let extension = name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase());
    match extension.as_deref() {
        Some("txt" | "log") => "text/plain",
        Some("md") => "text/markdown",
        Some("json") => "application/json",
        Some("toml") => "application/toml",
        Some("yaml" | "yml") => "application/yaml",
        Some("html" | "htm") => "text/html",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("ts") => "text/typescript",
        Some("rs") => "text/x-rust",
        Some("py") => "text/x-python",
        Some("csv") => "text/csv",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("svg") => "image/svg+xml",
        Some("pdf") => "application/pdf",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    }
}
