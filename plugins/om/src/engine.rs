//! The engine: per-thread memory state, and what happens on each model call.
//!
//! On every `model.request` of a harness thread:
//! 1. the conversation's tokens are tracked (estimated now, counted exactly in the
//!    background);
//! 2. a chunk buffered in the background since the last call is taken in;
//! 3. if a trigger fires (pending tokens at the threshold, an idle thread past its provider's
//!    cache lifetime, a provider change), buffered chunks are activated; if buffering fell
//!    behind (there is no chunk, or what the chunks leave raw is still at the threshold),
//!    whatever they do not cover is observed now, leaving the most recent messages raw;
//!    then, if enough new tokens piled up since the last chunk, a new chunk is buffered in
//!    the background;
//! 4. observations past the reflection threshold are reflected;
//! 5. the request is rebuilt: memory appended to the system prompt (through `memory.context`),
//!    then only the messages not covered.
//!
//! Exactly once: the memory covers messages `0..observed_count` of the thread; buffered chunks
//! cover the positions right after, in order, each taken in only if it starts where the last
//! one ended; activation moves whole chunks; the request keeps exactly the messages from
//! `observed_count` on. A record is stored whole after each change, so a crash leaves the
//! previous consistent record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use harness_core::event::{HarnessEvent, OmProgress, OmStatus, OmTrigger};
use harness_core::harness::{Harness, HarnessServices};
use harness_core::model::collect_response;
use harness_core::store::{StoredMessage, WriteOp};
use harness_tags::tags::{
    MemoryContextTag, ModelRequestTag, ObservationCompressionSummary, ObservationReflection,
};
use harness_tags::util::lock;
use harness_tags::{
    BaseCtx, EmitOutcome, FailureReason, KernelMessage, MemoryContext, MemoryCtx, ModelCtx,
    ModelRequest, ObservationStep, RunFailure,
};
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use crate::config::{Effective, OmConfig, OmSettings};
use crate::prompts;
use crate::record::{BufferedChunk, NAMESPACE, Observed, OmRecord};
use crate::tokens::{TokenCache, TokenCounter};

/// The user turn that opens the raw messages when the turn that opened them was observed.
pub const CONTINUE_FROM_MEMORY: &str =
    "(The earlier conversation is in your memory above. Continue from where it leaves off.)";

/// The current time in Unix milliseconds.
pub type Clock = harness_tags::util::WallClock;

pub(crate) fn system_clock() -> Clock {
    Arc::new(harness_tags::util::unix_ms)
}

pub(crate) struct Engine {
    pub(crate) config: OmConfig,
    pub(crate) services: OnceLock<HarnessServices>,
    pub(crate) clock: Clock,
    threads: Mutex<HashMap<String, Arc<ThreadMemory>>>,
}

/// The `strategy` of the observer's and reflector's own `model.request` emits, so that this
/// plugin's handler passes them through (other handlers see them like any model call).
pub const OWN_REQUEST_STRATEGY: &str = "observational-memory";

/// One thread's memory: its state (loaded on first use), token counts and background work.
pub(crate) struct ThreadMemory {
    id: String,
    state: tokio::sync::Mutex<Option<ThreadState>>,
    tokens: Arc<TokenCache>,
    buffering: Mutex<Buffering>,
    buffering_done: Notify,
}

pub(crate) struct ThreadState {
    pub(crate) record: OmRecord,
    pub(crate) settings: OmSettings,
    last_activity_ms: Option<i64>,
    /// Observation tokens when reflection last failed to shrink them; no retry until they grow.
    failed_reflection_at: Option<u64>,
}

/// The background buffering slot.
#[derive(Default)]
enum Buffering {
    #[default]
    Idle,
    Running,
    /// A chunk starting at message `start`, waiting to be taken in.
    Ready {
        start: u64,
        chunk: BufferedChunk,
    },
}

/// What one observer or reflector pass is about, for events and failures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Observe,
    Buffer,
    Reflect,
}

fn om_failure(message: impl std::fmt::Display) -> RunFailure {
    RunFailure::new(
        FailureReason::OmFailure,
        format!("observational memory: {message}"),
    )
}

