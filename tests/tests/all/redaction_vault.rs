//! The redaction plugin's pseudonym vault in a harness with subagents: a subagent uses its
//! parent thread's vault (what it saw resolves in the parent's tool calls and in no other
//! thread), deleting the thread drops it, and a full vault withholds the text with an error
//! that says why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use futures_util::{FutureExt, StreamExt};
use harness_core::event::{Delivery, HarnessEvent};
use harness_core::harness::{Harness, Mode, SubagentDef};
use harness_core::model::{Model, ModelId, ModelRequest, Scripted, ScriptedModel};
use harness_core::tool::{ToolError, tool_fn};
use harness_redaction::{Operator, Redaction, Redactor};
use harness_tags::KernelMessage;
use serde_json::{Value, json};

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

/// The first `<EMAIL_ADDRESS_...>` pseudonym in `text`.
fn pseudonym(text: &str) -> Option<String> {
    let start = text.find("<EMAIL_ADDRESS_")?;
    let end = start + text[start..].find('>')?;
    Some(text[start..=end].to_owned())
}

/// A harness whose lead delegates to a fresh `helper` subagent; `crm` returns the owner it is
/// asked about and `send_email` records whom it was given. Pseudonyms everywhere.
fn harness(
    redactor: Arc<Redactor>,
    lead: ScriptedModel,
    helper: Arc<ScriptedModel>,
    sent: Arc<Mutex<Vec<String>>>,
) -> Harness {
    let lead = Arc::new(lead);
    Harness::builder("support")
        .mode(Mode::new("build").default_model("scripted/lead"))
        .model_resolver(move |id: &ModelId| {
            let model: Arc<dyn Model> = if id.as_str() == "scripted/helper" {
                helper.clone()
            } else {
                lead.clone()
            };
            Ok(model)
        })
        .tool(tool_fn(
            "crm",
            "Looks up a customer.",
            |args: Value, _| async move {
                Ok::<_, ToolError>(format!("owner: {}", args["who"].as_str().unwrap_or("?")))
            },
        ))
        .tool(tool_fn(
            "send_email",
            "Sends an email.",
            move |args: Value, _| {
                let sent = Arc::clone(&sent);
                async move {
                    let to = args["to"].as_str().unwrap_or_default().to_owned();
                    sent.lock().unwrap().push(to);
                    Ok::<_, ToolError>("sent")
                }
            },
        ))
        .subagent(
            SubagentDef::new("helper", "Helper", "Looks things up.", "You help.")
                .allowed_harness_tools(["crm", "send_email"])
                .default_model(ModelId::new("scripted/helper").unwrap()),
        )
        .plugin(Redaction::from_arc(redactor))
        .build()
        .unwrap()
}

fn delegate(task: &str) -> Scripted {
    Scripted::tool_call("subagent", json!({"agentType": "helper", "task": task}))
}

/// Answers with the last tool result, as a subagent reporting what it found.
fn report() -> Scripted {
    Scripted::Respond(Arc::new(|request: &ModelRequest| {
        Scripted::text(last_tool_result(request))
    }))
}

#[tokio::test]
async fn subagents_share_their_parent_threads_vault_and_only_it() {
    let redactor = Arc::new(
        Redactor::builder()
            .operator(Operator::Pseudonym)
            .build()
            .unwrap(),
    );
    let seen_in_a = Arc::new(Mutex::new(String::new()));
    let lead = ScriptedModel::new("scripted/lead")
        // Thread A: the helper looks bob up; the lead mails the pseudonym it reported.
        .then(delegate("look up bob"))
        .then(Scripted::Respond(Arc::new({
            let seen_in_a = Arc::clone(&seen_in_a);
            move |request: &ModelRequest| {
                let token = pseudonym(&last_tool_result(request)).unwrap();
                *seen_in_a.lock().unwrap() = token.clone();
                Scripted::tool_call("send_email", json!({"to": token}))
            }
        })))
        .then(Scripted::text("mailed bob"))
        // Thread B: another helper tries thread A's pseudonym.
        .then(delegate("mail whoever that was"))
        .then(Scripted::text("tried"));
    let helper = ScriptedModel::new("scripted/helper")
        .then(Scripted::tool_call(
            "crm",
            json!({"who": "bob@example.com"}),
        ))
        .then(report())
        .then(Scripted::Respond(Arc::new({
            let seen_in_a = Arc::clone(&seen_in_a);
            move |_: &ModelRequest| {
                let token = seen_in_a.lock().unwrap().clone();
                Scripted::tool_call("send_email", json!({"to": token}))
            }
        })))
        .then(report());
    let sent = Arc::new(Mutex::new(Vec::new()));
    let harness = harness(
        Arc::clone(&redactor),
        lead,
        Arc::new(helper),
        Arc::clone(&sent),
    );

    let thread_a = harness.create_thread(None).await.unwrap().id;
    harness.send_message("mail bob's owner").await.unwrap();
    let token = seen_in_a.lock().unwrap().clone();
    assert!(token.starts_with("<EMAIL_ADDRESS_"), "{token}");
    assert_eq!(
        *sent.lock().unwrap(),
        ["bob@example.com"],
        "the parent resolves what its subagent saw"
    );
    assert_eq!(redactor.vault().len(&thread_a), 1);
    assert_eq!(redactor.vault().len(""), 0, "no shared empty-thread vault");

    harness.create_thread(None).await.unwrap();
    harness.send_message("and now?").await.unwrap();
    assert_eq!(
        *sent.lock().unwrap(),
        ["bob@example.com".to_owned(), token.clone()],
        "another thread's subagent gets the token, never thread A's value"
    );

    harness.delete_thread(&thread_a).await.unwrap();
    assert_eq!(
        redactor.vault().len(&thread_a),
        0,
        "deleting the thread drops its vault"
    );
    assert!(redactor.vault().is_empty());
}

#[tokio::test]
async fn a_full_vault_withholds_the_text_and_says_why() {
    let redactor = Arc::new(
        Redactor::builder()
            .operator(Operator::Pseudonym)
            .vault_capacity(1)
            .build()
            .unwrap(),
    );
    let lead = ScriptedModel::new("scripted/lead")
        .then(delegate("look up two people"))
        .then(Scripted::text("done"));
    let helper = ScriptedModel::new("scripted/helper")
        .then(Scripted::tool_call(
            "crm",
            json!({"who": "bob@example.com"}),
        ))
        .then(Scripted::tool_call(
            "crm",
            json!({"who": "eve@example.com"}),
        ))
        .then(report());
    let helper = Arc::new(helper);
    let harness = harness(
        Arc::clone(&redactor),
        lead,
        Arc::clone(&helper),
        Arc::default(),
    );
    let mut events = harness.subscribe();
    let thread = harness.create_thread(None).await.unwrap().id;
    harness.send_message("look up").await.unwrap();

    let third_request = &helper.requests()[2];
    let withheld = last_tool_result(third_request);
    assert!(!withheld.contains("eve@example.com"), "{withheld}");
    assert!(withheld.contains("withheld"), "{withheld}");
    let mut errors = Vec::new();
    while let Some(Some(Delivery::Event(envelope))) = events.next().now_or_never() {
        if let HarnessEvent::Error { error, .. } = &envelope.event {
            errors.push(error.clone());
        }
    }
    assert!(
        errors
            .iter()
            .any(|e| e.contains(&format!("thread `{thread}`"))
                && e.contains("vault_capacity")
                && !e.contains("eve@example.com")),
        "{errors:?}"
    );
}
