//! Cross-crate integration tests: kernel behaviour and tags, providers against local mock servers,
//! the store conformance suite and files, harness processes, third-party tags, the redaction
//! plugin's vault with subagents.
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod execution_stream;
mod harness_processes;
mod kernel_behaviour;
mod kernel_tags;
mod live_redaction;
mod om_redaction;
mod providers;
mod redaction_vault;
mod store;
mod third_party_tags;
