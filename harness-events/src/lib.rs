//! How a harness's events travel: the [`EventBus`] that carries them, the
//! [`DisplayScheduler`] that folds them into the display state,
//! and the [`EventHub`] that does both. The events themselves, their envelope and the shapes
//! they carry are in [`harness_protocol`]; `harness-core` re-exports both crates as
//! `harness_core::event`.
//!
//! The [`EventLogWriter`] appends every envelope to an event log in a store, for clients that
//! resume a stream after a cut or a restart.
//!
//! A crate of its own so that what delivers events (a server's streams, later a fan-out
//! across processes) can use it without the runtime.
//!
//! Subscribers get a [`Subscription`] (a `Stream` of [`Delivery`] items, each event in its
//! [`EventEnvelope`](harness_protocol::EventEnvelope); dropping it unsubscribes) and are told with [`Delivery::Missed`] how
//! many events they lost if they fall behind; callback listeners ([`EventBus::listen`]) that
//! panic are removed without disturbing anyone else. The harness runtime publishes through an
//! [`EventHub`], which also folds every event into the display state.
//!
//! ```
//! use futures_util::StreamExt;
//! use harness_events::{Delivery, EventBus};
//! use harness_protocol::HarnessEvent;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let bus = EventBus::new(64);
//! let mut events = bus.subscribe();
//! bus.publish(HarnessEvent::Info { message: "hello".into() });
//! match events.next().await {
//!     Some(Delivery::Event(envelope)) => {
//!         assert_eq!(envelope.seq, 1);
//!         assert_eq!(envelope.event.kind(), "info");
//!     }
//!     other => panic!("unexpected {other:?}"),
//! }
//! # });
//! ```

pub mod bus;
pub mod hub;
pub mod log;
pub mod scheduler;

pub use bus::{Delivery, EventBus, EventSink, ListenerGuard, Subscription};
pub use hub::{EventHub, EventHubConfig};
pub use log::{EventLogWriter, SeqOrder, next_seq};
pub use scheduler::{DisplayConfig, DisplayScheduler, DisplayStateStream, flushes_at_once};
