//! [`OmError`]: why an observational-memory operation failed.

use harness_core::harness::HarnessError;

/// Why an observational-memory operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OmError {
    /// The configuration is not valid.
    #[error("invalid observational-memory configuration: {0}")]
    Config(String),
    /// The plugin is not attached to a harness (or the harness is gone).
    #[error(
        "observational memory is not attached to a harness: add it with `HarnessBuilder::plugin` and call `Harness::init`"
    )]
    NotAttached,
    /// No thread is selected.
    #[error("no thread is selected; select or create one first")]
    NoThread,
    /// The model id is not `provider/name`.
    #[error("`{model}` is not a model id (`provider/name`): {why}")]
    InvalidModel {
        /// The id given.
        model: String,
        /// What is wrong with it.
        why: String,
    },
    /// The harness or its store failed.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// The memory state could not be read or written.
    #[error("observational memory: {0}")]
    State(String),
}
