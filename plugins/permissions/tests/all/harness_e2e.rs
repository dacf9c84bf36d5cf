#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The permissions plugin in a running harness: allowed calls run, denied tools are never
//! offered nor run, `ask` waits for an answer given from another task, "always allow"
//! answers become grants the chain honours (and, when asked, persist with the thread), and
//! `yolo` in the session state allows what is not denied.

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use harness_core::event::{Delivery, HarnessEvent};
use harness_core::harness::{Harness, Mode};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ApprovalAnswer, ToolError, tool_fn};
use harness_permissions::{Permissions, Policy};
use harness_tags::ToolCategory;
use serde_json::{Value, json};

type Ran = Arc<Mutex<Vec<String>>>;

fn tool(name: &'static str, category: ToolCategory, ran: &Ran) -> impl harness_core::tool::Tool {
    let ran = Arc::clone(ran);
    tool_fn(name, "A test tool.", move |_: Value, _| {
        let ran = Arc::clone(&ran);
        async move {
            ran.lock().unwrap().push(name.to_owned());
            Ok::<_, ToolError>(format!("{name} done"))
        }
    })
    .category(category)
}

fn harness(model: Arc<ScriptedModel>, ran: &Ran, persist_grants: bool) -> Harness {
    let permissions = Permissions::builder()
        .tool("rm_rf", Policy::Deny)
        .category(ToolCategory::Read, Policy::Allow)
        .category(ToolCategory::Execute, Policy::Ask)
        .build();
    Harness::builder("guarded")
        .mode(Mode::new("build").default_model("scripted/guarded"))
        .model_resolver(move |_| Ok(model.clone() as _))
        .tool(tool("read_file", ToolCategory::Read, ran))
        .tool(tool("deploy", ToolCategory::Execute, ran))
        .tool(tool("rm_rf", ToolCategory::Execute, ran))
        .tool(tool("edit_file", ToolCategory::Edit, ran))
        .plugin(permissions)
        .persist_grants(persist_grants)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_under_the_rule_chain() {
    let model = Arc::new(
        ScriptedModel::new("scripted/guarded")
            .then(Scripted::tool_calls([
                ("read_file", json!({})),
                ("rm_rf", json!({})),
                ("deploy", json!({})),
            ]))
            .then(Scripted::text("first run done"))
            .then(Scripted::tool_calls([
                ("deploy", json!({})),
                ("edit_file", json!({})),
            ]))
            .then(Scripted::text("second run done")),
    );
    let ran: Ran = Arc::default();
    let harness = harness(Arc::clone(&model), &ran, false);
    let mut events = harness.subscribe();

    // The UI, on another task: approve `deploy` for the rest of the session.
    let ui = tokio::spawn({
        let harness = harness.clone();
        async move {
            let mut asked = Vec::new();
            let mut runs_ended = 0;
            while let Some(delivery) = events.next().await {
                let Delivery::Event(event) = delivery else {
                    continue;
                };
                match &event.event {
                    HarnessEvent::ToolApprovalRequired {
                        tool_call_id,
                        tool_name,
                        ..
                    } => {
                        asked.push(tool_name.clone());
                        let answer = if tool_name == "deploy" {
                            ApprovalAnswer::AlwaysAllowTool
                        } else {
                            ApprovalAnswer::Decline {
                                reason: "not now".into(),
                            }
                        };
                        harness
                            .respond_to_tool_approval(answer, Some(tool_call_id))
                            .unwrap();
                    }
                    HarnessEvent::AgentEnd { .. } => {
                        runs_ended += 1;
                        if runs_ended == 2 {
                            return asked;
                        }
                    }
                    _ => {}
                }
            }
            asked
        }
    });

    let first = harness.send_message("tidy up and ship").await.unwrap();
    assert_eq!(first.final_text.as_deref(), Some("first run done"));
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        !offered.contains(&"rm_rf".to_owned()),
        "a denied tool is never offered: {offered:?}"
    );
    assert!(offered.contains(&"deploy".to_owned()));
    let requests = model.requests();
    let results = requests.last().unwrap().tool_results();
    assert_eq!(
        results[0], "read_file done",
        "read is allowed by its category"
    );
    assert!(!results[1].contains("rm_rf done"), "{results:?}");
    assert_eq!(results[2], "deploy done", "approved from the UI task");
    assert!(harness.session().grants().tools.contains("deploy"));

    // `deploy` is granted now (a grant comes after per-tool rules and before category
    // policies); `edit_file` has no rule, so it asks (and the UI declines).
    let second = harness.send_message("again").await.unwrap();
    assert_eq!(second.final_text.as_deref(), Some("second run done"));
    assert_eq!(ui.await.unwrap(), ["deploy", "edit_file"]);
    let requests = model.requests();
    let results = requests.last().unwrap().tool_results();
    assert_eq!(results[3], "deploy done");
    assert!(results[4].contains("not now"), "{results:?}");
    assert_eq!(*ran.lock().unwrap(), ["read_file", "deploy", "deploy"]);
}

#[tokio::test]
async fn yolo_allows_everything_but_a_deny() {
    let model = Arc::new(
        ScriptedModel::new("scripted/guarded")
            .then(Scripted::tool_calls([
                ("deploy", json!({})),
                ("edit_file", json!({})),
                ("rm_rf", json!({})),
            ]))
            .then(Scripted::text("done")),
    );
    let ran: Ran = Arc::default();
    let harness = harness(Arc::clone(&model), &ran, false);
    harness
        .set_state(json!({"yolo": true}).as_object().cloned().unwrap())
        .unwrap();
    harness.send_message("go").await.unwrap();
    assert_eq!(*ran.lock().unwrap(), ["deploy", "edit_file"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_can_persist_with_the_thread() {
    let script = || {
        ScriptedModel::new("scripted/guarded")
            .then(Scripted::tool_call("deploy", json!({})))
            .then(Scripted::text("done"))
    };
    let ran: Ran = Arc::default();
    let first = harness(Arc::new(script()), &ran, true);
    let _ui = first.listen({
        let first = first.clone();
        move |event| {
            if let HarnessEvent::ToolApprovalRequired { tool_call_id, .. } = &event.event {
                first
                    .respond_to_tool_approval(
                        ApprovalAnswer::AlwaysAllowCategory,
                        Some(tool_call_id),
                    )
                    .unwrap();
            }
        }
    });
    first.send_message("ship").await.unwrap();
    let thread = first.session().thread_id().unwrap();
    let store = first.store().clone();
    first.destroy().await;

    // A new harness on the same store, headless: the grant comes back with the thread, so
    // the call runs without anyone to ask.
    let model = Arc::new(script());
    let permissions = Permissions::builder()
        .category(ToolCategory::Execute, Policy::Ask)
        .build();
    let second = Harness::builder("guarded")
        .mode(Mode::new("build").default_model("scripted/guarded"))
        .model_resolver({
            let model = Arc::clone(&model);
            move |_| Ok(model.clone() as _)
        })
        .tool(tool("deploy", ToolCategory::Execute, &ran))
        .plugin(permissions)
        .store(store)
        .persist_grants(true)
        .interactive(false)
        .build()
        .unwrap();
    second.switch_thread(&thread).await.unwrap();
    assert!(
        second
            .session()
            .grants()
            .categories
            .contains(&ToolCategory::Execute)
    );
    second.send_message("ship again").await.unwrap();
    assert_eq!(*ran.lock().unwrap(), ["deploy", "deploy"]);
}
