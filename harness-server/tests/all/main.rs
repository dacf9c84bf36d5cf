//! harness-server over real TCP and a real SQLite file, with scripted models.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agents;
mod approvals;
mod connect;
mod errors;
mod events;
mod files;
mod hooks;
mod logs;
mod mcp;
mod openapi;
mod planning;
mod resume;
mod routes;
mod sessions;
mod spec_types;
mod subagents;
mod support;
mod tools;
