//! Workspace tools: `read_file`, `write_file`, `list_dir`, `grep` and `shell`, confined to one
//! directory.
//!
//! Paths are relative to the workspace root (an absolute path is accepted when it lies under
//! the root). Every path is resolved beneath the root *when it is opened*, through a handle on
//! the root directory ([`cap_std`]: `openat2` with `RESOLVE_BENEATH` on Linux, a
//! component-by-component walk elsewhere), never by checking a string first: `..`, an
//! absolute path, or a symbolic link that leads outside (dangling or not, or swapped in
//! between two calls) is refused with an error the model sees, and nothing outside is read or
//! written. Only regular files are read or written: a pipe, a socket or a device is refused
//! without being waited on.
//!
//! What a tool returns is bounded: `read_file` reads at most 256 KiB of a file (not the whole
//! file), `grep` stops at 200 matches, skips files over 2 MiB and binary files, and stops on
//! cancellation or after 30 s; `shell` keeps the head and the tail of a command's output and
//! says how much was cut, so a command that prints a gigabyte costs megabytes.
//!
//! `shell` runs `sh -c` in the root, in a process group of its own: when the command ends,
//! times out or is cancelled, the whole group is killed, so nothing it started in the
//! background outlives it. It is not a sandbox (a command can `cd` anywhere), so it is in the
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
//! use harness_workspace::Workspace;
//!
//! let dir = tempfile::tempdir()?;
//! let workspace = Workspace::new(dir.path())?;
//! let names: Vec<String> = workspace.tools().iter().map(|t| t.name().to_owned()).collect();
//! assert_eq!(names, ["read_file", "write_file", "list_dir", "grep", "shell"]);
//! assert!(workspace.open("../etc/passwd").is_err());
//! assert!(workspace.open("/etc/passwd").is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod entries;
mod files;
mod grep;
mod shell;

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, OpenOptions};
use harness_core::tool::{Tool, ToolContext, ToolError, tool_fn};
use harness_tags::ToolCategory;
use schemars::JsonSchema;
use serde::Deserialize;

pub use entries::{Entry, Written};
pub use grep::{SearchHit, SearchQuery, SearchResults};
pub use shell::ShellArgs;

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
    dir: Arc<Dir>,
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
        let dir =
            Dir::open_ambient_dir(&root, ambient_authority()).map_err(|e| error(e.to_string()))?;
        Ok(Workspace {
            root: Arc::from(root),
            dir: Arc::new(dir),
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

    /// Opens a regular file of the workspace for reading, resolved beneath the root; errors
    /// say why it is refused (outside the workspace, missing, not a regular file). Never waits
    /// on a pipe.
    pub fn open(&self, path: &str) -> Result<std::fs::File, ToolError> {
        self.open_regular(path).map(|(file, _)| file.into_std())
    }

    /// `path` relative to the root, as far as its text goes: a relative path as given, an
    /// absolute one only under the root. Where it leads is decided when it is opened.
    fn relative(&self, path: &str) -> Result<PathBuf, ToolError> {
        let asked = Path::new(path);
        let relative = if asked.is_absolute() {
            asked
                .strip_prefix(&self.root)
                .map_err(|_| self.outside(path))?
        } else {
            asked
        };
        // A path whose `..` climb above the root is refused here for a clear message (what
        // does not climb in text can still lead out through a link: that is refused on open).
        let mut depth = 0usize;
        for component in relative.components() {
            match component {
                Component::ParentDir => {
                    depth = depth.checked_sub(1).ok_or_else(|| self.outside(path))?;
                }
                Component::Normal(_) => depth += 1,
                _ => {}
            }
        }
        Ok(if relative.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            relative.to_path_buf()
        })
    }

    fn outside(&self, asked: &str) -> ToolError {
        ToolError::new(format!(
            "`{asked}` is outside the workspace ({}); use a path inside it",
            self.root.display()
        ))
    }

    /// The error the model sees when opening `asked` failed.
    fn refused(&self, asked: &str, error: &io::Error) -> ToolError {
        // cap-std reports a path that leads out of the root (through `..`, an absolute path
        // or a symbolic link) as a permission error of its own, without an OS error code.
        if error.kind() == io::ErrorKind::PermissionDenied && error.raw_os_error().is_none() {
            return self.outside(asked);
        }
        if error.kind() == io::ErrorKind::NotFound {
            return ToolError::new(format!(
                "`{asked}` does not exist in the workspace (No such file or directory)"
            ));
        }
        if is_unopened_pipe(error) {
            return not_regular(asked);
        }
        ToolError::new(format!("`{asked}`: {error}"))
    }

    /// Opens a regular file beneath the root for reading, with its size.
    fn open_regular(&self, asked: &str) -> Result<(File, u64), ToolError> {
        self.open_beneath(&self.relative(asked)?, asked)
    }

    /// Opens `relative` (which `asked` named) beneath the root for reading: a regular file,
    /// with its size.
    fn open_beneath(&self, relative: &Path, asked: &str) -> Result<(File, u64), ToolError> {
        let mut options = OpenOptions::new();
        options.read(true);
        never_block(&mut options);
        let file = self
            .dir
            .open_with(relative, &options)
            .map_err(|error| self.refused(asked, &error))?;
        let metadata = file
            .metadata()
            .map_err(|error| self.refused(asked, &error))?;
        if metadata.is_dir() {
            return Err(ToolError::new(format!(
                "`{asked}` is a directory; list it with list_dir"
            )));
        }
        if !metadata.is_file() {
            return Err(not_regular(asked));
        }
        Ok((file, metadata.len()))
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
                blocking(move || workspace.read_text(&args.path, args.offset, args.limit))
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
                blocking(move || workspace.write_text(&args.path, &args.content))
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
                blocking(move || workspace.list(args.path.as_deref().unwrap_or(".")))
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
             regex syntax). Prints `path:line: text`. Hidden files, files that .gitignore or \
             .ignore exclude, `target` and `node_modules` are skipped.",
            move |args: GrepArgs, ctx: ToolContext| {
                let workspace = workspace.clone();
                async move { grep::run(workspace, args, &ctx).await }
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
             output. Give `timeoutSecs` for long commands (default 120). Processes it starts \
             in the background are stopped when it ends.",
            move |args: ShellArgs, ctx: ToolContext| {
                let root = workspace.root.clone();
                async move { shell::run(&root, &args, &ctx).await }
            },
        )
        .category(ToolCategory::Execute)
        .aliases(["bash", "run", "run_command", "execute"])
        .timeout(Duration::from_secs(shell::SHELL_TIMEOUT.1 + 5))
    }
}

