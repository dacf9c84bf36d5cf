//! The third-party MCP servers tests run against: where `.ci/install-mcp-servers` put them,
//! as [`McpServer`]s. Outside CI a server that is not installed is a notice and `None` (the
//! test passes without running); in CI (`CI` set) it is a failure, because CI must prove
//! these tests.

use std::path::{Path, PathBuf};

use harness_mcp::McpServer;

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
