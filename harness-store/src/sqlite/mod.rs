//! [`SqliteStore`] and [`SqliteThreadLock`]: the embedded, durable store and its
//! cross-process thread lock.
//!
//! - [`writer`]: the write connection, flat combining and group commit;
//! - [`checkpoint`]: checkpoints on a background thread;
//! - [`schema`]: migrations and the checks on what a file holds;
//! - [`lock`]: the cross-process thread lock.

mod checkpoint;
mod lock;
mod schema;
#[cfg(test)]
mod tests;
mod writer;

pub use lock::SqliteThreadLock;
pub use writer::MAX_GROUP;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use harness_tags::KernelMessage;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::sqlite::checkpoint::Checkpoints;
use crate::sqlite::checkpoint::checkpoint_loop;
use crate::sqlite::schema::Contents;
use crate::sqlite::schema::MIGRATIONS;
use crate::sqlite::schema::corrupt;
use crate::sqlite::schema::inspect;
use crate::sqlite::schema::migrate;
use crate::sqlite::schema::sql_error;
use crate::sqlite::schema::too_new;
use crate::sqlite::writer::Op;
use crate::sqlite::writer::Request;
use crate::sqlite::writer::Writer;
use crate::{
    EventLogInfo, LoggedEvent, Record, Store, StoreError, StoredMessage, ThreadRecord,
    ThreadVersion, WriteOp,
};

/// Prepared statements kept per connection (the writer uses about 20).
const STATEMENT_CACHE: usize = 32;

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
/// every write acknowledged before it started. [`Store::thread_version`], two b-tree
/// lookups that a harness makes before every run, runs on the calling thread instead, on the
/// write connection when no write holds it (its cache has the pages the last writes changed;
/// handing the read to a thread and back cost more than the read); it never waits for a lock
/// there, and goes the usual way when the connection is taken or the file is locked.
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
/// # fn main() -> Result<(), harness_store::StoreError> {
/// use harness_store::{SqliteStore, SqliteThreadLock};
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
        self.writer.close();
        if let Some(writer) = self.writer_thread.take() {
            let _ = writer.join();
        }
    }
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
        let writer = Arc::new(Writer::new(
            path.clone(),
            options.busy_timeout,
            conn,
            frames,
            Arc::clone(&checkpoints),
        ));
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

/// A thread's key and its last message's key (see [`Store::thread_version`] for SQLite).
fn version_keys(conn: &Connection, thread_id: &str) -> rusqlite::Result<Option<ThreadVersion>> {
    // Two descents of b-trees, whatever the thread's length: places count from 1 with no
    // gaps (messages are never removed alone), so the last place is the count.
    let mut statement = conn.prepare_cached(
        "SELECT t.key, (SELECT m.key FROM messages AS m WHERE m.key BETWEEN t.key << 32 AND \
         (t.key << 32) + 0xFFFFFFFF ORDER BY m.key DESC LIMIT 1) FROM threads AS t WHERE t.id = ?1",
    )?;
    let found: Option<(i64, Option<i64>)> = statement
        .query_row([thread_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(found.map(|(thread, last)| ThreadVersion {
        generation: thread as u64,
        messages: last.map_or(0, |key| (key & 0xFFFF_FFFF) as u64),
    }))
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

    async fn thread_version(&self, thread_id: &str) -> Result<Option<ThreadVersion>, StoreError> {
        // On the calling thread when the write connection is free: two b-tree lookups on
        // pages it wrote last cost less than handing the read to a thread and back.
        let now = self
            .shared
            .writer
            .read_now(|conn| version_keys(conn, thread_id));
        match now {
            Some(Err(error))
                if error.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {}
            Some(result) => return result.map_err(|error| sql_error(&self.shared.path, error)),
            None => {}
        }
        let thread_id = thread_id.to_owned();
        self.read(move |conn, path| {
            version_keys(conn, &thread_id).map_err(|error| sql_error(path, error))
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
    async fn event_log(&self, log_id: &str) -> Result<Option<EventLogInfo>, StoreError> {
        let log_id = log_id.to_owned();
        self.read(move |conn, path| {
            conn.prepare_cached("SELECT last_seq, closed_at FROM event_logs WHERE id = ?1")
                .and_then(|mut statement| {
                    statement
                        .query_row([&log_id], |row| {
                            Ok(EventLogInfo {
                                last_seq: row.get::<_, i64>(0)? as u64,
                                closed_at: row.get(1)?,
                            })
                        })
                        .optional()
                })
                .map_err(|error| sql_error(path, error))
        })
        .await
    }

    async fn events(
        &self,
        log_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedEvent>, StoreError> {
        let log_id = log_id.to_owned();
        // Every stored seq fits an i64; a client's larger `after` is past them all.
        let Ok(after) = i64::try_from(after) else {
            return Ok(Vec::new());
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn, path| {
            let sql = |error| sql_error(path, error);
            let mut statement = conn
                .prepare_cached(
                    "SELECT seq, envelope FROM events WHERE log_id = ?1 AND seq > ?2 \
                     ORDER BY seq LIMIT ?3",
                )
                .map_err(sql)?;
            let rows = statement
                .query(params![log_id, after, limit])
                .map_err(sql)?;
            collect_rows(rows, path, |row| {
                Ok(Some(LoggedEvent {
                    seq: row.get::<_, i64>(0).map_err(sql)? as u64,
                    envelope: row.get(1).map_err(sql)?,
                }))
            })
        })
        .await
    }
}
