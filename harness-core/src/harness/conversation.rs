//! The bound thread's conversation, kept in memory between runs.
//!
//! A run gives the kernel the whole conversation. Reading it from the store and converting it
//! for every run made a round trip grow with the thread (at 2,000 messages, 90% of a round
//! trip was that). Instead the session keeps the conversation of its bound thread with the
//! store's [`ThreadVersion`] it matches:
//!
//! - Before each run the harness reads the thread's version, a lookup that does not grow with
//!   the thread, and reuses the kept conversation only if the version is the same. Messages
//!   appended by anyone else (another process on the same SQLite file, code writing to the
//!   store directly), or the thread deleted and created again, change the version, and the
//!   conversation is read again.
//! - The run takes the conversation (the kernel appends to it in place: it holds the only
//!   reference), and gives back the conversation it ended with once the recorder stored every
//!   message the run added, with the version those appends made. A run that could not store a
//!   message, or crashed, gives nothing back, and the next run reads the store.
//! - Binding another thread (switch, create, clone, select) and unbinding (delete, resource
//!   change, destroy) drop it.

use std::sync::Arc;

use harness_tags::KernelMessage;
use harness_tags::util::lock;

use super::{HarnessError, HarnessInner};
use crate::store::ThreadVersion;

/// A thread's conversation as the kernel sees it, with the version of the thread it matches.
#[derive(Debug)]
pub(crate) struct Conversation {
    pub(crate) thread_id: String,
    pub(crate) version: ThreadVersion,
    pub(crate) messages: Arc<Vec<KernelMessage>>,
}

impl HarnessInner {
    /// Takes the conversation of `thread_id` for a run: the kept one if the thread has not
    /// changed since, else the one in the store.
    pub(crate) async fn take_conversation(
        &self,
        thread_id: &str,
    ) -> Result<Conversation, HarnessError> {
        let version = self
            .store
            .thread_version(thread_id)
            .await?
            .ok_or_else(|| HarnessError::ThreadNotFound(thread_id.to_owned()))?;
        let kept = lock(&self.session.conversation).take();
        if let Some(kept) =
            kept.filter(|kept| kept.thread_id == thread_id && kept.version == version)
        {
            return Ok(kept);
        }
        let stored = self.store.messages(thread_id).await?;
        // Room to grow: the conversation is read to be appended to, run after run.
        let mut messages = Vec::with_capacity(stored.len() + stored.len() / 2 + 16);
        messages.extend(stored.into_iter().map(|stored| stored.message));
        // What was read is what the next check compares with, should the thread have grown
        // between the two reads.
        let version = ThreadVersion {
            messages: messages.len() as u64,
            ..version
        };
        Ok(Conversation {
            thread_id: thread_id.to_owned(),
            version,
            messages: Arc::new(messages),
        })
    }

    /// Keeps a run's final conversation for the next run, if its thread is still bound.
    pub(crate) fn keep_conversation(&self, conversation: Conversation) {
        // Under the thread's lock, as binding another thread drops the conversation under it.
        let thread = lock(&self.session.thread);
        if thread
            .as_ref()
            .is_some_and(|thread| thread.id == conversation.thread_id)
        {
            *lock(&self.session.conversation) = Some(conversation);
        }
    }
}
