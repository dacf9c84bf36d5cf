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
use std::sync::Arc;

use harness_core::store::{
    LockError, MemoryStore, MemoryThreadLock, SqliteStore, SqliteThreadLock, Store, StoreError,
    StoredMessage, ThreadLock, ThreadRecord, WriteOp,
};
use harness_tags::{KernelMessage, Thinking, ToolCall};
use harness_tests::child::{self, Reports, kill, next_report, park_until_killed, say};
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------------------
// Fixtures

fn thread(id: &str, resource: &str, updated_at: i64) -> ThreadRecord {
    let mut metadata = Map::new();
    metadata.insert("currentModeId".into(), json!("build"));
    metadata.insert("tokenUsage".into(), json!({"input": 10, "output": 5}));
    ThreadRecord {
        id: id.into(),
        resource_id: resource.into(),
        title: Some(format!("Thread {id}")),
        created_at: updated_at,
        updated_at,
        metadata,
    }
}

fn message(id: &str, thread_id: &str, text: &str) -> StoredMessage {
    StoredMessage {
        id: id.into(),
        thread_id: thread_id.into(),
        created_at: 1_700_000_000_000,
        run_id: Some("run-1".into()),
        message: KernelMessage::user(text),
    }
}

/// One message of each kind, with every optional field set.
fn varied_messages(thread_id: &str) -> Vec<StoredMessage> {
    let kinds = [
        KernelMessage::System {
            content: "You are terse.".into(),
        },
        KernelMessage::user("List the files, please. ünïcödé ✓"),
        KernelMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "call-1".into(),
                name: "ls".into(),
                arguments: json!({"path": ".", "all": true}),
            }],
            thinking: Some(Thinking {
                text: "Look first.".into(),
                signature: Some("sig".into()),
            }),
        },
        KernelMessage::ToolResult {
            tool_call_id: "call-1".into(),
            tool_name: "ls".into(),
            content: "a.txt\nb.txt".into(),
            is_error: true,
        },
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| StoredMessage {
            id: format!("{thread_id}-kind-{i}"),
            thread_id: thread_id.into(),
            created_at: i as i64,
            run_id: (i % 2 == 0).then(|| format!("run-{i}")),
            message: kind,
        })
        .collect()
}

fn create(thread: ThreadRecord) -> Vec<WriteOp> {
    vec![WriteOp::CreateThread(thread)]
}

fn append(thread_id: &str, messages: Vec<StoredMessage>) -> WriteOp {
    WriteOp::AppendMessages {
        thread_id: thread_id.into(),
        messages,
    }
}

fn put(namespace: &str, key: &str, thread_id: Option<&str>, value: Value) -> WriteOp {
    WriteOp::PutRecord {
        namespace: namespace.into(),
        key: key.into(),
        thread_id: thread_id.map(Into::into),
        value,
    }
}

fn ids(threads: &[ThreadRecord]) -> Vec<&str> {
    threads.iter().map(|t| t.id.as_str()).collect()
}

