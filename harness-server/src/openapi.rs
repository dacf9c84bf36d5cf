//! The server's OpenAPI document, generated from the handlers' and types' definitions; the
//! spec routes this server does not provide are in it too, answering `501`. Served at
//! `/openapi.json`; a copy is checked in as `harness-server/openapi.json`.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use utoipa::OpenApi;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, Required, ResponseBuilder, ResponsesBuilder};

use harness_protocol::open_harness::ExecutionEvent;

use crate::api::{
    agents, connect, events, execution, files, hooks, is_built, logs, mcp, memory, planning,
    registry, sessions, subagents, tools,
};
use crate::error::ErrorResponse;
use crate::routes::SPEC_ROUTES;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Open Harness API (harness-rs)",
        description = "The Open Harness API v0.2.0 as harness-server provides it. Operations this \
server does not provide answer 501 with the spec's error body.",
    ),
    paths(
        registry::list,
        registry::get_harness,
        registry::capabilities,
        registry::health,
        registry::diagnostics,
        sessions::list,
        sessions::create,
        connect::connect,
        sessions::get_session,
        sessions::update,
        sessions::end,
        sessions::resume,
        sessions::history,
        sessions::fork,
        sessions::send_message,
        sessions::send_message_stream,
        execution::execute,
        execution::execute_stream,
        execution::list,
        execution::get_execution,
        execution::attach,
        execution::cancel,
        execution::result,
        execution::tool_calls,
        execution::send_input,
        execution::list_artifacts,
        execution::download_artifact,
        memory::search,
        memory::archive,
        memory::add_to_archive,
        memory::export,
        memory::import,
        logs::list,
        logs::stream,
        events::list,
        events::stream,
        events::register,
        events::list_webhooks,
        events::delete_webhook,
        mcp::list,
        mcp::connect,
        mcp::get_server,
        mcp::update,
        mcp::disconnect,
        mcp::list_tools,
        mcp::list_resources,
        mcp::list_prompts,
        mcp::health,
        subagents::list,
        subagents::spawn,
        subagents::get_subagent,
        subagents::terminate,
        subagents::delegate,
        subagents::delegate_stream,
        subagents::result,
        subagents::attach,
        agents::list,
        agents::create,
        agents::get_agent,
        agents::update,
        agents::delete,
        agents::clone_agent,
        agents::memory,
        agents::list_blocks,
        agents::get_block,
        agents::update_block,
        agents::create_block,
        agents::delete_block,
        planning::plan,
        planning::list_tasks,
        planning::update,
        planning::update_task,
        planning::stream,
        files::list,
        files::mkdir,
        files::search,
        files::upload,
        files::upload_batch,
        files::download_batch,
        tools::list,
        tools::get_tool,
        tools::register,
        tools::unregister,
        tools::invoke,
        tools::invoke_stream,
        hooks::list,
        hooks::register,
        hooks::get_hook,
        hooks::update,
        hooks::unregister,
    ),
    components(schemas(ErrorResponse, files::WrittenFile))
)]
struct Document;

/// The tag of the spec operations this server does not provide (they answer `501`).
pub const NOT_PROVIDED: &str = "not-provided";

/// The document for a server whose `{harnessId}` is `harness_id`.
pub fn document(harness_id: &str) -> Value {
    let mut document = Document::openapi();
    document.info.version = env!("CARGO_PKG_VERSION").to_owned();
    for route in SPEC_ROUTES.iter().filter(|route| !is_built(route)) {
        let path = format!("/v1{}", route.path);
        let mut operation = OperationBuilder::new()
            .operation_id(Some(route.id))
            .tags(Some([route.group(), NOT_PROVIDED]))
            .summary(Some(format!("{} (not provided: 501)", route.id)))
            .responses(
                ResponsesBuilder::new()
                    .response("401", error_response("No valid bearer token"))
                    .response("501", error_response("Not provided by this server"))
                    .build(),
            );
        for name in parameters(route.path) {
            operation = operation.parameter(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(
                        utoipa::openapi::ObjectBuilder::new()
                            .schema_type(utoipa::openapi::schema::Type::String),
                    )),
            );
        }
        document
            .paths
            .add_path_operation(path, vec![method(route.method)], operation.build());
    }
    let components = document.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    document.security = Some(vec![SecurityRequirement::new(
        "bearer",
        Vec::<String>::new(),
    )]);
    let mut document = serde_json::to_value(document).unwrap_or(Value::Null);
    describe_files(&mut document);
    pin_harness_id(&mut document, harness_id);
    link_created_ids(&mut document);
    describe_streams(&mut document);
    document
}

