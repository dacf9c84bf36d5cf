//! Cross-crate integration tests of the harness live in `tests/tests/`; this library holds what
//! they share.

pub mod child;
pub mod fixtures;
pub mod harness;
pub mod mcp_servers;
pub mod mock_llm;

/// The README's Rust examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;
