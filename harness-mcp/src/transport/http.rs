//! The streamable HTTP transport: rmcp's client over a reqwest client of our own, so that TLS
//! is the stack the rest of the harness links (rustls with ring), redirects are not followed
//! (a redirect would replay the session id and the configured headers), and both the SSE
//! events and JSON bodies are bounded by the server's `max_message_bytes`.
//!
//! A response stream that breaks is resumed a few times within about two seconds, then given
//! up: rmcp's default keeps trying forever, so a call to a server that died would wait out its
//! whole timeout and then be reported as slow instead of gone.

use std::collections::HashMap;

use reqwest::header::{HeaderName, HeaderValue};
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::config::{McpConfigError, McpServer};
use crate::error::McpError;

/// The transport for a server at `url`, with its headers' placeholders read now.
pub(crate) fn connect(
    server: &McpServer,
    url: &str,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let mut headers = HashMap::new();
    for (key, value) in &server.config().headers {
        let invalid = |message: String| McpConfigError::Invalid {
            server: server.name().to_owned(),
            message,
        };
        let name = HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| invalid(format!("`{key}` is not an HTTP header name")))?;
        let mut value = HeaderValue::from_str(&server.expand(key, value)?).map_err(|_| {
            invalid(format!(
                "the value of header `{key}` holds characters HTTP does not allow"
            ))
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    #[cfg(feature = "rustls")]
    harness_core::model::install_crypto_provider();
    let client = reqwest::Client::builder()
        .connect_timeout(server.handshake_timeout())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| McpError::Start {
            server: server.name().to_owned(),
            reason: format!("the HTTP client could not be built ({error})"),
            stderr: String::new(),
        })?;
    let limit = server.message_limit();
    let mut resume = ExponentialBackoff::default();
    resume.max_times = Some(3);
    resume.base_duration = Duration::from_millis(250);
    resume.max_delay = Some(Duration::from_secs(1));
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(headers)
        .max_sse_event_size(limit)
        .max_json_response_size(limit);
    config.retry_config = Arc::new(resume);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}
