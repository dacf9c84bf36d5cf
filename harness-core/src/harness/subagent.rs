//! The `subagent` tool: spawns a focused agent, either fresh (its own instructions, tools and
//! model; no parent history) or forked (a clone of the parent thread, run with the parent's
//! setup so the prompt cache stays warm).

use std::sync::{Arc, Weak};
use std::time::Instant;

use async_trait::async_trait;
use harness_tags::tags::{MessageSubagentHandoff, SubagentResultTag};
use harness_tags::{BaseCtx, EmitOutcome, KernelMessage, RunOutcome, SubagentCtx, SubagentResult};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::HarnessInner;
use super::channel::SessionChannel;
use crate::event::HarnessEvent;
use crate::kernel::{FinishedCall, KernelEvent, RunInput, SessionSource};
use crate::model::ModelId;
use crate::protocol::ErrorCode;
use crate::store::{StoredMessage, WriteOp, metadata};
use crate::tool::{IntoTool, Tool, ToolContext, ToolError, ToolOutput};
use harness_tags::util::unix_ms;

/// A kind of subagent the `subagent` tool can spawn.
#[derive(Clone)]
pub struct SubagentDef {
    /// The type the model asks for, e.g. `explore`.
    pub id: String,
    /// A display name.
    pub name: String,
    /// What it is for; goes into the `subagent` tool's description.
    pub description: String,
    /// Its system prompt (non-forked runs).
    pub instructions: String,
    /// Its own tools (non-forked runs).
    pub tools: Vec<Arc<dyn Tool>>,
    /// Tools of the shared agent it may also use, by name.
    pub allowed_harness_tools: Vec<String>,
    /// Its default model; the parent's model otherwise.
    pub default_model: Option<ModelId>,
    /// Its step limit (default 50).
    pub max_steps: Option<u32>,
    /// True to run on a fork of the parent thread by default.
    pub forked: bool,
}

impl std::fmt::Debug for SubagentDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentDef")
            .field("id", &self.id)
            .field("forked", &self.forked)
            .finish_non_exhaustive()
    }
}

