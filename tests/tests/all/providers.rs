//! The real HTTP provider clients against the mock LLM server on 127.0.0.1, which streams
//! fixtures in each provider's documented wire format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use harness_core::model::sse::{
    DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES, SseLimit, SseLimits,
};
use harness_core::model::{
    AnthropicModel, FinishReason, KernelMessage, Model, ModelCatalog, ModelError, ModelRequest,
    ModelResponse, OpenAiModel, ProviderConfig, ResponseAssembler, RetryPolicy, StreamEvent,
    Thinking, ToolCall, ToolSpec, call_with_retries,
};
use harness_tests::mock_llm::{MockLlm, MockResponse, anthropic, openai};
use serde_json::{Value, json};

/// Streams one call: every event, and the assembled response or the first error.
async fn run(
    model: &dyn Model,
    request: &ModelRequest,
) -> (Vec<StreamEvent>, Result<ModelResponse, ModelError>) {
    let mut stream = match model.stream(request).await {
        Ok(stream) => stream,
        Err(error) => return (Vec::new(), Err(error)),
    };
    let mut events = Vec::new();
    let mut assembler = ResponseAssembler::default();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                events.push(event.clone());
                assembler.push(event);
            }
            Err(error) => return (events, Err(error)),
        }
    }
    (events, Ok(assembler.finish()))
}

fn user(text: &str) -> ModelRequest {
    ModelRequest {
        model: "ignored/by-providers".into(),
        system: "You are terse.".into(),
        messages: Arc::new(vec![KernelMessage::user(text)]),
        ..ModelRequest::default()
    }
}

/// A short backoff so retry tests do not wait for real.
fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
    }
}

fn texts(events: &[StreamEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn read_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Reads a file.".into(),
        input_schema: Arc::new(
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        category: None,
    }
}

/// A conversation with everything the mappings must handle: a kernel nudge in the middle,
/// parallel tool calls with signed thinking, their results, and a malformed call kept as text.
fn rich_request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "You are a coding agent.".into(),
        messages: Arc::new(vec![
            KernelMessage::user("Read a.rs and b.rs"),
            KernelMessage::Assistant {
                content: "Reading both.".into(),
                tool_calls: vec![
                    ToolCall {
                        id: "call_a".into(),
                        name: "read_file".into(),
                        arguments: json!({"path": "a.rs"}),
                    },
                    ToolCall {
                        id: "call_b".into(),
                        name: "read_file".into(),
                        arguments: json!({"path": "b.rs"}),
                    },
                ],
                thinking: Some(Thinking {
                    text: "Two files, read both at once.".into(),
                    signature: Some("sig-123".into()),
                }),
            },
            KernelMessage::tool_result("call_a", "read_file", "fn a() {}", false),
            KernelMessage::tool_result("call_b", "read_file", "no such file", true),
            KernelMessage::system("You have 3 steps left."),
            KernelMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_c".into(),
                    name: "read_file".into(),
                    arguments: Value::String("{\"path\": \"c.rs\"".into()),
                }],
                thinking: None,
            },
            KernelMessage::tool_result("call_c", "read_file", "invalid arguments", true),
            KernelMessage::user("Summarize."),
        ]),
        tools: vec![read_tool()].into(),
        temperature: Some(0.5),
        max_tokens: Some(1000),
    }
}

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions

fn openai_model(server: &MockLlm) -> OpenAiModel {
    OpenAiModel::new(
        "openai/gpt-4o",
        ProviderConfig::openai()
            .with_base_url(format!("{}/v1", server.url()))
            .with_api_key("sk-test"),
    )
    .unwrap()
}

#[tokio::test]
async fn openai_streams_text_and_usage_split_at_every_few_bytes() {
    let server = MockLlm::start().await.unwrap();
    let frames = vec![
        openai::chunk(json!({"role": "assistant", "content": ""}), None),
        openai::chunk(json!({"content": "Héllo"}), None),
        openai::chunk(json!({"content": ", wörld 🦀"}), None),
        openai::chunk(json!({}), Some("stop")),
        openai::frame(&json!({
            "id": "x", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49,
                "prompt_tokens_details": {"cached_tokens": 30},
                "completion_tokens_details": {"reasoning_tokens": 3}}})),
        ": a comment line servers send to keep the connection alive\n\n".to_owned(),
        openai::done(),
    ];
    for size in [1, 3, 7, 64, 100_000] {
        server.push(MockResponse::sse(frames.clone()).split_every(size));
    }
    let model = openai_model(&server);
    for size in [1, 3, 7, 64, 100_000] {
        let (events, response) = run(&model, &user("Hi")).await;
        let response = response.unwrap();
        assert_eq!(
            texts(&events).concat(),
            "Héllo, wörld 🦀",
            "pieces of {size} bytes"
        );
        assert_eq!(response.content, "Héllo, wörld 🦀");
        assert_eq!(response.finish_reason, FinishReason::Stop);
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Finish(FinishReason::Stop))
        );
        let usage = response.usage;
        assert_eq!(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.reasoning_tokens
            ),
            (42, 7, 30, 3)
        );
    }
}

