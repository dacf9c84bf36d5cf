//! Models: the [`Model`] trait, model ids, the streaming protocol and its errors, and the
//! providers.
//!
//! A model turns a [`ModelRequest`] into a stream of [`StreamEvent`]s: text and thinking
//! deltas, tool-call input deltas, usage and a finish reason. [`ResponseAssembler`] folds the
//! stream into the [`ModelResponse`] the kernel acts on; [`collect_response`] does it for a
//! whole stream and [`call_with_retries`] adds retries with backoff ([`RetryPolicy`], which
//! honours the provider's `Retry-After`). Providers make one attempt per call:
//!
//! - [`OpenAiModel`]: OpenAI Chat Completions, streamed over SSE, against OpenAI or any
//!   OpenAI-compatible base URL (Ollama, vLLM, llama.cpp's server, OpenRouter, Groq, DeepSeek,
//!   Gemini's compatibility endpoint).
//! - [`AnthropicModel`]: Anthropic Messages, streamed over SSE, with extended thinking.
//! - [`ScriptedModel`]: a queue of responses, for tests and offline use.
//!
//! Both HTTP providers take a [`ProviderConfig`] (base URL, API key or its environment
//! variable, connect and read timeouts) and map failures to typed [`ModelError`]s: 401/403 to
//! [`ModelError::Auth`] naming the key's variable, context overflow to
//! [`ModelError::ContextOverflow`], 429 to [`ModelError::RateLimited`] and 5xx/529 to
//! [`ModelError::Unavailable`] with `Retry-After`, dropped or idle streams to
//! [`ModelError::Connection`], errors inside the stream to [`ModelError::Stream`]. The
//! [`sse`] module holds the Server-Sent Events parser they share.
//!
//! [`ModelCatalog`] knows the providers: [`list_available_models`] tells which models have a
//! key (cached 10 s) and [`resolve_model`] builds a model from its id.
//!
//! Model ids are `provider/name`, e.g. `openai/gpt-4o` or `anthropic/claude-sonnet-4-5`.

#![deny(clippy::print_stdout, clippy::print_stderr)]

#[cfg(feature = "anthropic")]
mod anthropic;
mod assemble;
mod call;
mod catalog;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http;
#[cfg(feature = "openai")]
mod openai;
mod provider;
mod scripted;
pub mod sse;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};

#[cfg(feature = "anthropic")]
pub use anthropic::{ANTHROPIC_VERSION, AnthropicModel, default_max_tokens};
pub use assemble::ResponseAssembler;
pub use call::{call_with_retries, collect_response};
pub use catalog::{
    AVAILABLE_MODELS_TTL, AuthChecker, AvailableModel, Clock, EnvReader, ModelCatalog,
    ProviderEntry, ProviderKind, builtin_providers, list_available_models, resolve_model,
};
pub use harness_tags::{
    FinishReason, KernelMessage, ModelRequest, ModelResponse, Thinking, ToolCall, ToolSpec, Usage,
};
#[cfg(feature = "rustls")]
pub use http::install_crypto_provider;
#[cfg(feature = "openai")]
pub use openai::OpenAiModel;
pub use provider::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, ProviderConfig};
pub use scripted::{Scripted, ScriptedModel};
pub use sse::SseLimits;

/// A model id: `provider/name`. The name may itself contain slashes (OpenRouter's
/// `openrouter/anthropic/claude-3.5-sonnet`).
///
/// ```
/// use harness_model::ModelId;
///
/// let id: ModelId = "openai/gpt-4o".parse().unwrap();
/// assert_eq!((id.provider(), id.name()), ("openai", "gpt-4o"));
/// assert!("gpt-4o".parse::<ModelId>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ModelId {
    id: Arc<str>,
    split: usize,
}

/// A string that is not `provider/name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model id `{0}` is not `provider/name` (for example `openai/gpt-4o`)")]
pub struct ModelIdError(String);

impl ModelId {
    /// Parses `provider/name`.
    pub fn new(id: &str) -> Result<Self, ModelIdError> {
        match id.split_once('/') {
            Some((provider, name))
                if !provider.is_empty()
                    && !name.is_empty()
                    && !id.chars().any(char::is_whitespace) =>
            {
                Ok(ModelId {
                    id: Arc::from(id),
                    split: provider.len(),
                })
            }
            _ => Err(ModelIdError(id.to_owned())),
        }
    }

    /// The provider, e.g. `openai`.
    pub fn provider(&self) -> &str {
        &self.id[..self.split]
    }

    /// The model's name within the provider, e.g. `gpt-4o`.
    pub fn name(&self) -> &str {
        &self.id[self.split + 1..]
    }

    /// The whole id.
    pub fn as_str(&self) -> &str {
        &self.id
    }
}

impl FromStr for ModelId {
    type Err = ModelIdError;

    fn from_str(id: &str) -> Result<Self, ModelIdError> {
        ModelId::new(id)
    }
}

impl TryFrom<String> for ModelId {
    type Error = ModelIdError;

    fn try_from(id: String) -> Result<Self, ModelIdError> {
        ModelId::new(&id)
    }
}

