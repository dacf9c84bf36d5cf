//! Modes, models and application state.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Harness, HarnessError, HarnessInner};
use crate::event::{HarnessEvent, ModelScope};
use crate::model::{AvailableModel, ModelId};
use crate::protocol::ErrorCode;
use crate::store::metadata;
use harness_tags::util::lock;

impl Harness {
    /// Switches mode: aborts the run, remembers the outgoing mode's model in the thread,
    /// restores the incoming mode's saved model (or its default), and emits `mode_changed`
    /// then `model_changed`.
    pub async fn switch_mode(&self, mode_id: &str) -> Result<(), HarnessError> {
        if self.inner.mode(mode_id).is_none() {
            return Err(self.inner.unknown_mode(mode_id));
        }
        self.abort();
        self.inner.wait_idle().await;
        self.inner.apply_mode(mode_id).await
    }

    /// Uses another model in the active mode (remembered in the thread for this mode).
    pub async fn switch_model(&self, model_id: &str) -> Result<(), HarnessError> {
        let model = ModelId::new(model_id)?;
        let mode = self.session().mode_id();
        self.inner
            .update_metadata(|meta| {
                meta.insert(
                    format!("{}{mode}", metadata::MODE_MODEL_PREFIX),
                    Value::String(model.to_string()),
                );
            })
            .await?;
        *lock(&self.session().model_id) = Some(model.clone());
        self.inner.emit(HarnessEvent::ModelChanged {
            model_id: model.to_string(),
            scope: ModelScope::Mode,
            mode_id: Some(mode),
        });
        Ok(())
    }

    /// Checks that `model_id` can run here: well formed, and built by the harness's resolver
    /// (its provider known, its key present). [`switch_model`](Self::switch_model) does not
    /// check, so that a thread can name a model this process cannot build yet.
    pub fn check_model(&self, model_id: &str) -> Result<(), HarnessError> {
        let model = ModelId::new(model_id)?;
        self.inner.resolve_model(&model)?;
        Ok(())
    }

    /// The catalog's models with their authentication status (cached 10 s).
    pub fn list_available_models(&self) -> Arc<[AvailableModel]> {
        self.inner.catalog.list_available_models()
    }

    /// Merges `patch` into the application state, validating the result against the state
    /// schema; emits `state_changed` with the keys that changed.
    pub fn set_state(&self, patch: Map<String, Value>) -> Result<Value, HarnessError> {
        let mut state = lock(&self.session().state);
        let mut object = state.as_object().cloned().unwrap_or_default();
        let mut changed = Vec::new();
        for (key, value) in patch {
            if object.get(&key) != Some(&value) {
                changed.push(key.clone());
                object.insert(key, value);
            }
        }
        let next = Value::Object(object);
        if let Some(validator) = &self.inner.state_validator {
            let problems: Vec<String> = validator
                .iter_errors(&next)
                .take(3)
                .map(|e| e.to_string())
                .collect();
            if !problems.is_empty() {
                return Err(HarnessError::InvalidState(problems.join("; ")));
            }
        }
        *state = Arc::new(next.clone());
        drop(state);
        if !changed.is_empty() {
            self.inner.emit(HarnessEvent::StateChanged {
                state: next.clone(),
                changed_keys: changed,
            });
        }
        Ok(next)
    }
}

impl HarnessInner {
    /// Applies a mode switch (the run must be at rest).
    pub(crate) async fn apply_mode(&self, mode_id: &str) -> Result<(), HarnessError> {
        let previous = self.session.mode_id();
        if previous == mode_id {
            return Ok(());
        }
        let outgoing_model = self.session.model_id();
        let thread_meta = self.session.thread().map(|t| t.metadata);
        let incoming_model = self.initial_model(mode_id, thread_meta.as_ref());
        let new_mode = mode_id.to_owned();
        self.update_metadata(|meta| {
            if let Some(model) = &outgoing_model {
                meta.insert(
                    format!("{}{previous}", metadata::MODE_MODEL_PREFIX),
                    Value::String(model.to_string()),
                );
            }
            meta.insert(metadata::CURRENT_MODE.into(), Value::String(new_mode));
        })
        .await?;
        *lock(&self.session.mode_id) = mode_id.to_owned();
        *lock(&self.session.model_id) = incoming_model.clone();
        self.emit(HarnessEvent::ModeChanged {
            mode_id: mode_id.to_owned(),
            previous_mode_id: Some(previous),
        });
        if let Some(model) = incoming_model {
            self.emit(HarnessEvent::ModelChanged {
                model_id: model.to_string(),
                scope: ModelScope::Mode,
                mode_id: Some(mode_id.to_owned()),
            });
        }
        Ok(())
    }

    /// `submit_plan` was approved: the mode switch happens once the run is at rest.
    pub(crate) fn plan_approved(&self) {
        *lock(&self.session.plan_approved) = true;
    }

    /// Applies an approved plan's mode switch: the mode's `transitions_to`, else the default.
    pub(crate) async fn apply_plan_switch(&self) {
        if !std::mem::take(&mut *lock(&self.session.plan_approved)) {
            return;
        }
        let current = self.session.mode_id();
        let target = self
            .mode(&current)
            .and_then(|m| m.transitions_to.clone())
            .unwrap_or_else(|| self.default_mode.clone());
        if let Err(error) = self.apply_mode(&target).await {
            self.emit(HarnessEvent::Error {
                error: format!(
                    "could not switch to `{target}` after the plan was approved: {error}"
                ),
                error_type: Some(ErrorCode::ModeSwitch.into()),
                retryable: Some(true),
                retry_delay_ms: None,
            });
        }
    }
}
