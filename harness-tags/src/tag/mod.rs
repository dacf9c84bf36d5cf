//! The [`Tag`] trait, [`Phase`], [`TagDescriptor`] and the catalog of every tag linked into the
//! binary.
//!
//! Tags are declared with `#[derive(Tag)]`; each declaration registers a descriptor in a
//! link-time distributed slice, so [`catalog()`] also lists tags declared by third-party crates.

mod render;

use std::any::Any;
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::phase::Phase;
pub use render::{render_json, render_markdown};

/// A typed interception point of the harness.
///
/// A tag is a zero-sized marker type declared with `#[derive(Tag)]`. Its payload is what `on`
/// handlers may reshape; its context is read-only information about where it was emitted.
///
/// ```
/// use harness_tags::{BaseCtx, Tag};
///
/// /// Emitted when an invoice is sent; the payload is the invoice text the customer receives.
/// #[derive(Tag)]
/// #[tag(name = "acme.invoice-sent", phase = Act, payload = String, ctx = BaseCtx, suppressible)]
/// pub struct InvoiceSent;
///
/// assert_eq!(InvoiceSent::NAME, "acme.invoice-sent");
/// assert!(InvoiceSent::SUPPRESSIBLE);
/// assert_eq!(InvoiceSent::descriptor().description(),
///     "Emitted when an invoice is sent; the payload is the invoice text the customer receives.");
/// ```
///
/// Attribute keys: `name` (`namespace.kebab-name`, dots allowed in the namespace), `phase` (a
/// [`Phase`] variant), `payload` and `ctx` (types), the optional `suppressible` flag, which
/// says that an `on` handler may return [`Flow::Suppress`](crate::Flow::Suppress) for this tag,
/// and the optional `constrain = path`, a `fn(&Payload, Payload) -> Payload` every reshaped
/// payload passes through (see [`Tag::constrain`]).
/// The doc comment is required: it becomes the tag's description in the catalog.
pub trait Tag: Send + Sync + 'static {
    /// The tag's name, `namespace.kebab-name`.
    const NAME: &'static str;
    /// The kernel phase the tag is emitted in.
    const PHASE: Phase;
    /// Whether an `on` handler may suppress the emit (the emit site defines what that means).
    const SUPPRESSIBLE: bool;
    /// What `on` handlers reshape and `tap` handlers observe.
    type Payload: Clone + Send + Sync + Serialize + DeserializeOwned + JsonSchema + 'static;
    /// Read-only information about the emit site.
    type Ctx: crate::context::TagContext;

    /// The tag's catalog entry.
    fn descriptor() -> &'static TagDescriptor;

    /// An invariant no handler can break: the pipeline passes every payload a handler returns
    /// through it, with the payload the handler received. The default accepts anything.
    ///
    /// Declared with `#[tag(..., constrain = path::to::function)]`; `tool.gate-result` uses it
    /// so that a hard deny can never be loosened by a later handler.
    #[inline(always)]
    fn constrain(previous: &Self::Payload, next: Self::Payload) -> Self::Payload {
        let _ = previous;
        next
    }
}

/// Everything the catalog knows about one tag.
///
/// Descriptors are created by `#[derive(Tag)]` and live for the whole program.
pub struct TagDescriptor {
    name: &'static str,
    phase: Phase,
    suppressible: bool,
    description: &'static str,
    payload_type: &'static str,
    ctx_type: &'static str,
    crate_name: &'static str,
    module_path: &'static str,
    payload_schema: fn() -> serde_json::Value,
    ctx_schema: fn() -> serde_json::Value,
    new_chain: ErasedChainFactory,
    index: AtomicUsize,
    payload_schema_cache: OnceLock<serde_json::Value>,
}

const UNINDEXED: usize = usize::MAX;

/// Builds a tag's handler chain without naming the tag's type: an opaque constructor that the
/// pipeline hands in when the descriptor is made, and alone knows how to open.
pub(crate) type ErasedChainFactory = fn() -> Box<dyn Any + Send>;

impl TagDescriptor {
    pub(crate) const fn new<T: Tag>(
        description: &'static str,
        payload_type: &'static str,
        ctx_type: &'static str,
        crate_name: &'static str,
        module_path: &'static str,
        new_chain: ErasedChainFactory,
    ) -> Self {
        TagDescriptor {
            name: T::NAME,
            phase: T::PHASE,
            suppressible: T::SUPPRESSIBLE,
            description,
            payload_type,
            ctx_type,
            crate_name,
            module_path,
            payload_schema: schema_of::<T::Payload>,
            ctx_schema: schema_of::<T::Ctx>,
            new_chain,
            index: AtomicUsize::new(UNINDEXED),
            payload_schema_cache: OnceLock::new(),
        }
    }

