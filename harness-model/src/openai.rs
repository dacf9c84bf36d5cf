//! OpenAI Chat Completions, streamed, against OpenAI or any OpenAI-compatible server (Ollama,
//! vLLM, llama.cpp's server, OpenRouter, Groq, DeepSeek, Gemini's compatibility endpoint).
//!
//! Requests go to `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options.include_usage`. The conversation maps to OpenAI messages: the system prompt
//! first, kernel system messages in place as `system` messages, assistant tool calls with their
//! arguments as a JSON string, and tool results as `tool` messages. Reasoning that comes back
//! as `reasoning_content` or `reasoning` becomes thinking; thinking is not sent back (OpenAI
//! and DeepSeek do not accept it).

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
    FinishReason, Model, ModelError, ModelId, ModelRequest, ModelStream, ProviderConfig,
    StreamEvent, Usage,
};
use harness_tags::KernelMessage;

/// A model served through the OpenAI Chat Completions API.
///
/// ```no_run
/// use harness_model::{OpenAiModel, ProviderConfig};
///
/// // OpenAI itself, key from OPENAI_API_KEY:
/// let gpt = OpenAiModel::new("openai/gpt-4o", ProviderConfig::openai())?;
/// // A local Ollama: no key, no auth header.
/// let local = OpenAiModel::new(
///     "ollama/llama3.2",
///     ProviderConfig::new("http://localhost:11434/v1"),
/// )?;
/// # Ok::<(), harness_model::ModelError>(())
/// ```
#[derive(Debug)]
pub struct OpenAiModel {
    id: ModelId,
    endpoint: Endpoint,
    default_max_tokens: Option<u32>,
    max_tokens_field: &'static str,
}

impl OpenAiModel {
    /// A model `provider/name` served at `config.base_url`; `name` is what the server is asked
    /// for. Fails if the id is not `provider/name`, the base URL is not HTTP(S), or a required
    /// key is missing.
    ///
    /// OpenAI itself (provider `openai`) receives the output limit as `max_completion_tokens`,
    /// which its reasoning models require; other servers receive `max_tokens`.
    pub fn new(id: &str, config: ProviderConfig) -> Result<Self, ModelError> {
        let id = parse_id(id)?;
        let endpoint = Endpoint::new(id.provider(), &config, "/chat/completions")?;
        let max_tokens_field = if id.provider() == "openai" {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        Ok(OpenAiModel {
            id,
            endpoint,
            default_max_tokens: config.max_tokens,
            max_tokens_field,
        })
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), self.id.name().into());
        body.insert("messages".into(), Value::Array(messages(request)));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.input_schema,
                        }
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(max_tokens) = request.max_tokens.or(self.default_max_tokens) {
            body.insert(self.max_tokens_field.into(), max_tokens.into());
        }
        body.insert("stream".into(), true.into());
        body.insert("stream_options".into(), json!({ "include_usage": true }));
        Value::Object(body)
    }
}

/// The conversation in OpenAI's message format.
fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        out.push(json!({ "role": "system", "content": request.system }));
    }
    for message in request.messages.iter() {
        out.push(match message {
            KernelMessage::User { content } => json!({ "role": "user", "content": content }),
            KernelMessage::System { content } => json!({ "role": "system", "content": content }),
            KernelMessage::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let mut message = Map::new();
                message.insert("role".into(), "assistant".into());
                // OpenAI wants `null` rather than "" next to tool calls.
                let content = if content.is_empty() && !tool_calls.is_empty() {
                    Value::Null
                } else {
                    Value::String(content.clone())
                };
                message.insert("content".into(), content);
                if !tool_calls.is_empty() {
                    let calls = tool_calls
                        .iter()
                        .map(|call| {
                            let arguments = match &call.arguments {
                                Value::String(raw) => raw.clone(),
                                other => other.to_string(),
                            };
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": { "name": call.name, "arguments": arguments },
                            })
                        })
                        .collect();
                    message.insert("tool_calls".into(), Value::Array(calls));
                }
                Value::Object(message)
            }
            KernelMessage::ToolResult {
                tool_call_id,
                content,
                ..
            } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
        });
    }
    out
}