impl Engine {
    pub(crate) fn new(config: OmConfig, clock: Clock) -> Self {
        Engine {
            config,
            services: OnceLock::new(),
            clock,
            threads: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn harness(&self) -> Option<Harness> {
        self.services.get()?.harness()
    }

    pub(crate) fn thread(&self, thread_id: &str) -> Arc<ThreadMemory> {
        let mut threads = lock(&self.threads);
        Arc::clone(threads.entry(thread_id.to_owned()).or_insert_with(|| {
            Arc::new(ThreadMemory {
                id: thread_id.to_owned(),
                state: tokio::sync::Mutex::new(None),
                tokens: Arc::default(),
                buffering: Mutex::new(Buffering::Idle),
                buffering_done: Notify::new(),
            })
        }))
    }

    /// Forgets a thread's in-memory state (it was deleted, or its record replaced).
    pub(crate) fn forget(&self, thread_id: &str) {
        lock(&self.threads).remove(thread_id);
    }

    /// Runs `with` on the thread's loaded state.
    pub(crate) async fn with_state<T>(
        &self,
        harness: &Harness,
        thread_id: &str,
        with: impl FnOnce(&mut ThreadState) -> T,
    ) -> Result<T, String> {
        let memory = self.thread(thread_id);
        let mut guard = memory.state.lock().await;
        let state = self.loaded(&mut guard, harness, thread_id).await?;
        Ok(with(state))
    }

    async fn loaded<'s>(
        &self,
        slot: &'s mut Option<ThreadState>,
        harness: &Harness,
        thread_id: &str,
    ) -> Result<&'s mut ThreadState, String> {
        if slot.is_none() {
            *slot = Some(load(harness, thread_id).await?);
        }
        slot.as_mut()
            .ok_or_else(|| "the memory state did not load".to_owned())
    }

    /// The thread's effective settings.
    pub(crate) fn effective(&self, settings: &OmSettings) -> Effective {
        Effective::new(&self.config, settings)
    }

    fn interval(&self, effective: &Effective) -> u64 {
        ((effective.threshold as f64 * self.config.buffer_interval) as u64).max(1)
    }

    /// The `model.request` step: see the module documentation.
    pub(crate) async fn prepare(
        self: &Arc<Self>,
        mut request: ModelRequest,
        ctx: &ModelCtx,
    ) -> Result<ModelRequest, RunFailure> {
        let Some(thread_id) = ctx.base.thread_id.as_deref() else {
            return Ok(request);
        };
        if *ctx.base.strategy == *OWN_REQUEST_STRATEGY {
            return Ok(request);
        }
        let Some(harness) = self.harness() else {
            return Ok(request);
        };
        let memory = self.thread(thread_id);
        let mut guard = memory.state.lock().await;
        let state = self
            .loaded(&mut guard, &harness, thread_id)
            .await
            .map_err(om_failure)?;

        let total = request.messages.len();
        memory.tokens.track(&request.messages);
        if state.record.observed_count as usize > total {
            // The memory covers more than this conversation holds: it is not the one observed
            // (a fork taken before the observed messages). Leave it untouched.
            tracing::warn!(
                thread = thread_id,
                "observational memory skipped: the conversation is shorter than what it covers"
            );
            return Ok(request);
        }
        let effective = self.effective(&state.settings);
        let mut changed = memory.take_buffered(state);
        let observed = state.record.observed_count as usize;
        let pending = memory.tokens.sum(observed..total);
        // Far from any decision the estimates do; from half a buffering interval on, the
        // pending messages are counted exactly in the background.
        if pending >= self.interval(&effective) / 2 {
            memory.tokens.refine(&request.messages, observed..total);
        }
        let now = (self.clock)();
        let provider = ctx.provider.as_str();

        if let Some(trigger) = self.trigger(state, pending, now, provider, &effective) {
            changed |= self
                .activate(&harness, &memory, state, &request, ctx, trigger, &effective)
                .await?;
        }
        // Also right after an activation: what it left raw may already be worth a chunk, and
        // the next activation should find it ready.
        self.maybe_buffer(&harness, &memory, state, &request, ctx, &effective);
        changed |= self.maybe_reflect(&harness, state, ctx, &effective).await?;
        if state.record.last_provider.as_deref() != Some(provider) {
            state.record.last_provider = Some(provider.to_owned());
            changed = true;
        }
        state.last_activity_ms = Some(now);
        if changed {
            save(&harness, thread_id, &state.record)
                .await
                .map_err(om_failure)?;
            let pending = memory
                .tokens
                .sum(state.record.observed_count as usize..total);
            harness.emit(HarnessEvent::OmStatus {
                progress: progress(state, &effective, pending),
            });
        }
        if !state.record.has_memory() {
            return Ok(request);
        }

        let observed = state.record.observed_count as usize;
        let context = MemoryContext {
            reflections: state.record.reflection.iter().cloned().collect(),
            observations: state.record.observations.clone(),
            messages: request.messages[observed..].to_vec(),
        };
        let memory_ctx = MemoryCtx {
            base: ctx.base.clone(),
            generation: state.record.generation,
            observation_tokens: state.record.observation_tokens,
            pending_tokens: memory.tokens.sum(observed..total),
        };
        let context = match harness
            .pipeline()
            .emit::<MemoryContextTag>(context, &memory_ctx)
            .await
        {
            Ok(outcome) => outcome.into_payload().unwrap_or_default(),
            Err(error) => return Err(om_failure(format!("`memory.context` failed: {error}"))),
        };
        request.system.push_str(&prompts::render_memory(
            &context.reflections,
            &context.observations,
            &state.record,
        ));
        let mut messages = context.messages;
        if !matches!(messages.first(), Some(KernelMessage::User { .. })) {
            // Providers want the conversation to open with the user (and a tool result right
            // after its call); the older turns are in the memory now.
            messages.insert(0, KernelMessage::user(CONTINUE_FROM_MEMORY));
        }
        request.messages = Arc::new(messages);
        Ok(request)
    }

