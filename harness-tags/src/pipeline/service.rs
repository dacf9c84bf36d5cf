//! A tag's compiled chain as a tower service.

use std::marker::PhantomData;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;

use super::queue::Probe;
use super::{EmitError, EmitOutcome, Pipeline};
use crate::handler::TagRequest;
use crate::tag::Tag;

/// Tag `T`'s compiled chain as a `tower::Service<TagRequest<T>>`.
///
/// `poll_ready` is pending while one of the tag's wait-policy asynchronous taps has a full
/// queue, so tower middleware (load shedding, buffering) sees the taps' backpressure.
pub struct TagService<T: Tag> {
    pipeline: Pipeline,
    probes: Vec<Probe>,
    waiting: Vec<Option<BoxFuture<'static, ()>>>,
    _tag: PhantomData<fn() -> T>,
}

impl<T: Tag> std::fmt::Debug for TagService<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagService").finish_non_exhaustive()
    }
}

impl<T: Tag> TagService<T> {
    pub(crate) fn new(pipeline: Pipeline) -> Self {
        let probes = pipeline.readiness_probes::<T>();
        let waiting = probes.iter().map(|_| None).collect();
        TagService {
            pipeline,
            probes,
            waiting,
            _tag: PhantomData,
        }
    }
}

impl<T: Tag> Clone for TagService<T> {
    fn clone(&self) -> Self {
        TagService::new(self.pipeline.clone())
    }
}

impl<T: Tag> tower::Service<TagRequest<T>> for TagService<T> {
    type Response = EmitOutcome<T::Payload>;
    type Error = EmitError;
    type Future = BoxFuture<'static, Result<EmitOutcome<T::Payload>, EmitError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), EmitError>> {
        for (probe, waiting) in self.probes.iter().zip(self.waiting.iter_mut()) {
            let future = waiting.get_or_insert_with(|| probe());
            if future.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            *waiting = None;
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: TagRequest<T>) -> Self::Future {
        let pipeline = self.pipeline.clone();
        Box::pin(async move { pipeline.emit::<T>(request.payload, &request.ctx).await })
    }
}
