#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Approvals (allow / deny / ask, session grants, headless policy), suspensions (`ask_user`,
//! `submit_plan`, `request_access`, several at once, abort) and the task tools, answered from
//! other tasks the way a user interface does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use harness_core::event::{HarnessEvent, Subscription};
use harness_core::harness::{Harness, HarnessBuilder, HarnessError, Mode, RunOutcome, RunSummary};
use harness_core::model::{ModelRequest, Scripted, ScriptedModel};
use harness_core::task::TaskStatus;
use harness_core::tool::{ApprovalAnswer, ToolError, tool_fn};
use harness_tags::tags::ToolGateResult;
use harness_tags::{GateVerdict, KernelMessage, ToolCallCtx, ToolCategory};
use harness_tests::harness::next_matching;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// A `deploy` tool (category `execute`) that counts its runs, and a gate that asks for it
/// unless the session granted the tool or its category.
fn deploying(model: ScriptedModel, deploys: Arc<AtomicUsize>) -> HarnessBuilder {
    let model = Arc::new(model);
    Harness::builder("ops")
        .mode(Mode::new("build").default_model("scripted/ops"))
        .model_resolver(move |_| Ok(model.clone() as _))
        .tool(
            tool_fn("deploy", "Deploys the service.", move |_: Value, _| {
                let deploys = Arc::clone(&deploys);
                async move {
                    deploys.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ToolError>("deployed")
                }
            })
            .category(ToolCategory::Execute),
        )
        .compose(deploys_ask)
}

/// A gate that asks for `deploy` unless the session granted the tool or its category.
fn deploys_ask(c: harness_tags::Compose) -> harness_tags::Compose {
    c.on(
        ToolGateResult,
        |verdict: &GateVerdict, ctx: &ToolCallCtx| {
            let granted = ctx.session.granted_tools.contains(&ctx.tool_name)
                || ctx
                    .category
                    .is_some_and(|c| ctx.session.granted_categories.contains(&c));
            if ctx.tool_name == "deploy" && !granted {
                GateVerdict::ask("deploys change production")
            } else {
                verdict.clone()
            }
        },
    )
}

fn deploy_twice() -> ScriptedModel {
    ScriptedModel::new("scripted/ops")
        .then(Scripted::tool_call("deploy", json!({})))
        .then(Scripted::text("first run done"))
        .then(Scripted::tool_call("deploy", json!({})))
        .then(Scripted::text("second run done"))
}

fn send(harness: &Harness, text: &str) -> JoinHandle<Result<RunSummary, HarnessError>> {
    let harness = harness.clone();
    let text = text.to_owned();
    tokio::spawn(async move { harness.send_message(text).await })
}

async fn approval_requested(events: &mut Subscription) -> (String, Option<ToolCategory>) {
    next_matching(events, |e| match e {
        HarnessEvent::ToolApprovalRequired {
            tool_name,
            category,
            ..
        } => Some((tool_name.clone(), *category)),
        _ => None,
    })
    .await
}

