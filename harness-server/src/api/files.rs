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
use harness_workspace::{Entry, SearchQuery, Workspace, Written};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::types::whole;
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
            mime_type: (!entry.is_dir).then(|| crate::artifacts::mime(&entry.name).to_owned()),
            size_bytes: (!entry.is_dir).then_some(entry.size),
            kind: if entry.is_dir { "directory" } else { "file" }.to_owned(),
            modified_at: rfc3339(entry.modified_ms.unwrap_or(0)),
            path: entry.path,
            name: entry.name,
        }
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
        || has("File exists")
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

/// `201` with the file written, or `200` when it replaced one.
fn written_response(written: Written, entry: Entry) -> Response {
    let status = match written {
        Written::Created => StatusCode::CREATED,
        Written::Replaced => StatusCode::OK,
    };
    let body = WrittenFile {
        file: entry.into(),
        created: written == Written::Created,
    };
    (status, Json(body)).into_response()
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
                Ok(written_response(written, entry))
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
    let content_type = match crate::artifacts::mime(name) {
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

/// What to search for.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchRequest {
    /// Files whose name matches (a glob without `/`), or whose path from the root matches
    /// (with `/`: `*` stays within a directory, `**` crosses them).
    #[serde(default)]
    #[schema(max_length = 1000)]
    glob: Option<String>,
    /// A regular expression (Rust syntax): the lines it matches in those files.
    #[serde(default)]
    #[schema(max_length = 1000)]
    grep: Option<String>,
    /// Where to start (default: the root).
    #[serde(default)]
    path: Option<String>,
    /// 1-1000 (default 100): the most matches, lines with `grep`, files without.
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    max_results: Option<f64>,
}

/// A matching line.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct LineMatch {
    line_number: u64,
    content: String,
}

/// A matching file, with its matching lines for a `grep` search.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct FileMatch {
    file: FileInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    line_matches: Option<Vec<LineMatch>>,
}

/// `{ matches }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct SearchResponse {
    matches: Vec<FileMatch>,
    /// *Extension*: true if the search stopped at `max_results` or its 30 s limit.
    truncated: bool,
}

/// Searches the workspace as the `grep` tool does: hidden, ignored, binary and large files
/// are skipped, links are not followed.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/files/search", tag = "files",
    operation_id = "files.search", params(("harnessId" = String, Path)),
    request_body = SearchRequest,
    responses((status = 200, body = SearchResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 403, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 501, body = ErrorResponse)))]
pub(crate) async fn search(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let workspace = workspace(&state, "files.search")?;
    let max_results = match request.max_results {
        Some(max) => whole("max_results", max, 1, 1000)?,
        None => 100,
    };
    for (field, text) in [("glob", &request.glob), ("grep", &request.grep)] {
        if text
            .as_ref()
            .is_some_and(|text| text.chars().count() > 1000)
        {
            return Err(ApiError::invalid_field(
                field,
                format!("{field} is at most 1000 characters"),
            ));
        }
    }
    let start = request.path.unwrap_or_else(|| ".".to_owned());
    let query = SearchQuery {
        glob: request.glob,
        grep: request.grep,
        ignore_case: false,
        max_results: usize::try_from(max_results).unwrap_or(100),
    };
    let found = workspace
        .search(&start, &query, &state.closing)
        .await
        .map_err(|error| {
            let message = error.to_string();
            if message.starts_with("invalid pattern") {
                ApiError::invalid_field("grep", message)
            } else if message.starts_with("invalid glob") {
                ApiError::invalid_field("glob", message)
            } else {
                refused(&start, error)
            }
        })?;
    let mut matches: Vec<FileMatch> = Vec::new();
    for hit in found.hits {
        let line = hit.line.map(|(number, content)| LineMatch {
            line_number: number as u64,
            content,
        });
        if let Some(last) = matches.last_mut()
            && last.file.path == hit.path
        {
            last.line_matches.get_or_insert_with(Vec::new).extend(line);
            continue;
        }
        // A file gone since the walk saw it is left out.
        let Ok(entry) = workspace.entry(&hit.path) else {
            continue;
        };
        matches.push(FileMatch {
            file: entry.into(),
            line_matches: line.map(|line| vec![line]),
        });
    }
    Ok(Json(SearchResponse {
        matches,
        truncated: found.full || found.timed_out,
    }))
}

/// The most files in one upload or download batch.
const MAX_BATCH_UPLOAD: usize = 500;
const MAX_BATCH_DOWNLOAD: usize = 1000;
/// The most bytes one batch download gathers.
const MAX_ARCHIVE: u64 = 256 * 1024 * 1024;

