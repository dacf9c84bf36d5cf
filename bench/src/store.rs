//! The `store` suite: `SqliteStore` appends per second and the resume time of a long thread.
//!
//! Over a temporary file (removed afterwards):
//! - single appends: one message per `write`, each awaited before the next, from one task:
//!   one transaction per message, committed on the task's own thread (the write connection
//!   is free every time);
//! - concurrent appends: the same from 16 tasks at once on one current-thread runtime. Each
//!   write commits within one poll of its task, so the tasks take turns rather than queue up
//!   together, and the figure is about the single one (the writer groups queued writes only
//!   when writers run on several threads);
//! - batched appends: 100 messages per `write`;
//! - resume: open the file afresh, then `thread` and `messages` of a 10,000-message thread.
//!
//! With the default durability (`synchronous=NORMAL` in WAL: acknowledged writes survive the
//! process being killed, not a power loss). Single appends are also measured with
//! `Durability::PowerLoss` (an `fsync` per commit), for comparison.
//!
//! Where the time goes, measured on the project's 2-core VM. With rusqlite alone (no harness
//! code), a transaction that inserts one message took 53 us in the first schema (three
//! b-trees per message: the table, an index by thread, the unique index on ids) with SQLite's
//! automatic checkpoint, run by the committing thread every 10,000 WAL pages: its `fsync`s
//! came to 22 us per transaction, so 31 us without them. The store now checkpoints on a
//! background thread, and messages live in one rowid table keyed by thread and place (two
//! b-trees): 24 us per transaction, more than half of it in the kernel. Each dirty page is two
//! `pwrite`s into the WAL (frame header, page), and each transaction takes and drops six
//! `fcntl` locks on the shared-memory index: 4 `pwrite`s and 6 `fcntl`s per message, which
//! only batching shares. The harness adds a few microseconds (serializing the message,
//! the lease on the write connection): handing each write to a writer thread and the answer
//! back cost 14 us more, which committing on the caller's thread saves. One task awaiting one
//! message at a time reaches about 30,000 per second there, 100-message batches about
//! 330,000 messages per second.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Instant;

use harness_core::store::{
    Durability, SqliteOptions, SqliteStore, Store, StoredMessage, ThreadRecord, WriteOp,
};
use harness_tags::{KernelMessage, ToolCall};
use serde_json::json;

use crate::measure::{median, round2};

/// A temporary database file, removed (with its WAL, shared-memory and thread-lock files) on
/// drop.
pub(crate) struct TempDb(pub(crate) PathBuf);

impl TempDb {
    pub(crate) fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(0);
        Self(std::env::temp_dir().join(format!(
            "harness-bench-store-{name}-{}-{nanos}.db",
            std::process::id()
        )))
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(path));
        }
        let mut locks = self.0.clone().into_os_string();
        locks.push(".locks");
        let _ = std::fs::remove_dir_all(PathBuf::from(locks));
    }
}

fn open(path: &Path, durability: Durability) -> SqliteStore {
    SqliteStore::open_with(path, SqliteOptions::default().durability(durability))
        .unwrap_or_else(|error| panic!("the bench store does not open: {error}"))
}

fn thread(id: &str) -> ThreadRecord {
    let mut metadata = serde_json::Map::new();
    metadata.insert("currentModeId".into(), json!("build"));
    metadata.insert(
        "modeModelId_build".into(),
        json!("anthropic/claude-sonnet-4-5"),
    );
    metadata.insert(
        "tokenUsage".into(),
        json!({"promptTokens": 1200, "completionTokens": 300}),
    );
    ThreadRecord {
        id: id.into(),
        resource_id: "bench".into(),
        title: Some("Bench thread".into()),
        created_at: 1,
        updated_at: 1,
        metadata,
    }
}

/// The `n`th message of a conversation: a user turn, a tool call, its result, in turn
/// (about 350 bytes of JSON on average).
pub(crate) fn message(thread_id: &str, n: usize) -> StoredMessage {
    let message = match n % 3 {
        0 => KernelMessage::user(format!(
            "Please look at src/module_{n}.rs and tell me why the build fails on the second \
             step; the error mentions a missing trait bound on the iterator adaptor."
        )),
        1 => KernelMessage::Assistant {
            content: "Let me read the file first.".into(),
            tool_calls: vec![ToolCall {
                id: format!("call-{n}"),
                name: "read_file".into(),
                arguments: json!({"path": format!("src/module_{n}.rs"), "limit": 200}),
            }],
            thinking: None,
        },
        _ => KernelMessage::ToolResult {
            tool_call_id: format!("call-{}", n - 1),
            tool_name: "read_file".into(),
            content: "fn main() {\n    let items = vec![1, 2, 3];\n    let total: u32 = items\
                      .iter().map(|x| x * 2).sum();\n    println!(\"{total}\");\n}\n"
                .repeat(2),
            is_error: false,
        },
    };
    StoredMessage {
        id: format!("{thread_id}-m{n}"),
        thread_id: thread_id.into(),
        created_at: 1_700_000_000_000 + n as i64,
        run_id: Some("run-1".into()),
        message,
    }
}

fn append(thread_id: &str, messages: Vec<StoredMessage>) -> Vec<WriteOp> {
    vec![WriteOp::AppendMessages {
        thread_id: thread_id.into(),
        messages,
    }]
}

fn must<T>(result: Result<T, harness_core::store::StoreError>) -> T {
    result.unwrap_or_else(|error| panic!("a bench write failed: {error}"))
}

