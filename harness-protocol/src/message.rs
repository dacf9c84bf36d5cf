//! Messages as user interfaces see them: [`HarnessMessage`] and its parts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who a message is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    /// The user.
    User,
    /// The agent.
    Assistant,
    /// The harness (nudges, reminders).
    System,
}

/// Why a message stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The message is complete.
    Complete,
    /// The model is waiting for tools.
    ToolUse,
    /// The run was aborted while the message streamed.
    Aborted,
    /// The run failed while the message streamed.
    Error,
}

/// The kind of text a streamed delta adds to a message: answer text or reasoning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    /// A [`MessagePart::Text`].
    Text,
    /// A [`MessagePart::Thinking`].
    Thinking,
}

/// One part of a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum MessagePart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's reasoning.
    Thinking {
        /// The text.
        text: String,
    },
    /// A tool call.
    ToolCall {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments.
        args: Value,
    },
    /// A tool's result.
    ToolResult {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The result shown.
        result: String,
        /// True if the tool failed.
        is_error: bool,
    },
    /// A reminder the harness injected for the model.
    SystemReminder {
        /// The text.
        text: String,
    },
}

/// A message as user interfaces see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HarnessMessage {
    /// The message's id.
    pub id: String,
    /// Who it is from.
    pub role: MessageRole,
    /// Its parts, in order.
    pub content: Vec<MessagePart>,
    /// When it started, Unix milliseconds.
    pub created_at: i64,
    /// Why it stopped, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// The error, if the run failed during this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

impl HarnessMessage {
    /// The message's text parts, joined (reasoning, tool calls and results left out).
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|part| match part {
                MessagePart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}
