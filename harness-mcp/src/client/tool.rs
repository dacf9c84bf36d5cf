//! A server's tools as harness tools, the resource tool, and what the model reads of a result.

use std::fmt::Write as _;
use std::sync::Weak;
use std::time::Duration;

use async_trait::async_trait;
use harness_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use harness_tags::{McpResourceInfo, McpToolInfo, ToolCategory};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    ReadResourceRequest, ReadResourceRequestParams, ResourceContents, ServerResult,
};
use serde_json::{Value, json};

use super::Inner;
use crate::config::McpServer;
use crate::error::McpError;

/// How much longer than the server's timeout the kernel waits for a call, so that the call's
/// own timeout (which cancels the request on the server and says so) fires first.
const KERNEL_GRACE: Duration = Duration::from_secs(5);
/// How many resources the resource tool's description lists.
const LISTED_RESOURCES: usize = 40;

/// One tool of a server as the model calls it, or the server's resource tool.
pub(crate) struct ServerTool {
    client: Weak<Inner>,
    server: String,
    name: String,
    description: String,
    input_schema: Value,
    category: ToolCategory,
    timeout: Duration,
    result_limit: usize,
    target: Target,
}

/// What a call of the tool does on the server.
enum Target {
    /// `tools/call` of this tool.
    Tool(String),
    /// `resources/read` of the URI in the arguments.
    Resources,
}

impl ServerTool {
    /// A tool of the server, as `mcp.tools-listed` handlers left it.
    pub(crate) fn tool(client: Weak<Inner>, server: &McpServer, info: &McpToolInfo) -> Self {
        let description = match (&info.title, info.description.trim()) {
            (Some(title), "") => title.clone(),
            (_, description) => description.to_owned(),
        };
        ServerTool {
            client,
            server: server.name().to_owned(),
            name: info.name.clone(),
            description,
            input_schema: (*info.input_schema).clone(),
            category: info.category,
            timeout: server.call_timeout(),
            result_limit: server.result_limit(),
            target: Target::Tool(info.server_tool.clone()),
        }
    }

    /// `SERVER__read_resource`: reads one of the server's resources by URI; its description
    /// lists them.
    pub(crate) fn resource_reader(
        client: Weak<Inner>,
        server: &McpServer,
        name: String,
        resources: &[McpResourceInfo],
    ) -> Self {
        let mut description = format!(
            "Reads a resource of the MCP server `{}` by its URI. It offers:",
            server.name()
        );
        for resource in resources.iter().take(LISTED_RESOURCES) {
            let _ = write!(description, "\n- {}", resource.uri);
            if resource.template {
                description.push_str(" (a URI template: fill in the {placeholders})");
            }
            let _ = write!(description, ": {}", resource.name);
            if let Some(about) = resource.description.as_deref().map(str::trim)
                && !about.is_empty()
            {
                let _ = write!(description, ", {about}");
            }
        }
        if resources.len() > LISTED_RESOURCES {
            let _ = write!(
                description,
                "\n- and {} more",
                resources.len() - LISTED_RESOURCES
            );
        }
        ServerTool {
            client,
            server: server.name().to_owned(),
            name,
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "uri": {"type": "string", "description": "The URI of the resource to read."}
                },
                "required": ["uri"],
            }),
            category: ToolCategory::Mcp,
            timeout: server.call_timeout(),
            result_limit: server.result_limit(),
            target: Target::Resources,
        }
    }

    fn limit(&self) -> Limit<'_> {
        Limit {
            server: &self.server,
            what: &self.name,
            bytes: self.result_limit,
        }
    }

    fn protocol_error(&self, detail: String) -> McpError {
        McpError::Protocol {
            server: self.server.clone(),
            what: self.name.clone(),
            detail,
        }
    }

    async fn call_tool(
        &self,
        client: &Inner,
        server_tool: &str,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let arguments = match input {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            other => {
                return Err(ToolError::new(format!(
                    "the arguments of `{}` must be a JSON object, not {other}",
                    self.name
                )));
            }
        };
        let mut params = CallToolRequestParams::new(server_tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let result = match client.request(ctx, &self.name, request).await? {
            ServerResult::CallToolResult(result) => result,
            // The answer union is untagged: a result whose shape another variant also fits is
            // read as that variant, so it is read again as what was asked for.
            other => serde_json::to_value(&other)
                .and_then(serde_json::from_value::<CallToolResult>)
                .map_err(|_| {
                    self.protocol_error(
                        "the answer is not a tool result (tasks and input requests are not \
                         supported by this client)"
                            .to_owned(),
                    )
                })?,
        };
        render_call(result, &self.limit())
    }

    async fn read_resource(
        &self,
        client: &Inner,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(uri) = input.get("uri").and_then(Value::as_str) else {
            return Err(ToolError::new("give the resource's `uri`"));
        };
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        let contents = match client.request(ctx, &self.name, request).await? {
            ServerResult::ReadResourceResult(result) => result.contents,
            other => {
                let detail = format!("the answer is not a resource: {}", kind_of(&other));
                return Err(self.protocol_error(detail).into());
            }
        };
        let mut text = String::new();
        for content in &contents {
            push_line(&mut text, &render_resource(content));
        }
        self.limit().check(&text)?;
        Ok(ToolOutput::from(text))
    }
}

#[async_trait]
impl Tool for ServerTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn category(&self) -> ToolCategory {
        self.category
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout + KERNEL_GRACE)
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let client = self.client.upgrade().ok_or_else(|| closed(&self.server))?;
        match &self.target {
            Target::Tool(server_tool) => self.call_tool(&client, server_tool, input, &ctx).await,
            Target::Resources => self.read_resource(&client, input, &ctx).await,
        }
    }
}

