//! harness-mcp's integration tests, one binary: real servers over real transports.
//!
//! The third-party servers (`@modelcontextprotocol/server-everything`, `server-filesystem`,
//! `mcp-server-time`) are installed by `.ci/install-mcp-servers`; without them a test prints a
//! notice and passes, except in CI (`CI` set), where it fails. The failure tests run a fixture
//! server written for them (`tests/fixtures/misbehaving_server.py`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod everything;
mod failures;
mod filesystem;
mod http;
mod reshape;
mod support;
mod time;
