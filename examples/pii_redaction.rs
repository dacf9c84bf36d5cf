//! PII redaction: a support agent looks up a customer and emails them, and the model never
//! sees who they are.
//!
//! Shows the `harness-redaction` plugin in a running harness, offline (the scripted model):
//!
//! - built-in detectors (email, card) plus a custom regex (`EMPLOYEE_ID`) and a deny-list
//!   (`PROJECT`), redacted from tool results before the model sees them;
//! - `Pseudonym` for emails: the model sees `<EMAIL_ADDRESS_…>`, passes that token to
//!   `send_email`, and the tool receives the real address back from the vault;
//! - screens have their own policy (`display.tool-result`): a user interface's `tool_end`
//!   events show `••••••` where the model got placeholders; the raw values stay inside the
//!   tools.
//!
//! Run it with `cargo run -p harness-examples --example pii_redaction`.

use std::sync::{Arc, Mutex};

use harness_core::event::HarnessEvent;
use harness_core::harness::{Harness, Mode};
use harness_core::model::{
    FinishReason, KernelMessage, ModelRequest, ModelResponse, Scripted, ScriptedModel, ToolCall,
};
use harness_core::tool::{ToolContext, ToolError, tool_fn};
use harness_redaction::{Detector, Entity, Operator, Redaction, Redactor, Target};
use serde_json::{Value, json};

const RECORD: &str = "Contact: jane.doe@example.com, card 4111 1111 1111 1111, \
account manager EMP-204817, project Falcon";

/// The model's second turn: email whoever the lookup returned, by the token it saw.
fn email_the_contact(request: &ModelRequest) -> Scripted {
    let seen = request.tool_results().pop().unwrap_or_default().to_owned();
    let token = seen
        .split_whitespace()
        .find(|word| word.starts_with("<EMAIL_ADDRESS"))
        .map(|word| word.trim_end_matches(',').to_owned())
        .unwrap_or_default();
    Scripted::Response(ModelResponse {
        tool_calls: vec![ToolCall {
            id: "call_email".into(),
            name: "send_email".into(),
            arguments: json!({"to": token, "body": "Your refund is on its way."}),
        }],
        finish_reason: FinishReason::ToolCalls,
        ..ModelResponse::default()
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redactor = Redactor::builder()
        .entity_operator(Entity::EmailAddress, Operator::Pseudonym)
        .detector(Detector::regex(
            Entity::from_name("EMPLOYEE_ID"),
            r"(?-u:\b)EMP-[0-9]{6}(?-u:\b)",
        ))
        .detector(Detector::deny_list(
            Entity::from_name("PROJECT"),
            ["Falcon"],
        ))
        .build()?;
    // Tool results and tool errors are redacted by default; other targets are opt-in. What
    // screens show gets bullets, from the tool's own output.
    let redaction = Redaction::new(redactor).target(Target::DisplayToolResult, true);

    let model = Arc::new(
        ScriptedModel::new("scripted/support")
            .then(Scripted::tool_call(
                "crm_lookup",
                json!({"customer": "ACME"}),
            ))
            .then(Scripted::Respond(Arc::new(email_the_contact)))
            .then(Scripted::text("I emailed the contact.")),
    );
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    let inbox = Arc::clone(&received);
    let harness = Harness::builder("support")
        .mode(Mode::new("support").default_model("scripted/support"))
        .model(Arc::clone(&model))
        .tool(tool_fn(
            "crm_lookup",
            "Looks a customer up in the CRM.",
            |_: Value, _: ToolContext| async { Ok::<_, ToolError>(RECORD) },
        ))
        .tool(tool_fn(
            "send_email",
            "Sends an email.",
            move |args: Value, _: ToolContext| {
                let inbox = Arc::clone(&inbox);
                async move {
                    let to = args["to"].as_str().unwrap_or_default().to_owned();
                    inbox.lock().map_err(|e| e.to_string())?.push(to.clone());
                    Ok::<_, ToolError>(format!("sent to {to}"))
                }
            },
        ))
        .plugin(redaction)
        .build()?;

    // What a user interface is shown of each tool result.
    let shown: Arc<Mutex<Vec<String>>> = Arc::default();
    let screen = Arc::clone(&shown);
    let _ui = harness.listen(move |event| {
        if let HarnessEvent::ToolEnd { result, .. } = &event.event
            && let Ok(mut screen) = screen.lock()
        {
            screen.push(result.clone());
        }
    });
    harness.init().await?;
    let summary = harness
        .send_message("Email ACME about their refund")
        .await?;

    let requests = model.requests();
    let model_saw = requests
        .get(1)
        .and_then(|r| r.tool_results().pop().map(str::to_owned))
        .unwrap_or_default();
    let ui_saw = shown.lock().map_err(|e| e.to_string())?.clone();
    let tool_got = received.lock().map_err(|e| e.to_string())?.clone();
    let model_sent = requests
        .get(2)
        .and_then(|r| {
            r.messages.iter().find_map(|m| match m {
                KernelMessage::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .find(|c| c.name == "send_email")
                    .map(|c| c.arguments["to"].to_string()),
                _ => None,
            })
        })
        .unwrap_or_default();

    println!("the CRM returned:     {RECORD}");
    println!("the model saw:        {model_saw}");
    println!(
        "the UI showed:        {}",
        ui_saw.first().map_or("", String::as_str)
    );
    println!("the model emailed:    {model_sent}");
    println!("send_email received:  {}", tool_got.join(", "));
    println!("agent: {}", summary.final_text.unwrap_or_default());

    // Everything the model was ever sent, as one text.
    let sent_to_model = serde_json::to_string(&requests)?;
    let checks = [
        (
            "the model never sees the raw values",
            ["jane.doe@example.com", "4111", "EMP-204817", "Falcon"]
                .iter()
                .all(|raw| !sent_to_model.contains(raw)),
        ),
        (
            "the model sees typed placeholders",
            model_saw.contains("<EMAIL_ADDRESS_")
                && model_saw.contains("<CREDIT_CARD>")
                && model_saw.contains("<EMPLOYEE_ID>")
                && model_saw.contains("<PROJECT>"),
        ),
        (
            "the UI shows bullets where the model saw placeholders",
            ui_saw.first().is_some_and(|shown| {
                shown.contains("••••••") && !shown.contains('<') && !shown.contains("4111")
            }) && !ui_saw.iter().any(|s| s.contains("jane.doe")),
        ),
        (
            "the tool gets the real address back",
            tool_got == ["jane.doe@example.com"],
        ),
    ];
    for (what, ok) in checks {
        if !ok {
            return Err(format!("expected: {what}").into());
        }
    }
    harness.destroy().await;
    Ok(())
}
