//! The [`Redaction`] plugin: redaction handlers on the tags where text enters the model's
//! context, the logs and the UIs, all registered fail-closed.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use harness_tags::tags::{
    DisplayToolResultTag, MessageAssistant, MessageTextDelta, MessageToolError, MessageToolResult,
    MessageUserTask, ModelRequestTag, ThreadCloned, ThreadDeleted, ToolCallTag, ToolOutputDelta,
};
use harness_tags::{
    BaseCtx, BoxError, Compose, DisplayToolResult, KernelMessage, MemoryCtx, ModelCtx,
    ModelRequest, OutputDelta, Pipeline, Plugin, TagInfo, TextDelta, ThreadChange, ThreadCtx,
    ToolCall, ToolCallCtx, ToolResultCtx,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::detect::Detector;
use crate::entity::Entity;
use crate::error::RedactionError;
use crate::live::LiveStreams;
use crate::operator::Operator;
use crate::redactor::Redactor;

/// Where the plugin redacts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// `message.tool-result`: what the model sees of a tool's result (on by default).
    ToolResult,
    /// `message.tool-error`: what the model sees of a tool's error (on by default).
    ToolError,
    /// `message.user-task`: the user's messages, before they are stored and sent.
    UserTask,
    /// `message.assistant`: the model's messages, before they are stored and shown.
    Assistant,
    /// `model.request`: the system prompt and every message of each provider call.
    ModelRequest,
    /// `observation.*`: recorded steps, observations and reflections (content and metadata).
    Observation,
    /// `display.tool-result`: what UIs show for a tool result (default operator `••••••`).
    DisplayToolResult,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 7] = [
        Target::ToolResult,
        Target::ToolError,
        Target::UserTask,
        Target::Assistant,
        Target::ModelRequest,
        Target::Observation,
        Target::DisplayToolResult,
    ];

    /// The tag name (or pattern) of the target.
    pub fn tag(self) -> &'static str {
        match self {
            Target::ToolResult => "message.tool-result",
            Target::ToolError => "message.tool-error",
            Target::UserTask => "message.user-task",
            Target::Assistant => "message.assistant",
            Target::ModelRequest => "model.request",
            Target::Observation => "observation.*",
            Target::DisplayToolResult => "display.tool-result",
        }
    }
}

/// Whether a target is redacted, and with which operator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetPolicy {
    /// Redact at this target.
    pub enabled: bool,
    /// The operator for every finding here, instead of the redactor's per-entity operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<Operator>,
}

fn default_targets() -> BTreeMap<Target, TargetPolicy> {
    Target::ALL
        .into_iter()
        .map(|target| {
            let policy = TargetPolicy {
                enabled: matches!(target, Target::ToolResult | Target::ToolError),
                operator: (target == Target::DisplayToolResult).then(Operator::bullets),
            };
            (target, policy)
        })
        .collect()
}

/// The plugin's configuration as JSON or TOML (camelCase keys).
///
/// ```
/// use harness_redaction::{Redaction, RedactionConfig};
///
/// let config: RedactionConfig = serde_json::from_value(serde_json::json!({
///     "operator": {"type": "replace"},
///     "operators": {"EMAIL_ADDRESS": {"type": "pseudonym"}},
///     "custom": [{"entity": "EMPLOYEE_ID", "pattern": "(?-u:\\b)EMP-[0-9]{6}(?-u:\\b)"}],
///     "deny": [{"entity": "PROJECT", "values": ["Falcon"]}],
///     "allow": ["support@example.com"],
///     "targets": {"display-tool-result": {"enabled": true}}
/// }))?;
/// let plugin = Redaction::try_from_config(config)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RedactionConfig {
    /// The built-in entities to detect (all when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entities: Option<Vec<Entity>>,
    /// The operator for entities without their own (default `replace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<Operator>,
    /// Operators by entity name.
    pub operators: BTreeMap<Entity, Operator>,
    /// Custom regex detectors.
    pub custom: Vec<CustomPattern>,
    /// Deny-lists of literal values.
    pub deny: Vec<DenyList>,
    /// Values never reported.
    pub allow: Vec<String>,
    /// Per-target overrides; targets not listed keep their defaults.
    pub targets: BTreeMap<Target, TargetPolicy>,
    /// The key of hash and pseudonym tokens (random per process when absent).
    #[serde(skip_serializing)]
    pub hash_key: Option<String>,
    /// Hex digits in hash and pseudonym tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_len: Option<usize>,
    /// The largest text redacted, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_input_bytes: Option<usize>,
    /// The most values the pseudonym vault keeps per thread (default 100,000; see
    /// [`Vault`](crate::Vault)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vault_capacity: Option<usize>,
}

