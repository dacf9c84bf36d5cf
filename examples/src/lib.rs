//! Shared helpers for the runnable examples in this folder (`cargo run -p harness-examples
//! --example NAME`).