/// Each SSE frame as the document describes it (OpenAPI 3.1: the `text/event-stream` schema
/// is one event's): `event:` the frame's type, `id:` its seq, `data:` JSON of the spec's
/// `ExecutionEvent` or one of the extension frames.
fn describe_streams(document: &mut Value) {
    let mut event = serde_json::to_value(schemars::schema_for!(ExecutionEvent)).unwrap_or_default();
    let definitions = event
        .as_object_mut()
        .and_then(|schema| {
            schema.remove("$schema");
            schema.remove("$defs")
        })
        .unwrap_or_default();
    let schemas = &mut document["components"]["schemas"];
    for (name, schema) in definitions.as_object().into_iter().flatten() {
        schemas[name] = schema.clone();
    }
    schemas["ExecutionEvent"] = event;
    schemas["ExecutionFrame"] = json!({
        "description": "An execution event of the spec, or an extension frame: \
            `awaiting_input` (an approval or question waits; see AwaitingInput) and \
            `input_answered` (`call_id` no longer waits), `subagent_start` and `subagent_end` \
            (a subagent the model spawned with its `subagent` call `call_id`).",
        "anyOf": [
            { "$ref": "#/components/schemas/ExecutionEvent" },
            {
                "type": "object",
                "required": ["type", "call_id"],
                "properties": {
                    "type": { "type": "string", "enum": ["awaiting_input", "input_answered"] },
                    "call_id": { "type": "string" }
                }
            },
            {
                "type": "object",
                "required": ["type", "call_id", "agent_type", "task", "model_id"],
                "properties": {
                    "type": { "const": "subagent_start" },
                    "call_id": { "type": "string" },
                    "agent_type": { "type": "string" },
                    "task": { "type": "string" },
                    "model_id": { "type": "string" }
                }
            },
            {
                "type": "object",
                "required": ["type", "call_id", "agent_type", "success", "duration_ms"],
                "properties": {
                    "type": { "const": "subagent_end" },
                    "call_id": { "type": "string" },
                    "agent_type": { "type": "string" },
                    "success": { "type": "boolean" },
                    "duration_ms": { "type": "integer", "minimum": 0 }
                }
            }
        ]
    });
    schemas["SseFrame"] = sse_frame(
        json!({ "type": "string" }),
        true,
        json!({ "$ref": "#/components/schemas/ExecutionFrame" }),
    );
    schemas["LogFrame"] = sse_frame(
        json!({ "const": "log" }),
        true,
        json!({ "$ref": "#/components/schemas/LogEntry" }),
    );
    let tool_events = json!({ "enum": ["output", "error", "done"] });
    schemas["ToolStreamFrame"] = sse_frame(
        tool_events.clone(),
        false,
        json!({
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": tool_events,
                "data": { "type": "object" },
                "code": { "type": "string" },
                "message": { "type": "string" },
                "success": { "type": "boolean" },
                "duration_ms": { "type": "integer", "minimum": 0 }
            }
        }),
    );
    schemas["JournalFrame"] = sse_frame(
        json!({ "type": "string" }),
        true,
        json!({
            "type": "object",
            "required": ["type"],
            "properties": { "type": { "type": "string" } }
        }),
    );
    let plan_events =
        json!({ "enum": ["task.added", "task.updated", "task.removed", "plan.reordered"] });
    schemas["PlanFrame"] = sse_frame(
        plan_events.clone(),
        false,
        json!({
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": plan_events,
                "task": { "$ref": "#/components/schemas/PlanTask" },
                "task_id": { "type": "string" },
                "task_ids": { "type": "array", "items": { "type": "string" } }
            }
        }),
    );
    rewrite_refs(schemas);
    for operation in operations(document) {
        let frame = match operation["operationId"].as_str() {
            Some("diagnostics.streamLogs") => "LogFrame",
            Some("tools.invokeStream") => "ToolStreamFrame",
            Some("hooks.streamEvents") => "JournalFrame",
            Some("planning.stream") => "PlanFrame",
            _ => "SseFrame",
        };
        // `get_mut`, not indexing: indexing would add the missing keys as nulls.
        if let Some(stream) = operation.pointer_mut("/responses/200/content/text~1event-stream") {
            stream["schema"] = json!({ "$ref": format!("#/components/schemas/{frame}") });
        }
    }
}

