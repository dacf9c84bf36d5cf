//! [`MemoryStore`] and [`MemoryThreadLock`]: the in-memory store and lock, for tests and
//! for harnesses that need no persistence.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::{
    EventLogInfo, LockError, LoggedEvent, Record, Store, StoreError, StoredMessage, ThreadLock,
    ThreadRecord, ThreadVersion, WriteOp,
};

/// A [`Store`] that keeps everything in memory, with the same semantics as
/// the SQLite store: atomic batches, append order, cascading deletes.
///
/// Nothing survives the process. Clones share the same data.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use harness_store::{MemoryStore, Store, ThreadRecord, WriteOp};
///
/// let store = MemoryStore::new();
/// let thread = ThreadRecord {
///     id: "t1".into(),
///     resource_id: "project".into(),
///     title: None,
///     created_at: 1,
///     updated_at: 1,
///     metadata: Default::default(),
/// };
/// store.write(vec![WriteOp::CreateThread(thread.clone())]).await?;
/// assert_eq!(store.thread("t1").await?, Some(thread));
/// # Ok::<(), harness_store::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
}

/// The data, behind one mutex so that a batch is applied atomically.
#[derive(Debug, Default)]
struct Inner {
    /// Threads by id, with the order they were created in (the tie-break of equal
    /// `updated_at`, newest created first, as in SQLite).
    threads: HashMap<String, (u64, ThreadRecord)>,
    /// Each thread's messages, in append order.
    messages: HashMap<String, Chunks>,
    /// Every message id (ids are unique across threads).
    message_ids: HashSet<String>,
    /// Plugin records by (namespace, key), sorted.
    records: BTreeMap<(String, String), Record>,
    /// The next creation sequence number.
    next_created: u64,
    /// Event logs by id.
    event_logs: HashMap<String, EventLog>,
}

/// One event log: where it stands and its events in `seq` order.
#[derive(Debug, Default)]
struct EventLog {
    last_seq: u64,
    closed_at: Option<i64>,
    events: Vec<LoggedEvent>,
}

/// A thread's messages in chunks that stay where they were allocated: an append never copies
/// earlier messages (a `Vec` that doubles copies them all now and then, a pause that grows with
/// the thread). Chunks grow with the thread, from 16 messages to at most 1,024.
#[derive(Debug, Default)]
struct Chunks {
    chunks: Vec<Vec<StoredMessage>>,
    len: usize,
}

impl Chunks {
    const MIN: usize = 16;
    const MAX: usize = 1024;

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn iter(&self) -> impl Iterator<Item = &StoredMessage> {
        self.chunks.iter().flatten()
    }

    fn push(&mut self, message: StoredMessage) {
        let full = self
            .chunks
            .last()
            .is_none_or(|chunk| chunk.len() == chunk.capacity());
        if full {
            let capacity = self.len.clamp(Self::MIN, Self::MAX);
            self.chunks.push(Vec::with_capacity(capacity));
        }
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.push(message);
            self.len += 1;
        }
    }

    /// Cuts the list back to `len` messages; returns the ones cut.
    fn truncate(&mut self, len: usize) -> Vec<StoredMessage> {
        let mut cut = Vec::new();
        while self.len > len {
            let Some(chunk) = self.chunks.last_mut() else {
                break;
            };
            let keep = chunk.len().saturating_sub(self.len - len);
            self.len -= chunk.len() - keep;
            // Earlier chunks' messages go before the later ones already cut.
            cut.splice(0..0, chunk.drain(keep..));
            if chunk.is_empty() {
                self.chunks.pop();
            }
        }
        cut
    }
}

/// How to take back one applied op when a later op of the batch fails.
enum Undo {
    /// Remove a thread that the batch created.
    RemoveThread(String),
    /// Put back a thread as it was (after an update or a delete).
    RestoreThread((u64, ThreadRecord)),
    /// Put back what an update replaced.
    RestoreFields {
        thread_id: String,
        title: Option<String>,
        metadata: serde_json::Map<String, serde_json::Value>,
        updated_at: i64,
    },
    /// Put back a deleted thread's messages.
    RestoreMessages(String, Chunks),
    /// Cut a thread's messages back to a length and forget the appended ids.
    TruncateMessages(String, usize),
    /// Put a record back as it was (absent or with its old value).
    RestoreRecord((String, String), Option<Record>),
    /// Cut an event log back to a length and last `seq`, or remove it if the batch created it.
    TruncateEvents {
        log_id: String,
        created: bool,
        len: usize,
        last_seq: u64,
    },
    /// Reopen an event log the batch closed, or remove it if the batch created it.
    Reopen { log_id: String, created: bool },
    /// Put back event logs a prune removed.
    RestoreEventLogs(Vec<(String, EventLog)>),
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while the lock is held cannot leave a batch half applied: `apply` undoes
        // on error and does not panic, so the data behind a poisoned lock is consistent.
        harness_tags::util::lock(&self.inner)
    }
}

