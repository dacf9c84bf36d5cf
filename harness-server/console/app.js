// The harness console: a plain client of the Open Harness API that serves it.
//
// It runs under a strict Content-Security-Policy (no inline code or styles, no eval, same origin
// only), so it builds every element with createElement/textContent, styles only through classes
// and attributes, and never uses innerHTML (tool inputs and model text are untrusted).
//
// The view of an execution is a pure function of its event stream (replayed from the start),
// plus the execution resource for what the stream cannot say (the final status, a wait the
// stream has not reached yet). So a reload that re-reads the stream rebuilds the same view.
"use strict";

const TOKEN_KEY = "harness-console.token";
// The tool whose input is the whole task list.
const TASK_TOOL = "task_write";
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

const app = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  base: null, // "/v1/harnesses/<id>", found at connect
  sessions: [],
  sessionId: null,
  run: null, // the attached execution (a Run)
  creatingSession: null, // a session being created (Send waits for it rather than make another)
  historyGen: 0, // drops answers of history loads that a newer one replaced
  executionsGen: 0,
};

// ---------------------------------------------------------------------------------------------
// Small helpers

const $ = (id) => document.getElementById(id);

/** Creates an element. `attrs`: attributes (null/undefined/false are left out), `on*` listeners. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const enc = encodeURIComponent;

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** JSON text pretty-printed when it parses, as is otherwise. */
function pretty(value) {
  if (typeof value !== "string") return JSON.stringify(value, null, 2);
  try {
    return JSON.stringify(JSON.parse(value), null, 2);
  } catch {
    return value;
  }
}

/** A tool's output as text: `{text}` is the usual shape; show anything else as JSON. */
function outputText(output) {
  if (output === null || output === undefined) return "";
  if (typeof output === "string") return output;
  if (typeof output.text === "string") return output.text;
  return JSON.stringify(output, null, 2);
}

function shortTime(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

// ---------------------------------------------------------------------------------------------
// Errors and the API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function errorFrom(response) {
  const text = await response.text().catch(() => "");
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  const code = body?.error?.code ?? `HTTP_${response.status}`;
  const message = body?.error?.message ?? (text || response.statusText);
  return new ApiError(response.status, code, message);
}

function showError(error) {
  // An aborted request is ours (a reload or another execution picked): nothing to say.
  if (error?.name === "AbortError") return;
  let text =
    error instanceof ApiError ? `${error.code}: ${error.message}` : String(error?.message ?? error);
  if (error instanceof ApiError && error.status === 401) {
    text = "The server refused the token. Paste the token `harness serve` printed.";
    $("token").focus();
  }
  $("error-text").textContent = text;
  $("error").hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error-text").textContent = "";
}

/** Calls the API under the harness's path (or an absolute /v1 path), with the token. */
async function api(method, path, body, signal) {
  const headers = { Authorization: `Bearer ${app.token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const url = path.startsWith("/v1/") ? path : app.base + path;
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await errorFrom(response);
  return response.status === 204 ? null : response.json();
}

// ---------------------------------------------------------------------------------------------
// The URL hash holds the session and execution, so a reload (or a shared link) re-attaches.

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { session: params.get("session"), execution: params.get("execution") };
}

function writeHash() {
  const params = new URLSearchParams();
  if (app.sessionId) params.set("session", app.sessionId);
  if (app.run) params.set("execution", app.run.id);
  const hash = params.toString();
  // replaceState does not fire hashchange, which is kept for edits and links from outside.
  if (location.hash.slice(1) !== hash) {
    history.replaceState(null, "", hash ? `#${hash}` : location.pathname + location.search);
  }
}

// ---------------------------------------------------------------------------------------------
// One execution's live view, built from its stream frames.

