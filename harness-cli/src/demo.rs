//! The offline demo: a scripted support agent that refunds a double charge.
//!
//! With no API key and no base URL the CLI runs on [`DemoModel`], which plays a short script
//! through the real harness: it writes a task list, looks up an order with
//! [`lookup_order`] (whose result carries an email, a phone and a card number that the
//! redaction plugin masks before the model sees them), asks how to refund with `ask_user`,
//! calls [`issue_refund`] (an `execute` tool, so the permissions plugin asks for approval) and
//! finishes according to the answers it got. Every step reads the conversation, so the demo
//! is correct in a new thread, a resumed one, after a decline or after an abort.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use harness_core::model::{
    FinishReason, KernelMessage, Model, ModelError, ModelId, ModelRequest, StreamEvent, Usage,
};
use harness_core::tool::{Tool, ToolContext, ToolError, tool_fn};
use harness_tags::ToolCategory;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The demo model's id.
pub const DEMO_MODEL: &str = "demo/support";

/// The customer record [`lookup_order`] returns: personal data the model must not see.
pub const ORDER_RECORD: &str = "Order #1042 (2 x Espresso Grinder, $49.00 each)\n\
Customer: Jane Doe (jane.doe@example.com, +1 415 555 0132)\n\
Paid with card 4111 1111 1111 1111; charged twice on 2025-03-02.";

/// The demo's scripted model. `pace` spaces out the streamed words (zero for scripts and
/// tests, a few milliseconds for a person watching).
#[derive(Debug)]
pub struct DemoModel {
    id: ModelId,
    pace: Duration,
}

impl DemoModel {
    /// The demo model under `id` (e.g. [`DEMO_MODEL`]), streaming with `pace` between words.
    pub fn new(id: ModelId, pace: Duration) -> DemoModel {
        DemoModel { id, pace }
    }
}

/// One scripted reply: text, then tool calls.
#[derive(Debug, Default, PartialEq)]
pub struct Reply {
    /// The text.
    pub text: String,
    /// Tool calls, by name and arguments.
    pub calls: Vec<(&'static str, Value)>,
}

impl Reply {
    fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: text.into(),
            calls: Vec::new(),
        }
    }

    fn call(text: impl Into<String>, name: &'static str, args: Value) -> Reply {
        Reply {
            text: text.into(),
            calls: vec![(name, args)],
        }
    }
}

