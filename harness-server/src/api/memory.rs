//! The memory routes beyond blocks: an agent's archive (passages kept for search, not sent
//! with every model call), a search over blocks and archive, and snapshots exported as ZIP
//! archives and imported back.
//!
//! Search is lexical (no embeddings): a text's score is the share of the query's words it
//! contains, and 1 when it contains the whole query.

use std::io::{Read, Write};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use harness_tags::util::{rfc3339, unix_ms};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use super::agents::{MemoryBlock, check_label, slug};
use super::files::form;
use super::types::{Page, Pagination, check_length, whole};
use crate::agents::{ArchiveRecord, BlockRecord};
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::state::Shared;

const MAX_CONTENT: usize = 100_000;
/// The largest file of a snapshot read.
const MAX_SNAPSHOT_FILE: u64 = 64 * 1024 * 1024;

/// An archive entry.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct ArchiveEntry {
    id: String,
    content: String,
    created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
}

impl From<ArchiveRecord> for ArchiveEntry {
    fn from(record: ArchiveRecord) -> Self {
        ArchiveEntry {
            id: record.id,
            content: record.content,
            created_at: rfc3339(record.created_at),
            metadata: record.metadata,
        }
    }
}

/// Adds a passage to the archive.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddToArchiveRequest {
    /// 1-100000 characters.
    #[schema(min_length = 1, max_length = 100000)]
    content: String,
    #[serde(default, deserialize_with = "crate::error::object_only")]
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
}

/// `{ entry }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ArchiveEntryResponse {
    entry: ArchiveEntry,
}

/// What to search for.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchMemoryRequest {
    /// 1-1000 characters.
    #[schema(min_length = 1, max_length = 1000)]
    query: String,
    /// Default true.
    #[serde(default)]
    include_archive: Option<bool>,
    /// 1-100 (default 10).
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<f64>,
}

/// Where a result comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MemorySource {
    Block,
    Archive,
}

/// A search result.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct MemorySearchResult {
    source: MemorySource,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    content: String,
    /// 0-1: the share of the query's words the text contains (1 for the whole query).
    relevance_score: f64,
}

/// `{ results }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct SearchMemoryResponse {
    results: Vec<MemorySearchResult>,
}

/// What to export.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExportMemoryRequest {
    /// Default true.
    #[serde(default)]
    include_archive: Option<bool>,
}

/// A snapshot to import (`multipart/form-data`).
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // the document's description of the form; the handler reads the parts
pub(crate) struct ImportMemoryForm {
    /// A ZIP archive as `export` writes it (entries stored, not compressed).
    #[schema(value_type = String, format = Binary)]
    snapshot: Vec<u8>,
    #[schema(nullable = false)]
    merge_strategy: Option<MergeStrategy>,
}

/// What an import does with a block whose label the agent has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MergeStrategy {
    /// Replace it (the default).
    Overwrite,
    /// Keep it.
    Skip,
    /// Append the imported value to it.
    Merge,
}

/// What an import did.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct ImportMemoryResponse {
    blocks_imported: u64,
    archive_entries_imported: u64,
    /// Blocks the agent had already (kept with `skip`; read-only ones are always kept).
    conflicts: u64,
    warnings: Vec<String>,
}

/// The words of a text, lowercased.
fn words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.sort();
    words.dedup();
    words
}

/// How well `text` fits the query: 1 if it contains the whole query, else the share of the
/// query's words it contains.
fn relevance(text: &str, query: &str, query_words: &[String]) -> f64 {
    let text = text.to_lowercase();
    if text.contains(&query.to_lowercase()) {
        return 1.0;
    }
    if query_words.is_empty() {
        return 0.0;
    }
    let found = query_words
        .iter()
        .filter(|word| text.contains(word.as_str()))
        .count();
    found as f64 / query_words.len() as f64
}

