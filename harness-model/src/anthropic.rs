//! Anthropic Messages, streamed.
//!
//! Requests go to `POST {base_url}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`. The system prompt is the top-level `system` field; the
//! conversation becomes alternating `user` and `assistant` messages of content blocks:
//!
//! - kernel system messages in the middle of the conversation become user text wrapped in
//!   `<system-reminder>…</system-reminder>`;
//! - consecutive user-side messages (user text, tool results, reminders) merge into one user
//!   message, tool results first, so the results of parallel calls travel together;
//! - an assistant message sends its signed thinking back as a `thinking` block, then its text,
//!   then a `tool_use` block per call.
//!
//! The stream's `message_start`, `content_block_start/delta/stop`, `message_delta`,
//! `message_stop`, `ping` and `error` events become [`StreamEvent`]s. Anthropic counts cached
//! prompt tokens apart from `input_tokens`; [`Usage::input_tokens`] here includes them.

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use crate::http::{
    Endpoint, SseDecoder, bad_event, decode_sse, parse_error_body, parse_id, stream_cut,
    stream_error,
};
use crate::sse::SseEvent;
use crate::{
    FinishReason, KernelMessage, Model, ModelError, ModelId, ModelRequest, ModelStream,
    ProviderConfig, StreamEvent, Usage,
};

/// The `anthropic-version` header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A model served through the Anthropic Messages API.
///
/// ```no_run
/// use harness_model::{AnthropicModel, ProviderConfig};
///
/// // Key from ANTHROPIC_API_KEY; extended thinking with a 4,000-token budget.
/// let claude = AnthropicModel::new("anthropic/claude-sonnet-4-5", ProviderConfig::anthropic())?
///     .with_thinking(4_000);
/// # Ok::<(), harness_model::ModelError>(())
/// ```
#[derive(Debug)]
pub struct AnthropicModel {
    id: ModelId,
    endpoint: Endpoint,
    max_tokens: u32,
    thinking_budget: Option<u32>,
}

/// The output limit used when neither the request nor the configuration sets one: the most
/// the older models accept, and 16,384 for the rest.
pub fn default_max_tokens(model: &str) -> u32 {
    if model.starts_with("claude-3-5") {
        8_192
    } else if model.starts_with("claude-3-") && !model.starts_with("claude-3-7") {
        4_096
    } else {
        16_384
    }
}

impl AnthropicModel {
    /// A model `provider/name` served at `config.base_url` (normally
    /// `https://api.anthropic.com`). Fails if the id is not `provider/name`, the base URL is not
    /// HTTP(S), or a required key is missing.
    pub fn new(id: &str, config: ProviderConfig) -> Result<Self, ModelError> {
        let id = parse_id(id)?;
        let endpoint = Endpoint::new(id.provider(), &config, "/v1/messages")?;
        let max_tokens = config
            .max_tokens
            .unwrap_or_else(|| default_max_tokens(id.name()));
        Ok(AnthropicModel {
            id,
            endpoint,
            max_tokens,
            thinking_budget: None,
        })
    }

    /// Turns on extended thinking with this token budget. `max_tokens` is raised above the
    /// budget when needed, and no temperature is sent (thinking requires the default).
    pub fn with_thinking(mut self, budget_tokens: u32) -> Self {
        self.thinking_budget = Some(budget_tokens);
        self
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), self.id.name().into());
        let mut max_tokens = request.max_tokens.unwrap_or(self.max_tokens);
        if let Some(budget) = self.thinking_budget {
            max_tokens = max_tokens.max(budget.saturating_add(1_024));
        }
        body.insert("max_tokens".into(), max_tokens.into());
        if !request.system.is_empty() {
            body.insert("system".into(), request.system.clone().into());
        }
        body.insert("messages".into(), Value::Array(messages(&request.messages)));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.input_schema,
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        match self.thinking_budget {
            Some(budget) => {
                body.insert(
                    "thinking".into(),
                    json!({ "type": "enabled", "budget_tokens": budget }),
                );
            }
            None => {
                if let Some(temperature) = request.temperature {
                    body.insert("temperature".into(), json!(temperature));
                }
            }
        }
        body.insert("stream".into(), true.into());
        Value::Object(body)
    }
}

/// One message being built: a role and its content blocks.
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

