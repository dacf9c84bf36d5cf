//! [`SqliteStore`] and [`SqliteThreadLock`]: the embedded, durable store and its
//! cross-process thread lock.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use harness_tags::KernelMessage;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, params};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::{
    LockError, Record, Store, StoreError, StoredMessage, ThreadLock, ThreadRecord, WriteOp,
};

/// The most batches the writer commits in one transaction.
pub const MAX_GROUP: usize = 1024;

/// The most rows (messages, or one per other op) a caller commits on its own thread: its
/// own batch, then whatever other callers queued meanwhile. Larger writes go to the writer
/// thread, so that a caller blocks its runtime thread for at most about a millisecond.
const INLINE_ROWS: usize = 256;

/// WAL pages after which the background checkpointer copies the WAL into the database file
/// (SQLite's own automatic checkpoint, off on the write connection, would run at 1,000, on
/// the committing thread). A checkpoint `fsync`s the WAL and the file; appends rewrite the
/// same few pages, so a longer WAL copies each of them once for more commits.
#[cfg(not(test))]
const CHECKPOINT_PAGES: u32 = 10_000;
#[cfg(test)]
const CHECKPOINT_PAGES: u32 = 100;

/// WAL pages at which the writer copies what the background checkpointer has not yet copied
/// itself (unless a background pass is under way), so that the next transaction starts the
/// WAL over: under a steady stream of appends, the background passes never copy the last
/// frames, and the WAL would grow without bound.
const CHECKPOINT_LIMIT: u32 = 2 * CHECKPOINT_PAGES;

/// WAL pages at which the writer waits for a background pass under way to end, then copies
/// the rest: the bound on the WAL (about 160 MB) when the disk cannot keep up. After a crash,
/// the next open reads the WAL.
const CHECKPOINT_HARD_LIMIT: u32 = 4 * CHECKPOINT_PAGES;

/// Prepared statements kept per connection (the writer uses about 20).
const STATEMENT_CACHE: usize = 32;

/// The file's `application_id`: "HRNS".
const APPLICATION_ID: i64 = 0x4852_4E53;

/// The migrations, in order: entry `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    // v1: threads, messages, plugin records. A thread's `key` numbers it for good
    // (AUTOINCREMENT: never reused); a message's `key` is its thread's key times 2^32 plus
    // its place in the thread (see `message_keys`), so that one b-tree orders messages by
    // thread and append order, and a message costs two b-trees (the table, its id index).
    "CREATE TABLE threads (
         key INTEGER PRIMARY KEY AUTOINCREMENT,
         id TEXT NOT NULL UNIQUE,
         resource_id TEXT NOT NULL,
         title TEXT,
         created_at INTEGER NOT NULL,
         updated_at INTEGER NOT NULL,
         metadata TEXT NOT NULL
     );
     CREATE INDEX threads_by_resource ON threads (resource_id, updated_at);
     CREATE INDEX threads_by_updated ON threads (updated_at);
     CREATE TABLE messages (
         key INTEGER PRIMARY KEY,
         id TEXT NOT NULL UNIQUE,
         created_at INTEGER NOT NULL,
         run_id TEXT,
         message TEXT NOT NULL
     );
     CREATE TABLE records (
         namespace TEXT NOT NULL,
         key TEXT NOT NULL,
         thread_id TEXT REFERENCES threads (id) ON DELETE CASCADE,
         value TEXT NOT NULL,
         PRIMARY KEY (namespace, key)
     ) WITHOUT ROWID;
     CREATE INDEX records_by_thread ON records (thread_id);",
];

/// The tables a usable store has, checked after migrating.
const REQUIRED_TABLES: &[&str] = &["harness_schema", "threads", "messages", "records"];

/// How hard a commit tries to survive a crash. See [`SqliteStore`], "Durability".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous=NORMAL`: acknowledged writes survive the process dying (a panic, an
    /// abort, `SIGKILL`); a power loss may lose the last commits. No `fsync` per commit.
    #[default]
    Process,
    /// `synchronous=FULL`: acknowledged writes also survive a power loss; every group commit
    /// waits for an `fsync`.
    PowerLoss,
}

/// Options of [`SqliteStore::open_with`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How durable a commit is (default [`Durability::Process`]).
    pub durability: Durability,
    /// How many idle read connections are kept (default 4; at least 1).
    pub read_connections: usize,
    /// How long a write (on the writer thread) or a read waits for another process's lock on
    /// the file before failing (default 5 s).
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Process,
            read_connections: 4,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

impl SqliteOptions {
    /// Sets how durable a commit is.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets how many idle read connections are kept.
    pub fn read_connections(mut self, count: usize) -> Self {
        self.read_connections = count.max(1);
        self
    }

    /// Sets how long to wait for another process's lock on the file.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }
}

/// The embedded [`Store`]: one SQLite file in WAL mode, one write connection shared by
/// flat combining (with group commit under contention), checkpoints in the background, a
/// pool of read connections.
///
/// Clones share the file, the writer and the pool. When the last clone is dropped, the
/// writer finishes what is queued and closes the file (the drop waits for it).
///
/// # Writes: flat combining, group commit
/// There is one write connection. A [`Store::write`] that finds it free takes a lease on it
/// and commits its batch itself, on the calling thread, in its own transaction; then it
/// commits whatever other callers queued meanwhile, in groups, and lets go. A write that
/// finds the connection taken queues its batch and waits: the lease holder commits it in the
/// next group. A group of batches (up to [`MAX_GROUP`]) is ONE transaction, each batch in
/// its own savepoint: a batch whose op fails is rolled back to its savepoint and fails
/// alone, the others commit. Every caller is answered only after the COMMIT, so an
/// acknowledged write is on disk.
///
/// Committing on the caller's thread blocks that (runtime) thread for the transaction:
/// about 30 us for a one-message write on a 2-core VM, 0.3 ms for 100 messages. Handing
/// the write to a thread and the answer back would cost about 14 us more, half as much again
/// for a single message. Bigger work goes to a writer thread: a write of more than 256 rows
/// (messages, or one per other op), the queue beyond that many rows, and any wait for another
/// process's lock on the file (the calling thread does not wait for it: the writer thread
/// waits, up to the busy timeout of [`SqliteOptions`]). The lease is released, or handed to the
/// writer thread, only after a look at the queue under its lock, so no queued batch is left
/// without someone to commit it.
///
/// # Durability
/// The file is in WAL mode with `synchronous=NORMAL` by default ([`Durability::Process`]):
/// a commit is a `write()` of the WAL frames into the operating system, without `fsync`.
/// What a caller was told is written survives the process being killed (even with
/// `SIGKILL`), because the kernel holds the data; a power loss or kernel crash can lose the
/// last commits, never the database's consistency. [`Durability::PowerLoss`] uses
/// `synchronous=FULL`: each commit also `fsync`s the WAL, which costs one disk flush per
/// transaction (shared by every batch of a group).
///
/// # Checkpoints
/// A checkpoint copies the WAL into the database file and `fsync`s both, which made SQLite's
/// automatic checkpoint, run by the committing thread, the largest cost of an append. Here
/// a checkpointer thread with its own connection runs passive checkpoints (which block no
/// reader and no writer) once the WAL passes 10,000 pages; at 20,000, the writer copies the
/// last frames itself so that the WAL starts over (a steady stream of appends never lets a
/// background pass catch up), and at 40,000 it waits for a pass under way first: the WAL
/// stays under about 160 MB. After a crash, the next open reads it.
///
/// # Reads
/// Reads run on separate read-only connections (WAL lets them read while the writer
/// writes), kept in a small pool and used from `tokio::task::spawn_blocking`. A read sees
/// every write acknowledged before it started.
///
/// # Schema
/// Tables `threads`, `messages`, `records`, and `harness_schema` (one row per applied
/// migration). A thread's `key` is an `INTEGER PRIMARY KEY AUTOINCREMENT`, never reused. A
/// message's `key` is its thread's key times 2^32 plus its place in the thread (1, 2, ...,
/// the next after the thread's last, found in the write transaction): one rowid b-tree
/// holds each thread's messages together in append order, and an append writes two b-trees
/// (that table and the unique index on message ids). A thread's messages read back with one
/// range scan; deleting a thread deletes its key range. Migrations run in order, in one
/// transaction, when the file is opened. The file's `application_id` marks it as a harness
/// store. A file that is not SQLite, is damaged, or holds another application's tables gives
/// [`StoreError::Corrupt`] naming the file, and is left untouched; a file from a newer
/// harness gives [`StoreError::TooNew`].
///
/// ```no_run
/// # fn main() -> Result<(), harness_core::store::StoreError> {
/// use harness_core::store::{SqliteStore, SqliteThreadLock};
///
/// let store = SqliteStore::open("harness.db")?;
/// let lock: SqliteThreadLock = store.thread_lock();
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

