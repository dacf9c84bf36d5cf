//! What the HTTP providers share: building the reqwest client from a [`ProviderConfig`], mapping HTTP statuses and transport failures to [`ModelError`]s (with the
//! provider's own message and `Retry-After`), and turning an SSE body into a [`ModelStream`].

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use reqwest::header::HeaderMap;
use serde_json::Value;

use harness_tags::util::error_chain;

use crate::sse::{SseError, SseEvent, SseLimits, SseParser};
use crate::{MAX_RETRY_AFTER, ModelError, ModelId, ModelStream, ProviderConfig, StreamEvent};

/// Parses a provider model's id, failing as a configuration error of its provider.
pub(crate) fn parse_id(id: &str) -> Result<ModelId, ModelError> {
    ModelId::new(id).map_err(|error| ModelError::Config {
        provider: id.split('/').next().unwrap_or(id).to_owned(),
        message: error.to_string(),
    })
}

/// What a provider model holds after construction: its client and resolved settings.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) provider: Arc<str>,
    pub(crate) client: reqwest::Client,
    pub(crate) url: String,
    pub(crate) api_key: Option<String>,
    pub(crate) api_key_env: Option<String>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) sse_limits: SseLimits,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Resolves the key and builds the client; `path` is appended to the base URL.
    pub(crate) fn new(
        provider: &str,
        config: &ProviderConfig,
        path: &str,
    ) -> Result<Endpoint, ModelError> {
        let api_key = config.resolve_api_key();
        if api_key.is_none() && config.require_api_key {
            return Err(ModelError::MissingApiKey {
                provider: provider.to_owned(),
                env_var: config.api_key_env.clone(),
            });
        }
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::Config {
                provider: provider.to_owned(),
                message: format!("base URL `{base}` must start with http:// or https://"),
            });
        }
        if base.starts_with("https://") && !cfg!(feature = "rustls") {
            return Err(ModelError::Config {
                provider: provider.to_owned(),
                message: "HTTPS needs harness-core's `rustls` feature, which this build lacks"
                    .to_owned(),
            });
        }
        Ok(Endpoint {
            provider: Arc::from(provider),
            client: build_client(provider, config)?,
            url: format!("{base}{path}"),
            api_key,
            api_key_env: config.api_key_env.clone(),
            headers: config.headers.clone(),
            sse_limits: config.sse_limits,
        })
    }

    /// POSTs `body` and returns the response once its status says a stream follows; any
    /// other status becomes the matching [`ModelError`].
    pub(crate) async fn post_stream(
        &self,
        request: reqwest::RequestBuilder,
        body: &Value,
    ) -> Result<reqwest::Response, ModelError> {
        let mut request = request
            .header("content-type", "application/json")
            .header("accept", "text/event-stream");
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let body = serde_json::to_vec(body).map_err(|error| ModelError::Config {
            provider: self.provider.to_string(),
            message: format!("the request could not be encoded as JSON: {error}"),
        })?;
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|error| transport_error(&self.provider, &error))?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let headers = response.headers().clone();
            let body = read_error_body(response).await;
            return Err(status_error(
                &self.provider,
                self.api_key_env.as_deref(),
                status,
                &headers,
                &body,
                SystemTime::now(),
            ));
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("application/json") || content_type.starts_with("text/html") {
            let body = read_error_body(response).await;
            let detail = parse_error_body(&body);
            return Err(ModelError::InvalidResponse {
                provider: self.provider.to_string(),
                message: format!(
                    "expected an event stream but got `{content_type}` ({}); check the base URL",
                    detail.message_or(status)
                ),
            });
        }
        Ok(response)
    }
}

/// Installs rustls' ring crypto provider for the process, once; a provider installed earlier
/// (by the application) is kept. The HTTP clients of the harness call it before they build a
/// client.
#[cfg(feature = "rustls")]
pub fn install_crypto_provider() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        // An error means a provider is already installed, which is what we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn build_client(provider: &str, config: &ProviderConfig) -> Result<reqwest::Client, ModelError> {
    #[cfg(feature = "rustls")]
    install_crypto_provider();
    reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .read_timeout(config.read_timeout)
        .build()
        .map_err(|error| ModelError::Config {
            provider: provider.to_owned(),
            message: format!(
                "the HTTP client could not be built: {}",
                error_chain(&error)
            ),
        })
}

