//! The provider catalog: which providers the harness knows (their wire protocol, base URL,
//! API key variable and well-known models), which models are usable given the keys at hand
//! ([`list_available_models`], cached for 10 s), and building a [`Model`] from its id
//! ([`resolve_model`]).
//!
//! Built in: `openai`, `anthropic`, and the OpenAI-compatible `openrouter`, `groq`, `deepseek`,
//! `gemini` (Google's OpenAI-compatible endpoint) and `ollama` (local, no key). Any other
//! OpenAI-compatible or Anthropic-compatible server is added with
//! [`ModelCatalog::with_provider`].

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

#[cfg(feature = "anthropic")]
use crate::AnthropicModel;
#[cfg(feature = "openai")]
use crate::OpenAiModel;
use crate::{Model, ModelError, ModelId, ProviderConfig};

/// How long [`ModelCatalog::list_available_models`] reuses its answer.
pub const AVAILABLE_MODELS_TTL: Duration = Duration::from_secs(10);

/// The wire protocol a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions ([`OpenAiModel`]).
    OpenAi,
    /// Anthropic Messages ([`AnthropicModel`]).
    Anthropic,
}

impl ProviderKind {
    /// The harness-model feature that builds this protocol's client.
    pub fn feature(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

/// A provider the catalog can build models for.
#[derive(Clone, Debug)]
pub struct ProviderEntry {
    /// The provider part of model ids, e.g. `groq`.
    pub id: String,
    /// The protocol it speaks.
    pub kind: ProviderKind,
    /// How it is reached. `api_key_env: None` with no `api_key` means no key is needed.
    pub config: ProviderConfig,
    /// Well-known model names, listed by [`ModelCatalog::list_available_models`]. Other names
    /// resolve too.
    pub models: Vec<String>,
}

impl ProviderEntry {
    /// A provider entry.
    pub fn new(
        id: impl Into<String>,
        kind: ProviderKind,
        config: ProviderConfig,
        models: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ProviderEntry {
            id: id.into(),
            kind,
            config,
            models: models.into_iter().map(Into::into).collect(),
        }
    }
}

/// The built-in providers.
pub fn builtin_providers() -> Vec<ProviderEntry> {
    use ProviderKind::{Anthropic, OpenAi};
    let keyed = |base: &str, var: &str| ProviderConfig::new(base).with_api_key_env(var);
    vec![
        ProviderEntry::new(
            "openai",
            OpenAi,
            ProviderConfig::openai(),
            [
                "gpt-5",
                "gpt-5-mini",
                "gpt-4.1",
                "gpt-4.1-mini",
                "gpt-4o",
                "gpt-4o-mini",
                "o3",
                "o4-mini",
            ],
        ),
        ProviderEntry::new(
            "anthropic",
            Anthropic,
            ProviderConfig::anthropic(),
            [
                "claude-opus-4-1",
                "claude-sonnet-4-5",
                "claude-haiku-4-5",
                "claude-3-7-sonnet-latest",
                "claude-3-5-haiku-latest",
            ],
        ),
        ProviderEntry::new(
            "openrouter",
            OpenAi,
            keyed("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
            [
                "anthropic/claude-sonnet-4.5",
                "openai/gpt-4o",
                "google/gemini-2.5-pro",
                "meta-llama/llama-3.3-70b-instruct",
                "deepseek/deepseek-chat",
            ],
        ),
        ProviderEntry::new(
            "groq",
            OpenAi,
            keyed("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
            [
                "llama-3.3-70b-versatile",
                "llama-3.1-8b-instant",
                "openai/gpt-oss-120b",
                "qwen/qwen3-32b",
            ],
        ),
        ProviderEntry::new(
            "deepseek",
            OpenAi,
            keyed("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
            ["deepseek-chat", "deepseek-reasoner"],
        ),
        ProviderEntry::new(
            "gemini",
            OpenAi,
            keyed(
                "https://generativelanguage.googleapis.com/v1beta/openai",
                "GEMINI_API_KEY",
            ),
            ["gemini-2.5-pro", "gemini-2.5-flash"],
        ),
        ProviderEntry::new(
            "ollama",
            OpenAi,
            ProviderConfig::new("http://localhost:11434/v1"),
            ["llama3.2", "qwen2.5-coder", "gpt-oss:20b"],
        ),
    ]
}

/// A model the catalog lists, with whether it can be used now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailableModel {
    /// `provider/name`.
    pub id: ModelId,
    /// The provider.
    pub provider: String,
    /// The model's name within the provider.
    pub name: String,
    /// Whether the provider's key is available (always true for providers that need none).
    pub has_api_key: bool,
    /// The environment variable the key is read from, if the provider needs one.
    pub api_key_env_var: Option<String>,
}

/// Decides whether a provider has credentials: `Some(answer)`, or `None` to fall back to the
/// environment.
pub type AuthChecker = Arc<dyn Fn(&str) -> Option<bool> + Send + Sync>;

/// Reads an environment variable.
pub type EnvReader = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The current time, for the cache.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The providers, auth status and model construction.
///
/// ```
/// use std::sync::Arc;
/// use harness_model::ModelCatalog;
///
/// let catalog = ModelCatalog::new()
///     // A keychain knows about Anthropic; for the rest, ask the environment.
///     .with_auth_checker(Arc::new(|provider: &str| (provider == "anthropic").then_some(true)))
///     .with_env(Arc::new(|_: &str| None));
/// let models = catalog.list_available_models();
/// let claude = models.iter().find(|m| m.id.as_str() == "anthropic/claude-sonnet-4-5").unwrap();
/// assert!(claude.has_api_key);
/// assert_eq!(claude.api_key_env_var.as_deref(), Some("ANTHROPIC_API_KEY"));
/// // Ollama needs no key.
/// assert!(models.iter().any(|m| m.provider == "ollama" && m.has_api_key));
/// // No key in the (empty) environment: resolving says which variable to set.
/// let error = catalog.resolve_model("openai/gpt-4o").err().unwrap();
/// assert!(error.to_string().contains("OPENAI_API_KEY"));
/// ```
pub struct ModelCatalog {
    providers: Vec<ProviderEntry>,
    auth_checker: Option<AuthChecker>,
    env: EnvReader,
    clock: Clock,
    ttl: Duration,
    cache: Mutex<Option<(Instant, Arc<[AvailableModel]>)>>,
}

impl Default for ModelCatalog {
    fn default() -> Self {
        ModelCatalog::new()
    }
}

impl fmt::Debug for ModelCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelCatalog")
            .field("providers", &self.providers)
            .field("auth_checker", &self.auth_checker.is_some())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl ModelCatalog {
    /// The built-in providers, keys from the process environment, a 10 s cache.
    pub fn new() -> Self {
        ModelCatalog {
            providers: builtin_providers(),
            auth_checker: None,
            env: Arc::new(|var: &str| std::env::var(var).ok()),
            clock: Arc::new(Instant::now),
            ttl: AVAILABLE_MODELS_TTL,
            cache: Mutex::new(None),
        }
    }

    /// Adds a provider, or replaces the one with the same id.
    pub fn with_provider(mut self, entry: ProviderEntry) -> Self {
        self.providers.retain(|known| known.id != entry.id);
        self.providers.push(entry);
        self.invalidate_cache();
        self
    }

    /// Changes a provider's configuration (base URL, key, timeouts); unknown ids are ignored.
    ///
    /// ```
    /// use harness_model::ModelCatalog;
    ///
    /// let catalog = ModelCatalog::new()
    ///     .with_config("ollama", |config| config.with_base_url("http://gpu-box:11434/v1"));
    /// assert!(catalog.resolve_model("ollama/llama3.2").is_ok());
    /// ```
    pub fn with_config(
        mut self,
        provider: &str,
        change: impl FnOnce(ProviderConfig) -> ProviderConfig,
    ) -> Self {
        if let Some(entry) = self.providers.iter_mut().find(|entry| entry.id == provider) {
            entry.config = change(entry.config.clone());
        }
        self.invalidate_cache();
        self
    }

    /// Decides auth status with `checker` first; where it answers `None`, the environment.
    pub fn with_auth_checker(mut self, checker: AuthChecker) -> Self {
        self.auth_checker = Some(checker);
        self.invalidate_cache();
        self
    }

    /// Reads API keys through `env` instead of the process environment.
    pub fn with_env(mut self, env: EnvReader) -> Self {
        self.env = env;
        self.invalidate_cache();
        self
    }

    /// Uses another clock for the cache (tests).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self.invalidate_cache();
        self
    }

    /// Changes how long the available-model list is reused.
    pub fn with_cache_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The providers, in order.
    pub fn providers(&self) -> &[ProviderEntry] {
        &self.providers
    }

    /// Forgets the cached list (after a key was added, say).
    pub fn invalidate_cache(&self) {
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Every well-known model of every provider, with its auth status. The answer is reused
    /// for 10 s (the checker and the environment are asked once per provider per refresh).
    pub fn list_available_models(&self) -> Arc<[AvailableModel]> {
        let now = (self.clock)();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, models)) = cache.as_ref()
            && now.saturating_duration_since(*at) < self.ttl
        {
            return Arc::clone(models);
        }
        let models: Arc<[AvailableModel]> = self
            .providers
            .iter()
            .flat_map(|entry| {
                let has_api_key = self.has_api_key(entry);
                let env_var = entry.config.api_key_env.clone();
                entry.models.iter().filter_map(move |name| {
                    let id = ModelId::new(&format!("{}/{name}", entry.id)).ok()?;
                    Some(AvailableModel {
                        id,
                        provider: entry.id.clone(),
                        name: name.clone(),
                        has_api_key,
                        api_key_env_var: env_var.clone(),
                    })
                })
            })
            .collect();
        *cache = Some((now, Arc::clone(&models)));
        models
    }

    fn has_api_key(&self, entry: &ProviderEntry) -> bool {
        if let Some(answer) = self
            .auth_checker
            .as_ref()
            .and_then(|check| check(&entry.id))
        {
            return answer;
        }
        self.api_key(entry).is_some() || !entry.config.require_api_key
    }

    /// The explicit key, else the (non-empty) environment variable.
    fn api_key(&self, entry: &ProviderEntry) -> Option<String> {
        if let Some(key) = &entry.config.api_key {
            return Some(key.clone());
        }
        let var = entry.config.api_key_env.as_deref()?;
        (self.env)(var).filter(|key| !key.trim().is_empty())
    }

    /// Builds the model for `provider/name`. Fails with [`ModelError::UnknownProvider`] for a
    /// provider not in the catalog, [`ModelError::MissingApiKey`] when its key is not set, and
    /// [`ModelError::Config`] for an id that is not `provider/name`.
    pub fn resolve_model(&self, id: &str) -> Result<Arc<dyn Model>, ModelError> {
        let model_id = ModelId::new(id).map_err(|error| ModelError::Config {
            provider: id.to_owned(),
            message: error.to_string(),
        })?;
        let entry = self
            .providers
            .iter()
            .find(|entry| entry.id == model_id.provider())
            .ok_or_else(|| ModelError::UnknownProvider {
                provider: model_id.provider().to_owned(),
                known: self
                    .providers
                    .iter()
                    .map(|entry| entry.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let mut config = entry.config.clone();
        match self.api_key(entry) {
            Some(key) => config.api_key = Some(key),
            None if config.require_api_key => {
                return Err(ModelError::MissingApiKey {
                    provider: entry.id.clone(),
                    env_var: config.api_key_env,
                });
            }
            None => config.api_key_env = None,
        }
        match entry.kind {
            #[cfg(feature = "openai")]
            ProviderKind::OpenAi => Ok(Arc::new(OpenAiModel::new(id, config)?)),
            #[cfg(feature = "anthropic")]
            ProviderKind::Anthropic => Ok(Arc::new(AnthropicModel::new(id, config)?)),
            #[allow(unreachable_patterns)]
            kind => Err(ModelError::Config {
                provider: entry.id.clone(),
                message: format!(
                    "this build has no {kind:?} client: enable harness-model's `{}` feature",
                    kind.feature()
                ),
            }),
        }
    }
}

fn default_catalog() -> &'static ModelCatalog {
    static CATALOG: OnceLock<ModelCatalog> = OnceLock::new();
    CATALOG.get_or_init(ModelCatalog::new)
}

/// The built-in providers' well-known models with their auth status from the environment,
/// cached for 10 s. Use a [`ModelCatalog`] for a custom auth checker or more providers.
pub fn list_available_models() -> Arc<[AvailableModel]> {
    default_catalog().list_available_models()
}

/// Builds a model of a built-in provider from its id, its key from the environment (see
/// [`ModelCatalog::resolve_model`]).
pub fn resolve_model(id: &str) -> Result<Arc<dyn Model>, ModelError> {
    default_catalog().resolve_model(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    /// A clock that moves only when told to.
    fn manual_clock() -> (Clock, Arc<AtomicU64>) {
        let start = Instant::now();
        let offset_ms = Arc::new(AtomicU64::new(0));
        let offset = Arc::clone(&offset_ms);
        let clock: Clock =
            Arc::new(move || start + Duration::from_millis(offset.load(Ordering::SeqCst)));
        (clock, offset_ms)
    }

    #[test]
    fn the_list_is_cached_for_ten_seconds() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let (clock, advance) = manual_clock();
        let catalog = ModelCatalog::new()
            .with_env(Arc::new(|_: &str| None))
            .with_auth_checker(Arc::new(move |provider: &str| {
                counter.fetch_add(1, Ordering::SeqCst);
                (provider == "openai").then_some(true)
            }))
            .with_clock(clock);
        let providers = catalog.providers().len();
        let first = catalog.list_available_models();
        assert_eq!(calls.load(Ordering::SeqCst), providers, "once per provider");
        advance.store(9_999, Ordering::SeqCst);
        let second = catalog.list_available_models();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(calls.load(Ordering::SeqCst), providers);
        advance.store(10_000, Ordering::SeqCst);
        catalog.list_available_models();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2 * providers,
            "refreshed after 10 s"
        );
        catalog.invalidate_cache();
        catalog.list_available_models();
        assert_eq!(calls.load(Ordering::SeqCst), 3 * providers);

        let status = |id: &str| first.iter().find(|m| m.id.as_str() == id).unwrap().clone();
        assert!(status("openai/gpt-4o").has_api_key);
        // The checker said nothing about Groq and the environment is empty.
        let groq = status("groq/llama-3.3-70b-versatile");
        assert!(!groq.has_api_key);
        assert_eq!(groq.api_key_env_var.as_deref(), Some("GROQ_API_KEY"));
        let ollama = status("ollama/llama3.2");
        assert!(ollama.has_api_key);
        assert_eq!(ollama.api_key_env_var, None);
    }

    #[test]
    fn keys_come_from_the_environment_reader() {
        let catalog = ModelCatalog::new().with_env(Arc::new(|var: &str| match var {
            "DEEPSEEK_API_KEY" => Some("sk-ds".to_owned()),
            "GROQ_API_KEY" => Some("  ".to_owned()),
            _ => None,
        }));
        let models = catalog.list_available_models();
        let has_key = |provider: &str| {
            models
                .iter()
                .find(|m| m.provider == provider)
                .unwrap()
                .has_api_key
        };
        assert!(has_key("deepseek"));
        assert!(!has_key("groq"), "a blank key is no key");
        assert!(!has_key("anthropic"));
        let json = serde_json::to_value(&models[0]).unwrap();
        assert!(json.get("hasApiKey").is_some() && json.get("apiKeyEnvVar").is_some());
    }

    #[test]
    fn resolving_builds_the_right_provider_or_says_what_is_missing() {
        let catalog = ModelCatalog::new().with_env(Arc::new(|var: &str| {
            (var == "ANTHROPIC_API_KEY" || var == "OPENROUTER_API_KEY").then(|| "k".to_owned())
        }));
        let model = catalog
            .resolve_model("anthropic/claude-sonnet-4-5")
            .unwrap();
        assert_eq!(model.id().as_str(), "anthropic/claude-sonnet-4-5");
        let routed = catalog
            .resolve_model("openrouter/anthropic/claude-sonnet-4.5")
            .unwrap();
        assert_eq!(routed.id().name(), "anthropic/claude-sonnet-4.5");
        assert!(catalog.resolve_model("ollama/anything-local").is_ok());

        match catalog.resolve_model("groq/llama-3.3-70b-versatile") {
            Err(ModelError::MissingApiKey { provider, env_var }) => {
                assert_eq!(provider, "groq");
                assert_eq!(env_var.as_deref(), Some("GROQ_API_KEY"));
            }
            other => panic!("{:?}", other.map(|m| m.id().clone())),
        }
        match catalog.resolve_model("acme/model-1") {
            Err(error @ ModelError::UnknownProvider { .. }) => {
                let text = error.to_string();
                assert!(
                    text.contains("`acme`") && text.contains("openai, anthropic"),
                    "{text}"
                );
            }
            other => panic!("{:?}", other.map(|m| m.id().clone())),
        }
        assert!(matches!(
            catalog.resolve_model("no-slash"),
            Err(ModelError::Config { .. })
        ));
        // The process-wide catalog lists the built-ins.
        assert!(
            list_available_models()
                .iter()
                .any(|m| m.id.as_str() == "ollama/llama3.2" && m.has_api_key)
        );
        assert!(matches!(
            resolve_model("acme/x"),
            Err(ModelError::UnknownProvider { .. })
        ));
    }

    #[test]
    fn custom_providers_and_configs() {
        let catalog = ModelCatalog::new()
            .with_env(Arc::new(|_: &str| None))
            .with_provider(ProviderEntry::new(
                "vllm",
                ProviderKind::OpenAi,
                ProviderConfig::new("http://127.0.0.1:8000/v1"),
                ["qwen3-coder"],
            ))
            .with_config("openai", |config| config.with_api_key("sk-explicit"));
        assert!(catalog.resolve_model("vllm/qwen3-coder").is_ok());
        assert!(catalog.resolve_model("openai/gpt-4o").is_ok());
        let models = catalog.list_available_models();
        assert!(
            models
                .iter()
                .any(|m| m.id.as_str() == "vllm/qwen3-coder" && m.has_api_key)
        );
        assert!(
            models
                .iter()
                .find(|m| m.provider == "openai")
                .unwrap()
                .has_api_key
        );
    }
}
