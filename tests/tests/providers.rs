//! The real HTTP provider clients against the mock LLM server on 127.0.0.1, which streams
//! fixtures in each provider's documented wire format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures_util::StreamExt;
use harness_core::model::{
    FinishReason, KernelMessage, Model, ModelError, ModelRequest, ModelResponse, OpenAiModel,
    ProviderConfig, ResponseAssembler, RetryPolicy, StreamEvent, Thinking, ToolCall, ToolSpec,
    call_with_retries,
};
use harness_tests::mock_llm::{MockLlm, MockResponse, openai};
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
        messages: vec![KernelMessage::user(text)],
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
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        category: None,
    }
}

/// A conversation with everything the mappings must handle: a kernel nudge in the middle,
/// parallel tool calls with signed thinking, their results, and a malformed call kept as text.
fn rich_request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "You are a coding agent.".into(),
        messages: vec![
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
        ],
        tools: vec![read_tool()],
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
