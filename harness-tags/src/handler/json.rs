//! JSON handlers: they take a [`Pattern`] and see any matching tag's payload as
//! `serde_json::Value`. A reshaped payload is validated against the tag's payload schema before
//! it is accepted; one that does not validate counts as a failure of the handler.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::FutureExt;
use futures_util::future::{Map, Ready, ready};
use serde_json::Value;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt};

use super::typed::TapOutput;
use super::{Body, ErasedCtx, Options, Registration, TapQueueConfig, registration_options};
use crate::flow::{BoxError, Flow, IntoFlow};
use crate::pattern::{IntoPattern, Pattern, PatternError};
use crate::tag::TagDescriptor;

/// The owned request JSON services and async JSON taps receive.
#[derive(Clone, Debug)]
pub struct JsonRequest {
    /// The tag being emitted.
    pub tag: &'static TagDescriptor,
    /// The payload as JSON.
    pub payload: Value,
    /// The context as JSON.
    pub ctx: Value,
}

/// What a synchronous JSON handler knows about the emit besides the payload.
pub struct TagInfo<'a> {
    descriptor: &'static TagDescriptor,
    ctx: &'a dyn ErasedCtx,
}

impl<'a> std::fmt::Debug for TagInfo<'a> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagInfo").finish_non_exhaustive()
    }
}

impl<'a> TagInfo<'a> {
    pub(crate) fn new(descriptor: &'static TagDescriptor, ctx: &'a dyn ErasedCtx) -> Self {
        TagInfo { descriptor, ctx }
    }

    /// The tag being emitted.
    pub fn descriptor(&self) -> &'static TagDescriptor {
        self.descriptor
    }

    /// The tag's name.
    pub fn name(&self) -> &'static str {
        self.descriptor.name()
    }

    /// The context serialized to JSON (computed on each call).
    pub fn ctx_json(&self) -> Result<Value, serde_json::Error> {
        self.ctx.to_json()
    }

    /// The context as its concrete type, if it is a `C`.
    pub fn ctx<C: 'static>(&self) -> Option<&'a C> {
        self.ctx.as_any().downcast_ref()
    }
}

/// A synchronous JSON handler function.
#[derive(Clone)]
pub struct JsonSyncFn<F>(Arc<F>);

impl<F> std::fmt::Debug for JsonSyncFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSyncFn").finish_non_exhaustive()
    }
}

/// An asynchronous JSON tap function.
#[derive(Clone)]
pub struct JsonAsyncFn<F>(F);

impl<F> std::fmt::Debug for JsonAsyncFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonAsyncFn").finish_non_exhaustive()
    }
}

/// A tower service used as a JSON handler.
#[derive(Clone)]
pub struct JsonServiceHandler<S>(S);

impl<S> std::fmt::Debug for JsonServiceHandler<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonServiceHandler").finish_non_exhaustive()
    }
}

/// A JSON `on` registration for every tag a pattern matches.
pub struct OnJson<H> {
    pattern: Result<Pattern, PatternError>,
    handler: H,
    pub(crate) options: Options,
}

impl<H> std::fmt::Debug for OnJson<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnJson").finish_non_exhaustive()
    }
}

/// A JSON `tap` registration for every tag a pattern matches.
pub struct TapJson<H> {
    pattern: Result<Pattern, PatternError>,
    handler: H,
    pub(crate) options: Options,
    queue: Option<TapQueueConfig>,
}

impl<H> std::fmt::Debug for TapJson<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapJson").finish_non_exhaustive()
    }
}

