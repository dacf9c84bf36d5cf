//! The crate's error type.

/// Why redaction could not be set up or could not run.
///
/// The plugin registers its handlers fail-closed: any of these during an emit fails the emit,
/// so unredacted text never passes.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RedactionError {
    /// A custom detector's regex does not compile.
    #[error("the detector for `{entity}` has an invalid regex: {message}; fix the pattern")]
    InvalidPattern {
        /// The detector's entity.
        entity: String,
        /// The regex compiler's message.
        message: String,
    },
    /// The detectors together do not compile (too large).
    #[error("the detectors could not be compiled: {message}; use fewer or smaller custom patterns")]
    Build {
        /// The compiler's message.
        message: String,
    },
    /// A configuration value is out of range.
    #[error("invalid redaction setting `{setting}`: {message}")]
    Config {
        /// The setting.
        setting: &'static str,
        /// What is wrong and what to use instead.
        message: String,
    },
    /// The text is larger than the configured limit.
    #[error(
        "a text of {len} bytes exceeds the redaction limit of {max} bytes; raise \
         `max_input_bytes` or split the text before it is emitted"
    )]
    TooLarge {
        /// The text's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The pseudonym vault of a thread is full (see [`Vault`](crate::Vault)).
    #[error(
        "the pseudonym vault of {} holds its maximum of {max} values (its subagents' \
         included), so a new value cannot get a pseudonym and the text is withheld; raise \
         `vault_capacity` (default 100,000), or start a new thread",
        if thread.is_empty() { "text outside any thread".to_owned() } else { format!("thread `{thread}`") }
    )]
    VaultFull {
        /// The thread (empty outside a thread).
        thread: String,
        /// The capacity.
        max: usize,
    },
    /// A payload did not have the expected shape.
    #[error("cannot redact `{tag}`: {message}")]
    Payload {
        /// The tag.
        tag: String,
        /// What is wrong.
        message: String,
    },
}
