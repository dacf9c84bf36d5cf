//! Heartbeats: periodic background work (gateway sync, cache refresh) started by `init` and
//! stopped by `destroy`.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use harness_tags::util::lock;

type Job = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// A periodic handler: runs `tick` every `interval` (first right away) until removed.
#[derive(Clone)]
pub struct Heartbeat {
    id: String,
    interval: Duration,
    tick: Job,
    shutdown: Option<Job>,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat")
            .field("id", &self.id)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl Heartbeat {
    /// A heartbeat running `tick` every `interval`.
    pub fn new<F, Fut>(id: impl Into<String>, interval: Duration, tick: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Heartbeat {
            id: id.into(),
            interval,
            tick: Arc::new(move || Box::pin(tick())),
            shutdown: None,
        }
    }

    /// Runs `shutdown` once when the heartbeat is removed or the harness destroyed.
    pub fn on_shutdown<F, Fut>(mut self, shutdown: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.shutdown = Some(Arc::new(move || Box::pin(shutdown())));
        self
    }

    /// The heartbeat's id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

struct Entry {
    heartbeat: Heartbeat,
    running: Option<(CancellationToken, JoinHandle<()>)>,
}

/// The heartbeats of a harness.
pub(crate) struct Heartbeats {
    entries: Mutex<Vec<Entry>>,
}

impl Heartbeats {
    pub(crate) fn new(heartbeats: Vec<Heartbeat>) -> Self {
        Heartbeats {
            entries: Mutex::new(
                heartbeats
                    .into_iter()
                    .map(|heartbeat| Entry {
                        heartbeat,
                        running: None,
                    })
                    .collect(),
            ),
        }
    }

    pub(crate) fn start_all(&self) {
        for entry in lock(&self.entries).iter_mut() {
            if entry.running.is_none() {
                entry.running = Some(spawn(&entry.heartbeat));
            }
        }
    }

    /// Adds a heartbeat, replacing one with the same id; starts it if `start`.
    pub(crate) fn add(&self, heartbeat: Heartbeat, start: bool) {
        let running = start.then(|| spawn(&heartbeat));
        let replaced = {
            let mut entries = lock(&self.entries);
            let old = entries
                .iter()
                .position(|e| e.heartbeat.id == heartbeat.id)
                .map(|index| entries.remove(index));
            entries.push(Entry { heartbeat, running });
            old
        };
        if let Some(Entry {
            running: Some((cancel, _)),
            ..
        }) = replaced
        {
            cancel.cancel();
        }
    }

    pub(crate) async fn remove(&self, id: &str) -> bool {
        let entry = {
            let mut entries = lock(&self.entries);
            entries
                .iter()
                .position(|e| e.heartbeat.id == id)
                .map(|index| entries.remove(index))
        };
        match entry {
            Some(entry) => {
                stop(entry).await;
                true
            }
            None => false,
        }
    }

    pub(crate) async fn stop_all(&self) {
        let entries = std::mem::take(&mut *lock(&self.entries));
        for entry in entries {
            stop(entry).await;
        }
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        lock(&self.entries)
            .iter()
            .map(|e| e.heartbeat.id.clone())
            .collect()
    }
}

fn spawn(heartbeat: &Heartbeat) -> (CancellationToken, JoinHandle<()>) {
    let cancel = CancellationToken::new();
    let stopped = cancel.clone();
    let tick = Arc::clone(&heartbeat.tick);
    let interval = heartbeat.interval.max(Duration::from_millis(1));
    let handle = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = stopped.cancelled() => break,
                _ = ticker.tick() => tick().await,
            }
        }
    });
    (cancel, handle)
}

async fn stop(entry: Entry) {
    if let Some((cancel, handle)) = entry.running {
        cancel.cancel();
        // A tick that panicked already ended its task; nothing more to do for it.
        let _ = handle.await;
    }
    if let Some(shutdown) = &entry.heartbeat.shutdown {
        shutdown().await;
    }
}