/// A custom regex detector in a [`RedactionConfig`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomPattern {
    /// The entity it finds.
    pub entity: Entity,
    /// The regex.
    pub pattern: String,
    /// The score of its findings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
}

/// A deny-list in a [`RedactionConfig`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DenyList {
    /// The entity its values are reported as.
    pub entity: Entity,
    /// The literal values.
    pub values: Vec<String>,
}

impl RedactionConfig {
    /// Compiles the configuration into a redactor.
    pub fn build(&self) -> Result<Redactor, RedactionError> {
        let mut builder = Redactor::builder();
        if let Some(entities) = &self.entities {
            builder = builder.only(entities.iter().cloned());
        }
        if let Some(operator) = &self.operator {
            builder = builder.operator(operator.clone());
        }
        for (entity, operator) in &self.operators {
            builder = builder.entity_operator(entity.clone(), operator.clone());
        }
        for custom in &self.custom {
            let mut detector = Detector::regex(custom.entity.clone(), custom.pattern.clone());
            if let Some(score) = custom.score {
                detector = detector.score(score);
            }
            builder = builder.detector(detector);
        }
        for deny in &self.deny {
            builder = builder.detector(Detector::deny_list(
                deny.entity.clone(),
                deny.values.clone(),
            ));
        }
        for value in &self.allow {
            builder = builder.allow(value.clone());
        }
        if let Some(key) = &self.hash_key {
            builder = builder.hash_key(key);
        }
        if let Some(len) = self.hash_len {
            builder = builder.hash_len(len);
        }
        if let Some(max) = self.max_input_bytes {
            builder = builder.max_input_bytes(max);
        }
        if let Some(max) = self.vault_capacity {
            builder = builder.vault_capacity(max);
        }
        builder.build()
    }
}

/// The redaction plugin.
///
/// By default it redacts `message.tool-result` and `message.tool-error` with every built-in
/// detector and the `Replace` operator. Every handler is registered fail-closed under the name
/// `redaction`: if redaction fails (a bad configuration, a text over the size limit, a full
/// vault, a panic), the emit fails and the text never passes.
///
/// Live output is redacted as it streams, with a [`StreamRedactor`](crate::StreamRedactor) per
/// stream (see [`MAX_LIVE_STREAMS`](crate::MAX_LIVE_STREAMS)): a running tool's output
/// (`tool.output-delta`) under the `display.tool-result` policy when that target is on, else
/// under `message.tool-result`'s; the model's streamed answer, reasoning and tool-call
/// arguments (`message.text-delta`) under the `message.assistant` policy, which also covers
/// the stored message's reasoning (unless the provider signed it) and its tool calls'
/// arguments.
///
/// When an operator is [`Operator::Pseudonym`], a `tool.call` handler restores pseudonyms in
/// the call's arguments to the real values, so a tool can act on data the model never saw;
/// `thread.deleted` drops a thread's vault and `thread.cloned` copies it. Subagents use their
/// parent thread's vault ([`BaseCtx::root_thread_id`]): a pseudonym a subagent saw resolves
/// in its parent's tool calls and in no other thread's.
#[derive(Clone, Debug)]
pub struct Redaction {
    redactor: Result<Arc<Redactor>, RedactionError>,
    targets: BTreeMap<Target, TargetPolicy>,
    settings: Value,
}

impl Default for Redaction {
    /// Every built-in detector, `Replace`, tool results and tool errors.
    fn default() -> Self {
        Redaction::from_result(Redactor::builder().build(), default_targets(), Value::Null)
    }
}

