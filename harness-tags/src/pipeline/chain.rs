//! One tag's compiled chain and the run of one emit through it.
//!
//! An emit first runs synchronously as far as it can: typed and JSON sync handlers, sync taps,
//! and asynchronous taps whose queue has room. Only when it reaches a service handler or a full
//! queue under the wait policy does it become a boxed future, so the sync path allocates
//! nothing of its own.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures_util::FutureExt;
use serde::Deserialize;
use serde_json::Value;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};
use tracing::Instrument;

use super::failure::{ErrorSink, FailureKind, HandlerFailure, panic_message, report};
use super::queue::{AnyQueue, Probe, TapQueue, TryEnqueue};
use super::{BuildError, EmitOutcome, EmitResult};
use crate::context::TagContext;
use crate::flow::{BoxError, FailurePolicy, Flow, TagError, caught};
use crate::handler::TapQueueConfig;
use crate::handler::{
    Halt, HandlerId, JsonOnStep, JsonRequest, OnStep, SyncJsonOnFn, SyncJsonTapFn, SyncOnFn,
    SyncTapFn, TagInfo, TagRequest, TapSpec,
};
use crate::tag::{Tag, TagDescriptor};
use futures_util::future::BoxFuture;

/// Creates the chain builder of tag `T`, type-erased; stored in each tag's descriptor and
/// opened again by [`open_chain_builder`].
pub(crate) fn chain_factory<T: Tag>() -> Box<dyn Any + Send> {
    let builder: Box<dyn ChainBuilder> = Box::new(TypedChainBuilder::<T> {
        ons: Vec::new(),
        taps: Vec::new(),
        has_json_on: false,
        _tag: std::marker::PhantomData,
    });
    Box::new(builder)
}

/// The chain builder a descriptor's factory made (see [`chain_factory`]).
pub(crate) fn open_chain_builder(made: Box<dyn Any + Send>) -> Option<Box<dyn ChainBuilder>> {
    made.downcast::<Box<dyn ChainBuilder>>()
        .ok()
        .map(|builder| *builder)
}

/// Where a registration sorts and how it is named.
pub(crate) struct Entry {
    pub(crate) id: HandlerId,
    pub(crate) policy: FailurePolicy,
    pub(crate) specificity: u8,
    pub(crate) seq: usize,
}

pub(crate) enum OnBody {
    Typed(Box<dyn Any + Send + Sync>),
    Json(JsonOnStep),
}

pub(crate) enum TapBody {
    Typed(Box<dyn Any + Send + Sync>, TapQueueConfig),
    JsonSync(Arc<SyncJsonTapFn>),
    JsonQueued(Arc<TapQueue<JsonRequest>>),
}

/// What the pipeline builder needs from a chain under construction.
pub(crate) trait ChainBuilder: Send {
    fn add_on(&mut self, entry: Entry, body: OnBody);
    fn add_tap(&mut self, entry: Entry, body: TapBody);
    fn build(
        self: Box<Self>,
        sink: Option<&Arc<dyn ErrorSink>>,
        queues: &mut Vec<Arc<dyn AnyQueue>>,
    ) -> Result<super::ErasedChain, BuildError>;
}

struct TypedChainBuilder<T: Tag> {
    ons: Vec<(Entry, OnBody)>,
    taps: Vec<(Entry, TapBody)>,
    has_json_on: bool,
    _tag: std::marker::PhantomData<fn() -> T>,
}

impl<T: Tag> ChainBuilder for TypedChainBuilder<T> {
    fn add_on(&mut self, entry: Entry, body: OnBody) {
        self.has_json_on |= matches!(body, OnBody::Json(_));
        self.ons.push((entry, body));
    }

    fn add_tap(&mut self, entry: Entry, body: TapBody) {
        self.taps.push((entry, body));
    }

