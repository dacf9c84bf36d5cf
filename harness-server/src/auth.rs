//! The bearer token every `/v1` request carries.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Answers `401` unless the request carries `Authorization: Bearer <token>`.
pub(crate) async fn require_token(
    State(token): State<Arc<str>>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "));
    match given {
        Some(given) if same_token(given, token.as_bytes()) => next.run(request).await,
        _ => ApiError::unauthorized().into_response(),
    }
}

/// Compares in time that depends only on the expected token's length, so that the time of a
/// refusal tells nothing about how much of a guess was right.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = given.len() ^ expected.len();
    for (at, byte) in expected.iter().enumerate() {
        let other = given.get(at).copied().unwrap_or(!byte);
        difference |= usize::from(other ^ byte);
    }
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::same_token;

    #[test]
    fn only_the_same_bytes_match() {
        assert!(same_token(b"secret", b"secret"));
        assert!(!same_token(b"secreT", b"secret"));
        assert!(!same_token(b"secre", b"secret"));
        assert!(!same_token(b"secrets", b"secret"));
        assert!(!same_token(b"", b"secret"));
        assert!(!same_token(b"secret\0", b"secret"));
    }
}
