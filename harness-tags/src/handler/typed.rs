//! Typed handlers: they name one exact tag and see its payload and context types.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::FutureExt;
use futures_util::future::{Map, Ready, ready};
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

use super::{Body, Options, Registration, TapQueueConfig, registration_options};
use crate::flow::{BoxError, Flow, IntoFlow, TagError, caught};
use crate::tag::Tag;

/// The owned request async handlers and tower services receive: the payload and a clone of
/// the context.
pub struct TagRequest<T: Tag> {
    /// The payload as the previous handlers left it.
    pub payload: T::Payload,
    /// The emit's context.
    pub ctx: T::Ctx,
}

impl<T: Tag> std::fmt::Debug for TagRequest<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagRequest").field("tag", &T::NAME).finish()
    }
}

impl<T: Tag> Clone for TagRequest<T> {
    fn clone(&self) -> Self {
        TagRequest {
            payload: self.payload.clone(),
            ctx: self.ctx.clone(),
        }
    }
}

/// A synchronous handler function (see [`on`] and [`tap`]).
#[derive(Clone)]
pub struct SyncFn<F>(Arc<F>);

impl<F> std::fmt::Debug for SyncFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncFn").finish_non_exhaustive()
    }
}

/// An asynchronous handler function (see [`on_async`] and [`tap_async`]).
#[derive(Clone)]
pub struct AsyncFn<F>(F);

impl<F> std::fmt::Debug for AsyncFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncFn").finish_non_exhaustive()
    }
}

/// A tower service used as a handler (see [`on_service`] and [`tap_service`]).
#[derive(Clone)]
pub struct ServiceHandler<S>(S);

impl<S> std::fmt::Debug for ServiceHandler<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceHandler").finish_non_exhaustive()
    }
}

/// A typed `on` registration: reshapes the payload of tag `T`.
pub struct On<T: Tag, H> {
    pub(crate) handler: H,
    pub(crate) options: Options,
    _tag: PhantomData<fn() -> T>,
}

impl<T: Tag, H> std::fmt::Debug for On<T, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("On").finish_non_exhaustive()
    }
}

/// A typed `tap` registration: observes the final payload of tag `T`.
pub struct Tap<T: Tag, H> {
    pub(crate) handler: H,
    pub(crate) options: Options,
    pub(crate) queue: Option<TapQueueConfig>,
    _tag: PhantomData<fn() -> T>,
}

impl<T: Tag, H> std::fmt::Debug for Tap<T, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap").finish_non_exhaustive()
    }
}

/// A synchronous `on` handler: `Fn(&payload, &ctx) -> impl IntoFlow<payload>`.
///
/// The handler borrows the payload and returns the new one (or `None`/[`Flow::Keep`] to keep
/// it), so a failing handler can never lose the payload: under
/// [`FailOpen`](crate::FailurePolicy::FailOpen) the next handler sees the payload from before
/// the failure, and nothing is cloned to make that possible.
///
/// ```
/// use harness_tags::{on, tags::PromptSystem};
///
/// let registration = on(PromptSystem, |text: &String, ctx| format!("[{}]\n{text}", ctx.strategy))
///     .named("tenant prefix")
///     .fail_closed();
/// # let _ = registration;
/// ```
pub fn on<T, F, R>(tag: T, handler: F) -> On<T, SyncFn<F>>
where
    T: Tag,
    F: Fn(&T::Payload, &T::Ctx) -> R + Send + Sync + 'static,
    R: IntoFlow<T::Payload>,
{
    let _ = tag;
    On::new(SyncFn(Arc::new(handler)))
}

/// An asynchronous `on` handler: `Fn(payload, ctx) -> impl Future<Output = impl IntoFlow>`.
///
/// The handler gets owned copies (the payload as the previous handler left it and a clone of
/// the context), so its future can be `'static`.
pub fn on_async<T, F, Fut>(tag: T, handler: F) -> On<T, AsyncFn<F>>
where
    T: Tag,
    F: Fn(T::Payload, T::Ctx) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoFlow<T::Payload>,
{
    let _ = tag;
    On::new(AsyncFn(handler))
}

