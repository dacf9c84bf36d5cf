//! Listing a server: its tools, resources and prompts; the `mcp.tools-listed` payload made from
//! them; and the tools registered from the payload as handlers left it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use harness_core::tool::ToolRegistry;
use harness_tags::tags::McpToolsListed;
use harness_tags::{
    EmitOutcome, McpCtx, McpListReason, McpResourceInfo, McpToolAnnotations, McpToolInfo,
    McpToolList, Pipeline, ToolCategory,
};
use rmcp::RoleClient;
use rmcp::model::Tool as ServerToolSpec;
use rmcp::service::{Peer, ServiceError};
use serde_json::Value;

use super::Inner;
use super::tool::ServerTool;
use crate::config::{McpServer, tool_name_char};

/// The longest tool name model providers accept.
const MAX_TOOL_NAME: usize = 64;

/// A prompt a server offers (listed for user interfaces; the model does not see prompts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpPromptInfo {
    /// The prompt's name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Its arguments: name and whether it is required.
    pub arguments: Vec<(String, bool)>,
}

/// What a server offers.
pub(crate) struct Listing {
    pub(crate) tools: Vec<ServerToolSpec>,
    pub(crate) resources: Vec<McpResourceInfo>,
    pub(crate) prompts: Vec<McpPromptInfo>,
}

/// Lists everything the server says it offers. Tools are required; resources and prompts are
/// best effort (a server that fails to list them still has its tools).
pub(crate) async fn list(peer: &Peer<RoleClient>, server: &str) -> Result<Listing, ServiceError> {
    let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
    let offers =
        |has: fn(&rmcp::model::ServerCapabilities) -> bool| capabilities.as_ref().is_none_or(has);
    let tools = if offers(|c| c.tools.is_some()) {
        peer.list_all_tools().await?
    } else {
        Vec::new()
    };
    let mut resources = Vec::new();
    if offers(|c| c.resources.is_some()) {
        match peer.list_all_resources().await {
            Ok(listed) => resources.extend(listed.into_iter().map(|r| McpResourceInfo {
                uri: r.uri,
                name: r.name,
                description: r.description,
                mime_type: r.mime_type,
                template: false,
            })),
            Err(error) => tracing::warn!(server, %error, "listing the resources failed"),
        }
        match peer.list_all_resource_templates().await {
            Ok(listed) => resources.extend(listed.into_iter().map(|t| McpResourceInfo {
                uri: t.uri_template,
                name: t.name,
                description: t.description,
                mime_type: t.mime_type,
                template: true,
            })),
            Err(error) => tracing::warn!(server, %error, "listing the resource templates failed"),
        }
    }
    let mut prompts = Vec::new();
    if offers(|c| c.prompts.is_some()) {
        match peer.list_all_prompts().await {
            Ok(listed) => prompts.extend(listed.into_iter().map(|p| {
                McpPromptInfo {
                    name: p.name,
                    description: p.description,
                    arguments: p
                        .arguments
                        .unwrap_or_default()
                        .into_iter()
                        .map(|a| (a.name, a.required.unwrap_or(false)))
                        .collect(),
                }
            })),
            Err(error) => tracing::warn!(server, %error, "listing the prompts failed"),
        }
    }
    Ok(Listing {
        tools,
        resources,
        prompts,
    })
}

/// The `mcp.tools-listed` payload: the tools the configuration lets through, with the names
/// the model will call them by.
pub(crate) fn payload(server: &McpServer, listing: &Listing) -> McpToolList {
    let prefix = server.tool_prefix();
    let mut taken = HashSet::new();
    let tools = listing
        .tools
        .iter()
        .filter(|tool| server.offers(&tool.name))
        .map(|tool| {
            let annotations = tool.annotations.as_ref();
            let hints = McpToolAnnotations {
                read_only_hint: annotations.and_then(|a| a.read_only_hint),
                destructive_hint: annotations.and_then(|a| a.destructive_hint),
                idempotent_hint: annotations.and_then(|a| a.idempotent_hint),
                open_world_hint: annotations.and_then(|a| a.open_world_hint),
            };
            let category =
                if server.config().trust_read_only_hint && hints.read_only_hint == Some(true) {
                    ToolCategory::Read
                } else {
                    ToolCategory::Mcp
                };
            McpToolInfo {
                name: model_name(&prefix, &tool.name, &mut taken),
                server_tool: tool.name.to_string(),
                title: tool
                    .title
                    .clone()
                    .or_else(|| annotations.and_then(|a| a.title.clone())),
                description: tool.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: Arc::new(Value::Object((*tool.input_schema).clone())),
                output_schema: tool
                    .output_schema
                    .as_ref()
                    .map(|schema| Arc::new(Value::Object((**schema).clone()))),
                category,
                annotations: hints,
            }
        })
        .collect();
    McpToolList {
        server: server.name().to_owned(),
        tools,
        resources: listing.resources.clone(),
    }
}