class Run {
  constructor(id, message) {
    this.id = id;
    this.sessionId = null;
    this.startedAt = null;
    this.userMessage = null;
    this.abort = new AbortController();
    this.lastSeq = 0; // the id of the last frame applied (for Last-Event-ID on reconnect)
    this.ended = false; // `done` seen
    this.final = null; // completed | failed | cancelled, from the execution resource after `done`
    this.snapshotStatus = null;
    this.reconnecting = false;
    this.tools = new Map(); // call id -> tool card
    this.startSeq = new Map(); // call id -> seq of its tool_call_start
    this.results = new Set(); // call ids with a tool_result
    this.streamWait = null; // the last awaiting_input frame (with its seq)
    this.waitsSeen = new Set(); // call ids the stream has asked about
    this.snapshotWait = null; // awaiting_input of the execution resource
    this.answered = new Map(); // call id -> the answer sent, until the stream moves on
    this.pendingKey = null; // what the input panel shows now (not re-rendered while equal)
    this.lastItem = null; // the transcript's last text or thinking block, to append deltas to
    this.build();
    if (message) this.setUserMessage(message);
  }

  build() {
    this.statusEl = h(
      "span",
      { class: "status", "data-testid": "status", "data-status": "pending" },
      "pending",
    );
    this.cancelEl = h(
      "button",
      { type: "button", "data-testid": "cancel", onclick: () => this.cancel() },
      "Cancel",
    );
    this.userEl = h("p", { class: "user-message", "data-testid": "user-message", hidden: true });
    this.progressEl = h("progress", { max: 100, value: 0, "data-testid": "progress" });
    this.progressLabel = h("span", { class: "progress-label", "data-testid": "progress-label" });
    this.tasksEl = h("ol", { class: "tasks", "data-testid": "tasks" });
    this.taskBox = h(
      "section",
      { class: "task-box", "data-testid": "task-panel", hidden: true },
      h("h3", {}, "Tasks"),
      h("div", { class: "progress-row" }, this.progressEl, this.progressLabel),
      this.tasksEl,
    );
    this.subagentsEl = h("ul", { class: "subagents", "data-testid": "subagents" });
    this.subagentBox = h(
      "section",
      { class: "subagent-box", "data-testid": "subagent-panel", hidden: true },
      h("h3", {}, "Subagents"),
      this.subagentsEl,
    );
    this.subagents = new Map(); // the spawning call's id -> its list item
    this.itemsEl = h("div", { class: "transcript", "data-testid": "transcript" });
    this.pendingEl = h("div", { class: "pending", "data-testid": "pending" });
    this.usageEl = h("p", { class: "usage", "data-testid": "usage", hidden: true });
    this.root = h(
      "article",
      { class: "run", "data-testid": "run", "data-execution-id": this.id },
      h(
        "header",
        { class: "run-head" },
        h("h2", {}, "Execution ", h("code", { "data-testid": "execution-id" }, this.id)),
        this.statusEl,
        this.cancelEl,
      ),
      this.userEl,
      this.taskBox,
      this.subagentBox,
      this.itemsEl,
      this.pendingEl,
      this.usageEl,
    );
  }

  setUserMessage(text) {
    this.userMessage = text;
    this.userEl.textContent = text;
    this.userEl.hidden = false;
  }

  /** What GET /executions/{id} said: the status, and a wait the stream may not have reached. */
  setSnapshot(execution) {
    this.sessionId = execution.session_id;
    this.startedAt = execution.started_at;
    this.snapshotStatus = execution.status;
    this.snapshotWait = execution.awaiting_input ?? null;
    this.render();
  }

  // --- the stream -----------------------------------------------------------------------------