    fn build(
        mut self: Box<Self>,
        sink: Option<&Arc<dyn ErrorSink>>,
        queues: &mut Vec<Arc<dyn AnyQueue>>,
    ) -> Result<super::ErasedChain, BuildError> {
        let descriptor = T::descriptor();
        // Broad before narrow, then registration order: the most specific handler runs last.
        self.ons
            .sort_by_key(|(entry, _)| (entry.specificity, entry.seq));
        self.taps.sort_by_key(|(entry, _)| entry.seq);

        let validator = if self.has_json_on {
            Some(
                jsonschema::validator_for(descriptor.payload_schema()).map_err(|err| {
                    BuildError::Schema {
                        tag: descriptor.name(),
                        message: err.to_string(),
                    }
                })?,
            )
        } else {
            None
        };

        let mut ons = Vec::with_capacity(self.ons.len());
        let mut sync_ons = Vec::new();
        let mut sync_taps = Vec::new();
        for (entry, body) in self.ons {
            let kind = match body {
                OnBody::Typed(step) => match downcast::<OnStep<T>>(step, descriptor)? {
                    OnStep::Sync(handler) => {
                        sync_ons.push(handler);
                        OnKind::Sync(sync_ons.len() - 1)
                    }
                    OnStep::Service(service) => OnKind::Service(service),
                },
                OnBody::Json(JsonOnStep::Sync(handler)) => OnKind::JsonSync(handler),
                OnBody::Json(JsonOnStep::Service(service)) => OnKind::JsonService(service),
            };
            ons.push(Staged {
                id: entry.id,
                policy: entry.policy,
                kind,
            });
        }

        let mut taps = Vec::with_capacity(self.taps.len());
        for (entry, body) in self.taps {
            let kind = match body {
                TapBody::Typed(spec, config) => match downcast::<TapSpec<T>>(spec, descriptor)? {
                    TapSpec::Sync(tap) => {
                        sync_taps.push(tap);
                        TapKind::Sync(sync_taps.len() - 1)
                    }
                    TapSpec::Queued(service) => {
                        let queue = Arc::new(TapQueue::new(
                            entry.id.clone(),
                            service,
                            config,
                            sink.cloned(),
                        ));
                        queues.push(queue.clone());
                        TapKind::Queued(queue)
                    }
                },
                TapBody::JsonSync(tap) => TapKind::JsonSync(tap),
                TapBody::JsonQueued(queue) => TapKind::JsonQueued(queue),
            };
            taps.push(Staged {
                id: entry.id,
                policy: FailurePolicy::FailOpen,
                kind,
            });
        }

        let sync_only = sync_ons.len() == ons.len() && sync_taps.len() == taps.len();

        Ok(super::ErasedChain::new(Chain::<T> {
            descriptor,
            ons: ons.into_boxed_slice(),
            taps: taps.into_boxed_slice(),
            sync_only,
            sync_ons: sync_ons.into_boxed_slice(),
            sync_taps: sync_taps.into_boxed_slice(),
            validator,
            sink: sink.cloned(),
        }))
    }
}

fn downcast<S: 'static>(
    value: Box<dyn Any + Send + Sync>,
    descriptor: &'static TagDescriptor,
) -> Result<S, BuildError> {
    value
        .downcast::<S>()
        .map(|step| *step)
        .map_err(|_| BuildError::TagMismatch {
            tag: descriptor.name(),
        })
}

struct Staged<K> {
    id: HandlerId,
    policy: FailurePolicy,
    kind: K,
}

/// One `on` step, flattened so that the hot loop tests a single discriminant.
enum OnKind<T: Tag> {
    /// Index into `Chain::sync_ons`.
    Sync(usize),
    Service(BoxCloneSyncService<TagRequest<T>, Flow<T::Payload>, BoxError>),
    JsonSync(Arc<SyncJsonOnFn>),
    JsonService(BoxCloneSyncService<JsonRequest, Flow<Value>, BoxError>),
}

enum TapKind<T: Tag> {
    /// Index into `Chain::sync_taps`.
    Sync(usize),
    JsonSync(Arc<SyncJsonTapFn>),
    Queued(Arc<TapQueue<TagRequest<T>>>),
    JsonQueued(Arc<TapQueue<JsonRequest>>),
}

/// The compiled chain of one tag: its `on` steps in order, its taps, and the payload
/// validator when JSON handlers can reshape the payload.
pub(crate) struct Chain<T: Tag> {
    descriptor: &'static TagDescriptor,
    ons: Box<[Staged<OnKind<T>>]>,
    taps: Box<[Staged<TapKind<T>>]>,
    /// True when every step is a typed synchronous handler: such chains take the fast path
    /// (the common case, and the one the dispatch benchmark measures).
    sync_only: bool,
    /// The typed synchronous handlers, which `OnKind::Sync` indexes; dense, so the fast path
    /// walks them like a plain list of closures. Each catches its own panics.
    sync_ons: Box<[Box<SyncOnFn<T>>]>,
    /// The typed synchronous taps, which `TapKind::Sync` indexes.
    sync_taps: Box<[Box<SyncTapFn<T>>]>,
    validator: Option<jsonschema::Validator>,
    sink: Option<Arc<dyn ErrorSink>>,
}

