#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Subagents (non-forked with their own tools and model, forked on a hidden copy of the
//! thread with the parent's tools), their events and tags; heartbeats and `destroy`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use harness_core::event::HarnessEvent;
use harness_core::harness::{Harness, Heartbeat, Mode, SubagentDef};
use harness_core::model::{Model, ModelId, ModelRequest, Scripted, ScriptedModel};
use harness_core::store::{MemoryThreadLock, metadata};
use harness_core::tool::{ToolError, tool_fn};
use harness_tags::tags::{MessageSubagentHandoff, SubagentResultTag};
use harness_tags::{KernelMessage, SubagentCtx, SubagentResult};
use harness_tests::harness::{drain, next_matching};
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn tool_names(request: &ModelRequest) -> Vec<String> {
    let mut names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
    names.sort();
    names
}

fn last_tool_result(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            KernelMessage::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_fresh_subagent_gets_its_own_context_tools_and_model() {
    let parent = Arc::new(
        ScriptedModel::new("scripted/parent")
            .then(Scripted::tool_call(
                "subagent",
                json!({"agentType": "explore", "task": "Find the config loader"}),
            ))
            .then(Scripted::text("It is in config.rs.")),
    );
    let child = Arc::new(
        ScriptedModel::new("scripted/child")
            .then(Scripted::tool_call(
                "grep",
                json!({"pattern": "load_config"}),
            ))
            .then(Scripted::text("config.rs:12 defines load_config")),
    );
    let harness = Harness::builder("coder")
        .mode(Mode::new("build").default_model("scripted/parent"))
        .model_resolver({
            let (parent, child) = (Arc::clone(&parent), Arc::clone(&child));
            move |id: &ModelId| {
                let model: Arc<dyn Model> = if id.as_str() == "scripted/child" {
                    child.clone()
                } else {
                    parent.clone()
                };
                Ok(model)
            }
        })
        .tool(tool_fn("read_file", "Reads a file.", |_: Value, _| async {
            Ok::<_, ToolError>("contents")
        }))
        .tool(tool_fn("deploy", "Deploys.", |_: Value, _| async {
            Ok::<_, ToolError>("deployed")
        }))
        .subagent(
            SubagentDef::new(
                "explore",
                "Explorer",
                "Searches the code base.",
                "You search code. Be terse.",
            )
            .tool(tool_fn("grep", "Searches files.", |_: Value, _| async {
                Ok::<_, ToolError>("config.rs:12")
            }))
            .allowed_harness_tools(["read_file"])
            .default_model(ModelId::new("scripted/child").unwrap()),
        )
        .compose(|c| {
            c.on(MessageSubagentHandoff, |task: &String, _: &SubagentCtx| {
                format!("{task}. Answer with a file and line.")
            })
            .on(
                SubagentResultTag,
                |result: &SubagentResult, ctx: &SubagentCtx| SubagentResult {
                    result: format!("[{}] {}", ctx.agent_type, result.result),
                    ..result.clone()
                },
            )
        })
        .interactive(false)
        .build()
        .unwrap();
    let mut events = harness.subscribe();
    let summary = harness
        .send_message("Where is the config loaded?")
        .await
        .unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("It is in config.rs."));

    let child_requests = child.requests();
    let first = &child_requests[0];
    assert!(
        first.system.contains("You search code."),
        "{}",
        first.system
    );
    assert_eq!(
        *first.messages,
        [KernelMessage::user(
            "Find the config loader. Answer with a file and line."
        )],
        "a fresh subagent sees only its (reshaped) task"
    );
    assert_eq!(
        tool_names(first),
        ["grep", "read_file"],
        "its own tools and the allowed shared ones"
    );

    let parent_requests = parent.requests();
    assert!(tool_names(&parent_requests[0]).contains(&"subagent".to_owned()));
    assert_eq!(
        last_tool_result(&parent_requests[1]),
        "[explore] config.rs:12 defines load_config"
    );

    let kinds: Vec<&str> = drain(&mut events)
        .iter()
        .map(|e| e.kind())
        .filter(|k| k.starts_with("subagent_"))
        .collect();
    assert_eq!(kinds.first(), Some(&"subagent_start"));
    assert_eq!(kinds.last(), Some(&"subagent_end"));
    for kind in [
        "subagent_tool_start",
        "subagent_tool_end",
        "subagent_text_delta",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    // A fresh subagent leaves no thread behind.
    assert_eq!(harness.list_threads(true).await.unwrap().len(), 1);
    assert_eq!(harness.display_state().active_subagents.len(), 0);
}

#[tokio::test]
async fn a_forked_subagent_works_on_a_hidden_copy_with_the_parents_tools() {
    let model = Arc::new(
        ScriptedModel::new("scripted/one")
            .then(Scripted::text("Hello."))
            // The parent forks.
            .then(Scripted::tool_call(
                "subagent",
                json!({"agentType": "worker", "task": "Summarize so far", "forked": true}),
            ))
            // The fork tries tools that are stubbed inside forks, then answers.
            .then(Scripted::tool_calls([
                (
                    "subagent",
                    json!({"agentType": "worker", "task": "recurse"}),
                ),
                ("task_write", json!({"tasks": [{"content": "x"}]})),
            ]))
            .then(Scripted::text("We said hello."))
            // The parent ends.
            .then(Scripted::text("Done.")),
    );
    let harness = Harness::builder("coder")
        .mode(Mode::new("build").default_model("scripted/one"))
        .model_resolver({
            let model = Arc::clone(&model);
            move |_| Ok(model.clone() as _)
        })
        .tool(tool_fn("read_file", "Reads a file.", |_: Value, _| async {
            Ok::<_, ToolError>("contents")
        }))
        .subagent(SubagentDef::new(
            "worker",
            "Worker",
            "Does a side task.",
            "You work.",
        ))
        .build()
        .unwrap();
    harness.send_message("hi").await.unwrap();
    let parent_thread = harness.session().thread_id().unwrap();
    let before: Vec<_> = harness.list_messages(None).await.unwrap();

    let summary = harness.send_message("summarize in a fork").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("Done."));

    let requests = model.requests();
    let (parent_call, fork_first, fork_second) = (&requests[1], &requests[2], &requests[3]);
    assert_eq!(
        fork_first.system, parent_call.system,
        "same system prompt: the cache prefix stays warm"
    );
    assert_eq!(fork_first.tools, parent_call.tools, "same tool schemas");
    assert!(
        fork_first.messages.starts_with(&parent_call.messages),
        "the fork's conversation extends the parent's: {:#?}",
        fork_first.messages
    );
    assert_eq!(
        fork_first.messages.last(),
        Some(&KernelMessage::user("Summarize so far"))
    );
    let stub_results: Vec<String> = fork_second
        .messages
        .iter()
        .filter_map(|m| match m {
            KernelMessage::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(
        stub_results
            .iter()
            .rev()
            .take(2)
            .all(|r| r.contains("unavailable inside a forked subagent")),
        "{stub_results:?}"
    );
    assert_eq!(last_tool_result(&requests[4]), "We said hello.");

    // The fork is a hidden thread tagged with its parent; the parent only gained its own turn.
    let all = harness.list_threads(true).await.unwrap();
    let fork = all
        .iter()
        .find(|t| t.id != parent_thread)
        .expect("a fork thread");
    assert_eq!(fork.metadata[metadata::FORKED_SUBAGENT], true);
    assert_eq!(
        fork.metadata[metadata::PARENT_THREAD],
        parent_thread.as_str()
    );
    assert_eq!(harness.list_threads(false).await.unwrap().len(), 1);
    let fork_messages = harness.list_messages(Some(&fork.id)).await.unwrap();
    assert!(
        fork_messages
            .iter()
            .any(|m| m.message == KernelMessage::user("Summarize so far"))
    );
    let after = harness.list_messages(None).await.unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "the parent's history is untouched"
    );
    assert!(
        !after
            .iter()
            .any(|m| m.message == KernelMessage::user("Summarize so far"))
    );
    assert!(
        harness.session().tasks().tasks().is_empty(),
        "the fork's task_write was a stub"
    );

    // Deleting the parent deletes its fork: no copy of the conversation stays behind.
    let mut events = harness.subscribe();
    harness.delete_thread(&parent_thread).await.unwrap();
    assert!(harness.list_threads(true).await.unwrap().is_empty());
    assert!(
        harness
            .list_messages(Some(&fork.id))
            .await
            .unwrap_or_default()
            .is_empty()
    );
    let deleted: Vec<String> = drain(&mut events)
        .iter()
        .filter_map(|envelope| match &envelope.event {
            HarnessEvent::ThreadDeleted { thread_id } => Some(thread_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, [fork.id.clone(), parent_thread]);
}

#[tokio::test]
async fn an_unknown_subagent_type_is_a_tool_error_the_model_sees() {
    let model = Arc::new(
        ScriptedModel::new("scripted/one")
            .then(Scripted::tool_call(
                "subagent",
                json!({"agentType": "nope", "task": "x"}),
            ))
            .then(Scripted::text("ok")),
    );
    let harness = Harness::builder("coder")
        .mode(Mode::new("build").default_model("scripted/one"))
        .model_resolver({
            let model = Arc::clone(&model);
            move |_| Ok(model.clone() as _)
        })
        .subagent(SubagentDef::new(
            "worker",
            "Worker",
            "Does a side task.",
            "You work.",
        ))
        .build()
        .unwrap();
    harness.send_message("go").await.unwrap();
    let result = last_tool_result(&model.requests()[1]);
    assert!(result.contains("worker"), "{result}");
}

#[tokio::test(start_paused = true)]
async fn heartbeats_start_with_init_and_stop_with_destroy() {
    let (ticks, mut ticked) = mpsc::unbounded_channel();
    let stopped = Arc::new(AtomicUsize::new(0));
    let heartbeat = |id: &'static str| {
        let ticks = ticks.clone();
        let stopped = Arc::clone(&stopped);
        Heartbeat::new(id, Duration::from_secs(30), move || {
            let ticks = ticks.clone();
            async move {
                let _ = ticks.send(id);
            }
        })
        .on_shutdown(move || {
            let stopped = Arc::clone(&stopped);
            async move {
                stopped.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let locks = MemoryThreadLock::new();
    let harness = Harness::builder("daemon")
        .mode(Mode::new("build"))
        .thread_lock(Arc::new(locks.holder()))
        .heartbeat(heartbeat("sync"))
        .build()
        .unwrap();
    harness.init().await.unwrap();
    assert_eq!(
        ticked.recv().await,
        Some("sync"),
        "the first tick runs right away"
    );
    assert_eq!(
        ticked.recv().await,
        Some("sync"),
        "then every interval (the clock is paused)"
    );

    harness.add_heartbeat(heartbeat("refresh"));
    let mut ids = harness.heartbeat_ids();
    ids.sort();
    assert_eq!(ids, ["refresh", "sync"]);
    assert!(harness.remove_heartbeat("refresh").await);
    assert!(!harness.remove_heartbeat("refresh").await);
    assert_eq!(
        stopped.load(Ordering::SeqCst),
        1,
        "removing runs the shutdown hook"
    );

    let thread = harness.create_thread(None).await.unwrap();
    harness.destroy().await;
    assert_eq!(stopped.load(Ordering::SeqCst), 2);
    assert!(harness.heartbeat_ids().is_empty());
    // No more ticks after destroy, however long we wait.
    tokio::time::sleep(Duration::from_secs(600)).await;
    while let Ok(id) = ticked.try_recv() {
        assert_eq!(id, "sync", "only ticks from before destroy were queued");
    }
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(ticked.try_recv().is_err());
    // destroy released the thread: another harness can take it.
    let other = Harness::builder("other")
        .mode(Mode::new("build"))
        .store(harness.store().clone())
        .thread_lock(Arc::new(locks.holder()))
        .build()
        .unwrap();
    other.switch_thread(&thread.id).await.unwrap();
    assert_eq!(harness.session().thread_id(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_aborts_the_active_run() {
    let (model, mut gate) = harness_tests::harness::GatedModel::new("gated/one");
    let harness = harness_tests::harness::builder_with(model).build().unwrap();
    harness.init().await.unwrap();
    let mut events = harness.subscribe();
    let run = tokio::spawn({
        let harness = harness.clone();
        async move { harness.send_message("work").await }
    });
    gate.next_call().await;
    harness.destroy().await;
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.outcome, harness_core::harness::RunOutcome::Aborted);
    next_matching(&mut events, |e| {
        matches!(e, HarnessEvent::AgentEnd { .. }).then_some(())
    })
    .await;
    assert!(!harness.session().is_running());
}
