//! What `mcp.tools-listed` carries: the tools (and readable resources) an MCP server offers.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ToolCategory;

/// The tools an MCP server offers, as the harness will register them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolList {
    /// The server's name (its key in the configuration).
    pub server: String,
    /// The tools to register, in order.
    pub tools: Vec<McpToolInfo>,
    /// The resources the model may read through the server's resource tool
    /// (`SERVER__read_resource`); with none, that tool is not registered.
    #[serde(default)]
    pub resources: Vec<McpResourceInfo>,
}

/// One tool of an MCP server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolInfo {
    /// The name the model calls it by: `SERVER__TOOL` unless the server's configuration sets
    /// another prefix. Permission rules name tools by it.
    pub name: String,
    /// The tool's own name on the server: what a call invokes. It must name a tool the server
    /// listed.
    pub server_tool: String,
    /// A human-readable title, if the server gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's input, as the server gave it.
    pub input_schema: Arc<Value>,
    /// JSON Schema of the tool's structured output, if the server declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Arc<Value>>,
    /// The permission category: `mcp`, or `read` for a tool the server hints is read-only when
    /// the configuration trusts that hint.
    pub category: ToolCategory,
    /// The server's hints about the tool's behaviour (hints, not guarantees).
    #[serde(default)]
    pub annotations: McpToolAnnotations,
}

/// An MCP server's hints about a tool. A server can claim anything: trust them only as far as
/// the server is trusted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolAnnotations {
    /// The tool does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy data (meaningful when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it again with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool reaches outside entities (the web, other systems).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// A resource (or resource template) an MCP server offers for reading.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceInfo {
    /// The resource's URI, or an RFC 6570 URI template when `template` is set.
    pub uri: String,
    /// The resource's name.
    pub name: String,
    /// What it holds, if the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// True if `uri` is a template the model fills in.
    #[serde(default)]
    pub template: bool,
}
