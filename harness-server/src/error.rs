//! The spec's error body, `{"error": {"code", "message", ...}}`, for every failure the server
//! answers, and the extractors that turn axum's own rejections into it.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use harness_core::harness::HarnessError;
use harness_core::task::TaskError;
use harness_store::{LockError, StoreError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::ToSchema;

/// The body of every error response, as the Open Harness API defines it.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorBody,
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct ErrorBody {
    /// A stable, upper-case code, e.g. `NOT_FOUND`.
    pub code: String,
    /// A sentence for a person.
    pub message: String,
    /// The API group, e.g. `execution`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The operation, e.g. `execution.cancel`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// More about it: the field or id at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
}

/// An error answered with its status and the spec's body.
#[derive(Clone, Debug)]
pub struct ApiError {
    status: StatusCode,
    /// Boxed: errors travel through every handler's `Result`.
    body: Box<ErrorBody>,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: Box::new(ErrorBody {
                code: code.to_owned(),
                message: message.into(),
                domain: None,
                operation: None,
                details: None,
            }),
        }
    }

    /// The error's code, e.g. `NOT_FOUND`.
    pub fn code(&self) -> &str {
        &self.body.code
    }

    /// `426`: a WebSocket route asked without the upgrade.
    pub(crate) fn upgrade_required(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UPGRADE_REQUIRED, "UPGRADE_REQUIRED", message)
    }

    pub(crate) fn with_details(mut self, details: Value) -> Self {
        self.body.details = Some(details);
        self
    }

    /// The status answered.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The sentence for a person.
    pub fn message(&self) -> &str {
        &self.body.message
    }

    /// `400`: a field is missing, malformed or out of range.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message)
            .with_details(serde_json::json!({ "field": field }))
    }

    /// `422`: a field well formed as the document describes it that still cannot be used (a
    /// JSON Schema that does not compile, a session bound to another agent).
    pub fn unprocessable(field: &str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "UNPROCESSABLE", message)
            .with_details(serde_json::json!({ "field": field }))
    }

    /// `422`: a well-formed answer that does not fit what waits for it (the waiting tool's
    /// own schema, which the document cannot know).
    pub fn unfit_answer(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_ANSWER", message)
            .with_details(serde_json::json!({ "field": "data" }))
    }

    /// `400`: the request as a whole is unusable.
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// `404`: no such thing, naming it.
    pub fn not_found(kind: &str, id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            format!("{kind} `{id}` does not exist"),
        )
        .with_details(serde_json::json!({ "kind": kind, "id": id }))
    }

    /// `404` for a path no route answers.
    pub fn no_route(path: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "ROUTE_NOT_FOUND",
            format!("no route answers `{path}`"),
        )
    }

    /// `405` for a route that exists under other methods.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "METHOD_NOT_ALLOWED",
            format!("`{path}` does not answer {method}"),
        )
    }

    /// `403`: the request reaches for something this server does not serve (a path outside
    /// the workspace).
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "FORBIDDEN", message)
    }

    /// `413`: the body is over the server's limit.
    /// `415`: the body is not of the type the route takes.
    pub(crate) fn unsupported_media_type(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
            message,
        )
    }

    pub(crate) fn payload_too_large() -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            "the body is over the server's limit",
        )
    }

    /// `409`: the resource is not in a state that allows this.
    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, "CONFLICT", message)
    }

    /// `410`: the execution or its stream is over.
    pub fn gone(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::GONE, "GONE", message)
    }

    /// `401`, for a request without a valid token (never says what was sent).
    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "a valid bearer token is required (Authorization: Bearer ...)",
        )
    }

    /// `501` for a spec operation this server does not provide.
    pub fn not_built(operation: &str) -> Self {
        let domain = operation.split('.').next().unwrap_or(operation);
        let mut error = ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "CAPABILITY_NOT_SUPPORTED",
            format!("this server does not provide `{operation}`; see the capabilities route"),
        );
        error.body.domain = Some(domain.to_owned());
        error.body.operation = Some(operation.to_owned());
        error
    }

    /// `500`, for a failure of the server's own parts (the store); the message says which.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR", message)
    }

    /// `503`: the harness cannot be started (its factory or its model failed).
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "HARNESS_UNAVAILABLE",
            message,
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response =
            (self.status, axum::Json(ErrorResponse { error: *self.body })).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::ThreadNotFound(id) => ApiError::not_found("session", &id),
            StoreError::EventLogClosed(id) => ApiError::gone(format!("stream `{id}` is closed")),
            other => ApiError::internal(format!("the store failed: {other}")),
        }
    }
}

