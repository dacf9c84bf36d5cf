//! The compiled [`Pipeline`]: every registration of every tag, compiled once at
//! [`PipelineBuilder::build`] into one flat chain per tag, then immutable.
//!
//! ```
//! use harness_tags::{BaseCtx, EmitOutcome, Pipeline, tags::PromptSystem};
//!
//! # tokio_test_block_on(async {
//! let pipeline = Pipeline::builder()
//!     .compose(|c| {
//!         c.on(PromptSystem, |text: &String, ctx: &BaseCtx| format!("[tenant: {}]\n{text}", ctx.strategy))
//!             .tap(PromptSystem, |text: &String, _ctx: &BaseCtx| assert!(text.starts_with("[tenant")))
//!     })
//!     .build()
//!     .unwrap();
//!
//! let ctx = BaseCtx { strategy: "acme".into(), ..BaseCtx::default() };
//! let outcome = pipeline.emit::<PromptSystem>("You are helpful.".to_owned(), &ctx).await.unwrap();
//! assert_eq!(outcome, EmitOutcome::Continue("[tenant: acme]\nYou are helpful.".to_owned()));
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
//! # }
//! ```

mod chain;
mod emit;
mod failure;
mod plugin;
mod queue;
mod service;

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

pub use crate::handler::{TapOverflow, TapQueueConfig};
pub(crate) use chain::{ChainBuilder, Step, call_guarded, chain_factory, classify};
pub use emit::Emit;
pub(crate) use failure::report;
pub use failure::{EmitError, ErrorSink, FailureKind, HandlerFailure};
pub use queue::TapStats;
pub use service::TagService;

use crate::compose::Compose;
use crate::flow::BoxError;
use crate::handler::{Body, HandlerId, JsonTapSpec, Registration};
use crate::pattern::PatternError;
use crate::tag::{Tag, catalog, duplicate_names};
use chain::{Entry, OnBody, TapBody};
pub use plugin::{IntoPlugin, Plugin};
use queue::{AnyQueue, TapQueue};

/// What an emit resolves to: the outcome, or the error of a `FailClosed` handler.
pub type EmitResult<P> = Result<EmitOutcome<P>, EmitError>;

/// What an emit produced.
#[derive(Clone, Debug, PartialEq)]
pub enum EmitOutcome<P> {
    /// Every handler ran; this is the payload the emit site uses.
    Continue(P),
    /// A handler suppressed the tag (only suppressible tags); the emit site defines what that
    /// means. Taps do not run for a suppressed emit.
    Suppressed {
        /// The handler that suppressed it.
        by: HandlerId,
    },
}

impl<P> EmitOutcome<P> {
    /// The payload, unless the emit was suppressed.
    pub fn into_payload(self) -> Option<P> {
        match self {
            EmitOutcome::Continue(payload) => Some(payload),
            EmitOutcome::Suppressed { .. } => None,
        }
    }

    /// True if a handler suppressed the emit.
    pub fn is_suppressed(&self) -> bool {
        matches!(self, EmitOutcome::Suppressed { .. })
    }
}

/// Why a pipeline could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A JSON handler's pattern string is not a valid pattern.
    #[error("handler `{handler}`: {source}")]
    InvalidPattern {
        /// The handler.
        handler: HandlerId,
        /// What is wrong with the pattern.
        #[source]
        source: PatternError,
    },
    /// Two linked crates declare a tag with the same name.
    #[error(
        "tag `{name}` is declared more than once (by crates {crates:?}); tag names must be \
         unique, so rename one of them"
    )]
    DuplicateTag {
        /// The name.
        name: &'static str,
        /// The declaring crates.
        crates: Vec<&'static str>,
    },
    /// A tag's payload schema could not be compiled for validation.
    #[error("the payload schema of `{tag}` does not compile: {message}")]
    Schema {
        /// The tag.
        tag: &'static str,
        /// The compiler's message.
        message: String,
    },
    /// A registration's handler does not fit its tag (a tag type implemented by hand).
    #[error("a handler registered for `{tag}` does not match the tag's payload and context types")]
    TagMismatch {
        /// The tag.
        tag: &'static str,
    },
    /// A tag is not in the catalog (its `Tag` impl was written by hand instead of derived).
    #[error("tag `{tag}` is not in the catalog; declare tags with #[derive(Tag)]")]
    NotInCatalog {
        /// The tag.
        tag: &'static str,
    },
}

/// A plugin's start or stop hook failed.
#[derive(Debug, thiserror::Error)]
#[error("plugin `{plugin}` failed to {stage}: {source}")]
pub struct PluginError {
    /// The plugin's name.
    pub plugin: String,
    /// `start` or `stop`.
    pub stage: &'static str,
    /// The hook's error.
    #[source]
    pub source: BoxError,
}

