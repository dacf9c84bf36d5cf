//! Integration tests of harness-tags: the catalog, dispatch, and compile errors of the derive macro
//! (trybuild).
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod catalog;
mod dispatch;
mod ui;