impl Inner {
    /// Applies one op, pushing what undoes it.
    fn apply(&mut self, op: WriteOp, undo: &mut Vec<Undo>) -> Result<(), StoreError> {
        match op {
            WriteOp::CreateThread(thread) => {
                if self.threads.contains_key(&thread.id) {
                    return Err(StoreError::ThreadExists(thread.id));
                }
                let created = self.next_created;
                self.next_created += 1;
                undo.push(Undo::RemoveThread(thread.id.clone()));
                self.threads.insert(thread.id.clone(), (created, thread));
            }
            WriteOp::UpdateThread(thread) => {
                let Some((_, stored)) = self.threads.get_mut(&thread.id) else {
                    return Err(StoreError::ThreadNotFound(thread.id));
                };
                // What the update replaces is what undoes it: no copy of the record.
                undo.push(Undo::RestoreFields {
                    thread_id: thread.id,
                    title: std::mem::replace(&mut stored.title, thread.title),
                    metadata: std::mem::replace(&mut stored.metadata, thread.metadata),
                    updated_at: std::mem::replace(&mut stored.updated_at, thread.updated_at),
                });
            }
            WriteOp::DeleteThread { thread_id } => {
                let Some(thread) = self.threads.remove(&thread_id) else {
                    return Err(StoreError::ThreadNotFound(thread_id));
                };
                undo.push(Undo::RestoreThread(thread));
                let messages = self.messages.remove(&thread_id).unwrap_or_default();
                for message in messages.iter() {
                    self.message_ids.remove(&message.id);
                }
                undo.push(Undo::RestoreMessages(thread_id.clone(), messages));
                let keys: Vec<(String, String)> = self
                    .records
                    .iter()
                    .filter(|(_, record)| record.thread_id.as_deref() == Some(thread_id.as_str()))
                    .map(|(key, _)| key.clone())
                    .collect();
                for key in keys {
                    let old = self.records.remove(&key);
                    undo.push(Undo::RestoreRecord(key, old));
                }
            }
            WriteOp::AppendMessages {
                thread_id,
                messages,
            } => {
                if !self.threads.contains_key(&thread_id) {
                    return Err(StoreError::ThreadNotFound(thread_id));
                }
                let list = self.messages.entry(thread_id.clone()).or_default();
                undo.push(Undo::TruncateMessages(thread_id.clone(), list.len()));
                for mut message in messages {
                    if self.message_ids.contains(&message.id) {
                        return Err(StoreError::MessageExists(message.id));
                    }
                    message.thread_id.clone_from(&thread_id);
                    self.message_ids.insert(message.id.clone());
                    list.push(message);
                }
            }
            WriteOp::PutRecord {
                namespace,
                key,
                thread_id,
                value,
            } => {
                if let Some(thread) = &thread_id
                    && !self.threads.contains_key(thread)
                {
                    return Err(StoreError::ThreadNotFound(thread.clone()));
                }
                let slot = (namespace, key.clone());
                let old = self.records.insert(
                    slot.clone(),
                    Record {
                        key,
                        thread_id,
                        value,
                    },
                );
                undo.push(Undo::RestoreRecord(slot, old));
            }
            WriteOp::DeleteRecord { namespace, key } => {
                let slot = (namespace, key);
                if let Some(old) = self.records.remove(&slot) {
                    undo.push(Undo::RestoreRecord(slot, Some(old)));
                }
            }
            WriteOp::AppendEvents { log_id, events } => {
                if events.is_empty() {
                    return Ok(());
                }
                let created = !self.event_logs.contains_key(&log_id);
                let log = self.event_logs.entry(log_id.clone()).or_default();
                if log.closed_at.is_some() {
                    return Err(StoreError::EventLogClosed(log_id));
                }
                undo.push(Undo::TruncateEvents {
                    log_id: log_id.clone(),
                    created,
                    len: log.events.len(),
                    last_seq: log.last_seq,
                });
                for event in events {
                    if event.seq <= log.last_seq || event.seq > i64::MAX as u64 {
                        return Err(StoreError::EventOutOfOrder {
                            log_id,
                            seq: event.seq,
                            last_seq: log.last_seq,
                        });
                    }
                    log.last_seq = event.seq;
                    log.events.push(event);
                }
            }
            WriteOp::CloseEventLog { log_id, closed_at } => {
                let created = !self.event_logs.contains_key(&log_id);
                let log = self.event_logs.entry(log_id.clone()).or_default();
                if log.closed_at.is_none() {
                    log.closed_at = Some(closed_at);
                    undo.push(Undo::Reopen { log_id, created });
                }
            }
            WriteOp::PruneEventLogs { closed_before } => {
                let expired: Vec<String> = self
                    .event_logs
                    .iter()
                    .filter(|(_, log)| log.closed_at.is_some_and(|at| at < closed_before))
                    .map(|(id, _)| id.clone())
                    .collect();
                let removed = expired
                    .into_iter()
                    .filter_map(|id| self.event_logs.remove(&id).map(|log| (id, log)))
                    .collect();
                undo.push(Undo::RestoreEventLogs(removed));
            }
        }
        Ok(())
    }

