//! [`Phase`]: where in the agent loop a tag is emitted.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The phase of the agent loop in which a tag is emitted.
///
/// A run is `Bootstrap -> [Think -> Act -> Observe -> Verify]* -> Complete`; `Memory` covers
/// observational-memory work and `Session` covers what happens outside a run (threads).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// A run starts: the user's message enters, the initial state is built.
    #[default]
    Bootstrap,
    /// The prompt and tools are assembled and the model is called.
    Think,
    /// Tool calls are healed, gated and executed.
    Act,
    /// Results are recorded, counters and strategy are updated.
    Observe,
    /// The kernel decides whether the run is done.
    Verify,
    /// Observational memory observes, reflects or assembles context.
    Memory,
    /// The run ends.
    Complete,
    /// Outside a run: threads are cloned, deleted, shown.
    Session,
}

impl Phase {
    /// The phase's name as it appears in JSON and in the catalog.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Bootstrap => "bootstrap",
            Phase::Think => "think",
            Phase::Act => "act",
            Phase::Observe => "observe",
            Phase::Verify => "verify",
            Phase::Memory => "memory",
            Phase::Complete => "complete",
            Phase::Session => "session",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
