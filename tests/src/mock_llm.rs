//! A mock LLM server: a raw HTTP/1.1 server on 127.0.0.1 that plays scripted responses, so the
//! real provider clients can be tested without a network.
//!
//! Each connection carries one request. The server reads the request line, the headers and a
//! `Content-Length` body, records them (method, path, headers, body parsed as JSON), then
//! answers with the next [`MockResponse`] of its queue: a status, headers, and a body sent with
//! chunked transfer-encoding one piece at a time (flushed between pieces). A response can stop
//! mid-body by dropping the connection ([`MockResponse::drop_after`]), by going silent
//! ([`MockResponse::hang_after`]) or never end, repeating a piece until the client goes away
//! ([`MockResponse::then_forever`]). With the queue empty it answers 500 with a JSON error
//! that says so.
//!
//! [`openai`] and [`anthropic`] build streamed responses in each provider's wire format.
//!
//! ```
//! use harness_core::model::{KernelMessage, Model, ModelRequest, OpenAiModel, ProviderConfig, collect_response};
//! use harness_tests::mock_llm::{MockLlm, openai};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let server = MockLlm::start().await.unwrap();
//! server.push(openai::text("Hello!"));
//! let model = OpenAiModel::new("openai/gpt-4o", ProviderConfig::new(server.url()).with_api_key("k")).unwrap();
//! let request = ModelRequest { messages: vec![KernelMessage::user("Hi")].into(), ..ModelRequest::default() };
//! let response = collect_response(model.stream(&request).await.unwrap()).await.unwrap();
//! assert_eq!(response.content, "Hello!");
//! let seen = server.requests();
//! assert_eq!(seen[0].path, "/chat/completions");
//! assert_eq!(seen[0].header("authorization"), Some("Bearer k"));
//! assert_eq!(seen[0].json.as_ref().unwrap()["messages"][0]["content"], "Hi");
//! # });
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The largest request the server accepts (head and body).
const MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;

/// How a response's body ends.
#[derive(Clone, Debug, PartialEq, Eq)]
enum BodyEnd {
    /// All pieces, then the terminating chunk.
    Complete,
    /// After this many pieces, close the connection without finishing the body.
    Drop(usize),
    /// After this many pieces, send nothing more and keep the connection open until the client
    /// goes away.
    Hang(usize),
    /// After all pieces, send this one again and again until the client goes away.
    Forever(Vec<u8>),
}

/// One scripted HTTP response.
#[derive(Clone, Debug)]
pub struct MockResponse {
    status: u16,
    headers: Vec<(String, String)>,
    pieces: Vec<Vec<u8>>,
    end: BodyEnd,
}

impl MockResponse {
    /// A response with this status, no headers and an empty body.
    pub fn new(status: u16) -> Self {
        MockResponse {
            status,
            headers: Vec::new(),
            pieces: Vec::new(),
            end: BodyEnd::Complete,
        }
    }

    /// A JSON body in one piece, with `content-type: application/json`.
    pub fn json(status: u16, body: &Value) -> Self {
        MockResponse::new(status)
            .header("content-type", "application/json")
            .piece(body.to_string())
    }

    /// A `200 text/event-stream` response sending each frame as its own piece. Frames are sent
    /// as given: end each with a blank line (`"data: {}\n\n"`).
    pub fn sse<S: Into<String>>(frames: impl IntoIterator<Item = S>) -> Self {
        let mut response = MockResponse::new(200)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache");
        for frame in frames {
            response = response.piece(frame.into());
        }
        response
    }

    /// Adds a response header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Appends a body piece (sent as one chunk, then flushed).
    pub fn piece(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.pieces.push(bytes.into());
        self
    }

    /// Re-cuts the whole body into pieces of `size` bytes (the last may be shorter), so events,
    /// lines and UTF-8 characters are split wherever the cuts fall.
    pub fn split_every(mut self, size: usize) -> Self {
        let body: Vec<u8> = self.pieces.concat();
        self.pieces = body.chunks(size.max(1)).map(<[u8]>::to_vec).collect();
        self
    }

    /// Sends only the first `pieces` pieces, then drops the connection mid-body.
    pub fn drop_after(mut self, pieces: usize) -> Self {
        self.end = BodyEnd::Drop(pieces);
        self
    }

    /// Sends only the first `pieces` pieces, then stays silent with the connection open until
    /// the client closes it (to test read timeouts and cancellation).
    pub fn hang_after(mut self, pieces: usize) -> Self {
        self.end = BodyEnd::Hang(pieces);
        self
    }

