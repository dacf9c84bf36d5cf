//! Workspace tools: `read_file`, `write_file`, `list_dir`, `grep` and `shell`, confined to one
//! directory.
//!
//! Paths are relative to the workspace root; a path that leads outside it (through `..`, an
//! absolute path or a symbolic link) is refused with an error the model sees. `shell` runs
//! `sh -c` in the root; it is not a sandbox (a command can `cd` anywhere), so it is in the
//! `execute` category, which the CLI's default permissions ask about.
//!
//! | tool | category | what it does |
//! |---|---|---|
//! | `read_file` | read | a text file, or a range of its lines |
//! | `write_file` | edit | creates or replaces a file (and its directories) |
//! | `list_dir` | read | a directory's entries, directories with a trailing `/` |
//! | `grep` | read | lines matching a regex, below a directory |
//! | `shell` | execute | a command, its output streamed to the UI |
//!
//! ```
//! use harness_cli::workspace::Workspace;
//!
//! let dir = tempfile::tempdir()?;
//! let workspace = Workspace::new(dir.path())?;
//! let names: Vec<String> = workspace.tools().iter().map(|t| t.name().to_owned()).collect();
//! assert_eq!(names, ["read_file", "write_file", "list_dir", "grep", "shell"]);
//! assert!(workspace.resolve("../etc/passwd").is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use harness_core::tool::{ShellStream, Tool, ToolContext, ToolError, ToolProgress, tool_fn};
use harness_tags::ToolCategory;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The most bytes `read_file` returns.
const MAX_READ: usize = 256 * 1024;
/// The most entries `list_dir` returns.
const MAX_ENTRIES: usize = 500;
/// The most matches `grep` returns.
const MAX_MATCHES: usize = 200;
/// The most output bytes `shell` returns to the model.
const MAX_OUTPUT: usize = 64 * 1024;
/// The default and largest command timeouts, in seconds.
const SHELL_TIMEOUT: (u64, u64) = (120, 1800);
/// Directories `grep` does not descend into.
const SKIPPED_DIRS: [&str; 4] = ["target", "node_modules", "__pycache__", "dist"];

/// Why a workspace could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("the workspace `{path}` is not a usable directory: {reason}")]
pub struct WorkspaceError {
    /// The directory.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// A directory the file and shell tools are confined to.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: Arc<Path>,
}

