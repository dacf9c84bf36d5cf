//! How an HTTP provider is reached: [`ProviderConfig`] (base URL, API key, timeouts, headers).

use std::fmt;
use std::time::Duration;

use crate::sse::SseLimits;

/// The default time allowed to open a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The default time allowed between two reads of a response. Reasoning models may think for
/// minutes before they send the next byte, so this is generous.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// How an HTTP provider is reached: base URL, API key, timeouts and extra headers.
///
/// The API key is the explicit [`api_key`](Self::api_key) if set, otherwise the value of the
/// environment variable [`api_key_env`](Self::api_key_env). A provider that needs no key
/// (a local Ollama or vLLM server) leaves both unset and sends no auth header.
///
/// ```
/// use std::time::Duration;
/// use harness_model::ProviderConfig;
///
/// let local = ProviderConfig::new("http://127.0.0.1:11434/v1")
///     .with_read_timeout(Duration::from_secs(30));
/// assert_eq!(local.resolve_api_key(), None);
/// let openai = ProviderConfig::openai().with_api_key("sk-test");
/// assert_eq!(openai.resolve_api_key().as_deref(), Some("sk-test"));
/// assert!(!format!("{openai:?}").contains("sk-test"));
/// ```
#[derive(Clone)]
pub struct ProviderConfig {
    /// The API root, e.g. `https://api.openai.com/v1` (OpenAI-compatible servers: the part
    /// before `/chat/completions`) or `https://api.anthropic.com` (before `/v1/messages`).
    pub base_url: String,
    /// The API key, overriding the environment.
    pub api_key: Option<String>,
    /// The environment variable the API key is read from, e.g. `OPENAI_API_KEY`.
    pub api_key_env: Option<String>,
    /// Fail when the model is built if no key is found (rather than sending no auth header).
    pub require_api_key: bool,
    /// The time allowed to open a connection.
    pub connect_timeout: Duration,
    /// The time allowed between two reads (an idle stream fails after this long).
    pub read_timeout: Duration,
    /// Extra headers sent with every request (e.g. OpenRouter's `HTTP-Referer`).
    pub headers: Vec<(String, String)>,
    /// The output token limit used when the request sets none.
    pub max_tokens: Option<u32>,
    /// How large a streamed response's lines, events and body may grow before the call
    /// fails with [`ModelError::LimitExceeded`](crate::ModelError::LimitExceeded).
    pub sse_limits: SseLimits,
}

impl ProviderConfig {
    /// A server at `base_url` that needs no API key.
    pub fn new(base_url: impl Into<String>) -> Self {
        ProviderConfig {
            base_url: base_url.into(),
            api_key: None,
            api_key_env: None,
            require_api_key: false,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: DEFAULT_READ_TIMEOUT,
            headers: Vec::new(),
            max_tokens: None,
            sse_limits: SseLimits::default(),
        }
    }

    /// OpenAI: `https://api.openai.com/v1`, key from `OPENAI_API_KEY` (required).
    pub fn openai() -> Self {
        ProviderConfig::new("https://api.openai.com/v1").with_api_key_env("OPENAI_API_KEY")
    }

    /// Anthropic: `https://api.anthropic.com`, key from `ANTHROPIC_API_KEY` (required).
    pub fn anthropic() -> Self {
        ProviderConfig::new("https://api.anthropic.com").with_api_key_env("ANTHROPIC_API_KEY")
    }

    /// Uses another base URL.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Uses this API key instead of the environment.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Reads the API key from this environment variable, and requires one.
    pub fn with_api_key_env(mut self, var: impl Into<String>) -> Self {
        self.api_key_env = Some(var.into());
        self.require_api_key = true;
        self
    }

    /// Whether a missing key fails when the model is built.
    pub fn with_require_api_key(mut self, required: bool) -> Self {
        self.require_api_key = required;
        self
    }

    /// Sets the connect timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the read (idle) timeout.
    pub fn with_read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// Adds a header sent with every request.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the output token limit used when the request sets none.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the size limits of streamed responses.
    pub fn with_sse_limits(mut self, limits: SseLimits) -> Self {
        self.sse_limits = limits;
        self
    }

    /// The key to send: the explicit one, else the (non-empty) environment variable.
    pub fn resolve_api_key(&self) -> Option<String> {
        if let Some(key) = &self.api_key {
            return Some(key.clone());
        }
        let var = self.api_key_env.as_deref()?;
        std::env::var(var).ok().filter(|key| !key.trim().is_empty())
    }
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("require_api_key", &self.require_api_key)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("max_tokens", &self.max_tokens)
            .field("sse_limits", &self.sse_limits)
            .finish()
    }
}
