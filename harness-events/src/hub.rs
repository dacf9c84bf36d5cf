//! The [`EventHub`]: the one place the harness runtime sends its events. It folds each event
//! into the display state (through the [`DisplayScheduler`]) and publishes it on the
//! [`EventBus`].
//!
//! Order: for one `emit`, the event is reduced, queued for the bus's subscribers, and (if it is
//! due) the new snapshot is published to display subscribers and announced on the bus as
//! `display_state_changed`, all under one lock; then the bus's listeners run on the event and
//! on the announcement. So a subscriber always sees an event before the snapshot that contains
//! it, and a `display_state_changed` on the bus reflects every event before it. Listeners run
//! on the emitting thread (for a timed flush, on the scheduler's timer task); two threads
//! emitting at once may interleave their listener calls, but never the bus's order.
//!
//! The follow-up queue reaches the display state through events only: the session emits
//! `follow_up_queued` with the whole queue (`count` and `follow_ups`) whenever it changes, so
//! a display state rebuilt elsewhere from the event stream matches this one.

use std::fmt;
use std::sync::Arc;

use harness_protocol::{EventEnvelope, EventScope};

use crate::bus::{DEFAULT_CAPACITY, EventBus, EventSink, ListenerGuard, Subscription};
use crate::scheduler::{DisplayConfig, DisplayScheduler, DisplayStateStream};
use harness_protocol::DisplayState;
use harness_protocol::HarnessEvent;

/// How an [`EventHub`] is built.
#[derive(Clone, Debug)]
pub struct EventHubConfig {
    /// Events kept for each bus subscriber before it is told it missed some
    /// ([`DEFAULT_CAPACITY`]).
    pub bus_capacity: usize,
    /// The display scheduler's timing and clock.
    pub display: DisplayConfig,
    /// Whether each published snapshot also goes on the bus as `display_state_changed` (true by
    /// default, as in the reference; a server can then stream one feed with everything).
    pub display_state_events: bool,
    /// The `seq` of the first envelope (1 by default; one past the last of a restored event
    /// log).
    pub first_seq: u64,
}

impl Default for EventHubConfig {
    fn default() -> Self {
        EventHubConfig {
            bus_capacity: DEFAULT_CAPACITY,
            display: DisplayConfig::default(),
            display_state_events: true,
            first_seq: 1,
        }
    }
}

/// The event bus and the display scheduler behind one `emit`. Cloning gives another handle to
/// the same hub.
#[derive(Clone)]
pub struct EventHub {
    bus: EventBus,
    display: DisplayScheduler,
}

impl EventHub {
    /// A hub with the default configuration.
    pub fn new() -> Self {
        Self::with_config(EventHubConfig::default())
    }

    /// A hub with the given configuration.
    pub fn with_config(config: EventHubConfig) -> Self {
        let bus = EventBus::starting_at(config.bus_capacity, config.first_seq);
        let display =
            DisplayScheduler::with_bus(config.display, bus.clone(), config.display_state_events);
        EventHub { bus, display }
    }

    /// Folds an event that belongs to no thread into the display state and publishes it.
    /// Never blocks on a consumer; listeners run on the calling thread before it returns.
    pub fn emit(&self, event: HarnessEvent) {
        self.emit_in(event, &EventScope::default());
    }

    /// Folds an event of `scope`'s thread and run into the display state and publishes it;
    /// returns its envelope.
    pub fn emit_in(&self, event: HarnessEvent, scope: &EventScope) -> Arc<EventEnvelope> {
        let (envelope, announcement) = self.display.fold_and_send(&self.bus, event, scope);
        self.bus.notify_listeners(&envelope);
        if let Some(announcement) = announcement {
            self.bus.notify_listeners(&announcement);
        }
        envelope
    }

    /// How many consumers are attached: bus subscribers, listeners and display-state streams.
    /// The harness treats a hub with none as having no user interface to ask.
    pub fn audience(&self) -> usize {
        self.bus.subscriber_count() + self.bus.listener_count() + self.display.subscriber_count()
    }

    /// A subscription to every event emitted from now on (see [`EventBus::subscribe`]).
    pub fn subscribe(&self) -> Subscription {
        self.bus.subscribe()
    }

    /// Registers a callback for every event emitted from now on (see [`EventBus::listen`]).
    pub fn listen<F>(&self, callback: F) -> ListenerGuard
    where
        F: Fn(&EventEnvelope) + Send + Sync + 'static,
    {
        self.bus.listen(callback)
    }

    /// A stream of display-state snapshots: the latest at once, then each newer one (see
    /// [`DisplayScheduler::subscribe`]).
    pub fn subscribe_display_state(&self) -> DisplayStateStream {
        self.display.subscribe()
    }

    /// The latest published display-state snapshot.
    pub fn display_state(&self) -> Arc<DisplayState> {
        self.display.latest()
    }

    /// Publishes a snapshot now if batched events are waiting for one.
    pub fn flush_display_state(&self) {
        self.display.flush();
    }

    /// The bus, e.g. for a bridge that forwards events to or from another process. Events
    /// published on it directly skip the display state.
    pub fn bus(&self) -> &EventBus {
        &self.bus
    }
}

impl Default for EventHub {
    fn default() -> Self {
        EventHub::new()
    }
}

impl EventSink for EventHub {
    fn emit(&self, event: HarnessEvent) {
        EventHub::emit(self, event);
    }
}

impl fmt::Debug for EventHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventHub")
            .field("bus", &self.bus)
            .field("display", &self.display)
            .finish()
    }
}
