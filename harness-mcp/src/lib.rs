//! MCP servers as tool sources for the harness, on the official Rust SDK (`rmcp`).
//!
//! Each server tool becomes a harness tool in the `mcp` permission category, named
//! `SERVER__TOOL`, with the server's input schema passed through. Permissions, redaction and
//! every other tag apply to it exactly as to a built-in tool.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use harness_core::harness::{Harness, Mode};
//! use harness_mcp::{McpHarnessExt, McpServer};
//!
//! let harness = Harness::builder("my-agent")
//!     .mode(Mode::new("build").default_model("anthropic/claude-sonnet-4-5"))
//!     .mcp_server(
//!         McpServer::stdio("fs", "npx")
//!             .args(["-y", "@modelcontextprotocol/server-filesystem", "."])
//!             .disabled_tools(["write_file", "move_file"]),
//!     )
//!     .mcp_server(
//!         McpServer::http("docs", "https://mcp.example.com/mcp")
//!             .header("Authorization", "Bearer ${DOCS_TOKEN}"),
//!     )
//!     .build()?;
//! # let _ = harness; Ok(()) }
//! ```
//!
//! # What happens
//!
//! - **Connecting.** A server starts when a kernel first asks for its tools, before the first
//!   step of a run (or when [`McpClient::connect`] is called). Its tools are listed, the
//!   `mcp.tools-listed` tag is emitted with them, and the list as `on` handlers left it is what
//!   gets registered: a plugin can filter, rename, describe or re-categorize tools there.
//! - **Changes.** When the server sends `notifications/tools/list_changed` (or its resources
//!   change), the next step lists the tools again and emits the tag again.
//! - **Calls.** A call runs within the server's timeout (`timeout_ms`, 60 s by default);
//!   progress notifications reach user interfaces as tool updates; when the run is aborted or
//!   the timeout passes, the server gets `notifications/cancelled`. Text and structured results
//!   become the tool result; images, audio and binary resources become a short placeholder
//!   (`[image: image/png, 1024 bytes, not shown]`). A result larger than `max_result_bytes`
//!   is an error that tells the model to ask for less.
//! - **Resources and prompts** are listed ([`McpClient::status`]); when a server offers
//!   resources, a `SERVER__read_resource` tool lets the model read them by URI.
//! - **Failures.** A server that does not start, stops mid-call, hangs, answers with malformed
//!   JSON-RPC or with too much gives the model a tool error it can read and the user a harness
//!   `error` event with the end of the server's stderr; the harness and other servers go on. A
//!   server that stopped is started again on its next use; failed starts back off (1 s, 2 s,
//!   4 s, ... 60 s).
//!
//! # Configuration
//!
//! [`McpServerConfig`] is the serde form of a server's configuration, made to be a
//! `[mcp.servers.NAME]` table of a TOML file as it is (unknown keys are errors):
//!
//! ```toml
//! [mcp.servers.fs]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//! disabled_tools = ["write_file"]        # or `tools = [...]`, an allow-list
//!
//! [mcp.servers.docs]
//! url = "https://mcp.example.com/mcp"
//! headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
//! timeout_ms = 20000
//! ```
//!
//! A stdio server inherits only [`INHERITED_ENV`] (`HOME`, `PATH`, ...) from the harness's
//! environment, plus what its `env` and `inherit_env` name: API keys in the harness's
//! environment do not leak to servers by default.
//!
//! # Why rmcp, and what is written here
//!
//! `rmcp` speaks the protocol (handshake, requests, notifications, cancellation, pagination,
//! the streamable HTTP client). The stdio transport is this crate's own: rmcp's drops a
//! malformed or oversized message and lets the request it answered wait for its timeout,
//! where this one fails that request (or the connection) at once with the reason, and runs the
//! server in its own process group so that a launcher like `npx` goes down with everything it
//! started.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod client;
mod config;
mod error;
mod transport;

use harness_core::harness::HarnessBuilder;
use harness_core::kernel::KernelBuilder;

pub use client::{McpClient, McpPromptInfo, McpState, McpStatus};
pub use config::{
    DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_RESULT_BYTES, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TIMEOUT,
    INHERITED_ENV, McpConfigError, McpServer, McpServerConfig,
};
pub use error::McpError;

/// Adds MCP servers to a harness or a bare kernel.
pub trait McpHarnessExt: Sized {
    /// Adds a server; a server whose description is invalid fails when it is started, with
    /// the reason (call [`McpServer::validate`] first to fail earlier).
    fn mcp_server(self, server: McpServer) -> Self {
        self.mcp_client(McpClient::new(server))
    }

    /// Adds the server of a client you keep, to read its [`McpClient::status`] later.
    fn mcp_client(self, client: McpClient) -> Self;
}

impl McpHarnessExt for HarnessBuilder {
    fn mcp_client(self, client: McpClient) -> Self {
        self.tool_source(client.into_source())
    }
}

impl McpHarnessExt for KernelBuilder {
    fn mcp_client(self, client: McpClient) -> Self {
        self.tool_source(client.into_source())
    }
}