#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/search",
    tag = "memory", operation_id = "memory.search",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    request_body = SearchMemoryRequest,
    responses((status = 200, body = SearchMemoryResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn search(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<SearchMemoryRequest>,
) -> Result<Json<SearchMemoryResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    check_length("query", &request.query, 1000)?;
    let limit = match request.limit {
        Some(limit) => whole("limit", limit, 1, 100)?,
        None => 10,
    };
    let agents = state.host.agents();
    agents.get(&agent_id).await?;
    let query = request.query.trim();
    let query_words = words(query);
    let mut results: Vec<MemorySearchResult> = Vec::new();
    for block in agents.blocks(&agent_id).await? {
        let score = relevance(&block.value, query, &query_words).max(relevance(
            &block.label,
            query,
            &query_words,
        ));
        if score > 0.0 {
            results.push(MemorySearchResult {
                source: MemorySource::Block,
                label: Some(block.label),
                content: block.value,
                relevance_score: score,
            });
        }
    }
    if request.include_archive.unwrap_or(true) {
        for entry in agents.archive(&agent_id).await? {
            let score = relevance(&entry.content, query, &query_words);
            if score > 0.0 {
                results.push(MemorySearchResult {
                    source: MemorySource::Archive,
                    label: None,
                    content: entry.content,
                    relevance_score: score,
                });
            }
        }
    }
    // Stable: blocks before archive entries of the same score.
    results.sort_by(|a, b| b.relevance_score.total_cmp(&a.relevance_score));
    results.truncate(usize::try_from(limit).unwrap_or(10));
    Ok(Json(SearchMemoryResponse { results }))
}

/// The agent's archive, newest first.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/archive",
    tag = "memory", operation_id = "memory.getArchive",
    params(("harnessId" = String, Path), ("agentId" = String, Path), Pagination),
    responses((status = 200, body = Page<ArchiveEntry>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn archive(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    ApiQuery(page): ApiQuery<Pagination>,
) -> Result<Json<Page<ArchiveEntry>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = page.checked()?;
    let agents = state.host.agents();
    agents.get(&agent_id).await?;
    let entries = agents
        .archive(&agent_id)
        .await?
        .into_iter()
        .rev()
        .map(ArchiveEntry::from)
        .collect();
    Ok(Json(Page::of(entries, page)))
}

/// Adds a passage to the archive (`201`; the same content is kept once: `200` with the entry
/// there).
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/archive",
    tag = "memory", operation_id = "memory.addToArchive",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    request_body = AddToArchiveRequest,
    responses((status = 201, body = ArchiveEntryResponse),
        (status = 200, body = ArchiveEntryResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn add_to_archive(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<AddToArchiveRequest>,
) -> Result<(StatusCode, Json<ArchiveEntryResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    check_length("content", &request.content, MAX_CONTENT)?;
    let agents = state.host.agents();
    agents.get(&agent_id).await?;
    let entry = ArchiveRecord {
        id: ArchiveRecord::id_of(&request.content),
        content: request.content,
        metadata: request.metadata,
        created_at: unix_ms(),
    };
    if agents.add_to_archive(&agent_id, &entry).await? {
        return Ok((
            StatusCode::CREATED,
            Json(ArchiveEntryResponse {
                entry: entry.into(),
            }),
        ));
    }
    let kept = agents
        .archive(&agent_id)
        .await?
        .into_iter()
        .find(|kept| kept.id == entry.id)
        .unwrap_or(entry);
    Ok((
        StatusCode::OK,
        Json(ArchiveEntryResponse { entry: kept.into() }),
    ))
}

/// The agent's memory as a ZIP archive: `blocks.json`, `archive.json` (unless
/// `include_archive` is false) and `metadata.json`.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/export",
    tag = "memory", operation_id = "memory.export",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    request_body = ExportMemoryRequest,
    responses((status = 200, content_type = "application/zip", body = String,
            description = "The snapshot (Content-Disposition: attachment)"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse)))]
pub(crate) async fn export(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<ExportMemoryRequest>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let agents = state.host.agents();
    let agent = agents.get(&agent_id).await?;
    let blocks: Vec<MemoryBlock> = agents
        .blocks(&agent_id)
        .await?
        .into_iter()
        .map(MemoryBlock::from)
        .collect();
    let include_archive = request.include_archive.unwrap_or(true);
    let archive: Vec<ArchiveEntry> = if include_archive {
        agents
            .archive(&agent_id)
            .await?
            .into_iter()
            .map(ArchiveEntry::from)
            .collect()
    } else {
        Vec::new()
    };
    let now = unix_ms();
    let key = slug(&agent.name);
    let metadata = json!({
        "format": "harness-rs memory snapshot 1",
        "agent_id": agent.id,
        "agent_key": key,
        "exported_at": rfc3339(now),
        "block_count": blocks.len(),
        "archive_count": archive.len(),
    });
    let mut files = vec![("blocks.json", json!(blocks)), ("metadata.json", metadata)];
    if include_archive {
        files.push(("archive.json", json!(archive)));
    }
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, value) in files {
        let text = serde_json::to_vec_pretty(&value)
            .map_err(|error| ApiError::internal(format!("{name} did not serialize: {error}")))?;
        zip.start_file(name, options)
            .and_then(|()| zip.write_all(&text).map_err(zip::result::ZipError::Io))
            .map_err(|error| ApiError::internal(format!("the snapshot failed: {error}")))?;
    }
    let bytes = zip
        .finish()
        .map_err(|error| ApiError::internal(format!("the snapshot failed: {error}")))?
        .into_inner();
    let stamp: String = rfc3339(now)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let disposition = format!("attachment; filename=\"{key}-memory-{stamp}.zip\"");
    let mut response = Response::new(axum::body::Body::from(bytes));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// A snapshot's file as JSON, `None` if the snapshot has no such file.
fn snapshot_file<T: serde::de::DeserializeOwned>(
    zip: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>,
    name: &str,
) -> Result<Option<T>, ApiError> {
    let invalid = |message: String| ApiError::unprocessable("snapshot", message);
    let file = match zip.by_name(name) {
        Ok(file) => file,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(error) => return Err(invalid(format!("`{name}` cannot be read: {error}"))),
    };
    let mut bytes = Vec::new();
    file.take(MAX_SNAPSHOT_FILE)
        .read_to_end(&mut bytes)
        .map_err(|error| invalid(format!("`{name}` cannot be read: {error}")))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| invalid(format!("`{name}` is not what export writes: {error}")))
}

/// A block as a snapshot holds it.
#[derive(Deserialize)]
struct SnapshotBlock {
    label: String,
    value: String,
    #[serde(default)]
    read_only: bool,
}

/// Imports a snapshot `export` wrote: its blocks by label (as `merge_strategy` says), and its
/// archive entries not kept already.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/import",
    tag = "memory", operation_id = "memory.import",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    request_body(content = ImportMemoryForm, content_type = "multipart/form-data"),
    responses((status = 200, body = ImportMemoryResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 422, body = ErrorResponse)))]