impl Redaction {
    /// The plugin over a redactor, with the default targets.
    pub fn new(redactor: Redactor) -> Redaction {
        Redaction::from_result(Ok(redactor), default_targets(), Value::Null)
    }

    /// The plugin over a shared redactor, with the default targets.
    pub fn from_arc(redactor: Arc<Redactor>) -> Redaction {
        Redaction {
            redactor: Ok(redactor),
            targets: default_targets(),
            settings: Value::Null,
        }
    }

    /// The plugin from a configuration; an invalid configuration is an error here.
    pub fn try_from_config(config: RedactionConfig) -> Result<Redaction, RedactionError> {
        let plugin = Redaction::from_config(config);
        match &plugin.redactor {
            Ok(_) => Ok(plugin),
            Err(error) => Err(error.clone()),
        }
    }

    /// The plugin from a configuration. An invalid configuration does not fail here: the
    /// plugin's `start` fails, and so does every emit it handles (fail-closed), so nothing is
    /// let through unredacted.
    pub fn from_config(config: RedactionConfig) -> Redaction {
        let mut targets = default_targets();
        targets.extend(config.targets.clone());
        let settings = serde_json::to_value(&config).unwrap_or(Value::Null);
        Redaction::from_result(config.build(), targets, settings)
    }

    fn from_result(
        redactor: Result<Redactor, RedactionError>,
        targets: BTreeMap<Target, TargetPolicy>,
        settings: Value,
    ) -> Redaction {
        Redaction {
            redactor: redactor.map(Arc::new),
            targets,
            settings,
        }
    }

    /// Turns a target on or off.
    pub fn target(mut self, target: Target, enabled: bool) -> Redaction {
        self.targets.entry(target).or_default().enabled = enabled;
        self
    }

    /// Turns a target on with its own operator.
    pub fn target_operator(mut self, target: Target, operator: Operator) -> Redaction {
        let policy = self.targets.entry(target).or_default();
        policy.enabled = true;
        policy.operator = Some(operator);
        self
    }

    /// Turns every target on.
    pub fn everywhere(mut self) -> Redaction {
        for policy in self.targets.values_mut() {
            policy.enabled = true;
        }
        self
    }

    /// The redactor, or the configuration error.
    pub fn redactor(&self) -> Result<&Arc<Redactor>, &RedactionError> {
        self.redactor.as_ref()
    }

    /// The policy of a target.
    pub fn policy(&self, target: Target) -> TargetPolicy {
        self.targets.get(&target).cloned().unwrap_or_default()
    }

    /// The live streams of one target, redacted with its operator.
    fn live_streams(&self, target: Target) -> LiveStreams {
        LiveStreams::new(self.redactor.clone(), self.policy(target).operator)
    }

    /// A redaction function for one target: `(text, thread) -> new text or None`.
    fn text_fn(&self, target: Target) -> TextFn {
        TextFn {
            redactor: self.redactor.clone(),
            operator: self.policy(target).operator,
        }
    }
}

/// What each handler holds: the redactor (or the configuration error) and the operator.
#[derive(Clone)]
struct TextFn {
    redactor: Result<Arc<Redactor>, RedactionError>,
    operator: Option<Operator>,
}

impl TextFn {
    /// The redacted text, or `None` when nothing changed.
    fn apply(&self, text: &str, thread: Option<&str>) -> Result<Option<String>, RedactionError> {
        let redactor = self.redactor.as_ref().map_err(Clone::clone)?;
        let out = redactor.redact_with(text, thread, self.operator.as_ref())?;
        Ok(out.changed().then(|| out.text.into_owned()))
    }

    fn message(
        &self,
        msg: &KernelMessage,
        thread: Option<&str>,
    ) -> Result<Option<KernelMessage>, RedactionError> {
        Ok(self
            .apply(msg.content(), thread)?
            .map(|text| msg.with_content(text)))
    }