impl From<ModelId> for String {
    fn from(id: ModelId) -> String {
        id.id.to_string()
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

impl fmt::Debug for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModelId({})", self.id)
    }
}

/// One event of a model's streamed response.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// More answer text.
    TextDelta(String),
    /// More reasoning text.
    ThinkingDelta(String),
    /// The provider's signature over the reasoning.
    ThinkingSignature(String),
    /// A tool call begins.
    ToolCallStart {
        /// The call's position in the response (providers key deltas by it).
        index: usize,
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's JSON arguments text.
    ToolCallDelta {
        /// The call's position in the response.
        index: usize,
        /// The next piece of the arguments text.
        arguments: String,
    },
    /// A tool call's arguments are complete.
    ToolCallEnd {
        /// The call's position in the response.
        index: usize,
    },
    /// Token usage so far (later events replace earlier counts field by field).
    Usage(Usage),
    /// Why the model stopped.
    Finish(FinishReason),
}

/// A model's streamed response.
pub type ModelStream = BoxStream<'static, Result<StreamEvent, ModelError>>;

/// A language model.
///
/// Implementations make one attempt per call; the kernel retries what
/// [`ModelError::is_retryable`] says is worth retrying, with backoff.
#[async_trait]
pub trait Model: Send + Sync + 'static {
    /// The model's id, `provider/name`.
    fn id(&self) -> &ModelId;

    /// Starts a streamed completion. Dropping the stream cancels the request.
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError>;
}

/// Anything that can be used where a shared model is kept: a model, or one already behind an
/// [`Arc`] (so a caller can keep a handle on it).
///
/// ```
/// use std::sync::Arc;
/// use harness_model::{IntoModel, Model, ScriptedModel};
///
/// let shared = Arc::new(ScriptedModel::new("scripted/a"));
/// let model: Arc<dyn Model> = Arc::clone(&shared).into_model();
/// assert!(Arc::ptr_eq(&(Arc::clone(&shared) as Arc<dyn Model>), &model));
/// assert_eq!(ScriptedModel::new("scripted/b").into_model().id().as_str(), "scripted/b");
/// ```
pub trait IntoModel {
    /// The model, shared.
    fn into_model(self) -> Arc<dyn Model>;
}

impl<M: Model> IntoModel for M {
    fn into_model(self) -> Arc<dyn Model> {
        Arc::new(self)
    }
}

impl<M: Model> IntoModel for Arc<M> {
    fn into_model(self) -> Arc<dyn Model> {
        self
    }
}

impl IntoModel for Arc<dyn Model> {
    fn into_model(self) -> Arc<dyn Model> {
        self
    }
}

/// Why a model call failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider rejected the credentials.
    #[error(
        "{provider} rejected the credentials ({message}); check the API key{hint}",
        hint = env_hint(env_var)
    )]
    Auth {
        /// The provider.
        provider: String,
        /// The provider's message.
        message: String,
        /// The environment variable the key is read from, if any.
        env_var: Option<String>,
    },
    /// The request is malformed or unsupported; retrying will not help.
    #[error("{provider} rejected the request: {message}")]
    BadRequest {
        /// The provider.
        provider: String,
        /// The provider's message.
        message: String,
    },
    /// The conversation does not fit the model's context window.
    #[error(
        "the conversation is too long for the model's context window ({message}); compress or \
         shorten it (observational memory does this), or use a model with a larger window"
    )]
    ContextOverflow {
        /// The provider's message.
        message: String,
    },
    /// Too many requests; retried after the delay the provider asks for.
    #[error("{provider} is rate limiting requests: {message}")]
    RateLimited {
        /// The provider.
        provider: String,
        /// The provider's message.
        message: String,
        /// How long the provider asked to wait (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// The provider is overloaded or failed on its side; retried.
    #[error("{provider} is unavailable (status {status}): {message}")]
    Unavailable {
        /// The provider.
        provider: String,
        /// The HTTP status (529 for Anthropic's `overloaded_error`).
        status: u16,
        /// The provider's message.
        message: String,
        /// How long the provider asked to wait (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// The connection failed or dropped; retried.
    #[error("connection to {provider} failed: {message}")]
    Connection {
        /// The provider.
        provider: String,
        /// What happened.
        message: String,
    },
    /// The provider reported an error inside the stream.
    #[error("{provider} reported an error mid-stream ({kind}): {message}")]
    Stream {
        /// The provider.
        provider: String,
        /// The provider's error type, e.g. `overloaded_error`.
        kind: String,
        /// The provider's message.
        message: String,
        /// Whether retrying may help.
        retryable: bool,
    },
    /// The provider sent something that does not follow its protocol.
    #[error("{provider} sent an invalid response: {message}")]
    InvalidResponse {
        /// The provider.
        provider: String,
        /// What was wrong.
        message: String,
    },
    /// The response broke one of the client's size limits ([`SseLimits`], set per provider
    /// in [`ProviderConfig::sse_limits`]): the server sent an endless line, event or body.
    /// Not retried: a broken or hostile server would send the same again.
    #[error(
        "{provider} sent {limit} larger than {max} bytes, so the response was dropped; check \
         that the base URL points at a model server, or raise `{setting}` in the provider's \
         `sse_limits` if its responses are really this large",
        setting = limit.setting()
    )]
    LimitExceeded {
        /// The provider.
        provider: String,
        /// Which limit.
        limit: sse::SseLimit,
        /// Its value, in bytes.
        max: u64,
    },
    /// A scripted model has no response left, or its script says to fail.
    #[error("scripted model: {0}")]
    Script(String),
    /// No model is configured for this id.
    #[error("no model for `{0}`; configure a provider for it or use another model id")]
    UnknownModel(String),
    /// The model id names a provider nobody configured.
    #[error(
        "unknown model provider `{provider}`; use one of {known}, or register it with \
         `ModelCatalog::with_provider`"
    )]
    UnknownProvider {
        /// The provider part of the id.
        provider: String,
        /// The providers that are configured, comma-separated.
        known: String,
    },
    /// The provider needs an API key and none was given.
    #[error("no API key for {provider}; {hint}", hint = missing_key_hint(env_var))]
    MissingApiKey {
        /// The provider.
        provider: String,
        /// The environment variable the key is read from.
        env_var: Option<String>,
    },
    /// The provider's configuration is unusable (a bad base URL, a client that cannot be
    /// built).
    #[error("{provider} is misconfigured: {message}")]
    Config {
        /// The provider.
        provider: String,
        /// What is wrong.
        message: String,
    },
}

