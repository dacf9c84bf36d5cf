//! Think: the system prompt, the tool schemas and the model call, streamed.

use std::sync::Arc;

use futures_util::StreamExt;
use harness_tags::tags::{ModelRequestTag, ModelResponseTag, PromptSystem, ToolSchema};
use harness_tags::{FailureReason, ModelCtx, ModelRequest, ModelResponse, Phase};

use crate::kernel::state::{Transition, apply};
use crate::kernel::{KernelError, KernelEvent};
use crate::model::{ModelError, ResponseAssembler};

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
            .emit::<ToolSchema>(Arc::clone(self.tools.specs()), &ctx)
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
            match self.call_model(sent, attempt).await {
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

    /// One model call, streamed (to the observer, through `message.text-delta`) and
    /// assembled. `Err(None)` means the run was aborted.
    pub(super) async fn call_model(
        &self,
        request: &ModelRequest,
        attempt: u32,
    ) -> Result<ModelResponse, Option<ModelError>> {
        let mut stream = tokio::select! {
            biased;
            () = self.abort.cancelled() => return Err(None),
            stream = self.model.stream(request) => stream.map_err(Some)?,
        };
        let mut assembler = ResponseAssembler::default();
        // Only an observer sees the stream.
        let mut live = self.observer.is_some().then(|| self.live(attempt));
        loop {
            let next = tokio::select! {
                biased;
                () = self.abort.cancelled() => return Err(None),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Ok(event)) => {
                    if let Some(live) = &mut live {
                        self.forward(live, &event).await;
                    }
                    assembler.push(event);
                }
                Some(Err(error)) => return Err(Some(error)),
            }
        }
        if let Some(live) = &mut live {
            self.finish_live(live).await;
        }
        Ok(assembler.finish())
    }
}