/// What the clones of a store share.
#[derive(Debug)]
struct Shared {
    path: PathBuf,
    options: SqliteOptions,
    writer: Arc<Writer>,
    writer_thread: Option<JoinHandle<()>>,
    checkpoints: Arc<Checkpoints>,
    checkpointer: Option<JoinHandle<()>>,
    readers: Mutex<Vec<Connection>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Readers and the checkpointer first, so that the writer's connection is the last
        // one: closing it then checkpoints the WAL into the file and removes it, and the next
        // open starts fast.
        self.pool().clear();
        self.checkpoints.stop();
        if let Some(checkpointer) = self.checkpointer.take() {
            let _ = checkpointer.join();
        }
        // The writer thread ends once it has committed what it was handed.
        self.writer.queue().closing = true;
        self.writer.wake.notify_one();
        if let Some(writer) = self.writer_thread.take() {
            let _ = writer.join();
        }
    }
}

/// The write side: the one write connection, and the batches waiting for it.
///
/// Whoever holds the *lease* (`Queue::busy`) commits: a caller of `write` on its own thread
/// (see [`Writer::lead`]), or the writer thread once handed the lease. Everyone else queues.
/// The lease passes on or is released only under the queue's lock, after a look at the
/// queue: while anything is queued, someone holds the lease, so no batch is left behind.
#[derive(Debug)]
struct Writer {
    path: PathBuf,
    /// How long the writer thread waits for another process's lock on the file.
    busy_timeout: Duration,
    /// Locked by the lease holder only (so never contended; it makes the connection `Sync`).
    conn: Mutex<WriteConn>,
    queue: Mutex<Queue>,
    /// Wakes the writer thread when it is handed the lease or the store closes.
    wake: Condvar,
    /// Frames in the WAL after the last commit, as the connection's WAL hook saw them.
    frames: Arc<AtomicU32>,
    checkpoints: Arc<Checkpoints>,
}

/// The write connection, with the busy timeout it is set to.
#[derive(Debug)]
struct WriteConn {
    conn: Connection,
    /// Whether a lock held by another process is waited for (the writer thread) or
    /// reported at once (a caller committing on its own thread).
    waits: bool,
}

#[derive(Debug, Default)]
struct Queue {
    /// The lease: someone is committing, and will serve what is queued.
    busy: bool,
    /// The writer thread has been handed the lease.
    handed: bool,
    /// The store is closing: the writer thread ends once idle.
    closing: bool,
    waiting: VecDeque<Request>,
}

impl Queue {
    /// The next group: queued batches from the front, at most [`MAX_GROUP`] of them and, if
    /// `rows` is given, at most that many rows (maybe none).
    fn take_group(&mut self, rows: Option<usize>) -> Vec<Request> {
        let mut group = Vec::new();
        let mut budget = rows.unwrap_or(usize::MAX);
        while group.len() < MAX_GROUP {
            match self.waiting.front() {
                Some(request) if request.rows <= budget => {
                    budget -= request.rows;
                    group.extend(self.waiting.pop_front());
                }
                _ => break,
            }
        }
        group
    }
}

/// The lease, held: on drop (after the last group, or on a panic) it is released if
/// nothing is queued, else handed to the writer thread.
struct Lease<'a> {
    writer: &'a Writer,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut queue = self.writer.queue();
        if queue.waiting.is_empty() {
            queue.busy = false;
        } else {
            queue.handed = true;
            self.writer.wake.notify_one();
        }
    }
}

impl Writer {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Every change to the queue is whole under the lock: a poisoned lock guards a valid
        // queue.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn conn(&self) -> MutexGuard<'_, WriteConn> {
        // A panic mid-transaction leaves it open: `begin` rolls it back.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `request` if someone holds the lease; else takes the lease and gives the
    /// request back, for the caller to [`lead`](Self::lead).
    fn enqueue(&self, request: Request) -> Option<Request> {
        let mut queue = self.queue();
        if queue.busy {
            queue.waiting.push_back(request);
            None
        } else {
            queue.busy = true;
            Some(request)
        }
    }

    /// With the lease: commits `first` on the calling thread, then what other callers
    /// queued meanwhile, in groups, within [`INLINE_ROWS`] rows; leaves the rest, and any
    /// wait for another process's lock on the file, to the writer thread.
    ///
    /// This blocks the caller's thread (a runtime thread, from `write`) for the commits:
    /// about 30 us for one message on a 2-core VM, at most about a millisecond. Waking the
    /// writer thread and being woken back would cost about 14 us more per write.
    fn lead(&self, first: Request) {
        let lease = Lease { writer: self };
        if first.rows > INLINE_ROWS {
            // Dropping the lease hands the batch to the writer thread.
            self.queue().waiting.push_front(first);
            return;
        }
        let mut budget = INLINE_ROWS - first.rows;
        let mut group = vec![first];
        loop {
            if let Err(group) = self.commit(group, false) {
                // Another process is writing: the writer thread waits for it.
                let mut queue = self.queue();
                for request in group.into_iter().rev() {
                    queue.waiting.push_front(request);
                }
                break;
            }
            let mut queue = self.queue();
            group = queue.take_group(Some(budget));
            if group.is_empty() {
                break;
            }
            budget -= group.iter().map(|request| request.rows).sum::<usize>();
        }
        drop(lease);
    }

