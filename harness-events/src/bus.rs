//! The in-process event bus: one publisher side, any number of stream subscribers and callback
//! listeners.
//!
//! - [`EventBus::publish`] puts the event in an [`EventEnvelope`] (the next `seq`, the time,
//!   its thread and run) behind an [`Arc`] once and hands every subscriber a pointer to it: no
//!   per-subscriber copy, and publishing never waits for a subscriber. `seq` is assigned in the
//!   order the subscribers receive the envelopes, so it is strictly increasing on every
//!   subscription.
//! - [`EventBus::subscribe`] returns a [`Subscription`], a [`Stream`] of [`Delivery`] items. The
//!   bus keeps the last `capacity` events for each subscriber; a subscriber that falls further
//!   behind loses the oldest ones and receives [`Delivery::Missed`] with their number before the
//!   next event, so it always knows it lost some. Dropping the subscription unsubscribes.
//! - [`EventBus::listen`] registers a callback that runs on the publishing thread, right after
//!   the event reaches the subscribers' queues. Callbacks must be quick (hand slow work to a
//!   subscription instead). A callback that panics is caught, reported once with
//!   `tracing::warn!`, and **removed**: it may have left its own state half-updated, and keeping
//!   it would repeat the panic on every event. Publishing and the other listeners carry on.
//!   (Catching needs the default `panic = "unwind"`; the panic hook still prints the panic.)
//!
//! The bus is a type boundary: its backing queue is private, and everything goes through
//! [`EventSink::emit`] / [`EventBus::publish`] on the way in and [`Subscription`] (which
//! [`Subscription::from_stream`] can build from any stream) on the way out. A cross-process
//! fan-out can forward outgoing events from a listener or subscription and feed incoming ones
//! to `publish`.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::task::{Context, Poll};

use futures_util::stream::{self, Stream, StreamExt};
use tokio::sync::broadcast;

use harness_protocol::{EventEnvelope, EventScope};
use harness_tags::util::{coarse_unix_ms, lock};

use harness_protocol::HarnessEvent;

/// The number of events kept for each subscriber when none is given.
pub const DEFAULT_CAPACITY: usize = 1024;

/// The largest capacity a bus accepts; larger requests are lowered to it.
pub const MAX_CAPACITY: usize = 1 << 20;

/// Anything that accepts harness events: the [`EventBus`], the
/// [`EventHub`](super::EventHub), or a bridge to another process.
pub trait EventSink: Send + Sync {
    /// Takes one event. Must not block on consumers.
    fn emit(&self, event: HarnessEvent);
}

/// One item of a [`Subscription`].
#[derive(Clone, Debug, PartialEq)]
pub enum Delivery {
    /// The next event, in its envelope.
    Event(Arc<EventEnvelope>),
    /// This many events were published but dropped before this subscriber read them, because
    /// it fell more than the bus's capacity behind. The events that follow are the oldest ones
    /// still kept.
    Missed(u64),
}

impl Delivery {
    /// The event, if this is one.
    pub fn event(&self) -> Option<&HarnessEvent> {
        self.envelope().map(|envelope| &envelope.event)
    }

    /// The event's envelope, if this is one.
    pub fn envelope(&self) -> Option<&EventEnvelope> {
        match self {
            Delivery::Event(envelope) => Some(envelope),
            Delivery::Missed(_) => None,
        }
    }
}

/// A subscriber's view of the bus: a [`Stream`] of [`Delivery`] items, in publication order.
///
/// The stream ends when every handle of the bus is gone. Dropping the subscription
/// unsubscribes at once; the bus stops keeping events for it.
pub struct Subscription {
    inner: Pin<Box<dyn Stream<Item = Delivery> + Send>>,
}

impl Subscription {
    /// Wraps any stream of deliveries, e.g. one fed by another process.
    pub fn from_stream<S>(stream: S) -> Self
    where
        S: Stream<Item = Delivery> + Send + 'static,
    {
        Subscription {
            inner: Box::pin(stream),
        }
    }

