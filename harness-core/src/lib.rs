//! The harness runtime: kernel loop, models, tools, Harness and Session, threads, modes, events, display state and storage.
//!
//! This crate is a placeholder in the workspace layout; its issue fills it.