    /// After all pieces, sends `piece` again and again, never ending the body, until the
    /// client closes the connection (a broken or hostile server's endless stream).
    pub fn then_forever(mut self, piece: impl Into<Vec<u8>>) -> Self {
        self.end = BodyEnd::Forever(piece.into());
        self
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The whole body, as the client will have received it.
    pub fn body(&self) -> Vec<u8> {
        self.pieces.concat()
    }
}

/// A request the server received.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target, e.g. `/v1/messages`.
    pub path: String,
    /// The headers, names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
    /// The body parsed as JSON, if it is JSON.
    pub json: Option<Value>,
}

impl RecordedRequest {
    /// The first value of a header (the name is matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The JSON body, or `Value::Null` if it was not JSON.
    pub fn body_json(&self) -> &Value {
        self.json.as_ref().unwrap_or(&Value::Null)
    }
}

#[derive(Default)]
struct Shared {
    queue: Mutex<VecDeque<MockResponse>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The mock server. It stops (closing every open connection) when dropped.
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for MockLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockLlm").finish_non_exhaustive()
    }
}

impl MockLlm {
    /// Starts a server on a free port of 127.0.0.1.
    pub async fn start() -> std::io::Result<MockLlm> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(serve(listener, Arc::clone(&shared)));
        Ok(MockLlm { addr, shared, task })
    }

    /// The server's root URL, `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a response for the next request.
    pub fn push(&self, response: MockResponse) -> &Self {
        lock(&self.shared.queue).push_back(response);
        self
    }

    /// Every request received so far, in order. A request is recorded before its response is
    /// sent, so once a client has seen a response its request is here.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Responses still queued.
    pub fn remaining(&self) -> usize {
        lock(&self.shared.queue).len()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    // Dropping the set (when this task is aborted) aborts every connection task.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    connections.spawn(handle(stream, Arc::clone(&shared)));
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn handle(mut stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    lock(&shared.requests).push(request);
    let response = lock(&shared.queue).pop_front().unwrap_or_else(|| {
        MockResponse::json(
            500,
            &serde_json::json!({"error": {
                "message": "mock server: no scripted response left for this request",
                "type": "mock_error",
            }}),
        )
    });
    let _ = respond(&mut stream, &response).await;
}

async fn read_request(stream: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buffer = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if buffer.len() > MAX_REQUEST_BYTES {
            return None;
        }
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST_BYTES);
    let mut body = buffer.split_off(head_end + 4);
    while body.len() < length {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    body.truncate(length);
    let json = serde_json::from_slice(&body).ok();
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
        json,
    })
}

async fn respond(stream: &mut TcpStream, response: &MockResponse) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    let sent = match response.end {
        BodyEnd::Complete | BodyEnd::Forever(_) => response.pieces.len(),
        BodyEnd::Drop(n) | BodyEnd::Hang(n) => n.min(response.pieces.len()),
    };
    for piece in response.pieces.iter().take(sent) {
        write_chunk(stream, piece).await?;
    }
    match &response.end {
        BodyEnd::Complete => {
            stream.write_all(b"0\r\n\r\n").await?;
            stream.flush().await?;
            stream.shutdown().await
        }
        // Dropping the stream closes the connection with the body unfinished.
        BodyEnd::Drop(_) => Ok(()),
        BodyEnd::Hang(_) => {
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
            Ok(())
        }
        // Ends when a write fails: the client closed the connection.
        BodyEnd::Forever(piece) => loop {
            write_chunk(stream, piece).await?;
        },
    }
}

/// Sends one chunk of a chunked body, and flushes it.
async fn write_chunk(stream: &mut TcpStream, piece: &[u8]) -> std::io::Result<()> {
    if piece.is_empty() {
        return Ok(()); // an empty chunk would end the body
    }
    stream
        .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
        .await?;
    stream.write_all(piece).await?;
    stream.write_all(b"\r\n").await?;
    stream.flush().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Mock",
    }
}

/// The text cut in two near its middle, on a character boundary.
fn halves(text: &str) -> [&str; 2] {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle -= 1;
    }
    let (head, tail) = text.split_at(middle);
    [head, tail]
}

/// Streamed responses in the OpenAI Chat Completions wire format.
pub mod openai {
    use serde_json::{Value, json};

    use super::MockResponse;

