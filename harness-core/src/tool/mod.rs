//! Tools: the [`Tool`] trait, the context a call runs with, typed function tools, the
//! [`ToolRegistry`], and [`ToolSource`]s (tools from outside the process that can change
//! between steps, like an MCP server's).
//!
//! A tool declares its name, a description for the model, the JSON Schema of its input and a
//! permission category. The kernel validates input against the schema (healing it where it
//! can) before [`Tool::execute`] runs. Most tools are written as typed functions whose schema
//! comes from the argument type:
//!
//! ```
//! use harness_core::tool::{ToolContext, ToolError, ToolRegistry, tool_fn};
//! use harness_tags::ToolCategory;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! /// Arguments of `read_file`.
//! #[derive(Deserialize, JsonSchema)]
//! struct ReadFile {
//!     /// The path to read, relative to the workspace.
//!     path: String,
//! }
//!
//! let read_file = tool_fn("read_file", "Reads a UTF-8 text file.", |args: ReadFile, _ctx: ToolContext| async move {
//!     std::fs::read_to_string(&args.path).map_err(ToolError::from)
//! })
//! .category(ToolCategory::Read);
//!
//! let mut tools = ToolRegistry::new();
//! tools.register(read_file).unwrap();
//! assert_eq!(tools.specs()[0].input_schema["required"][0], "path");
//! ```

mod channel;
mod source;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use harness_tags::{ToolCategory, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use channel::{
    ApprovalAnswer, ApprovalRequest, HarnessChannel, ShellStream, SuspendError, Suspension,
    ToolProgress,
};
pub(crate) use source::ToolSources;
pub use source::{ToolSource, ToolSourceCtx};

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What the tool does, for the model.
    fn description(&self) -> &str;

    /// JSON Schema of the input (an object).
    fn input_schema(&self) -> &Value;

    /// The permission category. Defaults to `Other`.
    fn category(&self) -> ToolCategory {
        ToolCategory::Other
    }

    /// Other names models commonly use for this tool (healing maps them to it).
    fn aliases(&self) -> &[String] {
        &[]
    }

    /// How long one call may take; `None` uses the kernel's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Runs the tool on input that already validates against [`Tool::input_schema`].
    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError>;
}

/// Anything the builders and the registry accept as a tool: a tool, or one already behind an
/// [`Arc`].
pub trait IntoTool {
    /// The tool, shared.
    fn into_tool(self) -> Arc<dyn Tool>;
}

impl<T: Tool> IntoTool for T {
    fn into_tool(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl<T: Tool> IntoTool for Arc<T> {
    fn into_tool(self) -> Arc<dyn Tool> {
        self
    }
}

impl IntoTool for Arc<dyn Tool> {
    fn into_tool(self) -> Arc<dyn Tool> {
        self
    }
}

/// What a call runs with: its identity, the run's abort signal and the harness back-channel.
#[derive(Clone)]
pub struct ToolContext {
    /// The call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// Cancelled when the run is aborted or the call times out; long tools should watch it.
    pub abort: CancellationToken,
    /// The harness that hosts the run, if any.
    pub channel: Option<Arc<dyn HarnessChannel>>,
    /// The thread the run belongs to, if any.
    pub thread_id: Option<Arc<str>>,
}

impl ToolContext {
    /// A context for calling a tool outside a run (tests, scripts): never aborted, no channel.
    pub fn detached(tool_name: &str, call_id: &str) -> Self {
        ToolContext {
            call_id: call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            abort: CancellationToken::new(),
            channel: None,
            thread_id: None,
        }
    }

    /// Reports progress to the harness, if one is attached.
    pub fn progress(&self, progress: ToolProgress) {
        if let Some(channel) = &self.channel {
            channel.progress(&self.call_id, progress);
        }
    }

    /// Pauses until the user answers. Without a harness this is
    /// [`SuspendError::Unavailable`]; an abort while waiting is [`SuspendError::Aborted`].
    pub async fn suspend(
        &self,
        payload: Value,
        resume_schema: Option<Value>,
    ) -> Result<Value, SuspendError> {
        let Some(channel) = &self.channel else {
            return Err(SuspendError::Unavailable);
        };
        let request = Suspension {
            call_id: self.call_id.clone(),
            tool_name: self.tool_name.clone(),
            payload,
            resume_schema,
        };
        tokio::select! {
            biased;
            () = self.abort.cancelled() => Err(SuspendError::Aborted),
            answer = channel.suspend(request) => answer,
        }
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .field("tool_name", &self.tool_name)
            .field("aborted", &self.abort.is_cancelled())
            .field("channel", &self.channel.is_some())
            .finish()
    }
}

/// A tool's successful result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// The text the model sees.
    pub content: String,
    /// Structured data for user interfaces and plugins (not sent to the model).
    pub metadata: Option<Value>,
}

impl From<String> for ToolOutput {
    fn from(content: String) -> Self {
        ToolOutput {
            content,
            metadata: None,
        }
    }
}

impl From<&str> for ToolOutput {
    fn from(content: &str) -> Self {
        ToolOutput::from(content.to_owned())
    }
}

impl From<Value> for ToolOutput {
    fn from(value: Value) -> Self {
        let content = match &value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        ToolOutput {
            content,
            metadata: Some(value),
        }
    }
}

/// A tool's failure; the message is what the model sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// A failure with this message for the model.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError::new(message)
    }
}

impl From<std::io::Error> for ToolError {
    fn from(error: std::io::Error) -> Self {
        ToolError::new(error.to_string())
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(error: serde_json::Error) -> Self {
        ToolError::new(error.to_string())
    }
}

/// A tool written as an async function of typed arguments.
pub struct FnTool<A, F> {
    name: String,
    description: String,
    schema: Value,
    category: ToolCategory,
    aliases: Vec<String>,
    timeout: Option<Duration>,
    run: F,
    _args: PhantomData<fn(A)>,
}

impl<A, F> std::fmt::Debug for FnTool<A, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool").finish_non_exhaustive()
    }
}