impl<T: Tag> Chain<T> {
    /// Runs the emit as far as it goes synchronously. Inlined into the emit site: most emits
    /// end here, and a call boundary would send the result through memory.
    #[inline]
    pub(crate) fn start<'a>(&'a self, payload: T::Payload, ctx: &'a T::Ctx) -> Started<'a, T> {
        let span = tracing::debug_span!(
            "emit",
            tag = T::NAME,
            iteration = ctx.iteration(),
            call_id = ctx.call_id()
        );
        if self.sync_only {
            let _entered = span.enter();
            return Started::Done(self.emit_sync_only(payload, ctx));
        }
        self.start_general(payload, ctx, span)
    }

    /// The general path: JSON handlers, services and queued taps. Out of line, so that the
    /// fast path inlined into every emit site stays small.
    #[inline(never)]
    fn start_general<'a>(
        &'a self,
        payload: T::Payload,
        ctx: &'a T::Ctx,
        span: tracing::Span,
    ) -> Started<'a, T> {
        let run = Run {
            chain: self,
            ctx,
            current: payload,
            json: None,
            next_on: 0,
            next_tap: 0,
        };
        let progress = span.in_scope(|| run.drive());
        match progress {
            Progress::Ended(result) => Started::Done(result),
            Progress::Blocked(run, blocking) => Started::Async(run.continue_async(blocking, span)),
        }
    }

    /// The fast path: every handler is typed and synchronous, and catches its own panics, so
    /// this is a plain loop over closures with the payload in a local.
    #[inline]
    fn emit_sync_only(&self, payload: T::Payload, ctx: &T::Ctx) -> EmitResult<T::Payload> {
        let mut current = payload;
        let mut halt = None;
        for (index, handler) in self.sync_ons.iter().enumerate() {
            current = handler(current, ctx, &mut halt);
            if halt.is_some()
                && let Some(end) = self.halted(index, &mut halt)
            {
                return end;
            }
        }
        for (index, tap) in self.sync_taps.iter().enumerate() {
            if let Err(error) = tap(&current, ctx) {
                self.tap_failed(index, error);
            }
        }
        Ok(EmitOutcome::Continue(current))
    }

    /// An `on` handler suppressed the emit or failed: `Some` ends the emit.
    #[cold]
    fn halted(&self, index: usize, halt: &mut Option<Halt>) -> Option<EmitResult<T::Payload>> {
        let flow = halt.take()?.into_flow::<T::Payload>();
        let (kind, error) = match classify(self.descriptor, flow) {
            Step::Replace(_) | Step::Keep => return None,
            Step::Suppress => {
                return Some(Ok(EmitOutcome::Suppressed {
                    by: self.ons[index].id.clone(),
                }));
            }
            Step::Failure(kind, error) => (kind, error),
        };
        self.fail(InFlight::On(index), kind, error).map(Err)
    }

    #[cold]
    fn tap_failed(&self, index: usize, error: BoxError) {
        let error = match error.downcast::<TagError>() {
            Ok(error) => *error,
            Err(error) => TagError::from_boxed(error),
        };
        let kind = if error.is_panic() {
            FailureKind::Panicked
        } else {
            FailureKind::Failed
        };
        self.fail(InFlight::Tap(index), kind, error);
    }

    /// Reports a failure of a step; returns the emit error if its policy is `FailClosed`.
    fn fail(&self, step: InFlight, kind: FailureKind, error: TagError) -> Option<super::EmitError> {
        let (handler, policy) = match step {
            InFlight::On(index) => {
                let staged = &self.ons[index];
                (staged.id.clone(), staged.policy)
            }
            InFlight::Tap(index) => (self.taps[index].id.clone(), FailurePolicy::FailOpen),
        };
        report(
            self.sink.as_ref(),
            HandlerFailure {
                tag: self.descriptor,
                handler,
                policy,
                kind,
                error,
            },
        )
    }

    /// Readiness probes of this tag's wait-policy asynchronous taps (see `TagService`).
    pub(crate) fn readiness_probes(&self) -> Vec<Probe> {
        self.taps
            .iter()
            .filter_map(|tap| match &tap.kind {
                TapKind::Queued(queue) => queue.readiness_probe(),
                TapKind::JsonQueued(queue) => queue.readiness_probe(),
                TapKind::Sync(_) | TapKind::JsonSync(_) => None,
            })
            .collect()
    }
}