/// A synchronous JSON `on` handler for every tag `pattern` matches.
///
/// An invalid pattern string is reported when the pipeline is built.
///
/// ```
/// use harness_tags::{on_json, Flow};
///
/// // Drop any nudge whose text mentions "loop" (only suppressible tags may be suppressed).
/// let registration = on_json("nudge.*", |payload: &serde_json::Value, _info| {
///     match payload.as_str() {
///         Some(text) if text.contains("loop") => Flow::Suppress,
///         _ => Flow::Keep,
///     }
/// });
/// # let _ = registration;
/// ```
pub fn on_json<F, R>(pattern: impl IntoPattern, handler: F) -> OnJson<JsonSyncFn<F>>
where
    F: Fn(&Value, &TagInfo<'_>) -> R + Send + Sync + 'static,
    R: IntoFlow<Value>,
{
    OnJson {
        pattern: pattern.into_pattern(),
        handler: JsonSyncFn(Arc::new(handler)),
        options: Options::default(),
    }
}

/// A tower service as a JSON `on` handler: `Service<JsonRequest, Response = Flow<Value>>`.
pub fn on_json_service<S>(pattern: impl IntoPattern, service: S) -> OnJson<JsonServiceHandler<S>>
where
    S: Service<JsonRequest, Response = Flow<Value>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    OnJson {
        pattern: pattern.into_pattern(),
        handler: JsonServiceHandler(service),
        options: Options::default(),
    }
}

/// A synchronous JSON tap for every tag `pattern` matches.
pub fn tap_json<F, R>(pattern: impl IntoPattern, handler: F) -> TapJson<JsonSyncFn<F>>
where
    F: Fn(&Value, &TagInfo<'_>) -> R + Send + Sync + 'static,
    R: TapOutput,
{
    TapJson {
        pattern: pattern.into_pattern(),
        handler: JsonSyncFn(Arc::new(handler)),
        options: Options::default(),
        queue: None,
    }
}

/// An asynchronous JSON tap for every tag `pattern` matches, run on a bounded queue.
pub fn tap_json_async<F, Fut>(pattern: impl IntoPattern, handler: F) -> TapJson<JsonAsyncFn<F>>
where
    F: Fn(JsonRequest) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: TapOutput,
{
    TapJson {
        pattern: pattern.into_pattern(),
        handler: JsonAsyncFn(handler),
        options: Options::default(),
        queue: None,
    }
}

impl<H> OnJson<H> {
    registration_options!();
}

impl<H: JsonOnHandler> OnJson<H> {
    /// Wraps the handler in a tower layer, e.g. `TimeoutLayer`.
    pub fn layer<L>(self, layer: L) -> OnJson<JsonServiceHandler<L::Service>>
    where
        L: Layer<H::Service>,
        L::Service: Service<JsonRequest, Response = Flow<Value>> + Clone + Send + Sync + 'static,
        <L::Service as Service<JsonRequest>>::Error: Into<BoxError>,
        <L::Service as Service<JsonRequest>>::Future: Send + 'static,
    {
        OnJson {
            pattern: self.pattern,
            handler: JsonServiceHandler(layer.layer(self.handler.into_service())),
            options: self.options,
        }
    }
}

impl<H> TapJson<H> {
    registration_options!();

    /// Sets the queue of an asynchronous tap.
    pub fn queue(mut self, config: TapQueueConfig) -> Self {
        self.queue = Some(config);
        self
    }
}

impl<H: JsonOnHandler> From<OnJson<H>> for Registration {
    fn from(registration: OnJson<H>) -> Self {
        Registration {
            policy: registration.options.policy,
            name: registration.options.name,
            body: Body::JsonOn {
                pattern: registration.pattern,
                step: registration.handler.into_step(),
            },
        }
    }
}

impl<H: JsonTapHandler> From<TapJson<H>> for Registration {
    fn from(registration: TapJson<H>) -> Self {
        Registration {
            policy: registration.options.policy,
            name: registration.options.name,
            body: Body::JsonTap {
                pattern: registration.pattern,
                spec: registration.handler.into_spec(),
                queue: registration.queue,
            },
        }
    }
}

#[doc(hidden)]
pub(crate) type SyncJsonOnFn = dyn Fn(&Value, &TagInfo<'_>) -> Flow<Value> + Send + Sync;
#[doc(hidden)]
pub(crate) type SyncJsonTapFn = dyn Fn(&Value, &TagInfo<'_>) -> Result<(), BoxError> + Send + Sync;

/// A compiled JSON `on` step (an implementation detail).
#[doc(hidden)]
#[derive(Clone)]
pub enum JsonOnStep {
    Sync(Arc<SyncJsonOnFn>),
    Service(BoxCloneSyncService<JsonRequest, Flow<Value>, BoxError>),
}

impl std::fmt::Debug for JsonOnStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonOnStep")
    }
}

/// A compiled JSON tap, before its queue exists (an implementation detail).
#[doc(hidden)]
pub enum JsonTapSpec {
    Sync(Arc<SyncJsonTapFn>),
    Queued(BoxCloneSyncService<JsonRequest, (), BoxError>),
}

impl std::fmt::Debug for JsonTapSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonTapSpec")
    }
}

