//! Custom tools registered at runtime: each calls a webhook, or runs a command, with the
//! model's arguments.
//!
//! They reach every session's harness through one [`ToolSource`]: the kernel asks it for its
//! tools before each step, and it answers from the store when a registration changed (in this
//! process) and with the same list otherwise. A call is `{"id", "tool", "input",
//! "session_id"}`:
//! - a `webhook` handler `POST`s it, signed like hook deliveries (`X-OpenHarness-Signature`
//!   with the tool's secret); a `2xx` answer is the result, anything else fails the call with
//!   the answer's status;
//! - a `command` handler (only when the server allows them:
//!   [`ServerConfig::command_tools`](crate::ServerConfig::command_tools)) runs the program
//!   with its arguments in the workspace (or the server's directory), with only `PATH` and
//!   `HOME` of the server's environment, writes the call to its standard input and takes its
//!   standard output (at most 1 MiB) as the result; a non-zero exit fails the call with its
//!   standard error.
//!
//! Either way, an answer that is a JSON object with `output` gives that as the result.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use harness_core::tool::{
    Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSource, ToolSourceCtx,
};
use harness_store::{Store, WriteOp};
use harness_tags::util::lock;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::hooks::sign;

const TOOLS: &str = "harness-server.tools";

/// What a custom tool calls: a webhook, or a command (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolHandler {
    /// `POST`s each call to `url`.
    Webhook {
        /// `https` (or `http` to a loopback address, when the server is started with
        /// `--allow-loopback-callbacks`: the document shows the default).
        #[schema(pattern = "^https://[^\\s/?#]+([/?#]\\S*)?$")]
        url: String,
    },
    /// Runs `command` with `args` for each call (`403` unless the server allows command
    /// tools).
    Command {
        /// The program: a path, or a name looked up in `PATH`.
        #[schema(min_length = 1, max_length = 1000)]
        command: String,
        /// Its arguments.
        #[serde(default)]
        #[schema(max_items = 100)]
        args: Vec<String>,
    },
}

/// A custom tool as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CustomTool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) input_schema: Value,
    pub(crate) handler: ToolHandler,
    pub(crate) secret: String,
}

/// The custom tools, and the source that offers them to every session's harness.
pub(crate) struct CustomTools {
    store: Arc<dyn Store>,
    http: reqwest::Client,
    /// Where command tools run (the server's directory without one).
    command_dir: Option<std::path::PathBuf>,
    /// Bumped by every registration change, to rebuild the offered list.
    generation: AtomicU64,
    offered: Mutex<Option<(u64, Arc<ToolRegistry>)>>,
}

impl std::fmt::Debug for CustomTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomTools").finish_non_exhaustive()
    }
}

impl CustomTools {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        command_dir: Option<std::path::PathBuf>,
    ) -> Arc<CustomTools> {
        harness_core::model::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Arc::new(CustomTools {
            store,
            http,
            command_dir,
            generation: AtomicU64::new(1),
            offered: Mutex::new(None),
        })
    }

    /// Every custom tool, by name.
    pub(crate) async fn all(&self) -> Result<Vec<CustomTool>, ApiError> {
        self.store
            .records(TOOLS, "")
            .await?
            .into_iter()
            .map(|record| {
                serde_json::from_value(record.value).map_err(|error| {
                    ApiError::internal(format!("tool `{}` is corrupt: {error}", record.key))
                })
            })
            .collect()
    }

    /// A custom tool, if there is one by that name.
    pub(crate) async fn get(&self, name: &str) -> Result<Option<CustomTool>, ApiError> {
        match self.store.record(TOOLS, name).await? {
            Some(record) => serde_json::from_value(record.value)
                .map(Some)
                .map_err(|error| ApiError::internal(format!("tool `{name}` is corrupt: {error}"))),
            None => Ok(None),
        }
    }

    /// Registers a tool; sessions offer it from their next step.
    pub(crate) async fn put(&self, tool: &CustomTool) -> Result<(), ApiError> {
        let value = serde_json::to_value(tool)
            .map_err(|error| ApiError::internal(format!("a tool did not serialize: {error}")))?;
        self.store
            .write(vec![WriteOp::PutRecord {
                namespace: TOOLS.to_owned(),
                key: tool.name.clone(),
                thread_id: None,
                value,
            }])
            .await?;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Unregisters a tool; sessions stop offering it from their next step.
    pub(crate) async fn delete(&self, name: &str) -> Result<(), ApiError> {
        self.store
            .write(vec![WriteOp::DeleteRecord {
                namespace: TOOLS.to_owned(),
                key: name.to_owned(),
            }])
            .await?;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    async fn registry(&self) -> Arc<ToolRegistry> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((built, registry)) = lock(&self.offered).as_ref()
            && *built == generation
        {
            return Arc::clone(registry);
        }
        let mut registry = ToolRegistry::new();
        match self.all().await {
            Ok(tools) => {
                for tool in tools {
                    let name = tool.name.clone();
                    let custom = HandlerTool {
                        tool,
                        http: self.http.clone(),
                        command_dir: self.command_dir.clone(),
                    };
                    if let Err(error) = registry.register(custom) {
                        tracing::warn!(tool = %name, %error, "a custom tool was not offered");
                    }
                }
            }
            Err(error) => tracing::warn!(error = error.message(), "reading custom tools failed"),
        }
        let registry = Arc::new(registry);
        *lock(&self.offered) = Some((generation, Arc::clone(&registry)));
        registry
    }
}