async fn suspended(events: &mut Subscription) -> (String, String, Value) {
    next_matching(events, |e| match e {
        HarnessEvent::ToolSuspended {
            tool_call_id,
            tool_name,
            suspend_payload,
            ..
        } => Some((
            tool_call_id.clone(),
            tool_name.clone(),
            suspend_payload.clone(),
        )),
        _ => None,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_waits_for_the_answer_from_another_task() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let harness = deploying(deploy_twice(), Arc::clone(&deploys))
        .build()
        .unwrap();
    let mut events = harness.subscribe();

    let run = send(&harness, "ship it");
    let (tool, category) = approval_requested(&mut events).await;
    assert_eq!(
        (tool.as_str(), category),
        ("deploy", Some(ToolCategory::Execute))
    );
    let waiting = harness.session().pending_approvals();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].1, "deploy");
    let state =
        harness_tests::harness::display_where(&harness, |s| !s.pending_approvals.is_empty()).await;
    let pending = state.pending_approvals[0].clone();
    assert_eq!(pending.tool_name, "deploy");
    assert_eq!(
        deploys.load(Ordering::SeqCst),
        0,
        "nothing runs before the answer"
    );

    tokio::spawn({
        let harness = harness.clone();
        async move { harness.respond_to_tool_approval(ApprovalAnswer::Approve, None) }
    })
    .await
    .unwrap()
    .unwrap();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("first run done"));
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    assert!(harness.session().pending_approvals().is_empty());

    let error = harness
        .respond_to_tool_approval(ApprovalAnswer::Approve, None)
        .unwrap_err();
    assert!(matches!(error, HarnessError::NothingPending(_)), "{error}");
    let error = harness
        .respond_to_tool_approval(ApprovalAnswer::Approve, Some(&pending.tool_call_id))
        .unwrap_err();
    assert!(
        matches!(&error, HarnessError::NotPending { call_id, .. } if *call_id == pending.tool_call_id),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decline_reaches_the_model_and_the_tool_never_runs() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let model = deploy_twice();
    let harness = deploying(model, Arc::clone(&deploys)).build().unwrap();
    let mut events = harness.subscribe();
    let run = send(&harness, "ship it");
    approval_requested(&mut events).await;
    harness
        .respond_to_tool_approval(
            ApprovalAnswer::Decline {
                reason: "not on a Friday".into(),
            },
            None,
        )
        .unwrap();
    run.await.unwrap().unwrap();
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    let result = next_matching(&mut events, |e| match e {
        HarnessEvent::ToolEnd {
            result, is_error, ..
        } => Some((result.clone(), *is_error)),
        _ => None,
    })
    .await;
    assert!(result.0.contains("not on a Friday"), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allow_tool_becomes_a_session_grant() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let harness = deploying(deploy_twice(), Arc::clone(&deploys))
        .build()
        .unwrap();
    let mut events = harness.subscribe();
    let run = send(&harness, "ship it");
    approval_requested(&mut events).await;
    harness
        .respond_to_tool_approval(ApprovalAnswer::AlwaysAllowTool, None)
        .unwrap();
    run.await.unwrap().unwrap();
    assert!(harness.session().grants().tools.contains("deploy"));

    // The second deploy runs without asking.
    let summary = harness.send_message("again").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("second run done"));
    assert_eq!(deploys.load(Ordering::SeqCst), 2);
    let mut asked = 0;
    while let Some(Some(harness_core::event::Delivery::Event(e))) =
        futures_util::FutureExt::now_or_never(futures_util::StreamExt::next(&mut events))
    {
        asked += usize::from(matches!(e.event, HarnessEvent::ToolApprovalRequired { .. }));
    }
    assert_eq!(asked, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allow_category_grants_the_whole_category() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let harness = deploying(deploy_twice(), Arc::clone(&deploys))
        .build()
        .unwrap();
    let mut events = harness.subscribe();
    let run = send(&harness, "ship it");
    approval_requested(&mut events).await;
    harness
        .respond_to_tool_approval(ApprovalAnswer::AlwaysAllowCategory, None)
        .unwrap();
    run.await.unwrap().unwrap();
    assert!(
        harness
            .session()
            .grants()
            .categories
            .contains(&ToolCategory::Execute)
    );
    harness.send_message("again").await.unwrap();
    assert_eq!(deploys.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn headless_ask_is_declined_with_a_message_the_model_sees() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let model = Arc::new(deploy_twice());
    let harness = deploying(ScriptedModel::new("scripted/unused"), Arc::clone(&deploys))
        .model_resolver({
            let model = Arc::clone(&model);
            move |_| Ok(model.clone() as _)
        })
        .interactive(false)
        .build()
        .unwrap();
    // A subscriber does not matter once the harness is explicitly headless.
    let _events = harness.subscribe();
    let summary = harness.send_message("ship it").await.unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete);
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    let second_request = &model.requests()[1];
    let results = second_request.tool_results();
    assert!(results[0].contains("no one is attached"), "{results:?}");
}

#[tokio::test]
async fn with_no_subscriber_the_harness_is_headless_by_default() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let harness = deploying(deploy_twice(), Arc::clone(&deploys))
        .build()
        .unwrap();
    let summary = harness.send_message("ship it").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("first run done"));
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cancels_a_pending_approval() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let harness = deploying(deploy_twice(), Arc::clone(&deploys))
        .build()
        .unwrap();
    let mut events = harness.subscribe();
    let run = send(&harness, "ship it");
    approval_requested(&mut events).await;
    harness.abort();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Aborted);
    assert!(harness.session().pending_approvals().is_empty());
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn an_approval_nobody_answers_in_time_is_declined() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let model = Arc::new(
        ScriptedModel::new("scripted/ops")
            .then(Scripted::tool_call("deploy", json!({})))
            .then(Scripted::text("gave up")),
    );
    let harness = deploying(ScriptedModel::new("scripted/unused"), Arc::clone(&deploys))
        .model_resolver({
            let model = Arc::clone(&model);
            move |_| Ok(model.clone() as _)
        })
        .input_timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap();
    let mut events = harness.subscribe();
    let run = send(&harness, "ship it");
    approval_requested(&mut events).await;
    // Paused time moves on while every task waits: the timeout passes with no answer (an
    // hour later, the test gives up instead of hanging).
    let answered = next_matching(&mut events, |e| match e {
        HarnessEvent::ToolApprovalAnswered { approved, .. } => Some(*approved),
        _ => None,
    });
    let approved = tokio::time::timeout(std::time::Duration::from_secs(3600), answered)
        .await
        .expect("the approval was still waiting an hour later");
    assert!(!approved);
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.outcome, RunOutcome::Complete);
    assert_eq!(summary.final_text.as_deref(), Some("gave up"));
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    assert!(harness.session().pending_approvals().is_empty());
    let requests = model.requests();
    let results = requests[1].tool_results();
    assert!(
        results[0].contains("no one answered within 30 s"),
        "{results:?}"
    );
    // Answering now is too late: nothing waits.
    assert!(
        harness
            .respond_to_tool_approval(ApprovalAnswer::Approve, None)
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn a_question_nobody_answers_in_time_is_answered_as_without_a_user() {
    let model = Arc::new(
        ScriptedModel::new("scripted/asker")
            .then(Scripted::tool_call(
                "ask_user",
                json!({"question": "Which region?"}),
            ))
            .then(Scripted::text("went with the default")),
    );
    let harness = Harness::builder("asker")
        .mode(Mode::new("build").default_model("scripted/asker"))
        .model_resolver({
            let model = Arc::clone(&model);
            move |_| Ok(model.clone() as _)
        })
        .interactive(true)
        .input_timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap();
    let mut events = harness.subscribe();
    let run = send(&harness, "deploy");
    suspended(&mut events).await;
    // Paused time moves on while every task waits; an hour later the test gives up.
    let summary = tokio::time::timeout(std::time::Duration::from_secs(3600), run)
        .await
        .expect("the question was still waiting an hour later")
        .unwrap()
        .unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("went with the default"));
    assert!(harness.session().pending_suspensions().is_empty());
    let requests = model.requests();
    let results = requests[1].tool_results();
    assert!(
        results[0].contains("[Question for user]: Which region?"),
        "{results:?}"
    );
    assert!(
        harness
            .respond_to_tool_suspension(json!("eu"), None)
            .is_err(),
        "answering now is too late"
    );
}

