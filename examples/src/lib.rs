//! Shared helpers for the runnable examples in this folder (`cargo run -p harness-examples
//! --example NAME`).

use std::sync::Arc;

use harness_core::model::{Model, ModelError, ModelId, ScriptedModel};

/// A model resolver over a few scripted models: each mode or subagent names one by its id.
pub fn scripted_models(
    models: &[Arc<ScriptedModel>],
) -> impl Fn(&ModelId) -> Result<Arc<dyn Model>, ModelError> + Send + Sync + 'static {
    let models = models.to_vec();
    move |id: &ModelId| {
        models
            .iter()
            .find(|m| m.id() == id)
            .map(|m| Arc::clone(m) as Arc<dyn Model>)
            .ok_or_else(|| ModelError::UnknownModel(id.to_string()))
    }
}
