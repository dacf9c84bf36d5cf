//! Integration tests of harness-om: observational memory in a running harness, and exact token
//! counts checked against tiktoken.
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod memory;
mod tokens;
