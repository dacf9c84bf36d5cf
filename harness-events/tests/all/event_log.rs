#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The event log writer against a real SQLite file: every envelope stored once, in order, as
//! the JSON a subscriber would serialize; publishers on several threads; closing; a restart
//! that goes on with the same log.

use std::sync::Arc;

use futures_util::StreamExt;
use harness_events::{Delivery, EventHub, EventHubConfig, EventLogWriter, next_seq};
use harness_protocol::{EventEnvelope, EventScope, HarnessEvent};
use harness_store::{EventLogInfo, SqliteStore, Store, StoreError};

fn info(text: String) -> HarnessEvent {
    HarnessEvent::Info { message: text }
}

fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(dir.path().join("harness.db")).unwrap())
}

async fn logged(store: &dyn Store, log: &str) -> Vec<EventEnvelope> {
    store
        .events(log, 0, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|event| {
            let envelope: EventEnvelope = serde_json::from_str(&event.envelope).unwrap();
            assert_eq!(envelope.seq, event.seq);
            envelope
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_envelope_is_stored_once_in_order_as_a_subscriber_saw_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let hub = EventHub::new();
    hub.emit(info("before the writer".into()));
    let mut subscription = hub.subscribe();
    let writer = EventLogWriter::start(&hub, Arc::clone(&store), "h1");
    let scope = EventScope {
        thread_id: Some("t1".into()),
        run_id: Some("r1".into()),
    };
    for i in 0..300 {
        hub.emit_in(info(format!("event {i} ünïcödé")), &scope);
    }
    writer.flush().await.unwrap();

    let mut seen = Vec::new();
    while seen.len() < 300 {
        if let Some(Delivery::Event(envelope)) = subscription.next().await
            && !matches!(envelope.event, HarnessEvent::DisplayStateChanged { .. })
        {
            seen.push(envelope);
        }
    }
    let stored = store.events("h1", 0, usize::MAX).await.unwrap();
    let infos: Vec<&harness_store::LoggedEvent> = stored
        .iter()
        .filter(|event| event.envelope.contains("\"type\":\"info\""))
        .collect();
    assert_eq!(infos.len(), 300);
    for (event, envelope) in infos.iter().zip(&seen) {
        assert_eq!(event.seq, envelope.seq);
        assert_eq!(event.envelope, serde_json::to_string(&**envelope).unwrap());
    }
    // Nothing from before the writer; seqs unbroken from its start, announcements included.
    let seqs: Vec<u64> = stored.iter().map(|event| event.seq).collect();
    assert_eq!(seqs.first(), Some(&2));
    assert!(
        seqs.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "{seqs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishers_on_several_threads_still_give_one_ordered_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let hub = EventHub::new();
    let writer = EventLogWriter::start(&hub, Arc::clone(&store), "h1");
    let publishers: Vec<_> = (0..4)
        .map(|thread| {
            let hub = hub.clone();
            std::thread::spawn(move || {
                for i in 0..500 {
                    hub.bus().publish(info(format!("{thread}/{i}")));
                }
            })
        })
        .collect();
    for publisher in publishers {
        publisher.join().unwrap();
    }
    writer.flush().await.unwrap();
    let envelopes = logged(&*store, "h1").await;
    assert_eq!(envelopes.len(), 2000);
    let seqs: Vec<u64> = envelopes.iter().map(|envelope| envelope.seq).collect();
    assert_eq!(seqs, (1..=2000).collect::<Vec<u64>>());
}

#[tokio::test]
async fn closing_stores_the_rest_and_a_restart_goes_on_with_the_next_seq() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    // A first process logs 10 events and dies without closing the log.
    {
        let hub = EventHub::new();
        let writer = EventLogWriter::start(&hub, Arc::clone(&store), "h1");
        for i in 0..10 {
            hub.bus().publish(info(format!("first {i}")));
        }
        writer.flush().await.unwrap();
    }
    assert_eq!(next_seq(&*store, "h1").await.unwrap(), 11);
    assert_eq!(next_seq(&*store, "never written").await.unwrap(), 1);

    // The next one starts its hub where the log stopped, and closes the log at the end.
    let hub = EventHub::with_config(EventHubConfig {
        first_seq: next_seq(&*store, "h1").await.unwrap(),
        ..EventHubConfig::default()
    });
    let writer = EventLogWriter::start(&hub, Arc::clone(&store), "h1");
    for i in 0..5 {
        hub.bus().publish(info(format!("second {i}")));
    }
    writer.close(1_700_000_000_000).await.unwrap();
    let envelopes = logged(&*store, "h1").await;
    let seqs: Vec<u64> = envelopes.iter().map(|envelope| envelope.seq).collect();
    assert_eq!(seqs, (1..=15).collect::<Vec<u64>>());
    assert_eq!(
        store.event_log("h1").await.unwrap(),
        Some(EventLogInfo {
            last_seq: 15,
            closed_at: Some(1_700_000_000_000)
        })
    );

    // A closed log takes no more: a writer on it reports the failed append.
    let hub = EventHub::with_config(EventHubConfig {
        first_seq: 16,
        ..EventHubConfig::default()
    });
    let writer = EventLogWriter::start(&hub, Arc::clone(&store), "h1");
    hub.bus().publish(info("too late".into()));
    assert_eq!(
        writer.flush().await,
        Err(StoreError::EventLogClosed("h1".into()))
    );
}