impl SubagentDef {
    /// A subagent type with its id, name, description and instructions.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
        instructions: impl Into<String>,
    ) -> Self {
        SubagentDef {
            id: id.into(),
            name: name.into(),
            description: description.into(),
            instructions: instructions.into(),
            tools: Vec::new(),
            allowed_harness_tools: Vec::new(),
            default_model: None,
            max_steps: None,
            forked: false,
        }
    }

    /// Adds a tool of its own.
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Lets it use some of the shared agent's tools.
    pub fn allowed_harness_tools<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Self {
        self.allowed_harness_tools = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets its default model.
    pub fn default_model(mut self, model: ModelId) -> Self {
        self.default_model = Some(model);
        self
    }

    /// Sets its step limit.
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.max_steps = Some(max_steps);
        self
    }

    /// Runs it on a fork of the parent thread by default.
    pub fn forked(mut self, forked: bool) -> Self {
        self.forked = forked;
        self
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubagentArgs {
    agent_type: String,
    task: String,
    #[serde(default)]
    model_id: Option<String>,
    #[serde(default)]
    forked: Option<bool>,
}

pub(crate) struct SubagentTool {
    harness: Weak<HarnessInner>,
    description: String,
    schema: Value,
}

pub(crate) fn subagent_tool(
    harness: Weak<HarnessInner>,
    subagents: &[SubagentDef],
) -> SubagentTool {
    let kinds: Vec<String> = subagents
        .iter()
        .map(|s| format!("- `{}` ({}): {}", s.id, s.name, s.description))
        .collect();
    let description = format!(
        "Spawn a focused subagent for a self-contained task and get its final answer back. \
         Describe the task completely: a fresh subagent does not see this conversation. Set \
         `forked: true` to run on a copy of this conversation instead.\nTypes:\n{}",
        kinds.join("\n")
    );
    let schema = json!({
        "type": "object",
        "properties": {
            "agentType": {
                "type": "string",
                "enum": subagents.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
                "description": "Which kind of subagent to spawn."
            },
            "task": {"type": "string", "description": "The complete task for the subagent."},
            "modelId": {"type": "string", "description": "A model (`provider/name`) to use instead of the default."},
            "forked": {"type": "boolean", "description": "Run on a copy of this conversation."}
        },
        "required": ["agentType", "task"]
    });
    SubagentTool {
        harness,
        description,
        schema,
    }
}

#[async_trait]
impl Tool for SubagentTool {
    fn name(&self) -> &str {
        "subagent"
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: SubagentArgs = serde_json::from_value(input)?;
        let Some(harness) = self.harness.upgrade() else {
            return Err(ToolError::new("the harness is shutting down"));
        };
        harness.run_subagent(args, ctx).await
    }
}

impl HarnessInner {
    async fn run_subagent(
        self: Arc<Self>,
        args: SubagentArgs,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(def) = self
            .subagents
            .iter()
            .find(|s| s.id == args.agent_type)
            .cloned()
        else {
            let known: Vec<&str> = self.subagents.iter().map(|s| s.id.as_str()).collect();
            return Err(ToolError::new(format!(
                "there is no subagent type `{}`; the types are: {}",
                args.agent_type,
                known.join(", ")
            )));
        };
        let forked = args.forked.unwrap_or(def.forked);
        let parent_model = self.session.model_id();
        let model_id = if forked {
            parent_model
        } else {
            match args.model_id.as_deref().map(ModelId::new).transpose() {
                Ok(chosen) => chosen
                    .or_else(|| def.default_model.clone())
                    .or(parent_model),
                Err(error) => return Err(ToolError::new(error.to_string())),
            }
        };
        let Some(model_id) = model_id else {
            return Err(ToolError::new("no model is selected for the subagent"));
        };
        let model = self
            .resolve_model(&model_id)
            .map_err(|e| ToolError::new(e.to_string()))?;

        let subagent_ctx = SubagentCtx {
            base: BaseCtx {
                thread_id: self.session.thread_id().map(Arc::from),
                resource_id: Some(Arc::from(self.session.resource_id())),
                mode_id: Some(Arc::from(self.session.mode_id())),
                model_id: Arc::from(model_id.as_str()),
                ..BaseCtx::default()
            },
            agent_type: def.id.clone(),
            tool_call_id: ctx.call_id.clone(),
            forked,
        };
        let task = match self
            .pipeline
            .emit::<MessageSubagentHandoff>(args.task, &subagent_ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().unwrap_or_default(),
            Err(error) => return Err(ToolError::new(format!("the handoff was blocked: {error}"))),
        };
        self.emit(HarnessEvent::SubagentStart {
            tool_call_id: ctx.call_id.clone(),
            agent_type: def.id.clone(),
            task: task.clone(),
            model_id: model_id.to_string(),
            forked,
        });

        let started = Instant::now();
        let fork_thread = if forked {
            Some(self.fork_thread(&def, &ctx.call_id).await?)
        } else {
            None
        };
        let (events, queue) = mpsc::unbounded_channel();
        let recorder = SubagentRecorder {
            harness: Arc::clone(&self),
            tool_call_id: ctx.call_id.clone(),
            agent_type: def.id.clone(),
            fork_thread: fork_thread.clone(),
        };
        let recording = tokio::spawn(recorder.record(queue));
        // Queued, so that the run never waits for the store or a listener.
        let observer = Arc::new(move |event| {
            let _ = events.send(event);
        });
        // The parent's gates and grants apply, and approvals reach the same user.
        let mut input = RunInput::new(task.clone())
            .model(model)
            .abort(ctx.abort.clone())
            .observer(observer)
            .channel(Arc::new(SessionChannel::new(Arc::clone(&self))))
            .session(Arc::clone(&self) as Arc<dyn SessionSource>);
        // A subagent's records (pseudonyms, memory) belong with the parent thread.
        if let Some(parent) = self.session.thread_id() {
            input = input.parent_thread(parent);
        }
        let result = match &fork_thread {
            Some(fork) => {
                let mode = self.session.mode_id();
                let Some(kernels) = self.kernels.get(&mode) else {
                    return Err(ToolError::new(format!("mode `{mode}` has no kernel")));
                };
                let history: Vec<KernelMessage> = self
                    .store
                    .messages(fork)
                    .await
                    .map_err(|e| ToolError::new(e.to_string()))?
                    .into_iter()
                    .map(|m| m.message)
                    .collect();
                let input = input
                    .history(history)
                    .thread(fork.as_str(), self.session.resource_id())
                    .mode(mode.as_str());
                kernels.fork.run(input).await
            }
            None => {
                let Some(kernel) = self.subagent_kernels.get(&def.id) else {
                    return Err(ToolError::new(format!(
                        "subagent `{}` has no kernel",
                        def.id
                    )));
                };
                kernel.run(input).await
            }
        };
        let _ = recording.await;

        let partial = result.state.messages.iter().rev().find_map(|m| match m {
            KernelMessage::Assistant { content, .. } if !content.is_empty() => {
                Some(content.clone())
            }
            _ => None,
        });
        let (text, is_error) = match result.outcome {
            RunOutcome::Complete | RunOutcome::MaxSteps => {
                (result.final_text.or(partial).unwrap_or_default(), false)
            }
            RunOutcome::Aborted => (
                match partial {
                    Some(partial) => format!("[Aborted by user]\n\n{partial}"),
                    None => "[Aborted by user]".to_owned(),
                },
                true,
            ),
            RunOutcome::Error | RunOutcome::Suspended => (
                format!(
                    "Subagent {} failed: {}",
                    def.name,
                    result
                        .error
                        .map(|e| e.to_string())
                        .unwrap_or_else(|| "unknown error".into())
                ),
                true,
            ),
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let reported = SubagentResult {
            agent_type: def.id.clone(),
            task,
            result: text,
            is_error,
            duration_ms,
        };
        let reported = match self
            .pipeline
            .emit::<SubagentResultTag>(reported.clone(), &subagent_ctx)
            .await
        {
            Ok(EmitOutcome::Continue(reshaped)) => reshaped,
            _ => reported,
        };
        self.emit(HarnessEvent::SubagentEnd {
            tool_call_id: ctx.call_id,
            agent_type: def.id,
            result: reported.result.clone(),
            is_error: reported.is_error,
            duration_ms,
        });
        if reported.is_error {
            Err(ToolError::new(reported.result))
        } else {
            Ok(ToolOutput::from(reported.result))
        }
    }

    /// Clones the parent thread for a fork, without the in-flight call, tagged and hidden.
    async fn fork_thread(&self, def: &SubagentDef, call_id: &str) -> Result<String, ToolError> {
        let Some(parent) = self.session.thread_id() else {
            return Err(ToolError::new(
                "a forked subagent needs a thread to fork; run it without `forked` instead",
            ));
        };
        // The parent's latest messages may still be on their way to the store.
        self.flush_recorder().await;
        let mut extra = Map::new();
        extra.insert(metadata::FORKED_SUBAGENT.into(), Value::Bool(true));
        extra.insert(
            metadata::PARENT_THREAD.into(),
            Value::String(parent.clone()),
        );
        let call_id = call_id.to_owned();
        let in_flight = move |message: &StoredMessage| match &message.message {
            KernelMessage::Assistant { tool_calls, .. } => {
                tool_calls.iter().any(|c| c.id == call_id)
            }
            _ => false,
        };
        let title = Some(format!("{} (forked subagent)", def.name));
        let (fork, _) = self
            .copy_thread(&parent, title, None, extra, Some(&in_flight))
            .await
            .map_err(|e| ToolError::new(format!("could not fork the thread: {e}")))?;
        Ok(fork.id)
    }
}

/// Publishes a subagent's events, and stores a fork's messages on the fork thread.
struct SubagentRecorder {
    harness: Arc<HarnessInner>,
    tool_call_id: String,
    agent_type: String,
    fork_thread: Option<String>,
}

impl SubagentRecorder {
    async fn record(self, mut queue: mpsc::UnboundedReceiver<KernelEvent>) {
        while let Some(event) = queue.recv().await {
            match event {
                KernelEvent::MessageAdded { message } => {
                    let Some(thread_id) = &self.fork_thread else {
                        continue;
                    };
                    let stored = StoredMessage {
                        id: self.harness.new_id(),
                        thread_id: thread_id.clone(),
                        created_at: unix_ms(),
                        run_id: None,
                        message,
                    };
                    let write = WriteOp::AppendMessages {
                        thread_id: thread_id.clone(),
                        messages: vec![stored],
                    };
                    if let Err(error) = self.harness.store.write(vec![write]).await {
                        self.harness.emit(HarnessEvent::Error {
                            error: format!("storing the forked subagent's thread failed: {error}"),
                            error_type: Some(ErrorCode::Storage.into()),
                            retryable: Some(true),
                            retry_delay_ms: None,
                        });
                    }
                }
                KernelEvent::TextDelta { text, .. } => {
                    self.harness.emit(HarnessEvent::SubagentTextDelta {
                        tool_call_id: self.tool_call_id.clone(),
                        agent_type: self.agent_type.clone(),
                        text_delta: text,
                    })
                }
                KernelEvent::ToolStarted { call } => {
                    self.harness.emit(HarnessEvent::SubagentToolStart {
                        tool_call_id: self.tool_call_id.clone(),
                        agent_type: self.agent_type.clone(),
                        sub_tool_name: call.name,
                        sub_tool_args: call.arguments,
                    })
                }
                KernelEvent::ToolFinished(FinishedCall {
                    tool_name,
                    content,
                    is_error,
                    ..
                }) => self.harness.emit(HarnessEvent::SubagentToolEnd {
                    tool_call_id: self.tool_call_id.clone(),
                    agent_type: self.agent_type.clone(),
                    sub_tool_name: tool_name,
                    sub_tool_result: content,
                    is_error,
                }),
                _ => {}
            }
        }
    }
}
