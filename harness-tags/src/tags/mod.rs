//! The standard catalog: every tag the harness emits (DESIGN §3.5).
//!
//! Each tag's doc comment says where it is emitted, what the reshaped payload changes and, for
//! suppressible tags, what suppressing it means. `TAGS.md` at the repository root is generated
//! from these declarations.

use std::sync::Arc;

use crate::Tag;
use crate::context::{
    BaseCtx, McpCtx, MemoryCtx, ModelCtx, NudgeCtx, SubagentCtx, ThreadCtx, ToolCallCtx,
    ToolResultCtx,
};
use crate::payload::{
    DisplayToolResult, GateVerdict, HealingReport, KernelMessage, LifecycleFailure, McpToolList,
    MemoryContext, ModelRequest, ModelResponse, ObservationStep, OutputDelta, RunEnd, RunStart,
    StrategyEvaluation, SubagentResult, TerminateDecision, TextDelta, ThreadChange, ToolCall,
    ToolSpec,
};

/// Emitted when the kernel assembles the system prompt for a model call.
///
/// - Emitted by: the kernel, in Think, before every model call.
/// - Result: the reshaped text is the system prompt sent to the model.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "prompt.system", phase = Think, payload = String, ctx = BaseCtx)]
pub struct PromptSystem;

/// Emitted when a user message enters a run: the initial message, a steer or a follow-up.
///
/// - Emitted by: the kernel at bootstrap, and the harness for steer and follow-up messages.
/// - Result: the reshaped message is stored in the thread and sent to the model.
/// - Suppress: the message is rejected; nothing is stored and no run starts.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "message.user-task", phase = Bootstrap, payload = KernelMessage, ctx = BaseCtx, suppressible)]
pub struct MessageUserTask;

/// Emitted for the assistant message of a step, before it is stored.
///
/// - Emitted by: the kernel, in Think, once the model's response is assembled.
/// - Result: the reshaped message is stored in the thread and shown to the user.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "message.assistant", phase = Think, payload = KernelMessage, ctx = BaseCtx)]
pub struct MessageAssistant;

/// Emitted when a tool result is added to the conversation.
///
/// - Emitted by: the kernel, in Act, after a tool call succeeds.
/// - Result: the reshaped message is what the model sees (redaction plugins rewrite it here).
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "message.tool-result", phase = Act, payload = KernelMessage, ctx = ToolResultCtx)]
pub struct MessageToolResult;

/// Emitted when a failed tool's error text is added to the conversation.
///
/// - Emitted by: the kernel, in Act, when a tool fails, panics, times out or gets invalid input.
/// - Result: the reshaped message is what the model sees.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "message.tool-error", phase = Act, payload = KernelMessage, ctx = ToolResultCtx)]
pub struct MessageToolError;

/// Emitted for each delta of text a model call streams (answer text, reasoning, a tool call's
/// arguments), before any subscriber sees it.
///
/// - Emitted by: the kernel, in Think, as the model streams (only when a handler is
///   registered), and once more with `end` set when a part ends (the stream switches between
///   reasoning and text, a tool call's arguments are complete, the call ends), so that a
///   handler that held text back can release it.
/// - Result: the reshaped text is what subscribers see (`message_delta`, `tool_input_delta`,
///   the display state, subagent text): a streaming redactor rewrites it here. The message
///   the model call produces is assembled from what the model sent and goes through
///   `message.assistant`.
/// - Suppress: subscribers see nothing of this delta.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "message.text-delta", phase = Think, payload = TextDelta, ctx = ModelCtx, suppressible)]
pub struct MessageTextDelta;

/// Emitted when the model stopped because it reached its output token limit.
///
/// - Emitted by: the kernel, in Think, when the finish reason is `length`.
/// - Result: the reshaped text is the continuation prompt sent to the model.
/// - Suppress: no continuation; the run ends with the truncated answer.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "message.max-tokens-recovery", phase = Think, payload = String, ctx = BaseCtx, suppressible)]
pub struct MessageMaxTokensRecovery;

