//! Tool-call healing against a small registry: any name and argument text a model could send
//! gives a healed call or a failure, never a panic.
#![no_main]

use std::sync::OnceLock;

use harness_core::kernel::heal_tool_call;
use harness_core::tool::{ToolContext, ToolError, ToolRegistry, tool_fn};
use harness_tags::ToolCall;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn registry() -> &'static ToolRegistry {
    static TOOLS: OnceLock<ToolRegistry> = OnceLock::new();
    TOOLS.get_or_init(|| {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Write {
            path: String,
            content: String,
            append: Option<bool>,
            mode: Option<u32>,
        }
        let mut tools = ToolRegistry::new();
        tools
            .register(tool_fn(
                "write_file",
                "Writes.",
                |_: Write, _: ToolContext| async { Ok::<_, ToolError>("ok") },
            ))
            .expect("registers");
        tools
            .register(tool_fn(
                "read_file",
                "Reads.",
                |_: Value, _: ToolContext| async { Ok::<_, ToolError>("ok") },
            ))
            .expect("registers");
        tools
    })
}

fuzz_target!(|input: (String, String, bool)| {
    let (name, text, as_string) = input;
    let arguments = if as_string {
        Value::String(text)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    let call = ToolCall {
        id: "call-1".into(),
        name,
        arguments,
    };
    let _ = heal_tool_call(&call, registry());
});
