//! Permissions plugin: the ordered approval rule chain for tool calls.
//!
//! This crate is a placeholder in the workspace layout; its issue fills it.
