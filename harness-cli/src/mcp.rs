//! `harness mcp list`: the MCP servers of the configuration, whether they start, and the tools
//! the model gets from them.
//!
//! Every server that would run is started, all at once, each within `--timeout`; its tools are
//! listed (named as the model sees them, with their permission category and what the
//! permission rules of the configuration say about them), and it is stopped. A server that
//! fails is shown with the reason; the command still exits 0. Servers that do not run are
//! shown too: disabled ones, and those of a project file whose folder is not trusted (which
//! are never started, so nothing they name is read from the environment).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use harness_mcp::{McpClient, McpStatus};
use harness_permissions::{Permissions, Policy};
use harness_tags::{Pipeline, SessionView, ToolCategory};
use serde::Serialize;

use crate::CliError;
use crate::args::{Global, McpCommand, McpListArgs};
use crate::commands::write_stdout;
use crate::config::{ConfiguredMcpServer, McpAdmission, Settings};
use crate::render::{Style, show_controls, strip_controls, truncate};

/// The width the text listing's tool lines keep to (descriptions are cut to fit).
const LINE: usize = 100;

/// Runs `harness mcp ...`.
pub async fn mcp(global: &Global, command: McpCommand) -> Result<ExitCode, CliError> {
    match command {
        McpCommand::List(args) => list(global, args).await,
    }
}

/// Where a server stands, as `harness mcp list` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerState {
    /// It started and listed its tools.
    Connected,
    /// It did not start, or did not list its tools in time.
    Failed,
    /// `enabled = false`.
    Disabled,
    /// Its project file's folder is not trusted: it was not started.
    Untrusted,
}

/// One server in the listing.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerReport {
    /// The server's name.
    pub server: String,
    /// The file that configures it.
    pub file: String,
    /// Where it stands.
    pub state: ServerState,
    /// Why it failed or does not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The server's own name and version, from its handshake.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<String>,
    /// Its tools, as the model sees them.
    pub tools: Vec<ToolReport>,
    /// How many resources it offers (read through its `read_resource` tool).
    pub resources: usize,
    /// How many prompts it offers.
    pub prompts: usize,
}

/// One tool of a server.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolReport {
    /// The name the model calls it by (`SERVER__TOOL`).
    pub name: String,
    /// Its name on the server.
    pub server_tool: String,
    /// Its permission category.
    pub category: ToolCategory,
    /// What the permission rules say about it: `allow`, `ask` or `deny`.
    pub policy: Policy,
    /// What it does.
    pub description: String,
}

