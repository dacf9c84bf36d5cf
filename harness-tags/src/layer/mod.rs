//! Registrations as individual tower layers.
//!
//! Each `on` and `tap` registration is a [`tower::Layer`] over "the rest of the chain": a
//! service of `TagRequest<T>` answering [`EmitOutcome`]. Stack them with `ServiceBuilder` and
//! end the stack with [`terminal`]:
//!
//! ```
//! use harness_tags::{BaseCtx, EmitOutcome, TagRequest, on, tap, layer::terminal, tags::PromptSystem};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let service = ServiceBuilder::new()
//!     .layer(tap(PromptSystem, |text: &String, _ctx: &BaseCtx| assert_eq!(text, "hello!")))
//!     .layer(on(PromptSystem, |text: &String, _ctx: &BaseCtx| format!("{text}!")))
//!     .service(terminal::<PromptSystem>());
//! let request = TagRequest::<PromptSystem> { payload: "hello".into(), ctx: BaseCtx::default() };
//! let outcome = service.oneshot(request).await.unwrap();
//! assert_eq!(outcome, EmitOutcome::Continue("hello!".to_owned()));
//! # });
//! ```
//!
//! In a stack the outer layer runs first, so a tap placed outside the `on` layers sees the
//! final payload. Failures are handled by each layer's policy and reported to `tracing`. The
//! [`Pipeline`](crate::Pipeline) gives the same semantics with ordering by specificity, an
//! error sink and bounded tap queues, compiled into one flat chain per tag; prefer it unless
//! you are composing tag handlers with other tower middleware by hand.

use std::marker::PhantomData;
use std::task::{Context, Poll};

use futures_util::future::{BoxFuture, Ready, ready};
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

use crate::flow::{BoxError, FailurePolicy, Flow};
use crate::handler::{HandlerId, On, OnHandler, TagRequest, Tap, TapHandler};
use crate::pipeline::{EmitError, EmitOutcome, HandlerFailure};
use crate::pipeline::{Step, call_guarded, classify, report};
use crate::tag::Tag;

/// The end of a hand-built stack: answers with the payload it receives.
pub fn terminal<T: Tag>() -> Terminal<T> {
    Terminal(PhantomData)
}

/// See [`terminal`].
pub struct Terminal<T>(PhantomData<fn() -> T>);

impl<T> std::fmt::Debug for Terminal<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal").finish_non_exhaustive()
    }
}

impl<T> Clone for Terminal<T> {
    fn clone(&self) -> Self {
        Terminal(PhantomData)
    }
}

impl<T: Tag> Service<TagRequest<T>> for Terminal<T> {
    type Response = EmitOutcome<T::Payload>;
    type Error = EmitError;
    type Future = Ready<Result<EmitOutcome<T::Payload>, EmitError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), EmitError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: TagRequest<T>) -> Self::Future {
        ready(Ok(EmitOutcome::Continue(request.payload)))
    }
}

type Chain<T> = BoxCloneSyncService<TagRequest<T>, EmitOutcome<<T as Tag>::Payload>, EmitError>;

/// An `on` registration applied over the rest of a chain.
pub struct OnService<T: Tag> {
    handler: BoxCloneSyncService<TagRequest<T>, Flow<T::Payload>, BoxError>,
    inner: Chain<T>,
    id: HandlerId,
    policy: FailurePolicy,
}

impl<T: Tag> std::fmt::Debug for OnService<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnService").finish_non_exhaustive()
    }
}

impl<T: Tag> Clone for OnService<T> {
    fn clone(&self) -> Self {
        OnService {
            handler: self.handler.clone(),
            inner: self.inner.clone(),
            id: self.id.clone(),
            policy: self.policy,
        }
    }
}

impl<T, H, S> Layer<S> for On<T, H>
where
    T: Tag,
    H: OnHandler<T> + Clone,
    <H::Service as Service<TagRequest<T>>>::Future: Send + 'static,
    S: Service<TagRequest<T>, Response = EmitOutcome<T::Payload>, Error = EmitError>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    type Service = OnService<T>;

    fn layer(&self, inner: S) -> OnService<T> {
        OnService {
            handler: BoxCloneSyncService::new(self.handler.clone().into_service()),
            inner: BoxCloneSyncService::new(inner),
            id: HandlerId::new(
                None,
                self.options.name.as_deref(),
                &format!("on {}", T::NAME),
            ),
            policy: self.options.policy,
        }
    }
}

