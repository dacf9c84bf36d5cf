#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The conversation a harness keeps between runs: every run sends the model exactly what the
//! store holds, whoever changed the thread (another writer of the same SQLite file, code
//! writing to the store, a delete and a create under the same id, a failed write), and
//! switching, cloning and deleting threads never mix conversations.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use harness_core::harness::{CloneOptions, Harness, Mode, RunOutcome};
use harness_core::model::{Model, ModelId, Scripted, ScriptedModel};
use harness_core::store::{
    EventLogInfo, LoggedEvent, MemoryStore, Record, SqliteStore, Store, StoreError, StoredMessage,
    ThreadRecord, ThreadVersion, WriteOp,
};
use harness_tags::KernelMessage;

/// A model that answers `ok` and records what it was sent.
fn echo_model() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new("scripted/echo")
            .then(Scripted::text("ok"))
            .cycling(),
    )
}

fn harness_on(store: Arc<dyn Store>, model: &Arc<ScriptedModel>) -> Harness {
    let model: Arc<dyn Model> = model.clone();
    Harness::builder("conversation")
        .mode(Mode::new("build").default_model("scripted/echo"))
        .model_resolver(move |_: &ModelId| Ok(Arc::clone(&model)))
        .store(store)
        .interactive(false)
        .build()
        .unwrap()
}

/// The texts of the conversation the model received last.
fn last_sent(model: &ScriptedModel) -> Vec<String> {
    let requests = model.requests();
    let request = requests.last().expect("the model was called");
    request
        .messages
        .iter()
        .map(|message| message.content().to_owned())
        .collect()
}

/// The texts of a thread's stored messages.
async fn stored(store: &dyn Store, thread_id: &str) -> Vec<String> {
    store
        .messages(thread_id)
        .await
        .unwrap()
        .into_iter()
        .map(|message| message.message.content().to_owned())
        .collect()
}

fn user(id: &str, thread_id: &str, text: &str) -> StoredMessage {
    StoredMessage {
        id: id.into(),
        thread_id: thread_id.into(),
        created_at: 1,
        run_id: None,
        message: KernelMessage::user(text),
    }
}

async fn send(harness: &Harness, text: &str) {
    let summary = harness.send_message(text).await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete, "{:?}", summary.error);
}

#[tokio::test]
async fn each_run_sends_what_the_store_holds_after_another_writer_appended() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let model = echo_model();
    let harness = harness_on(Arc::clone(&store), &model);
    let thread = harness.create_thread(None).await.unwrap();
    send(&harness, "one").await;
    assert_eq!(last_sent(&model), ["one"]);
    send(&harness, "two").await;
    assert_eq!(last_sent(&model), ["one", "ok", "two"]);

    // Someone else appends to the thread through the store.
    store
        .write(vec![WriteOp::AppendMessages {
            thread_id: thread.id.clone(),
            messages: vec![user("outside", &thread.id, "from elsewhere")],
        }])
        .await
        .unwrap();
    send(&harness, "three").await;
    assert_eq!(
        last_sent(&model),
        ["one", "ok", "two", "ok", "from elsewhere", "three"]
    );
    let mut expected = last_sent(&model);
    expected.push("ok".into());
    assert_eq!(stored(&*store, &thread.id).await, expected);
}

#[tokio::test]
async fn a_thread_deleted_and_created_again_under_its_id_is_read_again() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let model = echo_model();
    let harness = harness_on(Arc::clone(&store), &model);
    let thread = harness.create_thread(None).await.unwrap();
    send(&harness, "before").await;
    assert_eq!(stored(&*store, &thread.id).await, ["before", "ok"]);

    // Replaced behind the harness's back by a thread of as many messages.
    let record: ThreadRecord = store.thread(&thread.id).await.unwrap().unwrap();
    store
        .write(vec![
            WriteOp::DeleteThread {
                thread_id: thread.id.clone(),
            },
            WriteOp::CreateThread(record),
            WriteOp::AppendMessages {
                thread_id: thread.id.clone(),
                messages: vec![
                    user("r1", &thread.id, "replaced 1"),
                    user("r2", &thread.id, "replaced 2"),
                ],
            },
        ])
        .await
        .unwrap();
    send(&harness, "after").await;
    assert_eq!(last_sent(&model), ["replaced 1", "replaced 2", "after"]);
}

