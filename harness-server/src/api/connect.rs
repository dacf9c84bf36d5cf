//! The session's WebSocket (`sessions.connect`): messages in, each run as an execution of
//! the session, and its frames out, tagged with the message's `id`.
//!
//! Client messages: `{"type": "message", "id", "content"}` queues an execution (answered by
//! the extension `{"type": "accepted", "id", "execution_id"}`); `{"type": "stdin", "id",
//! "data"}` answers what that message's execution waits for, as `input` does;
//! `{"type": "cancel", "execution_id"}` cancels it. Server messages: `text`, `thinking`,
//! `tool_call` (`tool`, `input`), `stdout` / `stderr` (a tool's result, by success), `prompt`
//! (an approval or question waits: answer with `stdin`), `error` and `done` (`usage`, the
//! last of each execution). The socket closes at the first message after the session was
//! ended or paused, and when the server shuts down. The bearer token goes in the `Authorization` header of the upgrade
//! request, as on every route.

use std::collections::HashMap;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::execution::answer_input;
use super::shared::{new_execution_id, thread};
use super::types::{SessionState, check_length};
use crate::error::{ApiError, ErrorResponse};
use crate::state::Shared;
use crate::stream::execution_events;

const MAX_MESSAGE: usize = 100_000;

/// A message a client sends.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ClientMessage {
    Message { id: String, content: String },
    Stdin { id: String, data: String },
    Cancel { execution_id: String },
}

/// Opens the session's WebSocket; `409` for a session ended or paused.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/sessions/{sessionId}/connect",
    tag = "sessions", operation_id = "sessions.connect",
    params(("harnessId" = String, Path), ("sessionId" = String, Path)),
    responses((status = 101, description = "The session's WebSocket (see the README)"),
        (status = 400, body = ErrorResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse),
        (status = 426, body = ErrorResponse)))]
pub(crate) async fn connect(
    State(state): State<Shared>,
    Path((harness_id, session_id)): Path<(String, String)>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    thread(&state, &session_id).await?;
    let status = super::sessions::state_of(&state, &session_id).await?;
    if status != SessionState::Active {
        return Err(ApiError::conflict(format!(
            "session `{session_id}` is not active; resume it first"
        )));
    }
    let upgrade = upgrade.map_err(|rejection| ApiError::upgrade_required(rejection.body_text()))?;
    Ok(upgrade.on_upgrade(move |socket| serve(state, session_id, socket)))
}

/// Runs one socket until the client leaves, the session stops being active or the server
/// shuts down.
async fn serve(state: Shared, session_id: String, socket: WebSocket) {
    let (mut sink, mut incoming) = socket.split();
    let (out, mut outgoing) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            if sink
                .send(Message::Text(message.to_string().into()))
                .await
                .is_err()
            {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let mut forwarders = JoinSet::new();
    // The execution of each client message id.
    let mut executions: HashMap<String, String> = HashMap::new();
    loop {
        let message = tokio::select! {
            message = incoming.next() => message,
            () = state.closing.cancelled() => break,
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                let _ = out.send(error("", "invalid_message", "messages are JSON text"));
                continue;
            }
            // Pings are answered by the socket itself.
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_)) | Err(_)) | None => break,
        };
        // A session ended or paused since takes no more messages.
        if !matches!(
            super::sessions::state_of(&state, &session_id).await,
            Ok(SessionState::Active)
        ) {
            break;
        }
        let parsed: ClientMessage = match serde_json::from_str(&text) {
            Ok(parsed) => parsed,
            Err(problem) => {
                let _ = out.send(error("", "invalid_message", &problem.to_string()));
                continue;
            }
        };
        if let Err((id, failure)) = handle(
            &state,
            &session_id,
            parsed,
            &out,
            &mut executions,
            &mut forwarders,
        )
        .await
        {
            let _ = out.send(error(&id, failure.code(), failure.message()));
        }
    }
    forwarders.abort_all();
    drop(out);
    let _ = writer.await;
}