    /// The tag's name, e.g. `message.tool-result`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The phase the tag is emitted in.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether an `on` handler may suppress this tag.
    pub fn suppressible(&self) -> bool {
        self.suppressible
    }

    /// The tag's doc comment.
    pub fn description(&self) -> &'static str {
        self.description
    }

    /// The payload type as written in the declaration.
    pub fn payload_type(&self) -> &'static str {
        self.payload_type
    }

    /// The context type as written in the declaration.
    pub fn ctx_type(&self) -> &'static str {
        self.ctx_type
    }

    /// The crate that declared the tag.
    pub fn crate_name(&self) -> &'static str {
        self.crate_name
    }

    /// The module that declared the tag.
    pub fn module_path(&self) -> &'static str {
        self.module_path
    }

    /// The JSON Schema of the payload (generated once, then cached).
    pub fn payload_schema(&self) -> &serde_json::Value {
        self.payload_schema_cache
            .get_or_init(|| (self.payload_schema)())
    }

    /// The JSON Schema of the context.
    pub fn ctx_schema(&self) -> serde_json::Value {
        (self.ctx_schema)()
    }

    pub(crate) fn chain_factory(&self) -> ErasedChainFactory {
        self.new_chain
    }

    /// The position of this descriptor in [`catalog()`]; stable for the life of the program.
    /// Inlined: every emit looks its chain up by it.
    #[inline]
    pub(crate) fn index(&'static self) -> usize {
        let cached = self.index.load(Ordering::Relaxed);
        if cached != UNINDEXED {
            return cached;
        }
        self.find_index()
    }

    /// The first lookup of a descriptor's position, remembered for the next ones.
    #[cold]
    fn find_index(&'static self) -> usize {
        // Every descriptor reachable through `Tag::descriptor` is in the distributed slice, so
        // the search always finds it; `catalog().len()` is a harmless sentinel otherwise.
        let position = catalog()
            .iter()
            .position(|d| std::ptr::eq(*d, self))
            .unwrap_or(catalog().len());
        self.index.store(position, Ordering::Relaxed);
        position
    }
}

impl fmt::Debug for TagDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TagDescriptor")
            .field("name", &self.name)
            .field("phase", &self.phase)
            .field("suppressible", &self.suppressible)
            .field("payload", &self.payload_type)
            .field("ctx", &self.ctx_type)
            .field("crate", &self.crate_name)
            .finish()
    }
}

fn schema_of<T: JsonSchema>() -> serde_json::Value {
    serde_json::Value::from(schemars::schema_for!(T))
}

/// One entry of the distributed slice: a function returning the tag's descriptor.
pub type CatalogEntry = fn() -> &'static TagDescriptor;

/// Every tag declared with `#[derive(Tag)]` in any linked crate, unsorted; read it through
/// [`catalog()`].
#[allow(unsafe_code)] // the link-time slice is how third-party tags join the catalog
#[linkme::distributed_slice]
pub static TAGS: [CatalogEntry];

/// Every tag linked into this binary, sorted by name (then by declaring crate).
///
/// Tags declared by third-party crates with `#[derive(Tag)]` are included as long as the crate
/// is linked. Duplicate names are listed too; [`duplicate_names`] reports them and building a
/// [`Pipeline`](crate::Pipeline) refuses them.
///
/// ```
/// let catalog = harness_tags::catalog();
/// assert!(catalog.iter().any(|d| d.name() == "prompt.system"));
/// assert!(catalog.windows(2).all(|w| w[0].name() <= w[1].name()));
/// ```
pub fn catalog() -> &'static [&'static TagDescriptor] {
    static SORTED: OnceLock<Vec<&'static TagDescriptor>> = OnceLock::new();
    SORTED.get_or_init(|| {
        let mut all: Vec<&'static TagDescriptor> = TAGS.iter().map(|entry| entry()).collect();
        all.sort_by(|a, b| {
            (a.name, a.crate_name, a.module_path).cmp(&(b.name, b.crate_name, b.module_path))
        });
        all
    })
}

/// Finds a tag by name.
///
/// ```
/// let tag = harness_tags::lookup("message.tool-result").unwrap();
/// assert_eq!(tag.phase(), harness_tags::Phase::Act);
/// assert!(harness_tags::lookup("no.such-tag").is_none());
/// ```
pub fn lookup(name: &str) -> Option<&'static TagDescriptor> {
    let all = catalog();
    let at = all.partition_point(|d| d.name < name);
    all.get(at).copied().filter(|d| d.name == name)
}

/// Names declared more than once in this binary, with the crates that declared them.
pub fn duplicate_names() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut duplicates = Vec::new();
    for group in catalog().chunk_by(|a, b| a.name == b.name) {
        if group.len() > 1 {
            duplicates.push((group[0].name, group.iter().map(|d| d.crate_name).collect()));
        }
    }
    duplicates
}
