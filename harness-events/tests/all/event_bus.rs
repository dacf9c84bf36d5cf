#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The event bus through its public API: ordering, sharing, lag notices, unsubscribe on drop,
//! listeners and their panics.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use harness_events::{Delivery, EventBus, EventSink, Subscription};
use harness_protocol::{EventEnvelope, HarnessEvent};

fn info(text: &str) -> HarnessEvent {
    HarnessEvent::Info {
        message: text.to_owned(),
    }
}

fn text_of(delivery: &Delivery) -> String {
    match delivery.event() {
        Some(HarnessEvent::Info { message }) => message.clone(),
        other => panic!("expected an info event, got {other:?}"),
    }
}

#[tokio::test]
async fn subscribers_get_every_event_in_order_and_share_one_allocation() {
    let bus = EventBus::new(16);
    let mut first = bus.subscribe();
    let mut second = bus.subscribe();
    for n in 0..5 {
        bus.publish(info(&n.to_string()));
    }
    for n in 0..5 {
        let a = first.next().await.unwrap();
        let b = second.recv().await.unwrap();
        assert_eq!(text_of(&a), n.to_string());
        match (a, b) {
            (Delivery::Event(a), Delivery::Event(b)) => assert!(Arc::ptr_eq(&a, &b)),
            other => panic!("expected two events, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_subscriber_only_sees_events_published_after_it_subscribed() {
    let bus = EventBus::new(16);
    bus.publish(info("before"));
    let mut events = bus.subscribe();
    bus.publish(info("after"));
    assert_eq!(text_of(&events.next().await.unwrap()), "after");
}

#[tokio::test]
async fn a_slow_subscriber_is_told_how_many_events_it_missed() {
    let bus = EventBus::new(4);
    let mut slow = bus.subscribe();
    let mut fast = bus.subscribe();
    for n in 0..10 {
        bus.publish(info(&n.to_string()));
        // The fast subscriber keeps up and never misses anything.
        assert_eq!(text_of(&fast.next().await.unwrap()), n.to_string());
    }
    let first = slow.next().await.unwrap();
    let Delivery::Missed(missed) = first else {
        panic!("expected a notice of missed events, got {first:?}");
    };
    let mut kept = Vec::new();
    drop(bus);
    while let Some(delivery) = slow.next().await {
        kept.push(text_of(&delivery));
    }
    assert_eq!(missed as usize + kept.len(), 10);
    // What is left is the newest events, in order.
    let expected: Vec<String> = (missed as usize..10).map(|n| n.to_string()).collect();
    assert_eq!(kept, expected);
}

#[test]
fn publishing_never_waits_for_a_subscriber_that_does_not_read() {
    let bus = EventBus::new(8);
    let _idle = bus.subscribe();
    for n in 0..10_000 {
        bus.publish(info(&n.to_string()));
    }
    assert_eq!(bus.subscriber_count(), 1);
}

#[tokio::test]
async fn dropping_a_subscription_unsubscribes_and_dropping_the_bus_ends_the_stream() {
    let bus = EventBus::new(8);
    let first = bus.subscribe();
    let mut second = bus.subscribe();
    assert_eq!(bus.subscriber_count(), 2);
    drop(first);
    assert_eq!(bus.subscriber_count(), 1);
    let clone = bus.clone();
    drop(bus);
    clone.publish(info("still open"));
    assert_eq!(text_of(&second.next().await.unwrap()), "still open");
    drop(clone);
    assert!(second.next().await.is_none());
}

#[test]
fn a_zero_or_huge_capacity_is_clamped_instead_of_panicking() {
    assert_eq!(EventBus::new(0).capacity(), 1);
    assert_eq!(
        EventBus::new(usize::MAX).capacity(),
        harness_events::bus::MAX_CAPACITY
    );
}

#[tokio::test]
async fn events_published_from_another_thread_reach_an_awaiting_subscriber() {
    let bus = EventBus::new(64);
    let mut events = bus.subscribe();
    let publisher = bus.clone();
    let thread = std::thread::spawn(move || {
        for n in 0..50 {
            publisher.publish(info(&n.to_string()));
        }
    });
    for n in 0..50 {
        assert_eq!(text_of(&events.next().await.unwrap()), n.to_string());
    }
    thread.join().unwrap();
}

#[tokio::test]
async fn a_subscription_can_wrap_any_stream() {
    let items = vec![
        Delivery::Missed(3),
        Delivery::Event(Arc::new(EventEnvelope {
            seq: 1,
            thread_id: None,
            run_id: None,
            at: 0,
            event: info("remote"),
        })),
    ];
    let mut events = Subscription::from_stream(futures_util::stream::iter(items));
    assert_eq!(events.next().await, Some(Delivery::Missed(3)));
    assert_eq!(text_of(&events.next().await.unwrap()), "remote");
    assert!(events.next().await.is_none());
}

#[test]
fn listeners_see_every_event_until_their_guard_is_dropped() {
    let bus = EventBus::new(8);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let guard = bus.listen(move |event| {
        if let HarnessEvent::Info { message } = &event.event {
            sink.lock().unwrap().push(message.clone());
        }
    });
    assert_eq!(bus.listener_count(), 1);
    bus.publish(info("a"));
    bus.emit(info("b"));
    drop(guard);
    assert_eq!(bus.listener_count(), 0);
    bus.publish(info("c"));
    assert_eq!(*seen.lock().unwrap(), ["a", "b"]);
}

#[test]
fn a_detached_listener_stays_registered() {
    let bus = EventBus::new(8);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    bus.listen(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    })
    .detach();
    bus.publish(info("a"));
    bus.publish(info("b"));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(bus.listener_count(), 1);
}

/// Counts `WARN` events, to check that a panicking listener is reported exactly once.
struct WarnCounter(Arc<AtomicUsize>);

impl tracing::Subscriber for WarnCounter {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn a_panicking_listener_is_reported_once_and_removed_while_everyone_else_carries_on() {
    let warnings = Arc::new(AtomicUsize::new(0));
    let _default = tracing::subscriber::set_default(WarnCounter(Arc::clone(&warnings)));

    let bus = EventBus::new(8);
    let mut events = bus.subscribe();
    let panicking_calls = Arc::new(AtomicUsize::new(0));
    let healthy_calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&panicking_calls);
    let _bad = bus.listen(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        panic!("listener bug");
    });
    let counter = Arc::clone(&healthy_calls);
    let _good = bus.listen(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });

    for n in 0..3 {
        bus.publish(info(&n.to_string()));
    }

    assert_eq!(panicking_calls.load(Ordering::SeqCst), 1);
    assert_eq!(healthy_calls.load(Ordering::SeqCst), 3);
    assert_eq!(bus.listener_count(), 1);
    assert_eq!(warnings.load(Ordering::SeqCst), 1);
    for n in 0..3 {
        assert_eq!(text_of(&events.next().await.unwrap()), n.to_string());
    }
}

#[test]
fn a_listener_may_publish_on_the_bus_it_listens_to() {
    let bus = EventBus::new(8);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let publisher = bus.clone();
    let _guard = bus.listen(move |event| {
        if let HarnessEvent::Info { message } = &event.event {
            sink.lock().unwrap().push(message.clone());
            if message == "ping" {
                publisher.publish(info("pong"));
            }
        }
    });
    bus.publish(info("ping"));
    assert_eq!(*seen.lock().unwrap(), ["ping", "pong"]);
}
