//! Storage: one conformance suite run against `MemoryStore` and `SqliteStore`; the SQLite
//! store's files (reopen, garbage, damaged, foreign, too new), concurrent writers, two
//! processes appending to one file and a SIGKILL in the middle of appends; thread locks
//! within a process and across processes.
//!
//! The cross-process cases re-run this test binary as a child: `child_process_entry_point`
//! does nothing unless `HARNESS_STORE_CHILD` names a role, and then plays it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;

use harness_core::store::{
    LockError, MemoryThreadLock, SqliteStore, SqliteThreadLock, Store, StoreError, ThreadLock,
    WriteOp,
};
use harness_store::testing::{
    Backend, append, create, ids, logged, message, message_ids, put, thread, varied_messages,
};
use harness_tests::child::{self, Reports, kill, next_report, park_until_killed, say};
use serde_json::json;

// ---------------------------------------------------------------------------------------
// Fixtures

/// A SQLite store, with the directory of its file kept alive as long as it is.
struct SqliteFixture {
    store: SqliteStore,
    _dir: tempfile::TempDir,
}

impl Backend for SqliteFixture {
    fn store(&self) -> &dyn Store {
        &self.store
    }
}

fn sqlite() -> SqliteFixture {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("harness.db")).unwrap();
    SqliteFixture { store, _dir: dir }
}

// ---------------------------------------------------------------------------------------
// The conformance suite (harness_store::testing): every case runs against both stores.

mod memory_store {
    harness_store::store_conformance!(harness_store::MemoryStore::new);
}

mod sqlite_store {
    harness_store::store_conformance!(super::sqlite);
}

// ---------------------------------------------------------------------------------------
// SQLite files

fn assert_corrupt_naming(error: &StoreError, file: &Path) {
    match error {
        StoreError::Corrupt { path, .. } => assert_eq!(Path::new(path), file),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let text = error.to_string();
    assert!(text.contains(&file.display().to_string()), "{text}");
}

#[tokio::test]
async fn sqlite_reopen_finds_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("harness.db");
    let mut expected_messages = varied_messages("t1");
    expected_messages.extend((0..50).map(|i| message(&format!("m{i}"), "t1", "hello")));
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .write(vec![
                WriteOp::CreateThread(thread("t1", "r1", 10)),
                WriteOp::CreateThread(thread("t2", "r2", 20)),
                append("t1", expected_messages.clone()),
                put("om", "t1/obs", Some("t1"), json!({"generation": 3})),
                put("om", "global", None, json!(null)),
                WriteOp::AppendEvents {
                    log_id: "h1".into(),
                    events: (1..=120).map(logged).collect(),
                },
            ])
            .await
            .unwrap();
    }
    for _ in 0..2 {
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(
            store.thread("t1").await.unwrap(),
            Some(thread("t1", "r1", 10))
        );
        assert_eq!(ids(&store.threads(None).await.unwrap()), ["t2", "t1"]);
        assert_eq!(store.messages("t1").await.unwrap(), expected_messages);
        assert_eq!(store.resource_ids().await.unwrap(), ["r1", "r2"]);
        assert_eq!(store.records("om", "").await.unwrap().len(), 2);
        // A client that read 100 events before the restart gets exactly the rest.
        assert_eq!(
            store.events("h1", 100, 1000).await.unwrap(),
            (101..=120).map(logged).collect::<Vec<_>>()
        );
    }
    // Reopening applied the migration once.
    let raw = rusqlite::Connection::open(&path).unwrap();
    let versions: i64 = raw
        .query_row("SELECT count(*) FROM harness_schema", [], |row| row.get(0))
        .unwrap();
    assert_eq!(versions, SqliteStore::SCHEMA_VERSION);
}

#[tokio::test]
async fn sqlite_file_of_schema_1_is_migrated_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("harness.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .write(vec![
                WriteOp::CreateThread(thread("t1", "r1", 10)),
                append("t1", vec![message("m1", "t1", "kept")]),
            ])
            .await
            .unwrap();
    }
    // Back to what schema 1 held: no event log tables, version 1 recorded.
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch(
        "DROP TABLE events; DROP TABLE event_logs; DELETE FROM harness_schema WHERE version > 1;",
    )
    .unwrap();
    drop(raw);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(message_ids(&store.messages("t1").await.unwrap()), ["m1"]);
    store
        .write(vec![WriteOp::AppendEvents {
            log_id: "h1".into(),
            events: vec![logged(1)],
        }])
        .await
        .unwrap();
    assert_eq!(store.events("h1", 0, 10).await.unwrap(), [logged(1)]);
}