/// How far an emit got synchronously.
pub(crate) enum Started<'a, T: Tag> {
    Done(EmitResult<T::Payload>),
    Async(BoxFuture<'a, EmitResult<T::Payload>>),
}

enum Progress<'a, T: Tag> {
    /// The emit finished, was suppressed or failed.
    Ended(EmitResult<T::Payload>),
    /// The next step must be awaited.
    Blocked(Run<'a, T>, Blocking<'a, T>),
}

#[derive(Clone, Copy)]
enum InFlight {
    On(usize),
    Tap(usize),
}

enum ParkedTap<T: Tag> {
    Typed(Arc<TapQueue<TagRequest<T>>>, TagRequest<T>),
    Json(Arc<TapQueue<JsonRequest>>, JsonRequest),
}

/// An emit on the general path. It owns the payload and is passed by value, so that a
/// synchronous handler can take the payload and give it back.
struct Run<'a, T: Tag> {
    chain: &'a Chain<T>,
    ctx: &'a T::Ctx,
    current: T::Payload,
    /// The current payload as JSON, kept while no typed handler ran since it was made.
    json: Option<Value>,
    /// The next `on` step to run (advanced before a step runs).
    next_on: usize,
    /// The next tap to run (advanced before a tap runs).
    next_tap: usize,
}