/// `harness mcp list [--json] [--timeout SECONDS]`.
pub async fn list(global: &Global, args: McpListArgs) -> Result<ExitCode, CliError> {
    let settings = Settings::load(global.config.as_deref())?;
    let servers = settings.mcp_servers()?;
    if servers.is_empty() && !args.json {
        write_stdout(
            "No MCP servers are configured. Add one to harness.toml (or your config.toml), \
             e.g.\n\n  [mcp.servers.fs]\n  command = \"npx\"\n  args = [\"-y\", \
             \"@modelcontextprotocol/server-filesystem\", \".\"]\n\n`harness mcp list --help` \
             says more.\n",
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let (permissions, yolo) = settings.permissions()?;
    let session = SessionView {
        state: Arc::new(serde_json::json!({ "yolo": yolo })),
        ..SessionView::default()
    };
    let (untrusted, how_to_trust) = settings
        .distrust()
        .unwrap_or_else(|| ("its folder is not trusted".to_owned(), String::new()));
    let timeout = Duration::from_secs(args.timeout);
    let reports = join_all(
        servers
            .into_iter()
            .map(|entry| inspect(entry, timeout, &untrusted)),
    )
    .await;
    let reports: Vec<ServerReport> = reports
        .into_iter()
        .map(|(report, status)| with_tools(report, status, &permissions, &session))
        .collect();
    let text = if args.json {
        let json = serde_json::to_string_pretty(&reports).map_err(|error| CliError::Io {
            what: "cannot print the listing".to_owned(),
            source: error.into(),
        })?;
        json + "\n"
    } else {
        listing(&reports, &how_to_trust, Style::for_stdout())
    };
    write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Starts a server that would run (within `timeout`), reads what it offers and stops it.
async fn inspect(
    entry: ConfiguredMcpServer,
    timeout: Duration,
    untrusted: &str,
) -> (ServerReport, Option<McpStatus>) {
    let mut report = ServerReport {
        server: entry.server.name().to_owned(),
        file: entry.file.clone(),
        state: ServerState::Disabled,
        reason: None,
        server_info: None,
        tools: Vec::new(),
        resources: 0,
        prompts: 0,
    };
    if entry.admission == McpAdmission::Untrusted {
        report.state = ServerState::Untrusted;
        report.reason = Some(format!("not started: {untrusted}"));
        return (report, None);
    }
    if !entry.server.config().enabled {
        report.reason = Some("`enabled = false` in its configuration".to_owned());
        return (report, None);
    }
    let client = McpClient::new(entry.server);
    // No plugin of the CLI reshapes `mcp.tools-listed`: the bare pipeline lists what a run
    // registers.
    let connected = tokio::time::timeout(timeout, client.connect(&Pipeline::default())).await;
    let status = match connected {
        Ok(Ok(status)) => Some(status),
        Ok(Err(error)) => {
            report.state = ServerState::Failed;
            report.reason = Some(error.to_string());
            None
        }
        Err(_) => {
            report.state = ServerState::Failed;
            report.reason = Some(format!(
                "it did not start and list its tools within {} s (`--timeout`)",
                timeout.as_secs()
            ));
            None
        }
    };
    client.shutdown().await;
    if status.is_some() {
        report.state = ServerState::Connected;
    }
    (report, status)
}

/// The report with the tools of `status`, and what the permission rules say about each.
fn with_tools(
    mut report: ServerReport,
    status: Option<McpStatus>,
    permissions: &Permissions,
    session: &SessionView,
) -> ServerReport {
    let Some(status) = status else {
        return report;
    };
    report.server_info = status.server_info;
    report.resources = status.resources.len();
    report.prompts = status.prompts.len();
    report.tools = status
        .tools
        .into_iter()
        .map(|tool| ToolReport {
            policy: permissions
                .decide(&tool.name, Some(tool.category), session)
                .policy,
            name: tool.name,
            server_tool: tool.server_tool,
            category: tool.category,
            description: tool.description,
        })
        .collect();
    report
}

/// The listing as text: a header line per server, then its tools in columns; at the end the
/// count of servers by state, and `how_to_trust` when a server is not trusted.
pub fn listing(reports: &[ServerReport], how_to_trust: &str, style: Style) -> String {
    let mut out = String::new();
    for report in reports {
        let state = match report.state {
            ServerState::Connected => style.green("connected"),
            ServerState::Failed => style.red("failed"),
            ServerState::Disabled => style.dim("disabled"),
            ServerState::Untrusted => style.yellow("not trusted"),
        };
        let mut header = format!("{} · {state}", style.bold(&report.server));
        if let Some(info) = &report.server_info {
            header.push_str(&format!(" · {}", strip_controls(info)));
        }
        if report.state == ServerState::Connected {
            let plural = if report.tools.len() == 1 { "" } else { "s" };
            header.push_str(&format!(" · {} tool{plural}", report.tools.len()));
        }
        header.push_str(&style.dim(&format!(" · {}", show_controls(&report.file))));
        out.push_str(&header);
        out.push('\n');
        if let Some(reason) = &report.reason {
            for line in strip_controls(reason).lines() {
                out.push_str(&format!("  {line}\n"));
            }
        }
        out.push_str(&tool_table(report, style));
        if report.resources + report.prompts > 0 {
            let line = format!(
                "  {} resources, {} prompts",
                report.resources, report.prompts
            );
            out.push_str(&style.dim(&line));
            out.push('\n');
        }
        out.push('\n');
    }
    let count = |state| reports.iter().filter(|r| r.state == state).count();
    let mut summary = vec![format!("{} connected", count(ServerState::Connected))];
    for (state, what) in [
        (ServerState::Failed, "failed"),
        (ServerState::Disabled, "disabled"),
        (ServerState::Untrusted, "not trusted"),
    ] {
        if count(state) > 0 {
            summary.push(format!("{} {what}", count(state)));
        }
    }
    let plural = if reports.len() == 1 { "" } else { "s" };
    out.push_str(&format!(
        "{} MCP server{plural}: {}.\n",
        reports.len(),
        summary.join(", ")
    ));
    if count(ServerState::Untrusted) > 0 && !how_to_trust.is_empty() {
        let mut how = how_to_trust.to_owned();
        if let Some(first) = how.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        out.push_str(&format!("{}.\n", show_controls(&how)));
    }
    out
}

/// A server's tools in columns under a header: name, category, policy, and as much of the
/// description's first line as fits in [`LINE`] columns.
fn tool_table(report: &ServerReport, style: Style) -> String {
    if report.tools.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 3]> = report
        .tools
        .iter()
        .map(|tool| {
            let policy = match tool.policy {
                Policy::Allow => "allow",
                Policy::Ask => "ask",
                Policy::Deny => "deny",
            };
            [
                strip_controls(&tool.name).into_owned(),
                tool.category.as_str().to_owned(),
                policy.to_owned(),
            ]
        })
        .collect();
    let header = ["TOOL", "CATEGORY", "POLICY"];
    let width = |column: usize| {
        rows.iter()
            .map(|row| row[column].chars().count())
            .chain([header[column].len()])
            .max()
            .unwrap_or(0)
    };
    let (name, category, policy) = (width(0), width(1), width(2));
    let room = LINE.saturating_sub(name + category + policy + 8).max(30);
    let mut out = style.dim(&format!(
        "  {:name$}  {:category$}  {:policy$}  DESCRIPTION",
        header[0], header[1], header[2]
    ));
    out.push('\n');
    for (tool, [tool_name, tool_category, tool_policy]) in report.tools.iter().zip(&rows) {
        let description = strip_controls(tool.description.lines().next().unwrap_or(""));
        out.push_str(&format!(
            "  {tool_name:name$}  {tool_category:category$}  {tool_policy:policy$}  {}\n",
            style.dim(&truncate(description.trim(), room)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(server: &str, state: ServerState) -> ServerReport {
        ServerReport {
            server: server.into(),
            file: "harness.toml".into(),
            state,
            reason: None,
            server_info: None,
            tools: Vec::new(),
            resources: 0,
            prompts: 0,
        }
    }

    #[test]
    fn the_listing_shows_what_servers_say_without_their_escape_sequences() {
        let mut hostile = report("evil", ServerState::Connected);
        hostile.server_info = Some("evil\x1b[2J 1.0".into());
        hostile.tools.push(ToolReport {
            name: "evil__read\x1b]0;x\x07".into(),
            server_tool: "read".into(),
            category: ToolCategory::Read,
            policy: Policy::Allow,
            description: format!("Reads\x1b[8m a file. {}\nSecond line", "x".repeat(500)),
        });
        let mut failed = report("broken", ServerState::Failed);
        failed.reason = Some("could not be started.\nIts stderr ended with:\n\x1b[31mboom".into());
        let mut untrusted = report("far", ServerState::Untrusted);
        untrusted.reason = Some("not started: harness.toml is not trusted".into());
        let text = listing(
            &[hostile, failed, untrusted],
            "if you trust this folder, run `harness trust /src/app`",
            Style::plain(),
        );
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "evil · connected · evil 1.0 · 1 tool · harness.toml"
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["TOOL", "CATEGORY", "POLICY", "DESCRIPTION"]
        );
        assert!(
            lines[2].starts_with("  evil__read  read      allow   Reads a file. xxx"),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].chars().count() <= LINE && lines[2].ends_with('…'),
            "{}",
            lines[2]
        );
        assert_eq!(
            lines[4..8],
            [
                "broken · failed · harness.toml",
                "  could not be started.",
                "  Its stderr ended with:",
                "  boom"
            ]
        );
        assert!(
            text.ends_with(
                "3 MCP servers: 1 connected, 1 failed, 1 not trusted.\nIf you trust this folder, \
                 run `harness trust /src/app`.\n"
            ),
            "{text}"
        );
    }
}
