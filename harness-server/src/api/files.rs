//! The files group: the workspace's files, every path resolved beneath its root when it is
//! opened (as the workspace tools resolve theirs), so that `..`, an absolute path or a link
//! cannot lead outside.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use harness_core::tool::ToolError;
use harness_tags::util::rfc3339;
use harness_workspace::{Entry, Workspace, Written};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::state::Shared;

/// The most bytes a read or download serves.
const MAX_READ: u64 = 64 * 1024 * 1024;

/// A file or directory.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct FileInfo {
    path: String,
    name: String,
    /// `file` or `directory`.
    #[serde(rename = "type")]
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    size_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    modified_at: String,
}

impl From<Entry> for FileInfo {
    fn from(entry: Entry) -> Self {
        FileInfo {
            mime_type: (!entry.is_dir).then(|| mime(&entry.name).to_owned()),
            size_bytes: (!entry.is_dir).then_some(entry.size),
            kind: if entry.is_dir { "directory" } else { "file" }.to_owned(),
            modified_at: rfc3339(entry.modified_ms.unwrap_or(0)),
            path: entry.path,
            name: entry.name,
        }
    }
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

/// The workspace, or `501` for `operation` when the server has none.
fn workspace<'a>(state: &'a Shared, operation: &str) -> Result<&'a Workspace, ApiError> {
    state
        .workspace
        .as_ref()
        .ok_or_else(|| ApiError::not_built(operation))
}

/// A refusal of the workspace as the spec's error, told apart by the workspace's messages
/// (the ones its tools give the model): outside the workspace `403`, missing `404`, a
/// directory where a file is meant (or one not empty), or something not a regular file `409`,
/// too large to serve `413`.
fn refused(path: &str, error: ToolError) -> ApiError {
    let message = error.to_string();
    let has = |part: &str| message.contains(part);
    if has("outside the workspace") {
        ApiError::forbidden(message)
    } else if has("does not exist") || has("No such file") {
        ApiError::not_found("file", path)
    } else if has("is a directory")
        || has("Is a directory")
        || has("not empty")
        || has("not a regular file")
        || has("Not a directory")
    {
        ApiError::conflict(message)
    } else if has("more than the") {
        ApiError::payload_too_large()
    } else {
        ApiError::invalid_field("path", message)
    }
}

/// The directory listed.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListOptions {
    /// A directory of the workspace (default: its root).
    path: Option<String>,
    /// Also what the directories beneath hold (default false); at most 10,000 entries.
    recursive: Option<bool>,
}

/// `{ files, path }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct FileList {
    files: Vec<FileInfo>,
    path: String,
}

/// Lists a directory of the workspace.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/files", tag = "files",
    operation_id = "files.list", params(("harnessId" = String, Path), ListOptions),
    responses((status = 200, body = FileList), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 501, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(options): ApiQuery<ListOptions>,
) -> Result<Json<FileList>, ApiError> {
    state.check_harness(&harness_id)?;
    let workspace = workspace(&state, "files.list")?;
    let path = options.path.unwrap_or_else(|| ".".to_owned());
    let asked = path.trim_start_matches('/');
    let asked = if asked.is_empty() { "." } else { asked };
    let mut files = Vec::new();
    let mut pending = vec![asked.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in workspace
            .entries(&dir)
            .map_err(|error| refused(&dir, error))?
        {
            if options.recursive.unwrap_or(false) && entry.is_dir {
                pending.push(entry.path.clone());
            }
            files.push(FileInfo::from(entry));
            if files.len() >= 10_000 {
                pending.clear();
                break;
            }
        }
    }
    Ok(Json(FileList { files, path }))
}

/// Where to create a directory.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MkdirRequest {
    /// A path of the workspace; missing parents are created too.
    #[schema(min_length = 1)]
    path: String,
}

/// `{ file }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct FileResponse {
    file: FileInfo,
}

/// `{ file, created }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct WrittenFile {
    file: FileInfo,
    created: bool,
}

/// Creates a directory and its parents.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/files/mkdir", tag = "files",
    operation_id = "files.mkdir", params(("harnessId" = String, Path)),
    request_body = MkdirRequest,
    responses((status = 201, body = FileResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 501, body = ErrorResponse)))]