    /// Redacts every string in a JSON value; `None` when nothing changed.
    fn json(&self, value: &Value, thread: Option<&str>) -> Result<Option<Value>, RedactionError> {
        match value {
            Value::String(text) => Ok(self.apply(text, thread)?.map(Value::String)),
            Value::Array(items) => {
                let mut changed: Option<Vec<Value>> = None;
                for (i, item) in items.iter().enumerate() {
                    if let Some(new) = self.json(item, thread)? {
                        changed.get_or_insert_with(|| items.clone())[i] = new;
                    }
                }
                Ok(changed.map(Value::Array))
            }
            Value::Object(map) => {
                let mut changed: Option<serde_json::Map<String, Value>> = None;
                for (key, item) in map {
                    if let Some(new) = self.json(item, thread)? {
                        changed
                            .get_or_insert_with(|| map.clone())
                            .insert(key.clone(), new);
                    }
                }
                Ok(changed.map(Value::Object))
            }
            _ => Ok(None),
        }
    }
}

/// The thread whose vault an emit uses: a subagent's parent thread, else the run's thread
/// (see [`BaseCtx::root_thread_id`]).
fn thread(base: &BaseCtx) -> Option<&str> {
    base.root_thread_id()
}

/// The vault thread of an `observation.*` emit, whatever its context type.
fn observation_thread(info: &TagInfo<'_>) -> Option<String> {
    if let Some(ctx) = info.ctx::<ToolResultCtx>() {
        return thread(&ctx.base).map(str::to_owned);
    }
    if let Some(ctx) = info.ctx::<MemoryCtx>() {
        return thread(&ctx.base).map(str::to_owned);
    }
    info.ctx_json().ok().and_then(|ctx| {
        ["parentThreadId", "threadId"]
            .into_iter()
            .find_map(|key| ctx.get(key).and_then(Value::as_str))
            .map(str::to_owned)
    })
}

const NAME: &str = "redaction";

#[async_trait]
impl Plugin for Redaction {
    fn name(&self) -> &str {
        NAME
    }

