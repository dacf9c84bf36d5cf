//! The conformance suite every [`Store`] backend runs: the semantics listed in the crate docs,
//! case by case, against a fresh store each (feature `testing`).
//!
//! One call runs it all from a backend's tests, with one `#[test]` per case:
//!
//! ```
//! // In the backend's tests: one `#[test]` per case, each on a new store.
//! harness_store::store_conformance!(harness_store::MemoryStore::new);
//! # fn main() {
//! #     harness_store::testing::block_on(harness_store::testing::run_all(harness_store::MemoryStore::new));
//! # }
//! ```
//!
//! A backend that needs more than a constructor (a temporary directory, a database to drop
//! afterwards) returns a value that implements [`Backend`] and cleans up when dropped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed expectation is a failed test

use std::future::Future;
use std::sync::Arc;

use harness_tags::{KernelMessage, Thinking, ToolCall};
use serde_json::{Map, Value, json};

use crate::{EventLogInfo, LoggedEvent, Store, StoreError, StoredMessage, ThreadRecord, WriteOp};

/// What a conformance case runs against: a store, and whatever must live as long as it.
pub trait Backend {
    /// The store under test.
    fn store(&self) -> &dyn Store;
}

impl<S: Store> Backend for S {
    fn store(&self) -> &dyn Store {
        self
    }
}

impl Backend for Arc<dyn Store> {
    fn store(&self) -> &dyn Store {
        &**self
    }
}

/// The names of the cases, in the order [`run_all`] runs them.
pub const CASES: [&str; 10] = [
    "create_get_list",
    "update",
    "append_order",
    "delete_cascades",
    "batch_atomicity",
    "records_by_prefix",
    "resource_ids",
    "errors",
    "versions",
    "event_logs",
];

/// Runs every case, each against a fresh backend from `fresh`; panics with the case's name and
/// the failed expectation at the first case that fails.
pub async fn run_all<B: Backend>(mut fresh: impl FnMut() -> B) {
    for name in CASES {
        let backend = fresh();
        run_case(name, backend.store()).await;
    }
}

/// Runs the case `name` (one of [`CASES`]) against `store`.
pub async fn run_case(name: &str, store: &dyn Store) {
    match name {
        "create_get_list" => create_get_list(store).await,
        "update" => update(store).await,
        "append_order" => append_order(store).await,
        "delete_cascades" => delete_cascades(store).await,
        "batch_atomicity" => batch_atomicity(store).await,
        "records_by_prefix" => records_by_prefix(store).await,
        "resource_ids" => resource_ids(store).await,
        "errors" => errors(store).await,
        "versions" => versions(store).await,
        "event_logs" => event_logs(store).await,
        other => panic!("no conformance case is named `{other}`; see `CASES`"),
    }
}

/// Runs a future to completion on a current-thread runtime (what the macro's tests use).
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds")
        .block_on(future)
}

/// Declares one `#[test]` per conformance case, each against a fresh backend from the given
/// function (any `fn() -> impl Backend`).
#[macro_export]
macro_rules! store_conformance {
    ($fresh:expr) => {
        $crate::store_conformance!(@cases $fresh; create_get_list, update, append_order,
            delete_cascades, batch_atomicity, records_by_prefix, resource_ids, errors, versions,
            event_logs);
    };
    (@cases $fresh:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                let backend = ($fresh)();
                $crate::testing::block_on($crate::testing::run_case(
                    stringify!($case),
                    $crate::testing::Backend::store(&backend),
                ));
            }
        )*
    };
}

