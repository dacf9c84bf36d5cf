//! Folding a stream of events into a full response.

use serde_json::Value;

use crate::{FinishReason, ModelResponse, StreamEvent, Thinking, ToolCall, Usage};

/// Accumulates [`StreamEvent`]s into a [`ModelResponse`].
///
/// Tool-call arguments arrive as text in pieces; when the call is complete they are parsed as
/// JSON. Text that does not parse is kept as a JSON string in `arguments`, for healing.
///
/// ```
/// use harness_model::{ResponseAssembler, StreamEvent, FinishReason};
///
/// let mut assembler = ResponseAssembler::default();
/// for event in [
///     StreamEvent::TextDelta("Reading ".into()),
///     StreamEvent::ToolCallStart { index: 0, id: "call_1".into(), name: "read_file".into() },
///     StreamEvent::ToolCallDelta { index: 0, arguments: "{\"path\":".into() },
///     StreamEvent::ToolCallDelta { index: 0, arguments: "\"a.rs\"}".into() },
///     StreamEvent::Finish(FinishReason::ToolCalls),
/// ] {
///     assembler.push(event);
/// }
/// let response = assembler.finish();
/// assert_eq!(response.tool_calls[0].arguments["path"], "a.rs");
/// ```
#[derive(Debug, Default)]
pub struct ResponseAssembler {
    text: String,
    thinking: String,
    signature: Option<String>,
    calls: Vec<PartialCall>,
    usage: Usage,
    finish: Option<FinishReason>,
}

#[derive(Debug)]
struct PartialCall {
    index: usize,
    id: String,
    name: String,
    arguments: String,
}

impl ResponseAssembler {
    /// Adds one event.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::TextDelta(text) => self.text.push_str(&text),
            StreamEvent::ThinkingDelta(text) => self.thinking.push_str(&text),
            StreamEvent::ThinkingSignature(signature) => {
                self.signature
                    .get_or_insert_with(String::new)
                    .push_str(&signature);
            }
            StreamEvent::ToolCallStart { index, id, name } => match self.call_mut(index) {
                Some(call) => {
                    if !id.is_empty() {
                        call.id = id;
                    }
                    call.name.push_str(&name);
                }
                None => self.calls.push(PartialCall {
                    index,
                    id,
                    name,
                    arguments: String::new(),
                }),
            },
            StreamEvent::ToolCallDelta { index, arguments } => match self.call_mut(index) {
                Some(call) => call.arguments.push_str(&arguments),
                // Some servers send argument deltas without a start: open the call here.
                None => self.calls.push(PartialCall {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments,
                }),
            },
            StreamEvent::ToolCallEnd { .. } => {}
            StreamEvent::Usage(usage) => merge_usage(&mut self.usage, &usage),
            StreamEvent::Finish(reason) => self.finish = Some(reason),
        }
    }

    fn call_mut(&mut self, index: usize) -> Option<&mut PartialCall> {
        self.calls.iter_mut().find(|call| call.index == index)
    }

    /// The text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True if nothing at all was received.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
            && self.thinking.is_empty()
            && self.calls.is_empty()
            && self.finish.is_none()
    }

    /// The assembled response. A missing finish reason is inferred: tool calls if there are
    /// any, otherwise stop.
    pub fn finish(self) -> ModelResponse {
        let mut calls = self.calls;
        calls.sort_by_key(|call| call.index);
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .enumerate()
            .map(|(position, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{position}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: parse_arguments(call.arguments),
            })
            .collect();
        let finish_reason = self.finish.unwrap_or(if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        let has_thinking = !self.thinking.is_empty() || self.signature.is_some();
        let thinking = has_thinking.then_some(Thinking {
            text: self.thinking,
            signature: self.signature,
        });
        ModelResponse {
            content: self.text,
            thinking,
            tool_calls,
            finish_reason,
            usage: self.usage,
        }
    }
}

/// Empty arguments mean "no arguments"; text that is not JSON stays a string for healing.
fn parse_arguments(text: String) -> Value {
    if text.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// Providers report usage in several events; a later non-zero count wins.
fn merge_usage(total: &mut Usage, update: &Usage) {
    let fields = [
        (&mut total.input_tokens, update.input_tokens),
        (&mut total.output_tokens, update.output_tokens),
        (&mut total.cache_read_tokens, update.cache_read_tokens),
        (&mut total.cache_write_tokens, update.cache_write_tokens),
        (&mut total.reasoning_tokens, update.reasoning_tokens),
    ];
    for (field, value) in fields {
        if value != 0 {
            *field = value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_ordered_by_index_and_bad_json_is_kept_as_text() {
        let mut assembler = ResponseAssembler::default();
        assembler.push(StreamEvent::ToolCallStart {
            index: 1,
            id: "b".into(),
            name: "second".into(),
        });
        assembler.push(StreamEvent::ToolCallStart {
            index: 0,
            id: "a".into(),
            name: "first".into(),
        });
        assembler.push(StreamEvent::ToolCallDelta {
            index: 1,
            arguments: "{\"x\": 1,".into(),
        });
        assembler.push(StreamEvent::Usage(Usage {
            input_tokens: 10,
            ..Usage::default()
        }));
        assembler.push(StreamEvent::Usage(Usage {
            output_tokens: 4,
            ..Usage::default()
        }));
        let response = assembler.finish();
        let names: Vec<&str> = response
            .tool_calls
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["first", "second"]);
        assert_eq!(response.tool_calls[0].arguments, serde_json::json!({}));
        assert_eq!(
            response.tool_calls[1].arguments,
            Value::String("{\"x\": 1,".into())
        );
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            (response.usage.input_tokens, response.usage.output_tokens),
            (10, 4)
        );
    }

    #[test]
    fn an_empty_stream_is_empty() {
        let assembler = ResponseAssembler::default();
        assert!(assembler.is_empty());
        let response = assembler.finish();
        assert_eq!(response.finish_reason, FinishReason::Stop);
        assert!(response.thinking.is_none());
    }
}