pub(crate) async fn import(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    request: axum::extract::Request,
) -> Result<Json<ImportMemoryResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let agents = state.host.agents();
    agents.get(&agent_id).await?;
    let form = form(request, &state, &["snapshot", "merge_strategy"]).await?;
    let strategy = match form.field("merge_strategy") {
        None | Some("overwrite") => MergeStrategy::Overwrite,
        Some("skip") => MergeStrategy::Skip,
        Some("merge") => MergeStrategy::Merge,
        Some(other) => {
            return Err(ApiError::invalid_field(
                "merge_strategy",
                format!("merge_strategy is overwrite, skip or merge, not `{other}`"),
            ));
        }
    };
    let [(_, _, bytes)] = form.files.as_slice() else {
        return Err(ApiError::invalid_field(
            "snapshot",
            "an import has exactly one `snapshot` part",
        ));
    };
    // A well-formed request whose file is not a snapshot: 422.
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.as_ref())).map_err(|error| {
        ApiError::unprocessable("snapshot", format!("not a ZIP archive: {error}"))
    })?;
    let blocks: Vec<SnapshotBlock> = snapshot_file(&mut zip, "blocks.json")?
        .ok_or_else(|| ApiError::unprocessable("snapshot", "a snapshot holds `blocks.json`"))?;
    let archive: Vec<ArchiveEntry> = snapshot_file(&mut zip, "archive.json")?.unwrap_or_default();
    let mut response = ImportMemoryResponse {
        blocks_imported: 0,
        archive_entries_imported: 0,
        conflicts: 0,
        warnings: Vec::new(),
    };
    for block in blocks {
        if let Err(error) = check_label(&block.label)
            .and_then(|()| check_length("value", &block.value, MAX_CONTENT))
        {
            response.warnings.push(format!(
                "block `{}` skipped: {}",
                block.label,
                error.message()
            ));
            continue;
        }
        let value = match agents.block(&agent_id, &block.label).await {
            Ok(existing) => {
                response.conflicts += 1;
                if existing.read_only {
                    response.warnings.push(format!(
                        "block `{}` is read-only here and was kept",
                        block.label
                    ));
                    continue;
                }
                match strategy {
                    MergeStrategy::Skip => continue,
                    MergeStrategy::Overwrite => block.value,
                    MergeStrategy::Merge => format!("{}\n\n{}", existing.value, block.value),
                }
            }
            Err(error) if error.status() == StatusCode::NOT_FOUND => block.value,
            Err(error) => return Err(error),
        };
        let record = BlockRecord {
            label: block.label,
            value,
            read_only: block.read_only,
            updated_at: unix_ms(),
        };
        agents.save_block(&agent_id, &record).await?;
        response.blocks_imported += 1;
    }
    for entry in archive {
        if entry.content.is_empty() || entry.content.chars().count() > MAX_CONTENT {
            response.warnings.push(format!(
                "archive entry `{}` skipped: empty or too long",
                entry.id
            ));
            continue;
        }
        let record = ArchiveRecord {
            id: ArchiveRecord::id_of(&entry.content),
            content: entry.content,
            metadata: entry.metadata,
            created_at: unix_ms(),
        };
        if agents.add_to_archive(&agent_id, &record).await? {
            response.archive_entries_imported += 1;
        }
    }
    Ok(Json(response))
}