    fn from_receiver(receiver: broadcast::Receiver<Arc<EventEnvelope>>) -> Self {
        Self::from_stream(stream::unfold(receiver, |mut receiver| async move {
            let item = match receiver.recv().await {
                Ok(event) => Delivery::Event(event),
                Err(broadcast::error::RecvError::Lagged(missed)) => Delivery::Missed(missed),
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((item, receiver))
        }))
    }

    /// The next item; `None` once the bus is gone. Same as `StreamExt::next`.
    pub async fn recv(&mut self) -> Option<Delivery> {
        self.inner.next().await
    }
}

impl Stream for Subscription {
    type Item = Delivery;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        self.get_mut().inner.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

type ListenerFn = dyn Fn(&Arc<EventEnvelope>) + Send + Sync;

struct ListenerEntry {
    id: u64,
    callback: Box<ListenerFn>,
    failed: AtomicBool,
}

/// The listeners, copied on write so that callbacks run without any lock held (a callback may
/// publish, listen or drop a guard itself).
#[derive(Default)]
struct Listeners {
    entries: RwLock<Arc<[Arc<ListenerEntry>]>>,
    count: AtomicUsize,
    next_id: AtomicU64,
}

impl Listeners {
    fn add(&self, callback: Box<ListenerFn>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(ListenerEntry {
            id,
            callback,
            failed: AtomicBool::new(false),
        });
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        let updated: Arc<[Arc<ListenerEntry>]> =
            entries.iter().cloned().chain(Some(entry)).collect();
        self.count.store(updated.len(), Ordering::Release);
        *entries = updated;
        id
    }

    fn remove(&self, id: u64) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if entries.iter().all(|entry| entry.id != id) {
            return;
        }
        let updated: Arc<[Arc<ListenerEntry>]> = entries
            .iter()
            .filter(|entry| entry.id != id)
            .cloned()
            .collect();
        self.count.store(updated.len(), Ordering::Release);
        *entries = updated;
    }

