//! How the harness's events travel: the [`EventBus`] that carries them, the
//! [`DisplayScheduler`](scheduler::DisplayScheduler) that folds them into the display state,
//! and the [`EventHub`] that does both. The events themselves, their envelope and
//! the shapes they carry are in [`harness_protocol`] and re-exported here.
//!
//! Subscribers get a [`Subscription`] (a `Stream` of [`Delivery`] items, each event in its
//! [`EventEnvelope`]; dropping it unsubscribes) and are told with [`Delivery::Missed`] how
//! many events they lost if they fall behind; callback listeners ([`EventBus::listen`]) that
//! panic are removed without disturbing anyone else. The harness runtime publishes through an
//! [`EventHub`], which also folds every event into the display state.
//!
//! ```
//! use futures_util::StreamExt;
//! use harness_core::event::{Delivery, EventBus, HarnessEvent};
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
pub mod scheduler;

pub use bus::{Delivery, EventBus, EventSink, ListenerGuard, Subscription};
pub use harness_protocol::event::*;
pub use harness_protocol::{
    EventEnvelope, EventScope, HarnessMessage, MessagePart, MessageRole, OmProgress, OmRole,
    OmStatus, OmTrigger, PartKind, StopReason,
};
pub use hub::{EventHub, EventHubConfig};
