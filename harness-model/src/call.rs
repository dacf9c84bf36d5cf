//! Calling a model to the end: collecting a stream into a response, and retrying.

use futures_util::StreamExt;

use crate::{
    Model, ModelError, ModelRequest, ModelResponse, ModelStream, ResponseAssembler, RetryPolicy,
};

/// Reads a stream to its end and assembles the response; the first error ends the call.
pub async fn collect_response(mut stream: ModelStream) -> Result<ModelResponse, ModelError> {
    let mut assembler = ResponseAssembler::default();
    while let Some(event) = stream.next().await {
        assembler.push(event?);
    }
    Ok(assembler.finish())
}

/// Calls `model` and assembles its response, retrying what
/// [`ModelError::is_retryable`] allows with the waits of `policy` (which honours the
/// provider's `Retry-After`). A retried call starts over: what a failed attempt streamed is
/// discarded. The kernel runs its own loop (to emit events and honour aborts between
/// attempts); this helper is for simple callers and tests.
///
/// ```
/// use std::time::Duration;
/// use harness_model::{
///     call_with_retries, ModelError, ModelRequest, RetryPolicy, Scripted, ScriptedModel,
/// };
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let model = ScriptedModel::new("scripted/flaky")
///     .then(Scripted::Error(ModelError::Connection {
///         provider: "scripted".into(),
///         message: "reset".into(),
///     }))
///     .then(Scripted::text("ok"));
/// let policy = RetryPolicy { initial_backoff: Duration::from_millis(1), ..RetryPolicy::default() };
/// let response = call_with_retries(&model, &ModelRequest::default(), &policy).await.unwrap();
/// assert_eq!(response.content, "ok");
/// # });
/// ```
pub async fn call_with_retries(
    model: &dyn Model,
    request: &ModelRequest,
    policy: &RetryPolicy,
) -> Result<ModelResponse, ModelError> {
    let mut attempt = 1;
    loop {
        let result = match model.stream(request).await {
            Ok(stream) => collect_response(stream).await,
            Err(error) => Err(error),
        };
        match result {
            Ok(response) => return Ok(response),
            Err(error) => match policy.backoff(attempt, &error) {
                Some(wait) => {
                    tracing::debug!(model = %model.id(), attempt, ?wait, %error, "retrying model call");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                None => return Err(error),
            },
        }
    }
}
