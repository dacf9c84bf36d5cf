//! Think: the system prompt, the tool schemas and the model call, streamed.

use std::sync::Arc;

use futures_util::StreamExt;
use harness_tags::tags::{ModelRequestTag, ModelResponseTag, PromptSystem, ToolSchema};
use harness_tags::{FailureReason, ModelCtx, ModelRequest, ModelResponse, Phase};

use crate::kernel::state::{Transition, apply};
use crate::kernel::{KernelError, KernelEvent};
use crate::model::{ModelError, ResponseAssembler, StreamEvent};

use super::{Decision, End, Run};

impl Run<'_> {
    pub(super) fn system_prompt(&self) -> String {
        match &self.strategies[self.strategy].instructions {
            Some(extra) if self.config.instructions.is_empty() => extra.clone(),
            Some(extra) => format!("{}\n\n{extra}", self.config.instructions),
            None => self.config.instructions.clone(),
        }
    }

    /// Think: prompt, tools, the model call with retries. `Ok(None)` means the step failed
    /// but the run goes on (a new strategy or the user's answer to an escalation).
    pub(super) async fn think(&mut self) -> Result<Option<ModelResponse>, End> {
        let ctx = self.base(Phase::Think);
        let system = match self
            .kernel
            .pipeline
            .emit::<PromptSystem>(self.system_prompt(), &ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().unwrap_or_default(),
            Err(error) => return Err(End::failed(KernelError::Handler(error))),
        };
        let tools = match self
            .kernel
            .pipeline
            .emit::<ToolSchema>(self.tools.specs().to_vec(), &ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().unwrap_or_default(),
            Err(error) => return Err(End::failed(KernelError::Handler(error))),
        };
        drop(ctx);
        let request = ModelRequest {
            model: self.model_id.to_string(),
            system,
            messages: Arc::clone(&self.state.messages),
            tools,
            temperature: self.config.temperature,
            max_tokens: self.config.max_output_tokens,
        };

        let reshapes_requests = self.kernel.pipeline.has_handlers::<ModelRequestTag>();
        let mut attempt = 0;
        loop {
            attempt += 1;
            if self.abort.is_cancelled() {
                return Err(End::aborted());
            }
            let ctx = ModelCtx {
                base: self.base(Phase::Think),
                provider: self.model.id().provider().to_owned(),
                model: self.model.id().name().to_owned(),
                attempt,
            };
            // Each attempt reshapes the original request, so handlers never apply twice.
            let reshaped;
            let sent = if reshapes_requests {
                reshaped = match self
                    .kernel
                    .pipeline
                    .emit::<ModelRequestTag>(request.clone(), &ctx)
                    .await
                {
                    Ok(outcome) => outcome.into_payload().unwrap_or_default(),
                    Err(error) => return Err(End::failed(KernelError::Handler(error))),
                };
                &reshaped
            } else {
                &request
            };
            match self.call_model(sent).await {
                Ok(response) => {
                    let response = match self
                        .kernel
                        .pipeline
                        .emit::<ModelResponseTag>(response, &ctx)
                        .await
                    {
                        Ok(outcome) => outcome.into_payload().unwrap_or_default(),
                        Err(error) => return Err(End::failed(KernelError::Handler(error))),
                    };
                    drop(ctx);
                    apply(&mut self.state, Transition::Usage(response.usage));
                    self.notify(|| KernelEvent::Usage {
                        usage: self.state.usage,
                    });
                    return Ok(Some(response));
                }
                Err(None) => return Err(End::aborted()),
                Err(Some(error)) => {
                    drop(ctx);
                    if let Some(wait) = self.config.retry.backoff(attempt, &error) {
                        self.notify(|| KernelEvent::ModelRetry {
                            attempt,
                            error: error.clone(),
                            wait,
                        });
                        tokio::select! {
                            biased;
                            () = self.abort.cancelled() => return Err(End::aborted()),
                            () = tokio::time::sleep(wait) => continue,
                        }
                    }
                    self.failure(FailureReason::ModelError, error.to_string())
                        .await;
                    return match self.after_failure().await {
                        Decision::Switched | Decision::Escalated => Ok(None),
                        Decision::Continue => Err(End::failed(KernelError::Model(error))),
                        Decision::End(end) => Err(end),
                    };
                }
            }
        }
    }

    /// One model call, streamed and assembled. `Err(None)` means the run was aborted.
    pub(super) async fn call_model(
        &self,
        request: &ModelRequest,
    ) -> Result<ModelResponse, Option<ModelError>> {
        let mut stream = tokio::select! {
            biased;
            () = self.abort.cancelled() => return Err(None),
            stream = self.model.stream(request) => stream.map_err(Some)?,
        };
        let mut assembler = ResponseAssembler::default();
        let mut call_ids: Vec<(usize, String)> = Vec::new();
        loop {
            let next = tokio::select! {
                biased;
                () = self.abort.cancelled() => return Err(None),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Ok(event)) => {
                    if self.observer.is_some() {
                        self.forward(&event, &mut call_ids);
                    }
                    assembler.push(event);
                }
                Some(Err(error)) => return Err(Some(error)),
            }
        }
        Ok(assembler.finish())
    }

    /// Streams deltas to the observer as they arrive.
    pub(super) fn forward(&self, event: &StreamEvent, call_ids: &mut Vec<(usize, String)>) {
        let call_id = |index: usize, ids: &[(usize, String)]| {
            ids.iter()
                .find(|(i, _)| *i == index)
                .map(|(_, id)| id.clone())
                .unwrap_or_default()
        };
        match event {
            StreamEvent::TextDelta(text) => {
                self.notify(|| KernelEvent::TextDelta { text: text.clone() })
            }
            StreamEvent::ThinkingDelta(text) => {
                self.notify(|| KernelEvent::ThinkingDelta { text: text.clone() })
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                call_ids.push((*index, id.clone()));
                self.notify(|| KernelEvent::ToolInputStarted {
                    call_id: id.clone(),
                    tool_name: name.clone(),
                });
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let id = call_id(*index, call_ids);
                self.notify(|| KernelEvent::ToolInputDelta {
                    call_id: id,
                    delta: arguments.clone(),
                });
            }
            StreamEvent::ToolCallEnd { index } => {
                let id = call_id(*index, call_ids);
                self.notify(|| KernelEvent::ToolInputEnded { call_id: id });
            }
            StreamEvent::ThinkingSignature(_) | StreamEvent::Usage(_) | StreamEvent::Finish(_) => {}
        }
    }
}