  /** Reads the stream to its `done`, reconnecting from the last frame if it breaks off. */
  async follow() {
    const signal = this.abort.signal;
    let delay = 500;
    while (!this.ended && !signal.aborted) {
      try {
        const headers = { Authorization: `Bearer ${app.token}`, Accept: "text/event-stream" };
        // A first read (and so a reload) starts from the beginning; a reconnect goes on.
        if (this.lastSeq > 0) headers["Last-Event-ID"] = String(this.lastSeq);
        const response = await fetch(`${app.base}/executions/${enc(this.id)}/stream`, {
          headers,
          signal,
        });
        if (!response.ok) throw await errorFrom(response);
        this.setReconnecting(false);
        delay = 500;
        await this.readFrames(response.body);
      } catch (error) {
        if (signal.aborted) return;
        // A 4xx will not get better by asking again (gone, unknown, bad token).
        if (error instanceof ApiError && error.status < 500 && error.status !== 429) {
          showError(error);
          return;
        }
      }
      if (this.ended || signal.aborted) return;
      // The stream ended without `done` (the server restarted, the network dropped): resume.
      this.setReconnecting(true);
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 10000);
    }
  }

  /** Splits the SSE body into frames (EventSource cannot send the Authorization header). */
  async readFrames(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      // Line ends may be \r\n or \r; a \r at the very end may be half of a \r\n: keep it.
      buffer = (buffer + value).replace(/\r\n|\r(?=[^])/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        this.onBlock(block);
        if (this.ended) {
          reader.cancel().catch(() => {});
          return;
        }
      }
    }
  }

  onBlock(block) {
    let seq = null;
    let event = null;
    const data = [];
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue; // comments keep the connection alive
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") data.push(value);
      else if (field === "id") seq = Number(value);
      else if (field === "event") event = value;
    }
    if (data.length === 0) return;
    // A frame seen already (a reconnect that overlaps) is not applied twice.
    if (seq !== null && Number.isFinite(seq)) {
      if (seq <= this.lastSeq) return;
      this.lastSeq = seq;
    }
    let frame;
    try {
      frame = JSON.parse(data.join("\n"));
    } catch {
      this.addNote("error", `an unreadable ${event ?? "frame"}: ${data.join("\n")}`);
      return;
    }
    frame.type ??= event;
    this.apply(frame, seq ?? this.lastSeq);
  }

  apply(frame, seq) {
    switch (frame.type) {
      case "text":
      case "thinking":
        this.appendText(frame.type, frame.content ?? "");
        break;
      case "tool_call_start": {
        this.startSeq.set(frame.id, seq);
        const tool = this.tool(frame.id, frame.name, frame.input);
        tool.setState("running");
        if (frame.name === TASK_TOOL && Array.isArray(frame.input?.tasks))
          this.setTasks(frame.input.tasks);
        break;
      }
      case "tool_result": {
        this.results.add(frame.id);
        const tool = this.tool(frame.id);
        tool.setOutput(outputText(frame.output));
        tool.setState(frame.success === false ? "failed" : "succeeded");
        break;
      }
      case "tool_call_end":
        this.tool(frame.id).root.setAttribute("data-ended", "true");
        break;
      case "progress":
        this.setProgress(frame);
        break;
      case "awaiting_input": {
        this.streamWait = { ...frame, seq };
        this.waitsSeen.add(frame.call_id);
        // An approval comes before its tool_call_start: show the call it is about already.
        const tool =
          this.tools.get(frame.call_id) ?? this.tool(frame.call_id, frame.tool_name, frame.input);
        tool.setState(frame.kind === "approval" ? "awaiting-approval" : "awaiting-answer");
        break;
      }
      case "subagent_start":
      case "subagent_end":
        this.setSubagent(frame);
        break;
      case "error":
        this.addNote(
          "error",
          `${frame.code ?? "error"}: ${frame.message ?? ""}`,
          frame.recoverable,
        );
        break;
      case "done":
        this.ended = true;
        this.setUsage(frame.usage);
        // A call the run never finished (cancelled while it waited) is not left "running".
        for (const tool of this.tools.values()) {
          if (!this.results.has(tool.id)) tool.setState("interrupted");
        }
        this.settle();
        break;
      default:
        // An event type this console does not know: keep going, it may be an extension.
        break;
    }
    this.render();
  }

  // --- pieces of the view -------------------------------------------------------------------

  appendText(kind, content) {
    // Deltas of one message arrive as consecutive frames: they extend the same block.
    if (!this.lastItem || this.lastItem.kind !== kind) {
      const el = h("div", { class: kind, "data-testid": kind });
      this.itemsEl.append(el);
      this.lastItem = { kind, el };
    }
    this.lastItem.el.append(content);
  }

  addNote(kind, text, recoverable) {
    this.itemsEl.append(
      h(
        "div",
        {
          class: `note note-${kind}`,
          "data-testid": "stream-error",
          "data-recoverable": recoverable ? "true" : null,
        },
        text,
      ),
    );
    this.lastItem = null;
  }

  /** The card of a tool call, made the first time the call is mentioned. */
  tool(id, name, input) {
    let tool = this.tools.get(id);
    if (!tool) {
      tool = new ToolCard(id, name ?? "(unknown tool)", input);
      this.tools.set(id, tool);
      this.itemsEl.append(tool.root);
      this.lastItem = null;
    } else if (input !== undefined) {
      tool.setInput(input);
    }
    return tool;
  }

  setTasks(tasks) {
    this.taskBox.hidden = false;
    this.tasksEl.replaceChildren(
      ...tasks.map((task) =>
        h(
          "li",
          {
            class: "task",
            "data-testid": "task",
            "data-status": task.status ?? "pending",
            title: task.activeForm ?? null,
          },
          h("span", { class: "task-status" }, labelOfTask(task.status)),
          " ",
          h("span", { class: "task-content" }, task.content ?? ""),
        ),
      ),
    );
  }

  /** A subagent the model spawned: started (running) or ended (completed or failed). */
  setSubagent(frame) {
    this.subagentBox.hidden = false;
    let item = this.subagents.get(frame.call_id);
    if (!item) {
      item = {
        status: h("span", { class: "subagent-status" }),
        detail: h("span", { class: "subagent-detail" }),
        root: null,
      };
      item.root = h(
        "li",
        { class: "subagent", "data-testid": "subagent", "data-call-id": frame.call_id },
        h("strong", {}, frame.agent_type ?? "subagent"),
        " ",
        item.status,
        " ",
        item.detail,
      );
      this.subagents.set(frame.call_id, item);
      this.subagentsEl.append(item.root);
    }
    if (frame.type === "subagent_start") {
      item.root.dataset.status = "running";
      item.status.textContent = "running";
      item.detail.textContent = `${frame.task ?? ""} (${frame.model_id ?? "?"})`;
    } else {
      item.root.dataset.status = frame.success === false ? "failed" : "completed";
      item.status.textContent = item.root.dataset.status;
      const seconds = (Number(frame.duration_ms) || 0) / 1000;
      item.detail.append(` in ${seconds.toFixed(1)} s`);
    }
  }

  setProgress(frame) {
    this.taskBox.hidden = false;
    const percentage = Math.max(0, Math.min(100, Number(frame.percentage) || 0));
    this.progressEl.value = percentage;
    const parts = [];
    if (frame.total_steps) parts.push(`step ${frame.step_number ?? "?"} of ${frame.total_steps}`);
    if (frame.step) parts.push(frame.step);
    parts.push(`${Math.round(percentage)}%`);
    this.progressLabel.textContent = parts.join(" · ");
  }

  setUsage(usage) {
    if (!usage) return;
    const n = (v) => (typeof v === "number" ? v.toLocaleString("en-US") : "?");
    this.usageEl.textContent =
      `Usage: ${n(usage.input_tokens)} input + ${n(usage.output_tokens)} output` +
      ` = ${n(usage.total_tokens)} tokens`;
    this.usageEl.hidden = false;
  }

  setReconnecting(on) {
    this.reconnecting = on;
    this.render();
  }

  // --- waiting for input --------------------------------------------------------------------

  /** The approval or question the run waits for now, or null. */
  pending() {
    // A finished execution (replayed) or a stream past `done` waits for nothing.
    if (this.ended || this.final || TERMINAL.has(this.snapshotStatus)) return null;
    const wait = this.streamWait;
    if (wait && !this.isResolved(wait)) return wait;
    // The execution resource said it waits, and the stream has not got there yet.
    const snap = this.snapshotWait;
    if (snap && !this.waitsSeen.has(snap.call_id) && !this.results.has(snap.call_id)) return snap;
    return null;
  }

  isResolved(wait) {
    if (this.results.has(wait.call_id)) return true;
    // No frame says "answered": an approved call starts after its wait, a declined one ends.
    return wait.kind === "approval" && (this.startSeq.get(wait.call_id) ?? -1) > wait.seq;
  }

  renderPending() {
    const wait = this.pending();
    const answer = wait ? this.answered.get(wait.call_id) : undefined;
    const key = wait ? `${wait.kind}:${wait.call_id}:${answer ?? ""}` : "";
    // Rebuilt only when what waits changes, so a half-typed answer is not wiped by a frame.
    if (key === this.pendingKey) return;
    this.pendingKey = key;
    if (!wait) {
      this.pendingEl.replaceChildren();
      return;
    }
    const sent = answer !== undefined;
    const panel =
      wait.kind === "approval" ? this.approvalPanel(wait, sent) : this.questionPanel(wait, sent);
    if (sent)
      panel.append(
        h(
          "p",
          { class: "sent", "data-testid": "answer-sent" },
          `Sent "${answer}"; waiting for the run to go on…`,
        ),
      );
    this.pendingEl.replaceChildren(panel);
  }

  approvalPanel(wait, sent) {
    return h(
      "div",
      {
        class: "await",
        "data-testid": "awaiting",
        "data-kind": "approval",
        "data-call-id": wait.call_id,
      },
      h(
        "p",
        { class: "await-title" },
        "Allow ",
        h("code", {}, wait.tool_name),
        " to run with this input?",
      ),
      h("pre", { class: "json" }, pretty(wait.input ?? {})),
      h(
        "div",
        { class: "row" },
        h(
          "button",
          {
            type: "button",
            class: "primary",
            "data-testid": "approve",
            disabled: sent,
            onclick: () => this.answer(wait, "yes"),
          },
          "Approve",
        ),
        h(
          "button",
          {
            type: "button",
            "data-testid": "approve-always",
            disabled: sent,
            onclick: () => this.answer(wait, "always"),
          },
          "Always allow",
        ),
        h(
          "button",
          {
            type: "button",
            class: "danger",
            "data-testid": "decline",
            disabled: sent,
            onclick: () => this.answer(wait, "no"),
          },
          "Decline",
        ),
      ),
    );
  }

  questionPanel(wait, sent) {
    // The prompt is the tool's suspend payload: {question, options:[{label, description}]}.
    const prompt = wait.prompt ?? wait.input ?? {};
    const options = Array.isArray(prompt.options) ? prompt.options : [];
    const field = h("input", {
      type: "text",
      "data-testid": "answer-text",
      placeholder: "or type an answer",
      disabled: sent,
    });
    const form = h(
      "form",
      {
        class: "row",
        onsubmit: (event) => {
          event.preventDefault(); // the CSP forbids form submissions; the answer goes by fetch
          if (field.value.trim()) this.answer(wait, field.value.trim());
        },
      },
      field,
      h("button", { type: "submit", "data-testid": "answer-send", disabled: sent }, "Answer"),
    );
    return h(
      "div",
      {
        class: "await",
        "data-testid": "awaiting",
        "data-kind": "question",
        "data-call-id": wait.call_id,
      },
      h(
        "p",
        { class: "await-title", "data-testid": "question" },
        String(prompt.question ?? `${wait.tool_name} asks:`),
      ),
      h(
        "div",
        { class: "options" },
        options.map((option) => {
          const label = typeof option === "string" ? option : String(option.label ?? "");
          const description = typeof option === "string" ? null : option.description;
          return h(
            "button",
            {
              type: "button",
              class: "option",
              "data-testid": "option",
              "data-label": label,
              disabled: sent,
              onclick: () => this.answer(wait, label),
            },
            h("span", { class: "option-label" }, label),
            description ? h("span", { class: "option-description" }, String(description)) : null,
          );
        }),
      ),
      form,
    );
  }

  async answer(wait, data) {
    this.answered.set(wait.call_id, data);
    this.render();
    try {
      await api("POST", `/executions/${enc(this.id)}/input`, { data, call_id: wait.call_id });
    } catch (error) {
      // 409: it no longer waits for this (answered elsewhere, timed out); 410: it is over.
      this.answered.delete(wait.call_id);
      showError(error);
      await this.refreshSnapshot();
    }
  }

  async refreshSnapshot() {
    try {
      const { execution } = await api(
        "GET",
        `/executions/${enc(this.id)}`,
        undefined,
        this.abort.signal,
      );
      this.setSnapshot(execution);
    } catch (error) {
      showError(error);
    }
  }

  async cancel() {
    this.cancelEl.disabled = true;
    try {
      await api("POST", `/executions/${enc(this.id)}/cancel`);
    } catch (error) {
      this.cancelEl.disabled = false;
      showError(error);
    }
  }

  /** After `done`: the stream does not say how the run ended, the execution resource does. */
  async settle() {
    // Attached to a finished execution: its status is known already.
    if (TERMINAL.has(this.snapshotStatus)) {
      this.final = this.snapshotStatus;
      this.render();
      return;
    }
    for (let attempt = 0; attempt < 40 && !this.abort.signal.aborted; attempt++) {
      try {
        const { execution } = await api(
          "GET",
          `/executions/${enc(this.id)}`,
          undefined,
          this.abort.signal,
        );
        if (TERMINAL.has(execution.status)) {
          this.final = execution.status;
          this.render();
          loadExecutions();
          loadSessions().catch(showError);
          return;
        }
      } catch (error) {
        showError(error);
        return;
      }
      await sleep(250, this.abort.signal);
    }
  }

  // --- status line --------------------------------------------------------------------------

  statusKey() {
    if (this.final) return this.final;
    if (this.ended) return "finishing";
    // A finished execution whose stream is still being read: not "running", not done yet.
    if (TERMINAL.has(this.snapshotStatus)) return "loading";
    const wait = this.pending();
    if (wait) return wait.kind === "approval" ? "awaiting-approval" : "awaiting-answer";
    if (this.lastSeq > 0) return "running";
    return this.snapshotStatus ?? "pending";
  }

  render() {
    const key = this.statusKey();
    this.statusEl.setAttribute("data-status", key);
    this.statusEl.textContent =
      key.replace("-", " ") + (this.reconnecting && !this.final ? " (reconnecting…)" : "");
    this.cancelEl.hidden = Boolean(this.final || this.ended || TERMINAL.has(this.snapshotStatus));
    this.renderPending();
    updateComposer();
  }
}