/// A harness whose model plays `script`, with the built-in tools only.
fn scripted(script: ScriptedModel) -> (Harness, Arc<ScriptedModel>) {
    let model = Arc::new(script);
    let harness = Harness::builder("asker")
        .mode(
            Mode::new("plan")
                .default_model("scripted/asker")
                .transitions_to("build"),
        )
        .mode(Mode::new("build").default_model("scripted/asker"))
        .model_resolver({
            let model = Arc::clone(&model);
            move |_| Ok(model.clone() as _)
        })
        .build()
        .unwrap();
    (harness, model)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_user_free_text_single_and_multi_select() {
    let (harness, model) = scripted(
        ScriptedModel::new("scripted/asker")
            .then(Scripted::tool_call("ask_user", json!({"question": "Which database?"})))
            .then(Scripted::tool_call(
                "ask_user",
                json!({"question": "Pick one", "options": [{"label": "SQLite"}, {"label": "Postgres"}]}),
            ))
            .then(Scripted::tool_call(
                "ask_user",
                json!({
                    "question": "Pick any",
                    "options": [{"label": "logs"}, {"label": "metrics"}, {"label": "traces"}],
                    "selectionMode": "multi_select"
                }),
            ))
            .then(Scripted::text("noted")),
    );
    let mut events = harness.subscribe();
    let run = send(&harness, "set up storage");

    let (_, tool, payload) = suspended(&mut events).await;
    assert_eq!(tool, "ask_user");
    assert_eq!(payload["question"], "Which database?");
    harness_tests::harness::display_where(&harness, |s| s.pending_suspensions.len() == 1).await;
    harness
        .respond_to_tool_suspension(json!("the embedded one"), None)
        .unwrap();

    let (_, _, payload) = suspended(&mut events).await;
    assert_eq!(
        payload["selectionMode"], "single_select",
        "options without a mode mean single select"
    );
    let error = harness
        .respond_to_tool_suspension(json!(["SQLite"]), None)
        .unwrap_err();
    assert!(matches!(error, HarnessError::InvalidAnswer(_)), "{error}");
    assert_eq!(
        harness.session().pending_suspensions().len(),
        1,
        "a rejected answer leaves it pending"
    );
    harness
        .respond_to_tool_suspension(json!("SQLite"), None)
        .unwrap();

    let (_, _, payload) = suspended(&mut events).await;
    assert_eq!(payload["selectionMode"], "multi_select");
    harness
        .respond_to_tool_suspension(json!(["logs", "traces"]), None)
        .unwrap();

    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("noted"));
    let requests = model.requests();
    let results = requests.last().unwrap().tool_results();
    assert_eq!(
        results,
        [
            "User answered: the embedded one",
            "User answered: SQLite",
            "User answered: logs, traces"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_suspensions_need_a_call_id() {
    let (harness, model) = scripted(
        ScriptedModel::new("scripted/asker")
            .then(Scripted::tool_calls([
                ("ask_user", json!({"question": "Name?"})),
                (
                    "request_access",
                    json!({"resource": "/etc/hosts", "reason": "add a host"}),
                ),
            ]))
            .then(Scripted::text("thanks")),
    );
    let mut events = harness.subscribe();
    let run = send(&harness, "go");
    let first = suspended(&mut events).await;
    let second = suspended(&mut events).await;
    let error = harness
        .respond_to_tool_suspension(json!("x"), None)
        .unwrap_err();
    assert!(
        matches!(error, HarnessError::AmbiguousSuspension(_)),
        "{error}"
    );
    assert!(
        error.to_string().contains(&first.0) && error.to_string().contains(&second.0),
        "{error}"
    );

    let (ask, access) = if first.1 == "ask_user" {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(access.2["resource"], "/etc/hosts");
    let error = harness
        .respond_to_tool_suspension(json!("x"), Some("no-such-call"))
        .unwrap_err();
    assert!(
        matches!(&error, HarnessError::NotPending { call_id, waiting, .. }
            if call_id == "no-such-call" && waiting.contains(&ask.0) && waiting.contains(&access.0)),
        "{error}"
    );
    harness
        .respond_to_tool_suspension(json!({"granted": true}), Some(&access.0))
        .unwrap();
    harness
        .respond_to_tool_suspension(json!("Ada"), Some(&ask.0))
        .unwrap();
    run.await.unwrap().unwrap();

    let requests = model.requests();
    let mut results = requests.last().unwrap().tool_results();
    results.sort();
    assert_eq!(
        results,
        ["Access to /etc/hosts was granted.", "User answered: Ada"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cancels_every_wait() {
    let (harness, _) = scripted(
        ScriptedModel::new("scripted/asker")
            .then(Scripted::tool_call(
                "ask_user",
                json!({"question": "Name?"}),
            ))
            .then(Scripted::text("unreachable")),
    );
    let mut events = harness.subscribe();
    let run = send(&harness, "go");
    suspended(&mut events).await;
    tokio::spawn({
        let harness = harness.clone();
        async move { harness.abort() }
    });
    assert_eq!(run.await.unwrap().unwrap().outcome, RunOutcome::Aborted);
    assert!(harness.session().pending_suspensions().is_empty());
    let error = harness
        .respond_to_tool_suspension(json!("late"), None)
        .unwrap_err();
    assert!(matches!(error, HarnessError::NothingPending(_)), "{error}");
}

#[tokio::test]
async fn without_a_user_interface_questions_return_plain_text() {
    let (harness, model) = scripted(
        ScriptedModel::new("scripted/asker")
            .then(Scripted::tool_calls([
                ("ask_user", json!({"question": "Name?"})),
                (
                    "submit_plan",
                    json!({"title": "Refactor", "plan": "1. split"}),
                ),
                (
                    "request_access",
                    json!({"resource": "prod-db", "reason": "read"}),
                ),
            ]))
            .then(Scripted::text("ok")),
    );
    harness.send_message("go").await.unwrap();
    let requests = model.requests();
    let results = requests.last().unwrap().tool_results();
    assert_eq!(results[0], "[Question for user]: Name?");
    assert!(
        results[1].starts_with("[Plan submitted for review]"),
        "{results:?}"
    );
    assert!(
        results[2].starts_with("[Access request]: prod-db"),
        "{results:?}"
    );
    assert_eq!(
        harness.session().mode_id(),
        "plan",
        "an unreviewed plan switches nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_plan_gets_feedback_and_an_approved_one_switches_mode_at_rest() {
    let (harness, model) = scripted(
        ScriptedModel::new("scripted/asker")
            .then(Scripted::tool_call(
                "submit_plan",
                json!({"title": "Parser", "plan": "1. lex"}),
            ))
            .then(Scripted::tool_call(
                "submit_plan",
                json!({"title": "Parser", "plan": "1. lex\n2. parse"}),
            ))
            .then(Scripted::text("planned")),
    );
    assert_eq!(harness.session().mode_id(), "plan");
    let mut events = harness.subscribe();
    let run = send(&harness, "plan the parser");

    let (_, tool, payload) = suspended(&mut events).await;
    assert_eq!(tool, "submit_plan");
    assert_eq!(payload["plan"], "1. lex");
    let error = harness
        .respond_to_tool_suspension(json!({"action": "maybe"}), None)
        .unwrap_err();
    assert!(matches!(error, HarnessError::InvalidAnswer(_)), "{error}");
    harness
        .respond_to_tool_suspension(
            json!({"action": "rejected", "feedback": "add a parse step"}),
            None,
        )
        .unwrap();

    let (_, _, payload) = suspended(&mut events).await;
    assert_eq!(payload["plan"], "1. lex\n2. parse");
    assert_eq!(harness.session().mode_id(), "plan");
    harness
        .respond_to_tool_suspension(json!({"action": "approved"}), None)
        .unwrap();

    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("planned"));
    assert_eq!(
        harness.session().mode_id(),
        "build",
        "switched once the run was at rest"
    );
    let requests = model.requests();
    let results = requests.last().unwrap().tool_results();
    assert!(
        results[0].contains("User feedback: add a parse step"),
        "{results:?}"
    );
    assert!(results[1].starts_with("Plan approved."), "{results:?}");
    let switched = next_matching(&mut events, |e| match e {
        HarnessEvent::ModeChanged { mode_id, .. } => Some(mode_id.clone()),
        _ => None,
    })
    .await;
    assert_eq!(switched, "build");
}

#[tokio::test]
async fn task_tools_keep_stable_ids_and_emit_task_updated() {
    let (harness, _) = scripted(
        ScriptedModel::new("scripted/asker")
            .then(Scripted::tool_call(
                "task_write",
                json!({"tasks": [
                    {"content": "Write the lexer", "status": "in_progress"},
                    {"content": "Write the parser"}
                ]}),
            ))
            .then(Scripted::tool_call(
                "task_complete",
                json!({"id": "write_the_lexer"}),
            ))
            .then(Scripted::tool_call(
                "task_write",
                json!({"tasks": [
                    {"content": "Write the lexer", "status": "completed"},
                    {"content": "Write the parser", "status": "in_progress"},
                    {"content": "Write the parser"}
                ]}),
            ))
            .then(Scripted::tool_call("task_check", json!({})))
            .then(Scripted::text("on track")),
    );
    let mut events = harness.subscribe();
    harness.send_message("build a parser").await.unwrap();

    let first = next_matching(&mut events, |e| match e {
        HarnessEvent::TaskUpdated { tasks } if !tasks.is_empty() => Some(tasks.clone()),
        _ => None,
    })
    .await;
    let ids: Vec<&str> = first.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["write_the_lexer", "write_the_parser"]);

    let tasks = harness.session().tasks().tasks();
    let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(
        ids,
        ["write_the_lexer", "write_the_parser", "write_the_parser_2"],
        "ids are reused, duplicates suffixed"
    );
    assert_eq!(tasks[0].status, TaskStatus::Completed);
    assert_eq!(tasks[1].status, TaskStatus::InProgress);
    harness.events().flush_display_state();
    assert_eq!(harness.display_state().tasks, tasks);

    // The list is saved with the thread and comes back with it.
    let thread = harness.session().thread_id().unwrap();
    harness.create_thread(None).await.unwrap();
    assert!(harness.session().tasks().tasks().is_empty());
    harness.switch_thread(&thread).await.unwrap();
    assert_eq!(harness.session().tasks().tasks(), tasks);
}

/// Two subagents run in parallel and both ask to deploy: both approvals wait at once, each is
/// answered by its call id, and each subagent gets its own answer (one slot used to keep only
/// the second and silently decline the first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_asked_at_once_by_two_subagents_are_answered_each_by_call_id() {
    use harness_core::harness::SubagentDef;
    use harness_core::model::{ModelId, ModelResponse};
    use harness_tags::{FinishReason, ToolCall};

    let parent = Arc::new(
        ScriptedModel::new("scripted/lead")
            .then(Scripted::tool_calls([
                (
                    "subagent",
                    json!({"agentType": "deployer", "task": "deploy a"}),
                ),
                (
                    "subagent",
                    json!({"agentType": "deployer", "task": "deploy b"}),
                ),
            ]))
            .then(Scripted::text("both handled")),
    );
    // Each deployer asks for `deploy` with its own call id, then reports the result it got.
    let deployer = Scripted::Respond(Arc::new(|request: &ModelRequest| {
        let task = request
            .messages
            .iter()
            .find_map(|m| match m {
                KernelMessage::User { content } => content.strip_prefix("deploy "),
                _ => None,
            })
            .unwrap_or("?")
            .to_owned();
        match request.tool_results().pop() {
            Some(result) => Scripted::text(format!("{task}: {result}")),
            None => Scripted::Response(ModelResponse {
                tool_calls: vec![ToolCall {
                    id: format!("deploy-{task}"),
                    name: "deploy".into(),
                    arguments: json!({"target": task}),
                }],
                finish_reason: FinishReason::ToolCalls,
                ..ModelResponse::default()
            }),
        }
    }));
    let child = Arc::new(
        (0..4).fold(ScriptedModel::new("scripted/deployer"), |model, _| {
            model.then(deployer.clone())
        }),
    );
    let deployed = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let harness = Harness::builder("ops")
        .mode(Mode::new("build").default_model("scripted/lead"))
        .model_resolver({
            let (parent, child) = (Arc::clone(&parent), Arc::clone(&child));
            move |id: &ModelId| {
                let model: Arc<dyn harness_core::model::Model> =
                    if id.as_str() == "scripted/deployer" {
                        child.clone()
                    } else {
                        parent.clone()
                    };
                Ok(model)
            }
        })
        .tool(
            tool_fn("deploy", "Deploys a target.", {
                let deployed = Arc::clone(&deployed);
                move |args: Value, _| {
                    let deployed = Arc::clone(&deployed);
                    async move {
                        let target = args["target"].as_str().unwrap_or_default().to_owned();
                        deployed.lock().unwrap().push(target.clone());
                        Ok::<_, ToolError>(format!("deployed {target}"))
                    }
                }
            })
            .category(ToolCategory::Execute),
        )
        .subagent(
            SubagentDef::new("deployer", "Deployer", "Deploys one target.", "You deploy.")
                .allowed_harness_tools(["deploy"])
                .default_model(ModelId::new("scripted/deployer").unwrap()),
        )
        .compose(deploys_ask)
        .build()
        .unwrap();
    let mut events = harness.subscribe();
    let run = send(&harness, "deploy both");

    // Both wait at once, in the session and in the display state.
    let state =
        harness_tests::harness::display_where(&harness, |s| s.pending_approvals.len() == 2).await;
    let mut shown: Vec<&str> = state
        .pending_approvals
        .iter()
        .map(|p| p.tool_call_id.as_str())
        .collect();
    shown.sort_unstable();
    assert_eq!(shown, ["deploy-a", "deploy-b"]);
    let mut waiting: Vec<String> = harness
        .session()
        .pending_approvals()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    waiting.sort();
    assert_eq!(waiting, ["deploy-a", "deploy-b"]);

    // Without a call id the answer is refused, naming both.
    let error = harness
        .respond_to_tool_approval(ApprovalAnswer::Approve, None)
        .unwrap_err();
    assert!(
        matches!(error, HarnessError::AmbiguousApproval(_)),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("deploy-a") && message.contains("deploy-b"),
        "{message}"
    );

    harness
        .respond_to_tool_approval(
            ApprovalAnswer::Decline {
                reason: "b is frozen".into(),
            },
            Some("deploy-b"),
        )
        .unwrap();
    harness
        .respond_to_tool_approval(ApprovalAnswer::Approve, Some("deploy-a"))
        .unwrap();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("both handled"));

    assert_eq!(
        *deployed.lock().unwrap(),
        ["a"],
        "only the approved call ran"
    );
    let last = parent.requests().pop().unwrap();
    let results = last.tool_results();
    assert!(
        results.iter().any(|r| r.starts_with("a: deployed a")),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| r.starts_with("b: ") && r.contains("b is frozen")),
        "{results:?}"
    );
    let mut answered = Vec::new();
    while answered.len() < 2 {
        answered.push(
            next_matching(&mut events, |e| match e {
                HarnessEvent::ToolApprovalAnswered {
                    tool_call_id,
                    approved,
                } => Some((tool_call_id.clone(), *approved)),
                _ => None,
            })
            .await,
        );
    }
    answered.sort();
    assert_eq!(
        answered,
        [
            ("deploy-a".to_owned(), true),
            ("deploy-b".to_owned(), false)
        ]
    );
    assert!(harness.display_state().pending_approvals.is_empty());
    assert!(harness.session().pending_approvals().is_empty());
}
