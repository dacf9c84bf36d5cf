//! Metrics plugin: taps that record tool, model and run metrics through the metrics facade.
//!
//! This crate is a placeholder in the workspace layout; its issue fills it.