/// A handler that can serve as a JSON `on` handler.
pub trait JsonOnHandler: Send + Sync + 'static {
    /// The handler as a tower service.
    type Service: Service<JsonRequest, Response = Flow<Value>, Error = BoxError, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static;

    /// Converts into a tower service.
    fn into_service(self) -> Self::Service;

    #[doc(hidden)]
    fn into_step(self) -> JsonOnStep
    where
        Self: Sized,
    {
        JsonOnStep::Service(BoxCloneSyncService::new(self.into_service()))
    }
}

/// A handler that can serve as a JSON tap.
pub trait JsonTapHandler: Send + Sync + 'static {
    #[doc(hidden)]
    fn into_spec(self) -> JsonTapSpec;
}

/// A synchronous JSON handler viewed as a tower service. The service has no typed context, so
/// the handler's [`TagInfo`] carries the context as JSON.
pub struct JsonSyncService<F>(Arc<F>);

impl<F> std::fmt::Debug for JsonSyncService<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSyncService").finish_non_exhaustive()
    }
}

impl<F> Clone for JsonSyncService<F> {
    fn clone(&self) -> Self {
        JsonSyncService(Arc::clone(&self.0))
    }
}

impl<F, R> Service<JsonRequest> for JsonSyncService<F>
where
    F: Fn(&Value, &TagInfo<'_>) -> R,
    R: IntoFlow<Value>,
{
    type Response = Flow<Value>;
    type Error = BoxError;
    type Future = Ready<Result<Flow<Value>, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: JsonRequest) -> Self::Future {
        let info = TagInfo::new(request.tag, &request.ctx);
        ready(Ok((self.0)(&request.payload, &info).into_flow()))
    }
}

impl<F, R> JsonOnHandler for JsonSyncFn<F>
where
    F: Fn(&Value, &TagInfo<'_>) -> R + Send + Sync + 'static,
    R: IntoFlow<Value>,
{
    type Service = JsonSyncService<F>;

    fn into_service(self) -> Self::Service {
        JsonSyncService(self.0)
    }

    fn into_step(self) -> JsonOnStep {
        let handler = self.0;
        JsonOnStep::Sync(Arc::new(move |payload, info| {
            handler(payload, info).into_flow()
        }))
    }
}

impl<S> JsonOnHandler for JsonServiceHandler<S>
where
    S: Service<JsonRequest, Response = Flow<Value>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Service = tower::util::MapErr<S, fn(S::Error) -> BoxError>;

    fn into_service(self) -> Self::Service {
        self.0.map_err(Into::into)
    }
}

impl<F, R> JsonTapHandler for JsonSyncFn<F>
where
    F: Fn(&Value, &TagInfo<'_>) -> R + Send + Sync + 'static,
    R: TapOutput,
{
    fn into_spec(self) -> JsonTapSpec {
        let handler = self.0;
        JsonTapSpec::Sync(Arc::new(move |payload, info| {
            handler(payload, info).into_result()
        }))
    }
}

/// An async JSON tap function viewed as a tower service.
#[derive(Clone)]
pub(super) struct JsonAsyncTapService<F>(F);

impl<F, Fut> Service<JsonRequest> for JsonAsyncTapService<F>
where
    F: Fn(JsonRequest) -> Fut,
    Fut: Future,
    Fut::Output: TapOutput,
{
    type Response = ();
    type Error = BoxError;
    type Future = Map<Fut, fn(Fut::Output) -> Result<(), BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: JsonRequest) -> Self::Future {
        (self.0)(request).map(TapOutput::into_result)
    }
}

impl<F, Fut> JsonTapHandler for JsonAsyncFn<F>
where
    F: Fn(JsonRequest) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: TapOutput,
{
    fn into_spec(self) -> JsonTapSpec {
        JsonTapSpec::Queued(BoxCloneSyncService::new(JsonAsyncTapService(self.0)))
    }
}