/// The conversation as alternating user and assistant messages.
fn messages(conversation: &[KernelMessage]) -> Vec<Value> {
    let mut turns: Vec<Turn> = Vec::with_capacity(conversation.len());
    for message in conversation {
        let (role, blocks) = match message {
            KernelMessage::User { content } => ("user", text_block(content).into_iter().collect()),
            KernelMessage::System { content } => (
                "user",
                vec![json!({
                    "type": "text",
                    "text": format!("<system-reminder>\n{content}\n</system-reminder>"),
                })],
            ),
            KernelMessage::ToolResult {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let mut block = Map::new();
                block.insert("type".into(), "tool_result".into());
                block.insert("tool_use_id".into(), tool_call_id.clone().into());
                if !content.is_empty() {
                    block.insert("content".into(), content.clone().into());
                }
                if *is_error {
                    block.insert("is_error".into(), true.into());
                }
                ("user", vec![Value::Object(block)])
            }
            KernelMessage::Assistant {
                content,
                tool_calls,
                thinking,
            } => {
                let mut blocks = Vec::with_capacity(2 + tool_calls.len());
                // Only signed thinking can go back; unsigned reasoning (from another
                // provider) would be rejected.
                if let Some(thinking) = thinking
                    && let Some(signature) = &thinking.signature
                {
                    blocks.push(json!({
                        "type": "thinking",
                        "thinking": thinking.text,
                        "signature": signature,
                    }));
                }
                blocks.extend(text_block(content));
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": tool_input(&call.arguments),
                    }));
                }
                ("assistant", blocks)
            }
        };
        // Anthropic rejects empty messages; skipping one lets its neighbours merge.
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(turn) if turn.role == role => turn.blocks.extend(blocks),
            _ => turns.push(Turn { role, blocks }),
        }
    }
    turns
        .into_iter()
        .map(|mut turn| {
            if turn.role == "user" {
                // Tool results must open the user message that answers the tool calls.
                turn.blocks
                    .sort_by_key(|block| block["type"] != "tool_result");
            }
            json!({ "role": turn.role, "content": turn.blocks })
        })
        .collect()
}

/// A text block, or nothing for empty text (which Anthropic rejects).
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({ "type": "text", "text": text }))
}

/// A tool call's input must be an object: argument text is parsed, anything else becomes `{}`.
fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(parsed @ Value::Object(_)) => parsed,
            _ => Value::Object(Map::new()),
        },
        _ => Value::Object(Map::new()),
    }
}

#[async_trait]
impl Model for AnthropicModel {
    fn id(&self) -> &ModelId {
        &self.id
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let body = self.request_body(request);
        let mut builder = self
            .endpoint
            .client
            .post(&self.endpoint.url)
            .header("anthropic-version", ANTHROPIC_VERSION);
        if let Some(key) = &self.endpoint.api_key {
            builder = builder.header("x-api-key", key);
        }
        let response = self.endpoint.post_stream(builder, &body).await?;
        let decoder = EventDecoder::new(self.endpoint.provider.clone());
        Ok(decode_sse(
            self.endpoint.provider.clone(),
            response.bytes_stream().boxed(),
            decoder,
            self.endpoint.sse_limits,
        ))
    }
}

/// What a content block of the response is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Block {
    Text,
    Thinking,
    /// A tool call, with its position among the response's tool calls.
    ToolUse(usize),
    /// Something this client does not surface (redacted thinking, server tools).
    Other,
}

/// Decodes Messages stream events.
pub(crate) struct EventDecoder {
    provider: Arc<str>,
    /// Each block's wire index and kind.
    blocks: Vec<(u64, Block)>,
    tool_calls: usize,
    stop: Option<FinishReason>,
}

impl EventDecoder {
    pub(crate) fn new(provider: Arc<str>) -> Self {
        EventDecoder {
            provider,
            blocks: Vec::new(),
            tool_calls: 0,
            stop: None,
        }
    }

    fn block(&self, index: u64) -> Option<Block> {
        self.blocks
            .iter()
            .rev()
            .find(|(wire, _)| *wire == index)
            .map(|(_, block)| *block)
    }

    fn finish(&self, out: &mut VecDeque<StreamEvent>) {
        let reason = self.stop.unwrap_or(if self.tool_calls > 0 {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        });
        out.push_back(StreamEvent::Finish(reason));
    }

    fn block_start(&mut self, event: &Value, out: &mut VecDeque<StreamEvent>) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = event.get("content_block").unwrap_or(&Value::Null);
        let text = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
        };
        let kind = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = text("text") {
                    out.push_back(StreamEvent::TextDelta(text.to_owned()));
                }
                Block::Text
            }
            Some("thinking") => {
                if let Some(thinking) = text("thinking") {
                    out.push_back(StreamEvent::ThinkingDelta(thinking.to_owned()));
                }
                if let Some(signature) = text("signature") {
                    out.push_back(StreamEvent::ThinkingSignature(signature.to_owned()));
                }
                Block::Thinking
            }
            Some("tool_use") => {
                let position = self.tool_calls;
                self.tool_calls += 1;
                out.push_back(StreamEvent::ToolCallStart {
                    index: position,
                    id: text("id").unwrap_or_default().to_owned(),
                    name: text("name").unwrap_or_default().to_owned(),
                });
                // The input streams as JSON text; a start that already carries it is whole.
                if let Some(input) = block
                    .get("input")
                    .filter(|input| input.as_object().is_some_and(|map| !map.is_empty()))
                {
                    out.push_back(StreamEvent::ToolCallDelta {
                        index: position,
                        arguments: input.to_string(),
                    });
                }
                Block::ToolUse(position)
            }
            _ => Block::Other,
        };
        self.blocks.push((index, kind));
    }

    fn block_delta(
        &mut self,
        event: &Value,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), ModelError> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let delta = event.get("delta").unwrap_or(&Value::Null);
        let text = |key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                if let Some(text) = text("text") {
                    out.push_back(StreamEvent::TextDelta(text));
                }
            }
            Some("thinking_delta") => {
                if let Some(thinking) = text("thinking") {
                    out.push_back(StreamEvent::ThinkingDelta(thinking));
                }
            }
            Some("signature_delta") => {
                if let Some(signature) = text("signature") {
                    out.push_back(StreamEvent::ThinkingSignature(signature));
                }
            }
            Some("input_json_delta") => match self.block(index) {
                Some(Block::ToolUse(position)) => {
                    if let Some(arguments) = text("partial_json") {
                        out.push_back(StreamEvent::ToolCallDelta {
                            index: position,
                            arguments,
                        });
                    }
                }
                Some(Block::Other) => {}
                _ => {
                    return Err(ModelError::InvalidResponse {
                        provider: self.provider.to_string(),
                        message: format!(
                            "tool input arrived for content block {index}, which is not a \
                             tool_use block"
                        ),
                    });
                }
            },
            // Citations and future delta types carry nothing the kernel uses.
            _ => {}
        }
        Ok(())
    }
}

