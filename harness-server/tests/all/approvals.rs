//! Approvals and questions over HTTP: the execution waits (an `awaiting_input` frame and
//! field), and `input` answers it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use harness_core::harness::HarnessBuilder;
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ToolError, tool_fn};
use harness_tags::tags::ToolGateResult;
use harness_tags::{GateVerdict, ToolCallCtx, ToolCategory};
use harness_tests::fixtures::hang;
use serde_json::{Value, json};

use crate::support::{Served, frames, frames_until, serve_with};

fn deploy_then_answer() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call("deploy", json!({ "service": "api" })))
        .then(Scripted::text("finished"))
        .cycling()
}

fn hang_script() -> ScriptedModel {
    ScriptedModel::new("scripted/test").then(Scripted::tool_call("hang", json!({})))
}

/// A `deploy` tool that counts its runs and always asks for approval.
fn deploying(deploys: Arc<AtomicUsize>) -> impl Fn(HarnessBuilder) -> HarnessBuilder {
    move |builder| {
        let deploys = Arc::clone(&deploys);
        builder
            .tool(
                tool_fn("deploy", "Deploys a service.", move |_: Value, _| {
                    let deploys = Arc::clone(&deploys);
                    async move {
                        deploys.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ToolError>("deployed")
                    }
                })
                .category(ToolCategory::Execute),
            )
            .tool(hang(Duration::from_secs(3600)))
            .compose(|c| {
                c.on(
                    ToolGateResult,
                    |verdict: &GateVerdict, ctx: &ToolCallCtx| {
                        if ctx.tool_name == "deploy" {
                            GateVerdict::ask("deploys change production")
                        } else {
                            verdict.clone()
                        }
                    },
                )
            })
    }
}

async fn served(
    script: fn() -> ScriptedModel,
    timeout: Duration,
) -> (Served, Arc<AtomicUsize>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let deploys = Arc::new(AtomicUsize::new(0));
    let served = serve_with(
        &dir.path().join("h.db"),
        script,
        Arc::new(deploying(Arc::clone(&deploys))),
        |config| config.input_timeout = timeout,
    )
    .await;
    (served, deploys, dir)
}

/// Runs `deploy` up to its approval; the execution's id.
async fn waiting(served: &Served) -> String {
    let session = served.session().await;
    let execution = served.execute(&session, "deploy the api").await;
    let seen = frames_until(served.attach(&execution, None).await, |frame| {
        frame.event == "awaiting_input"
    })
    .await;
    let asked = seen.last().unwrap();
    assert_eq!(asked.data["kind"], "approval");
    assert_eq!(asked.data["tool_name"], "deploy");
    assert_eq!(asked.data["input"], json!({ "service": "api" }));
    let state = served.get(&format!("/executions/{execution}")).await;
    assert_eq!(state.body["execution"]["status"], "running");
    assert_eq!(
        state.body["execution"]["awaiting_input"]["kind"],
        "approval"
    );
    execution
}

async fn answer(served: &Served, execution: &str, data: &str) -> u16 {
    served
        .post(
            &format!("/executions/{execution}/input"),
            json!({ "data": data }),
        )
        .await
        .status
}