/// A tool from an async function; its input schema is generated from `A` with `schemars`
/// (doc comments on fields become descriptions the model reads).
pub fn tool_fn<A, F, Fut, O>(
    name: impl Into<String>,
    description: impl Into<String>,
    run: F,
) -> FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    O: Into<ToolOutput>,
{
    FnTool {
        name: name.into(),
        description: description.into(),
        schema: input_schema_of::<A>(),
        category: ToolCategory::Other,
        aliases: Vec::new(),
        timeout: None,
        run,
        _args: PhantomData,
    }
}

/// The JSON Schema of a tool's argument type, in the plain form providers accept (no
/// `$schema` or `title` keys at the top).
pub fn input_schema_of<A: JsonSchema>() -> Value {
    let mut schema = Value::from(schemars::schema_for!(A));
    if let Value::Object(object) = &mut schema {
        object.remove("$schema");
        object.remove("title");
    }
    schema
}

impl<A, F> FnTool<A, F> {
    /// Sets the permission category.
    pub fn category(mut self, category: ToolCategory) -> Self {
        self.category = category;
        self
    }

    /// Adds names models commonly use for this tool.
    pub fn aliases<S: Into<String>>(mut self, aliases: impl IntoIterator<Item = S>) -> Self {
        self.aliases.extend(aliases.into_iter().map(Into::into));
        self
    }

    /// Sets how long one call may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

#[async_trait]
impl<A, F, Fut, O> Tool for FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    O: Into<ToolOutput>,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn category(&self) -> ToolCategory {
        self.category
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: A = serde_json::from_value(input).map_err(|error| {
            ToolError::new(format!("invalid arguments for `{}`: {error}", self.name))
        })?;
        (self.run)(args, ctx).await.map(Into::into)
    }
}

/// Why a tool could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Two tools share a name.
    #[error("a tool named `{0}` is already registered; tool names must be unique")]
    Duplicate(String),
    /// The name is not one providers accept.
    #[error(
        "tool name `{0}` is invalid: use 1 to 64 letters, digits, `_` or `-` (providers reject \
         other names)"
    )]
    InvalidName(String),
    /// The input schema is not a valid JSON Schema.
    #[error("the input schema of tool `{tool}` is not a valid JSON Schema: {message}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
}

/// A registered tool with what the kernel precomputes for it.
#[derive(Clone)]
pub struct RegisteredTool {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Its input validator, compiled once.
    pub validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.tool.name())
            .finish()
    }
}

/// The tools a run can call, by name, with their specs and compiled input validators.
/// Cheap to clone (shared; every run starts from its kernel's registry).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<Vec<RegisteredTool>>,
    by_name: Arc<HashMap<String, usize>>,
    specs: Arc<[ToolSpec]>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        ToolRegistry::default()
    }

    /// Registers a tool; its schema is compiled now.
    pub fn register(&mut self, tool: impl IntoTool) -> Result<(), RegistryError> {
        let tool = tool.into_tool();
        let name = tool.name().to_owned();
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(RegistryError::InvalidName(name));
        }
        if self.by_name.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        let validator = jsonschema::validator_for(tool.input_schema()).map_err(|error| {
            RegistryError::InvalidSchema {
                tool: name.clone(),
                message: error.to_string(),
            }
        })?;
        Arc::make_mut(&mut self.by_name).insert(name, self.tools.len());
        Arc::make_mut(&mut self.tools).push(RegisteredTool {
            tool,
            validator: Arc::new(validator),
        });
        self.specs = self
            .tools
            .iter()
            .map(|t| spec_of(t.tool.as_ref()))
            .collect();
        Ok(())
    }

    /// The tool with this exact name.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// Every tool, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.iter()
    }

    /// The tools' names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.tool.name())
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True if no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools as offered to the model, in registration order (computed at registration).
    pub fn specs(&self) -> &Arc<[ToolSpec]> {
        &self.specs
    }

    /// Adds the tools of another registry (compiled there); returns the names it skipped
    /// because a tool of this registry has them.
    pub fn absorb(&mut self, other: &ToolRegistry) -> Vec<String> {
        let mut taken = Vec::new();
        let mut specs = self.specs.to_vec();
        for (added, spec) in other.tools.iter().zip(other.specs.iter()) {
            let name = added.tool.name();
            if self.by_name.contains_key(name) {
                taken.push(name.to_owned());
                continue;
            }
            Arc::make_mut(&mut self.by_name).insert(name.to_owned(), self.tools.len());
            Arc::make_mut(&mut self.tools).push(added.clone());
            specs.push(spec.clone());
        }
        self.specs = specs.into();
        taken
    }

    /// A registry with only the named tools (unknown names are ignored).
    pub fn subset<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> ToolRegistry {
        let mut subset = ToolRegistry::new();
        for name in names {
            if let Some(found) = self.get(name) {
                Arc::make_mut(&mut subset.by_name).insert(name.to_owned(), subset.tools.len());
                Arc::make_mut(&mut subset.tools).push(found.clone());
            }
        }
        subset.specs = subset
            .tools
            .iter()
            .map(|t| spec_of(t.tool.as_ref()))
            .collect();
        subset
    }
}

fn spec_of(tool: &dyn Tool) -> ToolSpec {
    ToolSpec {
        name: tool.name().to_owned(),
        description: tool.description().to_owned(),
        input_schema: Arc::new(tool.input_schema().clone()),
        category: Some(tool.category()),
    }
}