/// Reads at most 64 KiB of an error response's body.
async fn read_error_body(mut response: reqwest::Response) -> String {
    const LIMIT: usize = 64 * 1024;
    let mut body = Vec::new();
    while body.len() < LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(LIMIT);
    String::from_utf8_lossy(&body).into_owned()
}

/// A transport failure: connect, TLS, timeout or a body cut off mid-way.
pub(crate) fn transport_error(provider: &str, error: &reqwest::Error) -> ModelError {
    if error.is_builder() {
        return ModelError::Config {
            provider: provider.to_owned(),
            message: error_chain(error),
        };
    }
    let what = if error.is_timeout() {
        "timed out: "
    } else if error.is_connect() {
        "could not connect: "
    } else if error.is_body() || error.is_decode() {
        "the response broke off: "
    } else {
        ""
    };
    ModelError::Connection {
        provider: provider.to_owned(),
        message: format!("{what}{}", error_chain(error)),
    }
}

/// The parts of a provider's error body that matter.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ApiError {
    /// The error's type (`invalid_request_error`, `overloaded_error`, ...).
    pub(crate) kind: Option<String>,
    /// The error's code (`context_length_exceeded`, ...).
    pub(crate) code: Option<String>,
    /// The provider's message.
    pub(crate) message: String,
}

impl ApiError {
    fn message_or(&self, status: u16) -> String {
        if self.message.is_empty() {
            format!("HTTP {status} with an empty body")
        } else {
            self.message.clone()
        }
    }

    /// True when the provider says the conversation does not fit the context window.
    pub(crate) fn is_context_overflow(&self) -> bool {
        const CODES: [&str; 3] = [
            "context_length_exceeded",
            "exceed_context_size_error",
            "model_context_window_exceeded",
        ];
        const PHRASES: [&str; 6] = [
            "prompt is too long",
            "context_length_exceeded",
            "maximum context length",
            "context length",
            "context window",
            "exceeds the available context",
        ];
        let coded = [&self.code, &self.kind]
            .into_iter()
            .flatten()
            .any(|code| CODES.contains(&code.as_str()));
        let message = self.message.to_lowercase();
        coded || PHRASES.iter().any(|phrase| message.contains(phrase))
    }
}

