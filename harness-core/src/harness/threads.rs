//! Threads: create, select, switch, rename, clone, delete, list; and the thread metadata that
//! brings a thread back with its mode, models, token usage and tasks.

use std::collections::BTreeMap;
use std::sync::Arc;

use harness_tags::tags::{ThreadCloned, ThreadDeleted};
use harness_tags::{ThreadChange, ThreadCtx, Usage};
use serde_json::{Map, Value};

use super::{Harness, HarnessError, HarnessInner};
use crate::event::{HarnessEvent, ModelScope, ThreadInfo};
use crate::store::{StoredMessage, ThreadRecord, WriteOp, metadata};
use crate::task::TaskItem;
use harness_tags::util::{lock, unix_ms};

/// Where a clone comes from and what it is called.
#[derive(Clone, Debug, Default)]
pub struct CloneOptions {
    /// The thread to clone (default: the bound thread).
    pub source_thread_id: Option<String>,
    /// The clone's title (default: the source's, with " (copy)").
    pub title: Option<String>,
    /// The resource the clone belongs to (default: the source's).
    pub resource_id: Option<String>,
    /// The last message copied (default: every message); later ones stay behind.
    pub up_to_message: Option<String>,
}

pub(crate) fn thread_info(record: &ThreadRecord) -> ThreadInfo {
    ThreadInfo {
        id: record.id.clone(),
        resource_id: record.resource_id.clone(),
        title: record.title.clone(),
        created_at: record.created_at,
        updated_at: record.updated_at,
    }
}

