//! The web console at `/console/`: static files embedded in the binary (no build step), served
//! with a strict Content-Security-Policy. It talks to the API like any client, with the token
//! the user types in.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use crate::error::ApiError;

/// Only this origin's own files, no inline code, no frames, no plugins.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

/// The console's files: name, content type, content.
const FILES: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../console/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../console/app.css"),
    ),
];

pub(crate) async fn index() -> Response {
    file(Path("index.html".to_owned())).await
}

pub(crate) async fn redirect() -> Redirect {
    Redirect::permanent("/console/")
}

pub(crate) async fn file(Path(name): Path<String>) -> Response {
    let Some((_, content_type, body)) = FILES.iter().find(|(file, ..)| *file == name) else {
        return ApiError::no_route(&format!("/console/{name}")).into_response();
    };
    let mut response = (StatusCode::OK, *body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
