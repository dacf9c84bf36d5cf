//! What a harness offers its plugins.

use std::sync::{Arc, OnceLock, Weak};

use serde_json::{Map, Value};

use super::{Harness, HarnessError, HarnessInner};

/// A harness's handle for its plugins: a plugin finds it with
/// `pipeline.extension::<HarnessServices>()` (in [`Plugin::start`](harness_tags::Plugin::start))
/// and reaches the store, models, events and thread metadata through [`Harness`]'s public
/// methods. The handle does not keep the harness alive; [`HarnessServices::harness`] is `None`
/// once it is gone.
///
/// ```
/// use harness_core::harness::{Harness, HarnessServices, Mode};
///
/// let harness = Harness::builder("a").mode(Mode::new("build")).build().unwrap();
/// let services = harness.pipeline().extension::<HarnessServices>().unwrap();
/// assert_eq!(services.harness().unwrap().id(), "a");
/// ```
#[derive(Clone, Default)]
pub struct HarnessServices {
    harness: Arc<OnceLock<Weak<HarnessInner>>>,
}

impl std::fmt::Debug for HarnessServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessServices")
            .field("attached", &self.harness().is_some())
            .finish()
    }
}

impl HarnessServices {
    pub(crate) fn bind(&self, harness: Weak<HarnessInner>) {
        // Bound once, by the builder that created the handle.
        let _ = self.harness.set(harness);
    }

    /// The harness, while it exists.
    pub fn harness(&self) -> Option<Harness> {
        self.harness.get()?.upgrade().map(|inner| Harness { inner })
    }
}

impl Harness {
    /// A thread's metadata (`None` if the thread does not exist).
    pub async fn thread_metadata(
        &self,
        thread_id: &str,
    ) -> Result<Option<Map<String, Value>>, HarnessError> {
        if let Some(bound) = self.session().thread().filter(|t| t.id == thread_id) {
            return Ok(Some(bound.metadata));
        }
        Ok(self
            .inner
            .store
            .thread(thread_id)
            .await?
            .map(|t| t.metadata))
    }

    /// Changes a thread's metadata and stores it, serialized with the harness's own metadata
    /// writes (mode, models, usage), so that no change is lost. Plugins keep their settings
    /// here under their own keys.
    pub async fn update_thread_metadata(
        &self,
        thread_id: &str,
        change: impl FnOnce(&mut Map<String, Value>),
    ) -> Result<(), HarnessError> {
        self.inner
            .update_thread_record(thread_id, |record| change(&mut record.metadata))
            .await
    }

    /// Waits until every message the active run produced so far is stored (returns at once
    /// without a run). Plugins that read the thread back call it first.
    pub async fn flush_messages(&self) {
        self.inner.flush_recorder().await;
    }

    /// Builds a model from its id with the harness's resolver (what runs use).
    pub fn resolve_model(
        &self,
        model_id: &str,
    ) -> Result<Arc<dyn crate::model::Model>, HarnessError> {
        let id = crate::model::ModelId::new(model_id)?;
        Ok(self.inner.resolve_model(&id)?)
    }
}