/// Emitted when a subagent is spawned with a task.
///
/// - Emitted by: the harness's `subagent` tool, in Act.
/// - Result: the reshaped text is the task the subagent receives.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "message.subagent-handoff", phase = Act, payload = String, ctx = SubagentCtx)]
pub struct MessageSubagentHandoff;

/// Emitted before each call to a model provider.
///
/// - Emitted by: the kernel, in Think, after the system prompt, memory context and tools are
///   assembled; again for each retry attempt.
/// - Result: the reshaped request is exactly what the provider receives.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "model.request", phase = Think, payload = ModelRequest, ctx = ModelCtx)]
pub struct ModelRequestTag;

/// Emitted when a model's full response has been assembled from the stream.
///
/// - Emitted by: the kernel, in Think.
/// - Result: the reshaped response is what the kernel acts on (its text and tool calls).
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "model.response", phase = Think, payload = ModelResponse, ctx = ModelCtx)]
pub struct ModelResponseTag;

/// Emitted with the list of tools offered to the model for a step.
///
/// - Emitted by: the kernel, in Think, before the model call.
/// - Result: the reshaped list is the list offered (permission plugins remove denied tools).
///   The list is shared (`Arc<[ToolSpec]>`): a handler that leaves it as it is costs no copy;
///   one that changes it builds a new list.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "tool.schema", phase = Think, payload = Arc<[ToolSpec]>, ctx = BaseCtx)]
pub struct ToolSchema;

/// Emitted before a tool runs, after healing and before the permission gate.
///
/// - Emitted by: the kernel, in Act, once per tool call.
/// - Result: the reshaped call's arguments are the ones the tool receives.
/// - Suppress: the tool does not run; the model is told the call was blocked.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "tool.call", phase = Act, payload = ToolCall, ctx = ToolCallCtx, suppressible)]
pub struct ToolCallTag;

/// Emitted when the permission verdict for a tool call is decided.
///
/// - Emitted by: the kernel, in Act, after `tool.call`.
/// - Result: the reshaped verdict is applied: allow runs the tool, deny refuses it, ask waits
///   for the user. A verdict with `hardDeny` set can never be loosened by a later handler.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(
    name = "tool.gate-result",
    phase = Act,
    payload = GateVerdict,
    ctx = ToolCallCtx,
    constrain = GateVerdict::constrain
)]
pub struct ToolGateResult;

/// Emitted when healing repaired a tool call (name, argument names, JSON, types).
///
/// - Emitted by: the kernel, in Act, before `tool.call`.
/// - Result: the reshaped report's tool name and arguments are the ones used.
/// - Suppress: the repair is rejected; the model gets the original error to fix itself.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "tool.healing", phase = Act, payload = HealingReport, ctx = ToolCallCtx, suppressible)]
pub struct ToolHealing;

/// Emitted when the loop detector finds the agent repeating itself.
///
/// - Emitted by: the kernel, in Think, before the next model call.
/// - Result: the reshaped text is injected into the conversation as a nudge.
/// - Suppress: nothing is injected.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "nudge.loop-detected", phase = Think, payload = String, ctx = NudgeCtx, suppressible)]
pub struct NudgeLoopDetected;

/// Emitted when healing could not repair a tool call after every stage.
///
/// - Emitted by: the kernel, in Act.
/// - Result: the reshaped text is injected into the conversation as a nudge.
/// - Suppress: nothing is injected.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "nudge.healing-failure", phase = Act, payload = String, ctx = NudgeCtx, suppressible)]
pub struct NudgeHealingFailure;

/// Emitted when healing changed a tool call, to tell the model what was repaired.
///
/// - Emitted by: the kernel, in Act, after `tool.healing` accepted the repair.
/// - Result: the reshaped text is injected into the conversation as a nudge.
/// - Suppress: nothing is injected.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "nudge.healing-applied", phase = Act, payload = String, ctx = NudgeCtx, suppressible)]
pub struct NudgeHealingApplied;