fn is_fork(record: &ThreadRecord) -> bool {
    record
        .metadata
        .get(metadata::FORKED_SUBAGENT)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

impl Harness {
    /// Binds the most recently updated thread of the resource that is not locked elsewhere
    /// (forks excluded), or creates one if there is none.
    pub async fn select_or_create_thread(&self) -> Result<ThreadRecord, HarnessError> {
        self.inner.select_or_create_thread().await
    }

    /// Creates a thread and binds it (taking its lock before releasing the old one).
    pub async fn create_thread(&self, title: Option<String>) -> Result<ThreadRecord, HarnessError> {
        self.inner.create_thread(title, Map::new()).await
    }

    /// Switches to another thread: aborts the run, takes the new thread's lock, releases the
    /// old one, and loads the thread's mode, models, usage and tasks. On failure the session
    /// stays on the old thread.
    pub async fn switch_thread(&self, thread_id: &str) -> Result<(), HarnessError> {
        self.abort();
        self.inner.wait_idle().await;
        self.inner.switch_thread(thread_id).await
    }

    /// Renames the bound thread.
    pub async fn rename_thread(&self, title: &str) -> Result<(), HarnessError> {
        let title = title.to_owned();
        self.inner
            .update_thread(move |record| record.title = Some(title))
            .await
    }

    /// Clones a thread with its messages (new ids), all of them or those up to
    /// [`CloneOptions::up_to_message`], and switches to the clone. Plugins get `thread.cloned`
    /// with the map from old to new message ids, to copy their records. A message id that is
    /// not in the thread is [`HarnessError::MessageNotFound`].
    pub async fn clone_thread(&self, options: CloneOptions) -> Result<ThreadRecord, HarnessError> {
        self.abort();
        self.inner.wait_idle().await;
        let source_id = match options.source_thread_id {
            Some(id) => id,
            None => self.session().thread_id().ok_or(HarnessError::NoThread)?,
        };
        let mut extra = Map::new();
        extra.insert("clonedFrom".into(), Value::String(source_id.clone()));
        if let Some(last) = &options.up_to_message {
            let messages = self.inner.store.messages(&source_id).await?;
            if !messages.iter().any(|message| message.id == *last) {
                return Err(HarnessError::MessageNotFound {
                    thread_id: source_id,
                    message_id: last.clone(),
                });
            }
        }
        // Copies stop at the message after the last one asked for.
        let past_last = std::sync::atomic::AtomicBool::new(false);
        let stop = |message: &StoredMessage| {
            let stop = past_last.load(std::sync::atomic::Ordering::Relaxed);
            if options.up_to_message.as_deref() == Some(message.id.as_str()) {
                past_last.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            stop
        };
        let upto: Option<&(dyn Fn(&StoredMessage) -> bool + Send + Sync)> =
            options.up_to_message.as_ref().map(|_| &stop as _);
        let (record, _) = self
            .inner
            .copy_thread(&source_id, options.title, options.resource_id, extra, upto)
            .await?;
        self.inner.take_thread(record.clone()).await?;
        self.inner.emit(HarnessEvent::ThreadCreated {
            thread: thread_info(&record),
        });
        Ok(record)
    }

    /// Deletes a thread with its messages and plugin records, and the hidden threads its
    /// forked subagents ran on; if it is the bound thread, the run is aborted and the thread
    /// unbound.
    ///
    /// A thread another harness holds (another process running in it, or another session)
    /// is not deleted: the error is [`HarnessError::Lock`] naming the holder, as for
    /// [`switch_thread`](Self::switch_thread). The lock is taken for the deletion and given
    /// back after it.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<(), HarnessError> {
        let bound = self.session().thread_id().as_deref() == Some(thread_id);
        if bound {
            self.abort();
            self.inner.wait_idle().await;
        }
        let Some(record) = self.inner.store.thread(thread_id).await? else {
            return Err(HarnessError::ThreadNotFound(thread_id.to_owned()));
        };
        if !bound {
            self.inner.lock.acquire(thread_id).await?;
        }
        let deleted = self.inner.delete_with_forks(&record).await;
        if deleted.is_ok() || !bound {
            let _ = self.inner.lock.release(thread_id).await;
        }
        let deleted = deleted?;
        if bound {
            self.session().unbind_thread();
        }
        let ctx = self.inner.thread_ctx();
        for thread_id in deleted {
            let change = ThreadChange {
                thread_id: thread_id.clone(),
                ..ThreadChange::default()
            };
            // Observe-only: a plugin failing to drop its records is reported through the sink.
            let _ = self
                .inner
                .pipeline
                .emit::<ThreadDeleted>(change, &ctx)
                .await;
            self.inner.emit(HarnessEvent::ThreadDeleted { thread_id });
        }
        Ok(())
    }

    /// The resource's threads, newest first; forks of subagents only if asked for.
    pub async fn list_threads(
        &self,
        include_forked: bool,
    ) -> Result<Vec<ThreadRecord>, HarnessError> {
        let resource = self.session().resource_id();
        let threads = self.inner.store.threads(Some(&resource)).await?;
        Ok(threads
            .into_iter()
            .filter(|t| include_forked || !is_fork(t))
            .collect())
    }

    /// Changes the resource and unbinds the thread.
    pub async fn set_resource_id(&self, resource_id: &str) {
        self.abort();
        self.inner.wait_idle().await;
        if let Some(thread_id) = self.session().thread_id() {
            let _ = self.inner.lock.release(&thread_id).await;
        }
        self.session().unbind_thread();
        *lock(&self.session().resource_id) = resource_id.to_owned();
    }

    /// Every resource id that has threads.
    pub async fn known_resource_ids(&self) -> Result<Vec<String>, HarnessError> {
        Ok(self.inner.store.resource_ids().await?)
    }

    /// A thread's messages (default: the bound thread's).
    pub async fn list_messages(
        &self,
        thread_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>, HarnessError> {
        let thread_id = match thread_id {
            Some(id) => id.to_owned(),
            None => self.session().thread_id().ok_or(HarnessError::NoThread)?,
        };
        Ok(self.inner.store.messages(&thread_id).await?)
    }
}

impl HarnessInner {
    pub(crate) fn thread_ctx(&self) -> ThreadCtx {
        ThreadCtx {
            resource_id: Arc::from(self.session.resource_id()),
            harness_id: Arc::from(self.id.as_str()),
        }
    }

    /// The bound thread's id and resource, or those of the thread `select_or_create_thread`
    /// picks.
    pub(crate) async fn ensure_thread(&self) -> Result<(String, String), HarnessError> {
        let bound = lock(&self.session.thread)
            .as_ref()
            .map(|thread| (thread.id.clone(), thread.resource_id.clone()));
        match bound {
            Some(ids) => Ok(ids),
            None => self
                .select_or_create_thread()
                .await
                .map(|thread| (thread.id, thread.resource_id)),
        }
    }

    pub(crate) async fn select_or_create_thread(&self) -> Result<ThreadRecord, HarnessError> {
        let resource = self.session.resource_id();
        for thread in self.store.threads(Some(&resource)).await? {
            if is_fork(&thread) {
                continue;
            }
            match self.take_thread(thread).await {
                Ok(bound) => return Ok(bound),
                // Locked by another harness (a second terminal): try the next one.
                Err(HarnessError::Lock(_)) => continue,
                Err(other) => return Err(other),
            }
        }
        self.create_thread(None, Map::new()).await
    }

    pub(crate) async fn create_thread(
        &self,
        title: Option<String>,
        extra: Map<String, Value>,
    ) -> Result<ThreadRecord, HarnessError> {
        let now = unix_ms();
        let mut metadata = Map::new();
        let mode = self.session.mode_id();
        metadata.insert(metadata::CURRENT_MODE.into(), Value::String(mode.clone()));
        if let Some(model) = self.session.model_id() {
            metadata.insert(
                format!("{}{mode}", metadata::MODE_MODEL_PREFIX),
                Value::String(model.to_string()),
            );
        }
        metadata.extend(extra);
        let record = ThreadRecord {
            id: self.new_id(),
            resource_id: self.session.resource_id(),
            title,
            created_at: now,
            updated_at: now,
            metadata,
        };
        self.lock.acquire(&record.id).await?;
        if let Err(error) = self
            .store
            .write(vec![WriteOp::CreateThread(record.clone())])
            .await
        {
            let _ = self.lock.release(&record.id).await;
            return Err(error.into());
        }
        self.take_thread(record.clone()).await?;
        self.emit(HarnessEvent::ThreadCreated {
            thread: thread_info(&record),
        });
        Ok(record)
    }

    pub(crate) async fn switch_thread(&self, thread_id: &str) -> Result<(), HarnessError> {
        let Some(record) = self.store.thread(thread_id).await? else {
            return Err(HarnessError::ThreadNotFound(thread_id.to_owned()));
        };
        self.take_thread(record).await.map(|_| ())
    }

    /// Takes a thread's lock, releases the old thread's, binds the thread and loads its state.
    pub(crate) async fn take_thread(
        &self,
        record: ThreadRecord,
    ) -> Result<ThreadRecord, HarnessError> {
        let previous = self.session.thread_id();
        self.lock.acquire(&record.id).await?;
        if let Some(previous) = previous.as_deref().filter(|p| *p != record.id) {
            let _ = self.lock.release(previous).await;
        }
        let previous_mode = self.session.mode_id();
        let previous_model = self.session.model_id();
        let meta = &record.metadata;
        let mode = meta
            .get(metadata::CURRENT_MODE)
            .and_then(Value::as_str)
            .filter(|m| self.mode(m).is_some())
            .map(str::to_owned)
            .unwrap_or_else(|| self.default_mode.clone());
        let model = self.initial_model(&mode, Some(meta));
        let usage: Usage = meta
            .get(metadata::TOKEN_USAGE)
            .and_then(|u| serde_json::from_value(u.clone()).ok())
            .unwrap_or_default();
        let tasks: Vec<TaskItem> = meta
            .get(metadata::TASKS)
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        *lock(&self.session.mode_id) = mode.clone();
        *lock(&self.session.model_id) = model.clone();
        *lock(&self.session.usage) = usage;
        self.session.bind_thread(record.clone());
        self.session.tasks.restore(tasks);
        if self.persist_grants {
            *lock(&self.session.grants) = meta
                .get(metadata::GRANTS)
                .and_then(|g| serde_json::from_value(g.clone()).ok())
                .unwrap_or_default();
        }

        self.emit(HarnessEvent::ThreadChanged {
            thread_id: record.id.clone(),
            previous_thread_id: previous,
        });
        if mode != previous_mode {
            self.emit(HarnessEvent::ModeChanged {
                mode_id: mode.clone(),
                previous_mode_id: Some(previous_mode),
            });
        }
        if model != previous_model
            && let Some(model) = &model
        {
            self.emit(HarnessEvent::ModelChanged {
                model_id: model.to_string(),
                scope: ModelScope::Thread,
                mode_id: Some(mode),
            });
        }
        self.emit(HarnessEvent::UsageUpdate { usage });
        Ok(record)
    }

    /// Changes the bound thread's record and persists it, one change at a time.
    pub(crate) async fn update_thread(
        &self,
        change: impl FnOnce(&mut ThreadRecord),
    ) -> Result<(), HarnessError> {
        let Some(thread_id) = self.session.thread_id() else {
            return Err(HarnessError::NoThread);
        };
        self.update_thread_record(&thread_id, change).await
    }

    /// Changes a thread's record (the bound one or any other) and persists it, one change at
    /// a time.
    pub(crate) async fn update_thread_record(
        &self,
        thread_id: &str,
        change: impl FnOnce(&mut ThreadRecord),
    ) -> Result<(), HarnessError> {
        let _serial = self.metadata_writes.lock().await;
        let mut record = self.current_record(thread_id).await?;
        change(&mut record);
        record.updated_at = unix_ms().max(record.updated_at);
        self.store
            .write(vec![WriteOp::UpdateThread(record.clone())])
            .await?;
        let mut bound = lock(&self.session.thread);
        if bound.as_ref().map(|t| t.id.as_str()) == Some(record.id.as_str()) {
            *bound = Some(record);
        }
        Ok(())
    }

    /// Applies `ops` and a change to a thread's record in one atomic write (a run's messages
    /// with its token usage), serialized with the other changes of the record. The change is
    /// made to the copy that is written, then, once it is stored, to the bound record.
    pub(crate) async fn write_with_record(
        &self,
        thread_id: &str,
        mut ops: Vec<WriteOp>,
        change: impl Fn(&mut ThreadRecord),
    ) -> Result<(), HarnessError> {
        let _serial = self.metadata_writes.lock().await;
        let mut record = self.current_record(thread_id).await?;
        change(&mut record);
        let updated_at = unix_ms().max(record.updated_at);
        record.updated_at = updated_at;
        ops.push(WriteOp::UpdateThread(record));
        self.store.write(ops).await?;
        if let Some(bound) = lock(&self.session.thread)
            .as_mut()
            .filter(|bound| bound.id == thread_id)
        {
            change(bound);
            bound.updated_at = updated_at;
        }
        Ok(())
    }

    /// A thread's record: the bound one, or the store's.
    async fn current_record(&self, thread_id: &str) -> Result<ThreadRecord, HarnessError> {
        let bound = lock(&self.session.thread)
            .as_ref()
            .filter(|bound| bound.id == thread_id)
            .cloned();
        match bound {
            Some(record) => Ok(record),
            None => self
                .store
                .thread(thread_id)
                .await?
                .ok_or_else(|| HarnessError::ThreadNotFound(thread_id.to_owned())),
        }
    }

    /// Changes the bound thread's metadata (no error without a bound thread: nothing to save).
    pub(crate) async fn update_metadata(
        &self,
        change: impl FnOnce(&mut Map<String, Value>),
    ) -> Result<(), HarnessError> {
        if self.session.thread_id().is_none() {
            return Ok(());
        }
        self.update_thread(|record| change(&mut record.metadata))
            .await
    }

    /// Deletes `record` and its forks (hidden threads of forked subagents) in one write;
    /// returns their ids, the forks first.
    async fn delete_with_forks(&self, record: &ThreadRecord) -> Result<Vec<String>, HarnessError> {
        let mut deleted: Vec<String> = self
            .store
            .threads(Some(&record.resource_id))
            .await?
            .into_iter()
            .filter(|thread| {
                is_fork(thread)
                    && thread
                        .metadata
                        .get(metadata::PARENT_THREAD)
                        .and_then(Value::as_str)
                        == Some(record.id.as_str())
            })
            .map(|fork| fork.id)
            .collect();
        deleted.push(record.id.clone());
        let writes = deleted
            .iter()
            .map(|thread_id| WriteOp::DeleteThread {
                thread_id: thread_id.clone(),
            })
            .collect();
        self.store.write(writes).await?;
        Ok(deleted)
    }

    /// Copies a thread (messages with new ids) into a new thread in one atomic write, emits
    /// `thread.cloned`, and returns the new record with the id map. `upto` keeps only the
    /// messages before that id.
    pub(crate) async fn copy_thread(
        &self,
        source_id: &str,
        title: Option<String>,
        resource_id: Option<String>,
        extra: Map<String, Value>,
        upto: Option<&(dyn Fn(&StoredMessage) -> bool + Send + Sync)>,
    ) -> Result<(ThreadRecord, BTreeMap<String, String>), HarnessError> {
        let Some(source) = self.store.thread(source_id).await? else {
            return Err(HarnessError::ThreadNotFound(source_id.to_owned()));
        };
        let messages = self.store.messages(source_id).await?;
        let now = unix_ms();
        let mut metadata = source.metadata.clone();
        metadata.remove(metadata::FORKED_SUBAGENT);
        metadata.remove(metadata::PARENT_THREAD);
        metadata.extend(extra);
        let record = ThreadRecord {
            id: self.new_id(),
            resource_id: resource_id.unwrap_or_else(|| source.resource_id.clone()),
            title: title.or_else(|| source.title.as_ref().map(|t| format!("{t} (copy)"))),
            created_at: now,
            updated_at: now,
            metadata,
        };
        let mut id_map = BTreeMap::new();
        let mut copies = Vec::with_capacity(messages.len());
        for message in messages {
            if upto.is_some_and(|stop| stop(&message)) {
                break;
            }
            let new_id = self.new_id();
            id_map.insert(message.id.clone(), new_id.clone());
            copies.push(StoredMessage {
                id: new_id,
                thread_id: record.id.clone(),
                ..message
            });
        }
        self.store
            .write(vec![
                WriteOp::CreateThread(record.clone()),
                WriteOp::AppendMessages {
                    thread_id: record.id.clone(),
                    messages: copies,
                },
            ])
            .await?;
        let change = ThreadChange {
            thread_id: record.id.clone(),
            source_thread_id: Some(source_id.to_owned()),
            message_id_map: id_map.clone(),
        };
        let ctx = self.thread_ctx();
        // Observe-only: a plugin failing to copy its records is reported through the sink.
        let _ = self.pipeline.emit::<ThreadCloned>(change, &ctx).await;
        Ok((record, id_map))
    }
}
