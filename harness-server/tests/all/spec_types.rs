//! The response types of the Open Harness API v0.2.0 (`spec/openharness.mapi.md`), transcribed
//! from its TypeScript as JSON Schemas: required fields are the ones the spec does not mark
//! optional, extra fields are allowed (interfaces are open). Independent of the server's own
//! document, so that a body the document allows but the spec does not is caught.

use serde_json::{Value, json};

const ISO8601: &str =
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$";

fn time() -> Value {
    json!({ "type": "string", "pattern": ISO8601 })
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({ "type": "object", "required": required, "properties": properties })
}

fn page(item: Value) -> Value {
    object(
        &["data", "total", "limit", "offset", "has_more"],
        json!({
            "data": { "type": "array", "items": item },
            "total": { "type": "integer" },
            "limit": { "type": "integer" },
            "offset": { "type": "integer" },
            "has_more": { "type": "boolean" }
        }),
    )
}

fn domain() -> Value {
    object(
        &["supported", "operations"],
        json!({
            "supported": { "type": "boolean" },
            "operations": { "type": "array", "items": { "type": "string" } },
            "limitations": { "type": "array", "items": { "type": "string" } }
        }),
    )
}

fn manifest() -> Value {
    let keys = [
        "agents",
        "skills",
        "mcp",
        "execution",
        "sessions",
        "memory",
        "subagents",
        "files",
        "hooks",
        "planning",
        "models",
    ];
    let properties: serde_json::Map<String, Value> =
        keys.iter().map(|key| (key.to_string(), domain())).collect();
    object(&keys, Value::Object(properties))
}

fn harness() -> Value {
    object(
        &[
            "id",
            "name",
            "vendor",
            "description",
            "execution_type",
            "status",
            "capabilities",
            "created_at",
            "updated_at",
        ],
        json!({
            "execution_type": { "enum": ["hosted", "sdk", "ide"] },
            "status": { "enum": ["active", "beta", "coming_soon", "maintenance", "deprecated"] },
            "capabilities": manifest(),
            "created_at": time(), "updated_at": time()
        }),
    )
}

fn session() -> Value {
    object(
        &[
            "id",
            "harness_id",
            "status",
            "message_count",
            "created_at",
            "updated_at",
        ],
        json!({
            "name": { "type": "string" },
            "status": { "enum": ["active", "paused", "ended"] },
            "message_count": { "type": "integer" },
            "created_at": time(), "updated_at": time()
        }),
    )
}

fn call_status() -> Value {
    json!({ "enum": ["pending", "running", "completed", "failed"] })
}

fn message() -> Value {
    object(
        &["id", "role", "content", "created_at"],
        json!({
            "role": { "enum": ["user", "assistant", "system"] },
            "content": { "type": "string" },
            "tool_calls": { "type": "array", "items": object(&["id", "name", "input", "status"], json!({
                "input": { "type": "object" }, "output": { "type": "object" }, "status": call_status()
            })) },
            "created_at": time()
        }),
    )
}

fn execution_status() -> Value {
    json!({ "enum": ["pending", "running", "completed", "failed", "cancelled"] })
}

fn execution() -> Value {
    object(
        &[
            "id",
            "harness_id",
            "status",
            "started_at",
            "artifacts_count",
        ],
        json!({
            "status": execution_status(),
            "progress": object(&["percentage", "current_step", "steps_completed", "steps_total"], json!({})),
            "started_at": time(), "completed_at": time(),
            "artifacts_count": { "type": "integer" }
        }),
    )
}

fn usage() -> Value {
    object(
        &["input_tokens", "output_tokens", "total_tokens"],
        json!({
            "input_tokens": { "type": "integer" },
            "output_tokens": { "type": "integer" },
            "total_tokens": { "type": "integer" }
        }),
    )
}

fn hook() -> Value {
    object(
        &["id", "event", "handler", "enabled"],
        json!({
            "event": { "enum": ["pre_tool", "post_tool", "stop", "error", "custom"] },
            "handler": { "oneOf": [
                object(&["type", "url"], json!({ "type": { "const": "webhook" }, "url": { "type": "string" } })),
                object(&["type", "command"], json!({ "type": { "const": "command" }, "command": { "type": "string" } }))
            ] },
            "enabled": { "type": "boolean" }
        }),
    )
}

