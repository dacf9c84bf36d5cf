//! The harness runtime: the kernel that runs an agent, the tools it uses, and the [`Harness`]
//! that keeps it coherent across runs.
//!
//! - [`kernel`]: the agent loop, with healing, loop detection and strategy control, emitting
//!   every kernel tag of the catalog through a [`harness_tags::Pipeline`].
//! - [`tool`] and [`builtin`]: the [`Tool`](tool::Tool) trait, typed function tools, the
//!   registry, and the harness's own tools (questions, plans, tasks, subagents).
//! - [`harness`]: [`Harness`] and its [`Session`](harness::Session): threads, modes, runs,
//!   approvals, suspensions, subagents, heartbeats.
//! - [`event`] and [`display`]: the harness's events and display state, with the bus, hub
//!   and scheduler of [`harness_events`] that carry them.
//! - [`task`]: the task list the task tools edit.
//!
//! The crates below it are re-exported under their old paths: [`model`]
//! ([`harness_model`]: the `Model` trait and the providers), [`store`] ([`harness_store`]:
//! the `Store` trait, `MemoryStore`, `SqliteStore`) and [`protocol`] ([`harness_protocol`]:
//! what clients see on the wire).
//!
//! [`Harness`]: harness::Harness

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod builtin;
pub mod display;
pub mod event;
pub mod harness;
pub mod kernel;
pub mod task;
pub mod tool;

pub use harness_model as model;
pub use harness_protocol as protocol;
pub use harness_store as store;