impl<T: Tag> Service<TagRequest<T>> for OnService<T> {
    type Response = EmitOutcome<T::Payload>;
    type Error = EmitError;
    type Future = BoxFuture<'static, Result<EmitOutcome<T::Payload>, EmitError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), EmitError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: TagRequest<T>) -> Self::Future {
        let handler = self.handler.clone();
        let id = self.id.clone();
        let policy = self.policy;
        // Readiness was checked on `self.inner`: that instance serves the call.
        let fresh = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, fresh);
        Box::pin(async move {
            let descriptor = T::descriptor();
            let ctx = request.ctx.clone();
            let mut payload = request.payload.clone();
            let failure = match call_guarded(handler, request).await {
                Ok(flow) => match classify(descriptor, flow) {
                    Step::Replace(reshaped) => {
                        payload = T::constrain(&payload, reshaped);
                        None
                    }
                    Step::Keep => None,
                    Step::Suppress => return Ok(EmitOutcome::Suppressed { by: id }),
                    Step::Failure(kind, error) => Some((kind, error)),
                },
                Err(failure) => Some(failure),
            };
            if let Some((kind, error)) = failure {
                let failure = HandlerFailure {
                    tag: descriptor,
                    handler: id,
                    policy,
                    kind,
                    error,
                };
                if let Some(error) = report(None, failure) {
                    return Err(error);
                }
            }
            inner.oneshot(TagRequest { payload, ctx }).await
        })
    }
}

/// A `tap` registration applied over the rest of a chain: it runs the chain, then observes
/// the final payload.
pub struct TapService<T: Tag> {
    handler: BoxCloneSyncService<TagRequest<T>, (), BoxError>,
    inner: Chain<T>,
    id: HandlerId,
}

impl<T: Tag> std::fmt::Debug for TapService<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapService").finish_non_exhaustive()
    }
}

impl<T: Tag> Clone for TapService<T> {
    fn clone(&self) -> Self {
        TapService {
            handler: self.handler.clone(),
            inner: self.inner.clone(),
            id: self.id.clone(),
        }
    }
}

impl<T, H, S> Layer<S> for Tap<T, H>
where
    T: Tag,
    H: TapHandler<T> + Clone,
    <H::Service as Service<TagRequest<T>>>::Future: Send + 'static,
    S: Service<TagRequest<T>, Response = EmitOutcome<T::Payload>, Error = EmitError>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    type Service = TapService<T>;

    fn layer(&self, inner: S) -> TapService<T> {
        TapService {
            handler: BoxCloneSyncService::new(self.handler.clone().into_service()),
            inner: BoxCloneSyncService::new(inner),
            id: HandlerId::new(
                None,
                self.options.name.as_deref(),
                &format!("tap {}", T::NAME),
            ),
        }
    }
}

impl<T: Tag> Service<TagRequest<T>> for TapService<T> {
    type Response = EmitOutcome<T::Payload>;
    type Error = EmitError;
    type Future = BoxFuture<'static, Result<EmitOutcome<T::Payload>, EmitError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), EmitError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: TagRequest<T>) -> Self::Future {
        let handler = self.handler.clone();
        let id = self.id.clone();
        let fresh = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, fresh);
        Box::pin(async move {
            let ctx = request.ctx.clone();
            let outcome = inner.oneshot(request).await?;
            if let EmitOutcome::Continue(payload) = &outcome {
                let observed = TagRequest {
                    payload: payload.clone(),
                    ctx,
                };
                if let Err((kind, error)) = call_guarded(handler, observed).await {
                    let failure = HandlerFailure {
                        tag: T::descriptor(),
                        handler: id,
                        policy: FailurePolicy::FailOpen,
                        kind,
                        error,
                    };
                    report(None, failure);
                }
            }
            Ok(outcome)
        })
    }
}
