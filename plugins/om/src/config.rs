//! Configuration: the plugin's defaults ([`OmConfig`]) and the per-thread settings a user can
//! change at runtime ([`OmSettings`], saved in the thread's metadata).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The thread-metadata key the per-thread settings live under.
pub const SETTINGS_KEY: &str = "om";

/// When an idle thread's raw messages are observed even below the threshold: once the
/// provider's prompt cache has expired, a long raw history costs full price again, so it is
/// better compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleTrigger {
    /// Never.
    Off,
    /// After this long without a model call.
    After(#[serde(with = "millis")] Duration),
    /// After the provider's prompt-cache lifetime ([`IdleTrigger::cache_lifetime`]).
    #[default]
    Auto,
}

impl IdleTrigger {
    /// How long a provider keeps a prompt cache warm: 5 min for Anthropic (and providers not
    /// listed), 1 h for OpenAI and DeepSeek, 2 h for Groq, 24 h for Gemini.
    pub fn cache_lifetime(provider: &str) -> Duration {
        const MINUTE: u64 = 60;
        let seconds = match provider {
            "openai" | "deepseek" => 60 * MINUTE,
            "groq" => 120 * MINUTE,
            "gemini" | "google" => 24 * 60 * MINUTE,
            _ => 5 * MINUTE,
        };
        Duration::from_secs(seconds)
    }

    /// The idle time after which `provider`'s thread is observed, if any.
    pub fn after(self, provider: &str) -> Option<Duration> {
        match self {
            IdleTrigger::Off => None,
            IdleTrigger::After(duration) => Some(duration),
            IdleTrigger::Auto => Some(Self::cache_lifetime(provider)),
        }
    }
}

/// How observer and reflector failures are retried before the run fails with `om-failure`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OmRetry {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The wait before the second attempt; each later wait doubles.
    #[serde(with = "millis")]
    pub initial_backoff: Duration,
    /// The most the waits may add up to; once the next wait would pass it, the call fails.
    #[serde(with = "millis")]
    pub max_total_wait: Duration,
}

impl Default for OmRetry {
    /// 4 attempts, waiting 1 s, 2 s, 4 s: at most 7 s of waiting (bounded by 20 s).
    fn default() -> Self {
        OmRetry {
            max_attempts: 4,
            initial_backoff: Duration::from_secs(1),
            max_total_wait: Duration::from_secs(20),
        }
    }
}

impl OmRetry {
    /// The wait before attempt `attempt + 1` (1-based), or `None` when no attempt is left or
    /// the total would pass `max_total_wait`.
    pub fn wait_after(&self, attempt: u32, waited: Duration) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let wait = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        (waited + wait <= self.max_total_wait).then_some(wait)
    }
}

/// The plugin's configuration. Thread-level overrides of the models and thresholds are kept
/// in [`OmSettings`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct OmConfig {
    /// The observer's model, `provider/name`; `None` uses the run's model.
    pub observer_model: Option<String>,
    /// The reflector's model; `None` uses the observer's.
    pub reflector_model: Option<String>,
    /// Tokens of raw messages at which they are replaced by observations (40,000).
    pub observation_threshold: u64,
    /// Tokens of observations at which the reflector compresses them (50,000).
    pub reflection_threshold: u64,
    /// Buffer observations in the background every this fraction of the observation
    /// threshold (0.2: at 20%, 40%, ...), so that activation finds them ready.
    pub buffer_interval: f64,
    /// At activation, keep up to this fraction of the threshold as raw recent messages
    /// (0.2); older messages are replaced by observations.
    pub keep_recent: f64,
    /// While buffering is still running at the threshold, keep going on raw messages up to
    /// this multiple of the threshold (1.2) before waiting for it.
    pub block_after: f64,
    /// When an idle thread is observed below the threshold.
    pub idle: IdleTrigger,
    /// Observe when the provider changes (its cache cannot be reused anyway).
    pub provider_change: bool,
    /// How failed observer and reflector calls are retried.
    pub retry: OmRetry,
    /// Reflector attempts when its result does not shrink below the reflection threshold;
    /// each retry asks for stronger compression.
    pub reflection_attempts: u32,
    /// The observer's sampling temperature.
    pub observer_temperature: f32,
    /// The reflector's sampling temperature.
    pub reflector_temperature: f32,
}

impl Default for OmConfig {
    fn default() -> Self {
        OmConfig {
            observer_model: None,
            reflector_model: None,
            observation_threshold: 40_000,
            reflection_threshold: 50_000,
            buffer_interval: 0.2,
            keep_recent: 0.2,
            block_after: 1.2,
            idle: IdleTrigger::Auto,
            provider_change: true,
            retry: OmRetry::default(),
            reflection_attempts: 3,
            observer_temperature: 0.3,
            reflector_temperature: 0.0,
        }
    }
}