/// Collects compose blocks and plugins, then compiles them into a [`Pipeline`].
pub struct PipelineBuilder {
    registrations: Vec<(Option<Arc<str>>, Registration)>,
    plugins: Vec<Arc<dyn Plugin>>,
    sink: Option<Arc<dyn ErrorSink>>,
    tap_queue: TapQueueConfig,
    extensions: Extensions,
}

/// Values the host of a pipeline hands to its plugins, one per type (see
/// [`PipelineBuilder::extension`]).
#[derive(Default)]
struct Extensions(Vec<(TypeId, Box<dyn Any + Send + Sync>)>);

impl Extensions {
    fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        self.0.retain(|(existing, _)| *existing != id);
        self.0.push((id, Box::new(value)));
    }

    fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.0
            .iter()
            .find(|(id, _)| *id == TypeId::of::<T>())
            .and_then(|(_, value)| value.downcast_ref())
    }
}

impl fmt::Debug for PipelineBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipelineBuilder")
            .field("registrations", &self.registrations.len())
            .field("plugins", &self.plugins.len())
            .finish()
    }
}

impl PipelineBuilder {
    /// Adds the registrations of a compose block.
    pub fn compose(mut self, block: impl FnOnce(Compose) -> Compose) -> Self {
        let composed = block(Compose::new());
        self.registrations
            .extend(composed.into_registrations().map(|r| (None, r)));
        self
    }

    /// Adds a plugin: its compose blocks now, its start and stop hooks with
    /// [`Pipeline::start`] and [`Pipeline::shutdown`].
    pub fn plugin(mut self, plugin: impl IntoPlugin) -> Self {
        self.add_plugin(plugin.into_plugin());
        self
    }

    fn add_plugin(&mut self, plugin: Arc<dyn Plugin>) {
        let origin: Arc<str> = Arc::from(plugin.name());
        let composed = plugin.compose(Compose::new());
        self.registrations.extend(
            composed
                .into_registrations()
                .map(|r| (Some(Arc::clone(&origin)), r)),
        );
        self.plugins.push(plugin);
    }

    /// Sets the sink every handler failure is reported to (besides `tracing::warn!`).
    pub fn error_sink(mut self, sink: impl ErrorSink) -> Self {
        self.sink = Some(Arc::new(sink));
        self
    }

    /// Sets the queue configuration of asynchronous taps that do not set their own.
    pub fn tap_queue(mut self, config: TapQueueConfig) -> Self {
        self.tap_queue = config;
        self
    }