/// One SSE frame as a schema: `event:` as `event` says, `id:` the frame's number (if the
/// stream has them), `data:` JSON fitting `data`.
fn sse_frame(event: Value, with_id: bool, data: Value) -> Value {
    let mut required = vec!["event", "data"];
    let mut properties = json!({
        "event": event,
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": data
        }
    });
    if with_id {
        required.insert(1, "id");
        properties["id"] = json!({ "type": "string", "pattern": "^[0-9]+$" });
    }
    json!({ "type": "object", "required": required, "properties": properties })
}

/// Points schemars' `#/$defs/` references at the document's components.
fn rewrite_refs(value: &mut Value) {
    match value {
        Value::String(text) if text.starts_with("#/$defs/") => {
            *text = text.replacen("#/$defs/", "#/components/schemas/", 1);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        Value::Object(fields) => fields.values_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// The file operations one catch-all route answers (`files/{*path}`), described by hand.
fn describe_files(document: &mut Value) {
    let error = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": {
                "schema": { "$ref": "#/components/schemas/ErrorResponse" }
            } }
        })
    };
    let path_parameters = json!([
        { "name": "harnessId", "in": "path", "required": true, "schema": { "type": "string" } },
        { "name": "path", "in": "path", "required": true,
          "description": "A path of the workspace, resolved beneath its root",
          "schema": { "type": "string" } }
    ]);
    let bytes = json!({
        "description": "The file's bytes, as the type its name gives (text as text/plain)",
        "content": { "*/*": {
            "schema": { "type": "string", "format": "binary" }
        } }
    });
    let common = |mut responses: serde_json::Map<String, Value>| {
        for (status, description) in [
            ("400", "Not a usable path"),
            ("401", "No valid bearer token"),
            ("403", "Outside the workspace"),
            ("404", "No such file"),
            ("409", "A directory, or not a regular file"),
            ("413", "Too large"),
            ("501", "The server has no workspace"),
        ] {
            responses.insert(status.into(), error(description));
        }
        Value::Object(responses)
    };
    let read = json!({
        "tags": ["files"], "operationId": "files.read",
        "summary": "Reads a file of the workspace",
        "parameters": path_parameters,
        "responses": common(serde_json::Map::from_iter([("200".to_owned(), bytes.clone())]))
    });
    let written = json!({
        "description": "Written",
        "content": { "application/json": {
            "schema": { "$ref": "#/components/schemas/WrittenFile" }
        } }
    });
    let write_responses = serde_json::Map::from_iter([
        ("200".to_owned(), written.clone()),
        ("201".to_owned(), written),
    ]);
    let write = json!({
        "tags": ["files"], "operationId": "files.write",
        "summary": "Writes a file of the workspace (and its directories): the body is its content",
        "parameters": path_parameters,
        "requestBody": { "required": false, "content": { "application/octet-stream": {
            "schema": { "type": "string", "format": "binary" }
        } } },
        "responses": common(write_responses)
    });
    let mut delete_parameters = path_parameters.as_array().cloned().unwrap_or_default();
    delete_parameters.push(json!({
        "name": "recursive", "in": "query", "required": false,
        "description": "Also delete what a directory holds", "schema": { "type": "boolean" }
    }));
    let delete = json!({
        "tags": ["files"], "operationId": "files.delete",
        "summary": "Deletes a file, or a directory (empty unless recursive)",
        "parameters": delete_parameters,
        "responses": common(serde_json::Map::from_iter([
            ("204".to_owned(), json!({ "description": "Deleted" }))
        ]))
    });
    let download = json!({
        "tags": ["files"], "operationId": "files.download",
        "summary": "Downloads a file of the workspace (Content-Disposition: attachment)",
        "parameters": path_parameters,
        "responses": common(serde_json::Map::from_iter([("200".to_owned(), bytes)]))
    });
    let paths = &mut document["paths"];
    paths["/v1/harnesses/{harnessId}/files/{path}"] =
        json!({ "get": read, "put": write, "delete": delete });
    paths["/v1/harnesses/{harnessId}/files/{path}/download"] = json!({ "get": download });
}

