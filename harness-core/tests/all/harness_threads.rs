#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The builder's checks, the session's mode and model memory, application state, and thread
//! management (create, switch with lock rollback, rename, clone, delete, list, resources).

use std::sync::{Arc, Mutex};

use harness_core::event::HarnessEvent;
use harness_core::harness::{BuildError, CloneOptions, Harness, HarnessError, Mode};
use harness_core::model::{Model, ModelId, Scripted, ScriptedModel};
use harness_core::store::{MemoryStore, MemoryThreadLock, Store, ThreadRecord, WriteOp, metadata};
use harness_core::tool::tool_fn;
use harness_tags::tags::{ThreadCloned, ThreadDeleted};
use harness_tags::{ThreadChange, ThreadCtx};
use harness_tests::harness::{drain, next_matching};
use serde_json::{Map, json};

/// A resolver that answers every model id with a scripted model saying which model it is.
fn echo_resolver(id: &ModelId) -> Result<Arc<dyn Model>, harness_core::model::ModelError> {
    let model = ScriptedModel::new(id.as_str())
        .then(Scripted::text(format!("this is {id}")))
        .cycling();
    Ok(Arc::new(model))
}

fn two_modes() -> harness_core::harness::HarnessBuilder {
    Harness::builder("coder")
        .mode(
            Mode::new("plan")
                .default_model("scripted/planner")
                .transitions_to("build"),
        )
        .mode(
            Mode::new("build")
                .default_model("scripted/builder")
                .default(),
        )
        .model_resolver(echo_resolver)
}

fn object(value: serde_json::Value) -> Map<String, serde_json::Value> {
    value.as_object().cloned().unwrap()
}

#[test]
fn the_builder_rejects_bad_configurations_with_clear_errors() {
    let error = Harness::builder("a").build().unwrap_err();
    assert!(matches!(error, BuildError::NoModes));

    let error = Harness::builder("a")
        .mode(Mode::new("x"))
        .mode(Mode::new("x"))
        .build()
        .unwrap_err();
    assert!(
        matches!(error, BuildError::DuplicateMode(ref id) if id == "x"),
        "{error}"
    );

    let error = Harness::builder("a")
        .mode(Mode::new("x").transitions_to("nowhere"))
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::BadTransition { .. }), "{error}");
    let error = Harness::builder("a")
        .mode(Mode::new("x").transitions_to("x"))
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::BadTransition { .. }), "{error}");

    let tool = Arc::new(tool_fn(
        "noop",
        "Does nothing.",
        |_: serde_json::Value, _| async { Ok::<_, harness_core::tool::ToolError>("ok") },
    ));
    let error = Harness::builder("a")
        .mode(
            Mode::new("x")
                .tools([tool.clone() as _])
                .additional_tools([tool as _]),
        )
        .build()
        .unwrap_err();
    assert!(
        matches!(error, BuildError::ToolsAndAdditionalTools(_)),
        "{error}"
    );

    let error = Harness::builder("a")
        .mode(Mode::new("x"))
        .default_mode("y")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("`y`"), "{error}");

    let error = Harness::builder("a")
        .mode(Mode::new("x").default_model("no-slash"))
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::InvalidModel(_)), "{error}");

    let error = Harness::builder("a")
        .mode(Mode::new("x"))
        .state_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
        .initial_state(object(json!({"n": "three"})))
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::InitialState(_)), "{error}");

    let error = Harness::builder("a")
        .mode(Mode::new("x"))
        .state_schema(json!({"type": 12}))
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::StateSchema(_)), "{error}");
}

#[tokio::test]
async fn state_starts_from_schema_defaults_and_every_write_is_validated() {
    let harness = Harness::builder("a")
        .mode(Mode::new("x"))
        .state_schema(json!({
            "type": "object",
            "properties": {
                "yolo": {"type": "boolean", "default": false},
                "projectName": {"type": "string", "default": "untitled"},
                "budget": {"type": "integer", "minimum": 0}
            }
        }))
        .initial_state(object(json!({"projectName": "harness"})))
        .build()
        .unwrap();
    assert_eq!(
        harness.session().state(),
        json!({"yolo": false, "projectName": "harness"})
    );

    let mut events = harness.subscribe();
    let state = harness
        .set_state(object(json!({"budget": 10, "yolo": false})))
        .unwrap();
    assert_eq!(state["budget"], 10);
    let changed = next_matching(&mut events, |e| match e {
        HarnessEvent::StateChanged { changed_keys, .. } => Some(changed_keys.clone()),
        _ => None,
    })
    .await;
    assert_eq!(changed, ["budget"], "unchanged keys are not reported");

    let error = harness
        .set_state(object(json!({"budget": -1})))
        .unwrap_err();
    assert!(matches!(error, HarnessError::InvalidState(_)), "{error}");
    assert_eq!(
        harness.session().state()["budget"],
        10,
        "a rejected write changes nothing"
    );
}

