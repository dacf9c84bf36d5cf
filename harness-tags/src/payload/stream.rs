//! What streams live to user interfaces: a model's text deltas and a running tool's output.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a streamed text delta of a model call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    /// Answer text.
    Text,
    /// Reasoning.
    Thinking,
    /// A tool call's arguments, as JSON text.
    ToolArguments,
}

/// A delta of a model call's streamed text, before any subscriber sees it
/// (`message.text-delta`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextDelta {
    /// The message the delta belongs to: the id under which the harness shows and stores the
    /// assistant message of this model call.
    pub message_id: String,
    /// Answer text, reasoning, or a tool call's arguments.
    pub kind: DeltaKind,
    /// For [`DeltaKind::ToolArguments`]: the call whose arguments these are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The new text; empty on an `end` delta with nothing held back.
    pub text: String,
    /// True on the last delta of this text (the part ended, or the model call did): a
    /// handler that held text back (a streaming redactor's look-back) returns it now.
    #[serde(default)]
    pub end: bool,
}

/// A command's output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A chunk of a running tool's output, before user interfaces see it (`tool.output-delta`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum OutputDelta {
    /// Text that a command the tool runs wrote.
    Shell {
        /// Which stream.
        stream: OutputStream,
        /// The text; empty on an `end` chunk with nothing held back.
        text: String,
        /// True on the last chunk of this stream, sent once the tool finished: a handler that
        /// held text back returns it now.
        #[serde(default)]
        end: bool,
    },
    /// A partial result the tool reported.
    Progress {
        /// The partial result.
        partial: Value,
    },
}