#[tokio::test]
async fn openai_tool_call_deltas_split_across_chunks_and_mid_token() {
    let server = MockLlm::start().await.unwrap();
    let call = |index: u64, value: Value| {
        openai::chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": value}}]}),
            None,
        )
    };
    let response = MockResponse::sse([
        openai::chunk(json!({"role": "assistant", "content": null}), None),
        openai::chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_A", "type": "function",
                "function": {"name": "read_file", "arguments": ""}}]}),
            None,
        ),
        call(0, json!("{\"pa")),
        call(0, json!("th\": \"src/ma")),
        openai::chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_B", "type": "function",
                "function": {"name": "grep", "arguments": "{\"pattern\":"}}]}),
            None,
        ),
        call(0, json!("in.rs\"}")),
        call(1, json!(" \"fn main\\u00e9\"}")),
        openai::chunk(json!({}), Some("tool_calls")),
        openai::usage(100, 20),
        openai::done(),
    ])
    .split_every(5);
    server.push(response);
    let (events, response) = run(&openai_model(&server), &user("Find main")).await;
    let response = response.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.tool_calls,
        [
            ToolCall {
                id: "call_A".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/main.rs"})
            },
            ToolCall {
                id: "call_B".into(),
                name: "grep".into(),
                arguments: json!({"pattern": "fn mainé"})
            },
        ]
    );
    assert!(events.contains(&StreamEvent::ToolCallStart {
        index: 0,
        id: "call_A".into(),
        name: "read_file".into()
    }));
    assert!(events.contains(&StreamEvent::ToolCallDelta {
        index: 0,
        arguments: "th\": \"src/ma".into()
    }));
    assert!(events.contains(&StreamEvent::ToolCallEnd { index: 1 }));
    assert_eq!(response.usage.input_tokens, 100);
}

#[tokio::test]
async fn openai_reasoning_fields_become_thinking() {
    let server = MockLlm::start().await.unwrap();
    // DeepSeek sends `reasoning_content`; OpenRouter and vLLM send `reasoning`.
    server.push(MockResponse::sse([
        openai::chunk(
            json!({"role": "assistant", "reasoning_content": "Let me "}),
            None,
        ),
        openai::chunk(json!({"reasoning": "think."}), None),
        openai::chunk(json!({"content": "42"}), Some("stop")),
        openai::done(),
    ]));
    let (events, response) = run(&openai_model(&server), &user("?")).await;
    let response = response.unwrap();
    assert_eq!(events[0], StreamEvent::ThinkingDelta("Let me ".into()));
    assert_eq!(response.thinking.unwrap().text, "Let me think.");
    assert_eq!(response.content, "42");
}

#[tokio::test]
async fn openai_finish_reasons() {
    let server = MockLlm::start().await.unwrap();
    for reason in ["length", "content_filter", "stop"] {
        server.push(MockResponse::sse([
            openai::chunk(json!({"content": "partial"}), Some(reason)),
            openai::done(),
        ]));
    }
    server.push(MockResponse::sse([
        openai::chunk(json!({"refusal": "I can't help with that."}), None),
        openai::chunk(json!({}), Some("stop")),
        openai::done(),
    ]));
    let model = openai_model(&server);
    let mut reasons = Vec::new();
    for _ in 0..4 {
        reasons.push(run(&model, &user("go")).await.1.unwrap().finish_reason);
    }
    assert_eq!(
        reasons,
        [
            FinishReason::Length,
            FinishReason::ContentFilter,
            FinishReason::Stop,
            FinishReason::Refusal
        ]
    );
}