#[async_trait]
impl Model for OpenAiModel {
    fn id(&self) -> &ModelId {
        &self.id
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let body = self.request_body(request);
        let mut builder = self.endpoint.client.post(&self.endpoint.url);
        if let Some(key) = &self.endpoint.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = self.endpoint.post_stream(builder, &body).await?;
        let decoder = ChunkDecoder::new(self.endpoint.provider.clone());
        Ok(decode_sse(
            self.endpoint.provider.clone(),
            response.bytes_stream().boxed(),
            decoder,
            self.endpoint.sse_limits,
        ))
    }
}

/// One tool call as the stream builds it.
struct CallSlot {
    /// The index the server keys deltas by.
    wire_index: u64,
    id: String,
    name: String,
}

/// Decodes `chat.completion.chunk` events.
pub(crate) struct ChunkDecoder {
    provider: Arc<str>,
    calls: Vec<CallSlot>,
    finish: Option<FinishReason>,
    refused: bool,
}

impl ChunkDecoder {
    pub(crate) fn new(provider: Arc<str>) -> Self {
        ChunkDecoder {
            provider,
            calls: Vec::new(),
            finish: None,
            refused: false,
        }
    }

    fn finish(&mut self, out: &mut VecDeque<StreamEvent>) {
        for index in 0..self.calls.len() {
            out.push_back(StreamEvent::ToolCallEnd { index });
        }
        let has_calls = !self.calls.is_empty();
        let reason = match self.finish {
            _ if self.refused => FinishReason::Refusal,
            // Some servers (older Ollama) say `stop` after tool calls.
            None | Some(FinishReason::Stop) if has_calls => FinishReason::ToolCalls,
            Some(reason) => reason,
            None => FinishReason::Stop,
        };
        out.push_back(StreamEvent::Finish(reason));
    }