    fn trigger(
        &self,
        state: &ThreadState,
        pending: u64,
        now: i64,
        provider: &str,
        effective: &Effective,
    ) -> Option<OmTrigger> {
        if pending >= effective.threshold {
            return Some(OmTrigger::Threshold);
        }
        // Below one buffering interval there is too little to be worth a model call.
        if pending < self.interval(effective) {
            return None;
        }
        if self.config.provider_change
            && state
                .record
                .last_provider
                .as_deref()
                .is_some_and(|last| last != provider)
        {
            return Some(OmTrigger::ProviderChange);
        }
        let idle = self.config.idle.after(provider)?;
        let last = state.last_activity_ms?;
        let idle_ms = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
        (now.saturating_sub(last) >= idle_ms).then_some(OmTrigger::Ttl)
    }

    /// Replaces older raw messages with observations. Returns whether the record changed.
    #[allow(clippy::too_many_arguments)]
    async fn activate(
        self: &Arc<Self>,
        harness: &Harness,
        memory: &Arc<ThreadMemory>,
        state: &mut ThreadState,
        request: &ModelRequest,
        ctx: &ModelCtx,
        trigger: OmTrigger,
        effective: &Effective,
    ) -> Result<bool, RunFailure> {
        let total = request.messages.len();
        let pending = memory
            .tokens
            .sum(state.record.observed_count as usize..total);
        let block_at = (effective.threshold as f64 * self.config.block_after) as u64;
        if memory.is_buffering() {
            if trigger == OmTrigger::Threshold && pending < block_at {
                // Room is left before the block-after limit: go on raw while the buffer
                // finishes, activating only what is ready.
                if state.record.buffered.is_empty() {
                    return Ok(false);
                }
                let activated = activate_chunks(&mut state.record);
                harness.emit(HarnessEvent::OmActivation {
                    triggered_by: trigger,
                    activated_tokens: activated,
                });
                return Ok(true);
            }
            memory.wait_for_buffering().await;
            memory.take_buffered(state);
        }
        let mut activated = activate_chunks(&mut state.record);
        // Buffering kept up when what the chunks leave raw is below the threshold. Otherwise
        // (no chunk, or too few) observe now what the chunks do not cover.
        let start = state.record.observed_count as usize;
        if activated == 0 || memory.tokens.sum(start..total) >= effective.threshold {
            activated += self
                .observe_uncovered(harness, memory, state, request, ctx, effective)
                .await?;
        }
        if activated == 0 {
            return Ok(false);
        }
        harness.emit(HarnessEvent::OmActivation {
            triggered_by: trigger,
            activated_tokens: activated,
        });
        Ok(true)
    }