#[tokio::test]
async fn a_run_on_a_thread_deleted_behind_the_harness_is_refused() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let model = echo_model();
    let harness = harness_on(Arc::clone(&store), &model);
    let thread = harness.create_thread(None).await.unwrap();
    send(&harness, "hello").await;
    store
        .write(vec![WriteOp::DeleteThread {
            thread_id: thread.id.clone(),
        }])
        .await
        .unwrap();
    let summary = harness.send_message("anyone?").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Error);
    assert!(
        summary.error.as_deref().unwrap_or("").contains(&thread.id),
        "{:?}",
        summary.error
    );
    assert_eq!(
        model.requests().len(),
        1,
        "nothing was sent for a missing thread"
    );
}

#[tokio::test]
async fn switching_cloning_and_deleting_keep_each_thread_its_own_conversation() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let model = echo_model();
    let harness = harness_on(Arc::clone(&store), &model);
    let a = harness.create_thread(Some("a".into())).await.unwrap();
    send(&harness, "in a").await;
    let b = harness.create_thread(Some("b".into())).await.unwrap();
    send(&harness, "in b").await;
    assert_eq!(last_sent(&model), ["in b"]);

    harness.switch_thread(&a.id).await.unwrap();
    send(&harness, "a again").await;
    assert_eq!(last_sent(&model), ["in a", "ok", "a again"]);

    let clone = harness.clone_thread(CloneOptions::default()).await.unwrap();
    send(&harness, "in the clone").await;
    assert_eq!(
        last_sent(&model),
        ["in a", "ok", "a again", "ok", "in the clone"]
    );
    assert_eq!(
        harness.session().thread_id().as_deref(),
        Some(clone.id.as_str())
    );
    assert_eq!(
        stored(&*store, &a.id).await,
        ["in a", "ok", "a again", "ok"],
        "the source is untouched"
    );

    harness.switch_thread(&b.id).await.unwrap();
    send(&harness, "b again").await;
    assert_eq!(last_sent(&model), ["in b", "ok", "b again"]);

    // Deleting the bound thread unbinds it: the next message starts on another thread.
    harness.delete_thread(&b.id).await.unwrap();
    send(&harness, "after the delete").await;
    let bound = harness.session().thread_id().unwrap();
    assert_ne!(bound, b.id);
    assert_eq!(
        last_sent(&model).last().map(String::as_str),
        Some("after the delete")
    );
    assert!(!last_sent(&model).iter().any(|text| text.contains("in b")));
}

#[tokio::test]
async fn another_connection_to_the_sqlite_file_appending_is_seen_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("harness.db");
    let model = echo_model();
    let harness = harness_on(Arc::new(SqliteStore::open(&path).unwrap()), &model);
    let thread = harness.create_thread(None).await.unwrap();
    send(&harness, "one").await;

    // A second store on the same file: to SQLite, another process (its own connections,
    // its own writer). It does not take the thread's lock.
    let other = SqliteStore::open(&path).unwrap();
    other
        .write(vec![WriteOp::AppendMessages {
            thread_id: thread.id.clone(),
            messages: vec![user("other-1", &thread.id, "written by the other")],
        }])
        .await
        .unwrap();
    send(&harness, "two").await;
    assert_eq!(
        last_sent(&model),
        ["one", "ok", "written by the other", "two"]
    );
    // And the other sees the harness's messages.
    assert_eq!(
        stored(&other, &thread.id).await,
        ["one", "ok", "written by the other", "two", "ok"]
    );
}