/// Reads an error body in the shapes providers use: `{"error": {"message", "type", "code"}}`
/// (OpenAI and most compatible servers), `{"type": "error", "error": {...}}` (Anthropic),
/// `{"error": "text"}`, `{"message": ...}`, `{"detail": ...}`, a one-element array of any of
/// these, or plain text.
pub(crate) fn parse_error_body(body: &str) -> ApiError {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return ApiError {
            message: truncate(body.trim(), 500),
            ..ApiError::default()
        };
    };
    let json = match json {
        Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        other => other,
    };
    let inner = match json.get("error") {
        Some(error @ Value::Object(_)) => error,
        _ => &json,
    };
    let text = |value: Option<&Value>| match value {
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Number(number)) => Some(number.to_string()),
        _ => None,
    };
    let message = text(inner.get("message"))
        .or_else(|| text(json.get("error")))
        .or_else(|| text(json.get("detail")))
        .or_else(|| text(json.get("message")))
        .unwrap_or_else(|| truncate(body.trim(), 500));
    ApiError {
        kind: text(inner.get("type")).filter(|kind| kind != "error"),
        code: text(inner.get("code")),
        message,
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Maps a non-success HTTP status and its body to an error.
pub(crate) fn status_error(
    provider: &str,
    env_var: Option<&str>,
    status: u16,
    headers: &HeaderMap,
    body: &str,
    now: SystemTime,
) -> ModelError {
    let detail = parse_error_body(body);
    let message = detail.message_or(status);
    let provider = provider.to_owned();
    match status {
        401 | 403 => ModelError::Auth {
            provider,
            message,
            env_var: env_var.map(str::to_owned),
        },
        // OpenAI answers 429 when the account is out of credit: waiting will not help.
        429 if detail.code.as_deref() == Some("insufficient_quota") => {
            ModelError::BadRequest { provider, message }
        }
        429 => ModelError::RateLimited {
            provider,
            message,
            retry_after: retry_after(headers, now),
        },
        // Request timeout, conflict, server errors and Anthropic's 529 "overloaded".
        408 | 409 | 500..=599 => ModelError::Unavailable {
            provider,
            status,
            message,
            retry_after: retry_after(headers, now),
        },
        // The request body is too large: shrinking the conversation is the fix.
        413 => ModelError::ContextOverflow { message },
        400..=499 if detail.is_context_overflow() => ModelError::ContextOverflow { message },
        400..=499 => ModelError::BadRequest { provider, message },
        _ => ModelError::InvalidResponse {
            provider,
            message: format!("unexpected HTTP status {status}: {message}"),
        },
    }
}

/// An error object the provider sent inside a successful stream.
pub(crate) fn stream_error(provider: &str, detail: ApiError) -> ModelError {
    const RETRYABLE: [&str; 9] = [
        "overloaded_error",
        "api_error",
        "server_error",
        "rate_limit_error",
        "rate_limit_exceeded",
        "internal_error",
        "internal_server_error",
        "service_unavailable",
        "timeout",
    ];
    if detail.is_context_overflow() {
        return ModelError::ContextOverflow {
            message: detail.message,
        };
    }
    let retryable = [&detail.kind, &detail.code]
        .into_iter()
        .flatten()
        .any(|kind| RETRYABLE.contains(&kind.as_str()))
        || detail.message.to_lowercase().contains("overloaded");
    ModelError::Stream {
        provider: provider.to_owned(),
        kind: detail
            .kind
            .or(detail.code)
            .unwrap_or_else(|| "error".into()),
        message: detail.message,
        retryable,
    }
}

/// The wait a response asks for: `retry-after-ms` (milliseconds), else `retry-after` in
/// seconds or as an HTTP date (relative to `now`); at most [`MAX_RETRY_AFTER`].
///
/// A number is ASCII digits with an optional fraction (`7`, `1.5`); a sign, an exponent,
/// `inf` or `NaN` is not a wait. Values too large for any clock (a delta beyond `u64`, a date
/// in the year 10^19) are capped rather than overflowing; a date in the past means now.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    if let Some(wait) = header("retry-after-ms").and_then(|ms| parse_delta(ms, 0.001)) {
        return Some(wait);
    }
    let value = header("retry-after")?;
    if let Some(wait) = parse_delta(value, 1.0) {
        return Some(wait);
    }
    let date = parse_http_date(value)?;
    let now = now.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let wait = match u64::try_from(date) {
        Ok(seconds) => Duration::from_secs(seconds).saturating_sub(now),
        // A date beyond what a u64 of seconds holds, or before 1970.
        Err(_) if date > 0 => MAX_RETRY_AFTER,
        Err(_) => Duration::ZERO,
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// A delay of `digits[.digits]` units of `unit_secs` seconds, capped at [`MAX_RETRY_AFTER`].
fn parse_delta(text: &str, unit_secs: f64) -> Option<Duration> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    // Digits only: the parse cannot fail, and a number too long for f64 is infinity.
    let units: f64 = text.parse().ok()?;
    let wait = Duration::try_from_secs_f64(units * unit_secs).unwrap_or(MAX_RETRY_AFTER);
    Some(wait.min(MAX_RETRY_AFTER))
}