    /// Hands a value to the plugins: they read it with [`Pipeline::extension`], typically in
    /// [`Plugin::start`]. A host (the harness runtime) offers its services this way, so that
    /// plugins reach storage or models through a public type rather than through globals. One
    /// value per type; a second replaces the first.
    ///
    /// ```
    /// use harness_tags::Pipeline;
    ///
    /// struct Workspace(&'static str);
    /// let pipeline = Pipeline::builder().extension(Workspace("/srv/app")).build().unwrap();
    /// assert_eq!(pipeline.extension::<Workspace>().map(|w| w.0), Some("/srv/app"));
    /// assert!(pipeline.extension::<String>().is_none());
    /// ```
    pub fn extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Compiles every registration into one chain per tag.
    pub fn build(self) -> Result<Pipeline, BuildError> {
        if let Some((name, crates)) = duplicate_names().into_iter().next() {
            return Err(BuildError::DuplicateTag { name, crates });
        }
        let tags = catalog();
        let mut builders: Vec<Option<Box<dyn ChainBuilder>>> =
            (0..tags.len()).map(|_| None).collect();
        let mut queues: Vec<Arc<dyn AnyQueue>> = Vec::new();

        for (seq, (origin, registration)) in self.registrations.into_iter().enumerate() {
            let id = HandlerId::new(
                origin.as_deref(),
                registration.name.as_deref(),
                &registration.default_label(),
            );
            let specificity = registration.specificity();
            let entry = |id: HandlerId| Entry {
                id,
                policy: registration.policy,
                specificity,
                seq,
            };
            match registration.body {
                Body::TypedOn { descriptor, step } => {
                    let index = descriptor.index();
                    let builder = builder_at(&mut builders, index, descriptor.name())?;
                    builder.add_on(entry(id), OnBody::Typed(step));
                }
                Body::TypedTap {
                    descriptor,
                    spec,
                    queue,
                } => {
                    let index = descriptor.index();
                    let builder = builder_at(&mut builders, index, descriptor.name())?;
                    builder.add_tap(
                        entry(id),
                        TapBody::Typed(spec, queue.unwrap_or(self.tap_queue)),
                    );
                }
                Body::JsonOn { pattern, step } => {
                    let pattern = pattern.map_err(|source| BuildError::InvalidPattern {
                        handler: id.clone(),
                        source,
                    })?;
                    for (index, descriptor) in tags.iter().enumerate() {
                        if pattern.matches(descriptor) {
                            let builder = builder_at(&mut builders, index, descriptor.name())?;
                            builder.add_on(entry(id.clone()), OnBody::Json(step.clone()));
                        }
                    }
                }
                Body::JsonTap {
                    pattern,
                    spec,
                    queue,
                } => {
                    let pattern = pattern.map_err(|source| BuildError::InvalidPattern {
                        handler: id.clone(),
                        source,
                    })?;
                    let body = match spec {
                        JsonTapSpec::Sync(tap) => JsonTapBody::Sync(tap),
                        JsonTapSpec::Queued(service) => {
                            let queue = Arc::new(TapQueue::new(
                                id.clone(),
                                service,
                                queue.unwrap_or(self.tap_queue),
                                self.sink.clone(),
                            ));
                            queues.push(queue.clone());
                            JsonTapBody::Queued(queue)
                        }
                    };
                    for (index, descriptor) in tags.iter().enumerate() {
                        if pattern.matches(descriptor) {
                            let builder = builder_at(&mut builders, index, descriptor.name())?;
                            let body = match &body {
                                JsonTapBody::Sync(tap) => TapBody::JsonSync(Arc::clone(tap)),
                                JsonTapBody::Queued(queue) => {
                                    TapBody::JsonQueued(Arc::clone(queue))
                                }
                            };
                            builder.add_tap(entry(id.clone()), body);
                        }
                    }
                }
            }
        }

        let mut chains = Vec::with_capacity(builders.len());
        for builder in builders {
            chains.push(match builder {
                Some(builder) => Some(builder.build(self.sink.as_ref(), &mut queues)?),
                None => None,
            });
        }
        let chains: Vec<Option<ErasedChain>> = chains;
        Ok(Pipeline {
            inner: Arc::new(Inner {
                chains: chains.into_boxed_slice(),
                plugins: self.plugins,
                queues,
                extensions: self.extensions,
            }),
        })
    }
}

enum JsonTapBody {
    Sync(Arc<crate::handler::SyncJsonTapFn>),
    Queued(Arc<TapQueue<crate::handler::JsonRequest>>),
}

fn builder_at<'b>(
    builders: &'b mut [Option<Box<dyn ChainBuilder>>],
    index: usize,
    name: &'static str,
) -> Result<&'b mut Box<dyn ChainBuilder>, BuildError> {
    let descriptor = catalog()
        .get(index)
        .ok_or(BuildError::NotInCatalog { tag: name })?;
    let slot = builders
        .get_mut(index)
        .ok_or(BuildError::NotInCatalog { tag: name })?;
    if slot.is_none() {
        let made = (descriptor.chain_factory())();
        *slot =
            Some(chain::open_chain_builder(made).ok_or(BuildError::NotInCatalog { tag: name })?);
    }
    slot.as_mut().ok_or(BuildError::NotInCatalog { tag: name })
}

/// One tag's compiled chain with its concrete type erased.
///
/// `Box<dyn Any>::downcast_ref` asks the vtable for the type id on every call; the emit path
/// is hot enough that the id is recorded once, next to the box, and compared directly.
pub(crate) struct ErasedChain {
    type_id: TypeId,
    chain: Box<dyn Any + Send + Sync>,
}

impl ErasedChain {
    pub(crate) fn new<T: Tag>(chain: chain::Chain<T>) -> Self {
        ErasedChain {
            type_id: TypeId::of::<chain::Chain<T>>(),
            chain: Box::new(chain),
        }
    }

    #[inline]
    fn get<T: Tag>(&self) -> Option<&chain::Chain<T>> {
        if self.type_id != TypeId::of::<chain::Chain<T>>() {
            return None;
        }
        let erased: *const (dyn Any + Send + Sync) = &*self.chain;
        // SAFETY: `type_id` was taken from the concrete type of the value boxed in `chain` when
        // both were set in `new`, and neither field changes afterwards, so the box holds a
        // `Chain<T>`; the reference lives no longer than `&self`, which owns the box.
        Some(unsafe { &*erased.cast::<chain::Chain<T>>() })
    }
}

/// The compiled, immutable set of handlers of every tag. Cheap to clone (an `Arc`).
///
/// The kernel and the harness call [`Pipeline::emit`] at every tag's emit site and use the
/// reshaped payload it returns.
#[derive(Clone)]
pub struct Pipeline {
    inner: Arc<Inner>,
}