/// A memory store that counts its writes, and fails those of messages while `failing` is set.
#[derive(Default)]
struct FlakyStore {
    inner: MemoryStore,
    failing: AtomicBool,
    writes: std::sync::Mutex<Vec<Vec<WriteOp>>>,
}

#[async_trait]
impl Store for FlakyStore {
    async fn write(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        let appends = ops
            .iter()
            .any(|op| matches!(op, WriteOp::AppendMessages { .. }));
        if appends && self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Backend("the disk is full".into()));
        }
        self.writes.lock().unwrap().push(ops.clone());
        self.inner.write(ops).await
    }
    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        self.inner.thread(thread_id).await
    }
    async fn threads(&self, resource_id: Option<&str>) -> Result<Vec<ThreadRecord>, StoreError> {
        self.inner.threads(resource_id).await
    }
    async fn messages(&self, thread_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.messages(thread_id).await
    }
    async fn thread_version(&self, thread_id: &str) -> Result<Option<ThreadVersion>, StoreError> {
        self.inner.thread_version(thread_id).await
    }
    async fn resource_ids(&self) -> Result<Vec<String>, StoreError> {
        self.inner.resource_ids().await
    }
    async fn record(&self, namespace: &str, key: &str) -> Result<Option<Record>, StoreError> {
        self.inner.record(namespace, key).await
    }
    async fn records(&self, namespace: &str, prefix: &str) -> Result<Vec<Record>, StoreError> {
        self.inner.records(namespace, prefix).await
    }
    async fn event_log(&self, log_id: &str) -> Result<Option<EventLogInfo>, StoreError> {
        self.inner.event_log(log_id).await
    }
    async fn events(
        &self,
        log_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedEvent>, StoreError> {
        self.inner.events(log_id, after, limit).await
    }
}

#[tokio::test]
async fn after_a_failed_write_the_next_run_sends_what_was_stored() {
    let store = Arc::new(FlakyStore::default());
    let model = echo_model();
    let harness = harness_on(store.clone() as Arc<dyn Store>, &model);
    let thread = harness.create_thread(None).await.unwrap();
    send(&harness, "kept").await;

    store.failing.store(true, Ordering::SeqCst);
    let failed = harness.send_message("lost").await.unwrap();
    assert_ne!(failed.outcome, RunOutcome::Complete);
    store.failing.store(false, Ordering::SeqCst);

    send(&harness, "next").await;
    assert_eq!(last_sent(&model), ["kept", "ok", "next"]);
    assert_eq!(
        stored(&*store, &thread.id).await,
        ["kept", "ok", "next", "ok"]
    );
}

#[tokio::test]
async fn a_run_commits_its_messages_and_usage_in_one_write() {
    let store = Arc::new(FlakyStore::default());
    let model = Arc::new(
        ScriptedModel::new("scripted/echo")
            .then(Scripted::tool_call("task_check", serde_json::json!({})))
            .then(Scripted::text("done")),
    );
    let harness = harness_on(store.clone() as Arc<dyn Store>, &model);
    let thread = harness.create_thread(None).await.unwrap();
    store.writes.lock().unwrap().clear();
    send(&harness, "go").await;
    let writes = store.writes.lock().unwrap().clone();
    // The user message, the tool call, its result and the answer, with the thread's usage.
    assert_eq!(writes.len(), 1, "{writes:#?}");
    match &writes[0][..] {
        [
            WriteOp::AppendMessages { messages, .. },
            WriteOp::UpdateThread(record),
        ] => {
            assert_eq!(messages.len(), 4);
            assert_eq!(
                record.metadata["tokenUsage"]["inputTokens"],
                serde_json::json!(20)
            );
        }
        other => panic!("{other:#?}"),
    }
    assert_eq!(store.messages(&thread.id).await.unwrap().len(), 4);
}