impl Workspace {
    /// A workspace rooted at `root`, which must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Workspace, WorkspaceError> {
        let path = root.as_ref();
        let error = |reason: String| WorkspaceError {
            path: path.display().to_string(),
            reason,
        };
        let root = path.canonicalize().map_err(|e| error(e.to_string()))?;
        if !root.is_dir() {
            return Err(error("it is not a directory".to_owned()));
        }
        Ok(Workspace {
            root: Arc::from(root),
        })
    }

    /// The root directory (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every workspace tool: `read_file`, `write_file`, `list_dir`, `grep`, `shell`.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(self.read_file()),
            Arc::new(self.write_file()),
            Arc::new(self.list_dir()),
            Arc::new(self.grep()),
            Arc::new(self.shell()),
        ]
    }

    /// An existing path inside the workspace, canonical; errors say why it is refused.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        let joined = self.root.join(path);
        let real = joined
            .canonicalize()
            .map_err(|error| ToolError::new(format!("`{path}`: {error}")))?;
        self.inside(path, real)
    }

    /// A path to write inside the workspace: it may not exist yet, but its nearest existing
    /// ancestor must be inside the workspace (so a symbolic link cannot lead out).
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, ToolError> {
        let target = self.inside(path, normalize(&self.root.join(path)))?;
        let mut existing = target.as_path();
        while !existing.exists() {
            existing = existing
                .parent()
                .ok_or_else(|| ToolError::new(format!("`{path}` has no existing parent")))?;
        }
        let real = existing
            .canonicalize()
            .map_err(|error| ToolError::new(format!("`{path}`: {error}")))?;
        self.inside(path, real)?;
        Ok(target)
    }

    fn inside(&self, asked: &str, path: PathBuf) -> Result<PathBuf, ToolError> {
        if path.starts_with(&self.root) {
            Ok(path)
        } else {
            Err(ToolError::new(format!(
                "`{asked}` is outside the workspace ({}); use a path inside it",
                self.root.display()
            )))
        }
    }

    fn relative(&self, path: &Path) -> String {
        let relative = path.strip_prefix(&self.root).unwrap_or(path);
        if relative.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            relative.display().to_string()
        }
    }

    /// `read_file`.
    pub fn read_file(&self) -> impl Tool + use<> {
        let workspace = self.clone();
        tool_fn(
            "read_file",
            "Read a UTF-8 text file of the workspace. Give `offset` (first line, 1-based) and \
             `limit` (number of lines) to read part of a large file.",
            move |args: ReadFileArgs, _: ToolContext| {
                let workspace = workspace.clone();
                async move {
                    let path = workspace.resolve(&args.path)?;
                    let bytes = tokio::fs::read(&path).await?;
                    let text = String::from_utf8(bytes).map_err(|_| {
                        ToolError::new(format!("`{}` is not a UTF-8 text file", args.path))
                    })?;
                    Ok::<_, ToolError>(excerpt(&text, args.offset, args.limit))
                }
            },
        )
        .category(ToolCategory::Read)
        .aliases(["cat", "open_file", "view_file"])
    }

    /// `write_file`.
    pub fn write_file(&self) -> impl Tool + use<> {
        let workspace = self.clone();
        tool_fn(
            "write_file",
            "Create or replace a text file of the workspace with `content` (directories are \
             created as needed).",
            move |args: WriteFileArgs, _: ToolContext| {
                let workspace = workspace.clone();
                async move {
                    let path = workspace.resolve_for_write(&args.path)?;
                    if let Some(parent) = path.parent() {
                        tokio::fs::create_dir_all(parent).await?;
                    }
                    tokio::fs::write(&path, args.content.as_bytes()).await?;
                    Ok::<_, ToolError>(format!(
                        "Wrote {} bytes to {}",
                        args.content.len(),
                        workspace.relative(&path)
                    ))
                }
            },
        )
        .category(ToolCategory::Edit)
        .aliases(["create_file", "save_file"])
    }

    /// `list_dir`.
    pub fn list_dir(&self) -> impl Tool + use<> {
        let workspace = self.clone();
        tool_fn(
            "list_dir",
            "List a directory of the workspace (default: its root). Directories end with `/`.",
            move |args: ListDirArgs, _: ToolContext| {
                let workspace = workspace.clone();
                async move {
                    let path = workspace.resolve(args.path.as_deref().unwrap_or("."))?;
                    let mut reader = tokio::fs::read_dir(&path).await?;
                    let mut entries = Vec::new();
                    while let Some(entry) = reader.next_entry().await? {
                        let mut name = entry.file_name().to_string_lossy().into_owned();
                        if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
                            name.push('/');
                        }
                        entries.push(name);
                    }
                    entries.sort();
                    let total = entries.len();
                    entries.truncate(MAX_ENTRIES);
                    let mut listing = entries.join("\n");
                    if total > MAX_ENTRIES {
                        listing.push_str(&format!("\n[{} more entries]", total - MAX_ENTRIES));
                    }
                    if listing.is_empty() {
                        listing = format!("{} is empty", workspace.relative(&path));
                    }
                    Ok::<_, ToolError>(listing)
                }
            },
        )
        .category(ToolCategory::Read)
        .aliases(["ls", "list_files", "list_directory"])
    }

    /// `grep`.
    pub fn grep(&self) -> impl Tool + use<> {
        let workspace = self.clone();
        tool_fn(
            "grep",
            "Search the workspace's text files for lines matching a regular expression (Rust \
             regex syntax). Prints `path:line: text`. Hidden directories, `target` and \
             `node_modules` are skipped.",
            move |args: GrepArgs, _: ToolContext| {
                let workspace = workspace.clone();
                async move {
                    let pattern = regex::RegexBuilder::new(&args.pattern)
                        .case_insensitive(args.ignore_case.unwrap_or(false))
                        .build()
                        .map_err(|error| ToolError::new(format!("invalid pattern: {error}")))?;
                    let start = workspace.resolve(args.path.as_deref().unwrap_or("."))?;
                    tokio::task::spawn_blocking(move || search(&workspace, &start, &pattern))
                        .await
                        .map_err(|error| ToolError::new(format!("the search failed: {error}")))
                }
            },
        )
        .category(ToolCategory::Read)
        .aliases(["search", "rg", "search_files"])
    }

    /// `shell`.
    pub fn shell(&self) -> impl Tool + use<> {
        let workspace = self.clone();
        tool_fn(
            "shell",
            "Run a shell command (`sh -c`) in the workspace root and return its exit code and \
             output. Give `timeoutSecs` for long commands (default 120).",
            move |args: ShellArgs, ctx: ToolContext| {
                let root = workspace.root.clone();
                async move { run_command(&root, &args, &ctx).await }
            },
        )
        .category(ToolCategory::Execute)
        .aliases(["bash", "run", "run_command", "execute"])
        .timeout(Duration::from_secs(SHELL_TIMEOUT.1 + 5))
    }
}

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The first line to return, 1-based.
    #[serde(default)]
    pub offset: Option<usize>,
    /// How many lines to return.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// Arguments of `list_dir`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListDirArgs {
    /// The directory, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
}

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepArgs {
    /// The regular expression.
    pub pattern: String,
    /// A file or directory to search, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Match regardless of case.
    #[serde(default)]
    pub ignore_case: Option<bool>,
}