/// One file to upload (`multipart/form-data`).
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // the document's description of the form; the handler reads the parts
pub(crate) struct UploadForm {
    /// Where to put it, relative to the root.
    path: String,
    /// Its bytes.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// `true` to replace a file there (default `false`: `409`).
    #[schema(nullable = false)]
    overwrite: Option<bool>,
}

/// Files to upload (`multipart/form-data`): each `files` part's file name is its path below
/// `base_path`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // the document's description of the form; the handler reads the parts
pub(crate) struct UploadBatchForm {
    /// The directory they go to (default: the root).
    #[schema(nullable = false)]
    base_path: Option<String>,
    /// 1-500 files, each with its path as its file name.
    #[schema(value_type = Vec<String>, format = Binary, min_items = 1, max_items = 500)]
    files: Vec<Vec<u8>>,
    /// `true` to replace files there (default `false`: they are skipped).
    #[schema(nullable = false)]
    overwrite: Option<bool>,
}

/// A file that was not uploaded, and why.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct FileError {
    path: String,
    error: String,
}

/// What a batch upload did.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct UploadBatchResponse {
    uploaded: Vec<FileInfo>,
    /// Paths that exist (without `overwrite`).
    skipped: Vec<String>,
    errors: Vec<FileError>,
}

/// The parts of a form: text fields by name, and files with their part's file name.
#[derive(Default)]
pub(crate) struct Form {
    fields: Vec<(String, String)>,
    pub(crate) files: Vec<(String, Option<String>, Bytes)>,
}

impl Form {
    /// The parts of a form whose part names are among `names`.
    async fn read(
        mut multipart: axum::extract::Multipart,
        names: &[&str],
    ) -> Result<Form, ApiError> {
        let mut form = Form::default();
        while let Some(part) = multipart
            .next_field()
            .await
            .map_err(|error| form_error(&error))?
        {
            let name = part.name().unwrap_or_default().to_owned();
            if !names.contains(&name.as_str()) {
                return Err(ApiError::invalid_field(
                    &name,
                    format!("the form takes {}, not `{name}`", names.join(", ")),
                ));
            }
            let file_name = part.file_name().map(str::to_owned);
            let bytes = part.bytes().await.map_err(|error| form_error(&error))?;
            if file_name.is_some() || name == "file" || name == "files" {
                form.files.push((name, file_name, bytes));
            } else {
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
                    ApiError::invalid_field(&name, format!("`{name}` is not UTF-8 text"))
                })?;
                form.fields.push((name, text));
            }
        }
        Ok(form)
    }

    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }

    pub(crate) fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.field(name) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(ApiError::invalid_field(
                name,
                format!("`{name}` is true or false, not `{other}`"),
            )),
        }
    }
}

fn form_error(error: &axum::extract::multipart::MultipartError) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::payload_too_large()
    } else {
        ApiError::bad_request("INVALID_REQUEST", error.body_text())
    }
}

/// The form of a request with parts named `names`, or `415` for a body that is not
/// `multipart/form-data`.
pub(crate) async fn form(
    request: axum::extract::Request,
    state: &Shared,
    names: &[&str],
) -> Result<Form, ApiError> {
    let multipart = <axum::extract::Multipart as axum::extract::FromRequest<Shared>>::from_request(
        request, state,
    )
    .await
    .map_err(|rejection| {
        ApiError::unsupported_media_type(format!(
            "an upload is multipart/form-data: {}",
            rejection.body_text()
        ))
    })?;
    Form::read(multipart, names).await
}

/// Writes `bytes` at `path` unless a file is there and `overwrite` is false (`None` then).
fn upload_one(
    workspace: &Workspace,
    path: &str,
    bytes: &[u8],
    overwrite: bool,
) -> Result<Option<(Written, Entry)>, ApiError> {
    if !overwrite && workspace.entry(path).is_ok() {
        return Ok(None);
    }
    let written = workspace
        .write_bytes(path, bytes)
        .map_err(|error| refused(path, error))?;
    let entry = workspace
        .entry(path)
        .map_err(|error| refused(path, error))?;
    Ok(Some((written, entry)))
}

/// Uploads one file (`201`, or `200` when it replaced one with `overwrite`).
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/files/upload", tag = "files",
    operation_id = "files.upload", params(("harnessId" = String, Path)),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 201, body = WrittenFile), (status = 200, body = WrittenFile),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 403, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse), (status = 501, body = ErrorResponse)))]