#[tokio::test]
async fn openai_request_follows_the_documented_format() {
    let server = MockLlm::start().await.unwrap();
    server.push(openai::text("Done."));
    run(&openai_model(&server), &rich_request())
        .await
        .1
        .unwrap();
    let requests = server.requests();
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    let body = request.body_json();
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["max_completion_tokens"], 1000);
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "read_file", "description": "Reads a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Read a.rs and b.rs"},
            {"role": "assistant", "content": "Reading both.", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"b.rs\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": "fn a() {}"},
            {"role": "tool", "tool_call_id": "call_b", "content": "no such file"},
            {"role": "system", "content": "You have 3 steps left."},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_c", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"c.rs\""}},
            ]},
            {"role": "tool", "tool_call_id": "call_c", "content": "invalid arguments"},
            {"role": "user", "content": "Summarize."},
        ])
    );
}

#[tokio::test]
async fn openai_compatible_server_without_a_key_gets_no_auth_header() {
    let server = MockLlm::start().await.unwrap();
    server.push(openai::text("local"));
    let model = OpenAiModel::new(
        "ollama/llama3.2",
        ProviderConfig::new(format!("{}/v1/", server.url())).with_max_tokens(256),
    )
    .unwrap();
    assert_eq!(run(&model, &user("hi")).await.1.unwrap().content, "local");
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), None);
    let body = request.body_json();
    assert_eq!(body["model"], "llama3.2");
    assert_eq!(body["max_tokens"], 256);
    assert!(body.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn openai_429_with_retry_after_then_success() {
    let server = MockLlm::start().await.unwrap();
    let limited = MockResponse::json(
        429,
        &json!({"error": {"message": "Rate limit reached for gpt-4o", "type": "requests", "code": "rate_limit_exceeded"}}),
    )
    .header("retry-after", "1");
    server.push(limited.clone());
    let model = openai_model(&server);
    let error = run(&model, &user("hi")).await.1.unwrap_err();
    match &error {
        ModelError::RateLimited {
            message,
            retry_after,
            ..
        } => {
            assert_eq!(message, "Rate limit reached for gpt-4o");
            assert_eq!(*retry_after, Some(Duration::from_secs(1)));
        }
        other => panic!("expected a rate limit, got {other:?}"),
    }
    assert!(error.is_retryable());

    server.push(limited).push(openai::text("after the wait"));
    let response = call_with_retries(&model, &user("hi"), &quick_retries())
        .await
        .unwrap();
    assert_eq!(response.content, "after the wait");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn openai_connection_dropped_mid_stream_is_a_retryable_connection_error() {
    let server = MockLlm::start().await.unwrap();
    let fixture = openai::text("one two three four");
    server.push(fixture.clone().drop_after(2));
    let model = openai_model(&server);
    let (events, result) = run(&model, &user("count")).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Connection { .. }), "{error:?}");
    assert!(error.is_retryable());
    assert_eq!(
        texts(&events),
        ["one "],
        "what arrived before the drop was streamed"
    );

    // The whole body but no `[DONE]` and no finish reason: also cut off.
    let frames = [openai::chunk(json!({"content": "half"}), None)];
    server.push(MockResponse::sse(frames));
    assert!(matches!(
        run(&model, &user("x")).await.1,
        Err(ModelError::Connection { .. })
    ));

    // And the retry helper recovers from a drop.
    server.push(fixture.clone().drop_after(3)).push(fixture);
    let response = call_with_retries(&model, &user("count"), &quick_retries())
        .await
        .unwrap();
    assert_eq!(response.content, "one two three four");
}

