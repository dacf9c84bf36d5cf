//! The harness's events: what travels ([`harness_protocol`]'s events, their envelope and the
//! shapes they carry) and how ([`harness_events`]: the bus, the display scheduler and the
//! hub), re-exported in one place.
//!
//! ```
//! use futures_util::StreamExt;
//! use harness_core::event::{Delivery, EventBus, HarnessEvent};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let bus = EventBus::new(64);
//! let mut events = bus.subscribe();
//! bus.publish(HarnessEvent::Info { message: "hello".into() });
//! assert!(matches!(events.next().await, Some(Delivery::Event(e)) if e.seq == 1));
//! # });
//! ```

pub use harness_events::{
    Delivery, EventBus, EventHub, EventHubConfig, EventLogWriter, EventSink, ListenerGuard,
    Subscription, bus, hub, log, next_seq, scheduler,
};
pub use harness_protocol::event::*;
pub use harness_protocol::{
    EventEnvelope, EventScope, HarnessMessage, MessagePart, MessageRole, OmProgress, OmRole,
    OmStatus, OmTrigger, PartKind, StopReason,
};
