//! The plugin and its API.

use std::sync::Arc;

use harness_core::event::{HarnessEvent, OmProgress, OmRole};
use harness_core::harness::{Harness, HarnessError, HarnessServices};
use harness_core::model::ModelId;
use harness_tags::tags::{ModelRequestTag, ThreadCloned, ThreadDeleted};
use harness_tags::{
    BoxError, Compose, ModelCtx, ModelRequest, Pipeline, Plugin, ThreadChange, ThreadCtx, on_async,
};
use serde_json::Value;

use crate::OmError;
use crate::config::{OmConfig, OmSettings, SETTINGS_KEY};
use crate::engine::{self, Clock, Engine};
use crate::record::{NAMESPACE, OmRecord};
use crate::tokens::TokenCounter;

/// Observational memory: an observer distils old messages into dated, prioritized
/// observations (ahead of time, in the background), a reflector compresses them when they pile
/// up, and the agent sees reflections, observations and only the recent raw messages.
///
/// Add it to a harness with [`HarnessBuilder::plugin`](harness_core::harness::HarnessBuilder::plugin);
/// keep a clone to change models and thresholds at runtime.
#[derive(Clone)]
pub struct ObservationalMemory {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for ObservationalMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObservationalMemory")
            .field("config", &self.engine.config)
            .finish_non_exhaustive()
    }
}

impl ObservationalMemory {
    /// The plugin with this configuration (checked).
    pub fn new(config: OmConfig) -> Result<Self, OmError> {
        config.validate()?;
        Ok(ObservationalMemory {
            engine: Arc::new(Engine::new(config, engine::system_clock())),
        })
    }