function labelOfTask(status) {
  if (status === "completed") return "[done]";
  if (status === "in_progress") return "[doing]";
  return "[todo]";
}

/** One tool call: its name, state, input and output. */
class ToolCard {
  constructor(id, name, input) {
    this.id = id;
    this.stateEl = h("span", { class: "tool-state", "data-testid": "tool-state" });
    this.inputEl = h("pre", { class: "json tool-input", "data-testid": "tool-input" });
    this.outputEl = h("pre", { class: "tool-output", "data-testid": "tool-output", hidden: true });
    this.root = h(
      "div",
      { class: "tool", "data-testid": "tool", "data-tool-id": id, "data-tool-name": name },
      h("div", { class: "tool-head" }, h("code", { class: "tool-name" }, name), this.stateEl),
      this.inputEl,
      this.outputEl,
    );
    this.setInput(input);
    this.setState("running");
  }

  setInput(input) {
    this.inputEl.textContent = input === undefined ? "" : pretty(input);
  }

  setOutput(text) {
    this.outputEl.textContent = pretty(text);
    this.outputEl.hidden = false;
  }

  setState(state) {
    this.root.setAttribute("data-state", state);
    this.stateEl.textContent = state.replace("-", " ");
  }
}

// ---------------------------------------------------------------------------------------------
// Sessions, history and the list of executions

