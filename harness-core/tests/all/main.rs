#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Integration tests of harness-core: the display reducer and scheduler, the event bus, and the
//! harness (approvals, event order, flow, subagents, threads, run failures).
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod allocations;
mod display_reducer;
mod harness_approvals;
mod harness_conversation;
mod harness_event_order;
mod harness_flow;
mod harness_invoke;
mod harness_streaming;
mod harness_subagents;
mod harness_threads;
mod healing;
mod json_repair;
mod run_failure;
mod tasks;
mod tool_registry;

#[global_allocator]
static ALLOCATOR: allocations::CountingAllocator = allocations::CountingAllocator;