impl OmConfig {
    /// Checks the numbers, saying which one is wrong.
    pub fn validate(&self) -> Result<(), crate::error::OmError> {
        let bad =
            |field: &str, why: &str| Err(crate::error::OmError::Config(format!("`{field}` {why}")));
        if self.observation_threshold == 0 {
            return bad("observation_threshold", "must be above 0");
        }
        if self.reflection_threshold == 0 {
            return bad("reflection_threshold", "must be above 0");
        }
        if !(self.buffer_interval > 0.0 && self.buffer_interval < 1.0) {
            return bad(
                "buffer_interval",
                "must be between 0 and 1 (a fraction of the threshold)",
            );
        }
        if !(0.0..1.0).contains(&self.keep_recent) {
            return bad(
                "keep_recent",
                "must be at least 0 and below 1 (a fraction of the threshold)",
            );
        }
        if self.block_after < 1.0 || !self.block_after.is_finite() {
            return bad(
                "block_after",
                "must be at least 1 (a multiple of the threshold)",
            );
        }
        if self.retry.max_attempts == 0 {
            return bad("retry.max_attempts", "must be at least 1");
        }
        if self.reflection_attempts == 0 {
            return bad("reflection_attempts", "must be at least 1");
        }
        Ok(())
    }
}

/// A thread's settings: the models and thresholds in force for it. Unset fields fall back to
/// the [`OmConfig`]. Saved in the thread's metadata under `om`, so a thread reopened after a
/// restart keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OmSettings {
    /// The observer's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observer_model: Option<String>,
    /// The reflector's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflector_model: Option<String>,
    /// The observation threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation_threshold: Option<u64>,
    /// The reflection threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflection_threshold: Option<u64>,
}

impl OmSettings {
    /// The settings saved in a thread's metadata (defaults if none or unreadable).
    pub fn from_metadata(metadata: &Map<String, Value>) -> Self {
        metadata
            .get(SETTINGS_KEY)
            .and_then(|value| serde_json::from_value(value.clone()).ok())
            .unwrap_or_default()
    }
}

/// The settings in force for one thread: the thread's, else the config's.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Effective {
    pub(crate) observer_model: Option<String>,
    pub(crate) reflector_model: Option<String>,
    pub(crate) threshold: u64,
    pub(crate) reflection_threshold: u64,
}

impl Effective {
    pub(crate) fn new(config: &OmConfig, settings: &OmSettings) -> Self {
        let observer_model = settings
            .observer_model
            .clone()
            .or_else(|| config.observer_model.clone());
        Effective {
            reflector_model: settings
                .reflector_model
                .clone()
                .or_else(|| config.reflector_model.clone())
                .or_else(|| observer_model.clone()),
            observer_model,
            threshold: settings
                .observation_threshold
                .unwrap_or(config.observation_threshold)
                .max(1),
            reflection_threshold: settings
                .reflection_threshold
                .unwrap_or(config.reflection_threshold)
                .max(1),
        }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_stop_at_the_attempt_and_wait_bounds() {
        let retry = OmRetry {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_total_wait: Duration::from_millis(350),
        };
        assert_eq!(
            retry.wait_after(1, Duration::ZERO),
            Some(Duration::from_millis(100))
        );
        assert_eq!(
            retry.wait_after(2, Duration::from_millis(100)),
            Some(Duration::from_millis(200))
        );
        // 100 + 200 + 400 would pass 350.
        assert_eq!(retry.wait_after(3, Duration::from_millis(300)), None);
        assert_eq!(retry.wait_after(5, Duration::ZERO), None);
    }

    #[test]
    fn auto_idle_follows_the_providers_cache_lifetimes() {
        let minutes = |p: &str| IdleTrigger::Auto.after(p).map(|d| d.as_secs() / 60);
        assert_eq!(minutes("anthropic"), Some(5));
        assert_eq!(minutes("openai"), Some(60));
        assert_eq!(minutes("deepseek"), Some(60));
        assert_eq!(minutes("groq"), Some(120));
        assert_eq!(minutes("gemini"), Some(24 * 60));
        assert_eq!(minutes("someone-new"), Some(5));
        assert_eq!(IdleTrigger::Off.after("openai"), None);
    }

    #[test]
    fn bad_numbers_are_named() {
        let config = OmConfig {
            buffer_interval: 1.5,
            ..OmConfig::default()
        };
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("buffer_interval"), "{error}");
        assert!(OmConfig::default().validate().is_ok());
    }
}
