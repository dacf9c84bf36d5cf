//! Typed function tools and the registry: schemas, validation, aliases, names.

use harness_core::tool::*;
use serde::Deserialize;

#[derive(Deserialize, schemars::JsonSchema)]
struct Echo {
    /// What to echo.
    text: String,
    /// How many times.
    #[serde(default)]
    times: Option<u32>,
}

fn echo() -> impl Tool {
    tool_fn(
        "echo",
        "Echoes text.",
        |args: Echo, _ctx: ToolContext| async move {
            Ok::<_, ToolError>(args.text.repeat(args.times.unwrap_or(1) as usize))
        },
    )
    .aliases(["repeat"])
}

#[tokio::test]
async fn typed_tools_get_a_schema_and_decode_their_arguments() {
    let tool = echo();
    let schema = tool.input_schema();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], serde_json::json!(["text"]));
    assert!(schema.get("$schema").is_none());
    assert_eq!(schema["properties"]["text"]["description"], "What to echo.");
    let output = tool
        .execute(
            serde_json::json!({"text": "ab", "times": 2}),
            ToolContext::detached("echo", "c1"),
        )
        .await
        .unwrap();
    assert_eq!(output.content, "abab");
    let error = tool
        .execute(
            serde_json::json!({"text": 3}),
            ToolContext::detached("echo", "c1"),
        )
        .await
        .unwrap_err();
    assert!(
        error.message().contains("invalid arguments for `echo`"),
        "{error}"
    );
}

#[test]
fn the_registry_rejects_duplicates_bad_names_and_bad_schemas() {
    let mut tools = ToolRegistry::new();
    tools.register(echo()).unwrap();
    assert!(matches!(
        tools.register(echo()),
        Err(RegistryError::Duplicate(_))
    ));
    let bad_name = tool_fn("read file", "x", |_: Echo, _| async {
        Ok::<_, ToolError>("")
    });
    assert!(matches!(
        tools.register(bad_name),
        Err(RegistryError::InvalidName(_))
    ));
    assert_eq!(tools.specs().len(), 1);
    assert_eq!(tools.get("echo").unwrap().tool.aliases(), ["repeat"]);
    assert!(tools.subset(["echo", "nope"]).get("echo").is_some());
    assert_eq!(tools.subset(["nope"]).len(), 0);
}

#[tokio::test]
async fn suspending_without_a_harness_is_unavailable() {
    let ctx = ToolContext::detached("ask_user", "c1");
    assert_eq!(
        ctx.suspend(serde_json::json!({"question": "?"}), None)
            .await,
        Err(SuspendError::Unavailable)
    );
}