/// Emitted when the model tries to finish before the required tools have run.
///
/// - Emitted by: the kernel, in Verify.
/// - Result: the reshaped text is injected and the run continues.
/// - Suppress: nothing is injected and the run may finish.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "nudge.required-tools-pending", phase = Verify, payload = String, ctx = NudgeCtx, suppressible)]
pub struct NudgeRequiredToolsPending;

/// Emitted when the verifier rejected the model's answer.
///
/// - Emitted by: the kernel, in Verify.
/// - Result: the reshaped text is injected and the model tries again.
/// - Suppress: nothing is injected; the run ends with the rejected answer.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "nudge.verifier-retry", phase = Verify, payload = String, ctx = NudgeCtx, suppressible)]
pub struct NudgeVerifierRetry;

/// Emitted when the kernel switched to another strategy.
///
/// - Emitted by: the kernel, in Observe, after `control.strategy-evaluated` recommended a switch.
/// - Result: the reshaped text is injected to tell the model what changed.
/// - Suppress: nothing is injected.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "nudge.strategy-handoff", phase = Observe, payload = String, ctx = NudgeCtx, suppressible)]
pub struct NudgeStrategyHandoff;

/// Emitted when the model tries to finish while tasks are still open.
///
/// - Emitted by: the kernel, in Verify, when the task list has incomplete tasks.
/// - Result: the reshaped text is injected and the run continues.
/// - Suppress: nothing is injected and the run may finish.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "nudge.tasks-incomplete", phase = Verify, payload = String, ctx = NudgeCtx, suppressible)]
pub struct NudgeTasksIncomplete;

/// Emitted when a tool result is recorded as a step of the run.
///
/// - Emitted by: the kernel, in Act, for every finished tool call (success or error).
/// - Result: the reshaped step is the one recorded in the kernel state.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "observation.tool-result", phase = Act, payload = ObservationStep, ctx = ToolResultCtx)]
pub struct ObservationToolResult;

/// Emitted when the observational-memory observer produced observations.
///
/// - Emitted by: the observational-memory plugin, in Memory.
/// - Result: the reshaped observations are the ones stored.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "observation.compression-summary", phase = Memory, payload = ObservationStep, ctx = MemoryCtx)]
pub struct ObservationCompressionSummary;

/// Emitted when the observational-memory reflector produced a reflection.
///
/// - Emitted by: the observational-memory plugin, in Memory.
/// - Result: the reshaped reflection is the one stored.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "observation.reflection", phase = Memory, payload = ObservationStep, ctx = MemoryCtx)]
pub struct ObservationReflection;

/// Emitted when observational memory assembled the context for a model call.
///
/// - Emitted by: the observational-memory plugin, in Memory, before `model.request`.
/// - Result: the reshaped context (reflections, observations, raw messages) is what the model gets.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "memory.context", phase = Memory, payload = MemoryContext, ctx = MemoryCtx)]
pub struct MemoryContextTag;

/// Emitted when a run begins.
///
/// - Emitted by: the kernel, at bootstrap.
/// - Result: observe only; handlers see the run's input, model and step limit.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "lifecycle.start", phase = Bootstrap, payload = RunStart, ctx = BaseCtx)]
pub struct LifecycleStart;

/// Emitted when the agent enters a failure state: a tool error, a refusal, a rejected answer,
/// a model error or a memory failure.
///
/// - Emitted by: the kernel, in Observe, with the real failure streak.
/// - Result: the reshaped reason and message are the ones recorded and reported.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "lifecycle.failure", phase = Observe, payload = LifecycleFailure, ctx = BaseCtx)]
pub struct LifecycleFailureTag;

