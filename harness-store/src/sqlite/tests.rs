//! Unit tests of the SQLite store's internals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sqlite::checkpoint::CHECKPOINT_HARD_LIMIT;
use crate::sqlite::lock::fnv1a;
use crate::sqlite::lock::lock_file_name;
use crate::sqlite::writer::INLINE_ROWS;
use crate::sqlite::writer::begin;
use crate::sqlite::writer::commit_group;

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
