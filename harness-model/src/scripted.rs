//! A scripted model: a queue of responses, for tests and offline use.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::Value;

use crate::{
    FinishReason, Model, ModelError, ModelId, ModelRequest, ModelResponse, ModelStream,
    StreamEvent, ToolCall, Usage,
};

/// One scripted turn.
#[derive(Clone)]
pub enum Scripted {
    /// Stream this response.
    Response(ModelResponse),
    /// Fail the call before any event.
    Error(ModelError),
    /// Stream exactly these events; an `Err` item ends the stream with that error, as a
    /// connection dropped mid-stream would.
    Events(Vec<Result<StreamEvent, ModelError>>),
    /// Decide from the request.
    Respond(Arc<dyn Fn(&ModelRequest) -> Scripted + Send + Sync>),
}

impl fmt::Debug for Scripted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scripted::Response(response) => f.debug_tuple("Response").field(response).finish(),
            Scripted::Error(error) => f.debug_tuple("Error").field(error).finish(),
            Scripted::Events(events) => f.debug_tuple("Events").field(&events.len()).finish(),
            Scripted::Respond(_) => f.write_str("Respond(..)"),
        }
    }
}

impl Scripted {
    /// A final answer.
    pub fn text(text: impl Into<String>) -> Self {
        Scripted::Response(ModelResponse {
            content: text.into(),
            finish_reason: FinishReason::Stop,
            usage: default_usage(),
            ..ModelResponse::default()
        })
    }

    /// One tool call with JSON arguments.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Scripted::tool_calls([(name, arguments)])
    }

    /// Several tool calls in one response (the kernel runs them in parallel). Ids are
    /// `call_<n>`, numbered across the whole script when the model is built.
    pub fn tool_calls<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        Scripted::Response(ModelResponse {
            tool_calls: calls
                .into_iter()
                .map(|(name, arguments)| ToolCall {
                    id: String::new(),
                    name: name.into(),
                    arguments,
                })
                .collect(),
            finish_reason: FinishReason::ToolCalls,
            usage: default_usage(),
            ..ModelResponse::default()
        })
    }

    /// A tool call whose arguments text is not valid JSON, as weak models produce.
    pub fn malformed_tool_call(name: impl Into<String>, arguments_text: impl Into<String>) -> Self {
        Scripted::tool_call(name, Value::String(arguments_text.into()))
    }
}

fn default_usage() -> Usage {
    Usage {
        input_tokens: 10,
        output_tokens: 5,
        ..Usage::default()
    }
}

/// A model that plays a script: each call takes the next [`Scripted`] turn and records the
/// request it received.
///
/// ```
/// use harness_model::{Model, ModelRequest, ResponseAssembler, Scripted, ScriptedModel};
/// use futures_util::StreamExt;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let model = ScriptedModel::new("scripted/demo")
///     .then(Scripted::tool_call("read_file", serde_json::json!({"path": "README.md"})))
///     .then(Scripted::text("It is a README."));
/// let mut stream = model.stream(&ModelRequest::default()).await.unwrap();
/// let mut assembler = ResponseAssembler::default();
/// while let Some(event) = stream.next().await {
///     assembler.push(event.unwrap());
/// }
/// assert_eq!(assembler.finish().tool_calls[0].name, "read_file");
/// assert_eq!(model.requests().len(), 1);
/// # });
/// ```
pub struct ScriptedModel {
    id: ModelId,
    state: Mutex<ScriptState>,
}

struct ScriptState {
    queue: VecDeque<Scripted>,
    /// When set, the script restarts from here once the queue is empty.
    cycle: Option<Vec<Scripted>>,
    requests: Vec<ModelRequest>,
    record: bool,
    next_call_id: usize,
}

