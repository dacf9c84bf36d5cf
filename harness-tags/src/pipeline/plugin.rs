//! [`Plugin`]: a named bundle of compose blocks with start and stop hooks and settings, so
//! adding one is a single `builder.plugin(MyPlugin::default())`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::Pipeline;
use crate::compose::Compose;
use crate::flow::BoxError;

/// A named bundle of compose blocks with optional start and stop hooks and settings.
///
/// ```
/// use harness_tags::{Compose, Pipeline, Plugin, tags::PromptSystem};
///
/// struct Signature;
///
/// impl Plugin for Signature {
///     fn name(&self) -> &str {
///         "signature"
///     }
///
///     fn compose(&self, c: Compose) -> Compose {
///         c.on(PromptSystem, |text: &String, _ctx| format!("{text}\nSign every answer."))
///     }
/// }
///
/// let pipeline = Pipeline::builder().plugin(Signature).build().unwrap();
/// assert_eq!(pipeline.plugins().next().unwrap().name(), "signature");
/// ```
#[async_trait]
pub trait Plugin: Send + Sync + 'static {
    /// The plugin's name; handler failures are reported under it.
    fn name(&self) -> &str;

    /// The plugin's registrations.
    fn compose(&self, c: Compose) -> Compose;

    /// The plugin's settings as JSON, for diagnostics and UIs.
    fn settings(&self) -> Value {
        Value::Null
    }

    /// Called by [`Pipeline::start`] before the pipeline is used.
    async fn start(&self, pipeline: &Pipeline) -> Result<(), BoxError> {
        let _ = pipeline;
        Ok(())
    }

    /// Called by [`Pipeline::shutdown`].
    async fn stop(&self, pipeline: &Pipeline) -> Result<(), BoxError> {
        let _ = pipeline;
        Ok(())
    }
}

/// Anything the builders accept as a plugin: a plugin, or one already behind an [`Arc`].
pub trait IntoPlugin {
    /// The plugin, shared.
    fn into_plugin(self) -> Arc<dyn Plugin>;
}

impl<P: Plugin> IntoPlugin for P {
    fn into_plugin(self) -> Arc<dyn Plugin> {
        Arc::new(self)
    }
}

impl<P: Plugin> IntoPlugin for Arc<P> {
    fn into_plugin(self) -> Arc<dyn Plugin> {
        self
    }
}

impl IntoPlugin for Arc<dyn Plugin> {
    fn into_plugin(self) -> Arc<dyn Plugin> {
        self
    }
}