async function loadSessions() {
  const page = await api("GET", "/sessions?limit=100");
  app.sessions = page.data ?? [];
  renderSessions();
}

function renderSessions() {
  $("sessions").replaceChildren(
    ...app.sessions.map((session) =>
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: "session",
            "data-testid": "session",
            "data-session-id": session.id,
            "aria-current": session.id === app.sessionId ? "true" : null,
            onclick: () => selectSession(session.id).catch(showError),
          },
          h("span", { class: "session-name" }, session.name || session.id),
          h(
            "span",
            { class: "meta" },
            `${session.message_count ?? 0} messages · ${shortTime(session.updated_at)}`,
          ),
        ),
      ),
    ),
  );
  if (app.sessions.length === 0)
    $("sessions").append(h("li", { class: "empty" }, "No sessions yet."));
}

function createSession() {
  app.creatingSession = makeSession().finally(() => {
    app.creatingSession = null;
  });
  return app.creatingSession;
}

async function makeSession() {
  const name = $("new-session-name").value.trim();
  const { session } = await api("POST", "/sessions", name ? { name } : {});
  $("new-session-name").value = "";
  app.sessions = [session, ...app.sessions.filter((s) => s.id !== session.id)];
  await selectSession(session.id);
  return session;
}

async function selectSession(id, { keepRun = false } = {}) {
  if (!keepRun && app.run && app.run.sessionId !== id) detach();
  app.sessionId = id;
  writeHash();
  if (!app.sessions.some((s) => s.id === id)) await loadSessions(); // newer than the list
  renderSessions();
  updateComposer();
  await Promise.all([refreshHistory(), loadExecutions()]);
}