#[tokio::test]
async fn sqlite_opens_an_empty_file_as_a_new_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").unwrap();
    let store = SqliteStore::open(&path).unwrap();
    store.write(create(thread("t1", "r1", 1))).await.unwrap();
    assert!(store.thread("t1").await.unwrap().is_some());
}

#[test]
fn sqlite_garbage_file_is_corrupt_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let garbage = "these are my notes, not a database\n".repeat(300);
    std::fs::write(&path, &garbage).unwrap();
    let error = SqliteStore::open(&path).unwrap_err();
    assert_corrupt_naming(&error, &path);
    assert!(
        error.to_string().contains("not a SQLite database"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), garbage);
}

#[tokio::test]
async fn sqlite_damaged_file_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("harness.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.write(create(thread("t1", "r1", 1))).await.unwrap();
    }
    // Scribble over the schema page, past the 100-byte file header.
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 4096);
    for byte in &mut bytes[100..4096] {
        *byte = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();

    let error = SqliteStore::open(&path).unwrap_err();
    assert_corrupt_naming(&error, &path);
    assert!(error.to_string().contains("damaged"), "{error}");
}

#[test]
fn sqlite_foreign_database_is_corrupt_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    {
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
             INSERT INTO notes (body) VALUES ('keep me');",
        )
        .unwrap();
    }
    let before = std::fs::read(&path).unwrap();

    let error = SqliteStore::open(&path).unwrap_err();
    assert_corrupt_naming(&error, &path);
    let text = error.to_string();
    assert!(text.contains("another application"), "{text}");
    assert!(text.contains("notes"), "{text}");
    // Not switched to WAL, no tables added: the file is as it was.
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.path().join("app.sqlite-wal").exists());

    // Another application's id, even with no tables, is refused too.
    let marked = dir.path().join("marked.sqlite");
    rusqlite::Connection::open(&marked)
        .unwrap()
        .execute_batch("PRAGMA application_id = 4660;")
        .unwrap();
    let error = SqliteStore::open(&marked).unwrap_err();
    assert_corrupt_naming(&error, &marked);
    assert!(error.to_string().contains("0x1234"), "{error}");
}

#[test]
fn sqlite_newer_schema_is_too_new() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("harness.db");
    drop(SqliteStore::open(&path).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO harness_schema (version, applied_at) VALUES (?1, 0)",
            [SqliteStore::SCHEMA_VERSION + 7],
        )
        .unwrap();
    let error = SqliteStore::open(&path).unwrap_err();
    assert_eq!(
        error,
        StoreError::TooNew {
            path: path.display().to_string(),
            found: SqliteStore::SCHEMA_VERSION + 7,
            supported: SqliteStore::SCHEMA_VERSION,
        }
    );
    assert!(error.to_string().contains("upgrade the harness"), "{error}");
}

