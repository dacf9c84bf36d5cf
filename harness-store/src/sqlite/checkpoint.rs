//! Checkpoints off the commit path: the background checkpointer thread and the limits at which
//! the writer copies the WAL itself.

use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use rusqlite::{Connection, OpenFlags};

use crate::StoreError;
use crate::sqlite::schema::sql_error;

/// WAL pages after which the background checkpointer copies the WAL into the database file
/// (SQLite's own automatic checkpoint, off on the write connection, would run at 1,000, on
/// the committing thread). A checkpoint `fsync`s the WAL and the file; appends rewrite the
/// same few pages, so a longer WAL copies each of them once for more commits.
#[cfg(not(test))]
pub(super) const CHECKPOINT_PAGES: u32 = 10_000;
#[cfg(test)]
pub(super) const CHECKPOINT_PAGES: u32 = 100;

/// WAL pages at which the writer copies what the background checkpointer has not yet copied
/// itself (unless a background pass is under way), so that the next transaction starts the
/// WAL over: under a steady stream of appends, the background passes never copy the last
/// frames, and the WAL would grow without bound.
pub(super) const CHECKPOINT_LIMIT: u32 = 2 * CHECKPOINT_PAGES;

/// WAL pages at which the writer waits for a background pass under way to end, then copies
/// the rest: the bound on the WAL (about 160 MB) when the disk cannot keep up. After a crash,
/// the next open reads the WAL.
pub(super) const CHECKPOINT_HARD_LIMIT: u32 = 4 * CHECKPOINT_PAGES;

/// The background checkpointer's state, shared with the writer.
#[derive(Debug, Default)]
pub(super) struct Checkpoints {
    state: Mutex<CheckpointState>,
    /// Wakes the checkpointer.
    wake: Condvar,
    /// Wakes a writer waiting for a pass to end.
    idle: Condvar,
}

#[derive(Debug, Default)]
pub(super) struct CheckpointState {
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

    pub(super) fn stop(&self) {
        self.state().stop = true;
        self.wake.notify_one();
    }

    /// After a commit that left `frames` frames in the WAL: asks for a background pass, or
    /// copies the rest on the writer's connection once the WAL reaches [`CHECKPOINT_LIMIT`].
    pub(super) fn after_commit(&self, conn: &Connection, path: &Path, frames: u32) {
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
pub(super) fn checkpoint(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    conn.prepare_cached("PRAGMA wal_checkpoint(PASSIVE)")
        .and_then(|mut statement| statement.query_row([], |_| Ok(())))
        .map_err(|error| sql_error(path, error))
}

/// The checkpointer thread: one passive checkpoint per request of the writer, on its own
/// connection, so that the copying and the `fsync`s overlap with the commits.
pub(super) fn checkpoint_loop(path: &Path, synchronous: &str, checkpoints: &Checkpoints) {
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
pub(super) fn open_checkpointer(path: &Path, synchronous: &str) -> Result<Connection, StoreError> {
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