fn missing_key_hint(env_var: &Option<String>) -> String {
    match env_var {
        Some(var) => format!("set `{var}` or pass the key in the provider's configuration"),
        None => "pass the key in the provider's configuration".to_owned(),
    }
}

fn env_hint(env_var: &Option<String>) -> String {
    env_var
        .as_deref()
        .map(|var| format!(" in `{var}`"))
        .unwrap_or_default()
}

impl ModelError {
    /// True if the same request may succeed later: rate limits, overload, server errors,
    /// dropped connections.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::RateLimited { .. }
            | ModelError::Unavailable { .. }
            | ModelError::Connection { .. } => true,
            ModelError::Stream { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// How long the provider asked to wait before retrying.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. }
            | ModelError::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The longest wait a provider's `Retry-After` (or `retry-after-ms`) is read as: a server
/// that asks for more (a date centuries ahead, a delay beyond `u64`) gets this, one day.
/// [`RetryPolicy::max_backoff`] caps the wait the retries actually take.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// How model calls are retried: exponential backoff from `initial_backoff`, doubled each
/// attempt up to `max_backoff`; a provider's `Retry-After` wins when it is longer (capped at
/// `max_backoff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait before the second attempt.
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, waiting 0.5 s, 1 s, 2 s (at most 20 s when the provider asks for more).
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait before attempt `attempt + 1`, after `attempt` failed with `error`; `None` if no
    /// attempt is left or the error is not worth retrying.
    pub fn backoff(&self, attempt: u32, error: &ModelError) -> Option<Duration> {
        if attempt >= self.max_attempts.max(1) || !error.is_retryable() {
            return None;
        }
        let exponent = attempt.saturating_sub(1).min(16);
        let exponential = self.initial_backoff.saturating_mul(1 << exponent);
        let wait = match error.retry_after() {
            Some(asked) => asked.max(exponential),
            None => exponential,
        };
        Some(wait.min(self.max_backoff))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_split_at_the_first_slash() {
        let id = ModelId::new("openrouter/anthropic/claude-3.5-sonnet").unwrap();
        assert_eq!(id.provider(), "openrouter");
        assert_eq!(id.name(), "anthropic/claude-3.5-sonnet");
        for bad in ["", "gpt-4o", "/gpt", "openai/", "open ai/x"] {
            assert!(ModelId::new(bad).is_err(), "{bad}");
        }
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"openrouter/anthropic/claude-3.5-sonnet\"");
        assert_eq!(serde_json::from_str::<ModelId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<ModelId>("\"nope\"").is_err());
    }

    #[test]
    fn backoff_doubles_honours_retry_after_and_stops() {
        let policy = RetryPolicy::default();
        let busy = ModelError::Unavailable {
            provider: "p".into(),
            status: 503,
            message: "busy".into(),
            retry_after: None,
        };
        let waits: Vec<_> = (1..=4)
            .map(|attempt| policy.backoff(attempt, &busy))
            .collect();
        assert_eq!(
            waits,
            [
                Some(Duration::from_millis(500)),
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(2)),
                None
            ]
        );
        let limited = ModelError::RateLimited {
            provider: "p".into(),
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(policy.backoff(1, &limited), Some(Duration::from_secs(7)));
        let greedy = ModelError::RateLimited {
            provider: "p".into(),
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(600)),
        };
        assert_eq!(policy.backoff(1, &greedy), Some(Duration::from_secs(20)));
        let auth = ModelError::Auth {
            provider: "openai".into(),
            message: "bad key".into(),
            env_var: Some("OPENAI_API_KEY".into()),
        };
        assert_eq!(policy.backoff(1, &auth), None);
        assert!(auth.to_string().contains("OPENAI_API_KEY"));
    }
}