    /// Takes back applied ops, newest first.
    fn undo(&mut self, undo: Vec<Undo>) {
        for step in undo.into_iter().rev() {
            match step {
                Undo::RemoveThread(id) => {
                    self.threads.remove(&id);
                }
                Undo::RestoreFields {
                    thread_id,
                    title,
                    metadata,
                    updated_at,
                } => {
                    if let Some((_, stored)) = self.threads.get_mut(&thread_id) {
                        stored.title = title;
                        stored.metadata = metadata;
                        stored.updated_at = updated_at;
                    }
                }
                Undo::RestoreThread((created, thread)) => {
                    self.threads.insert(thread.id.clone(), (created, thread));
                }
                Undo::RestoreMessages(thread_id, messages) => {
                    for message in messages.iter() {
                        self.message_ids.insert(message.id.clone());
                    }
                    if !messages.is_empty() {
                        self.messages.insert(thread_id, messages);
                    }
                }
                Undo::TruncateMessages(thread_id, len) => {
                    if let Some(list) = self.messages.get_mut(&thread_id) {
                        for message in list.truncate(len) {
                            self.message_ids.remove(&message.id);
                        }
                        if list.is_empty() {
                            self.messages.remove(&thread_id);
                        }
                    }
                }
                Undo::RestoreRecord(slot, old) => match old {
                    Some(record) => {
                        self.records.insert(slot, record);
                    }
                    None => {
                        self.records.remove(&slot);
                    }
                },
                Undo::TruncateEvents {
                    log_id,
                    created,
                    len,
                    last_seq,
                } => {
                    if created {
                        self.event_logs.remove(&log_id);
                    } else if let Some(log) = self.event_logs.get_mut(&log_id) {
                        log.events.truncate(len);
                        log.last_seq = last_seq;
                    }
                }
                Undo::Reopen { log_id, created } => {
                    if created {
                        self.event_logs.remove(&log_id);
                    } else if let Some(log) = self.event_logs.get_mut(&log_id) {
                        log.closed_at = None;
                    }
                }
                Undo::RestoreEventLogs(logs) => self.event_logs.extend(logs),
            }
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn write(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let mut undo = Vec::with_capacity(ops.len());
        for op in ops {
            if let Err(error) = inner.apply(op, &mut undo) {
                inner.undo(undo);
                return Err(error);
            }
        }
        Ok(())
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        Ok(self
            .lock()
            .threads
            .get(thread_id)
            .map(|(_, thread)| thread.clone()))
    }

    async fn threads(&self, resource_id: Option<&str>) -> Result<Vec<ThreadRecord>, StoreError> {
        let inner = self.lock();
        let mut threads: Vec<&(u64, ThreadRecord)> = inner
            .threads
            .values()
            .filter(|(_, thread)| resource_id.is_none_or(|r| thread.resource_id == r))
            .collect();
        threads.sort_by(|(a_created, a), (b_created, b)| {
            b.updated_at
                .cmp(&a.updated_at)
                .then(b_created.cmp(a_created))
        });
        Ok(threads
            .into_iter()
            .map(|(_, thread)| thread.clone())
            .collect())
    }

    async fn messages(&self, thread_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        Ok(self
            .lock()
            .messages
            .get(thread_id)
            .map(|list| list.iter().cloned().collect())
            .unwrap_or_default())
    }

    async fn thread_version(&self, thread_id: &str) -> Result<Option<ThreadVersion>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .threads
            .get(thread_id)
            .map(|(created, _)| ThreadVersion {
                generation: *created,
                messages: inner.messages.get(thread_id).map_or(0, Chunks::len) as u64,
            }))
    }