/// The step a blocked run must await next.
enum Blocking<'a, T: Tag> {
    Service(&'a BoxCloneSyncService<TagRequest<T>, Flow<T::Payload>, BoxError>),
    JsonService(&'a BoxCloneSyncService<JsonRequest, Flow<Value>, BoxError>),
    // Boxed: parking is the slow path.
    Parked(Box<ParkedTap<T>>),
}

impl<'a, T: Tag> Run<'a, T> {
    /// Runs every step it can without awaiting. Every step catches its own panics: typed
    /// handlers in their compiled form, JSON steps here, around both their conversions and
    /// the handler, while the typed payload is still intact.
    fn drive(mut self) -> Progress<'a, T> {
        let chain = self.chain;
        let ctx = self.ctx;
        while let Some(staged) = chain.ons.get(self.next_on) {
            let index = self.next_on;
            self.next_on = index + 1;
            match &staged.kind {
                OnKind::Sync(handler) => {
                    let mut halt = None;
                    self.current = chain.sync_ons[*handler](self.current, ctx, &mut halt);
                    if halt.is_some() {
                        if let Some(end) = chain.halted(index, &mut halt) {
                            return Progress::Ended(end);
                        }
                    } else {
                        // Kept or replaced: the compiled form does not say which.
                        self.json = None;
                    }
                }
                OnKind::JsonSync(handler) => {
                    if let Some(end) = self.json_step(index, &**handler) {
                        return Progress::Ended(end);
                    }
                }
                OnKind::Service(service) => {
                    self.next_on = index;
                    return Progress::Blocked(self, Blocking::Service(service));
                }
                OnKind::JsonService(service) => {
                    self.next_on = index;
                    return Progress::Blocked(self, Blocking::JsonService(service));
                }
            }
        }

        while let Some(staged) = chain.taps.get(self.next_tap) {
            let index = self.next_tap;
            self.next_tap = index + 1;
            let outcome = match &staged.kind {
                TapKind::Sync(tap) => chain.sync_taps[*tap](&self.current, ctx),
                TapKind::JsonSync(tap) => caught(|| {
                    let json = self.json_payload()?;
                    tap(json, &TagInfo::new(chain.descriptor, ctx))
                }),
                TapKind::Queued(queue) => {
                    let request = TagRequest {
                        payload: self.current.clone(),
                        ctx: ctx.clone(),
                    };
                    if let TryEnqueue::Full(request) = queue.try_enqueue(request) {
                        let parked = ParkedTap::Typed(queue.clone(), request);
                        return Progress::Blocked(self, Blocking::Parked(Box::new(parked)));
                    }
                    Ok(())
                }
                TapKind::JsonQueued(queue) => match caught(|| Ok(self.json_request()?)) {
                    Ok(request) => {
                        if let TryEnqueue::Full(request) = queue.try_enqueue(request) {
                            let parked = ParkedTap::Json(queue.clone(), request);
                            return Progress::Blocked(self, Blocking::Parked(Box::new(parked)));
                        }
                        Ok(())
                    }
                    Err(error) => Err(error),
                },
            };
            if let Err(error) = outcome {
                chain.tap_failed(index, error);
            }
        }
        Progress::Ended(Ok(EmitOutcome::Continue(self.current)))
    }

    /// A synchronous JSON `on` step: the payload's JSON form, the handler, and the reshaped
    /// payload's way back, with a panic in any of them charged to the step. `Some` ends the
    /// emit.
    fn json_step(
        &mut self,
        index: usize,
        handler: &SyncJsonOnFn,
    ) -> Option<EmitResult<T::Payload>> {
        let (descriptor, ctx) = (self.chain.descriptor, self.ctx);
        let step = catch_unwind(AssertUnwindSafe(|| {
            let flow = match self.json_payload() {
                Ok(json) => TypedOrJson::Json(handler(json, &TagInfo::new(descriptor, ctx))),
                Err(error) => TypedOrJson::Typed(Flow::Fail(error)),
            };
            self.apply(index, flow)
        }));
        step.unwrap_or_else(|panic| {
            self.fail(
                InFlight::On(index),
                FailureKind::Panicked,
                panic_message(&*panic),
            )
            .map(Err)
        })
    }

    /// Turns the rest of the emit into a boxed future. Kept out of line so that the sync
    /// path's stack frame does not carry the async state machine.
    #[cold]
    #[inline(never)]
    fn continue_async(
        self,
        blocking: Blocking<'a, T>,
        span: tracing::Span,
    ) -> BoxFuture<'a, EmitResult<T::Payload>> {
        Box::pin(self.finish(blocking).instrument(span))
    }

    /// Finishes an emit that had to await: the blocking step, then the sync loop again.
    async fn finish(mut self, mut blocking: Blocking<'a, T>) -> EmitResult<T::Payload> {
        loop {
            if let Some(end) = self.await_step(blocking).await {
                return end;
            }
            match self.drive() {
                Progress::Ended(result) => return result,
                Progress::Blocked(run, next) => {
                    self = run;
                    blocking = next;
                }
            }
        }
    }

    /// Awaits one blocking step; `Some` ends the emit.
    async fn await_step(&mut self, blocking: Blocking<'a, T>) -> Option<EmitResult<T::Payload>> {
        let index = self.next_on;
        let flow = match blocking {
            Blocking::Parked(parked) => {
                match *parked {
                    ParkedTap::Typed(queue, request) => queue.enqueue_waiting(request).await,
                    ParkedTap::Json(queue, request) => queue.enqueue_waiting(request).await,
                }
                return None;
            }
            Blocking::Service(service) => {
                self.next_on = index + 1;
                let request = TagRequest {
                    payload: self.current.clone(),
                    ctx: self.ctx.clone(),
                };
                call_guarded(service.clone(), request)
                    .await
                    .map(TypedOrJson::Typed)
            }
            Blocking::JsonService(service) => {
                self.next_on = index + 1;
                match self.json_request() {
                    Ok(request) => call_guarded(service.clone(), request)
                        .await
                        .map(TypedOrJson::Json),
                    Err(error) => Err((FailureKind::Failed, error)),
                }
            }
        };
        match flow {
            Ok(flow) => self.apply(index, flow),
            Err((kind, error)) => self.fail(InFlight::On(index), kind, error).map(Err),
        }
    }

    /// Applies one handler's decision. `Some` ends the emit.
    #[cold]
    fn apply(
        &mut self,
        index: usize,
        flow: TypedOrJson<T::Payload>,
    ) -> Option<EmitResult<T::Payload>> {
        let descriptor = self.chain.descriptor;
        let (kind, error) = match flow {
            TypedOrJson::Typed(flow) => match classify(descriptor, flow) {
                Step::Replace(payload) => {
                    self.current = T::constrain(&self.current, payload);
                    self.json = None;
                    return None;
                }
                Step::Keep => return None,
                Step::Suppress => return Some(self.suppressed_by(index)),
                Step::Failure(kind, error) => (kind, error),
            },
            TypedOrJson::Json(flow) => match classify(descriptor, flow) {
                Step::Replace(json) => match self.accept_json(json) {
                    Ok(()) => return None,
                    Err(failure) => failure,
                },
                Step::Keep => return None,
                Step::Suppress => return Some(self.suppressed_by(index)),
                Step::Failure(kind, error) => (kind, error),
            },
        };
        self.fail(InFlight::On(index), kind, error).map(Err)
    }

    fn suppressed_by(&self, index: usize) -> EmitResult<T::Payload> {
        Ok(EmitOutcome::Suppressed {
            by: self.chain.ons[index].id.clone(),
        })
    }

    /// Validates a reshaped JSON payload against the tag's schema and converts it back.
    fn accept_json(&mut self, json: Value) -> Result<(), (FailureKind, TagError)> {
        if let Some(validator) = &self.chain.validator {
            let problems: Vec<String> = validator
                .iter_errors(&json)
                .take(3)
                .map(|error| format!("{error} at `{}`", error.instance_path()))
                .collect();
            if !problems.is_empty() {
                return Err((
                    FailureKind::InvalidPayload,
                    TagError::msg(format!(
                        "the payload does not match the schema of `{}`: {}",
                        self.chain.descriptor.name(),
                        problems.join("; ")
                    )),
                ));
            }
        }
        let payload = T::Payload::deserialize(&json).map_err(|error| {
            (
                FailureKind::InvalidPayload,
                TagError::msg(format!(
                    "the payload does not convert to `{}`: {error}",
                    self.chain.descriptor.payload_type()
                )),
            )
        })?;
        self.current = T::constrain(&self.current, payload);
        // The invariant may have changed the payload, so its JSON form is recomputed lazily.
        self.json = None;
        Ok(())
    }

    fn json_payload(&mut self) -> Result<&Value, TagError> {
        if self.json.is_none() {
            let json = serde_json::to_value(&self.current).map_err(|error| {
                TagError::msg(format!("the payload does not serialize to JSON: {error}"))
            })?;
            self.json = Some(json);
        }
        self.json
            .as_ref()
            .ok_or_else(|| TagError::msg("the payload has no JSON form"))
    }

    fn json_request(&mut self) -> Result<JsonRequest, TagError> {
        let ctx = serde_json::to_value(self.ctx).map_err(|error| {
            TagError::msg(format!("the context does not serialize to JSON: {error}"))
        })?;
        Ok(JsonRequest {
            tag: self.chain.descriptor,
            payload: self.json_payload()?.clone(),
            ctx,
        })
    }

    /// Reports a failure of the step; returns the emit error if its policy is `FailClosed`.
    fn fail(&self, step: InFlight, kind: FailureKind, error: TagError) -> Option<super::EmitError> {
        self.chain.fail(step, kind, error)
    }
}

