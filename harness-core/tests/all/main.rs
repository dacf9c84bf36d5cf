//! Integration tests of harness-core: the display reducer and scheduler, the event bus, and the
//! harness (approvals, event order, flow, subagents, threads, run failures).
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod allocations;
mod common;
mod display_reducer;
mod display_scheduler;
mod event_bus;
mod harness_approvals;
mod harness_conversation;
mod harness_event_order;
mod harness_flow;
mod harness_streaming;
mod harness_subagents;
mod harness_threads;
mod run_failure;

#[global_allocator]
static ALLOCATOR: allocations::CountingAllocator = allocations::CountingAllocator;