fn agent() -> Value {
    object(
        &[
            "id",
            "name",
            "vendorKey",
            "agentKey",
            "version",
            "slug",
            "description",
            "tags",
            "skills",
            "mcp_servers",
            "config",
            "created_at",
            "updated_at",
        ],
        json!({
            "tags": { "type": "array", "items": { "type": "string" } },
            "skills": { "type": "array" },
            "mcp_servers": { "type": "array" },
            "config": object(&[], json!({
                "model": { "type": ["string", "object"] },
                "system_prompt": { "type": "string" },
                "tools_access": object(&[], json!({
                    "allow": { "type": "array", "items": { "type": "string" } },
                    "deny": { "type": "array", "items": { "type": "string" } }
                }))
            })),
            "created_at": time(), "updated_at": time()
        }),
    )
}

fn block() -> Value {
    object(
        &["label", "value", "read_only", "updated_at"],
        json!({ "read_only": { "type": "boolean" }, "updated_at": time() }),
    )
}

fn tool() -> Value {
    object(
        &["id", "name", "description", "source", "input_schema"],
        json!({
            "source": { "enum": ["builtin", "mcp", "skill", "custom"] },
            "input_schema": { "type": "object" }
        }),
    )
}

fn file() -> Value {
    object(
        &["path", "name", "type", "modified_at"],
        json!({
            "type": { "enum": ["file", "directory"] },
            "size_bytes": { "type": "integer" },
            "mime_type": { "type": "string" },
            "modified_at": time()
        }),
    )
}

fn mcp_tool() -> Value {
    object(
        &["name", "description", "input_schema"],
        json!({ "name": { "type": "string" }, "description": { "type": "string" }, "input_schema": { "type": "object" } }),
    )
}

fn mcp_resource() -> Value {
    object(
        &["uri", "name"],
        json!({ "uri": { "type": "string" }, "name": { "type": "string" }, "mime_type": { "type": "string" } }),
    )
}

fn mcp_prompt() -> Value {
    object(
        &["name", "description"],
        json!({
            "name": { "type": "string" },
            "description": { "type": "string" },
            "arguments": { "type": "array", "items": object(&["name", "description", "required"], json!({
                "name": { "type": "string" }, "description": { "type": "string" }, "required": { "type": "boolean" }
            })) }
        }),
    )
}

fn mcp_server() -> Value {
    let transport = json!({ "oneOf": [
        object(&["type", "command"], json!({ "type": { "const": "stdio" }, "command": { "type": "string" },
            "args": { "type": "array", "items": { "type": "string" } } })),
        object(&["type", "url"], json!({ "type": { "const": "http" }, "url": { "type": "string" } })),
        object(&["type", "url"], json!({ "type": { "const": "sse" }, "url": { "type": "string" } }))
    ] });
    object(
        &[
            "id",
            "name",
            "transport",
            "status",
            "tools",
            "resources",
            "prompts",
        ],
        json!({
            "id": { "type": "string" },
            "name": { "type": "string" },
            "transport": transport,
            "status": { "enum": ["connected", "disconnected", "error"] },
            "tools": { "type": "array", "items": mcp_tool() },
            "resources": { "type": "array", "items": mcp_resource() },
            "prompts": { "type": "array", "items": mcp_prompt() }
        }),
    )
}

fn archive_entry() -> Value {
    object(
        &["id", "content", "created_at"],
        json!({
            "id": { "type": "string" },
            "content": { "type": "string" },
            "created_at": time(),
            "metadata": { "type": "object" }
        }),
    )
}

fn webhook() -> Value {
    object(
        &["id", "url", "events", "secret", "enabled", "created_at"],
        json!({
            "id": { "type": "string" },
            "url": { "type": "string" },
            "events": { "type": "array", "items": { "type": "string" } },
            "secret": { "type": "string" },
            "enabled": { "type": "boolean" },
            "created_at": time()
        }),
    )
}

fn subagent() -> Value {
    object(
        &[
            "id",
            "name",
            "description",
            "status",
            "parent_agent_id",
            "created_at",
        ],
        json!({
            "id": { "type": "string" },
            "name": { "type": "string" },
            "description": { "type": "string" },
            "status": { "enum": ["idle", "running", "completed", "failed"] },
            "parent_agent_id": { "type": "string" },
            "created_at": time()
        }),
    )
}

fn plan_task() -> Value {
    object(
        &["id", "content", "status", "order"],
        json!({ "status": { "enum": ["pending", "in_progress", "completed"] }, "order": { "type": "integer" } }),
    )
}

