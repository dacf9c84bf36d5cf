//! Integration tests of harness-redaction: accuracy on generated and outside text, the detectors,
//! operators, the plugin in a pipeline, streaming.
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod accuracy;
mod detectors;
mod operators;
mod plugin;
mod streaming;