/// The script: what the demo says next, given the conversation.
pub fn next_reply(messages: &[KernelMessage]) -> Reply {
    let start = messages
        .iter()
        .rposition(|m| matches!(m, KernelMessage::User { .. }))
        .map_or(0, |i| i + 1);
    let results: Vec<(&str, &str, bool)> = messages[start..]
        .iter()
        .filter_map(|m| match m {
            KernelMessage::ToolResult {
                tool_name,
                content,
                is_error,
                ..
            } => Some((tool_name.as_str(), content.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    let refunded_before = messages[..start].iter().any(|m| {
        matches!(m, KernelMessage::ToolResult { tool_name, is_error: false, .. } if tool_name == "issue_refund")
    });
    let lookup = "Look up order #1042";
    let refund = "Refund the duplicate charge";
    let Some(&(last, content, failed)) = results.last() else {
        if refunded_before {
            return Reply::text(
                "Order #1042 is refunded already, and it is all this demo knows how to do. Set \
                 OPENAI_API_KEY or ANTHROPIC_API_KEY (or pass --base-url) to talk to a real model.",
            );
        }
        return Reply::call(
            "I'll look into order #1042 and sort out the double charge.",
            "task_write",
            json!({"tasks": [
                {"content": lookup, "status": "in_progress", "activeForm": "Looking up order #1042"},
                {"content": refund, "status": "pending", "activeForm": "Refunding the duplicate charge"},
            ]}),
        );
    };
    let answer = |tool: &str| {
        results
            .iter()
            .find(|(name, _, _)| *name == tool)
            .map(|(_, content, failed)| (*content, *failed))
    };
    match last {
        "task_write" if answer("issue_refund").is_none() => {
            Reply::call("", "lookup_order", json!({"orderId": "1042"}))
        }
        "lookup_order" => Reply::call(
            format!(
                "Here is the order as I see it (personal data reaches me redacted):\n\n{}\n\n\
                 The customer was charged twice.",
                quote(content)
            ),
            "ask_user",
            json!({
                "question": "How should I refund the duplicate $49.00 charge?",
                "options": [
                    {"label": "Original card", "description": "back to the card on file, 3-5 days"},
                    {"label": "Store credit", "description": "available at once"},
                ],
            }),
        ),
        "ask_user" => {
            let method = if content.to_lowercase().contains("store credit") {
                "store_credit"
            } else {
                "original_card"
            };
            Reply::call(
                "",
                "issue_refund",
                json!({"orderId": "1042", "amount": "49.00", "method": method}),
            )
        }
        "issue_refund" => {
            let tasks = if failed {
                json!([{"content": lookup, "status": "completed"}])
            } else {
                json!([
                    {"content": lookup, "status": "completed"},
                    {"content": refund, "status": "completed"},
                ])
            };
            Reply::call("", "task_write", json!({ "tasks": tasks }))
        }
        _ => match answer("issue_refund") {
            Some((done, false)) => Reply::text(format!(
                "Done: {done} The customer's card and email never entered my context; the \
                 redaction plugin replaced them before I saw the order."
            )),
            Some((why, true)) => Reply::text(format!(
                "I did not refund the charge, so I took it off my task list: {why}\n\
                 Approve `issue_refund` to let me do it (`harness run --yes`, or answer `y` in \
                 `harness chat`)."
            )),
            None if failed => Reply::text(format!("A step failed: {content}")),
            None => Reply::text("Nothing left to do for order #1042."),
        },
    }
}

fn quote(text: &str) -> String {
    text.lines()
        .map(|line| format!("> {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The events a provider would stream for `reply`: the text (word by word when `by_word`),
/// then tool calls, usage, finish.
fn events(reply: Reply, call_ids: usize, by_word: bool) -> Vec<StreamEvent> {
    let mut events: Vec<StreamEvent> = if by_word {
        reply
            .text
            .split_inclusive(' ')
            .map(|word| StreamEvent::TextDelta(word.to_owned()))
            .collect()
    } else if reply.text.is_empty() {
        Vec::new()
    } else {
        vec![StreamEvent::TextDelta(reply.text)]
    };
    let finish = if reply.calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    };
    for (index, (name, args)) in reply.calls.into_iter().enumerate() {
        events.push(StreamEvent::ToolCallStart {
            index,
            id: format!("demo_{}", call_ids + index),
            name: name.to_owned(),
        });
        events.push(StreamEvent::ToolCallDelta {
            index,
            arguments: args.to_string(),
        });
        events.push(StreamEvent::ToolCallEnd { index });
    }
    events.push(StreamEvent::Usage(Usage {
        input_tokens: 120,
        output_tokens: 30,
        ..Usage::default()
    }));
    events.push(StreamEvent::Finish(finish));
    events
}

#[async_trait]
impl Model for DemoModel {
    fn id(&self) -> &ModelId {
        &self.id
    }

    async fn stream(
        &self,
        request: &ModelRequest,
    ) -> Result<harness_core::model::ModelStream, ModelError> {
        // Call ids unique in the thread: count the calls made so far.
        let made: usize = request
            .messages
            .iter()
            .map(|m| match m {
                KernelMessage::Assistant { tool_calls, .. } => tool_calls.len(),
                _ => 0,
            })
            .sum();
        let pace = self.pace;
        let events = events(next_reply(&request.messages), made, !pace.is_zero());
        let stream = futures_util::stream::iter(events).then(move |event| async move {
            if !pace.is_zero() && matches!(event, StreamEvent::TextDelta(_)) {
                tokio::time::sleep(pace).await;
            }
            Ok(event)
        });
        Ok(stream.boxed())
    }
}

/// Arguments of `lookup_order`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LookupOrderArgs {
    /// The order number.
    pub order_id: String,
}

/// Arguments of `issue_refund`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssueRefundArgs {
    /// The order number.
    pub order_id: String,
    /// The amount, in dollars.
    pub amount: String,
    /// `original_card` or `store_credit`.
    pub method: String,
}

/// `lookup_order` (read): the order record, personal data included.
pub fn lookup_order() -> impl Tool {
    tool_fn(
        "lookup_order",
        "Look up an order and its customer by order number.",
        |args: LookupOrderArgs, _: ToolContext| async move {
            if args.order_id.trim_start_matches('#') == "1042" {
                Ok(ORDER_RECORD.to_owned())
            } else {
                Err(ToolError::new(format!(
                    "no order #{}; the demo knows order #1042",
                    args.order_id
                )))
            }
        },
    )
    .category(ToolCategory::Read)
}

/// `issue_refund` (execute): refunds an amount (in the demo, only says so).
pub fn issue_refund() -> impl Tool {
    tool_fn(
        "issue_refund",
        "Refund an amount of an order to the original card or as store credit.",
        |args: IssueRefundArgs, _: ToolContext| async move {
            let to = if args.method == "store_credit" {
                "as store credit"
            } else {
                "to the original card"
            };
            Ok::<_, ToolError>(format!(
                "Refunded ${} for order #{} {to}.",
                args.amount, args.order_id
            ))
        },
    )
    .category(ToolCategory::Execute)
}

/// The demo's tools.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(lookup_order()), Arc::new(issue_refund())]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(tool: &str, content: &str, is_error: bool) -> KernelMessage {
        KernelMessage::ToolResult {
            tool_call_id: format!("id_{tool}"),
            tool_name: tool.to_owned(),
            content: content.to_owned(),
            is_error,
        }
    }

    fn step(messages: &[KernelMessage]) -> Vec<&'static str> {
        next_reply(messages).calls.iter().map(|(n, _)| *n).collect()
    }

    #[test]
    fn the_script_follows_the_conversation() {
        let mut messages = vec![KernelMessage::user("refund order 1042")];
        assert_eq!(step(&messages), ["task_write"]);
        messages.push(result("task_write", "ok", false));
        assert_eq!(step(&messages), ["lookup_order"]);
        messages.push(result("lookup_order", "<EMAIL_ADDRESS>", false));
        let asking = next_reply(&messages);
        assert!(asking.text.contains("> <EMAIL_ADDRESS>"), "{}", asking.text);
        assert_eq!(step(&messages), ["ask_user"]);
        messages.push(result("ask_user", "User answered: Store credit", false));
        let refund = next_reply(&messages);
        assert_eq!(refund.calls[0].1["method"], "store_credit");
        messages.push(result("issue_refund", "Refunded $49.00.", false));
        assert_eq!(
            next_reply(&messages).calls[0].1["tasks"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        messages.push(result("task_write", "ok", false));
        let done = next_reply(&messages);
        assert!(done.calls.is_empty() && done.text.starts_with("Done: Refunded"));
    }

    #[test]
    fn a_finished_refund_is_not_done_twice() {
        let messages = vec![
            KernelMessage::user("refund order 1042"),
            result("issue_refund", "Refunded $49.00.", false),
            KernelMessage::assistant("Done."),
            KernelMessage::user("thanks"),
        ];
        let reply = next_reply(&messages);
        assert!(reply.calls.is_empty() && reply.text.contains("refunded already"));
    }

    #[test]
    fn a_declined_refund_is_dropped_from_the_tasks_and_explained() {
        let messages = vec![
            KernelMessage::user("refund order 1042"),
            result("task_write", "ok", false),
            result("lookup_order", "record", false),
            result("ask_user", "[Question for user]", false),
            result("issue_refund", "The user declined `issue_refund`: no", true),
        ];
        let tasks = next_reply(&messages).calls[0].1["tasks"].clone();
        assert_eq!(tasks.as_array().map(Vec::len), Some(1));
        let mut messages = messages;
        messages.push(result("task_write", "ok", false));
        let reply = next_reply(&messages);
        assert!(reply.text.contains("did not refund") && reply.text.contains("--yes"));
    }

    #[tokio::test]
    async fn the_tools_return_the_record_and_the_refund() {
        let record = lookup_order()
            .execute(
                json!({"orderId": "1042"}),
                ToolContext::detached("lookup_order", "1"),
            )
            .await
            .unwrap();
        assert!(record.content.contains("jane.doe@example.com"));
        let refund = issue_refund()
            .execute(
                json!({"orderId": "1042", "amount": "49.00", "method": "store_credit"}),
                ToolContext::detached("issue_refund", "2"),
            )
            .await
            .unwrap();
        assert_eq!(
            refund.content,
            "Refunded $49.00 for order #1042 as store credit."
        );
    }
}
