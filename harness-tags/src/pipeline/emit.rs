//! The future of one emit.

use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;

use super::chain::{Chain, Started};
use super::{EmitOutcome, EmitResult};
use crate::tag::Tag;

/// The future of one emit of tag `T`, returned by [`Pipeline::emit`](super::Pipeline::emit).
///
/// The handlers run when the future is first polled. When every handler of the tag is
/// synchronous that first poll completes it and allocates nothing; [`Emit::now`] takes that
/// result without an executor.
#[must_use = "an emit does nothing until it is awaited or `now()` is called"]
pub struct Emit<'a, T: Tag> {
    chain: Option<&'a Chain<T>>,
    ctx: &'a T::Ctx,
    /// Holds a value exactly while `stage` is `Stage::Start`.
    payload: ManuallyDrop<T::Payload>,
    stage: Stage,
    running: Option<BoxFuture<'a, EmitResult<T::Payload>>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Start,
    Running,
    Done,
}

impl<'a, T: Tag> Emit<'a, T> {
    pub(crate) fn new(chain: Option<&'a Chain<T>>, payload: T::Payload, ctx: &'a T::Ctx) -> Self {
        Emit {
            chain,
            ctx,
            payload: ManuallyDrop::new(payload),
            stage: Stage::Start,
            running: None,
        }
    }

    /// Runs the emit as far as it goes without awaiting. Returns the result if it finished, or
    /// the emit back, to be awaited, if it reached an asynchronous handler or a full tap queue.
    pub fn now(mut self) -> Result<EmitResult<T::Payload>, Self> {
        match self.start() {
            Some(result) => Ok(result),
            None => Err(self),
        }
    }

    /// Runs the synchronous part once; `Some` if that finished the emit.
    #[inline(always)]
    fn start(&mut self) -> Option<EmitResult<T::Payload>> {
        if self.stage != Stage::Start {
            return None;
        }
        self.stage = Stage::Done;
        // SAFETY: `stage` was `Start`, so `payload` holds a value that was never taken; `stage`
        // is now `Done`, so it is neither taken nor dropped again. The payload is read field by
        // field here instead of moving the whole future, which keeps a ready emit free of
        // store-to-load stalls on the hot path.
        let payload = unsafe { ManuallyDrop::take(&mut self.payload) };
        let Some(chain) = self.chain else {
            return Some(Ok(EmitOutcome::Continue(payload)));
        };
        match chain.start(payload, self.ctx) {
            Started::Done(result) => Some(result),
            Started::Async(future) => {
                self.running = Some(future);
                self.stage = Stage::Running;
                None
            }
        }
    }

    /// Polls the asynchronous part, out of line so that awaiting a ready emit stays small.
    #[inline(never)]
    fn poll_running(&mut self, cx: &mut Context<'_>) -> Poll<EmitResult<T::Payload>> {
        let Some(future) = self.running.as_mut() else {
            // Polled after completion: stay pending, as fused futures do.
            return Poll::Pending;
        };
        let poll = future.as_mut().poll(cx);
        if poll.is_ready() {
            self.running = None;
            self.stage = Stage::Done;
        }
        poll
    }
}

// `Emit` never pins its payload (it is moved out whole before any handler runs), so it is
// `Unpin` whatever the payload type is.
impl<T: Tag> Unpin for Emit<'_, T> {}

impl<T: Tag> Future for Emit<'_, T> {
    type Output = EmitResult<T::Payload>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(result) = this.start() {
            return Poll::Ready(result);
        }
        this.poll_running(cx)
    }
}

impl<T: Tag> Drop for Emit<'_, T> {
    fn drop(&mut self) {
        if self.stage == Stage::Start {
            // SAFETY: in `Start` the payload holds a value that was never taken, and this is
            // the last use of it.
            unsafe { ManuallyDrop::drop(&mut self.payload) }
        }
    }
}

impl<T: Tag> fmt::Debug for Emit<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match self.stage {
            Stage::Start => "not started",
            Stage::Running => "running",
            Stage::Done => "done",
        };
        f.debug_struct("Emit")
            .field("tag", &T::NAME)
            .field("stage", &stage)
            .finish()
    }
}