/// One handler's flow, checked against what the tag allows.
pub(crate) enum Step<P> {
    Replace(P),
    Keep,
    Suppress,
    Failure(FailureKind, TagError),
}

/// Checks a flow against the tag: suppressing a tag that is not suppressible is a failure.
pub(crate) fn classify<P>(descriptor: &TagDescriptor, flow: Flow<P>) -> Step<P> {
    match flow {
        Flow::Continue(payload) => Step::Replace(payload),
        Flow::Keep => Step::Keep,
        Flow::Suppress if descriptor.suppressible() => Step::Suppress,
        Flow::Suppress => Step::Failure(
            FailureKind::NotSuppressible,
            TagError::msg(format!(
                "`{}` is not suppressible; return the payload or fail instead",
                descriptor.name()
            )),
        ),
        Flow::Fail(error) if error.is_panic() => Step::Failure(FailureKind::Panicked, error),
        Flow::Fail(error) => Step::Failure(FailureKind::Failed, error),
    }
}

enum TypedOrJson<P> {
    Typed(Flow<P>),
    Json(Flow<Value>),
}

/// Calls a service with its readiness, catching panics in `poll_ready`, `call` and the future.
pub(crate) async fn call_guarded<R, O>(
    mut service: BoxCloneSyncService<R, O, BoxError>,
    request: R,
) -> Result<O, (FailureKind, TagError)> {
    let call = AssertUnwindSafe(async move { service.ready().await?.call(request).await });
    match call.catch_unwind().await {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(error)) => Err((FailureKind::Failed, TagError::from_boxed(error))),
        Err(panic) => Err((FailureKind::Panicked, panic_message(&*panic))),
    }
}