async fn tool_result(served: &Served, execution: &str) -> Value {
    let all = frames(served.attach(execution, None).await, None).await;
    assert_eq!(all.last().unwrap().event, "done");
    let asked = all.iter().position(|frame| frame.event == "awaiting_input");
    let answered = all.iter().position(|frame| frame.event == "input_answered");
    if let Some(asked) = asked {
        assert!(answered.is_some_and(|answered| answered > asked), "{all:?}");
        assert_eq!(
            all[answered.unwrap()].data["call_id"],
            all[asked].data["call_id"]
        );
    }
    all.iter()
        .find(|frame| frame.event == "tool_result")
        .map(|frame| frame.data.clone())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_yes_runs_the_tool() {
    let (served, deploys, _dir) = served(deploy_then_answer, Duration::from_secs(600)).await;
    let execution = waiting(&served).await;
    assert_eq!(answer(&served, &execution, "yes").await, 200);
    assert_eq!(tool_result(&served, &execution).await["success"], true);
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    let result = served.get(&format!("/executions/{execution}/result")).await;
    assert_eq!(result.body["result"]["status"], "completed");
    assert_eq!(result.body["result"]["output"], "finished");
    // Over: answering now is 410, and nothing waits in the record.
    assert_eq!(answer(&served, &execution, "yes").await, 410);
    let state = served.get(&format!("/executions/{execution}")).await;
    assert!(state.body["execution"].get("awaiting_input").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_no_skips_the_tool() {
    let (served, deploys, _dir) = served(deploy_then_answer, Duration::from_secs(600)).await;
    let execution = waiting(&served).await;
    assert_eq!(answer(&served, &execution, "maybe").await, 422);
    assert_eq!(answer(&served, &execution, "no").await, 200);
    assert_eq!(tool_result(&served, &execution).await["success"], false);
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_nobody_answers_is_declined_after_the_timeout() {
    let (served, deploys, _dir) = served(deploy_then_answer, Duration::from_millis(200)).await;
    let session = served.session().await;
    let execution = served.execute(&session, "deploy the api").await;
    let result = tool_result(&served, &execution).await;
    assert_eq!(result["success"], false);
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    let state = served.get(&format!("/executions/{execution}")).await;
    assert_eq!(state.body["execution"]["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_is_409_while_nothing_waits_and_cancel_ends_the_run() {
    let (served, _, _dir) = served(hang_script, Duration::from_secs(600)).await;
    let session = served.session().await;
    let execution = served.execute(&session, "hang").await;
    frames_until(served.attach(&execution, None).await, |frame| {
        frame.event == "tool_call_start"
    })
    .await;
    assert_eq!(answer(&served, &execution, "yes").await, 409);
    let pending = served.get(&format!("/executions/{execution}/result")).await;
    assert_eq!(pending.status, 409);
    let cancelled = served
        .post(&format!("/executions/{execution}/cancel"), json!({}))
        .await;
    assert_eq!(cancelled.status, 200, "{:?}", cancelled.body);
    assert_eq!(cancelled.body["cancelled"], true);
    assert_eq!(cancelled.body["execution"]["status"], "cancelled");
    let all = frames(served.attach(&execution, None).await, None).await;
    let kinds: Vec<&str> = all.iter().map(|frame| frame.event.as_str()).collect();
    assert_eq!(&kinds[kinds.len() - 2..], ["error", "done"]);
    let again = served
        .post(&format!("/executions/{execution}/cancel"), json!({}))
        .await;
    assert_eq!(again.status, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_needs_an_approval_is_409_naming_the_execution() {
    let (served, deploys, _dir) = served(deploy_then_answer, Duration::from_secs(600)).await;
    let session = served.session().await;
    let sent = served
        .post(
            &format!("/sessions/{session}/message"),
            json!({ "content": "deploy" }),
        )
        .await;
    assert_eq!(sent.status, 409, "{:?}", sent.body);
    let waiting = &sent.body["error"]["details"];
    assert_eq!(waiting["awaiting_input"]["kind"], "approval");
    let execution = waiting["execution_id"].as_str().unwrap().to_owned();
    assert_eq!(answer(&served, &execution, "yes").await, 200);
    assert_eq!(tool_result(&served, &execution).await["success"], true);
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_execution_cancelled_never_starts() {
    let (served, _, _dir) = served(hang_script, Duration::from_secs(600)).await;
    let session = served.session().await;
    let running = served.execute(&session, "hang").await;
    let queued = served.execute(&session, "after").await;
    let state = served.get(&format!("/executions/{queued}")).await;
    assert_eq!(state.body["execution"]["status"], "pending");
    assert_eq!(state.body["execution"]["message"], "after");
    let cancelled = served
        .post(&format!("/executions/{queued}/cancel"), json!({}))
        .await;
    assert_eq!(cancelled.body["execution"]["status"], "cancelled");
    let all = frames(served.attach(&queued, None).await, None).await;
    let kinds: Vec<&str> = all.iter().map(|frame| frame.event.as_str()).collect();
    assert_eq!(kinds, ["error", "done"]);
    assert_eq!(all[0].data["code"], "cancelled");
    let mine = served
        .get(&format!("/executions?session_id={session}"))
        .await;
    assert_eq!(mine.body["total"], 2);
    let other = served.get("/executions?session_id=nobody").await;
    assert_eq!(other.body["total"], 0);
    served
        .post(&format!("/executions/{running}/cancel"), json!({}))
        .await;
    let state = served.get(&format!("/executions/{running}")).await;
    assert_eq!(state.body["execution"]["status"], "cancelled");
}