#[tokio::test]
async fn each_mode_remembers_its_own_model_in_the_thread() {
    let harness = two_modes().build().unwrap();
    harness.init().await.unwrap();
    let thread = harness.create_thread(Some("work".into())).await.unwrap();
    assert_eq!(harness.session().mode_id(), "build");
    assert_eq!(
        harness.session().model_id().unwrap().as_str(),
        "scripted/builder"
    );

    harness.switch_mode("plan").await.unwrap();
    assert_eq!(
        harness.session().model_id().unwrap().as_str(),
        "scripted/planner"
    );
    harness.switch_model("scripted/deep-thinker").await.unwrap();
    harness.switch_mode("build").await.unwrap();
    assert_eq!(
        harness.session().model_id().unwrap().as_str(),
        "scripted/builder"
    );
    harness.switch_mode("plan").await.unwrap();
    assert_eq!(
        harness.session().model_id().unwrap().as_str(),
        "scripted/deep-thinker"
    );
    let summary = harness.send_message("plan it").await.unwrap();
    assert_eq!(
        summary.final_text.as_deref(),
        Some("this is scripted/deep-thinker")
    );

    // Leave the thread and come back: the mode and its model come back with it.
    harness.create_thread(None).await.unwrap();
    assert_eq!(
        harness.session().mode_id(),
        "plan",
        "a new thread starts in the current mode"
    );
    harness.switch_mode("build").await.unwrap();
    harness.switch_thread(&thread.id).await.unwrap();
    assert_eq!(harness.session().mode_id(), "plan");
    assert_eq!(
        harness.session().model_id().unwrap().as_str(),
        "scripted/deep-thinker"
    );

    let error = harness.switch_mode("review").await.unwrap_err();
    assert!(error.to_string().contains("plan, build"), "{error}");
    let error = harness.switch_model("nonsense").await.unwrap_err();
    assert!(matches!(error, HarnessError::ModelId(_)), "{error}");
}

#[test]
fn tool_specs_lists_a_modes_own_tools() {
    let harness = two_modes().build().unwrap();
    let specs = harness.tool_specs("build").unwrap();
    let names: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
    assert!(names.contains(&"task_write"), "{names:?}");
    assert!(names.contains(&"ask_user"), "{names:?}");
    assert!(harness.tool_specs("review").is_none());
}

#[tokio::test]
async fn check_model_asks_the_resolver_without_switching() {
    let harness = Harness::builder("coder")
        .mode(Mode::new("build").default_model("scripted/builder"))
        .model_resolver(|id| match id.provider() {
            "scripted" => echo_resolver(id),
            other => Err(harness_core::model::ModelError::UnknownModel(
                other.to_owned(),
            )),
        })
        .build()
        .unwrap();
    harness.create_thread(None).await.unwrap();
    harness.check_model("scripted/other").unwrap();
    let error = harness.check_model("elsewhere/model").unwrap_err();
    assert!(matches!(error, HarnessError::Model(_)), "{error}");
    let error = harness.check_model("no-slash").unwrap_err();
    assert!(matches!(error, HarnessError::ModelId(_)), "{error}");
    assert_eq!(
        harness.session().model_id().unwrap().as_str(),
        "scripted/builder"
    );
}

#[tokio::test]
async fn a_mode_switch_emits_mode_then_model_changed() {
    let harness = two_modes().build().unwrap();
    harness.create_thread(None).await.unwrap();
    let mut events = harness.subscribe();
    harness.switch_mode("plan").await.unwrap();
    let kinds: Vec<&str> = drain(&mut events)
        .iter()
        .map(|e| e.kind())
        .filter(|k| *k == "mode_changed" || *k == "model_changed")
        .collect();
    assert_eq!(kinds, ["mode_changed", "model_changed"]);
}

#[tokio::test]
async fn threads_are_created_renamed_listed_and_selected_newest_first() {
    let harness = two_modes().build().unwrap();
    assert!(harness.list_threads(false).await.unwrap().is_empty());
    let selected = harness.select_or_create_thread().await.unwrap();
    assert_eq!(
        harness.session().thread_id().as_deref(),
        Some(selected.id.as_str())
    );
    assert_eq!(
        selected.resource_id, "coder",
        "the resource id defaults to the harness id"
    );

    harness.rename_thread("Parser work").await.unwrap();
    let second = harness.create_thread(Some("Docs".into())).await.unwrap();
    let listed = harness.list_threads(false).await.unwrap();
    let titles: Vec<_> = listed
        .iter()
        .map(|t| t.title.clone().unwrap_or_default())
        .collect();
    assert_eq!(titles, ["Docs", "Parser work"]);

    // A new harness on the same store picks the most recent thread.
    let store = harness.store().clone();
    drop(harness);
    let reopened = two_modes().store(store).build().unwrap();
    let picked = reopened.select_or_create_thread().await.unwrap();
    assert_eq!(picked.id, second.id);
}

