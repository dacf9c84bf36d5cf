//! Observational memory as user interfaces see it: its progress and what triggers it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What observational memory is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OmStatus {
    /// Nothing is running.
    #[default]
    Idle,
    /// The observer is running.
    Observing,
    /// The reflector is running.
    Reflecting,
}

/// Observational memory's progress, for the display state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OmProgress {
    /// What is running.
    pub status: OmStatus,
    /// Tokens in messages not observed yet.
    pub pending_tokens: u64,
    /// The observation threshold.
    pub threshold: u64,
    /// `pending_tokens` as a percentage of `threshold`.
    pub threshold_percent: f64,
    /// Tokens in the active observations.
    pub observation_tokens: u64,
    /// The reflection threshold.
    pub reflection_threshold: u64,
    /// `observation_tokens` as a percentage of `reflection_threshold`.
    pub reflection_threshold_percent: f64,
    /// Observation chunks buffered ahead of activation.
    pub buffered: u32,
    /// How many reflections have run.
    pub generation_count: u32,
}

/// Which observational-memory model a change applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OmRole {
    /// The observer.
    Observer,
    /// The reflector.
    Reflector,
}

/// What activated buffered observations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OmTrigger {
    /// Pending tokens reached the threshold.
    Threshold,
    /// The thread was idle past the prompt cache's lifetime.
    Ttl,
    /// The provider changed, so the cache is cold anyway.
    ProviderChange,
}