    fn tool_call_delta(&mut self, position: usize, delta: &Value, out: &mut VecDeque<StreamEvent>) {
        let wire_index = delta
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let id = delta.get("id").and_then(Value::as_str).unwrap_or("");
        let function = delta.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(text)) => text.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => other.to_string(),
        };
        // The latest call with this wire index, unless a different id says a new call reuses
        // the index (some compatible servers number every call 0).
        let found = self
            .calls
            .iter()
            .rposition(|slot| slot.wire_index == wire_index)
            .filter(|&slot| {
                id.is_empty() || self.calls[slot].id.is_empty() || self.calls[slot].id == id
            });
        let index = match found {
            Some(index) => index,
            None => {
                self.calls.push(CallSlot {
                    wire_index,
                    id: String::new(),
                    name: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let slot = &mut self.calls[index];
        let mut start_id = String::new();
        let mut start_name = String::new();
        if !id.is_empty() && slot.id.is_empty() {
            slot.id = id.to_owned();
            start_id = id.to_owned();
        }
        // Servers that repeat the whole name in every delta must not double it.
        if !name.is_empty() && slot.name != name {
            slot.name.push_str(name);
            start_name = name.to_owned();
        }
        if !start_id.is_empty() || !start_name.is_empty() || found.is_none() {
            out.push_back(StreamEvent::ToolCallStart {
                index,
                id: start_id,
                name: start_name,
            });
        }
        if !arguments.is_empty() {
            out.push_back(StreamEvent::ToolCallDelta { index, arguments });
        }
    }
}

impl SseDecoder for ChunkDecoder {
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finish(out);
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|error| bad_event(&self.provider, data, &error))?;
        if chunk.get("error").is_some_and(|error| !error.is_null()) || event.event == "error" {
            return Err(stream_error(&self.provider, parse_error_body(data)));
        }
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| {
                choices
                    .iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
        if let Some(choice) = choice {
            if let Some(delta) = choice.get("delta") {
                let text = |key: &str| {
                    delta
                        .get(key)
                        .and_then(Value::as_str)
                        .filter(|text| !text.is_empty())
                };
                if let Some(reasoning) = text("reasoning_content").or_else(|| text("reasoning")) {
                    out.push_back(StreamEvent::ThinkingDelta(reasoning.to_owned()));
                }
                if let Some(content) = text("content") {
                    out.push_back(StreamEvent::TextDelta(content.to_owned()));
                }
                if let Some(refusal) = text("refusal") {
                    self.refused = true;
                    out.push_back(StreamEvent::TextDelta(refusal.to_owned()));
                }
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for (position, call) in calls.iter().enumerate() {
                        self.tool_call_delta(position, call, out);
                    }
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(match reason {
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    _ => FinishReason::Stop,
                });
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            out.push_back(StreamEvent::Usage(parse_usage(usage)));
        }
        Ok(false)
    }

    fn end_of_body(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), ModelError> {
        // A server that closes after the finish reason without `[DONE]` sent a whole answer.
        if self.finish.is_some() {
            self.finish(out);
            Ok(())
        } else {
            Err(stream_cut(&self.provider))
        }
    }
}

fn parse_usage(usage: &Value) -> Usage {
    let count = |path: &[&str]| {
        path.iter()
            .try_fold(usage, |value, key| value.get(key))
            .and_then(|value| {
                value
                    .as_u64()
                    .or_else(|| value.as_f64().filter(|n| *n >= 0.0).map(|n| n as u64))
            })
            .unwrap_or(0)
    };
    let cached = count(&["prompt_tokens_details", "cached_tokens"]);
    Usage {
        input_tokens: count(&["prompt_tokens"]),
        output_tokens: count(&["completion_tokens"]),
        cache_read_tokens: if cached > 0 {
            cached
        } else {
            // DeepSeek reports cache hits on their own.
            count(&["prompt_cache_hit_tokens"])
        },
        cache_write_tokens: 0,
        reasoning_tokens: count(&["completion_tokens_details", "reasoning_tokens"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(frames: &[&str]) -> (Vec<StreamEvent>, Result<bool, ModelError>) {
        let mut decoder = ChunkDecoder {
            provider: Arc::from("openai"),
            calls: Vec::new(),
            finish: None,
            refused: false,
        };
        let mut out = VecDeque::new();
        let mut last = Ok(false);
        for frame in frames {
            last = decoder.event(
                SseEvent {
                    event: "message".into(),
                    data: (*frame).to_owned(),
                    ..SseEvent::default()
                },
                &mut out,
            );
            if !matches!(last, Ok(false)) {
                break;
            }
        }
        if matches!(last, Ok(false)) {
            last = decoder.end_of_body(&mut out).map(|()| true);
        }
        (out.into_iter().collect(), last)
    }

    #[test]
    fn calls_that_reuse_an_index_with_new_ids_stay_apart_and_repeated_names_do_not_double() {
        let (events, end) = decode(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"read","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"ls","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":"stop"}]}"#,
        ]);
        assert!(end.is_ok());
        let starts: Vec<_> = events
            .iter()
            .filter_map(|event| match event {
                StreamEvent::ToolCallStart { index, id, name } => {
                    Some((*index, id.as_str(), name.as_str()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(starts, [(0, "a", "read"), (1, "b", "ls")]);
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Finish(FinishReason::ToolCalls))
        );
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        for frame in [
            "{",
            "[1,2]",
            "null",
            "\"text\"",
            r#"{"choices":null}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[null, 5]}}]}"#,
        ] {
            let _ = decode(&[frame]);
        }
        let (_, end) = decode(&["{not json"]);
        assert!(matches!(end, Err(ModelError::InvalidResponse { .. })));
        let (_, end) = decode(&[r#"{"choices":[]}"#]);
        assert!(matches!(end, Err(ModelError::Connection { .. })));
    }
}