#[tokio::test]
async fn switching_to_a_locked_thread_fails_and_leaves_the_session_where_it_was() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let locks = MemoryThreadLock::new();
    let first = two_modes()
        .store(store.clone())
        .thread_lock(Arc::new(locks.holder()))
        .build()
        .unwrap();
    let second = two_modes()
        .store(store.clone())
        .thread_lock(Arc::new(locks.holder()))
        .build()
        .unwrap();

    let mine = first.create_thread(Some("mine".into())).await.unwrap();
    let theirs = second.create_thread(Some("theirs".into())).await.unwrap();

    let error = first.switch_thread(&theirs.id).await.unwrap_err();
    assert!(matches!(error, HarnessError::Lock(_)), "{error}");
    assert!(
        error.to_string().contains(&theirs.id),
        "the error names the thread: {error}"
    );
    assert_eq!(
        first.session().thread_id().as_deref(),
        Some(mine.id.as_str())
    );
    // `first` still holds its own thread.
    assert!(matches!(
        second.switch_thread(&mine.id).await,
        Err(HarnessError::Lock(_))
    ));
    assert_eq!(
        second.session().thread_id().as_deref(),
        Some(theirs.id.as_str())
    );

    // Once released, the switch goes through and the old lock is given back.
    second.destroy().await;
    first.switch_thread(&theirs.id).await.unwrap();
    let third = two_modes()
        .store(store)
        .thread_lock(Arc::new(locks.holder()))
        .build()
        .unwrap();
    third.switch_thread(&mine.id).await.unwrap();

    let error = first.switch_thread("no-such-thread").await.unwrap_err();
    assert!(matches!(error, HarnessError::ThreadNotFound(_)), "{error}");
}

#[tokio::test]
async fn select_or_create_skips_threads_other_harnesses_hold() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let locks = MemoryThreadLock::new();
    let first = two_modes()
        .store(store.clone())
        .thread_lock(Arc::new(locks.holder()))
        .build()
        .unwrap();
    let held = first.create_thread(None).await.unwrap();
    let second = two_modes()
        .store(store)
        .thread_lock(Arc::new(locks.holder()))
        .build()
        .unwrap();
    let picked = second.select_or_create_thread().await.unwrap();
    assert_ne!(picked.id, held.id);
}

