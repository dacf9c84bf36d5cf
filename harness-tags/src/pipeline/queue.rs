//! The bounded queues asynchronous taps run on.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::{Notify, mpsc};
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

use super::failure::{ErrorSink, FailureKind, HandlerFailure, panic_message, report};
use crate::flow::{BoxError, FailurePolicy, TagError};
use crate::handler::{HandlerId, JsonRequest, TagRequest, TapOverflow, TapQueueConfig};
use crate::tag::{Tag, TagDescriptor};

/// A readiness probe: a future that completes when a wait-policy tap queue has room.
pub(crate) type Probe = Arc<dyn Fn() -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

/// Counters of one asynchronous tap's queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapStats {
    /// The tap.
    pub handler: HandlerId,
    /// Requests handed to the tap.
    pub delivered: u64,
    /// Requests dropped because the queue stayed full or could not be served.
    pub dropped: u64,
    /// Deliveries that failed (error or panic).
    pub failed: u64,
    /// Requests queued and not yet handled.
    pub pending: usize,
}

/// A request an asynchronous tap can receive.
pub(crate) trait Queued: Send + 'static {
    fn descriptor(&self) -> &'static TagDescriptor;
}

impl<T: Tag> Queued for TagRequest<T> {
    fn descriptor(&self) -> &'static TagDescriptor {
        T::descriptor()
    }
}

impl Queued for JsonRequest {
    fn descriptor(&self) -> &'static TagDescriptor {
        self.tag
    }
}

#[derive(Default)]
struct Counters {
    delivered: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    pending: AtomicUsize,
    idle: Notify,
}

impl Counters {
    fn done_one(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
}

struct Worker<R> {
    receiver: mpsc::Receiver<R>,
    service: BoxCloneSyncService<R, (), BoxError>,
}

/// The outcome of trying to queue a request without waiting.
pub(crate) enum TryEnqueue<R> {
    Done,
    /// The queue is full and the policy says wait: here is the request back.
    Full(R),
}

/// One asynchronous tap: its queue, its worker and its counters.
pub(crate) struct TapQueue<R> {
    id: HandlerId,
    sender: mpsc::Sender<R>,
    overflow: TapOverflow,
    worker: Mutex<Option<Worker<R>>>,
    started: AtomicBool,
    counters: Arc<Counters>,
    sink: Option<Arc<dyn ErrorSink>>,
}

impl<R: Queued> TapQueue<R> {
    pub(crate) fn new(
        id: HandlerId,
        service: BoxCloneSyncService<R, (), BoxError>,
        config: TapQueueConfig,
        sink: Option<Arc<dyn ErrorSink>>,
    ) -> Self {
        let (sender, receiver) = mpsc::channel(config.capacity.max(1));
        TapQueue {
            id,
            sender,
            overflow: config.overflow,
            worker: Mutex::new(Some(Worker { receiver, service })),
            started: AtomicBool::new(false),
            counters: Arc::new(Counters::default()),
            sink,
        }
    }

    /// A probe that completes when the queue has room, for wait-policy queues only.
    pub(crate) fn readiness_probe(&self) -> Option<Probe> {
        if !matches!(self.overflow, TapOverflow::Wait(_)) {
            return None;
        }
        let sender = self.sender.clone();
        Some(Arc::new(move || {
            let sender = sender.clone();
            Box::pin(async move {
                // The permit is released at once: readiness means "there is room now".
                let _ = sender.reserve_owned().await;
            })
        }))
    }

    /// Queues the request if there is room; drops or hands it back otherwise.
    pub(crate) fn try_enqueue(&self, request: R) -> TryEnqueue<R> {
        if !self.ensure_worker(request.descriptor()) {
            return TryEnqueue::Done;
        }
        self.counters.pending.fetch_add(1, Ordering::AcqRel);
        match self.sender.try_send(request) {
            Ok(()) => TryEnqueue::Done,
            Err(mpsc::error::TrySendError::Full(request)) => {
                self.counters.done_one();
                match self.overflow {
                    TapOverflow::Drop => {
                        self.count_drop();
                        TryEnqueue::Done
                    }
                    TapOverflow::Wait(_) => TryEnqueue::Full(request),
                }
            }
            Err(mpsc::error::TrySendError::Closed(request)) => {
                self.counters.done_one();
                self.undeliverable(request.descriptor(), "the tap's worker has stopped");
                TryEnqueue::Done
            }
        }
    }