/// A tower service as an `on` handler: `Service<TagRequest<T>, Response = Flow<T::Payload>>`.
pub fn on_service<T, S>(tag: T, service: S) -> On<T, ServiceHandler<S>>
where
    T: Tag,
    S: Service<TagRequest<T>, Response = Flow<T::Payload>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    let _ = tag;
    On::new(ServiceHandler(service))
}

/// A synchronous `tap`: `Fn(&payload, &ctx)` returning `()` or a `Result<(), E>`.
///
/// Sync taps run inline after every `on` handler, in registration order. Keep them cheap;
/// anything slow belongs in [`tap_async`], which runs on a bounded queue.
pub fn tap<T, F, R>(tag: T, handler: F) -> Tap<T, SyncFn<F>>
where
    T: Tag,
    F: Fn(&T::Payload, &T::Ctx) -> R + Send + Sync + 'static,
    R: TapOutput,
{
    let _ = tag;
    Tap::new(SyncFn(Arc::new(handler)))
}

/// An asynchronous `tap`: `Fn(payload, ctx) -> impl Future`, run on a bounded queue.
///
/// The emit only enqueues the request; a worker task runs the handler. When the queue is full
/// the registration's [`TapQueueConfig`] decides: wait up to a bound, or drop and count.
pub fn tap_async<T, F, Fut>(tag: T, handler: F) -> Tap<T, AsyncFn<F>>
where
    T: Tag,
    F: Fn(T::Payload, T::Ctx) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: TapOutput,
{
    let _ = tag;
    Tap::new(AsyncFn(handler))
}

/// A tower service as an asynchronous `tap`: `Service<TagRequest<T>, Response = ()>`.
pub fn tap_service<T, S>(tag: T, service: S) -> Tap<T, ServiceHandler<S>>
where
    T: Tag,
    S: Service<TagRequest<T>, Response = ()> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    let _ = tag;
    Tap::new(ServiceHandler(service))
}

/// What a tap may return: `()` or a `Result<(), E>` whose error is reported.
pub trait TapOutput {
    /// Converts into a result.
    fn into_result(self) -> Result<(), BoxError>;
}

impl TapOutput for () {
    fn into_result(self) -> Result<(), BoxError> {
        Ok(())
    }
}

impl<E: Into<BoxError>> TapOutput for Result<(), E> {
    fn into_result(self) -> Result<(), BoxError> {
        self.map_err(Into::into)
    }
}

impl<T: Tag, H> On<T, H> {
    fn new(handler: H) -> Self {
        On {
            handler,
            options: Options::default(),
            _tag: PhantomData,
        }
    }

    registration_options!();
}

impl<T: Tag, H: OnHandler<T>> On<T, H> {
    /// Wraps the handler in a tower layer, e.g. `TimeoutLayer`. A synchronous handler becomes
    /// a service first, so any handler can be wrapped.
    pub fn layer<L>(self, layer: L) -> On<T, ServiceHandler<L::Service>>
    where
        L: Layer<H::Service>,
        L::Service:
            Service<TagRequest<T>, Response = Flow<T::Payload>> + Clone + Send + Sync + 'static,
        <L::Service as Service<TagRequest<T>>>::Error: Into<BoxError>,
        <L::Service as Service<TagRequest<T>>>::Future: Send + 'static,
    {
        On {
            handler: ServiceHandler(layer.layer(self.handler.into_service())),
            options: self.options,
            _tag: PhantomData,
        }
    }

    /// The handler as a tower service.
    pub fn into_service(self) -> H::Service {
        self.handler.into_service()
    }
}

impl<T: Tag, H> Tap<T, H> {
    fn new(handler: H) -> Self {
        Tap {
            handler,
            options: Options::default(),
            queue: None,
            _tag: PhantomData,
        }
    }

    registration_options!();
}

impl<T: Tag, H: TapHandler<T>> Tap<T, H> {
    /// Wraps the tap in a tower layer; the tap then runs on a bounded queue like an async tap.
    pub fn layer<L>(self, layer: L) -> Tap<T, ServiceHandler<L::Service>>
    where
        L: Layer<H::Service>,
        L::Service: Service<TagRequest<T>, Response = ()> + Clone + Send + Sync + 'static,
        <L::Service as Service<TagRequest<T>>>::Error: Into<BoxError>,
        <L::Service as Service<TagRequest<T>>>::Future: Send + 'static,
    {
        Tap {
            handler: ServiceHandler(layer.layer(self.handler.into_service())),
            options: self.options,
            queue: self.queue,
            _tag: PhantomData,
        }
    }

