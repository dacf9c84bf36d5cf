//! A server on a loopback port and a SQLite file, with a scripted model, and a client.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use harness_core::harness::{Harness, HarnessBuilder, Mode};
use harness_core::model::ScriptedModel;
use harness_core::store::{SqliteStore, Store};
use harness_server::{Server, ServerConfig};
use harness_tests::fixtures::{Calls, echo};
use serde_json::Value;
use tokio::task::JoinHandle;

pub(crate) const TOKEN: &str = "test-token-0123456789";

/// What a test changes in the harness the factory builds.
pub(crate) type Customize = Arc<dyn Fn(HarnessBuilder) -> HarnessBuilder + Send + Sync>;

/// A running server.
pub(crate) struct Served {
    pub(crate) server: Server,
    pub(crate) calls: Calls,
    client: Client,
    task: JoinHandle<()>,
}

impl std::ops::Deref for Served {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

/// A client of a server at `base`, with the token.
pub(crate) struct Client {
    pub(crate) base: String,
    http: reqwest::Client,
}

impl Client {
    pub(crate) fn new(base: &str) -> Client {
        harness_core::model::install_crypto_provider();
        Client {
            base: base.to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A server whose sessions each run a fresh copy of `script` with the `echo` tool.
pub(crate) async fn serve(db: &Path, script: fn() -> ScriptedModel) -> Served {
    serve_with(db, script, Arc::new(|builder| builder), |_| {}).await
}

/// [`serve`], with the harness and the configuration changed.
pub(crate) async fn serve_with(
    db: &Path,
    script: fn() -> ScriptedModel,
    customize: Customize,
    configure: impl FnOnce(&mut ServerConfig),
) -> Served {
    let store = SqliteStore::open(db).unwrap();
    let shared: Arc<dyn Store> = Arc::new(store.clone());
    let calls = Calls::default();
    let factory = {
        let calls = Arc::clone(&calls);
        Arc::new(move || {
            let builder = Harness::builder("server-test")
                .mode(Mode::new("build"))
                .model(script())
                .tool(echo(Arc::clone(&calls)))
                .sqlite(store.clone());
            Ok(customize(builder))
        })
    };
    let mut config = ServerConfig::new(TOKEN);
    configure(&mut config);
    let server = Server::new(config, shared, factory).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .serve(listener, std::future::pending())
                .await
                .unwrap();
        })
    };
    Served {
        server,
        calls,
        client: Client::new(&base),
        task,
    }
}

/// A response: status and JSON body (`Null` if none).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Value,
}

impl Client {
    /// The HTTP client, for requests the helpers do not make.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The URL of `path` under the harness.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/v1/harnesses/local{path}", self.base)
    }

    pub(crate) async fn request(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, self.url(path)).bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        answer(request.send().await.unwrap()).await
    }

    pub(crate) async fn get(&self, path: &str) -> Answer {
        self.request("GET", path, None).await
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> Answer {
        self.request("POST", path, Some(body)).await
    }

    /// Creates a session; its id.
    pub(crate) async fn session(&self) -> String {
        let created = self.post("/sessions", serde_json::json!({})).await;
        assert_eq!(created.status, 201, "{:?}", created.body);
        created.body["session"]["id"].as_str().unwrap().to_owned()
    }

    /// Executes `message` on `session`; the execution's id.
    pub(crate) async fn execute(&self, session: &str, message: &str) -> String {
        let started = self
            .post(
                "/execute",
                serde_json::json!({ "message": message, "session_id": session }),
            )
            .await;
        assert_eq!(started.status, 202, "{:?}", started.body);
        started.body["execution_id"].as_str().unwrap().to_owned()
    }

    /// Opens an execution's stream after `last_event_id`.
    pub(crate) async fn attach(
        &self,
        execution: &str,
        last_event_id: Option<&str>,
    ) -> reqwest::Response {
        let mut request = self
            .http
            .get(self.url(&format!("/executions/{execution}/stream")))
            .bearer_auth(TOKEN);
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        request.send().await.unwrap()
    }
}

pub(crate) async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Answer { status, body }
}

/// One SSE frame as received: its text (through the blank line), `id:`, `event:` and data.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Frame {
    pub(crate) raw: String,
    pub(crate) id: String,
    pub(crate) event: String,
    pub(crate) data: Value,
}

/// Reads frames until the stream ends, or until `limit` frames were read (then the
/// connection is dropped: a cut).
pub(crate) async fn frames(response: reqwest::Response, limit: Option<usize>) -> Vec<Frame> {
    let mut count = 0;
    frames_until(response, |_| {
        count += 1;
        limit.is_some_and(|limit| count >= limit)
    })
    .await
}

/// Reads frames until one matches `last` (then the connection is dropped), or the stream
/// ends.
pub(crate) async fn frames_until(
    response: reqwest::Response,
    mut last: impl FnMut(&Frame) -> bool,
) -> Vec<Frame> {
    assert_eq!(response.status().as_u16(), 200);
    let mut body = response.bytes_stream();
    let mut pending = String::new();
    let mut frames = Vec::new();
    loop {
        while let Some(end) = pending.find("\n\n") {
            let raw: String = pending.drain(..end + 2).collect();
            let frame = parse(raw);
            let stop = last(&frame);
            frames.push(frame);
            if stop {
                return frames;
            }
        }
        match body.next().await {
            Some(chunk) => pending.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap()),
            None => break,
        }
    }
    assert!(pending.is_empty(), "a frame was cut: {pending:?}");
    frames
}

fn parse(raw: String) -> Frame {
    let field = |name: &str| {
        raw.lines()
            .find_map(|line| line.strip_prefix(name))
            .unwrap_or_default()
            .to_owned()
    };
    let id = field("id: ");
    let event = field("event: ");
    let data = serde_json::from_str(&field("data: ")).unwrap();
    Frame {
        raw,
        id,
        event,
        data,
    }
}

/// The frames' text, joined: what a client received byte for byte.
pub(crate) fn text(frames: &[Frame]) -> String {
    frames.iter().map(|frame| frame.raw.as_str()).collect()
}

/// A form part: its name, its file name (for a file) and its bytes.
pub(crate) type Part<'a> = (&'a str, Option<&'a str>, &'a [u8]);

/// A `multipart/form-data` body of `parts`, and its content type.
pub(crate) fn multipart(parts: &[Part<'_>]) -> (String, Vec<u8>) {
    let boundary = "harness-test-boundary-7f3a";
    let mut body = Vec::new();
    for (name, file_name, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match file_name {
            Some(file_name) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}