    async fn resource_ids(&self) -> Result<Vec<String>, StoreError> {
        let inner = self.lock();
        let mut ids: Vec<String> = inner
            .threads
            .values()
            .map(|(_, thread)| thread.resource_id.clone())
            .collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    async fn record(&self, namespace: &str, key: &str) -> Result<Option<Record>, StoreError> {
        Ok(self
            .lock()
            .records
            .get(&(namespace.to_owned(), key.to_owned()))
            .cloned())
    }

    async fn records(&self, namespace: &str, prefix: &str) -> Result<Vec<Record>, StoreError> {
        let inner = self.lock();
        let start = (namespace.to_owned(), prefix.to_owned());
        Ok(inner
            .records
            .range(start..)
            .take_while(|((ns, key), _)| ns == namespace && key.starts_with(prefix))
            .map(|(_, record)| record.clone())
            .collect())
    }

    async fn event_log(&self, log_id: &str) -> Result<Option<EventLogInfo>, StoreError> {
        Ok(self.lock().event_logs.get(log_id).map(|log| EventLogInfo {
            last_seq: log.last_seq,
            closed_at: log.closed_at,
        }))
    }

    async fn events(
        &self,
        log_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedEvent>, StoreError> {
        let inner = self.lock();
        let Some(log) = inner.event_logs.get(log_id) else {
            return Ok(Vec::new());
        };
        let from = log.events.partition_point(|event| event.seq <= after);
        Ok(log.events[from..].iter().take(limit).cloned().collect())
    }
}

/// A [`ThreadLock`] within one process: harnesses that must not own the same thread each
/// take their own handle onto one shared table, with [`MemoryThreadLock::new`] for the
/// first and [`MemoryThreadLock::holder`] for each other.
///
/// A handle that already holds a thread acquires it again; another handle gets
/// [`LockError::Held`]. Dropping a handle releases every thread it holds.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use harness_store::{LockError, MemoryThreadLock, ThreadLock};
///
/// let first = MemoryThreadLock::new();
/// let second = first.holder();
/// first.acquire("t1").await?;
/// assert!(matches!(second.acquire("t1").await, Err(LockError::Held { .. })));
/// first.release("t1").await?;
/// second.acquire("t1").await?;
/// # Ok::<(), LockError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct MemoryThreadLock {
    /// Thread id -> the handle that holds it.
    table: Arc<Mutex<HashMap<String, u64>>>,
    /// This handle's identity.
    id: u64,
}

/// Handle identities, unique in the process.
static NEXT_HOLDER: AtomicU64 = AtomicU64::new(1);

impl MemoryThreadLock {
    /// A handle onto a new, empty table.
    pub fn new() -> Self {
        Self {
            table: Arc::default(),
            id: NEXT_HOLDER.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Another holder on the same table: it is kept off the threads this one holds, and
    /// keeps this one off its own.
    pub fn holder(&self) -> Self {
        Self {
            table: Arc::clone(&self.table),
            id: NEXT_HOLDER.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        // Every change to the table is a single insert or remove: a poisoned lock still
        // guards a consistent table.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for MemoryThreadLock {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for MemoryThreadLock {
    fn drop(&mut self) {
        let id = self.id;
        self.table().retain(|_, holder| *holder != id);
    }
}

#[async_trait]
impl ThreadLock for MemoryThreadLock {
    async fn acquire(&self, thread_id: &str) -> Result<(), LockError> {
        let mut table = self.table();
        match table.get(thread_id) {
            Some(holder) if *holder != self.id => Err(LockError::Held {
                thread_id: thread_id.to_owned(),
                holder: Some("another harness in this process".to_owned()),
            }),
            Some(_) => Ok(()),
            None => {
                table.insert(thread_id.to_owned(), self.id);
                Ok(())
            }
        }
    }

    async fn release(&self, thread_id: &str) -> Result<(), LockError> {
        let mut table = self.table();
        if table.get(thread_id) == Some(&self.id) {
            table.remove(thread_id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_tags::KernelMessage;

    fn message(n: usize) -> StoredMessage {
        StoredMessage {
            id: format!("m{n}"),
            thread_id: "t".into(),
            created_at: 0,
            run_id: None,
            message: KernelMessage::user(n.to_string()),
        }
    }

    fn ids(chunks: &Chunks) -> Vec<String> {
        chunks.iter().map(|m| m.id.clone()).collect()
    }

    #[test]
    fn chunks_keep_order_across_chunks_and_cut_back_in_order() {
        let mut chunks = Chunks::default();
        for n in 0..100 {
            chunks.push(message(n));
        }
        assert_eq!(chunks.len(), 100);
        assert!(
            chunks.chunks.len() > 1,
            "several chunks: {}",
            chunks.chunks.len()
        );
        let cut = chunks.truncate(37);
        assert_eq!(
            cut.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            (37..100).map(|n| format!("m{n}")).collect::<Vec<_>>()
        );
        assert_eq!(
            ids(&chunks),
            (0..37).map(|n| format!("m{n}")).collect::<Vec<_>>()
        );
        chunks.push(message(1000));
        assert_eq!(chunks.len(), 38);
        assert_eq!(ids(&chunks).last().map(String::as_str), Some("m1000"));
        assert!(chunks.truncate(0).len() == 38 && chunks.is_empty());
        assert!(chunks.chunks.is_empty());
    }
}