    /// Sets the queue of an asynchronous tap (capacity and what happens when it is full).
    /// Without it, the pipeline's default queue configuration applies. Synchronous taps run
    /// inline and have no queue.
    pub fn queue(mut self, config: TapQueueConfig) -> Self {
        self.queue = Some(config);
        self
    }
}

impl<T: Tag, H: OnHandler<T>> From<On<T, H>> for Registration {
    fn from(registration: On<T, H>) -> Self {
        Registration {
            policy: registration.options.policy,
            name: registration.options.name,
            body: Body::TypedOn {
                descriptor: T::descriptor(),
                step: Box::new(registration.handler.into_step()),
            },
        }
    }
}

impl<T: Tag, H: TapHandler<T>> From<Tap<T, H>> for Registration {
    fn from(registration: Tap<T, H>) -> Self {
        Registration {
            policy: registration.options.policy,
            name: registration.options.name,
            body: Body::TypedTap {
                descriptor: T::descriptor(),
                spec: Box::new(registration.handler.into_spec()),
                queue: registration.queue,
            },
        }
    }
}

/// A compiled `on` step of tag `T` (an implementation detail of the pipeline).
#[doc(hidden)]
pub enum OnStep<T: Tag> {
    Sync(Box<SyncOnFn<T>>),
    Service(BoxCloneSyncService<TagRequest<T>, Flow<T::Payload>, BoxError>),
}

impl<T: Tag> std::fmt::Debug for OnStep<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnStep")
    }
}

/// A compiled synchronous `on` handler (an implementation detail of the pipeline).
///
/// It takes the payload by value and always gives one back: the new payload, or the one it
/// got when the handler kept it, suppressed the emit or failed (then `halt` says which). The
/// payload thus stays in registers from one handler to the next, where a borrowed payload
/// would go through memory at every step, and a failing handler still cannot lose it.
#[doc(hidden)]
pub(crate) type SyncOnFn<T> = dyn Fn(<T as Tag>::Payload, &<T as Tag>::Ctx, &mut Option<Halt>) -> <T as Tag>::Payload
    + Send
    + Sync;

/// Why a synchronous `on` handler stopped an emit (an implementation detail of the pipeline).
#[doc(hidden)]
pub enum Halt {
    /// The handler returned [`Flow::Suppress`].
    Suppress,
    /// The handler failed or panicked.
    Fail(TagError),
}

impl std::fmt::Debug for Halt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Halt")
    }
}

impl Halt {
    pub(crate) fn into_flow<P>(self) -> Flow<P> {
        match self {
            Halt::Suppress => Flow::Suppress,
            Halt::Fail(error) => Flow::Fail(error),
        }
    }
}

/// Runs a synchronous `on` handler over an owned payload (see [`SyncOnFn`]).
#[inline(always)]
fn run_sync_on<T: Tag, R: IntoFlow<T::Payload>>(
    payload: T::Payload,
    halt: &mut Option<Halt>,
    handler: impl FnOnce(&T::Payload) -> R,
) -> T::Payload {
    match catch_unwind(AssertUnwindSafe(|| handler(&payload).into_flow())) {
        Ok(Flow::Continue(next)) => T::constrain(&payload, next),
        Ok(Flow::Keep) => payload,
        Ok(Flow::Suppress) => {
            *halt = Some(Halt::Suppress);
            payload
        }
        Ok(Flow::Fail(error)) => {
            *halt = Some(Halt::Fail(error));
            payload
        }
        Err(panic) => {
            *halt = Some(Halt::Fail(TagError::from_panic(&*panic)));
            payload
        }
    }
}

#[doc(hidden)]
pub(crate) type SyncTapFn<T> =
    dyn Fn(&<T as Tag>::Payload, &<T as Tag>::Ctx) -> Result<(), BoxError> + Send + Sync;

/// A compiled `tap` step of tag `T`, before its queue exists (an implementation detail).
#[doc(hidden)]
pub enum TapSpec<T: Tag> {
    Sync(Box<SyncTapFn<T>>),
    Queued(BoxCloneSyncService<TagRequest<T>, (), BoxError>),
}

