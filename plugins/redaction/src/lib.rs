//! PII and secret redaction plugin: detectors, operators and redaction layers.
//!
//! This crate is a placeholder in the workspace layout; its issue fills it.