pub(crate) async fn upload(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let workspace = workspace(&state, "files.upload")?;
    let form = form(request, &state, &["path", "file", "overwrite"]).await?;
    let path = form
        .field("path")
        .ok_or_else(|| ApiError::invalid_field("path", "an upload needs its `path`"))?;
    let overwrite = form.flag("overwrite")?;
    let [(_, _, bytes)] = form.files.as_slice() else {
        return Err(ApiError::invalid_field(
            "file",
            "an upload has exactly one `file` part",
        ));
    };
    let Some((written, entry)) = upload_one(workspace, path, bytes, overwrite)? else {
        return Err(ApiError::conflict(format!(
            "`{path}` exists; send overwrite=true to replace it"
        )));
    };
    Ok(written_response(written, entry))
}

/// Uploads files below `base_path`, each at the path its part's file name gives; one that
/// fails does not stop the others.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/files/upload-batch", tag = "files",
    operation_id = "files.uploadBatch", params(("harnessId" = String, Path)),
    request_body(content = UploadBatchForm, content_type = "multipart/form-data"),
    responses((status = 200, body = UploadBatchResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse),
        (status = 501, body = ErrorResponse)))]
pub(crate) async fn upload_batch(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    request: axum::extract::Request,
) -> Result<Json<UploadBatchResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let workspace = workspace(&state, "files.uploadBatch")?;
    let form = form(request, &state, &["base_path", "files", "overwrite"]).await?;
    let overwrite = form.flag("overwrite")?;
    let base = form.field("base_path").unwrap_or("").trim_matches('/');
    if form.files.is_empty() || form.files.len() > MAX_BATCH_UPLOAD {
        return Err(ApiError::invalid_field(
            "files",
            format!("a batch has 1 to {MAX_BATCH_UPLOAD} files"),
        ));
    }
    let mut response = UploadBatchResponse {
        uploaded: Vec::new(),
        skipped: Vec::new(),
        errors: Vec::new(),
    };
    let mut files = Vec::with_capacity(form.files.len());
    for (_, file_name, bytes) in &form.files {
        let name = file_name
            .as_deref()
            .filter(|name| !name.is_empty())
            .ok_or_else(|| {
                ApiError::invalid_field("files", "each `files` part is a file named by its path")
            })?;
        files.push((name, bytes));
    }
    for (name, bytes) in files {
        let path = if base.is_empty() {
            name.to_owned()
        } else {
            format!("{base}/{name}")
        };
        match upload_one(workspace, &path, bytes, overwrite) {
            Ok(Some((_, entry))) => response.uploaded.push(entry.into()),
            Ok(None) => response.skipped.push(path),
            Err(error) => response.errors.push(FileError {
                path,
                error: error.message().to_owned(),
            }),
        }
    }
    Ok(Json(response))
}

/// Files to download together.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DownloadBatchRequest {
    /// 1-1000 files, relative to the root.
    #[schema(min_items = 1, max_items = 1000)]
    paths: Vec<String>,
}

/// The files as a ZIP archive (stored, not compressed), each at its path; the first that
/// cannot be read fails the request, naming it.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/files/download-batch", tag = "files",
    operation_id = "files.downloadBatch", params(("harnessId" = String, Path)),
    request_body = DownloadBatchRequest,
    responses((status = 200, content_type = "application/zip", body = String,
            description = "The ZIP archive (Content-Disposition: attachment)"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 403, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse), (status = 501, body = ErrorResponse)))]
pub(crate) async fn download_batch(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<DownloadBatchRequest>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let workspace = workspace(&state, "files.downloadBatch")?;
    if request.paths.is_empty() || request.paths.len() > MAX_BATCH_DOWNLOAD {
        return Err(ApiError::invalid_field(
            "paths",
            format!("a batch has 1 to {MAX_BATCH_DOWNLOAD} paths"),
        ));
    }
    let mut archive = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(false);
    let mut total = 0u64;
    for path in &request.paths {
        let entry = workspace
            .entry(path)
            .map_err(|error| refused(path, error))?;
        if entry.is_dir {
            return Err(ApiError::conflict(format!("`{path}` is a directory")));
        }
        let bytes = workspace
            .read_bytes(path, MAX_READ)
            .map_err(|error| refused(path, error))?;
        total += bytes.len() as u64;
        if total > MAX_ARCHIVE {
            return Err(ApiError::payload_too_large());
        }
        archive
            .start_file(entry.path.as_str(), options)
            .and_then(|()| {
                std::io::Write::write_all(&mut archive, &bytes).map_err(zip::result::ZipError::Io)
            })
            .map_err(|error| ApiError::internal(format!("the archive failed: {error}")))?;
    }
    let bytes = archive
        .finish()
        .map_err(|error| ApiError::internal(format!("the archive failed: {error}")))?
        .into_inner();
    let mut response = Response::new(axum::body::Body::from(bytes));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"files.zip\""),
    );
    Ok(response)
}