    fn is_empty(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    fn call(&self, envelope: &Arc<EventEnvelope>) {
        let entries = Arc::clone(&self.entries.read().unwrap_or_else(PoisonError::into_inner));
        for entry in entries.iter() {
            if entry.failed.load(Ordering::Relaxed) {
                continue;
            }
            let outcome = catch_unwind(AssertUnwindSafe(|| (entry.callback)(envelope)));
            if let Err(panic) = outcome {
                if !entry.failed.swap(true, Ordering::AcqRel) {
                    let message = panic_message(panic.as_ref());
                    tracing::warn!(
                        listener = entry.id,
                        event = envelope.event.kind(),
                        panic = %message,
                        "an event listener panicked; it was removed and publishing goes on"
                    );
                }
                self.remove(entry.id);
            }
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(a panic without a message)".to_owned()
    }
}

struct BusInner {
    /// The next envelope's `seq`; locked while an envelope is stamped and queued, so that
    /// subscribers receive them in `seq` order.
    next_seq: Mutex<u64>,
    sender: broadcast::Sender<Arc<EventEnvelope>>,
    listeners: Listeners,
    capacity: usize,
}

/// The in-process event bus. Cloning gives another handle to the same bus.
#[derive(Clone)]
pub struct EventBus {
    inner: Arc<BusInner>,
}

impl EventBus {
    /// A bus that keeps up to `capacity` unread events per subscriber (at least 1, at most
    /// [`MAX_CAPACITY`]; the backing queue may round it up to a power of two).
    pub fn new(capacity: usize) -> Self {
        Self::starting_at(capacity, 1)
    }

    /// A bus whose first envelope has `seq` `first_seq` (at least 1), e.g. one past the last
    /// envelope of a restored event log.
    pub fn starting_at(capacity: usize, first_seq: u64) -> Self {
        let capacity = capacity.clamp(1, MAX_CAPACITY);
        let (sender, _) = broadcast::channel(capacity);
        EventBus {
            inner: Arc::new(BusInner {
                next_seq: Mutex::new(first_seq.max(1)),
                sender,
                listeners: Listeners::default(),
                capacity,
            }),
        }
    }

    /// The capacity the bus was built with, after clamping.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Publishes an event that belongs to no thread to every subscriber and listener. Never
    /// waits for a subscriber.
    pub fn publish(&self, event: HarnessEvent) {
        self.publish_in(event, &EventScope::default());
    }

    /// Publishes an event of `scope`'s thread and run; returns its envelope.
    pub fn publish_in(&self, event: HarnessEvent, scope: &EventScope) -> Arc<EventEnvelope> {
        let envelope = self.send_to_subscribers(event, scope);
        self.notify_listeners(&envelope);
        envelope
    }

    /// The `seq` the next envelope gets.
    pub fn next_seq(&self) -> u64 {
        *lock(&self.inner.next_seq)
    }

    /// A new subscription that receives every event published from now on.
    pub fn subscribe(&self) -> Subscription {
        Subscription::from_receiver(self.inner.sender.subscribe())
    }

    /// Registers a callback for every event published from now on, until the returned guard
    /// is dropped. See the [module docs](self) for how panics are handled.
    pub fn listen<F>(&self, callback: F) -> ListenerGuard
    where
        F: Fn(&EventEnvelope) + Send + Sync + 'static,
    {
        self.listen_shared(move |envelope: &Arc<EventEnvelope>| callback(envelope))
    }

    /// Like [`EventBus::listen`], with the envelope as the bus shares it: a callback that
    /// keeps envelopes (to hand them to another task) clones the [`Arc`], not the event.
    pub fn listen_shared<F>(&self, callback: F) -> ListenerGuard
    where
        F: Fn(&Arc<EventEnvelope>) + Send + Sync + 'static,
    {
        let id = self.inner.listeners.add(Box::new(callback));
        ListenerGuard {
            bus: Arc::downgrade(&self.inner),
            id,
            detached: false,
        }
    }

    /// How many subscriptions are alive.
    pub fn subscriber_count(&self) -> usize {
        self.inner.sender.receiver_count()
    }

    /// How many listeners are registered.
    pub fn listener_count(&self) -> usize {
        self.inner.listeners.count.load(Ordering::Acquire)
    }

    /// Stamps an event with the next `seq` and queues it for the subscribers only (the caller
    /// notifies listeners later, outside its own locks).
    pub(crate) fn send_to_subscribers(
        &self,
        event: HarnessEvent,
        scope: &EventScope,
    ) -> Arc<EventEnvelope> {
        let mut next_seq = lock(&self.inner.next_seq);
        let envelope = Arc::new(EventEnvelope {
            seq: *next_seq,
            thread_id: scope.thread_id.clone(),
            run_id: scope.run_id.clone(),
            at: coarse_unix_ms(),
            event,
        });
        *next_seq += 1;
        // An error only means that nobody is subscribed; the envelope is then dropped.
        let _ = self.inner.sender.send(Arc::clone(&envelope));
        envelope
    }

    /// Runs the listeners on an envelope.
    pub(crate) fn notify_listeners(&self, envelope: &Arc<EventEnvelope>) {
        if !self.inner.listeners.is_empty() {
            self.inner.listeners.call(envelope);
        }
    }
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new(DEFAULT_CAPACITY)
    }
}

impl EventSink for EventBus {
    fn emit(&self, event: HarnessEvent) {
        self.publish(event);
    }
}

impl fmt::Debug for EventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBus")
            .field("capacity", &self.inner.capacity)
            .field("subscribers", &self.subscriber_count())
            .field("listeners", &self.listener_count())
            .finish()
    }
}

/// Keeps a listener registered; dropping it removes the listener.
#[must_use = "dropping the guard removes the listener at once"]
pub struct ListenerGuard {
    bus: Weak<BusInner>,
    id: u64,
    detached: bool,
}

impl ListenerGuard {
    /// Keeps the listener for as long as the bus lives (or until it panics).
    pub fn detach(mut self) {
        self.detached = true;
    }
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        if let Some(bus) = self.bus.upgrade() {
            bus.listeners.remove(self.id);
        }
    }
}

impl fmt::Debug for ListenerGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerGuard")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