#[test]
fn sqlite_unreachable_path_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/harness.db");
    match SqliteStore::open(&path).unwrap_err() {
        StoreError::Backend(reason) => assert!(reason.contains("harness.db"), "{reason}"),
        other => panic!("expected Backend, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_concurrent_writers_all_land() {
    let fixture = sqlite();
    let store = fixture.store.clone();
    store
        .write(create(thread("shared", "r1", 1)))
        .await
        .unwrap();
    let writers = 32;
    let per_writer = 40;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let own = format!("own-{w}");
            store.write(create(thread(&own, "r1", 2))).await.unwrap();
            for i in 0..per_writer {
                let shared = message(&format!("s-{w}-{i}"), "shared", "x");
                let mine = message(&format!("o-{w}-{i}"), &own, "y");
                store
                    .write(vec![
                        append("shared", vec![shared]),
                        append(&own, vec![mine]),
                    ])
                    .await
                    .unwrap();
                // A failing batch in the same stream fails alone.
                if i % 10 == 0 {
                    let error = store
                        .write(vec![
                            append(&own, vec![message(&format!("bad-{w}-{i}"), &own, "z")]),
                            append("ghost", vec![]),
                        ])
                        .await
                        .unwrap_err();
                    assert_eq!(error, StoreError::ThreadNotFound("ghost".into()));
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    let shared = store.messages("shared").await.unwrap();
    assert_eq!(shared.len(), writers * per_writer);
    for w in 0..writers {
        // Each writer's messages appear in the order it wrote them.
        let seen: Vec<usize> = shared
            .iter()
            .filter_map(|m| m.id.strip_prefix(&format!("s-{w}-")))
            .map(|i| i.parse().unwrap())
            .collect();
        assert_eq!(seen, (0..per_writer).collect::<Vec<_>>());
        let own = store.messages(&format!("own-{w}")).await.unwrap();
        assert_eq!(own.len(), per_writer);
        assert!(own.iter().all(|m| m.id.starts_with('o')));
    }
}

// ---------------------------------------------------------------------------------------
// Child processes

const ROLE: &str = "HARNESS_STORE_CHILD";
const DB: &str = "HARNESS_STORE_DB";
const THREAD: &str = "HARNESS_STORE_THREAD";

/// Not a test of its own: plays a child process's role when `HARNESS_STORE_CHILD` is set.
#[test]
fn child_process_entry_point() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let db = PathBuf::from(std::env::var(DB).unwrap());
    let thread_id = std::env::var(THREAD).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match role.as_str() {
        "hold" => {
            let lock = SqliteThreadLock::for_database(&db);
            runtime.block_on(lock.acquire(&thread_id)).unwrap();
            say("locked");
            park_until_killed();
        }
        "race" => {
            let lock = SqliteThreadLock::for_database(&db);
            let mut go = String::new();
            std::io::stdin().read_line(&mut go).unwrap();
            match runtime.block_on(lock.acquire(&thread_id)) {
                Ok(()) => {
                    say("won");
                    park_until_killed();
                }
                Err(error) => say(&format!("lost: {error}")),
            }
        }
        "append" => {
            let store = SqliteStore::open(&db).unwrap();
            runtime.block_on(async {
                if store.thread(&thread_id).await.unwrap().is_none() {
                    store
                        .write(create(thread(&thread_id, "r1", 1)))
                        .await
                        .unwrap();
                }
                for i in 0..1_000_000 {
                    let m = message(&format!("m{i}"), &thread_id, "acknowledged");
                    store
                        .write(vec![append(&thread_id, vec![m])])
                        .await
                        .unwrap();
                    say(&format!("acked {i}"));
                }
            });
            park_until_killed();
        }
        other => panic!("unknown child role {other}"),
    }
}

/// A child of this test binary in `role`.
fn spawn_child(role: &str, db: &Path, thread_id: &str) -> (Child, Reports) {
    child::spawn(
        "store::child_process_entry_point",
        [
            (ROLE, role.as_ref()),
            (DB, db.as_os_str()),
            (THREAD, thread_id.as_ref()),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Thread locks

#[tokio::test]
async fn sqlite_locks_in_one_process_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");
    let first = SqliteThreadLock::for_database(&db);
    let second = SqliteThreadLock::for_database(&db);
    assert_eq!(first.directory(), dir.path().join("harness.db.locks"));

    first.acquire("thread/1").await.unwrap();
    first.acquire("thread/1").await.unwrap(); // again: still ours
    let error = second.acquire("thread/1").await.unwrap_err();
    match &error {
        LockError::Held { thread_id, holder } => {
            assert_eq!(thread_id, "thread/1");
            let holder = holder.as_deref().unwrap();
            assert!(
                holder.contains(&format!("process {}", std::process::id())),
                "{holder}"
            );
        }
        other => panic!("expected Held, got {other:?}"),
    }
    assert!(
        error.to_string().contains("`thread/1` is in use"),
        "{error}"
    );
    // Look-alike ids are other threads.
    second.acquire("thread_1").await.unwrap();
    second.acquire("Thread/1").await.unwrap();

    first.release("thread/1").await.unwrap();
    first.release("never-held").await.unwrap();
    second.acquire("thread/1").await.unwrap();
    assert!(matches!(
        first.acquire("thread/1").await,
        Err(LockError::Held { .. })
    ));
    // Dropping a lock releases what it holds.
    drop(second);
    first.acquire("thread/1").await.unwrap();
    first.acquire("thread_1").await.unwrap();
}

#[tokio::test]
async fn sqlite_store_hands_out_locks_for_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("harness.db")).unwrap();
    let first = store.thread_lock();
    let second = store.thread_lock();
    first.acquire("t").await.unwrap();
    assert!(matches!(
        second.acquire("t").await,
        Err(LockError::Held { .. })
    ));
    assert_eq!(first.directory(), dir.path().join("harness.db.locks"));
}

#[tokio::test]
async fn memory_locks_exclude_other_holders() {
    let first = MemoryThreadLock::new();
    let second = first.holder();
    let unrelated = MemoryThreadLock::new();
    first.acquire("t").await.unwrap();
    first.acquire("t").await.unwrap();
    let error = second.acquire("t").await.unwrap_err();
    assert!(matches!(&error, LockError::Held { thread_id, .. } if thread_id == "t"));
    unrelated.acquire("t").await.unwrap(); // another table altogether
    second.release("t").await.unwrap(); // not its to release
    assert!(second.acquire("t").await.is_err());
    drop(first);
    second.acquire("t").await.unwrap();
}

#[tokio::test]
async fn lock_of_a_killed_process_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");
    let (child, mut reports) = spawn_child("hold", &db, "busy-thread");
    assert_eq!(next_report(&mut reports).as_deref(), Some("locked"));

    let lock = SqliteThreadLock::for_database(&db);
    match lock.acquire("busy-thread").await.unwrap_err() {
        LockError::Held { holder, .. } => {
            assert_eq!(holder, Some(format!("process {}", child.id())));
        }
        other => panic!("expected Held, got {other:?}"),
    }

    kill(child);
    lock.acquire("busy-thread").await.unwrap();
}

#[tokio::test]
async fn two_processes_race_and_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");
    let mut children: Vec<_> = (0..2)
        .map(|_| spawn_child("race", &db, "contested"))
        .collect();
    for (child, _) in &mut children {
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    }
    let outcomes: Vec<String> = children
        .iter_mut()
        .map(|(_, reports)| next_report(reports).unwrap())
        .collect();

    let winners: Vec<usize> = (0..2).filter(|&i| outcomes[i] == "won").collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let winner = winners[0];
    let loser = 1 - winner;
    let lost = &outcomes[loser];
    assert!(
        lost.starts_with("lost: thread `contested` is in use by another harness"),
        "{lost}"
    );
    // The holder's pid, when the loser could read it, is the winner's.
    let winner_pid = children[winner].0.id();
    if lost.contains("(process") {
        assert!(lost.contains(&format!("(process {winner_pid})")), "{lost}");
    }

    // The loser ends on its own (read its output to the end so that it can write it all).
    let (mut loser_child, mut loser_reports) = children.remove(loser);
    assert_eq!(next_report(&mut loser_reports), None);
    assert!(loser_child.wait().unwrap().success());
    let (winner_child, _reports) = children.remove(0);
    kill(winner_child);
    SqliteThreadLock::for_database(&db)
        .acquire("contested")
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// Durability

#[tokio::test]
async fn acknowledged_appends_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");
    let (child, mut reports) = spawn_child("append", &db, "t1");
    let mut last = None;
    while last.is_none_or(|n: usize| n < 300) {
        let report = next_report(&mut reports).unwrap();
        last = Some(report.strip_prefix("acked ").unwrap().parse().unwrap());
    }
    kill(child);
    let last = last.unwrap();

    let store = SqliteStore::open(&db).unwrap();
    let messages = store.messages("t1").await.unwrap();
    assert!(messages.len() > last, "{} <= {last}", messages.len());
    for (i, message) in messages.iter().enumerate() {
        assert_eq!(message.id, format!("m{i}"));
    }
}

/// Two processes append to one file at once, each waiting for the other's write lock when
/// it must: nothing acknowledged is lost, and each thread keeps its order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_append_to_one_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harness.db");
    let store = SqliteStore::open(&db).unwrap();
    store.write(create(thread("p", "r1", 1))).await.unwrap();
    let (child, mut reports) = spawn_child("append", &db, "c");
    assert_eq!(next_report(&mut reports).unwrap(), "acked 0");

    let writes = 500;
    for i in 0..writes {
        let m = message(&format!("p{i}"), "p", "parent");
        store.write(vec![append("p", vec![m])]).await.unwrap();
    }
    let report = next_report(&mut reports).unwrap();
    let last: usize = report.strip_prefix("acked ").unwrap().parse().unwrap();
    kill(child);

    let parent = store.messages("p").await.unwrap();
    let expected: Vec<String> = (0..writes).map(|i| format!("p{i}")).collect();
    assert_eq!(message_ids(&parent), expected);
    let child = store.messages("c").await.unwrap();
    assert!(child.len() > last, "{} <= {last}", child.len());
    for (i, message) in child.iter().enumerate() {
        assert_eq!(message.id, format!("m{i}"));
    }
}