struct Inner {
    /// Indexed by catalog position; `None` for tags nobody registered for.
    chains: Box<[Option<ErasedChain>]>,
    plugins: Vec<Arc<dyn Plugin>>,
    queues: Vec<Arc<dyn AnyQueue>>,
    extensions: Extensions,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tags: Vec<&str> = catalog()
            .iter()
            .zip(self.inner.chains.iter())
            .filter(|(_, chain)| chain.is_some())
            .map(|(descriptor, _)| descriptor.name())
            .collect();
        f.debug_struct("Pipeline")
            .field("tags_with_handlers", &tags)
            .field(
                "plugins",
                &self
                    .inner
                    .plugins
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Default for Pipeline {
    /// A pipeline with no handlers: every emit returns its payload unchanged.
    fn default() -> Self {
        Pipeline {
            inner: Arc::new(Inner {
                chains: Box::new([]),
                plugins: Vec::new(),
                queues: Vec::new(),
                extensions: Extensions::default(),
            }),
        }
    }
}

impl Pipeline {
    /// Starts building a pipeline.
    pub fn builder() -> PipelineBuilder {
        PipelineBuilder {
            registrations: Vec::new(),
            plugins: Vec::new(),
            sink: None,
            tap_queue: TapQueueConfig::default(),
            extensions: Extensions::default(),
        }
    }

    /// Emits tag `T`: runs its `on` handlers in order over the payload, then its taps over the
    /// final payload, and returns what the emit site must use.
    ///
    /// Like every future, the emit does nothing until it is awaited (or [`Emit::now`] is
    /// called). Emitting a tag nobody registered for costs a table lookup. When every handler of
    /// the tag is synchronous, the first poll completes the emit and nothing is allocated.
    pub fn emit<'a, T: Tag>(&'a self, payload: T::Payload, ctx: &'a T::Ctx) -> Emit<'a, T> {
        Emit::new(self.chain::<T>(), payload, ctx)
    }

    /// True if any handler is registered for tag `T`.
    pub fn has_handlers<T: Tag>(&self) -> bool {
        self.chain::<T>().is_some()
    }

    fn chain<T: Tag>(&self) -> Option<&chain::Chain<T>> {
        self.inner
            .chains
            .get(T::descriptor().index())?
            .as_ref()?
            .get::<T>()
    }

    /// Tag `T`'s chain as a tower service whose readiness reflects its tap queues.
    pub fn service<T: Tag>(&self) -> TagService<T> {
        TagService::new(self.clone())
    }

    /// The plugins, in registration order.
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<dyn Plugin>> {
        self.inner.plugins.iter()
    }

    /// Counters of every asynchronous tap's queue.
    pub fn tap_stats(&self) -> Vec<TapStats> {
        self.inner
            .queues
            .iter()
            .map(|queue| queue.stats())
            .collect()
    }

    /// Waits until every asynchronous tap has handled what was queued so far.
    pub async fn flush_taps(&self) {
        for queue in &self.inner.queues {
            queue.flush().await;
        }
    }

    /// The value of type `T` the host handed over with [`PipelineBuilder::extension`].
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.inner.extensions.get()
    }

    /// Runs every plugin's start hook in registration order. If one fails, the plugins
    /// started before it are stopped again, in reverse order, and its error is returned.
    pub async fn start(&self) -> Result<(), PluginError> {
        for (started, plugin) in self.inner.plugins.iter().enumerate() {
            if let Err(source) = plugin.start(self).await {
                for earlier in self.inner.plugins[..started].iter().rev() {
                    if let Err(error) = earlier.stop(self).await {
                        tracing::warn!(plugin = earlier.name(), %error, "plugin failed to stop");
                    }
                }
                return Err(PluginError {
                    plugin: plugin.name().to_owned(),
                    stage: "start",
                    source,
                });
            }
        }
        Ok(())
    }

    /// Flushes the tap queues, then runs every plugin's stop hook in reverse order. Every hook
    /// runs even if an earlier one fails; the failures are returned.
    pub async fn shutdown(&self) -> Vec<PluginError> {
        self.flush_taps().await;
        let mut failures = Vec::new();
        for plugin in self.inner.plugins.iter().rev() {
            if let Err(source) = plugin.stop(self).await {
                failures.push(PluginError {
                    plugin: plugin.name().to_owned(),
                    stage: "stop",
                    source,
                });
            }
        }
        failures
    }

    pub(crate) fn readiness_probes<T: Tag>(&self) -> Vec<queue::Probe> {
        self.chain::<T>()
            .map(|chain| chain.readiness_probes())
            .unwrap_or_default()
    }
}
