//! The session's WebSocket: a message runs as an execution and its frames come back tagged
//! with the message's id; a waiting approval is answered with `stdin`; a running execution
//! is cancelled.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ToolError, tool_fn};
use harness_tags::tags::ToolGateResult;
use harness_tags::{GateVerdict, ToolCallCtx};
use harness_tests::fixtures::hang;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::{Served, TOKEN, serve_with};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn script() -> ScriptedModel {
    ScriptedModel::new("scripted/test")
        .then(Scripted::tool_call("deploy", json!({ "service": "api" })))
        .then(Scripted::text("deployed it"))
        .then(Scripted::tool_call("hang", json!({})))
}

async fn served(deploys: Arc<AtomicUsize>) -> (tempfile::TempDir, Served) {
    let dir = tempfile::tempdir().unwrap();
    let served = serve_with(
        &dir.path().join("h.db"),
        script,
        Arc::new(move |builder| {
            let deploys = Arc::clone(&deploys);
            builder
                .tool(tool_fn("deploy", "Deploys.", move |_: Value, _| {
                    let deploys = Arc::clone(&deploys);
                    async move {
                        deploys.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ToolError>("deployed")
                    }
                }))
                .tool(hang(Duration::from_secs(3600)))
                .compose(|c| {
                    c.on(
                        ToolGateResult,
                        |verdict: &GateVerdict, ctx: &ToolCallCtx| {
                            if ctx.tool_name == "deploy" {
                                GateVerdict::ask("deploys change production")
                            } else {
                                verdict.clone()
                            }
                        },
                    )
                })
        }),
        |_| {},
    )
    .await;
    (dir, served)
}

async fn open(served: &Served, session: &str, token: Option<&str>) -> Result<Socket, u16> {
    let url = served
        .url(&format!("/sessions/{session}/connect"))
        .replace("http://", "ws://");
    let mut request = url.into_client_request().unwrap();
    if let Some(token) = token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(other) => panic!("{other}"),
    }
}

async fn send(socket: &mut Socket, message: Value) {
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .unwrap();
}

/// The next JSON message.
async fn next(socket: &mut Socket) -> Value {
    loop {
        match socket.next().await.unwrap().unwrap() {
            Message::Text(text) => return serde_json::from_str(&text).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Messages until one of `kind`, that one included.
async fn until(socket: &mut Socket, kind: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let message = next(socket).await;
        let done = message["type"] == kind;
        seen.push(message);
        if done {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_runs_is_approved_over_stdin_and_another_is_cancelled() {
    let deploys = Arc::new(AtomicUsize::new(0));
    let (_dir, served) = served(Arc::clone(&deploys)).await;
    let session = served.session().await;
    assert_eq!(open(&served, &session, None).await.err(), Some(401));
    assert_eq!(open(&served, "nothing", Some(TOKEN)).await.err(), Some(404));
    let mut socket = open(&served, &session, Some(TOKEN)).await.unwrap();

    send(
        &mut socket,
        json!({ "type": "message", "id": "m1", "content": "deploy" }),
    )
    .await;
    let accepted = next(&mut socket).await;
    assert_eq!(accepted["type"], "accepted");
    assert_eq!(accepted["id"], "m1");
    let first = accepted["execution_id"].as_str().unwrap().to_owned();
    let asked = until(&mut socket, "prompt").await;
    assert!(
        asked.last().unwrap()["prompt"]
            .as_str()
            .unwrap()
            .contains("deploy")
    );
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    send(
        &mut socket,
        json!({ "type": "stdin", "id": "m1", "data": "yes" }),
    )
    .await;
    let rest = until(&mut socket, "done").await;
    let kinds: Vec<&str> = rest.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tool_call", "stdout", "text", "done"], "{rest:?}");
    assert!(rest.iter().all(|message| message["id"] == "m1"));
    assert_eq!(rest[1]["data"], "deployed");
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    let record = served.get(&format!("/executions/{first}")).await;
    assert_eq!(record.body["execution"]["status"], "completed");

    send(
        &mut socket,
        json!({ "type": "message", "id": "m2", "content": "wait" }),
    )
    .await;
    let accepted = next(&mut socket).await;
    let second = accepted["execution_id"].as_str().unwrap().to_owned();
    until(&mut socket, "tool_call").await;
    send(
        &mut socket,
        json!({ "type": "cancel", "execution_id": second }),
    )
    .await;
    let ended = until(&mut socket, "done").await;
    assert!(
        ended.iter().any(|message| message["type"] == "error"),
        "{ended:?}"
    );

    for bad in [
        json!({ "type": "stdin", "id": "unknown", "data": "yes" }),
        json!({ "type": "shout" }),
    ] {
        send(&mut socket, bad).await;
        assert_eq!(next(&mut socket).await["type"], "error");
    }

    // Ending the session closes the socket, and an ended session cannot connect.
    let ended = served
        .request("DELETE", &format!("/sessions/{session}"), None)
        .await;
    assert_eq!(ended.status, 204);
    send(
        &mut socket,
        json!({ "type": "message", "id": "m3", "content": "late" }),
    )
    .await;
    match socket.next().await {
        Some(Ok(Message::Close(_)) | Err(_)) | None => {}
        other => panic!("the socket stayed open: {other:?}"),
    }
    assert_eq!(open(&served, &session, Some(TOKEN)).await.err(), Some(409));
}