async fn handle(
    state: &Shared,
    session_id: &str,
    message: ClientMessage,
    out: &mpsc::UnboundedSender<Value>,
    executions: &mut HashMap<String, String>,
    forwarders: &mut JoinSet<()>,
) -> Result<(), (String, ApiError)> {
    match message {
        ClientMessage::Message { id, content } => {
            check_length("content", &content, MAX_MESSAGE).map_err(|e| (id.clone(), e))?;
            let execution_id = new_execution_id();
            state
                .host
                .execute(session_id, content, execution_id.clone())
                .await
                .map_err(|e| (id.clone(), e))?;
            let events = execution_events(state, &execution_id, 0)
                .await
                .map_err(|e| (id.clone(), e))?;
            let _ = out.send(json!({ "type": "accepted", "id": id, "execution_id": execution_id }));
            executions.insert(id.clone(), execution_id);
            let out = out.clone();
            forwarders.spawn(async move {
                let mut events = std::pin::pin!(events);
                while let Some(batch) = events.next().await {
                    for event in batch {
                        let Ok(frame) = serde_json::from_str::<Value>(&event.envelope) else {
                            continue;
                        };
                        if let Some(message) = server_message(&id, &frame)
                            && out.send(message).is_err()
                        {
                            return;
                        }
                    }
                }
            });
            Ok(())
        }
        ClientMessage::Stdin { id, data } => {
            let execution_id = executions
                .get(&id)
                .cloned()
                .ok_or_else(|| (id.clone(), ApiError::not_found("message", &id)))?;
            answer_input(state, &execution_id, data, None, None)
                .await
                .map_err(|e| (id, e))
        }
        ClientMessage::Cancel { execution_id } => {
            let id = executions
                .iter()
                .find(|(_, execution)| **execution == execution_id)
                .map(|(id, _)| id.clone())
                .unwrap_or_default();
            let live = state
                .host
                .live(&execution_id)
                .filter(|live| !live.record().status.is_finished())
                .ok_or_else(|| {
                    (
                        id.clone(),
                        ApiError::conflict(format!("execution `{execution_id}` is not running")),
                    )
                })?;
            state.host.cancel(&live).await.map_err(|e| (id, e))
        }
    }
}

fn error(id: &str, code: &str, message: &str) -> Value {
    json!({ "type": "error", "id": id, "code": code, "message": message })
}

/// A frame of an execution as the socket's message for client message `id`; `None` for
/// frames the socket does not carry (`tool_call_end`, `progress`, `input_answered`, ...).
fn server_message(id: &str, frame: &Value) -> Option<Value> {
    let text = |key: &str| frame[key].as_str().unwrap_or_default().to_owned();
    Some(match frame["type"].as_str()? {
        kind @ ("text" | "thinking") => {
            json!({ "type": kind, "id": id, "content": text("content") })
        }
        "tool_call_start" => {
            json!({ "type": "tool_call", "id": id, "tool": text("name"), "input": frame["input"] })
        }
        "tool_result" => {
            let kind = if frame["success"] == false {
                "stderr"
            } else {
                "stdout"
            };
            let data = frame["output"]["text"].as_str().unwrap_or_default();
            json!({ "type": kind, "id": id, "data": data })
        }
        "awaiting_input" => {
            let prompt = if frame["kind"] == "approval" {
                format!("Approve `{}`? Answer yes, no or always.", text("tool_name"))
            } else {
                match &frame["prompt"]["question"] {
                    Value::String(question) => question.clone(),
                    _ => frame["prompt"].to_string(),
                }
            };
            json!({ "type": "prompt", "id": id, "prompt": prompt })
        }
        "error" => {
            json!({ "type": "error", "id": id, "code": text("code"), "message": text("message") })
        }
        "done" => json!({ "type": "done", "id": id, "usage": frame["usage"] }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::server_message;

    #[test]
    fn frames_become_the_sockets_messages() {
        let said = server_message("m1", &json!({ "type": "text", "content": "hi" }));
        assert_eq!(
            said,
            Some(json!({ "type": "text", "id": "m1", "content": "hi" }))
        );
        let failed = server_message(
            "m1",
            &json!({ "type": "tool_result", "id": "c", "success": false, "output": { "text": "no" } }),
        );
        assert_eq!(failed.unwrap()["type"], "stderr");
        let asked = server_message(
            "m1",
            &json!({ "type": "awaiting_input", "kind": "approval", "tool_name": "deploy" }),
        );
        assert!(
            asked.unwrap()["prompt"]
                .as_str()
                .unwrap()
                .contains("deploy")
        );
        assert_eq!(
            server_message("m1", &json!({ "type": "tool_call_end", "id": "c" })),
            None
        );
    }
}