    /// The writer thread: waits to be handed the lease, then commits group after group
    /// until the queue is empty.
    fn serve(&self) {
        loop {
            {
                let mut queue = self.queue();
                while !queue.handed && !queue.closing {
                    queue = self
                        .wake
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if !queue.handed {
                    return;
                }
                queue.handed = false;
            }
            let lease = Lease { writer: self };
            loop {
                let group = self.queue().take_group(None);
                if group.is_empty() {
                    break;
                }
                // Waiting for the file's lock, the commit never gives the group back. Should
                // it panic, its callers are told the writer stopped (their replies are
                // dropped) and the thread goes on with the rest.
                let commit = std::panic::AssertUnwindSafe(|| self.commit(group, true));
                let _ = std::panic::catch_unwind(commit);
            }
            drop(lease);
        }
    }

    /// Commits `group` in one transaction and answers its callers. Without `wait`, gives
    /// the group back untouched if another connection holds the file's write lock.
    fn commit(&self, group: Vec<Request>, wait: bool) -> Result<(), Vec<Request>> {
        let mut guard = self.conn();
        let write = &mut *guard;
        if write.waits != wait {
            let timeout = if wait {
                self.busy_timeout
            } else {
                Duration::ZERO
            };
            if let Err(error) = write.conn.busy_timeout(timeout) {
                answer(group, &Err(sql_error(&self.path, error)));
                return Ok(());
            }
            write.waits = wait;
        }
        let conn = &write.conn;
        match begin(conn, &self.path) {
            Ok(true) => {}
            Ok(false) if !wait => return Err(group),
            Ok(false) => {
                let error = StoreError::Backend(format!(
                    "`{}` stayed locked by another process for {:?}",
                    self.path.display(),
                    self.busy_timeout
                ));
                answer(group, &Err(error));
                return Ok(());
            }
            Err(error) => {
                answer(group, &Err(error));
                return Ok(());
            }
        }
        let results = match commit_group(conn, &self.path, &group) {
            Ok(results) => results,
            Err(error) => {
                if !conn.is_autocommit() {
                    let _ = run(conn, &self.path, "ROLLBACK");
                }
                vec![Err(error); group.len()]
            }
        };
        for (request, result) in group.into_iter().zip(results) {
            // The caller may have stopped waiting; the write stands either way.
            let _ = request.reply.send(result);
        }
        self.checkpoints
            .after_commit(conn, &self.path, self.frames.load(Ordering::Relaxed));
        Ok(())
    }
}

/// Answers every caller of `group` with `result`.
fn answer(group: Vec<Request>, result: &Result<(), StoreError>) {
    for request in group {
        let _ = request.reply.send(result.clone());
    }
}

/// The background checkpointer's state, shared with the writer.
#[derive(Debug, Default)]
struct Checkpoints {
    state: Mutex<CheckpointState>,
    /// Wakes the checkpointer.
    wake: Condvar,
    /// Wakes a writer waiting for a pass to end.
    idle: Condvar,
}

#[derive(Debug, Default)]
struct CheckpointState {
    /// The writer asked for a pass.
    requested: bool,
    /// A pass is under way.
    running: bool,
    /// The store is closing.
    stop: bool,
}

impl Checkpoints {
    fn state(&self) -> MutexGuard<'_, CheckpointState> {
        // Three flags, each written whole: a poisoned lock guards a valid state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stop(&self) {
        self.state().stop = true;
        self.wake.notify_one();
    }