/// Parses an HTTP date in the IMF-fixdate form, `Sun, 06 Nov 1994 08:49:37 GMT`, into
/// seconds since the Unix epoch. The arithmetic is in `i128`, which no year of up to 20
/// digits can overflow.
fn parse_http_date(text: &str) -> Option<i128> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let number = |part: &str| -> Option<i128> {
        if part.is_empty() || part.len() > 20 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let mut parts = text.split_ascii_whitespace();
    let _weekday = parts.next()?.strip_suffix(',')?;
    let day = number(parts.next()?)?;
    let month_name = parts.next()?;
    let month = MONTHS.iter().position(|m| *m == month_name)?;
    let year = number(parts.next()?)?;
    let mut clock = parts.next()?.split(':');
    let hour = number(clock.next()?)?;
    let minute = number(clock.next()?)?;
    let second = number(clock.next()?)?;
    if parts.next()? != "GMT"
        || parts.next().is_some()
        || clock.next().is_some()
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days since 1970-01-01 of a proleptic Gregorian date (month counted from March).
    let month = month as i128 + 1;
    let year_from_march = if month <= 2 { year - 1 } else { year };
    let era = year_from_march.div_euclid(400);
    let year_of_era = year_from_march - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// Turns one provider's SSE events into stream events.
pub(crate) trait SseDecoder: Send + 'static {
    /// Handles one event; returns `true` once the response is complete (the rest of the
    /// body is then ignored).
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, ModelError>;

    /// The body ended before the end marker: `Ok` if what arrived is a whole response anyway,
    /// otherwise the error to report (a dropped stream is a retryable connection error).
    fn end_of_body(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), ModelError>;
}

struct Decoding<D> {
    provider: Arc<str>,
    body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    parser: SseParser,
    decoder: D,
    ready: VecDeque<StreamEvent>,
    failure: Option<ModelError>,
    /// The decoder saw the end marker.
    complete: bool,
}

impl<D: SseDecoder> Decoding<D> {
    /// Feeds parsed SSE events to the decoder until it is done or fails.
    fn decode(&mut self, events: Vec<SseEvent>) {
        for event in events {
            match self.decoder.event(event, &mut self.ready) {
                Ok(false) => {}
                Ok(true) => {
                    self.complete = true;
                    self.body = None;
                    return;
                }
                Err(error) => {
                    self.fail(error);
                    return;
                }
            }
        }
    }

    fn fail(&mut self, error: ModelError) {
        self.body = None;
        self.failure = Some(error);
    }
}

/// A response body, in the pieces the network delivers.
pub(crate) type Body = BoxStream<'static, reqwest::Result<Bytes>>;

/// Streams the events a provider's SSE body decodes to; ends after the decoder's end marker
/// or the first error (a broken [`SseLimits`] limit among them).
pub(crate) fn decode_sse<D: SseDecoder>(
    provider: Arc<str>,
    body: Body,
    decoder: D,
    limits: SseLimits,
) -> ModelStream {
    let state = Decoding {
        provider,
        body: Some(body),
        parser: SseParser::with_limits(limits),
        decoder,
        ready: VecDeque::new(),
        failure: None,
        complete: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(event), state));
            }
            if let Some(error) = state.failure.take() {
                return Some((Err(error), state));
            }
            let body = state.body.as_mut()?;
            match body.next().await {
                Some(Ok(bytes)) => match state.parser.push(&bytes) {
                    Ok(events) => state.decode(events),
                    Err(error) => {
                        let error = limit_exceeded(&state.provider, error);
                        state.fail(error);
                    }
                },
                Some(Err(error)) => {
                    let error = transport_error(&state.provider, &error);
                    state.fail(error);
                }
                None => {
                    state.body = None;
                    if let Some(last) = state.parser.finish() {
                        state.decode(vec![last]);
                    }
                    if state.failure.is_none()
                        && !state.complete
                        && let Err(error) = state.decoder.end_of_body(&mut state.ready)
                    {
                        state.failure = Some(error);
                    }
                }
            }
        }
    })
    .boxed()
}

/// The error for a body that broke a size limit.
fn limit_exceeded(provider: &str, error: SseError) -> ModelError {
    ModelError::LimitExceeded {
        provider: provider.to_owned(),
        limit: error.limit,
        max: error.max,
    }
}

/// Decodes a whole body given in pieces, the way [`decode_sse`] decodes a response: every
/// event, and the error that ended the stream. For tests and the fuzz targets.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn decode_pieces<D: SseDecoder>(
    decoder: D,
    pieces: Vec<Vec<u8>>,
    limits: SseLimits,
) -> Vec<Result<StreamEvent, ModelError>> {
    use futures_util::FutureExt;
    let body = futures_util::stream::iter(pieces.into_iter().map(|piece| Ok(Bytes::from(piece))));
    decode_sse(Arc::from("fuzz"), body.boxed(), decoder, limits)
        .collect::<Vec<_>>()
        // The body is in memory: every poll is ready, so the stream ends in one go.
        .now_or_never()
        .unwrap_or_default()
}