    /// Observes now the messages from `observed_count` on, keeping the most recent ones (up
    /// to the keep window) raw and never splitting a tool call from its results. Returns the
    /// raw tokens the new observations replace.
    async fn observe_uncovered(
        &self,
        harness: &Harness,
        memory: &Arc<ThreadMemory>,
        state: &mut ThreadState,
        request: &ModelRequest,
        ctx: &ModelCtx,
        effective: &Effective,
    ) -> Result<u64, RunFailure> {
        let total = request.messages.len();
        let start = state.record.observed_count as usize;
        let keep = (effective.threshold as f64 * self.config.keep_recent) as u64;
        let per_message = memory.tokens.each(start..total);
        let mut kept = 0;
        let mut target = total;
        for (offset, tokens) in per_message.iter().enumerate().rev() {
            if kept + tokens > keep {
                break;
            }
            kept += tokens;
            target = start + offset;
        }
        if target <= start {
            return Ok(0);
        }
        harness.flush_messages().await;
        let stored = harness
            .store()
            .messages(&memory.id)
            .await
            .map_err(om_failure)?;
        let end = boundary_forward(&request.messages, target, stored.len());
        if end <= start {
            return Ok(0);
        }
        memory.tokens.settle_range(&request.messages, start..end);
        let message_tokens = memory.tokens.sum(start..end);
        harness.emit(HarnessEvent::OmObservationStart {
            pending_tokens: message_tokens,
        });
        let started = Instant::now();
        let observed = self
            .observe(
                harness,
                ctx,
                effective,
                &state.record,
                &request.messages[start..end],
                &stored[start..end],
                Pass::Observe,
            )
            .await?;
        let observation_tokens = TokenCounter::global().count(&observed.observations);
        apply_observed(
            &mut state.record,
            observed,
            observation_tokens,
            (end - start) as u64,
            stored[end - 1].id.clone(),
            message_tokens,
        );
        harness.emit(HarnessEvent::OmObservationEnd {
            observed_messages: u32::try_from(end - start).unwrap_or(u32::MAX),
            observation_tokens: state.record.observation_tokens,
            duration_ms: elapsed_ms(started),
        });
        Ok(message_tokens)
    }

    /// Starts buffering in the background when enough new tokens piled up since the last chunk.
    fn maybe_buffer(
        self: &Arc<Self>,
        harness: &Harness,
        memory: &Arc<ThreadMemory>,
        state: &ThreadState,
        request: &ModelRequest,
        ctx: &ModelCtx,
        effective: &Effective,
    ) {
        let start = state.record.buffered_end() as usize;
        let total = request.messages.len();
        let unbuffered = memory.tokens.sum(start..total);
        if start >= total || unbuffered < self.interval(effective) {
            return;
        }
        {
            let mut slot = lock(&memory.buffering);
            if !matches!(*slot, Buffering::Idle) {
                return;
            }
            *slot = Buffering::Running;
        }
        harness.emit(HarnessEvent::OmBufferingStart {
            pending_tokens: unbuffered,
        });
        let messages = request.messages[start..total].to_vec();
        let work = BufferWork {
            engine: Arc::clone(self),
            harness: harness.clone(),
            memory: Arc::clone(memory),
            ctx: ctx.clone(),
            effective: effective.clone(),
            record: state.record.clone(),
            start,
            chunks_before: state.record.buffered.len(),
        };
        tokio::spawn(work.run(messages));
    }