/// A thread record with metadata, created and updated at `updated_at`.
pub fn thread(id: &str, resource: &str, updated_at: i64) -> ThreadRecord {
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

/// A user message of `thread_id`.
pub fn message(id: &str, thread_id: &str, text: &str) -> StoredMessage {
    StoredMessage {
        id: id.into(),
        thread_id: thread_id.into(),
        created_at: 1_700_000_000_000,
        run_id: Some("run-1".into()),
        message: KernelMessage::user(text),
    }
}

/// One message of each kind, with every optional field set.
pub fn varied_messages(thread_id: &str) -> Vec<StoredMessage> {
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

/// The batch that creates `thread`.
pub fn create(thread: ThreadRecord) -> Vec<WriteOp> {
    vec![WriteOp::CreateThread(thread)]
}

/// Appends `messages` to `thread_id`.
pub fn append(thread_id: &str, messages: Vec<StoredMessage>) -> WriteOp {
    WriteOp::AppendMessages {
        thread_id: thread_id.into(),
        messages,
    }
}

/// Puts a record, bound to `thread_id` if given.
pub fn put(namespace: &str, key: &str, thread_id: Option<&str>, value: Value) -> WriteOp {
    WriteOp::PutRecord {
        namespace: namespace.into(),
        key: key.into(),
        thread_id: thread_id.map(Into::into),
        value,
    }
}

/// The ids of `threads`, in order.
pub fn ids(threads: &[ThreadRecord]) -> Vec<&str> {
    threads.iter().map(|t| t.id.as_str()).collect()
}

/// The ids of `messages`, in order.
pub fn message_ids(messages: &[StoredMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// Creates threads and reads them back: by id, listed by resource, most recently updated first.
pub async fn create_get_list(store: &dyn Store) {
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

/// Updates a thread record in place.
pub async fn update(store: &dyn Store) {
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

/// Appends messages of every kind and reads them back in order, unchanged.
pub async fn append_order(store: &dyn Store) {
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

/// Deleting a thread deletes its messages and the records bound to it, and nothing else.
pub async fn delete_cascades(store: &dyn Store) {
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

/// A batch stops at its first failing op and leaves nothing behind.
pub async fn batch_atomicity(store: &dyn Store) {
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

/// Puts, reads, lists by key prefix and deletes plugin records.
pub async fn records_by_prefix(store: &dyn Store) {
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
    let keys = |records: Vec<crate::Record>| records.into_iter().map(|r| r.key).collect::<Vec<_>>();
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

/// Lists the resources that own threads.
pub async fn resource_ids(store: &dyn Store) {
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

/// Writes that cannot apply fail with the right error and change nothing.
pub async fn errors(store: &dyn Store) {
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

/// A thread's version changes with each append to it and when it is created again, and with
/// nothing else; a thread that does not exist has none.
pub async fn versions(store: &dyn Store) {
    assert_eq!(store.thread_version("t1").await.unwrap(), None);
    store.write(create(thread("t1", "r1", 1))).await.unwrap();
    let empty = store.thread_version("t1").await.unwrap().unwrap();
    assert_eq!(empty.messages, 0);
    store
        .write(vec![append(
            "t1",
            vec![message("m1", "t1", "a"), message("m2", "t1", "b")],
        )])
        .await
        .unwrap();
    let two = store.thread_version("t1").await.unwrap().unwrap();
    assert_eq!(two.messages, 2);
    assert_eq!(two.generation, empty.generation);

    // Other threads, the thread's record, its records and a failed batch leave it as it was.
    store.write(create(thread("t2", "r1", 2))).await.unwrap();
    let mut renamed = thread("t1", "r1", 5);
    renamed.title = Some("renamed".into());
    store
        .write(vec![
            append("t2", vec![message("m3", "t2", "c")]),
            WriteOp::UpdateThread(renamed),
            put("om", "t1/observations", Some("t1"), json!({"n": 1})),
        ])
        .await
        .unwrap();
    store
        .write(vec![
            append("t1", vec![message("m4", "t1", "d")]),
            append("ghost", vec![message("m5", "ghost", "e")]),
        ])
        .await
        .unwrap_err();
    assert_eq!(store.thread_version("t1").await.unwrap(), Some(two));
    assert_ne!(store.thread_version("t2").await.unwrap().unwrap(), two);

    // Deleted, it has none; created again with as many messages, it has another.
    store
        .write(vec![WriteOp::DeleteThread {
            thread_id: "t1".into(),
        }])
        .await
        .unwrap();
    assert_eq!(store.thread_version("t1").await.unwrap(), None);
    store
        .write(vec![
            WriteOp::CreateThread(thread("t1", "r1", 1)),
            append(
                "t1",
                vec![message("m1", "t1", "a"), message("m2", "t1", "b")],
            ),
        ])
        .await
        .unwrap();
    let again = store.thread_version("t1").await.unwrap().unwrap();
    assert_eq!(again.messages, 2);
    assert_ne!(again, two);
}

/// An event envelope as a publisher would serialize it (spacing and non-ASCII kept as written).
pub fn logged(seq: u64) -> LoggedEvent {
    LoggedEvent {
        seq,
        envelope: format!(
            "{{\"seq\":{seq}, \"threadId\":\"t1\",\"at\":1700000000000,\"event\":{{\"type\":\"info\",\
             \"message\":\"ünïcödé ✓ {seq}\"}}}}"
        ),
    }
}

fn append_events(log_id: &str, seqs: &[u64]) -> WriteOp {
    WriteOp::AppendEvents {
        log_id: log_id.into(),
        events: seqs.iter().copied().map(logged).collect(),
    }
}

fn close_log(log_id: &str, closed_at: i64) -> WriteOp {
    WriteOp::CloseEventLog {
        log_id: log_id.into(),
        closed_at,
    }
}

fn seqs(events: &[LoggedEvent]) -> Vec<u64> {
    events.iter().map(|event| event.seq).collect()
}

/// Event logs: increasing `seq`s read back after any point as the bytes written, logs apart
/// from each other, closing and pruning, errors that leave a batch unwritten.
pub async fn event_logs(store: &dyn Store) {
    assert_eq!(store.event_log("h1").await.unwrap(), None);
    assert_eq!(store.events("h1", 0, 10).await.unwrap(), vec![]);
    store
        .write(vec![append_events("h1", &[1, 2, 3])])
        .await
        .unwrap();
    store.write(vec![append_events("h1", &[5])]).await.unwrap(); // gaps are allowed
    store.write(vec![append_events("h2", &[1])]).await.unwrap();

    let all = store.events("h1", 0, 100).await.unwrap();
    assert_eq!(all, [1, 2, 3, 5].map(logged));
    assert_eq!(seqs(&store.events("h1", 2, 100).await.unwrap()), [3, 5]);
    assert_eq!(seqs(&store.events("h1", 3, 1).await.unwrap()), [5]);
    assert_eq!(
        seqs(&store.events("h1", 5, 100).await.unwrap()),
        Vec::<u64>::new()
    );
    assert_eq!(
        seqs(&store.events("h1", u64::MAX, 100).await.unwrap()),
        Vec::<u64>::new()
    );
    assert_eq!(seqs(&store.events("h2", 0, 100).await.unwrap()), [1]);
    assert_eq!(
        store.event_log("h1").await.unwrap(),
        Some(EventLogInfo {
            last_seq: 5,
            closed_at: None
        })
    );

    // A seq that does not increase fails the whole batch, within a batch too.
    let error = store
        .write(vec![
            WriteOp::CreateThread(thread("t1", "r1", 1)),
            append_events("h1", &[6, 7]),
            append_events("h1", &[7]),
        ])
        .await
        .unwrap_err();
    assert_eq!(
        error,
        StoreError::EventOutOfOrder {
            log_id: "h1".into(),
            seq: 7,
            last_seq: 7
        }
    );
    assert!(error.to_string().contains("`h1`"), "{error}");
    assert_eq!(store.thread("t1").await.unwrap(), None);
    assert_eq!(
        seqs(&store.events("h1", 0, 100).await.unwrap()),
        [1, 2, 3, 5]
    );
    let error = store
        .write(vec![append_events("h3", &[1, 1 << 63])])
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::EventOutOfOrder { seq, .. } if seq == 1 << 63),
        "{error:?}"
    );
    assert_eq!(store.event_log("h3").await.unwrap(), None);

    // Closed, a log takes no more events and keeps its first closing time.
    store.write(vec![close_log("h1", 100)]).await.unwrap();
    let error = store
        .write(vec![append_events("h1", &[6])])
        .await
        .unwrap_err();
    assert_eq!(error, StoreError::EventLogClosed("h1".into()));
    store.write(vec![close_log("h1", 300)]).await.unwrap();
    assert_eq!(
        store.event_log("h1").await.unwrap(),
        Some(EventLogInfo {
            last_seq: 5,
            closed_at: Some(100)
        })
    );
    assert_eq!(
        seqs(&store.events("h1", 0, 100).await.unwrap()),
        [1, 2, 3, 5]
    );
    // A log closed before anything was written exists, closed and empty.
    store.write(vec![close_log("h4", 200)]).await.unwrap();
    assert_eq!(
        store.event_log("h4").await.unwrap(),
        Some(EventLogInfo {
            last_seq: 0,
            closed_at: Some(200)
        })
    );

    // Pruning drops the logs closed before the cut-off with their events; open ones stay.
    store
        .write(vec![WriteOp::PruneEventLogs { closed_before: 150 }])
        .await
        .unwrap();
    assert_eq!(store.event_log("h1").await.unwrap(), None);
    assert_eq!(store.events("h1", 0, 100).await.unwrap(), vec![]);
    assert!(store.event_log("h4").await.unwrap().is_some());
    assert_eq!(seqs(&store.events("h2", 0, 100).await.unwrap()), [1]);
    // A pruned log's id starts afresh.
    store.write(vec![append_events("h1", &[1])]).await.unwrap();
    assert_eq!(seqs(&store.events("h1", 0, 100).await.unwrap()), [1]);
}