/// Runs blocking file work off the async threads.
async fn blocking(
    work: impl FnOnce() -> Result<String, ToolError> + Send + 'static,
) -> Result<String, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ToolError::new(format!("the tool failed: {error}")))?
}

fn not_regular(asked: &str) -> ToolError {
    ToolError::new(format!(
        "`{asked}` is not a regular file (a pipe, socket or device); only regular files are \
         read and written"
    ))
}

/// The flags that keep `open` from waiting: a pipe without a writer (or, for writing, without
/// a reader) would block it until one comes; a terminal would become the controlling one.
#[cfg(unix)]
pub const NEVER_BLOCK: i32 = rustix::fs::OFlags::NONBLOCK
    .union(rustix::fs::OFlags::NOCTTY)
    .bits() as i32;

/// Opening never waits (see [`NEVER_BLOCK`]).
fn never_block(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        options.custom_flags(NEVER_BLOCK);
    }
    #[cfg(not(unix))]
    let _ = options;
}

/// Opening a pipe for writing without blocking fails with `ENXIO` when no one reads it.
fn is_unopened_pipe(error: &io::Error) -> bool {
    #[cfg(unix)]
    {
        error.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error())
    }
    #[cfg(not(unix))]
    {
        let _ = error;
        false
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::files::MAX_READ;
    use super::*;

    async fn call(tool: &dyn Tool, args: serde_json::Value) -> Result<String, String> {
        tool.execute(args, ToolContext::detached("test", "call_1"))
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
        let absolute = dir.path().canonicalize().unwrap().join("src/lib.rs");
        assert_eq!(
            call(
                &workspace.read_file(),
                json!({"path": absolute.to_str().unwrap()})
            )
            .await
            .unwrap(),
            "fn one() {}\nfn two() {}\n",
            "an absolute path under the root is read"
        );
        assert_eq!(
            call(&workspace.list_dir(), json!({})).await.unwrap(),
            "src/"
        );
        assert_eq!(
            call(&workspace.list_dir(), json!({"path": "src"}))
                .await
                .unwrap(),
            "lib.rs"
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
        let replaced = call(
            &workspace.write_file(),
            json!({"path": "src/lib.rs", "content": "short"}),
        )
        .await
        .unwrap();
        assert_eq!(replaced, "Wrote 5 bytes to src/lib.rs");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
            "short"
        );
    }

    #[tokio::test]
    async fn read_file_reads_only_what_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        // A gigabyte that is never on disk: reading it whole would allocate a gigabyte.
        let file = std::fs::File::create(dir.path().join("huge.txt")).unwrap();
        file.set_len(1 << 30).unwrap();
        let text = call(&workspace.read_file(), json!({"path": "huge.txt"}))
            .await
            .unwrap();
        assert!(text.len() < MAX_READ + 200, "{}", text.len());
        assert!(
            text.ends_with(
                "[truncated after 262144 bytes of a 1073741824-byte file: read the rest with \
                 `offset` and `limit`]"
            ),
            "{}",
            &text[MAX_READ..]
        );

        let lines: String = (1..=100_000).map(|n| format!("line {n}\n")).collect();
        std::fs::write(dir.path().join("lines.txt"), &lines).unwrap();
        let tail = call(
            &workspace.read_file(),
            json!({"path": "lines.txt", "offset": 99_999}),
        )
        .await
        .unwrap();
        assert_eq!(tail, "line 99999\nline 100000\n");
        let past = call(
            &workspace.read_file(),
            json!({"path": "lines.txt", "offset": 200_000}),
        )
        .await
        .unwrap();
        assert_eq!(past, "");
        let many = call(&workspace.read_file(), json!({"path": "lines.txt"}))
            .await
            .unwrap();
        assert!(many.contains("[truncated after"), "{}", many.len());

        // A cut inside a character ends before it; bytes that are not UTF-8 are refused.
        std::fs::write(dir.path().join("wide.txt"), "é".repeat(MAX_READ)).unwrap();
        let wide = call(&workspace.read_file(), json!({"path": "wide.txt"}))
            .await
            .unwrap();
        assert!(wide.starts_with("éé") && wide.contains("[truncated after 262144 bytes"));
        std::fs::write(dir.path().join("bin"), [0xff, 0xfe, b'\n']).unwrap();
        let error = call(&workspace.read_file(), json!({"path": "bin"}))
            .await
            .unwrap_err();
        assert_eq!(error, "`bin` is not a UTF-8 text file");
    }

    /// A workspace `root` inside `outer`, next to `outer/secret.txt` and `outer/ssh/`.
    fn outer_and_root() -> (tempfile::TempDir, Workspace) {
        let outer = tempfile::tempdir().unwrap();
        std::fs::create_dir(outer.path().join("root")).unwrap();
        std::fs::create_dir(outer.path().join("ssh")).unwrap();
        std::fs::write(outer.path().join("secret.txt"), "s3cret\n").unwrap();
        let workspace = Workspace::new(outer.path().join("root")).unwrap();
        (outer, workspace)
    }

    #[tokio::test]
    async fn dot_dots_and_absolute_paths_are_refused_by_every_tool() {
        let (_outer, workspace) = outer_and_root();
        for path in ["../secret.txt", "/etc/hostname", "a/../../secret.txt", ".."] {
            let read = call(&workspace.read_file(), json!({ "path": path })).await;
            let write = call(
                &workspace.write_file(),
                json!({"path": path, "content": "x"}),
            )
            .await;
            let list = call(&workspace.list_dir(), json!({ "path": path })).await;
            let grep = call(
                &workspace.grep(),
                json!({"pattern": "s3cret", "path": path}),
            )
            .await;
            for (tool, result) in [
                ("read", read),
                ("write", write),
                ("list", list),
                ("grep", grep),
            ] {
                let error = result.unwrap_err();
                assert!(
                    error.contains("outside the workspace"),
                    "{tool} {path}: {error}"
                );
            }
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn links_cannot_lead_outside() {
        use std::os::unix::fs::symlink;
        let (outer, workspace) = outer_and_root();
        let root = workspace.root().to_path_buf();
        let keys = outer.path().join("ssh/authorized_keys");
        // A dangling link to a file outside, a link to a directory outside, a link to a file
        // outside, relative links that climb out, a link to a device.
        symlink(&keys, root.join("notes.md")).unwrap();
        symlink(outer.path(), root.join("outer")).unwrap();
        symlink(outer.path().join("secret.txt"), root.join("secret.txt")).unwrap();
        symlink("../secret.txt", root.join("up.txt")).unwrap();
        symlink("..", root.join("up")).unwrap();
        symlink("/dev/zero", root.join("zero")).unwrap();

        let write = |path: &str| {
            let tool = workspace.write_file();
            let args = json!({"path": path, "content": "ssh-ed25519 AAAA attacker"});
            async move { call(&tool, args).await }
        };
        for path in [
            "notes.md",
            "outer/ssh/authorized_keys",
            "outer/new.txt",
            "up/new.txt",
            "secret.txt",
            "up.txt",
        ] {
            let error = write(path).await.unwrap_err();
            assert!(error.contains("outside the workspace"), "{path}: {error}");
        }
        assert!(!keys.exists(), "written through the dangling link");
        assert!(!outer.path().join("new.txt").exists());
        assert_eq!(
            std::fs::read_to_string(outer.path().join("secret.txt")).unwrap(),
            "s3cret\n"
        );

        for path in [
            "secret.txt",
            "up.txt",
            "outer/secret.txt",
            "up/secret.txt",
            "zero",
        ] {
            let error = call(&workspace.read_file(), json!({ "path": path }))
                .await
                .unwrap_err();
            assert!(error.contains("outside the workspace"), "{path}: {error}");
        }
        for path in ["outer", "up"] {
            let error = call(&workspace.list_dir(), json!({ "path": path }))
                .await
                .unwrap_err();
            assert!(error.contains("outside the workspace"), "{path}: {error}");
            let error = call(
                &workspace.grep(),
                json!({"pattern": "s3cret", "path": path}),
            )
            .await
            .unwrap_err();
            assert!(error.contains("outside the workspace"), "{path}: {error}");
        }
        // Searching the whole workspace does not follow the links out.
        assert_eq!(
            call(&workspace.grep(), json!({"pattern": "s3cret"}))
                .await
                .unwrap(),
            "no matches"
        );
        // The links themselves are listed, not followed.
        let listing = call(&workspace.list_dir(), json!({})).await.unwrap();
        assert_eq!(listing, "notes.md\nouter\nsecret.txt\nup\nup.txt\nzero");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn links_inside_the_workspace_still_work() {
        use std::os::unix::fs::symlink;
        let (_outer, workspace) = outer_and_root();
        let root = workspace.root().to_path_buf();
        std::fs::create_dir(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/guide.md"), "hello\n").unwrap();
        symlink("docs/guide.md", root.join("README.md")).unwrap();
        symlink("docs", root.join("manual")).unwrap();
        symlink("docs/new.md", root.join("dangling.md")).unwrap();
        assert_eq!(
            call(&workspace.read_file(), json!({"path": "README.md"}))
                .await
                .unwrap(),
            "hello\n"
        );
        assert_eq!(
            call(&workspace.list_dir(), json!({"path": "manual"}))
                .await
                .unwrap(),
            "guide.md"
        );
        call(
            &workspace.write_file(),
            json!({"path": "dangling.md", "content": "made"}),
        )
        .await
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("docs/new.md")).unwrap(),
            "made"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn pipes_and_loops_neither_block_nor_repeat() {
        use std::os::unix::fs::symlink;
        let (_outer, workspace) = outer_and_root();
        let root = workspace.root().to_path_buf();
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        symlink("self", root.join("self")).unwrap();
        symlink(".", root.join("loop")).unwrap();
        std::fs::write(root.join("a.txt"), "needle\n").unwrap();

        for tool in [workspace.read_file(), workspace.read_file()] {
            let error = call(&tool, json!({"path": "pipe"})).await.unwrap_err();
            assert!(error.contains("not a regular file"), "{error}");
        }
        let error = call(
            &workspace.write_file(),
            json!({"path": "pipe", "content": "x"}),
        )
        .await
        .unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
        let error = call(&workspace.read_file(), json!({"path": "self"}))
            .await
            .unwrap_err();
        assert!(error.starts_with("`self`"), "{error}");
        let error = call(&workspace.grep(), json!({"pattern": "x", "path": "pipe"}))
            .await
            .unwrap_err();
        assert!(
            error.contains("neither a regular file nor a directory"),
            "{error}"
        );
        assert_eq!(
            call(&workspace.grep(), json!({"pattern": "needle"}))
                .await
                .unwrap(),
            "a.txt:1: needle",
            "each file once, the pipe skipped"
        );
        assert_eq!(
            call(
                &workspace.grep(),
                json!({"pattern": "needle", "path": "loop"})
            )
            .await
            .unwrap(),
            "loop/a.txt:1: needle",
            "a link to a directory inside may be named, and is not walked again"
        );
    }
}