/// The error for a body that ended before the provider's end marker.
pub(crate) fn stream_cut(provider: &str) -> ModelError {
    ModelError::Connection {
        provider: provider.to_owned(),
        message: "the response stream ended before the response was complete".to_owned(),
    }
}

/// The error for an event whose JSON does not parse.
pub(crate) fn bad_event(provider: &str, data: &str, error: &serde_json::Error) -> ModelError {
    ModelError::InvalidResponse {
        provider: provider.to_owned(),
        message: format!(
            "a stream event is not valid JSON ({error}): {}",
            truncate(data, 200)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_in_seconds_milliseconds_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")]), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1.5")]), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "9"), ("retry-after-ms", "250")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")]),
                now
            ),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
        for bad in [
            "soon",
            "-3",
            "NaN",
            "1e400",
            "Sun, 32 Nov 1994 08:50:07 GMT",
            "",
        ] {
            assert_eq!(
                retry_after(&headers(&[("retry-after", bad)]), now),
                None,
                "{bad}"
            );
        }
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(951_825_600)
        );
    }

    /// Hostile `Retry-After` values: a wait is capped at a day, never an overflow or a panic,
    /// and what is not a number or a date is no wait at all.
    #[test]
    fn retry_after_survives_hostile_values() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let wait = |value: &str| retry_after(&headers(&[("retry-after", value)]), now);
        let wait_ms = |value: &str| retry_after(&headers(&[("retry-after-ms", value)]), now);
        for huge in [
            // Years whose seconds overflow u64 (the old `days * 86_400` panicked on these).
            "Sun, 06 Nov 99999999999 08:49:37 GMT",
            "Sun, 06 Nov 584942419325 08:49:37 GMT",
            "Fri, 31 Dec 18446744073709551615 23:59:60 GMT",
            // Delta-seconds beyond u64, beyond f64, and merely beyond a day.
            "18446744073709551616",
            "99999999999999999999999999999999999999999999",
            &"9".repeat(400),
            "86401",
            "1000000.5",
        ] {
            assert_eq!(wait(huge), Some(MAX_RETRY_AFTER), "{huge}");
        }
        assert_eq!(wait_ms("18446744073709551616000"), Some(MAX_RETRY_AFTER));
        assert_eq!(wait_ms(&"9".repeat(400)), Some(MAX_RETRY_AFTER));
        // Just under the cap stays as asked.
        assert_eq!(wait("86400"), Some(MAX_RETRY_AFTER));
        assert_eq!(wait("86399"), Some(Duration::from_secs(86_399)));
        // Dates in the past, at the epoch or in year 0 mean now.
        for past in [
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "Sat, 01 Jan 0000 00:00:00 GMT",
            "Mon, 01 Jan 1 00:00:00 GMT",
        ] {
            assert_eq!(wait(past), Some(Duration::ZERO), "{past}");
        }
        for garbage in [
            "-1",
            "-18446744073709551616",
            "+5",
            "1e3",
            "1e400",
            "inf",
            "-inf",
            "infinity",
            "NaN",
            "0x10",
            "1.2.3",
            ".5",
            "5 s",
            "Sun, 06 Nov -1994 08:49:37 GMT",
            "Sun, 06 Nov +1994 08:49:37 GMT",
            "Sun, 06 Nov 123456789012345678901 08:49:37 GMT",
            "Sun, 06 Nov 1994 -8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37:00 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 GMT trailing",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994",
            ",",
        ] {
            assert_eq!(wait(garbage), None, "{garbage}");
            assert_eq!(wait_ms(garbage), None, "ms {garbage}");
        }
    }

    proptest::proptest! {
        /// Any header text: no panic, and a wait is never beyond the cap.
        #[test]
        fn retry_after_never_panics_or_exceeds_the_cap(value in "\\PC{0,64}", date in "[A-Za-z]{3}, [0-9]{1,3} [A-Z][a-z]{2} [0-9]{1,40} [0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3} GMT") {
            let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
            for text in [&value, &date] {
                if let Ok(header) = HeaderValue::from_str(text) {
                    let mut map = HeaderMap::new();
                    map.insert("retry-after", header.clone());
                    map.insert("retry-after-ms", header);
                    let wait = retry_after(&map, now);
                    proptest::prop_assert!(wait.is_none_or(|wait| wait <= MAX_RETRY_AFTER));
                }
            }
        }
    }

    /// Both providers' decoders, over a body cut into pieces.
    #[cfg(all(feature = "openai", feature = "anthropic"))]
    fn decode_both(
        pieces: &[Vec<u8>],
        limits: SseLimits,
    ) -> [Vec<Result<StreamEvent, ModelError>>; 2] {
        [
            decode_pieces(
                crate::openai::ChunkDecoder::new(Arc::from("openai")),
                pieces.to_vec(),
                limits,
            ),
            decode_pieces(
                crate::anthropic::EventDecoder::new(Arc::from("anthropic")),
                pieces.to_vec(),
                limits,
            ),
        ]
    }

    #[cfg(all(feature = "openai", feature = "anthropic"))]
    #[test]
    fn a_broken_limit_ends_the_stream_with_a_typed_error() {
        use crate::sse::SseLimit;
        let limits = SseLimits {
            max_line_bytes: 1024,
            max_event_bytes: 4096,
            max_body_bytes: 1 << 20,
        };
        let cases = [
            (
                vec![b"data: ".to_vec(), vec![b'x'; 2048]],
                SseLimit::Line,
                1024,
            ),
            (vec![b"data: 1\n".to_vec(); 5000], SseLimit::Event, 4096),
            (vec![b": ping\n".to_vec(); 200_000], SseLimit::Body, 1 << 20),
        ];
        for (pieces, limit, max) in cases {
            for events in decode_both(&pieces, limits) {
                let last = events.last().cloned();
                assert!(
                    matches!(
                        &last,
                        Some(Err(ModelError::LimitExceeded { limit: l, max: m, .. }))
                            if *l == limit && *m == max
                    ),
                    "{last:?}"
                );
                let error = last.unwrap().unwrap_err();
                assert!(!error.is_retryable());
                assert!(error.to_string().contains(limit.setting()), "{error}");
            }
        }
    }

    /// Pieces of provider wire format, for bodies that get past the JSON parser.
    #[cfg(all(feature = "openai", feature = "anthropic"))]
    const WIRE_WORDS: &[&str] = &[
        "data: ",
        "event: ",
        "\n",
        "\n\n",
        "\r\n",
        ": ping\n",
        "[DONE]",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "null",
        "0",
        "1",
        "-1",
        "1e999",
        "18446744073709551616",
        "true",
        "\"choices\"",
        "\"delta\"",
        "\"content\"",
        "\"tool_calls\"",
        "\"index\"",
        "\"id\"",
        "\"function\"",
        "\"name\"",
        "\"arguments\"",
        "\"finish_reason\"",
        "\"stop\"",
        "\"length\"",
        "\"tool_calls\"",
        "\"usage\"",
        "\"prompt_tokens\"",
        "\"completion_tokens\"",
        "\"refusal\"",
        "\"reasoning_content\"",
        "\"type\"",
        "\"message_start\"",
        "\"content_block_start\"",
        "\"content_block_delta\"",
        "\"content_block_stop\"",
        "\"message_delta\"",
        "\"message_stop\"",
        "\"error\"",
        "\"text_delta\"",
        "\"input_json_delta\"",
        "\"thinking_delta\"",
        "\"signature_delta\"",
        "\"tool_use\"",
        "\"text\"",
        "\"thinking\"",
        "\"partial_json\"",
        "\"content_block\"",
        "\"message\"",
        "\"stop_reason\"",
        "\"input_tokens\"",
        "\"output_tokens\"",
        "\"overloaded_error\"",
        "message_start",
        "content_block_delta",
        "error",
        "\u{0}",
        "\u{feff}",
        "é",
        "\\u",
        "\\ud800",
    ];

    #[cfg(all(feature = "openai", feature = "anthropic"))]
    proptest::proptest! {
        /// Wire-format words in any order, cut anywhere, through both decoders: no panic, at
        /// most one error and only at the end, every tool-call index announced before use.
        #[test]
        fn provider_decoders_take_any_body(
            words in proptest::collection::vec(proptest::sample::select(WIRE_WORDS), 0..96),
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            cut in 1usize..64,
        ) {
            let mut body = words.concat().into_bytes();
            body.extend_from_slice(&raw);
            let pieces: Vec<Vec<u8>> = body.chunks(cut).map(<[u8]>::to_vec).collect();
            let limits = SseLimits { max_line_bytes: 512, max_event_bytes: 1024, max_body_bytes: 8192 };
            for events in decode_both(&pieces, limits) {
                let errors = events.iter().filter(|event| event.is_err()).count();
                proptest::prop_assert!(errors <= 1);
                if errors == 1 {
                    proptest::prop_assert!(events.last().is_some_and(Result::is_err));
                }
                let mut started = std::collections::BTreeSet::new();
                for event in events.iter().flatten() {
                    match event {
                        StreamEvent::ToolCallStart { index, .. } => {
                            started.insert(*index);
                        }
                        StreamEvent::ToolCallDelta { index, .. } | StreamEvent::ToolCallEnd { index } => {
                            proptest::prop_assert!(started.contains(index), "{events:?}");
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    #[test]
    fn statuses_map_to_typed_errors_with_the_providers_message() {
        let now = SystemTime::now();
        let none = HeaderMap::new();
        let openai = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        match status_error("openai", Some("OPENAI_API_KEY"), 401, &none, openai, now) {
            ModelError::Auth {
                message, env_var, ..
            } => {
                assert_eq!(message, "Incorrect API key provided");
                assert_eq!(env_var.as_deref(), Some("OPENAI_API_KEY"));
            }
            other => panic!("{other:?}"),
        }
        let overflow = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            status_error("openai", None, 400, &none, overflow, now),
            ModelError::ContextOverflow { .. }
        ));
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert!(matches!(
            status_error("anthropic", None, 400, &none, anthropic, now),
            ModelError::ContextOverflow { message } if message.starts_with("prompt is too long")
        ));
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let error = status_error(
            "anthropic",
            None,
            529,
            &headers(&[("retry-after", "3")]),
            overloaded,
            now,
        );
        assert!(error.is_retryable());
        assert_eq!(error.retry_after(), Some(Duration::from_secs(3)));
        let quota = r#"{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}"#;
        assert!(!status_error("openai", None, 429, &none, quota, now).is_retryable());
        assert!(status_error("groq", None, 429, &none, "slow down", now).is_retryable());
        match status_error("x", None, 404, &none, "<html>not here</html>", now) {
            ModelError::BadRequest { message, .. } => assert_eq!(message, "<html>not here</html>"),
            other => panic!("{other:?}"),
        }
        match status_error("x", None, 502, &none, "", now) {
            ModelError::Unavailable {
                status, message, ..
            } => {
                assert_eq!(status, 502);
                assert_eq!(message, "HTTP 502 with an empty body");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn error_bodies_in_every_shape() {
        assert_eq!(
            parse_error_body(r#"{"error":"model not found"}"#).message,
            "model not found"
        );
        assert_eq!(parse_error_body(r#"{"detail":"bad"}"#).message, "bad");
        let gemini = parse_error_body(
            r#"[{"error":{"code":400,"message":"nope","status":"INVALID_ARGUMENT"}}]"#,
        );
        assert_eq!(
            (gemini.code.as_deref(), gemini.message.as_str()),
            (Some("400"), "nope")
        );
        let long = "x".repeat(2000);
        assert!(parse_error_body(&long).message.chars().count() <= 501);
    }

    #[test]
    fn mid_stream_errors_say_whether_to_retry() {
        let overloaded = stream_error(
            "anthropic",
            ApiError {
                kind: Some("overloaded_error".into()),
                code: None,
                message: "Overloaded".into(),
            },
        );
        assert!(overloaded.is_retryable());
        let invalid = stream_error(
            "openai",
            ApiError {
                kind: Some("invalid_request_error".into()),
                code: None,
                message: "bad tool schema".into(),
            },
        );
        assert!(!invalid.is_retryable());
    }
}