/** Every message of a session, oldest first (the API pages by 100). */
async function fetchHistory(sessionId) {
  const messages = [];
  for (let page = 0; page < 50; page++) {
    const body = await api(
      "GET",
      `/sessions/${enc(sessionId)}/history?limit=100&offset=${messages.length}`,
    );
    messages.push(...(body.data ?? []));
    if (!body.has_more || (body.data ?? []).length === 0) break;
  }
  return messages;
}

/**
 * Shows the session's messages from before the attached execution (its own messages are in its
 * live view, from the stream). The execution resource does not carry the message that started
 * it, so after a reload that message is found here: the first user message from its start on.
 */
async function refreshHistory() {
  const gen = ++app.historyGen;
  const sessionId = app.sessionId;
  if (!sessionId) {
    $("history").replaceChildren();
    return;
  }
  const messages = await fetchHistory(sessionId);
  if (gen !== app.historyGen) return;
  const run = app.run && app.run.sessionId === sessionId ? app.run : null;
  const cutoff = run?.startedAt ? Date.parse(run.startedAt) : Infinity;
  const earlier = messages.filter((m) => !(Date.parse(m.created_at) >= cutoff));
  if (run && run.userMessage === null) {
    const first = messages.find((m) => m.role === "user" && Date.parse(m.created_at) >= cutoff);
    if (first) run.setUserMessage(contentText(first.content));
  }
  $("history").replaceChildren(...earlier.map(renderMessage));
}

