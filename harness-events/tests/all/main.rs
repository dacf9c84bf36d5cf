//! Integration tests of harness-events: the bus (subscriptions, listeners, missed events,
//! sequence numbers), the display scheduler (batching, flushes, snapshots) and the event log
//! writer.
//!
//! One binary for every integration test of the crate, so that linking stays cheap.

mod display_scheduler;
mod event_bus;
mod event_log;
