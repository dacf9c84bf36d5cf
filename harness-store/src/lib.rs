//! Storage: threads, their messages and metadata, resources, and plugin records by namespace,
//! behind the [`Store`] trait; and the [`ThreadLock`] that keeps two harnesses off one thread.
//!
//! Every write goes through [`Store::write`], a batch of [`WriteOp`]s applied atomically, so a
//! change that spans rows (a clone, a delete with its records) is all or nothing. A batch is
//! durable when `write` returns.
//!
//! # Implementations
//! - [`MemoryStore`] and [`MemoryThreadLock`]: in memory, for tests and throwaway harnesses.
//! - [`SqliteStore`] (feature `sqlite`, on by default): one SQLite file in WAL mode with one
//!   write connection. A write that finds it free commits on the calling thread (tens of
//!   microseconds for a few messages), then commits what other writers queued meanwhile in one
//!   transaction (group commit); large writes, and waits for another process's lock, go to a
//!   writer thread. Checkpoints run on a background thread; reads go through a pool of read
//!   connections. Acknowledged writes survive the process being killed. A file that is not a
//!   harness store gives [`StoreError::Corrupt`] naming it.
//! - [`SqliteThreadLock`] (feature `sqlite`): one operating-system file lock per thread in
//!   `<db>.locks/`, so two processes cannot own one thread, and a lock left by a process that
//!   died is released by the operating system.
//!
//! Both traits are object safe and async, so that a networked store (Postgres, with advisory
//! locks) can come later behind the same interfaces.
//!
//! # Semantics every store follows
//! - A batch applies in order and stops at the first failing op; a failed batch leaves
//!   nothing behind.
//! - Messages come back in the order they were appended; message ids are unique across threads.
//! - Threads list most recently updated first; equal `updated_at`, most recently created first.
//! - Deleting a thread deletes its messages and the records bound to it, not other records.
//! - Event logs (a harness's published event envelopes, for clients that reconnect, see
//!   [`LoggedEvent`]) are appended in strictly increasing `seq` order and kept as the bytes
//!   written; a closed log takes no more events, and [`WriteOp::PruneEventLogs`] drops the ones
//!   closed long enough ago.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use harness_store::{MemoryStore, Store, StoredMessage, ThreadRecord, WriteOp};
//! use harness_tags::KernelMessage;
//!
//! let store = MemoryStore::new();
//! let thread = ThreadRecord {
//!     id: "t1".into(),
//!     resource_id: "my-project".into(),
//!     title: Some("First".into()),
//!     created_at: 1,
//!     updated_at: 1,
//!     metadata: Default::default(),
//! };
//! let message = StoredMessage {
//!     id: "m1".into(),
//!     thread_id: "t1".into(),
//!     created_at: 2,
//!     run_id: None,
//!     message: KernelMessage::user("hello"),
//! };
//! store
//!     .write(vec![
//!         WriteOp::CreateThread(thread),
//!         WriteOp::AppendMessages { thread_id: "t1".into(), messages: vec![message] },
//!     ])
//!     .await?;
//! assert_eq!(store.messages("t1").await?.len(), 1);
//! # Ok::<(), harness_store::StoreError>(())
//! # }).unwrap();
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod memory;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "testing")]
pub mod testing;

pub use memory::{MemoryStore, MemoryThreadLock};
#[cfg(feature = "sqlite")]
pub use sqlite::{Durability, MAX_GROUP, SqliteOptions, SqliteStore, SqliteThreadLock};

use std::fmt;

use async_trait::async_trait;
use harness_tags::KernelMessage;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A conversation thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRecord {
    /// The thread's id.
    pub id: String,
    /// The resource (project, user) the thread belongs to.
    pub resource_id: String,
    /// A human title.
    pub title: Option<String>,
    /// Creation time, Unix milliseconds.
    pub created_at: i64,
    /// Last change, Unix milliseconds (threads list newest first by this).
    pub updated_at: i64,
    /// Harness-managed metadata: current mode, each mode's model, token usage, memory
    /// settings, fork markers. Keys are camelCase.
    pub metadata: Map<String, Value>,
}

/// A message as stored in a thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredMessage {
    /// The message's id, unique across threads.
    pub id: String,
    /// The thread it belongs to.
    pub thread_id: String,
    /// When it was added, Unix milliseconds.
    pub created_at: i64,
    /// The run that produced it, if any.
    pub run_id: Option<String>,
    /// The message.
    pub message: KernelMessage,
}

/// Where a thread's messages stand, as [`Store::thread_version`] reads it: equal versions of a
/// thread mean the same messages.
///
/// Messages are only ever appended, so the count tells how far a thread has grown; the
/// generation tells a thread from one deleted and created again under the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ThreadVersion {
    /// Numbers this thread among every thread the store ever created under any id: a thread
    /// deleted and created again under the same id gets another.
    pub generation: u64,
    /// How many messages the thread holds.
    pub messages: u64,
}