impl<T: Tag> std::fmt::Debug for TapSpec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TapSpec")
    }
}

/// A handler that can serve as an `on` handler of tag `T`.
pub trait OnHandler<T: Tag>: Send + Sync + 'static {
    /// The handler as a tower service.
    type Service: Service<TagRequest<T>, Response = Flow<T::Payload>, Error = BoxError, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static;

    /// Converts into a tower service.
    fn into_service(self) -> Self::Service;

    #[doc(hidden)]
    fn into_step(self) -> OnStep<T>
    where
        Self: Sized,
        <Self::Service as Service<TagRequest<T>>>::Future: Send + 'static,
    {
        OnStep::Service(BoxCloneSyncService::new(self.into_service()))
    }
}

/// A handler that can serve as a `tap` of tag `T`.
pub trait TapHandler<T: Tag>: Send + Sync + 'static {
    /// The tap as a tower service.
    type Service: Service<TagRequest<T>, Response = (), Error = BoxError, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static;

    /// Converts into a tower service.
    fn into_service(self) -> Self::Service;

    #[doc(hidden)]
    fn into_spec(self) -> TapSpec<T>
    where
        Self: Sized,
        <Self::Service as Service<TagRequest<T>>>::Future: Send + 'static,
    {
        TapSpec::Queued(BoxCloneSyncService::new(self.into_service()))
    }
}

/// Marks a function service as an `on` handler.
pub enum AsOn {}

impl std::fmt::Debug for AsOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AsOn")
    }
}

/// Marks a function service as a tap.
pub enum AsTap {}

impl std::fmt::Debug for AsTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AsTap")
    }
}

/// A synchronous handler function viewed as a tower service (used when a layer wraps it).
pub struct SyncService<T, F, Role> {
    handler: Arc<F>,
    _marker: PhantomData<fn() -> (T, Role)>,
}

impl<T, F, Role> std::fmt::Debug for SyncService<T, F, Role> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncService").finish_non_exhaustive()
    }
}

impl<T, F, Role> Clone for SyncService<T, F, Role> {
    fn clone(&self) -> Self {
        SyncService {
            handler: Arc::clone(&self.handler),
            _marker: PhantomData,
        }
    }
}

impl<T, F, R> Service<TagRequest<T>> for SyncService<T, F, AsOn>
where
    T: Tag,
    F: Fn(&T::Payload, &T::Ctx) -> R,
    R: IntoFlow<T::Payload>,
{
    type Response = Flow<T::Payload>;
    type Error = BoxError;
    type Future = Ready<Result<Flow<T::Payload>, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: TagRequest<T>) -> Self::Future {
        ready(Ok(
            (self.handler)(&request.payload, &request.ctx).into_flow()
        ))
    }
}

impl<T, F, R> Service<TagRequest<T>> for SyncService<T, F, AsTap>
where
    T: Tag,
    F: Fn(&T::Payload, &T::Ctx) -> R,
    R: TapOutput,
{
    type Response = ();
    type Error = BoxError;
    type Future = Ready<Result<(), BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: TagRequest<T>) -> Self::Future {
        ready((self.handler)(&request.payload, &request.ctx).into_result())
    }
}

impl<T, F, R> OnHandler<T> for SyncFn<F>
where
    T: Tag,
    F: Fn(&T::Payload, &T::Ctx) -> R + Send + Sync + 'static,
    R: IntoFlow<T::Payload>,
{
    type Service = SyncService<T, F, AsOn>;

    fn into_service(self) -> Self::Service {
        SyncService {
            handler: self.0,
            _marker: PhantomData,
        }
    }

    fn into_step(self) -> OnStep<T> {
        // Each handler catches its own panic (free until one happens), so the pipeline's hot
        // loop needs no unwinding guard; owning the function saves a pointer chase per emit.
        match Arc::try_unwrap(self.0) {
            Ok(handler) => OnStep::Sync(Box::new(move |payload, ctx, halt| {
                run_sync_on::<T, R>(payload, halt, |payload| handler(payload, ctx))
            })),
            Err(shared) => OnStep::Sync(Box::new(move |payload, ctx, halt| {
                run_sync_on::<T, R>(payload, halt, |payload| shared(payload, ctx))
            })),
        }
    }
}