function contentText(content) {
  return typeof content === "string" ? content : JSON.stringify(content, null, 2);
}

function renderMessage(message) {
  const calls = (message.tool_calls ?? []).map((call) =>
    h(
      "details",
      { class: "history-tool", "data-testid": "history-tool", "data-tool-name": call.name },
      h("summary", {}, h("code", {}, call.name), ` ${call.status ?? ""}`),
      h("pre", { class: "json" }, pretty(call.input ?? {})),
      call.output ? h("pre", {}, pretty(outputText(call.output))) : null,
    ),
  );
  const content = contentText(message.content ?? "");
  return h(
    "div",
    {
      class: `message message-${message.role}`,
      "data-testid": "history-message",
      "data-role": message.role,
    },
    h("span", { class: "role" }, message.role),
    content ? h("div", { class: "content" }, content) : null,
    calls,
  );
}

/** The session's executions (the API lists all of them: filtered here by session). */
async function loadExecutions() {
  const gen = ++app.executionsGen;
  const sessionId = app.sessionId;
  if (!sessionId) {
    $("executions").replaceChildren();
    return;
  }
  let page;
  try {
    page = await api("GET", "/executions?limit=100");
  } catch (error) {
    showError(error);
    return;
  }
  if (gen !== app.executionsGen) return;
  const mine = (page.data ?? []).filter((e) => e.session_id === sessionId);
  $("executions").replaceChildren(
    ...mine.map((execution) =>
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: "execution-link",
            "data-testid": "execution-link",
            "data-execution-id": execution.id,
            "aria-current": app.run?.id === execution.id ? "true" : null,
            onclick: () => attach(execution.id).catch(showError),
          },
          h(
            "span",
            { class: `badge badge-${execution.status}` },
            execution.awaiting_input ? "waiting" : execution.status,
          ),
          h("span", { class: "meta" }, shortTime(execution.started_at)),
        ),
      ),
    ),
  );
  if (mine.length === 0) $("executions").append(h("li", { class: "empty" }, "None yet."));
}

