#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Integration tests of harness-protocol: the checked-in JSON Schema, event kinds against
//! their serialized `type`, and the envelope's wire form.
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod kinds;
mod open_harness;
mod schema;
