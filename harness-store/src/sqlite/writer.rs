//! The write side: one write connection shared by flat combining, group commit in savepoints,
//! the batches queued for it and the ops they carry.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, params};
use tokio::sync::oneshot;

use crate::sqlite::checkpoint::Checkpoints;
use crate::sqlite::schema::sql_error;
use crate::{StoreError, WriteOp};

/// The most batches the writer commits in one transaction.
pub const MAX_GROUP: usize = 1024;

/// The most rows (messages, or one per other op) a caller commits on its own thread: its
/// own batch, then whatever other callers queued meanwhile. Larger writes go to the writer
/// thread, so that a caller blocks its runtime thread for at most about a millisecond.
pub(super) const INLINE_ROWS: usize = 256;

/// The write side: the one write connection, and the batches waiting for it.
///
/// Whoever holds the *lease* (`Queue::busy`) commits: a caller of `write` on its own thread
/// (see [`Writer::lead`]), or the writer thread once handed the lease. Everyone else queues.
/// The lease passes on or is released only under the queue's lock, after a look at the
/// queue: while anything is queued, someone holds the lease, so no batch is left behind.
#[derive(Debug)]
pub(super) struct Writer {
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
pub(super) struct WriteConn {
    conn: Connection,
    /// Whether a lock held by another process is waited for (the writer thread) or
    /// reported at once (a caller committing on its own thread).
    waits: bool,
}

#[derive(Debug, Default)]
pub(super) struct Queue {
    /// The lease: someone is committing, and will serve what is queued.
    pub(super) busy: bool,
    /// The writer thread has been handed the lease.
    handed: bool,
    /// The store is closing: the writer thread ends once idle.
    closing: bool,
    pub(super) waiting: VecDeque<Request>,
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
pub(super) struct Lease<'a> {
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
    pub(super) fn queue(&self) -> MutexGuard<'_, Queue> {
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
    pub(super) fn enqueue(&self, request: Request) -> Option<Request> {
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
    pub(super) fn lead(&self, first: Request) {
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
    /// The writer of the file at `path`, on its write connection.
    pub(super) fn new(
        path: PathBuf,
        busy_timeout: Duration,
        conn: Connection,
        frames: Arc<AtomicU32>,
        checkpoints: Arc<Checkpoints>,
    ) -> Self {
        Writer {
            path,
            busy_timeout,
            conn: Mutex::new(WriteConn { conn, waits: true }),
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            frames,
            checkpoints,
        }
    }

    /// Tells the writer thread to end once it has committed what it was handed.
    pub(super) fn close(&self) {
        self.queue().closing = true;
        self.wake.notify_one();
    }

    pub(super) fn serve(&self) {
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

    /// Runs a read on the write connection, on the calling thread, if no one holds the lease
    /// (`None` otherwise): the writer wrote the pages a harness reads back most, so its cache
    /// has them. It never waits for another process's lock (a busy file is an error the
    /// caller can read past).
    pub(super) fn read_now<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Option<rusqlite::Result<T>> {
        {
            let mut queue = self.queue();
            if queue.busy {
                return None;
            }
            queue.busy = true;
        }
        let lease = Lease { writer: self };
        let mut guard = self.conn();
        let result = match self.set_waits(&mut guard, false) {
            Ok(()) => read(&guard.conn),
            Err(error) => Err(error),
        };
        drop(guard);
        drop(lease);
        Some(result)
    }

    /// Sets whether the connection waits for another process's lock.
    fn set_waits(&self, write: &mut WriteConn, wait: bool) -> rusqlite::Result<()> {
        if write.waits != wait {
            let timeout = if wait {
                self.busy_timeout
            } else {
                Duration::ZERO
            };
            write.conn.busy_timeout(timeout)?;
            write.waits = wait;
        }
        Ok(())
    }

    /// Commits `group` in one transaction and answers its callers. Without `wait`, gives
    /// the group back untouched if another connection holds the file's write lock.
    fn commit(&self, group: Vec<Request>, wait: bool) -> Result<(), Vec<Request>> {
        let mut guard = self.conn();
        let write = &mut *guard;
        if let Err(error) = self.set_waits(write, wait) {
            answer(group, &Err(sql_error(&self.path, error)));
            return Ok(());
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
pub(super) fn answer(group: Vec<Request>, result: &Result<(), StoreError>) {
    for request in group {
        let _ = request.reply.send(result.clone());
    }
}

/// One caller's batch, on its way to the writer.
pub(super) struct Request {
    ops: Vec<Op>,
    /// Messages, plus one for every other op: a measure of the time to commit it.
    rows: usize,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

impl Request {
    pub(super) fn new(ops: Vec<Op>, reply: oneshot::Sender<Result<(), StoreError>>) -> Self {
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
pub(super) enum Op {
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
    AppendEvents {
        log_id: String,
        /// `(seq, envelope)`, seq checked to fit SQLite's integers.
        events: Vec<(i64, String)>,
    },
    CloseEventLog {
        log_id: String,
        closed_at: i64,
    },
    PruneEventLogs {
        closed_before: i64,
    },
}

/// A message row.
pub(super) struct Message {
    id: String,
    created_at: i64,
    run_id: Option<String>,
    json: String,
}

pub(super) fn to_json<T: serde::Serialize + ?Sized>(
    value: &T,
    what: &str,
) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|error| StoreError::Backend(format!("{what} cannot be serialized: {error}")))
}

impl Op {
    pub(super) fn prepare(op: WriteOp) -> Result<Self, StoreError> {
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
            WriteOp::AppendEvents { log_id, events } => {
                let mut rows = Vec::with_capacity(events.len());
                let mut last = 0;
                for event in events {
                    // Beyond SQLite's integers: no later event could follow it either.
                    let Ok(seq) = i64::try_from(event.seq) else {
                        return Err(StoreError::EventOutOfOrder {
                            log_id,
                            seq: event.seq,
                            last_seq: last,
                        });
                    };
                    last = event.seq;
                    rows.push((seq, event.envelope));
                }
                Op::AppendEvents {
                    log_id,
                    events: rows,
                }
            }
            WriteOp::CloseEventLog { log_id, closed_at } => Op::CloseEventLog { log_id, closed_at },
            WriteOp::PruneEventLogs { closed_before } => Op::PruneEventLogs { closed_before },
        })
    }
}

/// Opens the write transaction: `Ok(false)` if another connection holds the file's write
/// lock (after the busy timeout, if the connection waits).
pub(super) fn begin(conn: &Connection, path: &Path) -> Result<bool, StoreError> {
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
pub(super) fn run(conn: &Connection, path: &Path, sql: &str) -> Result<(), StoreError> {
    conn.prepare_cached(sql)
        .and_then(|mut statement| statement.execute([]))
        .map(drop)
        .map_err(|error| sql_error(path, error))
}

/// Commits a group of batches in the transaction [`begin`] opened, each in a savepoint
/// when there are several. `Err` means the whole transaction failed (every batch fails with
/// it); `Ok` holds each batch's own outcome, and the successful ones are committed.
pub(super) fn commit_group(
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
pub(super) fn message_keys(thread: i64, path: &Path) -> Result<(i64, i64), StoreError> {
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
pub(super) fn apply_all(conn: &Connection, path: &Path, ops: &[Op]) -> Result<(), StoreError> {
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
            Op::AppendEvents { log_id, events } => append_events(conn, path, log_id, events)?,
            Op::CloseEventLog { log_id, closed_at } => {
                conn.prepare_cached(
                    "INSERT INTO event_logs (id, last_seq, closed_at) VALUES (?1, 0, ?2) \
                     ON CONFLICT (id) DO UPDATE SET closed_at = coalesce(closed_at, excluded.closed_at)",
                )
                .and_then(|mut statement| statement.execute(params![log_id, closed_at]))
                .map_err(sql)?;
            }
            Op::PruneEventLogs { closed_before } => {
                conn.prepare_cached(
                    "DELETE FROM events WHERE log_id IN \
                     (SELECT id FROM event_logs WHERE closed_at < ?1)",
                )
                .and_then(|mut statement| statement.execute([closed_before]))
                .map_err(sql)?;
                conn.prepare_cached("DELETE FROM event_logs WHERE closed_at < ?1")
                    .and_then(|mut statement| statement.execute([closed_before]))
                    .map_err(sql)?;
            }
        }
    }
    Ok(())
}

/// Appends events to a log after checking that it is open and that their `seq`s increase.
fn append_events(
    conn: &Connection,
    path: &Path,
    log_id: &str,
    events: &[(i64, String)],
) -> Result<(), StoreError> {
    let sql = |error| sql_error(path, error);
    if events.is_empty() {
        return Ok(());
    }
    let log: Option<(i64, Option<i64>)> = conn
        .prepare_cached("SELECT last_seq, closed_at FROM event_logs WHERE id = ?1")
        .and_then(|mut statement| {
            statement
                .query_row([log_id], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(sql)?;
    let mut last = match log {
        Some((_, Some(_))) => return Err(StoreError::EventLogClosed(log_id.to_owned())),
        Some((last, None)) => last,
        None => 0,
    };
    let mut insert = conn
        .prepare_cached("INSERT INTO events (log_id, seq, envelope) VALUES (?1, ?2, ?3)")
        .map_err(sql)?;
    for (seq, envelope) in events {
        if *seq <= last {
            return Err(StoreError::EventOutOfOrder {
                log_id: log_id.to_owned(),
                seq: *seq as u64,
                last_seq: last as u64,
            });
        }
        insert
            .execute(params![log_id, seq, envelope])
            .map_err(sql)?;
        last = *seq;
    }
    conn.prepare_cached(
        "INSERT INTO event_logs (id, last_seq, closed_at) VALUES (?1, ?2, NULL) \
         ON CONFLICT (id) DO UPDATE SET last_seq = excluded.last_seq",
    )
    .and_then(|mut statement| statement.execute(params![log_id, last]))
    .map_err(sql)?;
    Ok(())
}
