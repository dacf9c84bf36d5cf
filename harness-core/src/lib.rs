//! The harness runtime: the kernel that runs an agent, the models it calls and the tools it
//! uses.
//!
//! - [`model`]: the [`Model`](model::Model) trait, streaming events, errors and retries, the
//!   scripted model and the HTTP providers.
//! - [`tool`]: the [`Tool`](tool::Tool) trait, typed function tools and the registry.
//! - [`kernel`]: the agent loop, with healing, loop detection and strategy control, emitting
//!   every kernel tag of the catalog through a [`harness_tags::Pipeline`].
//! - [`store`]: threads, messages and plugin records behind the `Store` trait, and thread locks.
//! - [`event`] and [`display`]: the harness's events, the bus and hub that carry them, and the
//!   display state folded from them with its snapshot scheduler.
//! - [`task`]: the task list.

pub mod builtin;
pub mod display;
pub mod event;
pub mod harness;
pub mod kernel;
pub mod model;
pub mod store;
pub mod task;
pub mod tool;