    /// Reflects observations past the reflection threshold. Returns whether the record changed.
    async fn maybe_reflect(
        &self,
        harness: &Harness,
        state: &mut ThreadState,
        ctx: &ModelCtx,
        effective: &Effective,
    ) -> Result<bool, RunFailure> {
        let tokens = state.record.observation_tokens;
        if tokens <= effective.reflection_threshold {
            return Ok(false);
        }
        // A reflection that could not shrink these observations is not retried until they grow
        // by another buffering interval: no endless reflect loop.
        if state
            .failed_reflection_at
            .is_some_and(|at| tokens < at + self.interval(effective))
        {
            return Ok(false);
        }
        harness.emit(HarnessEvent::OmReflectionStart {
            observation_tokens: tokens,
        });
        let started = Instant::now();
        let target = effective.reflection_threshold / 2;
        let mut best: Option<(Observed, u64)> = None;
        for attempt in 1..=self.config.reflection_attempts {
            let guidance = prompts::compression_guidance(attempt, target);
            let input = prompts::reflector_input(&state.record, &guidance);
            let answer = self
                .call(
                    harness,
                    ctx,
                    effective,
                    Pass::Reflect,
                    prompts::REFLECTOR_INSTRUCTIONS,
                    input,
                )
                .await?;
            let observed = prompts::parse(&answer);
            let result_tokens = TokenCounter::global().count(&observed.observations);
            let shrunk = result_tokens < effective.reflection_threshold;
            if best.as_ref().is_none_or(|(_, b)| result_tokens < *b) {
                best = Some((observed, result_tokens));
            }
            if shrunk {
                break;
            }
            harness.emit(HarnessEvent::OmReflectionFailed {
                error: format!(
                    "the reflection has {result_tokens} tokens, not below the threshold of {}",
                    effective.reflection_threshold
                ),
                attempt,
            });
        }
        let Some((observed, result_tokens)) = best.filter(|(_, t)| *t < tokens) else {
            state.failed_reflection_at = Some(tokens);
            return Ok(false);
        };
        if result_tokens >= effective.reflection_threshold {
            state.failed_reflection_at = Some(result_tokens);
        }
        let step = ObservationStep {
            kind: "reflection".into(),
            content: Some(observed.observations.clone()),
            metadata: Some(Map::from_iter([(
                "generation".to_owned(),
                json!(state.record.generation + 1),
            )])),
        };
        let reflection = self
            .reshaped::<ObservationReflection>(harness, ctx, state, step)
            .await?;
        let reflection = reflection.unwrap_or(observed.observations);
        let record = &mut state.record;
        record.observation_tokens = TokenCounter::global().count(&reflection);
        record.reflection = Some(reflection);
        record.observations.clear();
        if observed.current_task.is_some() {
            record.current_task = observed.current_task;
        }
        if observed.suggested_continuation.is_some() {
            record.suggested_continuation = observed.suggested_continuation;
        }
        record.generation += 1;
        harness.emit(HarnessEvent::OmReflectionEnd {
            observation_tokens: record.observation_tokens,
            generation_count: record.generation,
            duration_ms: elapsed_ms(started),
        });
        Ok(true)
    }

    /// Emits an `observation.*` tag and returns the reshaped text.
    async fn reshaped<T>(
        &self,
        harness: &Harness,
        ctx: &ModelCtx,
        state: &ThreadState,
        step: ObservationStep,
    ) -> Result<Option<String>, RunFailure>
    where
        T: harness_tags::Tag<Payload = ObservationStep, Ctx = MemoryCtx>,
    {
        let memory_ctx = MemoryCtx {
            base: ctx.base.clone(),
            generation: state.record.generation,
            observation_tokens: state.record.observation_tokens,
            pending_tokens: 0,
        };
        match harness.pipeline().emit::<T>(step, &memory_ctx).await {
            Ok(outcome) => Ok(outcome.into_payload().and_then(|step| step.content)),
            Err(error) => Err(om_failure(format!("`{}` failed: {error}", T::NAME))),
        }
    }

    /// Runs the observer over `messages` (with their stored twins, for ids and times).
    #[allow(clippy::too_many_arguments)]
    async fn observe(
        &self,
        harness: &Harness,
        ctx: &ModelCtx,
        effective: &Effective,
        record: &OmRecord,
        messages: &[KernelMessage],
        stored: &[StoredMessage],
        pass: Pass,
    ) -> Result<Observed, RunFailure> {
        let rendered = prompts::render_messages(stored.iter().map(|s| s.created_at).zip(messages));
        let input = prompts::observer_input(record, &rendered);
        let answer = self
            .call(
                harness,
                ctx,
                effective,
                pass,
                prompts::OBSERVER_INSTRUCTIONS,
                input,
            )
            .await?;
        let mut observed = prompts::parse(&answer);
        let ids: Vec<Value> = stored.iter().map(|s| Value::String(s.id.clone())).collect();
        let step = ObservationStep {
            kind: "observation".into(),
            content: Some(observed.observations.clone()),
            metadata: Some(Map::from_iter([(
                "messageIds".to_owned(),
                Value::Array(ids),
            )])),
        };
        let memory_ctx = MemoryCtx {
            base: ctx.base.clone(),
            generation: record.generation,
            observation_tokens: record.observation_tokens,
            pending_tokens: 0,
        };
        match harness
            .pipeline()
            .emit::<ObservationCompressionSummary>(step, &memory_ctx)
            .await
        {
            Ok(outcome) => {
                if let Some(content) = outcome.into_payload().and_then(|step| step.content) {
                    observed.observations = content;
                }
            }
            Err(error) => {
                return Err(om_failure(format!(
                    "`observation.compression-summary` failed: {error}"
                )));
            }
        }
        Ok(observed)
    }