#[tokio::test]
async fn openai_error_object_mid_stream() {
    let server = MockLlm::start().await.unwrap();
    server.push(MockResponse::sse([
        openai::chunk(json!({"content": "Par"}), None),
        openai::frame(&json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}})),
        openai::chunk(json!({"content": "never seen"}), None),
    ]));
    server.push(MockResponse::sse([openai::frame(
        &json!({"error": {"message": "Invalid schema for function 'read_file'", "type": "invalid_request_error"}}),
    )]));
    let model = openai_model(&server);
    let (events, result) = run(&model, &user("x")).await;
    assert_eq!(texts(&events), ["Par"]);
    match result.unwrap_err() {
        error @ ModelError::Stream { .. } => {
            assert!(error.is_retryable());
            assert!(
                error.to_string().contains("The server had an error"),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
    let error = run(&model, &user("x")).await.1.unwrap_err();
    assert!(
        matches!(
            &error,
            ModelError::Stream {
                retryable: false,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn openai_401_names_the_env_var() {
    let server = MockLlm::start().await.unwrap();
    server.push(MockResponse::json(
        401,
        &json!({"error": {"message": "Incorrect API key provided: sk-test.", "type": "invalid_request_error", "code": "invalid_api_key"}}),
    ));
    let error = run(&openai_model(&server), &user("hi"))
        .await
        .1
        .unwrap_err();
    match &error {
        ModelError::Auth {
            provider,
            message,
            env_var,
        } => {
            assert_eq!(provider, "openai");
            assert_eq!(message, "Incorrect API key provided: sk-test.");
            assert_eq!(env_var.as_deref(), Some("OPENAI_API_KEY"));
        }
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().contains("OPENAI_API_KEY"));
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn openai_context_overflow() {
    let server = MockLlm::start().await.unwrap();
    server.push(MockResponse::json(
        400,
        &json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
    ));
    server.push(MockResponse::json(
        400,
        &json!({"error": {"message": "Unknown parameter: 'foo'.", "type": "invalid_request_error", "code": "unknown_parameter"}}),
    ));
    let model = openai_model(&server);
    let error = run(&model, &user("hi")).await.1.unwrap_err();
    assert!(
        matches!(&error, ModelError::ContextOverflow { message } if message.contains("128000")),
        "{error:?}"
    );
    let error = run(&model, &user("hi")).await.1.unwrap_err();
    assert!(
        matches!(&error, ModelError::BadRequest { message, .. } if message == "Unknown parameter: 'foo'."),
        "{error:?}"
    );
}

#[tokio::test]
async fn openai_server_errors_are_retryable_and_give_up_after_the_policy() {
    let server = MockLlm::start().await.unwrap();
    for _ in 0..3 {
        server.push(
            MockResponse::new(503)
                .header("retry-after-ms", "2")
                .piece("upstream busy"),
        );
    }
    let error = call_with_retries(&openai_model(&server), &user("hi"), &quick_retries())
        .await
        .unwrap_err();
    match error {
        ModelError::Unavailable {
            status,
            message,
            retry_after,
            ..
        } => {
            assert_eq!((status, message.as_str()), (503, "upstream busy"));
            assert_eq!(retry_after, Some(Duration::from_millis(2)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn openai_idle_stream_times_out_as_a_connection_error() {
    let server = MockLlm::start().await.unwrap();
    server.push(openai::text("one two").hang_after(1));
    let model = OpenAiModel::new(
        "openai/gpt-4o",
        ProviderConfig::new(server.url()).with_read_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let error = run(&model, &user("hi")).await.1.unwrap_err();
    assert!(
        matches!(&error, ModelError::Connection { message, .. } if message.contains("timed out")),
        "{error:?}"
    );
}

#[tokio::test]
async fn openai_missing_key_and_bad_ids_fail_at_construction() {
    let missing = OpenAiModel::new(
        "openai/gpt-4o",
        ProviderConfig::openai().with_api_key_env("HARNESS_TEST_KEY_THAT_IS_NEVER_SET"),
    )
    .unwrap_err();
    assert!(
        matches!(&missing, ModelError::MissingApiKey { env_var: Some(var), .. } if var == "HARNESS_TEST_KEY_THAT_IS_NEVER_SET"),
        "{missing:?}"
    );
    assert!(
        missing
            .to_string()
            .contains("HARNESS_TEST_KEY_THAT_IS_NEVER_SET")
    );
    assert!(matches!(
        OpenAiModel::new("gpt-4o", ProviderConfig::new("http://127.0.0.1:1")),
        Err(ModelError::Config { .. })
    ));
    assert!(matches!(
        OpenAiModel::new("x/y", ProviderConfig::new("ftp://example")),
        Err(ModelError::Config { .. })
    ));
}

#[tokio::test]
async fn openai_non_stream_success_body_is_an_invalid_response() {
    let server = MockLlm::start().await.unwrap();
    server.push(
        MockResponse::new(200)
            .header("content-type", "text/html")
            .piece("<html>login</html>"),
    );
    let error = run(&openai_model(&server), &user("hi"))
        .await
        .1
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::InvalidResponse { message, .. } if message.contains("base URL")),
        "{error:?}"
    );
}

/// Runs a call against a server whose body never ends; the call must fail with the typed
/// error naming the limit, once, without a retry (the test ending at all shows the client
/// stopped reading: the server only stops when the client closes the connection).
async fn endless(server: &MockLlm, model: &dyn Model, limit: SseLimit, max: u64) -> ModelError {
    let error = call_with_retries(model, &user("hi"), &quick_retries())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::LimitExceeded { limit: l, max: m, .. } if *l == limit && *m == max),
        "{error:?}"
    );
    assert!(error.to_string().contains(limit.setting()), "{error}");
    assert_eq!(server.requests().len(), 1, "a broken limit is not retried");
    error
}

#[tokio::test]
async fn openai_endless_line_fails_at_the_default_line_limit() {
    let server = MockLlm::start().await.unwrap();
    server.push(
        MockResponse::sse(["data: {\"choices\":[{\"delta\":{\"content\":\""])
            .then_forever("x".repeat(64 * 1024)),
    );
    let error = endless(
        &server,
        &openai_model(&server),
        SseLimit::Line,
        DEFAULT_MAX_LINE_BYTES as u64,
    )
    .await;
    assert!(error.to_string().contains("openai"), "{error}");
}

#[tokio::test]
async fn openai_endless_data_lines_fail_at_a_configured_event_limit() {
    let server = MockLlm::start().await.unwrap();
    server.push(
        MockResponse::sse(["event: message\n"]).then_forever("data: 0123456789\n".repeat(1024)),
    );
    let limits = SseLimits {
        max_event_bytes: 256 * 1024,
        ..SseLimits::default()
    };
    let model = OpenAiModel::new(
        "openai/gpt-4o",
        ProviderConfig::new(server.url()).with_sse_limits(limits),
    )
    .unwrap();
    endless(&server, &model, SseLimit::Event, 256 * 1024).await;
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages

fn anthropic_model(server: &MockLlm) -> AnthropicModel {
    AnthropicModel::new(
        "anthropic/claude-sonnet-4-5",
        ProviderConfig::anthropic()
            .with_base_url(server.url())
            .with_api_key("sk-ant-test"),
    )
    .unwrap()
}

#[tokio::test]
async fn anthropic_streams_text_and_usage_split_at_every_few_bytes() {
    let server = MockLlm::start().await.unwrap();
    let frames = vec![
        anthropic::event(
            "message_start",
            &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "content": [], "model": "claude-sonnet-4-5",
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 12, "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 20, "output_tokens": 1}}}),
        ),
        anthropic::block_start(0, json!({"type": "text", "text": ""})),
        anthropic::event("ping", &json!({"type": "ping"})),
        anthropic::block_delta(0, json!({"type": "text_delta", "text": "Héllo"})),
        anthropic::block_delta(0, json!({"type": "text_delta", "text": ", wörld 🦀"})),
        anthropic::block_stop(0),
        anthropic::message_delta("end_turn", 9),
        anthropic::message_stop(),
    ];
    for size in [1, 3, 7, 64, 100_000] {
        server.push(MockResponse::sse(frames.clone()).split_every(size));
    }
    let model = anthropic_model(&server);
    for size in [1, 3, 7, 64, 100_000] {
        let (events, response) = run(&model, &user("Hi")).await;
        let response = response.unwrap();
        assert_eq!(
            texts(&events),
            ["Héllo", ", wörld 🦀"],
            "pieces of {size} bytes"
        );
        assert_eq!(response.content, "Héllo, wörld 🦀");
        assert_eq!(response.finish_reason, FinishReason::Stop);
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Finish(FinishReason::Stop))
        );
        let usage = response.usage;
        assert_eq!(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens
            ),
            (132, 9, 100, 20),
            "input tokens include cache reads and writes"
        );
    }
}

#[tokio::test]
async fn anthropic_tool_use_input_split_across_chunks_and_mid_token() {
    let server = MockLlm::start().await.unwrap();
    let input = |index: usize, piece: &str| {
        anthropic::block_delta(
            index,
            json!({"type": "input_json_delta", "partial_json": piece}),
        )
    };
    server.push(
        MockResponse::sse([
            anthropic::message_start(50, 1),
            anthropic::block_start(0, json!({"type": "text", "text": ""})),
            anthropic::block_delta(0, json!({"type": "text_delta", "text": "Reading."})),
            anthropic::block_stop(0),
            anthropic::block_start(
                1,
                json!({"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": {}}),
            ),
            input(1, ""),
            input(1, "{\"pa"),
            input(1, "th\": \"src/ma"),
            input(1, "in.rs\"}"),
            anthropic::block_stop(1),
            anthropic::block_start(
                2,
                json!({"type": "tool_use", "id": "toolu_B", "name": "grep", "input": {}}),
            ),
            input(2, "{\"pattern\": \"fn m"),
            input(2, "ainé\"}"),
            anthropic::block_stop(2),
            anthropic::message_delta("tool_use", 30),
            anthropic::message_stop(),
        ])
        .split_every(5),
    );
    let (events, response) = run(&anthropic_model(&server), &user("Find main")).await;
    let response = response.unwrap();
    assert_eq!(response.content, "Reading.");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.tool_calls,
        [
            ToolCall {
                id: "toolu_A".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/main.rs"})
            },
            ToolCall {
                id: "toolu_B".into(),
                name: "grep".into(),
                arguments: json!({"pattern": "fn mainé"})
            },
        ]
    );
    assert!(events.contains(&StreamEvent::ToolCallStart {
        index: 1,
        id: "toolu_B".into(),
        name: "grep".into()
    }));
    assert!(events.contains(&StreamEvent::ToolCallEnd { index: 0 }));
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (50, 30)
    );
}

#[tokio::test]
async fn anthropic_thinking_with_signature() {
    let server = MockLlm::start().await.unwrap();
    server.push(MockResponse::sse([
        anthropic::message_start(10, 1),
        anthropic::block_start(0, json!({"type": "thinking", "thinking": ""})),
        anthropic::block_delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
        anthropic::block_delta(0, json!({"type": "thinking_delta", "thinking": "think."})),
        anthropic::block_delta(
            0,
            json!({"type": "signature_delta", "signature": "EqQBCgIYAhIM"}),
        ),
        anthropic::block_stop(0),
        anthropic::block_start(1, json!({"type": "text", "text": ""})),
        anthropic::block_delta(1, json!({"type": "text_delta", "text": "42"})),
        anthropic::block_stop(1),
        anthropic::message_delta("end_turn", 20),
        anthropic::message_stop(),
    ]));
    let model = anthropic_model(&server).with_thinking(2_000);
    let mut request = user("?");
    request.temperature = Some(0.2);
    let (events, response) = run(&model, &request).await;
    let response = response.unwrap();
    assert_eq!(events[1], StreamEvent::ThinkingDelta("Let me ".into()));
    assert_eq!(
        response.thinking,
        Some(Thinking {
            text: "Let me think.".into(),
            signature: Some("EqQBCgIYAhIM".into())
        })
    );
    assert_eq!(response.content, "42");
    let body = server.requests()[0].body_json().clone();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    assert!(
        body.get("temperature").is_none(),
        "thinking requires the default temperature"
    );
    assert!(body["max_tokens"].as_u64().unwrap() > 2000);
}

#[tokio::test]
async fn anthropic_stop_reasons() {
    let server = MockLlm::start().await.unwrap();
    for reason in ["max_tokens", "stop_sequence", "refusal", "end_turn"] {
        server.push(MockResponse::sse([
            anthropic::message_start(1, 1),
            anthropic::block_start(0, json!({"type": "text", "text": "partial"})),
            anthropic::block_stop(0),
            anthropic::message_delta(reason, 2),
            anthropic::message_stop(),
        ]));
    }
    let model = anthropic_model(&server);
    let mut reasons = Vec::new();
    for _ in 0..4 {
        let response = run(&model, &user("go")).await.1.unwrap();
        assert_eq!(response.content, "partial");
        reasons.push(response.finish_reason);
    }
    assert_eq!(
        reasons,
        [
            FinishReason::Length,
            FinishReason::Stop,
            FinishReason::Refusal,
            FinishReason::Stop
        ]
    );
}

#[tokio::test]
async fn anthropic_request_follows_the_documented_format() {
    let server = MockLlm::start().await.unwrap();
    server.push(anthropic::text("Done."));
    run(&anthropic_model(&server), &rich_request())
        .await
        .1
        .unwrap();
    let requests = server.requests();
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(request.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    let body = request.body_json();
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["max_tokens"], 1000);
    assert_eq!(body["stream"], true);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["system"], "You are a coding agent.");
    assert_eq!(
        body["tools"],
        json!([{"name": "read_file", "description": "Reads a file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Read a.rs and b.rs"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Two files, read both at once.", "signature": "sig-123"},
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "call_a", "name": "read_file", "input": {"path": "a.rs"}},
                {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "b.rs"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "fn a() {}"},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "no such file", "is_error": true},
                {"type": "text", "text": "<system-reminder>\nYou have 3 steps left.\n</system-reminder>"},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_c", "name": "read_file", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_c", "content": "invalid arguments", "is_error": true},
                {"type": "text", "text": "Summarize."},
            ]},
        ])
    );
}