/// The name the model calls a server tool by: the prefix and the tool's name, with characters
/// providers reject replaced by `_`, shortened to 64 characters with a hash of the full name
/// when longer, and numbered when that collides with a name already given.
pub(crate) fn model_name(prefix: &str, tool: &str, taken: &mut HashSet<String>) -> String {
    let mut name: String = prefix
        .chars()
        .chain(tool.chars())
        .map(|c| if tool_name_char(c) { c } else { '_' })
        .collect();
    if name.is_empty() {
        name.push('_');
    }
    if name.len() > MAX_TOOL_NAME {
        // Every character is ASCII by now, so any byte index is a character boundary.
        let hash = format!("_{:08x}", fnv1a(tool.as_bytes()));
        name.truncate(MAX_TOOL_NAME - hash.len());
        name.push_str(&hash);
    }
    let mut candidate = name.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        let suffix = format!("_{n}");
        let mut base = name.clone();
        base.truncate(MAX_TOOL_NAME - suffix.len());
        candidate = base + &suffix;
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// 32-bit FNV-1a: a stable hash (names must stay the same across runs, for permission rules).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

/// Emits `mcp.tools-listed`; the list as handlers left it, or `None` when a handler suppressed
/// it or failed (then nothing of the server is registered), with what to tell the user.
pub(crate) async fn reshape(
    pipeline: &Pipeline,
    list: McpToolList,
    reason: McpListReason,
) -> (Option<McpToolList>, Option<String>) {
    let ctx = McpCtx {
        server: Arc::from(list.server.as_str()),
        reason,
    };
    let server = list.server.clone();
    match pipeline.emit::<McpToolsListed>(list, &ctx).await {
        Ok(EmitOutcome::Continue(list)) => (Some(list), None),
        Ok(EmitOutcome::Suppressed { by }) => (
            None,
            Some(format!(
                "the tools of MCP server `{server}` were withheld by handler `{by}` of \
                 mcp.tools-listed"
            )),
        ),
        Err(error) => (
            None,
            Some(format!(
                "the tools of MCP server `{server}` are not offered because a handler of \
                 mcp.tools-listed failed: {error}"
            )),
        ),
    }
}

/// The tools to register from a reshaped list, and what was dropped from it and why.
pub(crate) fn register(
    client: &Arc<Inner>,
    list: &McpToolList,
    listing: &Listing,
) -> (ToolRegistry, Vec<String>) {
    let offered: HashMap<&str, &ServerToolSpec> = listing
        .tools
        .iter()
        .map(|tool| (tool.name.as_ref(), tool))
        .collect();
    let server = &client.server;
    let weak: Weak<Inner> = Arc::downgrade(client);
    let mut registry = ToolRegistry::new();
    let mut dropped = Vec::new();
    for info in &list.tools {
        if !offered.contains_key(info.server_tool.as_str()) {
            dropped.push(format!(
                "`{}`: the server has no tool `{}`",
                info.name, info.server_tool
            ));
            continue;
        }
        let tool = ServerTool::tool(Weak::clone(&weak), server, info);
        if let Err(error) = registry.register(tool) {
            dropped.push(format!("`{}`: {error}", info.name));
        }
    }
    if !list.resources.is_empty() {
        let mut taken: HashSet<String> = registry.names().map(str::to_owned).collect();
        let name = model_name(&server.tool_prefix(), "read_resource", &mut taken);
        let reader = ServerTool::resource_reader(weak, server, name, &list.resources);
        if let Err(error) = registry.register(reader) {
            dropped.push(format!("the resource tool: {error}"));
        }
    }
    (registry, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_cleaned_bounded_and_unique() {
        let mut taken = HashSet::new();
        assert_eq!(model_name("fs__", "read_file", &mut taken), "fs__read_file");
        assert_eq!(
            model_name("fs__", "files/read.v2", &mut taken),
            "fs__files_read_v2"
        );
        assert_eq!(
            model_name("fs__", "files.read_v2", &mut taken),
            "fs__files_read_v2_2"
        );
        let long = "x".repeat(100);
        let name = model_name("fs__", &long, &mut taken);
        assert_eq!(name.len(), 64);
        assert_eq!(name, model_name("fs__", &long, &mut HashSet::new()));
        assert_ne!(
            name,
            model_name("fs__", &format!("{long}y"), &mut HashSet::new())
        );
        assert_eq!(model_name("", "echo", &mut taken), "echo");
    }
}
