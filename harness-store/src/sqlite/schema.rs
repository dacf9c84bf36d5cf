//! The schema: migrations, checking what a file holds before touching it, and SQLite errors
//! that name the file.

use std::path::Path;

use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use crate::SqliteStore;
use crate::StoreError;

/// The file's `application_id`: "HRNS".
pub(super) const APPLICATION_ID: i64 = 0x4852_4E53;

/// The migrations, in order: entry `i` brings the schema to version `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // v2: event logs, for clients that resume a stream of event envelopes. An event is kept
    // as the text its publisher wrote, keyed by (log, seq) in one b-tree.
    "CREATE TABLE event_logs (
         id TEXT PRIMARY KEY NOT NULL,
         last_seq INTEGER NOT NULL,
         closed_at INTEGER
     ) WITHOUT ROWID;
     CREATE INDEX event_logs_by_closed ON event_logs (closed_at) WHERE closed_at IS NOT NULL;
     CREATE TABLE events (
         log_id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         envelope TEXT NOT NULL,
         PRIMARY KEY (log_id, seq)
     ) WITHOUT ROWID;",
];

/// The tables a usable store has, checked after migrating.
pub(super) const REQUIRED_TABLES: &[&str] = &[
    "harness_schema",
    "threads",
    "messages",
    "records",
    "event_logs",
    "events",
];

/// Turns a SQLite error into a [`StoreError`] that names the file.
pub(super) fn sql_error(path: &Path, error: rusqlite::Error) -> StoreError {
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

pub(super) fn corrupt(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// What an opened file holds.
pub(super) enum Contents {
    /// No tables: a new file.
    Empty,
    /// A harness store at this schema version.
    Harness(i64),
}

/// Looks at a file without changing it: is it empty, a harness store (which version), or
/// something else (an error)?
pub(super) fn inspect(conn: &Connection, path: &Path) -> Result<Contents, StoreError> {
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
pub(super) fn migrate(conn: &Connection, path: &Path) -> Result<(), StoreError> {
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
                params![version, harness_tags::util::unix_ms()],
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

pub(super) fn too_new(path: &Path, found: i64) -> StoreError {
    StoreError::TooNew {
        path: path.display().to_string(),
        found,
        supported: SqliteStore::SCHEMA_VERSION,
    }
}
