//! The display state: one immutable snapshot of everything a user interface draws, folded
//! from the event stream.
//!
//! - The state and its pure reducer live in [`harness_protocol`] and are re-exported here.
//! - [`DisplayScheduler`] (from [`harness_events`]) folds every event at once and publishes
//!   `Arc<DisplayState>` snapshots, batched (250 ms window, 500 ms ceiling) or at once for the
//!   events that matter to a human ([`flushes_at_once`]).
//! - The harness runtime drives both through an [`EventHub`](crate::event::EventHub):
//!
//! ```
//! use harness_core::event::{EventHub, HarnessEvent};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let hub = EventHub::new();
//! let mut frames = hub.subscribe_display_state();
//! let _empty = frames.recv().await; // the latest snapshot comes at once
//! hub.emit(HarnessEvent::AgentStart { run_id: "run-1".into() }); // flushes at once
//! assert!(frames.recv().await.unwrap().is_running);
//! assert!(hub.display_state().is_running);
//! # });
//! ```

pub use harness_events::{DisplayConfig, DisplayScheduler, DisplayStateStream, flushes_at_once};
pub use harness_protocol::display::*;
pub use harness_protocol::{WallClock, reduce, reduce_with_clock};