pub(crate) async fn mkdir(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<MkdirRequest>,
) -> Result<(StatusCode, Json<FileResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    if request.path.trim_matches('/').is_empty() {
        return Err(ApiError::invalid_field(
            "path",
            "the directory to create is a path beneath the workspace's root",
        ));
    }
    let entry = workspace(&state, "files.mkdir")?
        .create_dir(&request.path)
        .map_err(|error| refused(&request.path, error))?;
    Ok((
        StatusCode::CREATED,
        Json(FileResponse { file: entry.into() }),
    ))
}

/// `recursive`, for deleting a directory that is not empty.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct DeleteOptions {
    recursive: Option<bool>,
}

/// `files/{path}`: read (`GET`), download (`GET .../download`), write (`PUT`, the body is the
/// content) and delete (`DELETE`, `?recursive=true` for a directory that is not empty).
pub(crate) async fn catch_all(
    State(state): State<Shared>,
    Path((harness_id, path)): Path<(String, String)>,
    method: Method,
    ApiQuery(options): ApiQuery<DeleteOptions>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        state.check_harness(&harness_id)?;
        let operation = match (&method, path.ends_with("/download")) {
            (&Method::GET | &Method::HEAD, true) => "files.download",
            (&Method::GET | &Method::HEAD, false) => "files.read",
            (&Method::PUT, _) => "files.write",
            _ => "files.delete",
        };
        let workspace = workspace(&state, operation)?;
        match method {
            Method::GET | Method::HEAD => match path.strip_suffix("/download") {
                Some(file) => read(workspace, file, true),
                None => read(workspace, &path, false),
            },
            Method::PUT if !path.ends_with("/download") => {
                let bytes = body.map_err(|rejection| {
                    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                        ApiError::payload_too_large()
                    } else {
                        ApiError::bad_request("INVALID_REQUEST", rejection.body_text())
                    }
                })?;
                let written = workspace
                    .write_bytes(&path, &bytes)
                    .map_err(|error| refused(&path, error))?;
                let entry = workspace
                    .entry(&path)
                    .map_err(|error| refused(&path, error))?;
                let status = match written {
                    Written::Created => StatusCode::CREATED,
                    Written::Replaced => StatusCode::OK,
                };
                let body = WrittenFile {
                    file: entry.into(),
                    created: written == Written::Created,
                };
                Ok((status, Json(body)).into_response())
            }
            Method::DELETE if !path.ends_with("/download") => {
                workspace
                    .remove(&path, options.recursive.unwrap_or(false))
                    .map_err(|error| refused(&path, error))?;
                Ok(StatusCode::NO_CONTENT.into_response())
            }
            other => Err(ApiError::method_not_allowed(other.as_str(), &path)),
        }
    };
    match answer.await {
        Ok(response) => response,
        Err(error) => {
            let not_allowed = error.status() == StatusCode::METHOD_NOT_ALLOWED;
            let mut response = error.into_response();
            if not_allowed {
                let allow = if path.ends_with("/download") {
                    "GET"
                } else {
                    "GET,PUT,DELETE"
                };
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            response
        }
    }
}

/// A file's bytes as a response, as an attachment if `download`.
pub(crate) fn read(
    workspace: &Workspace,
    path: &str,
    download: bool,
) -> Result<Response, ApiError> {
    let bytes = workspace
        .read_bytes(path, MAX_READ)
        .map_err(|error| refused(path, error))?;
    let name = path.rsplit('/').next().unwrap_or(path);
    let content_type = match mime(name) {
        "application/octet-stream" if std::str::from_utf8(&bytes).is_ok() => {
            "text/plain; charset=utf-8"
        }
        other => other,
    };
    let mut response = (StatusCode::OK, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if download {
        let safe: String = name
            .chars()
            .filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\')
            .collect();
        if let Ok(disposition) = HeaderValue::from_str(&format!("attachment; filename=\"{safe}\""))
        {
            headers.insert(header::CONTENT_DISPOSITION, disposition);
        }
    }
    Ok(response)
}
