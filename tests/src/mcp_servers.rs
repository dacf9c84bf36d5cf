//! The third-party MCP servers tests run against: where `.ci/install-mcp-servers` put them,
//! as [`McpServer`]s. Outside CI a server that is not installed is a notice and `None` (the
//! test passes without running); in CI (`CI` set) it is a failure, because CI must prove
//! these tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a broken expectation is a failed test

use std::path::{Path, PathBuf};
use std::process::Stdio;

use harness_mcp::McpServer;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Where `.ci/install-mcp-servers` puts the third-party servers.
pub fn servers_dir() -> PathBuf {
    match std::env::var_os("HARNESS_MCP_SERVERS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-servers"),
    }
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !value.is_empty() && value != "false" && value != "0")
}

/// `path` if it exists. Otherwise, outside CI, a notice on stderr and `None` (the test then
/// passes without running); in CI (`CI` set) a failure, because CI must prove these tests.
pub fn installed(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let notice = format!(
        "{what} is not installed at {}; run .ci/install-mcp-servers (or set HARNESS_MCP_SERVERS)",
        path.display()
    );
    assert!(!in_ci(), "{notice}");
    eprintln!("SKIPPED: {notice}");
    None
}

/// A program on PATH, or `None` with a notice (a failure in CI).
pub fn program(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    found.or_else(|| installed(PathBuf::from(name), &format!("`{name}` (on PATH)")))
}

fn npm_server(package: &str) -> Option<PathBuf> {
    program("node")?;
    installed(
        servers_dir().join(format!(
            "node/node_modules/@modelcontextprotocol/{package}/dist/index.js"
        )),
        &format!("@modelcontextprotocol/{package}"),
    )
}

/// `@modelcontextprotocol/server-everything` over stdio, run in `dir`.
pub fn everything(name: &str, dir: &Path) -> Option<McpServer> {
    let entry = npm_server("server-everything")?;
    Some(
        McpServer::stdio(name, "node")
            .arg(entry.display().to_string())
            .arg("stdio")
            .cwd(dir),
    )
}

/// The entry point of `@modelcontextprotocol/server-everything`, for the HTTP tests.
pub fn everything_entry() -> Option<PathBuf> {
    npm_server("server-everything")
}

/// `@modelcontextprotocol/server-filesystem` over stdio, allowed into `root` only.
pub fn filesystem(name: &str, root: &Path) -> Option<McpServer> {
    let entry = npm_server("server-filesystem")?;
    Some(
        McpServer::stdio(name, "node")
            .arg(entry.display().to_string())
            .arg(root.display().to_string())
            .cwd(root),
    )
}

/// `mcp-server-time` from PyPI, in its venv.
pub fn time(name: &str, dir: &Path) -> Option<McpServer> {
    let program = installed(
        servers_dir().join("python/bin/mcp-server-time"),
        "mcp-server-time (PyPI)",
    )?;
    Some(
        McpServer::stdio(name, program.display().to_string())
            .arg("--local-timezone=UTC")
            .cwd(dir),
    )
}

/// server-everything in its streamable HTTP mode, listening on 127.0.0.1 at a port the system
/// picked (see `fixtures/loopback.cjs`); killed when dropped.
#[derive(Debug)]
pub struct EverythingOverHttp {
    /// Its endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// Its port.
    pub port: u16,
    /// The node process.
    pub process: Child,
}

/// Starts server-everything over streamable HTTP in `dir`, on `port` (0: any free port).
pub async fn everything_over_http(dir: &Path, port: u16) -> Option<EverythingOverHttp> {
    let entry = everything_entry()?;
    let preload = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/loopback.cjs");
    let mut process = Command::new("node")
        .arg("--require")
        .arg(preload)
        .arg(entry)
        .arg("streamableHttp")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PORT", port.to_string())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let mut lines = BufReader::new(process.stderr.take().unwrap()).lines();
    let port = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the server reports its port before exiting");
        if let Some(port) = line.strip_prefix("LISTENING ") {
            break port.trim().parse::<u16>().unwrap();
        }
    };
    // Keep reading, so that the server never blocks on a full stderr pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Some(EverythingOverHttp {
        url: format!("http://127.0.0.1:{port}/mcp"),
        port,
        process,
    })
}