impl ScriptedModel {
    /// An empty script. Panics never: a call with nothing left fails with
    /// [`ModelError::Script`]. An id that is not `provider/name` gets the `scripted/` prefix.
    pub fn new(id: &str) -> Self {
        let id = ModelId::new(id)
            .or_else(|_| ModelId::new(&format!("scripted/{id}")))
            .unwrap_or_else(|_| ModelId {
                id: Arc::from("scripted/model"),
                split: "scripted".len(),
            });
        ScriptedModel {
            id,
            state: Mutex::new(ScriptState {
                queue: VecDeque::new(),
                cycle: None,
                requests: Vec::new(),
                record: true,
                next_call_id: 0,
            }),
        }
    }

    /// Appends a turn.
    pub fn then(self, turn: Scripted) -> Self {
        {
            let mut state = self.lock();
            let turn = state.number_calls(turn);
            state.queue.push_back(turn);
        }
        self
    }

    /// Replays the whole script again each time it runs out (for benchmarks and demos).
    pub fn cycling(self) -> Self {
        {
            let mut state = self.lock();
            state.cycle = Some(state.queue.iter().cloned().collect());
        }
        self
    }

    /// Stops recording requests (recording clones every request).
    pub fn without_recording(self) -> Self {
        self.lock().record = false;
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    /// Turns left before the script runs out (or restarts).
    pub fn remaining(&self) -> usize {
        self.lock().queue.len()
    }

    fn lock(&self) -> MutexGuard<'_, ScriptState> {
        // The state holds no invariant a panicking holder could break halfway.
        harness_tags::util::lock(&self.state)
    }
}

impl ScriptState {
    fn number_calls(&mut self, turn: Scripted) -> Scripted {
        match turn {
            Scripted::Response(mut response) => {
                for call in &mut response.tool_calls {
                    if call.id.is_empty() {
                        call.id = format!("call_{}", self.next_call_id);
                        self.next_call_id += 1;
                    }
                }
                Scripted::Response(response)
            }
            other => other,
        }
    }

    fn next_turn(&mut self) -> Option<Scripted> {
        if self.queue.is_empty()
            && let Some(cycle) = &self.cycle
        {
            self.queue.extend(cycle.iter().cloned());
        }
        self.queue.pop_front()
    }
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("id", &self.id)
            .field("remaining", &self.remaining())
            .finish()
    }
}

#[async_trait]
impl Model for ScriptedModel {
    fn id(&self) -> &ModelId {
        &self.id
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let turn = {
            let mut state = self.lock();
            if state.record {
                state.requests.push(request.clone());
            }
            state.next_turn()
        };
        let mut turn = turn.ok_or_else(|| {
            ModelError::Script("the script has no response left for this call".to_owned())
        })?;
        while let Scripted::Respond(respond) = turn {
            turn = respond(request);
        }
        match turn {
            Scripted::Response(response) => Ok(futures_util::stream::iter(
                response_events(response).into_iter().map(Ok),
            )
            .boxed()),
            Scripted::Error(error) => Err(error),
            Scripted::Events(events) => Ok(futures_util::stream::iter(events).boxed()),
            Scripted::Respond(_) => Err(ModelError::Script("unreachable responder".to_owned())),
        }
    }
}

/// The events a provider would stream for a full response.
fn response_events(response: ModelResponse) -> Vec<StreamEvent> {
    let mut events = Vec::with_capacity(4 + 3 * response.tool_calls.len());
    if let Some(thinking) = response.thinking {
        if !thinking.text.is_empty() {
            events.push(StreamEvent::ThinkingDelta(thinking.text));
        }
        if let Some(signature) = thinking.signature {
            events.push(StreamEvent::ThinkingSignature(signature));
        }
    }
    if !response.content.is_empty() {
        events.push(StreamEvent::TextDelta(response.content));
    }
    for (index, call) in response.tool_calls.into_iter().enumerate() {
        events.push(StreamEvent::ToolCallStart {
            index,
            id: call.id,
            name: call.name,
        });
        let arguments = match call.arguments {
            Value::String(raw) => raw,
            other => other.to_string(),
        };
        events.push(StreamEvent::ToolCallDelta { index, arguments });
        events.push(StreamEvent::ToolCallEnd { index });
    }
    events.push(StreamEvent::Usage(response.usage));
    events.push(StreamEvent::Finish(response.finish_reason));
    events
}