/// Arguments of `shell`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShellArgs {
    /// The command line.
    pub command: String,
    /// Seconds before the command is killed (default 120, at most 1800).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Resolves `.` and `..` without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Lines `offset..offset + limit` (1-based) of `text`, capped at [`MAX_READ`] bytes.
fn excerpt(text: &str, offset: Option<usize>, limit: Option<usize>) -> String {
    let mut out = if offset.is_none() && limit.is_none() {
        text.to_owned()
    } else {
        let skip = offset.unwrap_or(1).saturating_sub(1);
        let take = limit.unwrap_or(usize::MAX);
        text.split_inclusive('\n').skip(skip).take(take).collect()
    };
    if out.len() > MAX_READ {
        let mut cut = MAX_READ;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n[truncated: read the rest with `offset` and `limit`]");
    }
    out
}

/// Walks `start` depth first, in name order, collecting matching lines.
fn search(workspace: &Workspace, start: &Path, pattern: &regex::Regex) -> String {
    let mut matches = Vec::new();
    let mut more = 0usize;
    let mut stack = vec![start.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            let mut children: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .filter(|entry| {
                    let name = entry.file_name();
                    let name = name.to_string_lossy();
                    let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                    !(is_dir && (name.starts_with('.') || SKIPPED_DIRS.contains(&name.as_ref())))
                })
                .map(|entry| entry.path())
                .collect();
            children.sort_by(|a, b| b.cmp(a));
            stack.extend(children);
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if bytes.iter().take(8192).any(|&b| b == 0) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (number, line) in text.lines().enumerate() {
            if pattern.is_match(line) {
                if matches.len() < MAX_MATCHES {
                    let line: String = line.chars().take(300).collect();
                    matches.push(format!(
                        "{}:{}: {line}",
                        workspace.relative(&path),
                        number + 1
                    ));
                } else {
                    more += 1;
                }
            }
        }
    }
    if matches.is_empty() {
        return "no matches".to_owned();
    }
    let mut out = matches.join("\n");
    if more > 0 {
        out.push_str(&format!(
            "\n[{more} more matches: narrow the pattern or the path]"
        ));
    }
    out
}

async fn run_command(
    root: &Path,
    args: &ShellArgs,
    ctx: &ToolContext,
) -> Result<String, ToolError> {
    let timeout = Duration::from_secs(
        args.timeout_secs
            .unwrap_or(SHELL_TIMEOUT.0)
            .clamp(1, SHELL_TIMEOUT.1),
    );
    let mut command = if cfg!(windows) {
        let mut command = tokio::process::Command::new("cmd");
        command.arg("/C");
        command
    } else {
        let mut command = tokio::process::Command::new("sh");
        command.arg("-c");
        command
    };
    let mut child = command
        .arg(&args.command)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| ToolError::new(format!("the command did not start: {error}")))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let collect = async {
        let (out, err) = tokio::join!(
            pump(stdout, ShellStream::Stdout, ctx),
            pump(stderr, ShellStream::Stderr, ctx)
        );
        let status = child.wait().await;
        (out, err, status)
    };
    let (out, err, status) = tokio::select! {
        result = collect => result,
        () = ctx.abort.cancelled() => return Err(ToolError::new("the command was cancelled")),
        () = tokio::time::sleep(timeout) => {
            return Err(ToolError::new(format!(
                "the command did not finish within {} s and was killed; raise `timeoutSecs` or \
                 run something shorter",
                timeout.as_secs()
            )));
        }
    };
    let status = status.map_err(|error| ToolError::new(format!("the command failed: {error}")))?;
    let code = status
        .code()
        .map_or_else(|| "killed by a signal".to_owned(), |c| c.to_string());
    let mut report = format!("exit code: {code}\n");
    if !out.is_empty() {
        report.push_str(&format!("stdout:\n{}\n", capped(&out)));
    }
    if !err.is_empty() {
        report.push_str(&format!("stderr:\n{}\n", capped(&err)));
    }
    if status.success() {
        Ok(report)
    } else {
        Err(ToolError::new(report))
    }
}

