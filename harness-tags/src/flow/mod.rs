//! What an `on` handler returns: [`Flow`], the [`IntoFlow`] conversions, [`TagError`], and the
//! per-registration [`FailurePolicy`].

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// A boxed error, the error type of handler services.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// The decision of one `on` handler.
#[derive(Debug)]
pub enum Flow<P> {
    /// Continue with this payload (it replaces the previous one).
    Continue(P),
    /// Continue with the payload unchanged.
    Keep,
    /// Stop the emit; the emit site decides what that means (only for suppressible tags).
    Suppress,
    /// The handler failed; its registration's [`FailurePolicy`] decides what happens.
    Fail(TagError),
}

impl<P> Flow<P> {
    /// A failure with a message.
    pub fn fail(message: impl Into<Cow<'static, str>>) -> Self {
        Flow::Fail(TagError::msg(message))
    }
}

/// Conversion of a handler's return value into a [`Flow`].
///
/// A handler may return:
/// - the payload itself (`P`): continue with it;
/// - `Option<P>`: `Some` continues with the new payload, `None` keeps the current one;
/// - a [`Flow`];
/// - a `Result` of any of these, where the error (anything convertible into a boxed error:
///   `String`, `&str`, any `std::error::Error`) becomes [`Flow::Fail`].
pub trait IntoFlow<P> {
    /// Converts into a flow.
    fn into_flow(self) -> Flow<P>;
}

impl<P> IntoFlow<P> for P {
    fn into_flow(self) -> Flow<P> {
        Flow::Continue(self)
    }
}

impl<P> IntoFlow<P> for Flow<P> {
    fn into_flow(self) -> Flow<P> {
        self
    }
}

impl<P> IntoFlow<P> for Option<P> {
    fn into_flow(self) -> Flow<P> {
        match self {
            Some(payload) => Flow::Continue(payload),
            None => Flow::Keep,
        }
    }
}

impl<P, E: Into<BoxError>> IntoFlow<P> for Result<P, E> {
    fn into_flow(self) -> Flow<P> {
        match self {
            Ok(payload) => Flow::Continue(payload),
            Err(err) => Flow::Fail(TagError::from_boxed(err.into())),
        }
    }
}

impl<P, E: Into<BoxError>> IntoFlow<P> for Result<Flow<P>, E> {
    fn into_flow(self) -> Flow<P> {
        match self {
            Ok(flow) => flow,
            Err(err) => Flow::Fail(TagError::from_boxed(err.into())),
        }
    }
}

impl<P, E: Into<BoxError>> IntoFlow<P> for Result<Option<P>, E> {
    fn into_flow(self) -> Flow<P> {
        match self {
            Ok(option) => option.into_flow(),
            Err(err) => Flow::Fail(TagError::from_boxed(err.into())),
        }
    }
}

/// Why a handler failed. Cheap to clone; keeps the source error.
///
/// One pointer wide, so that a handler's [`Flow`] over a small payload is returned in
/// registers: the hot path of every emit.
#[derive(Clone)]
pub struct TagError {
    inner: Arc<ErrorInner>,
}

struct ErrorInner {
    message: Cow<'static, str>,
    source: Option<BoxError>,
    panicked: bool,
}

impl TagError {
    /// An error with a message and no source.
    pub fn msg(message: impl Into<Cow<'static, str>>) -> Self {
        TagError {
            inner: Arc::new(ErrorInner {
                message: message.into(),
                source: None,
                panicked: false,
            }),
        }
    }

    /// Wraps any error, keeping it as the source.
    pub fn from_boxed(err: BoxError) -> Self {
        TagError {
            inner: Arc::new(ErrorInner {
                message: Cow::Owned(err.to_string()),
                source: Some(err),
                panicked: false,
            }),
        }
    }

    /// The error of a handler that panicked, from the panic's payload.
    pub fn from_panic(panic: &(dyn std::any::Any + Send)) -> Self {
        let text = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic payload".to_owned());
        TagError {
            inner: Arc::new(ErrorInner {
                message: Cow::Owned(format!("panicked: {text}")),
                source: None,
                panicked: true,
            }),
        }
    }

    /// True if the handler panicked.
    pub fn is_panic(&self) -> bool {
        self.inner.panicked
    }

    /// The error's message.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// True if the source error is of type `E` (for example `tower::timeout::error::Elapsed`).
    pub fn is<E: StdError + 'static>(&self) -> bool {
        self.inner.source.as_deref().is_some_and(|s| s.is::<E>())
    }

    /// The source error, if it is of type `E`.
    pub fn downcast_ref<E: StdError + 'static>(&self) -> Option<&E> {
        self.inner
            .source
            .as_deref()
            .and_then(|s| s.downcast_ref::<E>())
    }
}

impl fmt::Debug for TagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TagError")
            .field("message", &self.inner.message)
            .finish()
    }
}

impl fmt::Display for TagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.message)
    }
}

impl StdError for TagError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner
            .source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

/// What happens when an `on` handler fails (returns an error or [`Flow::Fail`], panics, times
/// out, returns an invalid JSON payload, or suppresses a tag that cannot be suppressed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FailurePolicy {
    /// Keep the payload from before the failing handler, report the failure to the error sink
    /// and `tracing::warn!`, and go on with the next handler. The default.
    #[default]
    FailOpen,
    /// Fail the whole emit with [`EmitError`](crate::EmitError); the emit site turns that into
    /// a failure (the kernel emits `lifecycle.failure`). Security plugins use this, so that a
    /// broken redaction never lets unredacted text through.
    FailClosed,
}

/// Runs a synchronous step (a tap, a JSON step), turning a panic into its error.
#[inline]
pub(crate) fn caught<R>(step: impl FnOnce() -> Result<R, BoxError>) -> Result<R, BoxError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(step))
        .unwrap_or_else(|panic| Err(Box::new(TagError::from_panic(&*panic))))
}