    /// After a commit that left `frames` frames in the WAL: asks for a background pass, or
    /// copies the rest on the writer's connection once the WAL reaches [`CHECKPOINT_LIMIT`].
    fn after_commit(&self, conn: &Connection, path: &Path, frames: u32) {
        if frames < CHECKPOINT_PAGES {
            return;
        }
        let mut state = self.state();
        if state.running && frames >= CHECKPOINT_HARD_LIMIT {
            while state.running {
                state = self
                    .idle
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
        if state.running {
            return;
        }
        if frames >= CHECKPOINT_LIMIT {
            // Holding `state` keeps a background pass from starting meanwhile. The passes
            // have copied all but the last frames, so this is short.
            if let Err(error) = checkpoint(conn, path) {
                tracing::warn!(%error, "checkpoint on the SQLite writer failed");
            }
            return;
        }
        if !state.requested {
            state.requested = true;
            self.wake.notify_one();
        }
    }
}

/// A passive checkpoint: copies the WAL frames no reader still needs into the database file
/// and `fsync`s it, without waiting for (or blocking) readers and writers.
fn checkpoint(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    conn.prepare_cached("PRAGMA wal_checkpoint(PASSIVE)")
        .and_then(|mut statement| statement.query_row([], |_| Ok(())))
        .map_err(|error| sql_error(path, error))
}

/// The checkpointer thread: one passive checkpoint per request of the writer, on its own
/// connection, so that the copying and the `fsync`s overlap with the commits.
fn checkpoint_loop(path: &Path, synchronous: &str, checkpoints: &Checkpoints) {
    let mut conn: Option<Connection> = None;
    loop {
        {
            let mut state = checkpoints.state();
            while !state.requested && !state.stop {
                state = checkpoints
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.stop {
                return;
            }
            state.requested = false;
            state.running = true;
        }
        if conn.is_none() {
            match open_checkpointer(path, synchronous) {
                Ok(opened) => conn = Some(opened),
                Err(error) => tracing::warn!(%error, "the SQLite checkpointer cannot open"),
            }
        }
        if let Some(conn) = &conn
            && let Err(error) = checkpoint(conn, path)
        {
            tracing::warn!(%error, "background SQLite checkpoint failed");
        }
        checkpoints.state().running = false;
        checkpoints.idle.notify_all();
    }
}

/// The checkpointer's connection: read-write, with the writer's `synchronous` (a checkpoint
/// syncs as its connection says), and the WAL opened by a first read.
fn open_checkpointer(path: &Path, synchronous: &str) -> Result<Connection, StoreError> {
    let sql = |error| sql_error(path, error);
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {synchronous}; SELECT count(*) FROM sqlite_schema;"
    ))
    .map_err(sql)?;
    Ok(conn)
}

/// One caller's batch, on its way to the writer.
struct Request {
    ops: Vec<Op>,
    /// Messages, plus one for every other op: a measure of the time to commit it.
    rows: usize,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

impl Request {
    fn new(ops: Vec<Op>, reply: oneshot::Sender<Result<(), StoreError>>) -> Self {
        let rows = ops
            .iter()
            .map(|op| match op {
                Op::Append { messages, .. } => messages.len().max(1),
                _ => 1,
            })
            .sum();
        Self { ops, rows, reply }
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("ops", &self.ops.len())
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

/// A [`WriteOp`] with its JSON already serialized (by the caller, off the writer thread).
enum Op {
    CreateThread {
        id: String,
        resource_id: String,
        title: Option<String>,
        created_at: i64,
        updated_at: i64,
        metadata: String,
    },
    UpdateThread {
        id: String,
        title: Option<String>,
        updated_at: i64,
        metadata: String,
    },
    DeleteThread {
        id: String,
    },
    Append {
        thread_id: String,
        messages: Vec<Message>,
    },
    PutRecord {
        namespace: String,
        key: String,
        thread_id: Option<String>,
        value: String,
    },
    DeleteRecord {
        namespace: String,
        key: String,
    },
}

/// A message row.
struct Message {
    id: String,
    created_at: i64,
    run_id: Option<String>,
    json: String,
}

fn to_json<T: serde::Serialize + ?Sized>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|error| StoreError::Backend(format!("{what} cannot be serialized: {error}")))
}

impl Op {
    fn prepare(op: WriteOp) -> Result<Self, StoreError> {
        Ok(match op {
            WriteOp::CreateThread(thread) => Op::CreateThread {
                metadata: to_json(&thread.metadata, "thread metadata")?,
                id: thread.id,
                resource_id: thread.resource_id,
                title: thread.title,
                created_at: thread.created_at,
                updated_at: thread.updated_at,
            },
            WriteOp::UpdateThread(thread) => Op::UpdateThread {
                metadata: to_json(&thread.metadata, "thread metadata")?,
                id: thread.id,
                title: thread.title,
                updated_at: thread.updated_at,
            },
            WriteOp::DeleteThread { thread_id } => Op::DeleteThread { id: thread_id },
            WriteOp::AppendMessages {
                thread_id,
                messages,
            } => Op::Append {
                thread_id,
                messages: messages
                    .into_iter()
                    .map(|message| {
                        Ok(Message {
                            json: to_json(&message.message, "a message")?,
                            id: message.id,
                            created_at: message.created_at,
                            run_id: message.run_id,
                        })
                    })
                    .collect::<Result<_, StoreError>>()?,
            },
            WriteOp::PutRecord {
                namespace,
                key,
                thread_id,
                value,
            } => Op::PutRecord {
                value: to_json(&value, "a record")?,
                namespace,
                key,
                thread_id,
            },
            WriteOp::DeleteRecord { namespace, key } => Op::DeleteRecord { namespace, key },
        })
    }
}

/// Turns a SQLite error into a [`StoreError`] that names the file.
fn sql_error(path: &Path, error: rusqlite::Error) -> StoreError {
    let code = error.sqlite_error_code();
    match code {
        Some(ErrorCode::NotADatabase) => StoreError::Corrupt {
            path: path.display().to_string(),
            reason: "it is not a SQLite database; point the harness at another file, or move \
                     this one away"
                .to_owned(),
        },
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.display().to_string(),
            reason: format!(
                "the database is damaged ({error}); restore it from a backup, or move it away \
                 to start afresh"
            ),
        },
        _ => StoreError::Backend(format!("`{}`: {error}", path.display())),
    }
}

fn corrupt(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// What an opened file holds.
enum Contents {
    /// No tables: a new file.
    Empty,
    /// A harness store at this schema version.
    Harness(i64),
}

/// Looks at a file without changing it: is it empty, a harness store (which version), or
/// something else (an error)?
fn inspect(conn: &Connection, path: &Path) -> Result<Contents, StoreError> {
    let sql = |error| sql_error(path, error);
    let application_id: i64 = conn
        .query_row("PRAGMA application_id", [], |row| row.get(0))
        .map_err(sql)?;
    if application_id != 0 && application_id != APPLICATION_ID {
        return Err(corrupt(
            path,
            format!(
                "it is a SQLite database of another application (application id \
                 {application_id:#x}); point the harness at another file"
            ),
        ));
    }
    let mut statement = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' \
             ESCAPE '\\' ORDER BY name",
        )
        .map_err(sql)?;
    let tables: Vec<String> = statement
        .query_map([], |row| row.get(0))
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    if tables.is_empty() {
        return Ok(Contents::Empty);
    }
    if !tables.iter().any(|table| table == "harness_schema") {
        let mut listed = tables
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if tables.len() > 5 {
            listed.push_str(", ...");
        }
        return Err(corrupt(
            path,
            format!(
                "it is a SQLite database of another application (tables: {listed}); point the \
                 harness at another file"
            ),
        ));
    }
    let version: Option<i64> = conn
        .query_row("SELECT max(version) FROM harness_schema", [], |row| {
            row.get(0)
        })
        .map_err(sql)?;
    match version {
        Some(version) => Ok(Contents::Harness(version)),
        None => Err(corrupt(
            path,
            "its schema table `harness_schema` is empty; restore it from a backup, or move it \
             away to start afresh",
        )),
    }
}

/// Brings the schema to [`SqliteStore::SCHEMA_VERSION`], in one transaction.
fn migrate(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let sql = |error| sql_error(path, error);
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql)?;
    let outcome = (|| {
        // Looked at again inside the transaction: another process may have migrated meanwhile.
        let current = match inspect(conn, path)? {
            Contents::Empty => {
                conn.execute_batch(&format!(
                    "PRAGMA application_id = {APPLICATION_ID};
                     CREATE TABLE harness_schema (
                         version INTEGER PRIMARY KEY NOT NULL,
                         applied_at INTEGER NOT NULL
                     );"
                ))
                .map_err(sql)?;
                0
            }
            Contents::Harness(version) => version,
        };
        if current > SqliteStore::SCHEMA_VERSION {
            return Err(too_new(path, current));
        }
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            let version = index as i64 + 1;
            if version <= current {
                continue;
            }
            conn.execute_batch(migration).map_err(sql)?;
            conn.execute(
                "INSERT INTO harness_schema (version, applied_at) VALUES (?1, ?2)",
                params![version, now_ms()],
            )
            .map_err(sql)?;
        }
        for table in REQUIRED_TABLES {
            let found: Option<i64> = conn
                .query_row(
                    "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                    [table],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql)?;
            if found.is_none() {
                return Err(corrupt(
                    path,
                    format!(
                        "its table `{table}` is missing; restore it from a backup, or move it \
                         away to start afresh"
                    ),
                ));
            }
        }
        Ok(())
    })();
    match outcome {
        Ok(()) => conn.execute_batch("COMMIT").map_err(sql),
        Err(error) => {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            Err(error)
        }
    }
}

fn too_new(path: &Path, found: i64) -> StoreError {
    StoreError::TooNew {
        path: path.display().to_string(),
        found,
        supported: SqliteStore::SCHEMA_VERSION,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as i64)
        .unwrap_or(0)
}

impl SqliteStore {
    /// The schema version this build writes and reads.
    pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