impl<T, F, R> TapHandler<T> for SyncFn<F>
where
    T: Tag,
    F: Fn(&T::Payload, &T::Ctx) -> R + Send + Sync + 'static,
    R: TapOutput,
{
    type Service = SyncService<T, F, AsTap>;

    fn into_service(self) -> Self::Service {
        SyncService {
            handler: self.0,
            _marker: PhantomData,
        }
    }

    fn into_spec(self) -> TapSpec<T> {
        match Arc::try_unwrap(self.0) {
            Ok(handler) => TapSpec::Sync(Box::new(move |payload, ctx| {
                caught(|| handler(payload, ctx).into_result())
            })),
            Err(shared) => TapSpec::Sync(Box::new(move |payload, ctx| {
                caught(|| shared(payload, ctx).into_result())
            })),
        }
    }
}

/// An async handler function viewed as a tower service.
pub struct AsyncService<T, F, Role> {
    handler: F,
    _marker: PhantomData<fn() -> (T, Role)>,
}

impl<T, F, Role> std::fmt::Debug for AsyncService<T, F, Role> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncService").finish_non_exhaustive()
    }
}

impl<T, F: Clone, Role> Clone for AsyncService<T, F, Role> {
    fn clone(&self) -> Self {
        AsyncService {
            handler: self.handler.clone(),
            _marker: PhantomData,
        }
    }
}

type FlowOf<T> = Result<Flow<<T as Tag>::Payload>, BoxError>;

impl<T, F, Fut> Service<TagRequest<T>> for AsyncService<T, F, AsOn>
where
    T: Tag,
    F: Fn(T::Payload, T::Ctx) -> Fut,
    Fut: Future,
    Fut::Output: IntoFlow<T::Payload>,
{
    type Response = Flow<T::Payload>;
    type Error = BoxError;
    type Future = Map<Fut, fn(Fut::Output) -> FlowOf<T>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: TagRequest<T>) -> Self::Future {
        (self.handler)(request.payload, request.ctx).map(|output| Ok(output.into_flow()))
    }
}

impl<T, F, Fut> Service<TagRequest<T>> for AsyncService<T, F, AsTap>
where
    T: Tag,
    F: Fn(T::Payload, T::Ctx) -> Fut,
    Fut: Future,
    Fut::Output: TapOutput,
{
    type Response = ();
    type Error = BoxError;
    type Future = Map<Fut, fn(Fut::Output) -> Result<(), BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: TagRequest<T>) -> Self::Future {
        (self.handler)(request.payload, request.ctx).map(TapOutput::into_result)
    }
}

impl<T, F, Fut> OnHandler<T> for AsyncFn<F>
where
    T: Tag,
    F: Fn(T::Payload, T::Ctx) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoFlow<T::Payload>,
{
    type Service = AsyncService<T, F, AsOn>;

    fn into_service(self) -> Self::Service {
        AsyncService {
            handler: self.0,
            _marker: PhantomData,
        }
    }
}

impl<T, F, Fut> TapHandler<T> for AsyncFn<F>
where
    T: Tag,
    F: Fn(T::Payload, T::Ctx) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: TapOutput,
{
    type Service = AsyncService<T, F, AsTap>;

    fn into_service(self) -> Self::Service {
        AsyncService {
            handler: self.0,
            _marker: PhantomData,
        }
    }
}

type ErrInto<S, R> = tower::util::MapErr<S, fn(<S as Service<R>>::Error) -> BoxError>;

impl<T, S> OnHandler<T> for ServiceHandler<S>
where
    T: Tag,
    S: Service<TagRequest<T>, Response = Flow<T::Payload>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Service = ErrInto<S, TagRequest<T>>;

    fn into_service(self) -> Self::Service {
        self.0.map_err(Into::into)
    }
}

impl<T, S> TapHandler<T> for ServiceHandler<S>
where
    T: Tag,
    S: Service<TagRequest<T>, Response = ()> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Service = ErrInto<S, TagRequest<T>>;

    fn into_service(self) -> Self::Service {
        self.0.map_err(Into::into)
    }
}