#[tokio::test]
async fn anthropic_default_max_tokens_and_a_keyless_proxy() {
    let server = MockLlm::start().await.unwrap();
    server.push(anthropic::text("ok"));
    let model = AnthropicModel::new(
        "anthropic/claude-3-5-haiku-latest",
        ProviderConfig::new(server.url()),
    )
    .unwrap();
    run(&model, &user("hi")).await.1.unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.header("x-api-key"), None);
    assert_eq!(request.body_json()["max_tokens"], 8192);
}

#[tokio::test]
async fn anthropic_429_with_retry_after_then_success() {
    let server = MockLlm::start().await.unwrap();
    let limited = MockResponse::json(
        429,
        &json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
    )
    .header("retry-after", "2");
    server.push(limited.clone());
    let model = anthropic_model(&server);
    let error = run(&model, &user("hi")).await.1.unwrap_err();
    assert!(
        matches!(&error, ModelError::RateLimited { retry_after: Some(wait), message, .. }
            if *wait == Duration::from_secs(2) && message.contains("per-minute rate limit")),
        "{error:?}"
    );
    server.push(limited).push(anthropic::text("after the wait"));
    let response = call_with_retries(&model, &user("hi"), &quick_retries())
        .await
        .unwrap();
    assert_eq!(response.content, "after the wait");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn anthropic_529_overloaded_is_retryable() {
    let server = MockLlm::start().await.unwrap();
    server.push(MockResponse::json(
        529,
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    server.push(anthropic::text("back"));
    let model = anthropic_model(&server);
    let error = run(&model, &user("hi")).await.1.unwrap_err();
    assert!(
        matches!(&error, ModelError::Unavailable { status: 529, message, .. } if message == "Overloaded"),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert_eq!(run(&model, &user("hi")).await.1.unwrap().content, "back");
}

#[tokio::test]
async fn anthropic_connection_dropped_mid_stream_is_a_retryable_connection_error() {
    let server = MockLlm::start().await.unwrap();
    let fixture = anthropic::text("one two three four");
    // message_start, block start, ping, "one ": then the connection drops.
    server.push(fixture.clone().drop_after(4));
    let model = anthropic_model(&server);
    let (events, result) = run(&model, &user("count")).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Connection { .. }), "{error:?}");
    assert!(error.is_retryable());
    assert_eq!(texts(&events), ["one "]);

    server.push(fixture.clone().drop_after(5)).push(fixture);
    let response = call_with_retries(&model, &user("count"), &quick_retries())
        .await
        .unwrap();
    assert_eq!(response.content, "one two three four");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn anthropic_error_event_mid_stream() {
    let server = MockLlm::start().await.unwrap();
    let frames = |kind: &str, message: &str| {
        MockResponse::sse([
            anthropic::message_start(10, 1),
            anthropic::block_start(0, json!({"type": "text", "text": ""})),
            anthropic::block_delta(0, json!({"type": "text_delta", "text": "Par"})),
            anthropic::event(
                "error",
                &json!({"type": "error", "error": {"type": kind, "message": message}}),
            ),
            anthropic::block_delta(0, json!({"type": "text_delta", "text": "never seen"})),
        ])
    };
    server.push(frames("overloaded_error", "Overloaded"));
    server.push(frames(
        "invalid_request_error",
        "messages: text content blocks must be non-empty",
    ));
    let model = anthropic_model(&server);
    let (events, result) = run(&model, &user("x")).await;
    assert_eq!(texts(&events), ["Par"]);
    match result.unwrap_err() {
        ModelError::Stream {
            kind,
            message,
            retryable,
            ..
        } => {
            assert_eq!(
                (kind.as_str(), message.as_str(), retryable),
                ("overloaded_error", "Overloaded", true)
            );
        }
        other => panic!("{other:?}"),
    }
    let error = run(&model, &user("x")).await.1.unwrap_err();
    assert!(
        matches!(
            &error,
            ModelError::Stream {
                retryable: false,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn anthropic_401_names_the_env_var() {
    let server = MockLlm::start().await.unwrap();
    server.push(MockResponse::json(
        401,
        &json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    ));
    let error = run(&anthropic_model(&server), &user("hi"))
        .await
        .1
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::Auth { provider, message, env_var: Some(var) }
            if provider == "anthropic" && message == "invalid x-api-key" && var == "ANTHROPIC_API_KEY"),
        "{error:?}"
    );
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"));
}

#[tokio::test]
async fn anthropic_context_overflow() {
    let server = MockLlm::start().await.unwrap();
    server.push(MockResponse::json(
        400,
        &json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210043 tokens > 200000 maximum"}}),
    ));
    let error = run(&anthropic_model(&server), &user("hi"))
        .await
        .1
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::ContextOverflow { message } if message.contains("210043")),
        "{error:?}"
    );
    assert!(!error.is_retryable());
}

// ---------------------------------------------------------------------------------------------
// The catalog builds working clients

#[tokio::test]
async fn anthropic_endless_data_lines_fail_at_the_default_event_limit() {
    let server = MockLlm::start().await.unwrap();
    server.push(
        MockResponse::sse(["event: content_block_delta\n"])
            .then_forever("data: {\"type\":\"content_block_delta\"}\n".repeat(2048)),
    );
    endless(
        &server,
        &anthropic_model(&server),
        SseLimit::Event,
        DEFAULT_MAX_EVENT_BYTES as u64,
    )
    .await;
}

#[tokio::test]
async fn anthropic_endless_keep_alives_fail_at_a_configured_body_limit() {
    let server = MockLlm::start().await.unwrap();
    server.push(
        MockResponse::sse([anthropic::event("ping", &json!({"type": "ping"}))])
            .then_forever(": keep-alive\n".repeat(1024)),
    );
    let model = AnthropicModel::new(
        "anthropic/claude-sonnet-4-5",
        ProviderConfig::new(server.url()).with_sse_limits(SseLimits {
            max_body_bytes: 1024 * 1024,
            ..SseLimits::default()
        }),
    )
    .unwrap();
    endless(&server, &model, SseLimit::Body, 1024 * 1024).await;
}

#[tokio::test]
async fn resolved_models_talk_to_their_provider() {
    let server = MockLlm::start().await.unwrap();
    let catalog = ModelCatalog::new()
        .with_env(Arc::new(|var: &str| match var {
            "GROQ_API_KEY" => Some("gsk-env".to_owned()),
            "ANTHROPIC_API_KEY" => Some("sk-ant-env".to_owned()),
            _ => None,
        }))
        .with_config("groq", |config| {
            config.with_base_url(format!("{}/openai/v1", server.url()))
        })
        .with_config("anthropic", |config| config.with_base_url(server.url()))
        .with_config("ollama", |config| {
            config.with_base_url(format!("{}/v1", server.url()))
        });
    server
        .push(openai::text("from groq"))
        .push(anthropic::text("from claude"))
        .push(openai::tool_calls(&[(
            "call_1",
            "read_file",
            json!({"path": "é.rs"}),
        )]));

    let groq = catalog
        .resolve_model("groq/llama-3.3-70b-versatile")
        .unwrap();
    assert_eq!(
        run(groq.as_ref(), &user("hi")).await.1.unwrap().content,
        "from groq"
    );
    let claude = catalog.resolve_model("anthropic/claude-haiku-4-5").unwrap();
    assert_eq!(
        run(claude.as_ref(), &user("hi")).await.1.unwrap().content,
        "from claude"
    );
    let local = catalog.resolve_model("ollama/qwen2.5-coder").unwrap();
    let response = run(local.as_ref(), &user("hi")).await.1.unwrap();
    assert_eq!(response.tool_calls[0].arguments, json!({"path": "é.rs"}));

    let requests = server.requests();
    assert_eq!(requests[0].path, "/openai/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some("Bearer gsk-env"));
    assert_eq!(requests[0].body_json()["model"], "llama-3.3-70b-versatile");
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].header("x-api-key"), Some("sk-ant-env"));
    assert_eq!(requests[2].path, "/v1/chat/completions");
    assert_eq!(requests[2].header("authorization"), None);
}