    fn compose(&self, mut c: Compose) -> Compose {
        use harness_tags::{on, on_json};

        let on_target = |target: Target| self.policy(target).enabled;
        if on_target(Target::ToolResult) {
            let f = self.text_fn(Target::ToolResult);
            c = c.register(
                on(
                    MessageToolResult,
                    move |msg: &KernelMessage, ctx: &ToolResultCtx| {
                        f.message(msg, thread(&ctx.base))
                    },
                )
                .named(NAME)
                .fail_closed(),
            );
        }
        if on_target(Target::ToolError) {
            let f = self.text_fn(Target::ToolError);
            c = c.register(
                on(
                    MessageToolError,
                    move |msg: &KernelMessage, ctx: &ToolResultCtx| {
                        f.message(msg, thread(&ctx.base))
                    },
                )
                .named(NAME)
                .fail_closed(),
            );
        }
        if on_target(Target::UserTask) {
            let f = self.text_fn(Target::UserTask);
            c = c.register(
                on(
                    MessageUserTask,
                    move |msg: &KernelMessage, ctx: &BaseCtx| f.message(msg, thread(ctx)),
                )
                .named(NAME)
                .fail_closed(),
            );
        }
        if on_target(Target::Assistant) {
            let f = self.text_fn(Target::Assistant);
            c = c.register(
                on(
                    MessageAssistant,
                    move |msg: &KernelMessage, ctx: &BaseCtx| {
                        redact_assistant(&f, msg, thread(ctx))
                    },
                )
                .named(NAME)
                .fail_closed(),
            );
            // What the user watches stream in, before any subscriber sees it.
            let live = self.live_streams(Target::Assistant);
            c = c.register(
                on(
                    MessageTextDelta,
                    move |delta: &TextDelta, ctx: &ModelCtx| {
                        let key = format!(
                            "{}/{:?}/{}",
                            delta.message_id,
                            delta.kind,
                            delta.call_id.as_deref().unwrap_or_default()
                        );
                        let text = live.push(key, thread(&ctx.base), &delta.text, delta.end)?;
                        Ok::<_, RedactionError>(Some(TextDelta {
                            text,
                            ..delta.clone()
                        }))
                    },
                )
                .named(NAME)
                .fail_closed(),
            );
        }
        // A running tool's output as the user sees it: the screen's policy when it has one,
        // else the one the finished result gets.
        let output_target = [Target::DisplayToolResult, Target::ToolResult]
            .into_iter()
            .find(|target| on_target(*target));
        if let Some(target) = output_target {
            let live = self.live_streams(target);
            let f = self.text_fn(target);
            c = c.register(
                on(
                    ToolOutputDelta,
                    move |delta: &OutputDelta, ctx: &ToolCallCtx| {
                        let thread = thread(&ctx.base);
                        match delta {
                            OutputDelta::Shell { stream, text, end } => {
                                let key = format!("{}/{}/{stream:?}", ctx.base.run_id, ctx.call_id);
                                let text = live.push(key, thread, text, *end)?;
                                Ok::<_, RedactionError>(Some(OutputDelta::Shell {
                                    stream: *stream,
                                    text,
                                    end: *end,
                                }))
                            }
                            OutputDelta::Progress { partial } => Ok(f
                                .json(partial, thread)?
                                .map(|partial| OutputDelta::Progress { partial })),
                        }
                    },
                )
                .named(NAME)
                .fail_closed(),
            );
        }
        if on_target(Target::ModelRequest) {
            let f = self.text_fn(Target::ModelRequest);
            c = c.register(
                on(
                    ModelRequestTag,
                    move |req: &ModelRequest, ctx: &ModelCtx| {
                        redact_request(&f, req, thread(&ctx.base))
                    },
                )
                .named(NAME)
                .fail_closed(),
            );
        }
        if on_target(Target::Observation) {
            let f = self.text_fn(Target::Observation);
            c = c.register(
                on_json("observation.*", move |step: &Value, info: &TagInfo<'_>| {
                    let thread = observation_thread(info);
                    redact_observation(&f, step, thread.as_deref(), info.name())
                })
                .named(NAME)
                .fail_closed(),
            );
        }
        if on_target(Target::DisplayToolResult) {
            let f = self.text_fn(Target::DisplayToolResult);
            c = c.register(
                on(
                    DisplayToolResultTag,
                    // The screen's policy applies to what the tool returned, not to what the
                    // model's policy already made of it.
                    move |shown: &DisplayToolResult, ctx: &ToolResultCtx| {
                        f.apply(&shown.tool_output, thread(&ctx.base)).map(|text| {
                            text.map(|content| DisplayToolResult {
                                content,
                                ..shown.clone()
                            })
                        })
                    },
                )
                .named(NAME)
                .fail_closed(),
            );
        }
        // Pseudonyms in tool-call arguments go back to the real values.
        let redactor = self.redactor.clone();
        c = c.register(
            on(ToolCallTag, move |call: &ToolCall, ctx: &ToolCallCtx| {
                let redactor = redactor.as_ref().map_err(Clone::clone)?;
                Ok::<_, RedactionError>(restore_call(redactor, call, thread(&ctx.base)))
            })
            .named(NAME)
            .fail_closed(),
        );
        if let Ok(redactor) = &self.redactor {
            let vault = Arc::clone(redactor.vault());
            c = c.tap(
                ThreadDeleted,
                move |change: &ThreadChange, _: &ThreadCtx| {
                    vault.forget(&change.thread_id);
                },
            );
            let vault = Arc::clone(redactor.vault());
            c = c.tap(ThreadCloned, move |change: &ThreadChange, _: &ThreadCtx| {
                if let Some(source) = &change.source_thread_id {
                    vault.copy(source, &change.thread_id);
                }
            });
        }
        c
    }

    fn settings(&self) -> Value {
        let targets: BTreeMap<&str, &TargetPolicy> = self
            .targets
            .iter()
            .map(|(target, policy)| (target.tag(), policy))
            .collect();
        json!({
            "config": self.settings,
            "targets": targets,
            "error": self.redactor.as_ref().err().map(ToString::to_string),
        })
    }

    async fn start(&self, _pipeline: &Pipeline) -> Result<(), BoxError> {
        match &self.redactor {
            Ok(_) => Ok(()),
            Err(error) => Err(Box::new(error.clone())),
        }
    }
}