    /// One `data:` frame holding a `chat.completion.chunk` with this first-choice `delta` and
    /// finish reason.
    pub fn chunk(delta: Value, finish_reason: Option<&str>) -> String {
        frame(&json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "mock",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }))
    }

    /// The usage frame sent last when `stream_options.include_usage` is set.
    pub fn usage(prompt_tokens: u64, completion_tokens: u64) -> String {
        frame(&json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "mock",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }))
    }

    /// `data: <json>` and a blank line.
    pub fn frame(json: &Value) -> String {
        format!("data: {json}\n\n")
    }

    /// The end marker, `data: [DONE]`.
    pub fn done() -> String {
        "data: [DONE]\n\n".to_owned()
    }

    /// A streamed text answer: the text word by word, `stop`, usage 10/5, `[DONE]`.
    pub fn text(text: &str) -> MockResponse {
        let mut frames = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        frames.extend(
            text.split_inclusive(' ')
                .map(|word| chunk(json!({ "content": word }), None)),
        );
        frames.push(chunk(json!({}), Some("stop")));
        frames.push(usage(10, 5));
        frames.push(done());
        MockResponse::sse(frames)
    }

    /// Streamed tool calls `(id, name, arguments JSON)`: each call's id and name first, then
    /// its arguments in two pieces; `tool_calls`, usage 10/5, `[DONE]`.
    pub fn tool_calls(calls: &[(&str, &str, Value)]) -> MockResponse {
        let mut frames = vec![chunk(json!({"role": "assistant", "content": null}), None)];
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            frames.push(chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            let text = arguments.to_string();
            for piece in super::halves(&text) {
                frames.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
        frames.push(chunk(json!({}), Some("tool_calls")));
        frames.push(usage(10, 5));
        frames.push(done());
        MockResponse::sse(frames)
    }
}

/// Streamed responses in the Anthropic Messages wire format.
pub mod anthropic {
    use serde_json::{Value, json};

    use super::MockResponse;

    /// An `event: <name>` frame whose data is `json`.
    pub fn event(name: &str, json: &Value) -> String {
        format!("event: {name}\ndata: {json}\n\n")
    }

    /// `message_start` with these input and output token counts.
    pub fn message_start(input_tokens: u64, output_tokens: u64) -> String {
        event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": "msg_mock", "type": "message", "role": "assistant", "content": [],
                "model": "mock", "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}}),
        )
    }

    /// `content_block_start` for this block.
    pub fn block_start(index: usize, block: Value) -> String {
        event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        )
    }

    /// `content_block_delta` with this delta.
    pub fn block_delta(index: usize, delta: Value) -> String {
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        )
    }

    /// `content_block_stop`.
    pub fn block_stop(index: usize) -> String {
        event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        )
    }

    /// `message_delta` with a stop reason and the output token count.
    pub fn message_delta(stop_reason: &str, output_tokens: u64) -> String {
        event(
            "message_delta",
            &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}),
        )
    }

    /// `message_stop`.
    pub fn message_stop() -> String {
        event("message_stop", &json!({"type": "message_stop"}))
    }

    /// A streamed text answer: the text word by word, `end_turn`, usage 10/5.
    pub fn text(text: &str) -> MockResponse {
        let mut frames = vec![
            message_start(10, 1),
            block_start(0, json!({"type": "text", "text": ""})),
            event("ping", &json!({"type": "ping"})),
        ];
        frames.extend(
            text.split_inclusive(' ')
                .map(|word| block_delta(0, json!({"type": "text_delta", "text": word}))),
        );
        frames.push(block_stop(0));
        frames.push(message_delta("end_turn", 5));
        frames.push(message_stop());
        MockResponse::sse(frames)
    }

    /// Streamed `tool_use` blocks `(id, name, input)`: the input JSON in two pieces;
    /// `tool_use`, usage 10/5.
    pub fn tool_calls(calls: &[(&str, &str, Value)]) -> MockResponse {
        let mut frames = vec![message_start(10, 1)];
        for (index, (id, name, input)) in calls.iter().enumerate() {
            frames.push(block_start(
                index,
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            ));
            let text = input.to_string();
            for piece in super::halves(&text) {
                frames.push(block_delta(
                    index,
                    json!({"type": "input_json_delta", "partial_json": piece}),
                ));
            }
            frames.push(block_stop(index));
        }
        frames.push(message_delta("tool_use", 5));
        frames.push(message_stop());
        MockResponse::sse(frames)
    }
}