// ---------------------------------------------------------------------------------------------
// Attaching to an execution

function emptyExecution() {
  $("execution").replaceChildren(
    h(
      "p",
      { class: "empty", "data-testid": "no-execution" },
      "Send a message to start an execution, or pick one.",
    ),
  );
}

function detach() {
  if (app.run) app.run.abort.abort();
  app.run = null;
  emptyExecution();
  writeHash();
  updateComposer();
}

async function attach(executionId, { message } = {}) {
  if (app.run?.id === executionId) return;
  detach();
  const run = new Run(executionId, message);
  app.run = run;
  $("execution").replaceChildren(run.root);
  writeHash();
  let execution;
  try {
    ({ execution } = await api(
      "GET",
      `/executions/${enc(executionId)}`,
      undefined,
      run.abort.signal,
    ));
  } catch (error) {
    if (app.run === run) detach();
    throw error;
  }
  if (app.run !== run) return;
  run.setSnapshot(execution);
  run.follow();
  if (app.sessionId !== execution.session_id)
    await selectSession(execution.session_id, { keepRun: true });
  else await Promise.all([refreshHistory(), loadExecutions()]);
}

async function send() {
  const text = $("message").value.trim();
  if (!text) return;
  $("send").disabled = true;
  try {
    // A session being made was asked for last: the message goes there.
    const sessionId = app.creatingSession
      ? (await app.creatingSession).id
      : (app.sessionId ?? (await createSession()).id);
    const started = await api("POST", "/execute", { message: text, session_id: sessionId });
    $("message").value = "";
    await attach(started.execution_id, { message: text });
  } finally {
    updateComposer();
  }
}

/** One execution at a time per session: Send waits while the attached one runs. */
function updateComposer() {
  const busy = Boolean(app.run && !app.run.final && app.run.sessionId === app.sessionId);
  $("send").disabled = !app.base || busy;
}

// ---------------------------------------------------------------------------------------------
// Start-up

async function connect() {
  clearError();
  if (!app.token) {
    $("token").focus();
    return;
  }
  // The harness id is the first (and on `harness serve`, only) one the server lists.
  const { data } = await api("GET", "/v1/harnesses");
  app.base = `/v1/harnesses/${enc(data?.[0]?.id ?? "local")}`;
  document.body.setAttribute("data-connected", "true");
  await loadSessions();
  await route();
}

/** Makes the page show what the hash names. */
async function route() {
  if (!app.base) return;
  const { session, execution } = readHash();
  if (execution) await attach(execution);
  else if (session) await selectSession(session);
  else updateComposer();
}

function wire() {
  $("token").value = app.token;
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault(); // form-action 'none': nothing may be submitted, so JS does it
    app.token = $("token").value.trim();
    sessionStorage.setItem(TOKEN_KEY, app.token);
    connect().catch(showError);
  });
  $("new-session-form").addEventListener("submit", (event) => {
    event.preventDefault();
    createSession().catch(showError);
  });
  $("message-form").addEventListener("submit", (event) => {
    event.preventDefault();
    send().catch(showError);
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (!$("send").disabled) send().catch(showError);
    }
  });
  $("error-close").addEventListener("click", clearError);
  window.addEventListener("hashchange", () => route().catch(showError));
  emptyExecution();
  updateComposer();
  connect().catch(showError);
}

wire();