/// `{harnessId}` takes one value: the harness this server hosts.
fn pin_harness_id(document: &mut Value, harness_id: &str) {
    for operation in operations(document) {
        let Some(parameters) = operation
            .get_mut("parameters")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for parameter in parameters {
            if parameter["name"] == "harnessId" {
                parameter["schema"] = json!({ "type": "string", "enum": [harness_id] });
            }
        }
    }
}

/// OpenAPI links from the operations that create sessions and executions to those that take
/// their ids, so that a client (or a fuzzer) can follow them.
fn link_created_ids(document: &mut Value) {
    let mut takers: Vec<(String, bool, bool)> = Vec::new();
    for (path, item) in document["paths"].as_object().into_iter().flatten() {
        for operation in item
            .as_object()
            .into_iter()
            .flat_map(|methods| methods.values())
        {
            if let Some(id) = operation["operationId"].as_str()
                && operation["tags"]
                    .as_array()
                    .is_none_or(|tags| !tags.iter().any(|tag| tag == NOT_PROVIDED))
            {
                takers.push((
                    id.to_owned(),
                    path.contains("{sessionId}"),
                    path.contains("{executionId}"),
                ));
            }
        }
    }
    let sources = [
        ("sessions.create", "201", "$response.body#/session/id", None),
        (
            "execution.run",
            "202",
            "$response.body#/session_id",
            Some("$response.body#/execution_id"),
        ),
    ];
    for operation in operations(document) {
        let Some(source) = sources
            .iter()
            .find(|source| operation["operationId"] == source.0)
        else {
            continue;
        };
        let (_, status, session, execution) = *source;
        let mut links = serde_json::Map::new();
        for (target, takes_session, takes_execution) in &takers {
            let mut parameters = serde_json::Map::new();
            parameters.insert("harnessId".into(), json!("$request.path.harnessId"));
            match (takes_session, takes_execution, execution) {
                (_, true, Some(execution)) => {
                    parameters.insert("executionId".into(), json!(execution));
                }
                (true, false, _) => {
                    parameters.insert("sessionId".into(), json!(session));
                }
                _ => continue,
            }
            links.insert(
                target.replace('.', "_"),
                json!({ "operationId": target, "parameters": parameters }),
            );
        }
        if let Some(response) = operation
            .get_mut("responses")
            .and_then(|responses| responses.get_mut(status))
        {
            response["links"] = Value::Object(links);
        }
    }
}

fn operations(document: &mut Value) -> impl Iterator<Item = &mut Value> {
    document["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|methods| methods.values_mut())
        .filter(|operation| operation.is_object())
}

/// The document as pretty JSON, as served (and, for `local`, checked in).
pub fn json(harness_id: &str) -> String {
    let mut text = serde_json::to_string_pretty(&document(harness_id))
        .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
    text.push('\n');
    text
}

pub(crate) async fn serve(State(state): State<crate::state::Shared>) -> impl IntoResponse {
    let json = state
        .openapi
        .get_or_init(|| json(&state.config.harness_id))
        .clone();
    ([(header::CONTENT_TYPE, "application/json")], json)
}
fn error_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorResponse")))
                .build(),
        )
        .build()
}

fn parameters(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
}

fn method(method: &str) -> HttpMethod {
    match method {
        "POST" => HttpMethod::Post,
        "PUT" => HttpMethod::Put,
        "PATCH" => HttpMethod::Patch,
        "DELETE" => HttpMethod::Delete,
        _ => HttpMethod::Get,
    }
}
