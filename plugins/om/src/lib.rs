//! Observational memory plugin: an observer and a reflector that compress old context.
//!
//! This crate is a placeholder in the workspace layout; its issue fills it.