/// One entry of an event log: an event envelope, kept as the JSON text its publisher wrote.
///
/// The store never reads the envelope: a server replays these bytes as they were first sent
/// (an SSE frame's `data:`, with `seq` as its `id:`), so a client that resumes after a cut, or
/// after the server restarted, reads exactly what an unbroken connection would have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedEvent {
    /// The envelope's `seq`: strictly increasing within its log, gaps allowed, at most
    /// `i64::MAX`.
    pub seq: u64,
    /// The serialized envelope.
    pub envelope: String,
}

/// Where an event log stands, as [`Store::event_log`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventLogInfo {
    /// The `seq` of its last event (0 while it has none): a publisher that starts again on
    /// this log goes on from the next one.
    pub last_seq: u64,
    /// When it was closed (its stream completed), Unix milliseconds.
    pub closed_at: Option<i64>,
}

/// One write; [`Store::write`] applies a batch of them atomically, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum WriteOp {
    /// Creates a thread (fails if the id exists).
    CreateThread(ThreadRecord),
    /// Replaces a thread's title, metadata and `updated_at` (fails if it does not exist); its
    /// resource and creation time stay.
    UpdateThread(ThreadRecord),
    /// Deletes a thread with its messages and every plugin record bound to it (see
    /// [`WriteOp::PutRecord`]); fails with [`StoreError::ThreadNotFound`] if it does not exist.
    DeleteThread {
        /// The thread.
        thread_id: String,
    },
    /// Appends messages to a thread, in order. Fails if the thread does not exist or a message
    /// id is already used (in any thread). This `thread_id` is the one stored: a message's
    /// own `thread_id` field is not consulted. The thread's `updated_at` is left as it is.
    AppendMessages {
        /// The thread.
        thread_id: String,
        /// The messages.
        messages: Vec<StoredMessage>,
    },
    /// Stores a plugin record, replacing one with the same namespace and key. A record whose
    /// `thread_id` is set is deleted with the thread, and that thread must exist.
    PutRecord {
        /// The plugin's namespace, e.g. `om`.
        namespace: String,
        /// The record's key within the namespace.
        key: String,
        /// The thread the record belongs to, if any.
        thread_id: Option<String>,
        /// The record.
        value: Value,
    },
    /// Deletes a plugin record (no error if it does not exist).
    DeleteRecord {
        /// The plugin's namespace.
        namespace: String,
        /// The record's key.
        key: String,
    },
    /// Appends events to an event log, in order; the first append creates the log. Fails with
    /// [`StoreError::EventOutOfOrder`] unless each `seq` is greater than the one before it (and
    /// than the log's last), and with [`StoreError::EventLogClosed`] once the log is closed.
    AppendEvents {
        /// The log, e.g. a harness's id.
        log_id: String,
        /// The events, by increasing `seq`.
        events: Vec<LoggedEvent>,
    },
    /// Closes an event log: its stream is complete and takes no more events. A log that does
    /// not exist is created closed and empty; closing a closed log keeps its first time.
    CloseEventLog {
        /// The log.
        log_id: String,
        /// When, Unix milliseconds (what [`WriteOp::PruneEventLogs`] compares).
        closed_at: i64,
    },
    /// Deletes every event log closed before `closed_before` (Unix milliseconds), with its
    /// events: how long completed streams are kept. Open logs stay.
    PruneEventLogs {
        /// The cut-off.
        closed_before: i64,
    },
}

/// A plugin record as read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The record's key within its namespace.
    pub key: String,
    /// The thread it belongs to, if any.
    pub thread_id: Option<String>,
    /// The record.
    pub value: Value,
}

/// Why a storage operation failed. Messages name the file or thread involved.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The thread does not exist.
    #[error("thread `{0}` does not exist")]
    ThreadNotFound(String),
    /// A thread with this id already exists.
    #[error("thread `{0}` already exists")]
    ThreadExists(String),
    /// A message with this id already exists.
    #[error("message `{0}` already exists")]
    MessageExists(String),
    /// The database file is not a harness store, or is damaged.
    #[error("`{path}` is not a usable harness database: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The database was written by a newer version of the harness.
    #[error(
        "`{path}` has schema version {found}, newer than this harness supports ({supported}); \
         upgrade the harness"
    )]
    TooNew {
        /// The file.
        path: String,
        /// The file's schema version.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// An event's `seq` is not greater than the one before it in its log.
    #[error(
        "event {seq} cannot follow event {last_seq} in event log `{log_id}`: seq must increase"
    )]
    EventOutOfOrder {
        /// The log.
        log_id: String,
        /// The event's `seq`.
        seq: u64,
        /// The `seq` it had to exceed.
        last_seq: u64,
    },
    /// The event log was closed: its stream is complete.
    #[error("event log `{0}` is closed; its stream is complete")]
    EventLogClosed(String),
    /// Any other failure of the backend (I/O, a closed writer).
    #[error("storage failed: {0}")]
    Backend(String),
}