fn closed(server: &str) -> ToolError {
    McpError::Closed {
        server: server.to_owned(),
    }
    .into()
}

impl From<McpError> for ToolError {
    fn from(error: McpError) -> Self {
        ToolError::new(error.to_string())
    }
}

fn kind_of(result: &ServerResult) -> String {
    serde_json::to_value(result)
        .ok()
        .and_then(|value| {
            value
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>())
        })
        .map_or_else(
            || "an empty answer".to_owned(),
            |keys| format!("an object with {}", keys.join(", ")),
        )
}

/// The bound on what one result hands the model.
pub(crate) struct Limit<'a> {
    pub(crate) server: &'a str,
    pub(crate) what: &'a str,
    pub(crate) bytes: usize,
}

impl Limit<'_> {
    fn check(&self, text: &str) -> Result<(), McpError> {
        if text.len() > self.bytes {
            return Err(McpError::TooLarge {
                server: self.server.to_owned(),
                what: self.what.to_owned(),
                size: text.len(),
                limit: self.bytes,
            });
        }
        Ok(())
    }
}

/// What the model reads of a tool result: its text blocks, placeholders for what it cannot
/// read (images, audio, binary resources), the structured result as JSON when there is no
/// text. The structured result also goes into the output's metadata for user interfaces.
pub(crate) fn render_call(
    result: CallToolResult,
    limit: &Limit<'_>,
) -> Result<ToolOutput, ToolError> {
    let mut text = String::new();
    for block in &result.content {
        push_line(&mut text, &render_block(block));
    }
    if text.trim().is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    limit.check(&text)?;
    if result.is_error == Some(true) {
        if text.trim().is_empty() {
            text = format!("`{}` failed without saying why", limit.what);
        }
        return Err(ToolError::new(text));
    }
    Ok(ToolOutput {
        content: text,
        metadata: result
            .structured_content
            .map(|structured| json!({ "structuredContent": structured })),
    })
}

fn push_line(text: &mut String, line: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(line);
}

fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image: {}, {} bytes, not shown]",
            image.mime_type,
            decoded_len(&image.data)
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {} bytes, not shown]",
            audio.mime_type,
            decoded_len(&audio.data)
        ),
        ContentBlock::Resource(embedded) => render_resource(&embedded.resource),
        ContentBlock::ResourceLink(link) => {
            let mut line = format!("[resource link: {} ({})", link.uri, link.name);
            if let Some(about) = link.description.as_deref().filter(|d| !d.trim().is_empty()) {
                let _ = write!(line, ": {about}");
            }
            line.push(']');
            line
        }
        // A kind of content newer than this client.
        _ => "[content of a kind this client cannot show]".to_owned(),
    }
}

fn render_resource(content: &ResourceContents) -> String {
    match content {
        ResourceContents::TextResourceContents { uri, text, .. } => {
            format!("[resource {uri}]\n{text}")
        }
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => format!(
            "[binary resource {uri}: {}, {} bytes, not shown]",
            mime_type.as_deref().unwrap_or("unknown type"),
            decoded_len(blob)
        ),
        _ => "[resource of a kind this client cannot show]".to_owned(),
    }
}

/// The size of base64 data once decoded.
fn decoded_len(base64: &str) -> usize {
    let padding = base64.bytes().rev().take_while(|&b| b == b'=').count();
    (base64.len() / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ImageContent, TextContent};

    fn limit(bytes: usize) -> Limit<'static> {
        Limit {
            server: "demo",
            what: "demo__tool",
            bytes,
        }
    }

    fn result(
        content: Vec<ContentBlock>,
        structured: Option<Value>,
        error: bool,
    ) -> CallToolResult {
        let mut result = CallToolResult::default();
        result.content = content;
        result.structured_content = structured;
        result.is_error = Some(error);
        result
    }

    #[test]
    fn text_structured_and_binary_content_become_text_the_model_reads() {
        let output = render_call(
            result(
                vec![
                    ContentBlock::Text(TextContent::new("a tiny logo:")),
                    ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
                ],
                None,
                false,
            ),
            &limit(1000),
        )
        .unwrap();
        assert_eq!(
            output.content,
            "a tiny logo:\n[image: image/png, 8 bytes, not shown]"
        );

        let weather = json!({"temperature": 33});
        let output =
            render_call(result(vec![], Some(weather.clone()), false), &limit(1000)).unwrap();
        assert_eq!(output.content, r#"{"temperature":33}"#);
        assert_eq!(output.metadata, Some(json!({"structuredContent": weather})));

        let error = render_call(
            result(
                vec![ContentBlock::Text(TextContent::new("bad zone"))],
                None,
                true,
            ),
            &limit(1000),
        )
        .unwrap_err();
        assert_eq!(error.message(), "bad zone");
        let error = render_call(result(vec![], None, true), &limit(1000)).unwrap_err();
        assert!(error.message().contains("failed without saying why"));
    }

    #[test]
    fn a_result_over_the_limit_is_an_error_naming_both_sizes() {
        let error = render_call(
            result(
                vec![ContentBlock::Text(TextContent::new("x".repeat(50)))],
                None,
                false,
            ),
            &limit(10),
        )
        .unwrap_err();
        assert!(
            error
                .message()
                .contains("is 50 bytes, more than the 10 bytes"),
            "{error}"
        );
    }
}