/// Messages per second of single-message writes from one task, each awaited.
async fn single(store: &SqliteStore, thread_id: &str, writes: usize) -> f64 {
    must(
        store
            .write(vec![WriteOp::CreateThread(thread(thread_id))])
            .await,
    );
    let started = Instant::now();
    for n in 0..writes {
        must(
            store
                .write(append(thread_id, vec![message(thread_id, n)]))
                .await,
        );
    }
    writes as f64 / started.elapsed().as_secs_f64()
}

/// Messages per second of single-message writes from `tasks` tasks at once.
async fn concurrent(store: &SqliteStore, prefix: &str, tasks: usize, writes: usize) -> f64 {
    let mut threads = Vec::new();
    for t in 0..tasks {
        let id = format!("{prefix}-{t}");
        must(store.write(vec![WriteOp::CreateThread(thread(&id))]).await);
        threads.push(id);
    }
    let started = Instant::now();
    let handles: Vec<_> = threads
        .into_iter()
        .map(|id| {
            let store = store.clone();
            tokio::spawn(async move {
                for n in 0..writes {
                    must(store.write(append(&id, vec![message(&id, n)])).await);
                }
            })
        })
        .collect();
    for handle in handles {
        handle
            .await
            .unwrap_or_else(|error| panic!("a bench task failed: {error}"));
    }
    (tasks * writes) as f64 / started.elapsed().as_secs_f64()
}

/// Messages per second of writes of `batch` messages each.
async fn batched(store: &SqliteStore, thread_id: &str, writes: usize, batch: usize) -> f64 {
    must(
        store
            .write(vec![WriteOp::CreateThread(thread(thread_id))])
            .await,
    );
    let batches: Vec<Vec<StoredMessage>> = (0..writes)
        .map(|w| {
            (0..batch)
                .map(|i| message(thread_id, w * batch + i))
                .collect()
        })
        .collect();
    let started = Instant::now();
    for messages in batches {
        must(store.write(append(thread_id, messages)).await);
    }
    (writes * batch) as f64 / started.elapsed().as_secs_f64()
}

/// Milliseconds to open the file afresh and read a thread and its messages.
async fn resume(path: &Path, thread_id: &str, expected: usize) -> f64 {
    let started = Instant::now();
    let store = open(path, Durability::Process);
    let found = must(store.thread(thread_id).await);
    let messages = must(store.messages(thread_id).await);
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    assert!(found.is_some(), "the resumed thread is missing");
    assert_eq!(messages.len(), expected, "the resumed thread lost messages");
    drop(std::hint::black_box(messages));
    elapsed
}

fn block_on<F: Future>(future: F) -> F::Output {
    match tokio::runtime::Builder::new_current_thread().build() {
        Ok(runtime) => runtime.block_on(future),
        Err(error) => panic!("no tokio runtime: {error}"),
    }
}

pub(crate) fn run() -> serde_json::Value {
    let rounds = 3;
    let db = TempDb::new("append");
    let store = open(&db.0, Durability::Process);

    let (single_per_s, concurrent_per_s, batch_per_s) = block_on(async {
        single(&store, "warmup", 2_000).await;
        let mut singles = Vec::new();
        let mut concurrents = Vec::new();
        let mut batches = Vec::new();
        for round in 0..rounds {
            singles.push(single(&store, &format!("single-{round}"), 20_000).await);
            concurrents.push(concurrent(&store, &format!("conc-{round}"), 16, 1_250).await);
            batches.push(batched(&store, &format!("batch-{round}"), 1_000, 100).await);
        }
        (median(singles), median(concurrents), median(batches))
    });
    drop(store);
    drop(db);

    let full_db = TempDb::new("full");
    let full_store = open(&full_db.0, Durability::PowerLoss);
    let (full_single_per_s, full_concurrent_per_s) = block_on(async {
        (
            single(&full_store, "full-single", 500).await,
            concurrent(&full_store, "full-conc", 16, 100).await,
        )
    });
    drop(full_store);
    drop(full_db);

    let resume_db = TempDb::new("resume");
    let resume_ms = block_on(async {
        let store = open(&resume_db.0, Durability::Process);
        let id = "long-thread";
        must(store.write(vec![WriteOp::CreateThread(thread(id))]).await);
        for chunk in 0..10 {
            let messages = (0..1_000).map(|i| message(id, chunk * 1_000 + i)).collect();
            must(store.write(append(id, messages)).await);
        }
        drop(store);
        let mut samples = Vec::new();
        for _ in 0..7 {
            samples.push(resume(&resume_db.0, id, 10_000).await);
        }
        median(samples)
    });
    drop(resume_db);

    println!(
        "{:<46} {:>12}",
        "figure (synchronous=NORMAL unless said)", "value"
    );
    println!(
        "{:<46} {:>12.0}",
        "single appends/s, 1 task, each awaited", single_per_s
    );
    println!(
        "{:<46} {:>12.0}",
        "single appends/s, 16 tasks", concurrent_per_s
    );
    println!(
        "{:<46} {:>12.0}",
        "batched appends/s (100 per write)", batch_per_s
    );
    println!(
        "{:<46} {:>12.2}",
        "resume 10k-message thread (ms)", resume_ms
    );
    println!(
        "{:<46} {:>12.0}",
        "FULL: single appends/s, 1 task", full_single_per_s
    );
    println!(
        "{:<46} {:>12.0}",
        "FULL: single appends/s, 16 tasks", full_concurrent_per_s
    );
    json!({
        "suite": "store",
        "append_single_per_s": single_per_s.round(),
        "append_concurrent16_per_s": concurrent_per_s.round(),
        "append_batch_per_s": batch_per_s.round(),
        "resume_10k_ms": round2(resume_ms),
        "full_append_single_per_s": full_single_per_s.round(),
        "full_append_concurrent16_per_s": full_concurrent_per_s.round(),
    })
}