#[tokio::test]
async fn a_clone_up_to_a_message_keeps_that_message_and_those_before() {
    let harness = two_modes().build().unwrap();
    harness.init().await.unwrap();
    let source = harness.create_thread(None).await.unwrap();
    harness.send_message("one").await.unwrap();
    harness.send_message("two").await.unwrap();
    let original = harness.list_messages(None).await.unwrap();
    let copy = harness
        .clone_thread(CloneOptions {
            source_thread_id: Some(source.id.clone()),
            up_to_message: Some(original[1].id.clone()),
            ..CloneOptions::default()
        })
        .await
        .unwrap();
    let copied = harness.list_messages(Some(&copy.id)).await.unwrap();
    assert_eq!(copied.len(), 2);
    assert_eq!(copied[1].message, original[1].message);
    let error = harness
        .clone_thread(CloneOptions {
            source_thread_id: Some(source.id.clone()),
            up_to_message: Some("no-such-message".into()),
            ..CloneOptions::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(error, HarnessError::MessageNotFound { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn clone_copies_messages_with_new_ids_and_tells_plugins_the_id_map() {
    let cloned: Arc<Mutex<Vec<ThreadChange>>> = Arc::default();
    let deleted: Arc<Mutex<Vec<String>>> = Arc::default();
    let harness = two_modes()
        .compose({
            let cloned = Arc::clone(&cloned);
            let deleted = Arc::clone(&deleted);
            move |c| {
                c.tap(ThreadCloned, move |change: &ThreadChange, _: &ThreadCtx| {
                    cloned.lock().unwrap().push(change.clone())
                })
                .tap(
                    ThreadDeleted,
                    move |change: &ThreadChange, _: &ThreadCtx| {
                        deleted.lock().unwrap().push(change.thread_id.clone())
                    },
                )
            }
        })
        .build()
        .unwrap();
    harness.init().await.unwrap();
    let source = harness
        .create_thread(Some("original".into()))
        .await
        .unwrap();
    harness.send_message("one").await.unwrap();
    harness.send_message("two").await.unwrap();
    let original = harness.list_messages(None).await.unwrap();
    assert_eq!(original.len(), 4);

    let copy = harness.clone_thread(CloneOptions::default()).await.unwrap();
    assert_eq!(copy.title.as_deref(), Some("original (copy)"));
    assert_eq!(
        harness.session().thread_id().as_deref(),
        Some(copy.id.as_str()),
        "the clone is bound"
    );
    let copied = harness.list_messages(None).await.unwrap();
    assert_eq!(copied.len(), 4);
    for (old, new) in original.iter().zip(&copied) {
        assert_ne!(old.id, new.id);
        assert_eq!(old.message, new.message);
        assert_eq!(new.thread_id, copy.id);
    }
    let change = cloned
        .lock()
        .unwrap()
        .pop()
        .expect("thread.cloned reached the plugin");
    assert_eq!(change.thread_id, copy.id);
    assert_eq!(change.source_thread_id.as_deref(), Some(source.id.as_str()));
    for (old, new) in original.iter().zip(&copied) {
        assert_eq!(change.message_id_map.get(&old.id), Some(&new.id));
    }
    // The source is untouched.
    assert_eq!(
        harness.list_messages(Some(&source.id)).await.unwrap(),
        original
    );

    let mut events = harness.subscribe();
    harness.delete_thread(&source.id).await.unwrap();
    assert_eq!(*deleted.lock().unwrap(), [source.id.as_str()]);
    let gone = next_matching(&mut events, |e| match e {
        HarnessEvent::ThreadDeleted { thread_id } => Some(thread_id.clone()),
        _ => None,
    })
    .await;
    assert_eq!(gone, source.id);
    assert!(harness.store().thread(&source.id).await.unwrap().is_none());
    assert!(
        harness
            .store()
            .messages(&source.id)
            .await
            .unwrap()
            .is_empty()
    );
    let error = harness.delete_thread(&source.id).await.unwrap_err();
    assert!(matches!(error, HarnessError::ThreadNotFound(_)), "{error}");

    // Deleting the bound thread unbinds it.
    harness.delete_thread(&copy.id).await.unwrap();
    assert_eq!(harness.session().thread_id(), None);
    assert!(matches!(
        harness.list_messages(None).await,
        Err(HarnessError::NoThread)
    ));
}

#[tokio::test]
async fn forked_subagent_threads_are_hidden_unless_asked_for() {
    let harness = two_modes().build().unwrap();
    let visible = harness.create_thread(Some("main".into())).await.unwrap();
    let mut meta = Map::new();
    meta.insert(metadata::FORKED_SUBAGENT.into(), json!(true));
    meta.insert(metadata::PARENT_THREAD.into(), json!(visible.id));
    let fork = ThreadRecord {
        id: "fork-1".into(),
        resource_id: "coder".into(),
        title: Some("fork".into()),
        created_at: visible.created_at + 1,
        updated_at: visible.updated_at + 1,
        metadata: meta,
    };
    harness
        .store()
        .write(vec![WriteOp::CreateThread(fork)])
        .await
        .unwrap();

    let ids = |threads: Vec<ThreadRecord>| threads.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(
        ids(harness.list_threads(false).await.unwrap()),
        [visible.id.as_str()]
    );
    assert_eq!(
        ids(harness.list_threads(true).await.unwrap()),
        ["fork-1".to_owned(), visible.id.clone()]
    );
}

#[tokio::test]
async fn resources_group_threads() {
    let harness = two_modes().resource_id("project-a").build().unwrap();
    let a = harness.create_thread(None).await.unwrap();
    assert_eq!(a.resource_id, "project-a");

    harness.set_resource_id("project-b").await;
    assert_eq!(
        harness.session().thread_id(),
        None,
        "changing the resource unbinds the thread"
    );
    harness.create_thread(None).await.unwrap();
    assert_eq!(
        harness.list_threads(false).await.unwrap().len(),
        1,
        "only project-b's threads"
    );

    let mut resources = harness.known_resource_ids().await.unwrap();
    resources.sort();
    assert_eq!(resources, ["project-a", "project-b"]);
}

#[tokio::test]
async fn a_run_without_a_thread_selects_one_and_usage_accumulates_in_it() {
    let harness = two_modes().build().unwrap();
    harness.send_message("hello").await.unwrap();
    let thread = harness
        .session()
        .thread()
        .expect("a thread was created for the run");
    harness.send_message("again").await.unwrap();
    let usage = harness.session().token_usage();
    assert_eq!(
        usage.input_tokens, 20,
        "two scripted turns of 10 input tokens"
    );

    let stored = harness.store().thread(&thread.id).await.unwrap().unwrap();
    assert_eq!(stored.metadata[metadata::TOKEN_USAGE]["inputTokens"], 20);
    assert_eq!(stored.metadata[metadata::CURRENT_MODE], "build");
}