/// The source every session's harness asks.
#[derive(Debug)]
pub(crate) struct CustomToolSource(pub(crate) Arc<CustomTools>);

#[async_trait]
impl ToolSource for CustomToolSource {
    fn name(&self) -> &str {
        "custom tools"
    }

    async fn tools(&self, _: ToolSourceCtx<'_>) -> Arc<ToolRegistry> {
        self.0.registry().await
    }
}

/// The most standard output a command tool's call returns.
const MAX_COMMAND_OUTPUT: usize = 1024 * 1024;

/// One custom tool: a webhook call or a command.
struct HandlerTool {
    tool: CustomTool,
    http: reqwest::Client,
    command_dir: Option<std::path::PathBuf>,
}

#[async_trait]
impl Tool for HandlerTool {
    fn name(&self) -> &str {
        &self.tool.name
    }

    fn description(&self) -> &str {
        &self.tool.description
    }

    fn input_schema(&self) -> &Value {
        &self.tool.input_schema
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let body = json!({
            "id": ctx.call_id,
            "tool": self.tool.name,
            "input": input,
            "session_id": ctx.thread_id.as_deref(),
        })
        .to_string();
        let text = match &self.tool.handler {
            ToolHandler::Webhook { url } => self.post(url, body, &ctx).await?,
            ToolHandler::Command { command, args } => self.run(command, args, body, &ctx).await?,
        };
        let output = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(mut answer)) if answer.contains_key("output") => {
                match answer.remove("output") {
                    Some(Value::String(text)) => text,
                    Some(other) => other.to_string(),
                    None => String::new(),
                }
            }
            _ => text,
        };
        Ok(ToolOutput::from(output))
    }
}

impl HandlerTool {
    /// The webhook's answer to `body`.
    async fn post(&self, url: &str, body: String, ctx: &ToolContext) -> Result<String, ToolError> {
        let signature = sign(&self.tool.secret, body.as_bytes());
        let sent = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("x-openharness-signature", signature)
            .body(body)
            .send();
        let response = tokio::select! {
            response = sent => response,
            () = ctx.abort.cancelled() => return Err(ToolError::new("the call was aborted")),
        }
        .map_err(|error| ToolError::new(format!("the tool's webhook failed: {error}")))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|error| ToolError::new(format!("the tool's answer was cut: {error}")))?;
        if !status.is_success() {
            return Err(ToolError::new(format!(
                "the tool's webhook answered {status}: {text}"
            )));
        }
        Ok(text)
    }

    /// The command's standard output for `body` on its standard input.
    async fn run(
        &self,
        command: &str,
        args: &[String],
        body: String,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        use tokio::io::AsyncWriteExt;
        let mut process = tokio::process::Command::new(command);
        process
            .args(args)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for name in ["PATH", "HOME"] {
            if let Some(value) = std::env::var_os(name) {
                process.env(name, value);
            }
        }
        if let Some(dir) = &self.command_dir {
            process.current_dir(dir);
        }
        let mut child = process
            .spawn()
            .map_err(|error| ToolError::new(format!("`{command}` did not start: {error}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A command that does not read its input is not an error.
            let _ = stdin.write_all(body.as_bytes()).await;
        }
        let done = tokio::select! {
            done = child.wait_with_output() => done,
            () = ctx.abort.cancelled() => return Err(ToolError::new("the call was aborted")),
        }
        .map_err(|error| ToolError::new(format!("`{command}` failed: {error}")))?;
        if !done.status.success() {
            let stderr = String::from_utf8_lossy(&done.stderr);
            return Err(ToolError::new(format!(
                "`{command}` exited with {}: {}",
                done.status,
                stderr.trim()
            )));
        }
        let mut stdout = done.stdout;
        stdout.truncate(MAX_COMMAND_OUTPUT);
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    }
}