/// Where a harness keeps threads, messages and plugin records.
///
/// Implementations must apply each [`Store::write`] batch atomically and in order, and make
/// it durable before returning: what a caller was told is written survives a crash.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies writes atomically, in order.
    async fn write(&self, ops: Vec<WriteOp>) -> Result<(), StoreError>;

    /// A thread by id.
    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError>;

    /// Threads of a resource (every thread when `None`), most recently updated first.
    async fn threads(&self, resource_id: Option<&str>) -> Result<Vec<ThreadRecord>, StoreError>;

    /// A thread's messages, in the order they were appended.
    async fn messages(&self, thread_id: &str) -> Result<Vec<StoredMessage>, StoreError>;

    /// Where a thread's messages stand (`None` if the thread does not exist): the version
    /// changes with every append to the thread, and when the thread is deleted and created
    /// again, whoever wrote (this process or another). A harness compares it with the version
    /// of the conversation it keeps in memory before each run, instead of reading the thread.
    ///
    /// The default reads the thread and all its messages, and takes the thread's creation
    /// time as the generation; a store should answer with a lookup that does not grow with
    /// the thread (both built-in stores do).
    async fn thread_version(&self, thread_id: &str) -> Result<Option<ThreadVersion>, StoreError> {
        let Some(thread) = self.thread(thread_id).await? else {
            return Ok(None);
        };
        let messages = self.messages(thread_id).await?.len() as u64;
        Ok(Some(ThreadVersion {
            generation: thread.created_at as u64,
            messages,
        }))
    }

    /// The distinct resource ids that have threads, sorted.
    async fn resource_ids(&self) -> Result<Vec<String>, StoreError>;

    /// A plugin record.
    async fn record(&self, namespace: &str, key: &str) -> Result<Option<Record>, StoreError>;

    /// A namespace's records whose key starts with `prefix`, sorted by key.
    async fn records(&self, namespace: &str, prefix: &str) -> Result<Vec<Record>, StoreError>;

    /// Where an event log stands (`None` if it was never written, or was pruned).
    async fn event_log(&self, log_id: &str) -> Result<Option<EventLogInfo>, StoreError>;

    /// Up to `limit` events of a log with a `seq` greater than `after`, in order (none if the
    /// log does not exist): `after` is the `Last-Event-ID` of a client that resumes.
    async fn events(
        &self,
        log_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedEvent>, StoreError>;
}

/// Why a thread lock was not acquired.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another holder (another process or harness) owns the thread.
    #[error(
        "thread `{thread_id}` is in use by another harness{holder}; pick another thread or \
         close the other session",
        holder = holder.as_deref().map(|h| format!(" ({h})")).unwrap_or_default()
    )]
    Held {
        /// The thread.
        thread_id: String,
        /// Who holds it, if known (e.g. a process id).
        holder: Option<String>,
    },
    /// The lock could not be checked (I/O).
    #[error("could not lock thread `{thread_id}`: {reason}")]
    Failed {
        /// The thread.
        thread_id: String,
        /// Why.
        reason: String,
    },
}

/// Keeps two harnesses (in one process or several) from owning one thread at a time.
#[async_trait]
pub trait ThreadLock: Send + Sync + 'static {
    /// Takes the thread, or fails with [`LockError::Held`] if someone else has it. Taking a
    /// thread this lock already holds succeeds.
    async fn acquire(&self, thread_id: &str) -> Result<(), LockError>;

    /// Gives the thread back (no error if it was not held).
    async fn release(&self, thread_id: &str) -> Result<(), LockError>;
}

impl fmt::Debug for dyn Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Store")
    }
}

/// A thread's metadata keys the harness manages, for typed access.
pub mod metadata {
    /// The mode the thread is in.
    pub const CURRENT_MODE: &str = "currentModeId";
    /// Prefix of each mode's remembered model: `modeModelId_<mode>`.
    pub const MODE_MODEL_PREFIX: &str = "modeModelId_";
    /// The thread's accumulated token usage.
    pub const TOKEN_USAGE: &str = "tokenUsage";
    /// True on threads created for forked subagents.
    pub const FORKED_SUBAGENT: &str = "forkedSubagent";
    /// The parent thread of a fork.
    pub const PARENT_THREAD: &str = "parentThreadId";
    /// The session grants, when the harness persists them with the thread.
    pub const GRANTS: &str = "grants";
    /// The thread's task list.
    pub const TASKS: &str = "tasks";
}