    /// Uses another clock (Unix milliseconds) for the idle trigger: tests move time by hand.
    pub fn with_clock(self, clock: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        let clock: Clock = Arc::new(clock);
        ObservationalMemory {
            engine: Arc::new(Engine::new(self.engine.config.clone(), clock)),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OmConfig {
        &self.engine.config
    }

    fn harness(&self) -> Result<Harness, OmError> {
        self.engine.harness().ok_or(OmError::NotAttached)
    }

    fn bound_thread(harness: &Harness) -> Result<String, OmError> {
        harness.session().thread_id().ok_or(OmError::NoThread)
    }

    /// The bound thread's settings (what the thread overrides; the rest is the config's).
    pub async fn settings(&self) -> Result<OmSettings, OmError> {
        let harness = self.harness()?;
        let thread_id = Self::bound_thread(&harness)?;
        self.engine
            .with_state(&harness, &thread_id, |state| state.settings.clone())
            .await
            .map_err(OmError::State)
    }

    /// The model a role uses in the bound thread (`None`: the run's model).
    pub async fn model_id(&self, role: OmRole) -> Result<Option<String>, OmError> {
        let harness = self.harness()?;
        let thread_id = Self::bound_thread(&harness)?;
        self.engine
            .with_state(&harness, &thread_id, |state| {
                let effective = self.engine.effective(&state.settings);
                match role {
                    OmRole::Observer => effective.observer_model,
                    OmRole::Reflector => effective.reflector_model,
                }
            })
            .await
            .map_err(OmError::State)
    }

    /// Changes a role's model for the bound thread; saved with the thread, announced with
    /// `om_model_changed`.
    pub async fn switch_model(&self, role: OmRole, model_id: &str) -> Result<(), OmError> {
        ModelId::new(model_id).map_err(|error| OmError::InvalidModel {
            model: model_id.to_owned(),
            why: error.to_string(),
        })?;
        self.change_settings(|settings| match role {
            OmRole::Observer => settings.observer_model = Some(model_id.to_owned()),
            OmRole::Reflector => settings.reflector_model = Some(model_id.to_owned()),
        })
        .await?;
        self.harness()?.emit(HarnessEvent::OmModelChanged {
            role,
            model_id: model_id.to_owned(),
        });
        Ok(())
    }

    /// Changes the bound thread's thresholds (`None` leaves one as it is); saved with the
    /// thread.
    pub async fn set_thresholds(
        &self,
        observation: Option<u64>,
        reflection: Option<u64>,
    ) -> Result<(), OmError> {
        if observation == Some(0) || reflection == Some(0) {
            return Err(OmError::Config("thresholds must be above 0".into()));
        }
        self.change_settings(|settings| {
            if observation.is_some() {
                settings.observation_threshold = observation;
            }
            if reflection.is_some() {
                settings.reflection_threshold = reflection;
            }
        })
        .await
    }

    async fn change_settings(&self, change: impl FnOnce(&mut OmSettings)) -> Result<(), OmError> {
        let harness = self.harness()?;
        let thread_id = Self::bound_thread(&harness)?;
        let settings = self
            .engine
            .with_state(&harness, &thread_id, |state| {
                change(&mut state.settings);
                state.settings.clone()
            })
            .await
            .map_err(OmError::State)?;
        let saved = serde_json::to_value(&settings).map_err(|e| OmError::State(e.to_string()))?;
        harness
            .update_thread_metadata(&thread_id, |metadata| {
                metadata.insert(SETTINGS_KEY.to_owned(), saved);
            })
            .await?;
        Ok(())
    }

    /// Loads the bound thread's memory and emits `om_status` with its progress (for a user
    /// interface opening the thread).
    pub async fn load_progress(&self) -> Result<OmProgress, OmError> {
        let harness = self.harness()?;
        let thread_id = Self::bound_thread(&harness)?;
        let messages = harness
            .store()
            .messages(&thread_id)
            .await
            .map_err(HarnessError::from)?;
        let progress = self
            .engine
            .with_state(&harness, &thread_id, |state| {
                let effective = self.engine.effective(&state.settings);
                engine::progress(state, &effective, state.pending_of(&messages))
            })
            .await
            .map_err(OmError::State)?;
        harness.emit(HarnessEvent::OmStatus {
            progress: progress.clone(),
        });
        Ok(progress)
    }

    /// The bound thread's memory record (`None` before anything was observed).
    pub async fn record(&self) -> Result<Option<OmRecord>, OmError> {
        let harness = self.harness()?;
        let thread_id = Self::bound_thread(&harness)?;
        let record = self
            .engine
            .with_state(&harness, &thread_id, |state| state.record.clone())
            .await
            .map_err(OmError::State)?;
        Ok((record != OmRecord::default()).then_some(record))
    }
}

/// Copies a cloned thread's memory with its message ids renamed.
async fn copy_memory(engine: Arc<Engine>, change: ThreadChange) -> Result<(), BoxError> {
    let (Some(source), Some(harness)) = (change.source_thread_id.as_deref(), engine.harness())
    else {
        return Ok(());
    };
    let record = engine
        .with_state(&harness, source, |state| state.record.clone())
        .await?;
    if record == OmRecord::default() {
        return Ok(());
    }
    let Some(copy) = record.remapped(&change.message_id_map) else {
        tracing::info!(thread = %change.thread_id, "the copy lacks observed messages; it starts without memory");
        return Ok(());
    };
    engine::save(&harness, &change.thread_id, &copy).await?;
    engine.forget(&change.thread_id);
    Ok(())
}

#[async_trait::async_trait]
impl Plugin for ObservationalMemory {
    fn name(&self) -> &str {
        NAMESPACE
    }

    fn compose(&self, c: Compose) -> Compose {
        let prepare = Arc::clone(&self.engine);
        let copy = Arc::clone(&self.engine);
        let forget = Arc::clone(&self.engine);
        c.register(
            on_async(
                ModelRequestTag,
                move |request: ModelRequest, ctx: ModelCtx| {
                    let engine = Arc::clone(&prepare);
                    async move { engine.prepare(request, &ctx).await }
                },
            )
            .named("observational memory")
            // A run must not go on with a memory that failed: it fails with `om-failure`.
            .fail_closed(),
        )
        .register(
            on_async(ThreadCloned, move |change: ThreadChange, _: ThreadCtx| {
                let engine = Arc::clone(&copy);
                async move {
                    copy_memory(engine, change.clone()).await?;
                    Ok::<_, BoxError>(change)
                }
            })
            .named("copy memory"),
        )
        .tap(
            ThreadDeleted,
            move |change: &ThreadChange, _: &ThreadCtx| forget.forget(&change.thread_id),
        )
    }

    fn settings(&self) -> Value {
        serde_json::to_value(&self.engine.config).unwrap_or(Value::Null)
    }

    async fn start(&self, pipeline: &Pipeline) -> Result<(), BoxError> {
        match pipeline.extension::<HarnessServices>() {
            Some(services) => {
                let _ = self.engine.services.set(services.clone());
            }
            None => {
                tracing::warn!("observational memory needs a harness; outside one it does nothing")
            }
        }
        TokenCounter::global().preload();
        Ok(())
    }
}