impl From<HarnessError> for ApiError {
    fn from(error: HarnessError) -> Self {
        match error {
            HarnessError::ThreadNotFound(id) => ApiError::not_found("session", &id),
            // The session exists; the message the body names does not.
            HarnessError::MessageNotFound { message_id, .. } => ApiError::unprocessable(
                "from_message_id",
                format!("message `{message_id}` is not in the session"),
            ),
            HarnessError::Lock(LockError::Held { thread_id, .. }) => {
                ApiError::conflict(format!("session `{thread_id}` is open in another process"))
            }
            HarnessError::Store(error) => error.into(),
            HarnessError::Busy => ApiError::conflict("the session is running another message"),
            HarnessError::NothingPending(what) => {
                ApiError::conflict(format!("nothing waits for {what}"))
            }
            error @ (HarnessError::NotPending { .. }
            | HarnessError::AmbiguousApproval(_)
            | HarnessError::AmbiguousSuspension(_)) => ApiError::conflict(error.to_string()),
            HarnessError::InvalidAnswer(message) => ApiError::unfit_answer(message),
            HarnessError::Task(TaskError::UnknownId { id, .. }) => ApiError::not_found("task", &id),
            HarnessError::Task(error @ TaskError::SeveralInProgress(_)) => {
                ApiError::conflict(error.to_string())
            }
            HarnessError::Task(error) => {
                ApiError::bad_request("INVALID_REQUEST", error.to_string())
            }
            error @ (HarnessError::Model(_) | HarnessError::ModelId(_)) => {
                ApiError::bad_request("MODEL_NOT_AVAILABLE", error.to_string())
            }
            other => ApiError::internal(other.to_string()),
        }
    }
}

/// A JSON body; malformed JSON, a wrong content type, a field out of range and a body over
/// the limit are the spec's `400`, `415`, `400` and `413`.
#[derive(Debug)]
pub(crate) struct ApiJson<T>(pub(crate) T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let value = match axum::Json::<Value>::from_request(request, state).await {
            Ok(axum::Json(value)) => value,
            Err(rejection) => return Err(json_rejection(&rejection)),
        };
        // Serde would read a struct from an array too; every body here is an object.
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "INVALID_REQUEST",
                "the body must be a JSON object",
            ));
        }
        <T as serde::Deserialize>::deserialize(value)
            .map(ApiJson)
            .map_err(|error| ApiError::bad_request("INVALID_REQUEST", error.to_string()))
    }
}

fn json_rejection(rejection: &JsonRejection) -> ApiError {
    let text = rejection.body_text();
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::unsupported_media_type(
            "the body must be JSON, sent with `Content-Type: application/json`",
        ),
        JsonRejection::JsonSyntaxError(_) => ApiError::bad_request("MALFORMED_JSON", text),
        JsonRejection::JsonDataError(_) => ApiError::bad_request("INVALID_REQUEST", text),
        _ if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::payload_too_large(),
        _ => ApiError::bad_request("INVALID_REQUEST", text),
    }
}

/// Deserializes an optional object field, refusing an array (which serde would read as the
/// struct's fields in order): `#[serde(default, deserialize_with = "object_only")]`.
pub(crate) fn object_only<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = <Option<Value> as serde::Deserialize>::deserialize(deserializer)?;
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value @ Value::Object(_)) => serde_json::from_value(value)
            .map(Some)
            .map_err(serde::de::Error::custom),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected an object, not {other}"
        ))),
    }
}

/// Query parameters; a malformed one is the spec's `400`.
#[derive(Debug)]
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| ApiQuery(value))
            .map_err(|rejection: QueryRejection| {
                ApiError::bad_request("INVALID_QUERY", rejection.body_text())
            })
    }
}