/// Reads a pipe to its end, streaming each chunk to the UI.
async fn pump(
    pipe: Option<impl AsyncRead + Unpin>,
    stream: ShellStream,
    ctx: &ToolContext,
) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut all = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(read) = pipe.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        let chunk = &buffer[..read];
        ctx.progress(ToolProgress::Shell {
            output: String::from_utf8_lossy(chunk).into_owned(),
            stream,
        });
        all.extend_from_slice(chunk);
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// The last [`MAX_OUTPUT`] bytes of a command's output (the end is where errors are).
fn capped(text: &str) -> String {
    let text = text.trim_end();
    if text.len() <= MAX_OUTPUT {
        return text.to_owned();
    }
    let mut cut = text.len() - MAX_OUTPUT;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[{cut} bytes cut]\n{}", &text[cut..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context() -> ToolContext {
        ToolContext::detached("test", "call_1")
    }

    async fn call(tool: &dyn Tool, args: serde_json::Value) -> Result<String, String> {
        tool.execute(args, context())
            .await
            .map(|out| out.content)
            .map_err(|e| e.message().to_owned())
    }

    #[tokio::test]
    async fn files_are_read_written_listed_and_searched_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let written = call(
            &workspace.write_file(),
            json!({"path": "src/lib.rs", "content": "fn one() {}\nfn two() {}\n"}),
        )
        .await
        .unwrap();
        assert_eq!(written, "Wrote 24 bytes to src/lib.rs");
        assert_eq!(
            call(
                &workspace.read_file(),
                json!({"path": "src/lib.rs", "offset": 2, "limit": 1})
            )
            .await
            .unwrap(),
            "fn two() {}\n"
        );
        assert_eq!(
            call(&workspace.list_dir(), json!({})).await.unwrap(),
            "src/"
        );
        assert_eq!(
            call(&workspace.grep(), json!({"pattern": "fn t\\w+"}))
                .await
                .unwrap(),
            "src/lib.rs:2: fn two() {}"
        );
        assert_eq!(
            call(&workspace.grep(), json!({"pattern": "nothing"}))
                .await
                .unwrap(),
            "no matches"
        );
    }

    #[tokio::test]
    async fn paths_outside_the_root_are_refused() {
        let outer = tempfile::tempdir().unwrap();
        std::fs::create_dir(outer.path().join("root")).unwrap();
        std::fs::write(outer.path().join("secret.txt"), "s3cret").unwrap();
        let workspace = Workspace::new(outer.path().join("root")).unwrap();
        for path in ["../secret.txt", "/etc/hostname", "a/../../secret.txt"] {
            let error = call(&workspace.read_file(), json!({ "path": path }))
                .await
                .unwrap_err();
            assert!(
                error.contains("outside the workspace") || error.contains("No such file"),
                "{path}: {error}"
            );
            let error = call(
                &workspace.write_file(),
                json!({"path": path, "content": "x"}),
            )
            .await
            .unwrap_err();
            assert!(error.contains("outside the workspace"), "{path}: {error}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outer.path(), outer.path().join("root/link")).unwrap();
            let error = call(&workspace.read_file(), json!({"path": "link/secret.txt"}))
                .await
                .unwrap_err();
            assert!(error.contains("outside the workspace"), "{error}");
            let error = call(
                &workspace.write_file(),
                json!({"path": "link/new.txt", "content": "x"}),
            )
            .await
            .unwrap_err();
            assert!(error.contains("outside the workspace"), "{error}");
            assert!(!outer.path().join("new.txt").exists());
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn shell_runs_in_the_root_and_reports_failures() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker.txt"), "").unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let listing = call(&workspace.shell(), json!({"command": "ls"}))
            .await
            .unwrap();
        assert_eq!(listing, "exit code: 0\nstdout:\nmarker.txt\n");
        let failure = call(
            &workspace.shell(),
            json!({"command": "echo oops >&2; exit 3"}),
        )
        .await
        .unwrap_err();
        assert_eq!(failure, "exit code: 3\nstderr:\noops\n");
    }

    #[test]
    fn long_outputs_keep_their_end() {
        let text = format!("{}END", "x".repeat(MAX_OUTPUT + 10));
        let kept = capped(&text);
        assert!(kept.starts_with("[13 bytes cut]") && kept.ends_with("END"));
    }
}