impl SseDecoder for EventDecoder {
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let json: Value =
            serde_json::from_str(data).map_err(|error| bad_event(&self.provider, data, &error))?;
        let kind = json
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        match kind {
            "message_start" => {
                if let Some(usage) = json.get("message").and_then(|m| m.get("usage")) {
                    out.push_back(StreamEvent::Usage(parse_usage(usage)));
                }
            }
            "content_block_start" => self.block_start(&json, out),
            "content_block_delta" => self.block_delta(&json, out)?,
            "content_block_stop" => {
                let index = json.get("index").and_then(Value::as_u64).unwrap_or(0);
                if let Some(Block::ToolUse(position)) = self.block(index) {
                    out.push_back(StreamEvent::ToolCallEnd { index: position });
                }
            }
            "message_delta" => {
                if let Some(reason) = json
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop = Some(match reason {
                        "tool_use" => FinishReason::ToolCalls,
                        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
                        "refusal" => FinishReason::Refusal,
                        // end_turn, stop_sequence, pause_turn and future reasons.
                        _ => FinishReason::Stop,
                    });
                }
                if let Some(usage) = json.get("usage") {
                    out.push_back(StreamEvent::Usage(parse_usage(usage)));
                }
            }
            "message_stop" => {
                self.finish(out);
                return Ok(true);
            }
            "error" => return Err(stream_error(&self.provider, parse_error_body(data))),
            // `ping` and event types added later.
            _ => {}
        }
        Ok(false)
    }

    fn end_of_body(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), ModelError> {
        // The stop reason came, only `message_stop` is missing: the answer is whole.
        if self.stop.is_some() {
            self.finish(out);
            Ok(())
        } else {
            Err(stream_cut(&self.provider))
        }
    }
}

/// Anthropic's usage; `input_tokens` there excludes cache reads and writes, here it includes
/// them.
fn parse_usage(usage: &Value) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let cache_read = count("cache_read_input_tokens").unwrap_or(0);
    let cache_write = count("cache_creation_input_tokens").unwrap_or(0);
    Usage {
        input_tokens: count("input_tokens")
            .map(|input| input + cache_read + cache_write)
            .unwrap_or(0),
        output_tokens: count("output_tokens").unwrap_or(0),
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        reasoning_tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_output_limits() {
        assert_eq!(default_max_tokens("claude-3-haiku-20240307"), 4_096);
        assert_eq!(default_max_tokens("claude-3-5-haiku-latest"), 8_192);
        assert_eq!(default_max_tokens("claude-3-7-sonnet-latest"), 16_384);
        assert_eq!(default_max_tokens("claude-sonnet-4-5"), 16_384);
    }

    #[test]
    fn unrepresentable_arguments_become_an_empty_object() {
        assert_eq!(tool_input(&json!("{\"a\":1}")), json!({"a": 1}));
        assert_eq!(tool_input(&json!("{\"a\":")), json!({}));
        assert_eq!(tool_input(&json!([1])), json!({}));
    }

    #[test]
    fn garbage_events_never_panic() {
        let mut decoder = EventDecoder {
            provider: Arc::from("anthropic"),
            blocks: Vec::new(),
            tool_calls: 0,
            stop: None,
        };
        let mut out = VecDeque::new();
        for data in [
            "null",
            "[]",
            "{}",
            r#"{"type":"content_block_start"}"#,
            r#"{"type":"content_block_start","index":-3,"content_block":5}"#,
            r#"{"type":"content_block_delta","delta":null}"#,
            r#"{"type":"content_block_stop","index":"x"}"#,
            r#"{"type":"message_delta","usage":{"input_tokens":-1}}"#,
            r#"{"type":"message_start","message":[]}"#,
        ] {
            let _ = decoder.event(
                SseEvent {
                    event: "x".into(),
                    data: data.into(),
                    ..SseEvent::default()
                },
                &mut out,
            );
        }
    }
}