/// Emitted when a run ends, however it ends.
///
/// - Emitted by: the kernel, at completion.
/// - Result: observe only; handlers see the outcome, usage and duration.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "lifecycle.complete", phase = Complete, payload = RunEnd, ctx = BaseCtx)]
pub struct LifecycleComplete;

/// Emitted when the strategy evaluator scored the current strategy after a failure.
///
/// - Emitted by: the kernel, in Observe.
/// - Result: the kernel acts on the reshaped `recommendedAction`: continue, switch to the next
///   untried strategy, or escalate.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "control.strategy-evaluated", phase = Observe, payload = StrategyEvaluation, ctx = BaseCtx)]
pub struct ControlStrategyEvaluated;

/// Emitted when the kernel is about to end the run.
///
/// - Emitted by: the kernel, in Verify.
/// - Result: setting `continueWith` vetoes the end: the run continues with that message, a
///   bounded number of times.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "decision.terminate", phase = Verify, payload = TerminateDecision, ctx = BaseCtx)]
pub struct DecisionTerminate;

/// Emitted when a subagent finished.
///
/// - Emitted by: the harness's `subagent` tool, in Act.
/// - Result: the reshaped result is what the parent agent sees.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "subagent.result", phase = Act, payload = SubagentResult, ctx = SubagentCtx)]
pub struct SubagentResultTag;

/// Emitted for each chunk of output a running tool reports (a command's stdout and stderr, a
/// partial result), before it is published.
///
/// - Emitted by: the harness, in Act, for the progress a tool reports through its channel
///   (`ToolContext::progress`), in order with the run's events; and, once the tool finished,
///   with `end` set for each output stream it wrote to, so that a handler that held text back
///   can release it. The context names the tool when the run started it (a subagent's tools
///   have an empty name).
/// - Result: the reshaped chunk is what user interfaces see (`shell_output`, `tool_update`,
///   the display state); what the model sees is the tool's result (`message.tool-result`).
/// - Suppress: the chunk is not shown.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "tool.output-delta", phase = Act, payload = OutputDelta, ctx = ToolCallCtx, suppressible)]
pub struct ToolOutputDelta;

/// Emitted with what user interfaces are shown for a tool result.
///
/// - Emitted by: the harness, in Act, before the `tool_end` event.
/// - Result: display events carry the reshaped `content`. It starts as what the model sees;
///   the payload also carries the tool's own output, so that a redaction plugin can apply a
///   policy of its own for screens (secrets as `••••••`) while another decides what the model
///   sees.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "display.tool-result", phase = Act, payload = DisplayToolResult, ctx = ToolResultCtx)]
pub struct DisplayToolResultTag;

/// Emitted when a thread was cloned, with the map from source to new message ids.
///
/// - Emitted by: the harness, outside a run.
/// - Result: observe only; plugins copy their records for the new thread.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "thread.cloned", phase = Session, payload = ThreadChange, ctx = ThreadCtx)]
pub struct ThreadCloned;

/// Emitted when a thread was deleted.
///
/// - Emitted by: the harness, outside a run.
/// - Result: observe only; plugins drop their records for the thread.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "thread.deleted", phase = Session, payload = ThreadChange, ctx = ThreadCtx)]
pub struct ThreadDeleted;

/// Emitted when an MCP server offered its tools: on connect, after the server said its tools
/// or resources changed (`notifications/tools/list_changed`), and after a restart.
///
/// - Emitted by: the `harness-mcp` client, outside a run's phases: before a step, when the
///   kernel asks its tool sources, or when a client is connected directly.
/// - Result: the reshaped list is what gets registered. Remove entries to hide tools, change
///   `name`, `description` or `category`, or trim `resources`; an entry whose `serverTool` the
///   server did not list, or whose name is invalid or taken, is dropped and reported.
/// - Suppress: none of the server's tools are registered.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "mcp.tools-listed", phase = Session, payload = McpToolList, ctx = McpCtx, suppressible)]
pub struct McpToolsListed;