/// The spec's type of a successful answer of operation `id`; `None` for answers with no body
/// (`204`) or a stream.
pub(crate) fn response(id: &str) -> Option<Value> {
    let wrap = |key: &str, inner: Value| object(&[key], json!({ key: inner }));
    Some(match id {
        "harnesses.list" => page(harness()),
        "harnesses.get" => wrap("harness", harness()),
        "harnesses.capabilities" => object(
            &["harness_id", "harness_name", "version", "capabilities"],
            json!({ "capabilities": manifest() }),
        ),
        "harnesses.health" => object(
            &["status", "latency_ms", "checks"],
            json!({
                "status": { "enum": ["healthy", "degraded", "unhealthy"] },
                "latency_ms": { "type": "number" },
                "checks": { "type": "array", "items": object(&["name", "status"], json!({ "status": { "enum": ["pass", "fail"] } })) }
            }),
        ),
        "sessions.list" => page(session()),
        "sessions.create" | "sessions.resume" => object(
            &["session", "connect_url"],
            json!({ "session": session(), "connect_url": { "type": "string" } }),
        ),
        "sessions.get" | "sessions.update" => wrap("session", session()),
        "sessions.history" => page(message()),
        "sessions.fork" => object(
            &["session", "forked_from", "message_count"],
            json!({ "session": session(), "message_count": { "type": "integer" } }),
        ),
        "sessions.sendMessage" => object(
            &["message", "response"],
            json!({ "message": message(), "response": message() }),
        ),
        "execution.run" => object(
            &["execution_id", "status", "stream_url"],
            json!({ "status": execution_status(), "stream_url": { "type": "string" } }),
        ),
        "execution.list" => page(execution()),
        "execution.get" => wrap("execution", execution()),
        "execution.cancel" => object(
            &["execution", "cancelled"],
            json!({ "execution": execution(), "cancelled": { "type": "boolean" } }),
        ),
        "execution.result" | "subagents.result" => wrap(
            "result",
            object(
                &[
                    "execution_id",
                    "status",
                    "output",
                    "artifacts",
                    "tool_calls",
                    "usage",
                ],
                json!({
                    "status": execution_status(),
                    "output": { "type": "string" },
                    "artifacts": { "type": "array", "items": object(&["id", "name", "mime_type", "size_bytes"], json!({})) },
                    "tool_calls": { "type": "array", "items": object(&["id", "name", "success", "duration_ms"], json!({
                        "success": { "type": "boolean" }, "duration_ms": { "type": "number" }
                    })) },
                    "usage": usage()
                }),
            ),
        ),
        "execution.listToolCalls" => wrap(
            "tool_calls",
            json!({ "type": "array", "items": object(&["id", "name", "input", "status", "started_at"], json!({
                "input": { "type": "object" }, "output": { "type": "object" }, "status": call_status(),
                "error": { "type": "string" }, "started_at": time(), "completed_at": time(),
                "duration_ms": { "type": "number" }
            })) }),
        ),
        "execution.listArtifacts" => wrap(
            "artifacts",
            json!({ "type": "array", "items": object(&["id", "name", "mime_type", "size_bytes"], json!({
                "size_bytes": { "type": "integer" }
            })) }),
        ),
        "diagnostics.logs" => page(object(
            &["timestamp", "level", "message"],
            json!({
                "timestamp": time(),
                "level": { "enum": ["debug", "info", "warn", "error"] },
                "message": { "type": "string" },
                "context": { "type": "object" }
            }),
        )),
        "tools.invoke" => object(
            &["success", "output", "duration_ms"],
            json!({
                "success": { "type": "boolean" },
                "output": { "type": "object" },
                "duration_ms": { "type": "number" },
                "error": { "type": "string" }
            }),
        ),
        "hooks.listEvents" => page(object(
            &["id", "type", "data", "timestamp"],
            json!({
                "id": { "type": "string" },
                "type": { "type": "string" },
                "data": { "type": "object" },
                "timestamp": time()
            }),
        )),
        "webhooks.register" => wrap("webhook", webhook()),
        "webhooks.list" => wrap("webhooks", json!({ "type": "array", "items": webhook() })),
        "mcp.list" => page(mcp_server()),
        "mcp.connect" | "mcp.get" | "mcp.update" => wrap("server", mcp_server()),
        "mcp.listTools" => wrap("tools", json!({ "type": "array", "items": mcp_tool() })),
        "mcp.listResources" => wrap(
            "resources",
            json!({ "type": "array", "items": mcp_resource() }),
        ),
        "mcp.listPrompts" => wrap("prompts", json!({ "type": "array", "items": mcp_prompt() })),
        "mcp.health" => object(
            &["status", "latency_ms"],
            json!({
                "status": { "enum": ["healthy", "degraded", "unhealthy"] },
                "latency_ms": { "type": "number" },
                "last_error": { "type": "string" }
            }),
        ),
        "subagents.list" => wrap("subagents", json!({ "type": "array", "items": subagent() })),
        "subagents.spawn" | "subagents.get" => wrap("subagent", subagent()),
        "subagents.delegate" => object(
            &["execution_id", "status"],
            json!({ "execution_id": { "type": "string" }, "status": execution_status() }),
        ),
        "execution.sendInput" => {
            object(&["accepted"], json!({ "accepted": { "type": "boolean" } }))
        }
        "agents.list" => page(agent()),
        "agents.create" | "agents.get" | "agents.update" | "agents.clone" => wrap("agent", agent()),
        "memory.get" => wrap(
            "memory",
            object(
                &["agent_id", "blocks", "archive_size"],
                json!({ "blocks": { "type": "array", "items": block() }, "archive_size": { "type": "integer" } }),
            ),
        ),
        "memory.search" => wrap(
            "results",
            json!({ "type": "array", "items": object(&["source", "content", "relevance_score"], json!({
                "source": { "enum": ["block", "archive"] },
                "label": { "type": "string" },
                "content": { "type": "string" },
                "relevance_score": { "type": "number", "minimum": 0, "maximum": 1 }
            })) }),
        ),
        "memory.getArchive" => page(archive_entry()),
        "memory.addToArchive" => wrap("entry", archive_entry()),
        "memory.import" => object(
            &[
                "blocks_imported",
                "archive_entries_imported",
                "conflicts",
                "warnings",
            ],
            json!({
                "blocks_imported": { "type": "integer" },
                "archive_entries_imported": { "type": "integer" },
                "conflicts": { "type": "integer" },
                "warnings": { "type": "array", "items": { "type": "string" } }
            }),
        ),
        "memory.listBlocks" => wrap("blocks", json!({ "type": "array", "items": block() })),
        "memory.getBlock" | "memory.updateBlock" | "memory.createBlock" => wrap("block", block()),
        "tools.list" => page(tool()),
        "tools.get" | "tools.register" => wrap("tool", tool()),
        "hooks.list" => wrap("hooks", json!({ "type": "array", "items": hook() })),
        "hooks.register" | "hooks.get" | "hooks.update" => wrap("hook", hook()),
        "planning.updateTask" => wrap("task", plan_task()),
        "planning.get" | "planning.update" => wrap(
            "plan",
            object(
                &["execution_id", "tasks", "updated_at"],
                json!({ "tasks": { "type": "array", "items": plan_task() }, "updated_at": time() }),
            ),
        ),
        "diagnostics.get" => object(
            &[
                "harness_id",
                "version",
                "uptime_seconds",
                "memory_usage_mb",
                "active_sessions",
                "active_executions",
                "connected_mcp_servers",
                "installed_skills",
                "config",
            ],
            json!({
                "uptime_seconds": { "type": "number" }, "memory_usage_mb": { "type": "number" },
                "active_sessions": { "type": "number" }, "active_executions": { "type": "number" },
                "connected_mcp_servers": { "type": "number" }, "installed_skills": { "type": "number" },
                "config": { "type": "object" }
            }),
        ),
        "files.list" => object(
            &["files", "path"],
            json!({ "files": { "type": "array", "items": file() }, "path": { "type": "string" } }),
        ),
        "files.mkdir" => wrap("file", file()),
        "files.upload" => object(
            &["file", "created"],
            json!({ "file": file(), "created": { "type": "boolean" } }),
        ),
        "files.uploadBatch" => object(
            &["uploaded", "skipped", "errors"],
            json!({
                "uploaded": { "type": "array", "items": file() },
                "skipped": { "type": "array", "items": { "type": "string" } },
                "errors": { "type": "array", "items": object(&["path", "error"], json!({})) }
            }),
        ),
        "files.search" => wrap(
            "matches",
            json!({ "type": "array", "items": object(&["file"], json!({
                "file": file(),
                "line_matches": { "type": "array", "items": object(&["line_number", "content"], json!({
                    "line_number": { "type": "number" }, "content": { "type": "string" }
                })) }
            })) }),
        ),
        "files.write" => object(
            &["file", "created"],
            json!({ "file": file(), "created": { "type": "boolean" } }),
        ),
        "planning.listTasks" => wrap("tasks", json!({ "type": "array", "items": plan_task() })),
        _ => return None,
    })
}

/// The spec's error body.
pub(crate) fn error() -> Value {
    object(
        &["error"],
        json!({ "error": object(&["code", "message"], json!({
            "code": { "type": "string" }, "message": { "type": "string" },
            "domain": { "type": "string" }, "operation": { "type": "string" },
            "details": { "type": "object" }
        })) }),
    )
}