/// An assistant message with its text, its unsigned reasoning and its tool calls' arguments
/// redacted; `None` when nothing changed. Signed reasoning is left as it is: the provider
/// refuses a signed block that was changed, and what the user saw of it streamed through
/// `message.text-delta`.
fn redact_assistant(
    f: &TextFn,
    msg: &KernelMessage,
    thread: Option<&str>,
) -> Result<Option<KernelMessage>, RedactionError> {
    let KernelMessage::Assistant {
        content,
        tool_calls,
        thinking,
    } = msg
    else {
        return f.message(msg, thread);
    };
    let new_content = f.apply(content, thread)?;
    let new_thinking = match thinking {
        Some(thinking) if thinking.signature.is_none() => {
            f.apply(&thinking.text, thread)?
                .map(|text| harness_tags::Thinking {
                    text,
                    signature: None,
                })
        }
        _ => None,
    };
    let mut new_calls: Option<Vec<ToolCall>> = None;
    for (i, call) in tool_calls.iter().enumerate() {
        if let Some(arguments) = f.json(&call.arguments, thread)? {
            new_calls.get_or_insert_with(|| tool_calls.clone())[i].arguments = arguments;
        }
    }
    if new_content.is_none() && new_thinking.is_none() && new_calls.is_none() {
        return Ok(None);
    }
    Ok(Some(KernelMessage::Assistant {
        content: new_content.unwrap_or_else(|| content.clone()),
        tool_calls: new_calls.unwrap_or_else(|| tool_calls.clone()),
        thinking: new_thinking.or_else(|| thinking.clone()),
    }))
}

fn redact_request(
    f: &TextFn,
    req: &ModelRequest,
    thread: Option<&str>,
) -> Result<Option<ModelRequest>, RedactionError> {
    let system = f.apply(&req.system, thread)?;
    let mut messages: Option<Vec<KernelMessage>> = None;
    for (i, msg) in req.messages.iter().enumerate() {
        if let Some(new) = f.message(msg, thread)? {
            messages.get_or_insert_with(|| req.messages.to_vec())[i] = new;
        }
    }
    if system.is_none() && messages.is_none() {
        return Ok(None);
    }
    let mut out = req.clone();
    if let Some(system) = system {
        out.system = system;
    }
    if let Some(messages) = messages {
        out.messages = Arc::new(messages);
    }
    Ok(Some(out))
}

fn redact_observation(
    f: &TextFn,
    step: &Value,
    thread: Option<&str>,
    tag: &str,
) -> Result<Option<Value>, RedactionError> {
    let Value::Object(map) = step else {
        return Err(RedactionError::Payload {
            tag: tag.to_owned(),
            message: "the payload is not an object".to_owned(),
        });
    };
    let mut out: Option<serde_json::Map<String, Value>> = None;
    for key in ["content", "metadata"] {
        if let Some(value) = map.get(key)
            && let Some(new) = f.json(value, thread)?
        {
            out.get_or_insert_with(|| map.clone())
                .insert(key.to_owned(), new);
        }
    }
    Ok(out.map(Value::Object))
}

/// The call with every pseudonym of `thread` in its string arguments restored.
fn restore_call(redactor: &Redactor, call: &ToolCall, thread: Option<&str>) -> Option<ToolCall> {
    if redactor.vault().is_empty() {
        return None;
    }
    let arguments = restore_json(redactor, &call.arguments, thread)?;
    Some(ToolCall {
        arguments,
        ..call.clone()
    })
}

fn restore_json(redactor: &Redactor, value: &Value, thread: Option<&str>) -> Option<Value> {
    match value {
        Value::String(text) => redactor.restore(thread, text).map(Value::String),
        Value::Array(items) => {
            let mut changed: Option<Vec<Value>> = None;
            for (i, item) in items.iter().enumerate() {
                if let Some(new) = restore_json(redactor, item, thread) {
                    changed.get_or_insert_with(|| items.clone())[i] = new;
                }
            }
            changed.map(Value::Array)
        }
        Value::Object(map) => {
            let mut changed: Option<serde_json::Map<String, Value>> = None;
            for (key, item) in map {
                if let Some(new) = restore_json(redactor, item, thread) {
                    changed
                        .get_or_insert_with(|| map.clone())
                        .insert(key.clone(), new);
                }
            }
            changed.map(Value::Object)
        }
        _ => None,
    }
}