fn message_ids(messages: &[StoredMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// A store, with the directory of its file kept alive as long as it is.
struct Fixture {
    store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

fn memory() -> Fixture {
    Fixture {
        store: Arc::new(MemoryStore::new()),
        _dir: None,
    }
}

fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("harness.db")).unwrap();
    Fixture {
        store: Arc::new(store),
        _dir: Some(dir),
    }
}

// ---------------------------------------------------------------------------------------
// The conformance suite: every case runs against both stores.

mod cases {
    use super::*;

    pub(super) async fn create_get_list(store: &dyn Store) {
        assert_eq!(store.threads(None).await.unwrap(), vec![]);
        let t1 = thread("t1", "r1", 10);
        store.write(create(t1.clone())).await.unwrap();
        store.write(create(thread("t2", "r1", 30))).await.unwrap();
        store.write(create(thread("t3", "r2", 20))).await.unwrap();
        // Same `updated_at` as t3, created later: listed before it.
        store.write(create(thread("t4", "r2", 20))).await.unwrap();

        assert_eq!(store.thread("t1").await.unwrap(), Some(t1));
        assert_eq!(store.thread("missing").await.unwrap(), None);
        assert_eq!(ids(&store.threads(Some("r1")).await.unwrap()), ["t2", "t1"]);
        assert_eq!(ids(&store.threads(Some("r2")).await.unwrap()), ["t4", "t3"]);
        assert_eq!(
            ids(&store.threads(None).await.unwrap()),
            ["t2", "t4", "t3", "t1"]
        );
        assert_eq!(store.threads(Some("nobody")).await.unwrap(), vec![]);
    }

    pub(super) async fn update(store: &dyn Store) {
        store.write(create(thread("t1", "r1", 10))).await.unwrap();
        store.write(create(thread("t2", "r1", 20))).await.unwrap();
        let mut changed = thread("t1", "another-resource", 30);
        changed.created_at = 999;
        changed.title = None;
        changed
            .metadata
            .insert("modeModelId_plan".into(), json!("anthropic/claude"));
        store
            .write(vec![WriteOp::UpdateThread(changed.clone())])
            .await
            .unwrap();

        let stored = store.thread("t1").await.unwrap().unwrap();
        assert_eq!(stored.title, None);
        assert_eq!(stored.updated_at, 30);
        assert_eq!(stored.metadata, changed.metadata);
        // Resource and creation time are not an update's to change.
        assert_eq!(stored.resource_id, "r1");
        assert_eq!(stored.created_at, 10);
        assert_eq!(ids(&store.threads(Some("r1")).await.unwrap()), ["t1", "t2"]);

        let error = store
            .write(vec![WriteOp::UpdateThread(thread("ghost", "r1", 1))])
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::ThreadNotFound("ghost".into()));
    }

    pub(super) async fn append_order(store: &dyn Store) {
        store.write(create(thread("t1", "r1", 1))).await.unwrap();
        store.write(create(thread("t2", "r1", 1))).await.unwrap();
        assert_eq!(store.messages("t1").await.unwrap(), vec![]);

        // Ids whose sort order is not their append order.
        let all: Vec<StoredMessage> = (0..250)
            .map(|i| {
                message(
                    &format!("m-{:03}", (i * 7919) % 1000),
                    "t1",
                    &format!("#{i}"),
                )
            })
            .collect();
        let mut expected = varied_messages("t1");
        store
            .write(vec![append("t1", expected.clone())])
            .await
            .unwrap();
        for chunk in [&all[..1], &all[1..100], &all[100..101], &all[101..]] {
            store
                .write(vec![append("t1", chunk.to_vec())])
                .await
                .unwrap();
            // Interleaved appends to another thread do not disturb t1's order.
            let other = message(&format!("other-{}", chunk[0].id), "t2", "x");
            store.write(vec![append("t2", vec![other])]).await.unwrap();
        }
        expected.extend(all);
        assert_eq!(store.messages("t1").await.unwrap(), expected);
        assert_eq!(store.messages("t2").await.unwrap().len(), 4);
        assert_eq!(store.messages("missing").await.unwrap(), vec![]);

        // The op's thread is the one stored, whatever the message says.
        let stray = message("stray", "t1", "meant for t2");
        store.write(vec![append("t2", vec![stray])]).await.unwrap();
        let t2 = store.messages("t2").await.unwrap();
        assert_eq!(t2.last().unwrap().id, "stray");
        assert_eq!(t2.last().unwrap().thread_id, "t2");
        assert_eq!(store.messages("t1").await.unwrap().len(), expected.len());
    }

    pub(super) async fn delete_cascades(store: &dyn Store) {
        store.write(create(thread("t1", "r1", 1))).await.unwrap();
        store.write(create(thread("t2", "r1", 2))).await.unwrap();
        store
            .write(vec![
                append(
                    "t1",
                    vec![message("m1", "t1", "a"), message("m2", "t1", "b")],
                ),
                append("t2", vec![message("m3", "t2", "c")]),
                put("om", "t1/observations", Some("t1"), json!({"n": 1})),
                put("om", "t1/buffer", Some("t1"), json!([1, 2])),
                put("tasks", "t1", Some("t1"), json!("list")),
                put("om", "t2/observations", Some("t2"), json!({"n": 2})),
                put("om", "settings", None, json!({"global": true})),
            ])
            .await
            .unwrap();

        store
            .write(vec![WriteOp::DeleteThread {
                thread_id: "t1".into(),
            }])
            .await
            .unwrap();

        assert_eq!(store.thread("t1").await.unwrap(), None);
        assert_eq!(store.messages("t1").await.unwrap(), vec![]);
        assert_eq!(store.record("om", "t1/observations").await.unwrap(), None);
        assert_eq!(store.records("om", "t1/").await.unwrap(), vec![]);
        assert_eq!(store.record("tasks", "t1").await.unwrap(), None);
        // Other threads and unbound records stay.
        assert_eq!(ids(&store.threads(None).await.unwrap()), ["t2"]);
        assert_eq!(message_ids(&store.messages("t2").await.unwrap()), ["m3"]);
        assert!(
            store
                .record("om", "t2/observations")
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            store.record("om", "settings").await.unwrap().unwrap().value,
            json!({"global": true})
        );
        // The deleted messages' ids are free again.
        store
            .write(vec![append("t2", vec![message("m1", "t2", "again")])])
            .await
            .unwrap();

        let error = store
            .write(vec![WriteOp::DeleteThread {
                thread_id: "t1".into(),
            }])
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::ThreadNotFound("t1".into()));
    }

    pub(super) async fn batch_atomicity(store: &dyn Store) {
        store.write(create(thread("src", "r1", 1))).await.unwrap();
        let source = vec![message("s1", "src", "one"), message("s2", "src", "two")];
        store
            .write(vec![
                append("src", source.clone()),
                put("om", "src/obs", Some("src"), json!({"ids": ["s1", "s2"]})),
            ])
            .await
            .unwrap();

        // A clone whose last op fails (a message id that exists) leaves nothing behind.
        let error = store
            .write(vec![
                WriteOp::CreateThread(thread("clone", "r1", 5)),
                append(
                    "clone",
                    vec![message("c1", "clone", "one"), message("c2", "clone", "two")],
                ),
                put(
                    "om",
                    "clone/obs",
                    Some("clone"),
                    json!({"ids": ["c1", "c2"]}),
                ),
                WriteOp::UpdateThread(thread("src", "r1", 6)),
                append("clone", vec![message("s1", "clone", "duplicate")]),
            ])
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::MessageExists("s1".into()));
        assert_eq!(store.thread("clone").await.unwrap(), None);
        assert_eq!(store.messages("clone").await.unwrap(), vec![]);
        assert_eq!(store.record("om", "clone/obs").await.unwrap(), None);
        assert_eq!(store.thread("src").await.unwrap().unwrap().updated_at, 1);
        assert_eq!(store.messages("src").await.unwrap(), source);
        // The ids the failed batch used are not taken.
        store
            .write(vec![
                WriteOp::CreateThread(thread("clone", "r1", 5)),
                append("clone", vec![message("c1", "clone", "one")]),
            ])
            .await
            .unwrap();

        // A failed delete-and-recreate leaves the thread, its messages and records as they were.
        let error = store
            .write(vec![
                WriteOp::DeleteThread {
                    thread_id: "src".into(),
                },
                put("om", "settings", None, json!(1)),
                WriteOp::DeleteRecord {
                    namespace: "om".into(),
                    key: "src/obs".into(),
                },
                WriteOp::CreateThread(thread("src", "r9", 9)),
                append("src", vec![message("new", "src", "x")]),
                WriteOp::CreateThread(thread("clone", "r1", 5)),
            ])
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::ThreadExists("clone".into()));
        let src = store.thread("src").await.unwrap().unwrap();
        assert_eq!((src.resource_id.as_str(), src.updated_at), ("r1", 1));
        assert_eq!(store.messages("src").await.unwrap(), source);
        assert!(store.record("om", "src/obs").await.unwrap().is_some());
        assert_eq!(store.record("om", "settings").await.unwrap(), None);
        assert_eq!(store.resource_ids().await.unwrap(), ["r1"]);
    }

    pub(super) async fn records_by_prefix(store: &dyn Store) {
        store.write(create(thread("t1", "r1", 1))).await.unwrap();
        store
            .write(vec![
                put("om", "b", None, json!("b")),
                put("om", "abc", Some("t1"), json!("abc")),
                put("om", "a", None, json!("a")),
                put("om", "a\u{10FFFF}", None, json!("max")),
                put("om", "ab", None, json!("ab")),
                put("om", "\u{e9}", None, json!("accent")),
                put("other", "a", None, json!("other a")),
                put("other", "ab", None, json!("other ab")),
            ])
            .await
            .unwrap();
        let keys = |records: Vec<harness_core::store::Record>| {
            records.into_iter().map(|r| r.key).collect::<Vec<_>>()
        };
        assert_eq!(
            keys(store.records("om", "a").await.unwrap()),
            ["a", "ab", "abc", "a\u{10FFFF}"]
        );
        assert_eq!(
            keys(store.records("om", "ab").await.unwrap()),
            ["ab", "abc"]
        );
        assert_eq!(
            keys(store.records("om", "").await.unwrap()),
            ["a", "ab", "abc", "a\u{10FFFF}", "b", "\u{e9}"]
        );
        assert_eq!(
            keys(store.records("om", "c").await.unwrap()),
            Vec::<String>::new()
        );
        assert_eq!(
            keys(store.records("missing", "").await.unwrap()),
            Vec::<String>::new()
        );

        let abc = store.record("om", "abc").await.unwrap().unwrap();
        assert_eq!(abc.thread_id.as_deref(), Some("t1"));
        assert_eq!(abc.value, json!("abc"));
        assert_eq!(store.record("om", "zzz").await.unwrap(), None);
        assert_eq!(
            store.record("other", "a").await.unwrap().unwrap().value,
            json!("other a")
        );

        // A put replaces the value and the binding; a delete removes; deleting nothing is fine.
        store
            .write(vec![put("om", "abc", None, json!({"v": 2}))])
            .await
            .unwrap();
        let abc = store.record("om", "abc").await.unwrap().unwrap();
        assert_eq!((abc.thread_id, abc.value), (None, json!({"v": 2})));
        store
            .write(vec![
                WriteOp::DeleteRecord {
                    namespace: "om".into(),
                    key: "a".into(),
                },
                WriteOp::DeleteRecord {
                    namespace: "om".into(),
                    key: "never".into(),
                },
            ])
            .await
            .unwrap();
        assert_eq!(store.record("om", "a").await.unwrap(), None);
        assert!(store.record("other", "a").await.unwrap().is_some());

        // A record cannot be bound to a thread that does not exist.
        let error = store
            .write(vec![put("om", "x", Some("ghost"), json!(1))])
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::ThreadNotFound("ghost".into()));
    }

    pub(super) async fn resource_ids(store: &dyn Store) {
        assert_eq!(store.resource_ids().await.unwrap(), Vec::<String>::new());
        store.write(create(thread("t1", "zeta", 1))).await.unwrap();
        store.write(create(thread("t2", "alpha", 2))).await.unwrap();
        store.write(create(thread("t3", "alpha", 3))).await.unwrap();
        assert_eq!(store.resource_ids().await.unwrap(), ["alpha", "zeta"]);
        store
            .write(vec![WriteOp::DeleteThread {
                thread_id: "t1".into(),
            }])
            .await
            .unwrap();
        assert_eq!(store.resource_ids().await.unwrap(), ["alpha"]);
    }

    pub(super) async fn errors(store: &dyn Store) {
        store.write(vec![]).await.unwrap();
        store.write(create(thread("t1", "r1", 1))).await.unwrap();
        store.write(create(thread("t2", "r1", 1))).await.unwrap();
        store
            .write(vec![append("t1", vec![message("m1", "t1", "x")])])
            .await
            .unwrap();

        let error = store
            .write(create(thread("t1", "r2", 5)))
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::ThreadExists("t1".into()));
        assert!(error.to_string().contains("`t1`"), "{error}");
        assert_eq!(store.thread("t1").await.unwrap().unwrap().resource_id, "r1");

        let error = store
            .write(vec![append("ghost", vec![message("g", "ghost", "x")])])
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::ThreadNotFound("ghost".into()));
        assert!(error.to_string().contains("`ghost`"), "{error}");

        // Message ids are unique across threads, and within one batch.
        let error = store
            .write(vec![append("t2", vec![message("m1", "t2", "dup")])])
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::MessageExists("m1".into()));
        let error = store
            .write(vec![append(
                "t2",
                vec![message("n1", "t2", "a"), message("n1", "t2", "b")],
            )])
            .await
            .unwrap_err();
        assert_eq!(error, StoreError::MessageExists("n1".into()));
        assert_eq!(store.messages("t2").await.unwrap(), vec![]);
        assert_eq!(message_ids(&store.messages("t1").await.unwrap()), ["m1"]);
    }
}

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod memory_store {
            $(
                #[tokio::test]
                async fn $case() {
                    let fixture = super::memory();
                    super::cases::$case(&*fixture.store).await;
                }
            )*
        }
        mod sqlite_store {
            $(
                #[tokio::test]
                async fn $case() {
                    let fixture = super::sqlite();
                    super::cases::$case(&*fixture.store).await;
                }
            )*
        }
    };
}

conformance!(
    create_get_list,
    update,
    append_order,
    delete_cascades,
    batch_atomicity,
    records_by_prefix,
    resource_ids,
    errors,
);

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
    }
    // Reopening applied the migration once.
    let raw = rusqlite::Connection::open(&path).unwrap();
    let versions: i64 = raw
        .query_row("SELECT count(*) FROM harness_schema", [], |row| row.get(0))
        .unwrap();
    assert_eq!(versions, SqliteStore::SCHEMA_VERSION);
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
    let store = Arc::clone(&fixture.store);
    store
        .write(create(thread("shared", "r1", 1)))
        .await
        .unwrap();
    let writers = 32;
    let per_writer = 40;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = Arc::clone(&store);
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