    /// Calls the observer or reflector, retrying failures with bounded backoff; each failure is
    /// reported. After the last attempt the run fails with `om-failure`.
    async fn call(
        &self,
        harness: &Harness,
        ctx: &ModelCtx,
        effective: &Effective,
        pass: Pass,
        instructions: &str,
        input: String,
    ) -> Result<String, RunFailure> {
        let run_model = format!("{}/{}", ctx.provider, ctx.model);
        let (model_id, temperature) = match pass {
            Pass::Reflect => (
                effective.reflector_model.clone(),
                self.config.reflector_temperature,
            ),
            Pass::Observe | Pass::Buffer => (
                effective.observer_model.clone(),
                self.config.observer_temperature,
            ),
        };
        let model_id = model_id.unwrap_or(run_model);
        let role = if pass == Pass::Reflect {
            "reflector"
        } else {
            "observer"
        };
        let model = harness.resolve_model(&model_id).map_err(|error| {
            om_failure(format!(
                "the {role} model `{model_id}` is not usable: {error}"
            ))
        })?;
        let request = ModelRequest {
            model: model_id.clone(),
            system: instructions.to_owned(),
            messages: Arc::new(vec![KernelMessage::user(input)]),
            tools: Arc::default(),
            temperature: Some(temperature),
            max_tokens: None,
        };
        // Like every model call, through `model.request`: other plugins (redaction) reshape
        // what the observer and reflector are sent, whatever order the plugins were added in.
        let own_ctx = ModelCtx {
            base: BaseCtx {
                strategy: Arc::from(OWN_REQUEST_STRATEGY),
                model_id: Arc::from(model_id.as_str()),
                ..ctx.base.clone()
            },
            provider: model.id().provider().to_owned(),
            model: model.id().name().to_owned(),
            attempt: 1,
        };
        let request = match harness
            .pipeline()
            .emit::<ModelRequestTag>(request, &own_ctx)
            .await
        {
            Ok(EmitOutcome::Continue(request)) => request,
            Ok(EmitOutcome::Suppressed { by }) => {
                return Err(om_failure(format!(
                    "the {role} request was withheld by the `model.request` handler `{by}`"
                )));
            }
            Err(error) => {
                return Err(om_failure(format!(
                    "the {role} request failed in `model.request`: {error}"
                )));
            }
        };
        let mut attempt = 1;
        let mut waited = Duration::ZERO;
        loop {
            let result = match model.stream(&request).await {
                Ok(stream) => collect_response(stream).await,
                Err(error) => Err(error),
            };
            let error = match result {
                Ok(response) if !response.content.trim().is_empty() => return Ok(response.content),
                Ok(_) => "the model answered with nothing".to_owned(),
                Err(error) => error.to_string(),
            };
            harness.emit(match pass {
                Pass::Observe => HarnessEvent::OmObservationFailed {
                    error: error.clone(),
                    attempt,
                },
                Pass::Reflect => HarnessEvent::OmReflectionFailed {
                    error: error.clone(),
                    attempt,
                },
                Pass::Buffer => HarnessEvent::OmBufferingFailed {
                    error: format!("attempt {attempt}: {error}"),
                },
            });
            let Some(wait) = self.config.retry.wait_after(attempt, waited) else {
                return Err(om_failure(format!(
                    "the {role} (`{model_id}`) failed {attempt} time{}; last error: {error}",
                    if attempt == 1 { "" } else { "s" }
                )));
            };
            tokio::time::sleep(wait).await;
            waited += wait;
            attempt += 1;
        }
    }
}

impl ThreadMemory {
    fn is_buffering(&self) -> bool {
        matches!(*lock(&self.buffering), Buffering::Running)
    }

    async fn wait_for_buffering(&self) {
        loop {
            let done = self.buffering_done.notified();
            if !self.is_buffering() {
                return;
            }
            done.await;
        }
    }