    /// Waits for room up to the policy's bound, then drops and counts.
    pub(crate) async fn enqueue_waiting(&self, request: R) {
        let bound = match self.overflow {
            TapOverflow::Wait(bound) => bound,
            TapOverflow::Drop => Duration::ZERO,
        };
        let descriptor = request.descriptor();
        self.counters.pending.fetch_add(1, Ordering::AcqRel);
        match tokio::time::timeout(bound, self.sender.send(request)).await {
            Ok(Ok(())) => {}
            Ok(Err(_closed)) => {
                self.counters.done_one();
                self.undeliverable(descriptor, "the tap's worker has stopped");
            }
            Err(_elapsed) => {
                self.counters.done_one();
                self.count_drop();
            }
        }
    }

    fn count_drop(&self) {
        let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::debug!(
            handler = self.id.as_str(),
            dropped,
            "tap queue full, request dropped"
        );
    }

    fn undeliverable(&self, descriptor: &'static TagDescriptor, why: &str) {
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        report(
            self.sink.as_ref(),
            HandlerFailure {
                tag: descriptor,
                handler: self.id.clone(),
                policy: FailurePolicy::FailOpen,
                kind: FailureKind::TapUndeliverable,
                error: TagError::msg(why.to_owned()),
            },
        );
    }

    /// Starts the worker on the current tokio runtime the first time a request arrives.
    fn ensure_worker(&self, descriptor: &'static TagDescriptor) -> bool {
        if self.started.load(Ordering::Acquire) {
            return true;
        }
        let Ok(mut slot) = self.worker.lock() else {
            self.undeliverable(descriptor, "the tap's worker state is poisoned");
            return false;
        };
        if self.started.load(Ordering::Acquire) {
            return true;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            drop(slot);
            self.undeliverable(
                descriptor,
                "asynchronous taps need a tokio runtime; emit from inside one",
            );
            return false;
        };
        let Some(worker) = slot.take() else {
            return false;
        };
        runtime.spawn(run_worker(
            worker,
            self.id.clone(),
            Arc::clone(&self.counters),
            self.sink.clone(),
        ));
        self.started.store(true, Ordering::Release);
        true
    }

    pub(crate) fn stats(&self) -> TapStats {
        TapStats {
            handler: self.id.clone(),
            delivered: self.counters.delivered.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
            pending: self.counters.pending.load(Ordering::Acquire),
        }
    }

    pub(crate) async fn flush(&self) {
        loop {
            let idle = self.counters.idle.notified();
            if self.counters.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }
}

async fn run_worker<R: Queued>(
    mut worker: Worker<R>,
    id: HandlerId,
    counters: Arc<Counters>,
    sink: Option<Arc<dyn ErrorSink>>,
) {
    while let Some(request) = worker.receiver.recv().await {
        let descriptor = request.descriptor();
        let service = &mut worker.service;
        let delivery =
            std::panic::AssertUnwindSafe(async move { service.ready().await?.call(request).await })
                .catch_unwind()
                .await;
        counters.delivered.fetch_add(1, Ordering::Relaxed);
        let failure = match delivery {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some((FailureKind::Failed, TagError::from_boxed(error))),
            Err(panic) => Some((FailureKind::Panicked, panic_message(&*panic))),
        };
        if let Some((kind, error)) = failure {
            counters.failed.fetch_add(1, Ordering::Relaxed);
            report(
                sink.as_ref(),
                HandlerFailure {
                    tag: descriptor,
                    handler: id.clone(),
                    policy: FailurePolicy::FailOpen,
                    kind,
                    error,
                },
            );
        }
        counters.done_one();
    }
}

/// Object-safe view of a queue for pipeline-wide stats and flushing.
pub(crate) trait AnyQueue: Send + Sync {
    fn stats(&self) -> TapStats;
    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()>;
}

impl<R: Queued> AnyQueue for TapQueue<R> {
    fn stats(&self) -> TapStats {
        TapQueue::stats(self)
    }

    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(TapQueue::flush(self))
    }
}
