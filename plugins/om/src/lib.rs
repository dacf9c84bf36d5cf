//! Observational memory: long sessions without context rot and without lossy compaction.
//!
//! An *observer* model reads the older part of the conversation and writes dated, prioritized
//! observations (decisions, facts, the state of files and commands, what the user asserted and
//! asked, what is done). When the raw messages reach the observation threshold (40,000 tokens
//! by default) the observations replace them, keeping the most recent messages word for word.
//! The observer runs *ahead* of the threshold, in the background, every 20% of it, so that
//! activation usually swaps in observations that are already there. A *reflector* rewrites
//! the observations once they pass the reflection threshold (50,000 tokens). The agent sees
//! the reflections, then the observations, then the raw messages not yet observed: every
//! message reaches the model exactly once, raw or observed.
//!
//! Observation also happens below the threshold when it is cheap: after the thread was idle
//! past its provider's prompt-cache lifetime ([`IdleTrigger`]), or when the provider changed.
//! Observer and reflector failures are retried with bounded backoff; after that the run fails
//! with `lifecycle.failure` reason `om-failure`, and no observation is lost or applied twice.
//!
//! Models are resolved by the harness (`provider/name`; by default the run's own model), the
//! record lives in the store's `om` namespace (copied with renamed message ids when a thread is
//! cloned, deleted with it), per-thread settings in the thread's metadata, and progress goes out
//! as `om_*` events that the display state follows.
//!
//! ```
//! use std::sync::Arc;
//! use harness_core::harness::{Harness, Mode};
//! use harness_core::model::{Scripted, ScriptedModel};
//! use harness_om::{ObservationalMemory, OmConfig};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let memory = ObservationalMemory::new(OmConfig {
//!     observer_model: Some("scripted/observer".into()),
//!     observation_threshold: 30_000,
//!     ..OmConfig::default()
//! })
//! .unwrap();
//! let agent = Arc::new(ScriptedModel::new("scripted/agent").then(Scripted::text("Hi!")).cycling());
//! let observer = Arc::new(ScriptedModel::new("scripted/observer").then(Scripted::text("- 10:00 [low] greeted")).cycling());
//! let harness = Harness::builder("my-agent")
//!     .mode(Mode::new("build").default_model("scripted/agent"))
//!     .model_resolver(move |id| Ok(if id.as_str() == "scripted/observer" { observer.clone() } else { agent.clone() } as _))
//!     .plugin(memory.clone())
//!     .build()
//!     .unwrap();
//! harness.init().await.unwrap();
//! harness.send_message("Hello").await.unwrap();
//! // Far below the threshold: nothing observed yet.
//! assert_eq!(memory.record().await.unwrap().map(|r| r.observed_count).unwrap_or(0), 0);
//! # });
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

mod config;
mod engine;
mod error;
mod plugin;
mod pretokenize;
pub mod prompts;
mod record;
mod tokens;

pub use config::{IdleTrigger, OmConfig, OmRetry, OmSettings, SETTINGS_KEY};
pub use engine::{CONTINUE_FROM_MEMORY, Clock, OWN_REQUEST_STRATEGY};
pub use error::OmError;
pub use plugin::ObservationalMemory;
pub use record::{BufferedChunk, NAMESPACE, Observed, OmRecord};
pub use tokens::{TokenCounter, estimate_bytes, estimate_message, message_text};
