//! Integration tests of harness-permissions: the rule chain, and permissions end to end in a
//! harness.
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod gate;
mod harness_e2e;