    /// Opens (or creates) a store at `path` with default [`SqliteOptions`].
    ///
    /// Blocks while it opens the file and migrates the schema (quick, unless another
    /// process holds the file's write lock).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if the file is not SQLite, is damaged, or belongs to another
    /// application (it is then left as it was); [`StoreError::TooNew`] if a newer harness
    /// wrote it; [`StoreError::Backend`] for I/O failures.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens (or creates) a store at `path` with `options`. See [`SqliteStore::open`].
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let sql = |error| sql_error(&path, error);
        let mut conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        conn.busy_timeout(options.busy_timeout).map_err(sql)?;
        // Refuse foreign, damaged and newer files before changing anything in them.
        if let Contents::Harness(version) = inspect(&conn, &path)?
            && version > Self::SCHEMA_VERSION
        {
            return Err(too_new(&path, version));
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend(format!(
                "`{}` cannot use WAL journaling (it is in `{mode}` mode); use a file on a local \
                 disk",
                path.display()
            )));
        }
        let synchronous = match options.durability {
            Durability::Process => "NORMAL",
            Durability::PowerLoss => "FULL",
        };
        conn.execute_batch(&format!(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = {synchronous};"
        ))
        .map_err(sql)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        migrate(&conn, &path)?;
        // The WAL hook replaces SQLite's automatic checkpoint on this connection: checkpoints
        // run on the checkpointer thread (see `Checkpoints::after_commit`).
        let frames = Arc::new(AtomicU32::new(0));
        let hook_frames = Arc::clone(&frames);
        conn.wal_hook(Some(
            move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
                hook_frames.store(u32::try_from(pages).unwrap_or(0), Ordering::Relaxed);
                Ok(())
            },
        ))
        .map_err(sql)?;

        let spawn_failed = |what: &str, error: std::io::Error| {
            StoreError::Backend(format!(
                "`{}`: cannot start the {what} thread: {error}",
                path.display()
            ))
        };
        let checkpoints = Arc::new(Checkpoints::default());
        let checkpointer = {
            let path = path.clone();
            let checkpoints = Arc::clone(&checkpoints);
            std::thread::Builder::new()
                .name("harness-sqlite-checkpoint".to_owned())
                .spawn(move || checkpoint_loop(&path, synchronous, &checkpoints))
                .map_err(|error| spawn_failed("checkpointer", error))?
        };
        let writer = Arc::new(Writer {
            path: path.clone(),
            busy_timeout: options.busy_timeout,
            conn: Mutex::new(WriteConn { conn, waits: true }),
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            frames,
            checkpoints: Arc::clone(&checkpoints),
        });
        let writer_thread = {
            let writer = Arc::clone(&writer);
            std::thread::Builder::new()
                .name("harness-sqlite-writer".to_owned())
                .spawn(move || writer.serve())
        };
        let writer_thread = match writer_thread {
            Ok(writer_thread) => writer_thread,
            Err(error) => {
                checkpoints.stop();
                let _ = checkpointer.join();
                return Err(spawn_failed("writer", error));
            }
        };
        Ok(Self {
            shared: Arc::new(Shared {
                path,
                options,
                writer,
                writer_thread: Some(writer_thread),
                checkpoints,
                checkpointer: Some(checkpointer),
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// A new [`SqliteThreadLock`] for this database (lock files in `<path>.locks/`). Each
    /// harness should take its own.
    pub fn thread_lock(&self) -> SqliteThreadLock {
        SqliteThreadLock::for_database(&self.shared.path)
    }

    /// Runs a read on a pooled read connection, on the blocking pool when there is a tokio
    /// runtime (inline otherwise).
    async fn read<T, F>(&self, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Path) -> Result<T, StoreError> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        let run = move || {
            let conn = shared.reader()?;
            let result = read(&conn, &shared.path);
            shared.give_back(conn);
            result
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime.spawn_blocking(run).await.map_err(|error| {
                StoreError::Backend(format!(
                    "a read of `{}` failed: {error}",
                    self.shared.path.display()
                ))
            })?,
            Err(_) => run(),
        }
    }
}

impl Shared {
    fn pool(&self) -> MutexGuard<'_, Vec<Connection>> {
        // The pool is only pushed to and popped from: a poisoned lock guards a valid list.
        self.readers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle read connection, or a new one.
    fn reader(&self) -> Result<Connection, StoreError> {
        if let Some(conn) = self.pool().pop() {
            return Ok(conn);
        }
        let sql = |error| sql_error(&self.path, error);
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        conn.busy_timeout(self.options.busy_timeout).map_err(sql)?;
        Ok(conn)
    }

    fn give_back(&self, conn: Connection) {
        let mut pool = self.pool();
        if pool.len() < self.options.read_connections {
            pool.push(conn);
        }
    }
}

/// Opens the write transaction: `Ok(false)` if another connection holds the file's write
/// lock (after the busy timeout, if the connection waits).
fn begin(conn: &Connection, path: &Path) -> Result<bool, StoreError> {
    if !conn.is_autocommit() {
        // Left open by a panic in the middle of a group.
        run(conn, path, "ROLLBACK")?;
    }
    match conn
        .prepare_cached("BEGIN IMMEDIATE")
        .and_then(|mut statement| statement.execute([]))
    {
        Ok(_) => Ok(true),
        Err(error) if error.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => Ok(false),
        Err(error) => Err(sql_error(path, error)),
    }
}

/// Runs a statement without parameters through the statement cache (transaction control:
/// parsing it anew each time costs more than running it).
fn run(conn: &Connection, path: &Path, sql: &str) -> Result<(), StoreError> {
    conn.prepare_cached(sql)
        .and_then(|mut statement| statement.execute([]))
        .map(drop)
        .map_err(|error| sql_error(path, error))
}

/// Commits a group of batches in the transaction [`begin`] opened, each in a savepoint
/// when there are several. `Err` means the whole transaction failed (every batch fails with
/// it); `Ok` holds each batch's own outcome, and the successful ones are committed.
fn commit_group(
    conn: &Connection,
    path: &Path,
    group: &[Request],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    if let [only] = group {
        let result = apply_all(conn, path, &only.ops);
        if result.is_err() {
            if !conn.is_autocommit() {
                run(conn, path, "ROLLBACK")?;
            }
            return Ok(vec![result]);
        }
        run(conn, path, "COMMIT")?;
        return Ok(vec![result]);
    }
    let mut results = Vec::with_capacity(group.len());
    for request in group {
        run(conn, path, "SAVEPOINT batch")?;
        let result = apply_all(conn, path, &request.ops);
        if let Err(error) = &result {
            if conn.is_autocommit() {
                // SQLite rolled the whole transaction back (I/O error, disk full): nothing
                // of the group is written.
                return Err(error.clone());
            }
            run(conn, path, "ROLLBACK TO batch")?;
        }
        run(conn, path, "RELEASE batch")?;
        results.push(result);
    }
    run(conn, path, "COMMIT")?;
    Ok(results)
}

/// The message keys of the thread with key `thread`: its first and last possible.
fn message_keys(thread: i64, path: &Path) -> Result<(i64, i64), StoreError> {
    // Thread keys count the threads ever created: 2^31 of them would take a thread a
    // millisecond for 68 years.
    match thread.checked_mul(1 << 32) {
        Some(first) if thread > 0 => Ok((first, first | 0xFFFF_FFFF)),
        _ => Err(StoreError::Backend(format!(
            "`{}`: thread key {thread} is out of range",
            path.display()
        ))),
    }
}

/// Applies one batch's ops, in order, stopping at the first failure.
fn apply_all(conn: &Connection, path: &Path, ops: &[Op]) -> Result<(), StoreError> {
    let sql = |error| sql_error(path, error);
    let thread_key = |id: &str| -> Result<Option<i64>, StoreError> {
        conn.prepare_cached("SELECT key FROM threads WHERE id = ?1")
            .and_then(|mut statement| statement.query_row([id], |row| row.get(0)).optional())
            .map_err(sql)
    };
    for op in ops {
        match op {
            Op::CreateThread {
                id,
                resource_id,
                title,
                created_at,
                updated_at,
                metadata,
            } => {
                let inserted = conn
                    .prepare_cached(
                        "INSERT INTO threads (id, resource_id, title, created_at, updated_at, \
                         metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
                    )
                    .and_then(|mut statement| {
                        statement.execute(params![
                            id,
                            resource_id,
                            title,
                            created_at,
                            updated_at,
                            metadata
                        ])
                    })
                    .map_err(sql)?;
                if inserted == 0 {
                    return Err(StoreError::ThreadExists(id.clone()));
                }
            }
            Op::UpdateThread {
                id,
                title,
                updated_at,
                metadata,
            } => {
                let updated = conn
                    .prepare_cached(
                        "UPDATE threads SET title = ?2, updated_at = ?3, metadata = ?4 \
                         WHERE id = ?1",
                    )
                    .and_then(|mut statement| {
                        statement.execute(params![id, title, updated_at, metadata])
                    })
                    .map_err(sql)?;
                if updated == 0 {
                    return Err(StoreError::ThreadNotFound(id.clone()));
                }
            }
            Op::DeleteThread { id } => {
                let Some(thread) = thread_key(id)? else {
                    return Err(StoreError::ThreadNotFound(id.clone()));
                };
                let (first, last) = message_keys(thread, path)?;
                conn.prepare_cached("DELETE FROM messages WHERE key BETWEEN ?1 AND ?2")
                    .and_then(|mut statement| statement.execute([first, last]))
                    .map_err(sql)?;
                // Thread-bound records go with it (ON DELETE CASCADE).
                conn.prepare_cached("DELETE FROM threads WHERE key = ?1")
                    .and_then(|mut statement| statement.execute([thread]))
                    .map_err(sql)?;
            }
            Op::Append {
                thread_id,
                messages,
            } => {
                let Some(thread) = thread_key(thread_id)? else {
                    return Err(StoreError::ThreadNotFound(thread_id.clone()));
                };
                if messages.is_empty() {
                    continue;
                }
                // After the thread's last message: the right edge of its key range, one
                // descent of the table's b-tree.
                let (first, last) = message_keys(thread, path)?;
                let mut key: i64 = conn
                    .prepare_cached(
                        "SELECT key FROM messages WHERE key BETWEEN ?1 AND ?2 \
                         ORDER BY key DESC LIMIT 1",
                    )
                    .and_then(|mut statement| {
                        statement
                            .query_row([first, last], |row| row.get(0))
                            .optional()
                    })
                    .map_err(sql)?
                    .unwrap_or(first);
                let mut statement = conn
                    .prepare_cached(
                        "INSERT INTO messages (key, id, created_at, run_id, message) \
                         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO NOTHING",
                    )
                    .map_err(sql)?;
                for message in messages {
                    if key == last {
                        return Err(StoreError::Backend(format!(
                            "`{}`: thread `{thread_id}` holds as many messages as it can",
                            path.display()
                        )));
                    }
                    key += 1;
                    let inserted = statement
                        .execute(params![
                            key,
                            message.id,
                            message.created_at,
                            message.run_id,
                            message.json
                        ])
                        .map_err(sql)?;
                    if inserted == 0 {
                        return Err(StoreError::MessageExists(message.id.clone()));
                    }
                }
            }
            Op::PutRecord {
                namespace,
                key,
                thread_id,
                value,
            } => {
                if let Some(thread_id) = thread_id
                    && thread_key(thread_id)?.is_none()
                {
                    return Err(StoreError::ThreadNotFound(thread_id.clone()));
                }
                conn.prepare_cached(
                    "INSERT INTO records (namespace, key, thread_id, value) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (namespace, key) DO UPDATE SET thread_id = excluded.thread_id, \
                     value = excluded.value",
                )
                .and_then(|mut statement| statement.execute(params![namespace, key, thread_id, value]))
                .map_err(sql)?;
            }
            Op::DeleteRecord { namespace, key } => {
                conn.prepare_cached("DELETE FROM records WHERE namespace = ?1 AND key = ?2")
                    .and_then(|mut statement| statement.execute([namespace, key]))
                    .map_err(sql)?;
            }
        }
    }
    Ok(())
}

/// A thread row, as read.
fn thread_from_row(row: &rusqlite::Row<'_>, path: &Path) -> Result<ThreadRecord, StoreError> {
    let sql = |error| sql_error(path, error);
    let id: String = row.get(0).map_err(sql)?;
    let metadata: String = row.get(5).map_err(sql)?;
    let metadata: Map<String, Value> = serde_json::from_str(&metadata).map_err(|error| {
        corrupt(
            path,
            format!("the metadata of thread `{id}` cannot be read ({error})"),
        )
    })?;
    Ok(ThreadRecord {
        resource_id: row.get(1).map_err(sql)?,
        title: row.get(2).map_err(sql)?,
        created_at: row.get(3).map_err(sql)?,
        updated_at: row.get(4).map_err(sql)?,
        metadata,
        id,
    })
}

/// A record row, as read.
fn record_from_row(
    row: &rusqlite::Row<'_>,
    path: &Path,
    namespace: &str,
) -> Result<Record, StoreError> {
    let sql = |error| sql_error(path, error);
    let key: String = row.get(0).map_err(sql)?;
    let value: String = row.get(2).map_err(sql)?;
    let value: Value = serde_json::from_str(&value).map_err(|error| {
        corrupt(
            path,
            format!("the record `{namespace}/{key}` cannot be read ({error})"),
        )
    })?;
    Ok(Record {
        thread_id: row.get(1).map_err(sql)?,
        key,
        value,
    })
}

const THREAD_COLUMNS: &str = "id, resource_id, title, created_at, updated_at, metadata";

/// Collects a query's rows through a fallible conversion.
fn collect_rows<T>(
    mut rows: rusqlite::Rows<'_>,
    path: &Path,
    mut convert: impl FnMut(&rusqlite::Row<'_>) -> Result<Option<T>, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(|error| sql_error(path, error))? {
        match convert(row)? {
            Some(item) => out.push(item),
            None => break,
        }
    }
    Ok(out)
}

#[async_trait]
impl Store for SqliteStore {
    async fn write(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        let ops = ops
            .into_iter()
            .map(Op::prepare)
            .collect::<Result<Vec<_>, _>>()?;
        let stopped = || {
            StoreError::Backend(format!(
                "the writer of `{}` has stopped; reopen the store",
                self.shared.path.display()
            ))
        };
        // A write committed inline completes without yielding: a task writing in a loop
        // yields to the others on its runtime thread when its budget runs out.
        tokio::task::coop::consume_budget().await;
        let (reply, mut answer) = oneshot::channel();
        let request = Request::new(ops, reply);
        if let Some(request) = self.shared.writer.enqueue(request) {
            self.shared.writer.lead(request);
            if let Ok(result) = answer.try_recv() {
                return result;
            }
        }
        answer.await.map_err(|_| stopped())?
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.read(move |conn, path| {
            let mut statement = conn
                .prepare_cached(&format!(
                    "SELECT {THREAD_COLUMNS} FROM threads WHERE id = ?1"
                ))
                .map_err(|error| sql_error(path, error))?;
            let rows = statement
                .query([&thread_id])
                .map_err(|error| sql_error(path, error))?;
            let found = collect_rows(rows, path, |row| thread_from_row(row, path).map(Some))?;
            Ok(found.into_iter().next())
        })
        .await
    }

    async fn threads(&self, resource_id: Option<&str>) -> Result<Vec<ThreadRecord>, StoreError> {
        let resource_id = resource_id.map(str::to_owned);
        self.read(move |conn, path| {
            let sql = |error| sql_error(path, error);
            match &resource_id {
                Some(resource_id) => {
                    let mut statement = conn
                        .prepare_cached(&format!(
                            "SELECT {THREAD_COLUMNS} FROM threads WHERE resource_id = ?1 \
                             ORDER BY updated_at DESC, rowid DESC"
                        ))
                        .map_err(sql)?;
                    let rows = statement.query([resource_id]).map_err(sql)?;
                    collect_rows(rows, path, |row| thread_from_row(row, path).map(Some))
                }
                None => {
                    let mut statement = conn
                        .prepare_cached(&format!(
                            "SELECT {THREAD_COLUMNS} FROM threads \
                             ORDER BY updated_at DESC, rowid DESC"
                        ))
                        .map_err(sql)?;
                    let rows = statement.query([]).map_err(sql)?;
                    collect_rows(rows, path, |row| thread_from_row(row, path).map(Some))
                }
            }
        })
        .await
    }

    async fn messages(&self, thread_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.read(move |conn, path| {
            let sql = |error| sql_error(path, error);
            let mut statement = conn
                .prepare_cached(
                    "SELECT m.id, m.created_at, m.run_id, m.message FROM threads AS t \
                     JOIN messages AS m ON m.key BETWEEN t.key << 32 AND (t.key << 32) + \
                     0xFFFFFFFF WHERE t.id = ?1 ORDER BY m.key",
                )
                .map_err(sql)?;
            let rows = statement.query([&thread_id]).map_err(sql)?;
            collect_rows(rows, path, |row| {
                let id: String = row.get(0).map_err(sql)?;
                let json: String = row.get(3).map_err(sql)?;
                let message: KernelMessage = serde_json::from_str(&json).map_err(|error| {
                    corrupt(path, format!("the message `{id}` cannot be read ({error})"))
                })?;
                Ok(Some(StoredMessage {
                    thread_id: thread_id.clone(),
                    created_at: row.get(1).map_err(sql)?,
                    run_id: row.get(2).map_err(sql)?,
                    message,
                    id,
                }))
            })
        })
        .await
    }

    async fn resource_ids(&self) -> Result<Vec<String>, StoreError> {
        self.read(move |conn, path| {
            let sql = |error| sql_error(path, error);
            let mut statement = conn
                .prepare_cached("SELECT DISTINCT resource_id FROM threads ORDER BY resource_id")
                .map_err(sql)?;
            let rows = statement.query([]).map_err(sql)?;
            collect_rows(rows, path, |row| row.get(0).map(Some).map_err(sql))
        })
        .await
    }

    async fn record(&self, namespace: &str, key: &str) -> Result<Option<Record>, StoreError> {
        let (namespace, key) = (namespace.to_owned(), key.to_owned());
        self.read(move |conn, path| {
            let sql = |error| sql_error(path, error);
            let mut statement = conn
                .prepare_cached(
                    "SELECT key, thread_id, value FROM records WHERE namespace = ?1 AND key = ?2",
                )
                .map_err(sql)?;
            let rows = statement.query([&namespace, &key]).map_err(sql)?;
            let found = collect_rows(rows, path, |row| {
                record_from_row(row, path, &namespace).map(Some)
            })?;
            Ok(found.into_iter().next())
        })
        .await
    }

    async fn records(&self, namespace: &str, prefix: &str) -> Result<Vec<Record>, StoreError> {
        let (namespace, prefix) = (namespace.to_owned(), prefix.to_owned());
        self.read(move |conn, path| {
            let sql = |error| sql_error(path, error);
            // Keys sort bytewise, so the keys with the prefix are the ones from the prefix on,
            // up to the first that does not start with it.
            let mut statement = conn
                .prepare_cached(
                    "SELECT key, thread_id, value FROM records WHERE namespace = ?1 AND key >= ?2 \
                     ORDER BY key",
                )
                .map_err(sql)?;
            let rows = statement.query([&namespace, &prefix]).map_err(sql)?;
            collect_rows(rows, path, |row| {
                let key: String = row.get(0).map_err(sql)?;
                if !key.starts_with(prefix.as_str()) {
                    return Ok(None);
                }
                record_from_row(row, path, &namespace).map(Some)
            })
        })
        .await
    }
}

/// A [`ThreadLock`] that works across processes: one lock file per thread in a directory
/// beside the database (`<db>.locks/`), held with an operating-system file lock
/// ([`File::try_lock`]) for as long as the thread is held.
///
/// The operating system releases the lock when the holder's process dies, however it dies
/// (`SIGKILL` included), so a crashed harness never leaves a thread locked. The holder
/// writes its process id into the file, and [`LockError::Held`] reports it.
///
/// Each harness takes its own `SqliteThreadLock`: two of them exclude each other even in
/// one process. One that already holds a thread acquires it again; dropping it releases
/// everything it holds. Lock files stay in the directory after release (removing them
/// would race with a process opening them); they are empty of meaning once unlocked.
///
/// File names are the thread id with every character other than ASCII letters, digits,
/// `-` and `_` replaced by `_` (at most 64 of them), then a hash of the whole id, so that
/// distinct ids never share a file, even on case-insensitive file systems.
#[derive(Debug)]
pub struct SqliteThreadLock {
    dir: PathBuf,
    held: Mutex<HashMap<String, File>>,
}

impl SqliteThreadLock {
    /// A lock for the database at `db_path`, with its lock files in `<db_path>.locks/`.
    pub fn for_database(db_path: impl AsRef<Path>) -> Self {
        let mut dir = db_path.as_ref().as_os_str().to_owned();
        dir.push(".locks");
        Self::in_directory(PathBuf::from(dir))
    }

    /// A lock with its lock files in `dir` (created when first needed).
    pub fn in_directory(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            held: Mutex::new(HashMap::new()),
        }
    }

    /// The directory of the lock files.
    pub fn directory(&self) -> &Path {
        &self.dir
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, File>> {
        // The map is only inserted into and removed from: a poisoned lock guards a valid map.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The name of a thread's lock file: a readable, safe part and a hash of the whole id.
fn lock_file_name(thread_id: &str) -> String {
    let readable: String = thread_id
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{readable}-{:016x}.lock", fnv1a(thread_id.as_bytes()))
}

/// 64-bit FNV-1a: stable across builds and platforms, unlike the standard hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Who holds a lock, from its file: `process <pid>`, marked when it is this process.
fn read_holder(mut file: &File) -> Option<String> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text == holder_line().trim() {
        return Some(format!("{text}, this process"));
    }
    Some(text.to_owned())
}

fn holder_line() -> String {
    format!("process {}\n", std::process::id())
}

#[async_trait]
impl ThreadLock for SqliteThreadLock {
    async fn acquire(&self, thread_id: &str) -> Result<(), LockError> {
        let mut held = self.held();
        if held.contains_key(thread_id) {
            return Ok(());
        }
        let path = self.dir.join(lock_file_name(thread_id));
        let failed = |what: &str, error: std::io::Error| LockError::Failed {
            thread_id: thread_id.to_owned(),
            reason: format!("{what} `{}`: {error}", path.display()),
        };
        std::fs::create_dir_all(&self.dir)
            .map_err(|error| failed("cannot create the lock directory for", error))?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|error| failed("cannot open the lock file", error))?;
        match file.try_lock() {
            Ok(()) => {
                // Who holds it, for the other side's error message; the lock stands even
                // if this cannot be written.
                let _ = file
                    .set_len(0)
                    .and_then(|()| file.write_all(holder_line().as_bytes()));
                held.insert(thread_id.to_owned(), file);
                Ok(())
            }
            Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held {
                thread_id: thread_id.to_owned(),
                holder: read_holder(&file),
            }),
            Err(std::fs::TryLockError::Error(error)) => {
                Err(failed("cannot lock the lock file", error))
            }
        }
    }

    async fn release(&self, thread_id: &str) -> Result<(), LockError> {
        // Closing the file releases the operating-system lock.
        self.held().remove(thread_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn lock_file_names_are_safe_and_distinct() {
        let names = [
            lock_file_name("thread-1"),
            lock_file_name("Thread-1"),
            lock_file_name("a/b"),
            lock_file_name("a_b"),
            lock_file_name("../../etc/passwd"),
            lock_file_name(""),
            lock_file_name(&"x".repeat(500)),
        ];
        for name in &names {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'),
                "{name}"
            );
            assert!(!name.starts_with('.'), "{name}");
            assert!(name.len() <= 64 + 1 + 16 + 5, "{name}");
        }
        let lowered: std::collections::HashSet<String> =
            names.iter().map(|n| n.to_ascii_lowercase()).collect();
        assert_eq!(lowered.len(), names.len());
        assert!(names[0].starts_with("thread-1-"));
    }

    fn request(ops: Vec<WriteOp>) -> Request {
        let (reply, _answer) = oneshot::channel();
        Request::new(
            ops.into_iter().map(|op| Op::prepare(op).unwrap()).collect(),
            reply,
        )
    }

    fn append(thread_id: &str, ids: std::ops::Range<usize>) -> WriteOp {
        WriteOp::AppendMessages {
            thread_id: thread_id.into(),
            messages: ids
                .map(|i| StoredMessage {
                    id: format!("{thread_id}-{i}"),
                    thread_id: thread_id.into(),
                    created_at: 1,
                    run_id: None,
                    message: KernelMessage::user(format!("#{i}")),
                })
                .collect(),
        }
    }

    fn create(id: &str) -> WriteOp {
        WriteOp::CreateThread(ThreadRecord {
            id: id.into(),
            resource_id: "r".into(),
            title: None,
            created_at: 1,
            updated_at: 1,
            metadata: Map::new(),
        })
    }

    /// One group, one transaction: the failing batch in the middle fails alone.
    #[tokio::test]
    async fn a_failing_batch_fails_alone_within_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("group.db");
        drop(SqliteStore::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();

        let group = [
            request(vec![create("a")]),
            request(vec![create("b"), create("a")]),
            request(vec![create("c")]),
        ];
        assert!(begin(&conn, &path).unwrap());
        let results = commit_group(&conn, &path, &group).unwrap();
        assert_eq!(
            results,
            [Ok(()), Err(StoreError::ThreadExists("a".into())), Ok(())]
        );
        assert!(conn.is_autocommit(), "the group's transaction is closed");
        drop(conn);

        let store = SqliteStore::open(&path).unwrap();
        let ids: Vec<String> = store
            .threads(None)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, ["c", "a"]);
    }

    /// A write queued while someone holds the lease is committed by the holder before it lets
    /// go (or by the writer thread): never left behind.
    #[tokio::test]
    async fn a_write_queued_behind_the_lease_holder_is_served() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("lease.db")).unwrap();
        store.write(vec![create("t")]).await.unwrap();
        let writer = &store.shared.writer;

        // Hold the lease, as a caller in the middle of its commit does.
        let first = writer.enqueue(request(vec![append("t", 0..1)])).unwrap();
        let queued = tokio::spawn({
            let store = store.clone();
            async move { store.write(vec![append("t", 1..3)]).await }
        });
        while writer.queue().waiting.is_empty() {
            tokio::task::yield_now().await;
        }
        writer.lead(first);
        queued.await.unwrap().unwrap();
        assert!(!writer.queue().busy, "the lease is released");

        // A batch over the inline budget, queued behind the holder: the writer thread
        // commits it.
        let first = writer.enqueue(request(vec![append("t", 3..4)])).unwrap();
        let big = tokio::spawn({
            let store = store.clone();
            async move { store.write(vec![append("t", 4..(5 + INLINE_ROWS))]).await }
        });
        while writer.queue().waiting.is_empty() {
            tokio::task::yield_now().await;
        }
        writer.lead(first);
        big.await.unwrap().unwrap();

        let ids: Vec<String> = store
            .messages("t")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        let expected: Vec<String> = (0..5 + INLINE_ROWS).map(|i| format!("t-{i}")).collect();
        assert_eq!(ids, expected);
    }

    /// While another connection (another process) holds the file's write lock, a write does
    /// not block its runtime thread: the writer thread waits for the lock.
    #[tokio::test]
    async fn a_write_waits_for_another_writer_off_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.db");
        let store = SqliteStore::open(&path).unwrap();
        store.write(vec![create("t")]).await.unwrap();

        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let write = tokio::spawn({
            let store = store.clone();
            async move { store.write(vec![append("t", 0..1)]).await }
        });
        // This task runs (on the same runtime thread) while the write waits.
        for _ in 0..20 {
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(!write.is_finished());
        other.execute_batch("COMMIT").unwrap();
        write.await.unwrap().unwrap();
        // The writer thread lets go of the lease once the queue is empty.
        while store.shared.writer.queue().busy {
            std::thread::sleep(Duration::from_millis(1));
        }
        store.write(vec![append("t", 1..2)]).await.unwrap();
        assert_eq!(store.messages("t").await.unwrap().len(), 2);
    }

    /// Under a steady stream of appends the checkpoints keep the WAL bounded: the background
    /// passes copy it, the writer copies the last frames and the WAL starts over.
    #[tokio::test]
    async fn the_wal_stays_bounded_under_a_steady_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let store = SqliteStore::open(&path).unwrap();
        store.write(vec![create("t")]).await.unwrap();
        let wal = dir.path().join("wal.db-wal");
        let frame = 4096 + 24;
        let frames = u64::from(CHECKPOINT_HARD_LIMIT);
        for i in 0..frames as usize * 3 {
            store.write(vec![append("t", i..i + 1)]).await.unwrap();
            let size = std::fs::metadata(&wal).unwrap().len();
            assert!(size < (frames + 8) * frame, "the WAL grew to {size} bytes");
        }
        assert!(std::fs::metadata(&path).unwrap().len() > 8 * 4096);
    }

    /// Messages live in their thread's key range; a thread created after a deletion gets a
    /// new key, even under a deleted thread's id, and starts empty.
    #[tokio::test]
    async fn thread_keys_are_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.db");
        let store = SqliteStore::open(&path).unwrap();
        store
            .write(vec![create("a"), create("b"), append("b", 0..3)])
            .await
            .unwrap();
        let delete = WriteOp::DeleteThread {
            thread_id: "b".into(),
        };
        store.write(vec![delete]).await.unwrap();
        store
            .write(vec![create("b"), append("b", 3..4)])
            .await
            .unwrap();
        let ids: Vec<String> = store
            .messages("b")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, ["b-3"]);

        let conn = Connection::open(&path).unwrap();
        let keys: Vec<(String, i64)> = conn
            .prepare("SELECT id, key FROM threads ORDER BY key")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(keys, [("a".to_owned(), 1), ("b".to_owned(), 3)]);
        let message_keys: Vec<i64> = conn
            .prepare("SELECT key FROM messages")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(message_keys, [(3 << 32) + 1]);
    }

    #[test]
    fn fnv1a_is_the_published_function() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