    /// Takes in a chunk buffered in the background, if it starts where the buffered chunks
    /// end (a chunk made stale by an observation meanwhile is dropped). Returns whether the
    /// record changed.
    fn take_buffered(&self, state: &mut ThreadState) -> bool {
        let mut slot = lock(&self.buffering);
        if !matches!(*slot, Buffering::Ready { .. }) {
            return false;
        }
        let Buffering::Ready { start, chunk } = std::mem::take(&mut *slot) else {
            return false;
        };
        if start != state.record.buffered_end() {
            return false;
        }
        state.record.buffered.push(chunk);
        true
    }

    fn finish_buffering(&self, outcome: Buffering) {
        *lock(&self.buffering) = outcome;
        self.buffering_done.notify_waiters();
    }
}

/// A buffering pass, run in the background.
struct BufferWork {
    engine: Arc<Engine>,
    harness: Harness,
    memory: Arc<ThreadMemory>,
    ctx: ModelCtx,
    effective: Effective,
    record: OmRecord,
    start: usize,
    chunks_before: usize,
}

impl BufferWork {
    async fn run(self, messages: Vec<KernelMessage>) {
        let outcome = self.chunk(&messages).await;
        let (next, event) = match outcome {
            Ok(Some(chunk)) => {
                let event = HarnessEvent::OmBufferingEnd {
                    buffered: u32::try_from(self.chunks_before + 1).unwrap_or(u32::MAX),
                    tokens: chunk.message_tokens,
                };
                let ready = Buffering::Ready {
                    start: self.start as u64,
                    chunk,
                };
                (ready, event)
            }
            // Every message it was given ends inside a tool call not yet answered.
            Ok(None) => (
                Buffering::Idle,
                HarnessEvent::OmBufferingEnd {
                    buffered: u32::try_from(self.chunks_before).unwrap_or(u32::MAX),
                    tokens: 0,
                },
            ),
            // Not fatal: activation observes what no chunk covers.
            Err(error) => (
                Buffering::Idle,
                HarnessEvent::OmBufferingFailed {
                    error: error.message,
                },
            ),
        };
        // The chunk is in place before anyone hears of it: a model call made after the event
        // finds it.
        self.memory.finish_buffering(next);
        self.harness.emit(event);
    }

    async fn chunk(&self, messages: &[KernelMessage]) -> Result<Option<BufferedChunk>, RunFailure> {
        self.harness.flush_messages().await;
        let stored = self
            .harness
            .store()
            .messages(&self.memory.id)
            .await
            .map_err(om_failure)?;
        let stored_end = (self.start + messages.len()).min(stored.len());
        let end = self.start + boundary_back(messages, stored_end - self.start.min(stored_end));
        if end <= self.start {
            return Ok(None);
        }
        let messages = &messages[..end - self.start];
        let stored = &stored[self.start..end];
        let all: Vec<KernelMessage> = messages.to_vec();
        let counter = TokenCounter::global();
        let message_tokens: u64 = all.iter().map(|m| counter.count_message(m)).sum();
        let observed = self
            .engine
            .observe(
                &self.harness,
                &self.ctx,
                &self.effective,
                &self.record,
                messages,
                stored,
                Pass::Buffer,
            )
            .await?;
        Ok(Some(BufferedChunk {
            observation_tokens: counter.count(&observed.observations),
            observed,
            message_ids: stored.iter().map(|s| s.id.clone()).collect(),
            message_tokens,
        }))
    }
}

/// Where observed messages may end (exclusive) at or before `end` of `messages`: never
/// between a tool call and its results, which providers reject apart.
fn boundary_back(messages: &[KernelMessage], mut end: usize) -> usize {
    while end > 0 && matches!(messages.get(end), Some(KernelMessage::ToolResult { .. })) {
        end -= 1;
    }
    end
}

/// Where observed messages may end at or after `target`, but not past `limit` (what is
/// stored): past a tool call's results rather than between them; if that would pass
/// `limit`, back before the call.
fn boundary_forward(messages: &[KernelMessage], target: usize, limit: usize) -> usize {
    let mut end = target.min(limit);
    while end < limit && matches!(messages.get(end), Some(KernelMessage::ToolResult { .. })) {
        end += 1;
    }
    boundary_back(messages, end)
}

/// Moves every buffered chunk into the active observations. Returns the raw tokens replaced.
fn activate_chunks(record: &mut OmRecord) -> u64 {
    let chunks = std::mem::take(&mut record.buffered);
    let mut activated = 0;
    for chunk in chunks {
        let Some(last) = chunk.message_ids.last().cloned() else {
            continue;
        };
        activated += chunk.message_tokens;
        apply_observed(
            record,
            chunk.observed,
            chunk.observation_tokens,
            chunk.message_ids.len() as u64,
            last,
            chunk.message_tokens,
        );
    }
    activated
}

/// Adds an observer pass's result covering the next `count` messages.
fn apply_observed(
    record: &mut OmRecord,
    observed: Observed,
    observation_tokens: u64,
    count: u64,
    last_id: String,
    message_tokens: u64,
) {
    if !observed.observations.is_empty() {
        record.observations.push(observed.observations);
        record.observation_tokens += observation_tokens;
    }
    if observed.current_task.is_some() {
        record.current_task = observed.current_task;
    }
    if observed.suggested_continuation.is_some() {
        record.suggested_continuation = observed.suggested_continuation;
    }
    record.observed_count += count;
    record.last_observed_id = Some(last_id);
    record.observed_tokens += message_tokens;
}

/// Loads a thread's record and settings, and when it was last active.
async fn load(harness: &Harness, thread_id: &str) -> Result<ThreadState, String> {
    let metadata = harness
        .thread_metadata(thread_id)
        .await
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let record = match harness
        .store()
        .record(NAMESPACE, thread_id)
        .await
        .map_err(|e| e.to_string())?
    {
        Some(record) => serde_json::from_value(record.value)
            .map_err(|e| format!("the stored memory of thread `{thread_id}` is unreadable: {e}"))?,
        None => OmRecord::default(),
    };
    let messages = harness
        .store()
        .messages(thread_id)
        .await
        .map_err(|e| e.to_string())?;
    let record = check_cursor(record, &messages);
    Ok(ThreadState {
        record,
        settings: OmSettings::from_metadata(&metadata),
        last_activity_ms: messages.last().map(|m| m.created_at),
        failed_reflection_at: None,
    })
}

/// A record whose covered messages no longer match the thread (messages removed outside the
/// harness) is dropped rather than applied to the wrong messages.
fn check_cursor(record: OmRecord, messages: &[StoredMessage]) -> OmRecord {
    let count = record.observed_count as usize;
    let matches = match &record.last_observed_id {
        None => count == 0,
        Some(id) => count > 0 && messages.get(count - 1).is_some_and(|m| &m.id == id),
    };
    if matches {
        record
    } else {
        tracing::warn!(
            "observational memory dropped: its cursor does not match the thread's messages"
        );
        OmRecord {
            last_provider: record.last_provider,
            ..OmRecord::default()
        }
    }
}

pub(crate) async fn save(
    harness: &Harness,
    thread_id: &str,
    record: &OmRecord,
) -> Result<(), String> {
    let value = serde_json::to_value(record).map_err(|e| e.to_string())?;
    harness
        .store()
        .write(vec![WriteOp::PutRecord {
            namespace: NAMESPACE.to_owned(),
            key: thread_id.to_owned(),
            thread_id: Some(thread_id.to_owned()),
            value,
        }])
        .await
        .map_err(|e| e.to_string())
}

pub(crate) fn progress(state: &ThreadState, effective: &Effective, pending: u64) -> OmProgress {
    let percent =
        |part: u64, whole: u64| (part as f64 * 100.0 / whole.max(1) as f64 * 10.0).round() / 10.0;
    OmProgress {
        status: OmStatus::Idle,
        pending_tokens: pending,
        threshold: effective.threshold,
        threshold_percent: percent(pending, effective.threshold),
        observation_tokens: state.record.observation_tokens,
        reflection_threshold: effective.reflection_threshold,
        reflection_threshold_percent: percent(
            state.record.observation_tokens,
            effective.reflection_threshold,
        ),
        buffered: u32::try_from(state.record.buffered.len()).unwrap_or(u32::MAX),
        generation_count: state.record.generation,
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl ThreadState {
    /// The pending tokens of the thread's stored messages (for progress outside a run).
    pub(crate) fn pending_of(&self, messages: &[StoredMessage]) -> u64 {
        let counter = TokenCounter::global();
        messages
            .iter()
            .skip(self.record.observed_count as usize)
            .map(|m| counter.count_message(&m.message))
            .sum()
    }
}
