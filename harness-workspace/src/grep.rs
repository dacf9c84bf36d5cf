//! `grep`: a walk beneath the root that cannot be led outside it, loop, block or exhaust
//! memory.
//!
//! The walk reads directories through the workspace's root handle and never follows a
//! symbolic link (so a link cannot lead out, repeat results or loop); it skips hidden
//! entries, `target`, `node_modules`, `__pycache__` and `dist`, and what `.gitignore` and
//! `.ignore` files exclude (matched with the `ignore` crate's gitignore rules). Only regular
//! files are searched, at most 2 MiB each, and not those whose first 8 KiB hold a NUL byte
//! (binary). It stops at 200 matches, on cancellation, and after 30 s.
//!
//! Why not `ignore::Walk` itself: it opens every `.gitignore`, `.ignore` and `.git` file it
//! meets by path and reads it whole, so a repository whose `.gitignore` is a pipe blocks the
//! walk forever and one whose `.gitignore` links to `/dev/zero` exhausts memory; a `.git` file
//! can also point it at any directory of the machine. Here those files are read like any
//! other: beneath the root, regular files only, bounded.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cap_std::fs::FileType;
use harness_core::tool::{ToolContext, ToolError};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use regex::Regex;
use tokio_util::sync::CancellationToken;

use crate::{GrepArgs, Workspace};

/// The most matches `grep` returns.
const MAX_MATCHES: usize = 200;
/// Files larger than this are skipped.
const MAX_FILE: u64 = 2 * 1024 * 1024;
/// The most characters of a matching line shown.
const MAX_LINE: usize = 300;
/// How long a search may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// How deep the walk goes below its start.
const MAX_DEPTH: usize = 64;
/// The largest `.gitignore` or `.ignore` file read.
const MAX_IGNORE_FILE: u64 = 1024 * 1024;
/// Bytes looked at to tell a binary file.
const BINARY_PROBE: usize = 8192;
/// Directories never descended into.
const SKIPPED_DIRS: [&str; 4] = ["target", "node_modules", "__pycache__", "dist"];

/// The async tool: [`Workspace::search`] with the tool's pattern, as `path:line: text` lines.
pub(super) async fn run(
    workspace: Workspace,
    args: GrepArgs,
    ctx: &ToolContext,
) -> Result<String, ToolError> {
    let query = SearchQuery {
        glob: None,
        grep: Some(args.pattern),
        ignore_case: args.ignore_case.unwrap_or(false),
        max_results: MAX_MATCHES,
    };
    let start = args.path.unwrap_or_else(|| ".".to_owned());
    report(workspace.search(&start, &query, &ctx.abort).await?)
}

/// What [`Workspace::search`] looks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// Only files whose path matches this glob: against the file's name if the glob has no
    /// `/`, else against its path from the root, where `*` stays within a directory and `**`
    /// crosses them (`src/**/*.rs`).
    pub glob: Option<String>,
    /// A regular expression (Rust `regex` syntax): the matches are the lines it matches;
    /// without one, the files are the matches.
    pub grep: Option<String>,
    /// Whether `grep` ignores case.
    pub ignore_case: bool,
    /// The most matches returned.
    pub max_results: usize,
}

impl Workspace {
    /// Searches beneath `start` (a file or a directory, relative to the root) as the `grep`
    /// tool does: symbolic links are not followed, hidden entries, `target`,
    /// `node_modules`, what `.gitignore` and `.ignore` exclude, files over 2 MiB and binary
    /// files are skipped, and it stops after 30 s or on `abort`. Runs on a blocking thread.
    pub async fn search(
        &self,
        start: &str,
        query: &SearchQuery,
        abort: &CancellationToken,
    ) -> Result<SearchResults, ToolError> {
        let grep = match &query.grep {
            Some(pattern) => Some(
                regex::RegexBuilder::new(pattern)
                    .case_insensitive(query.ignore_case)
                    .build()
                    .map_err(|error| ToolError::new(format!("invalid pattern: {error}")))?,
            ),
            None => None,
        };
        let glob = match &query.glob {
            Some(glob) => Some(
                globset::GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|error| ToolError::new(format!("invalid glob: {error}")))?
                    .compile_matcher(),
            ),
            None => None,
        };
        let query = Query {
            grep,
            whole_path: query.glob.as_ref().is_some_and(|glob| glob.contains('/')),
            glob,
            max: query.max_results,
        };
        let stop = Stop {
            abort: abort.clone(),
            deadline: Instant::now() + TIMEOUT,
        };
        let workspace = self.clone();
        let start = start.to_owned();
        let search = tokio::task::spawn_blocking(move || search(&workspace, &start, &query, &stop));
        tokio::select! {
            done = search => done.map_err(|error| ToolError::new(format!("the search failed: {error}")))?,
            () = abort.cancelled() => Err(cancelled()),
        }
    }
}

/// What a search looks for: files whose path matches `glob` (all without one), and in them
/// the lines `grep` matches (without it, the files are the matches); at most `max` matches.
pub(super) struct Query {
    pub(super) grep: Option<Regex>,
    pub(super) glob: Option<globset::GlobMatcher>,
    /// Whether the glob is matched against the whole path (else the file's name).
    pub(super) whole_path: bool,
    pub(super) max: usize,
}

/// When a search must stop.
pub(super) struct Stop {
    /// The run's abort.
    pub(super) abort: CancellationToken,
    /// The time limit.
    pub(super) deadline: Instant,
}

fn cancelled() -> ToolError {
    ToolError::new("the search was cancelled")
}

/// One match: a file, and with a `grep` pattern the line of it that matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchHit {
    /// The file, relative to the workspace root, `/`-separated.
    pub path: String,
    /// The line's number (from 1) and its text (at most 300 characters).
    pub line: Option<(usize, String)>,
}

/// What a search found and why it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchResults {
    /// The matches, in walk order (by name, depth first).
    pub hits: Vec<SearchHit>,
    /// True if it stopped at its limit.
    pub full: bool,
    /// True if it stopped at its time limit (30 s).
    pub timed_out: bool,
    /// How many files were skipped for being over 2 MiB.
    pub large: usize,
}

impl SearchResults {
    fn done(&self) -> bool {
        self.full || self.timed_out
    }
}

/// Searches `start` (a file or a directory) for what `query` asks.
pub(super) fn search(
    workspace: &Workspace,
    start: &str,
    query: &Query,
    stop: &Stop,
) -> Result<SearchResults, ToolError> {
    // `.` components would only lengthen the paths shown; the root is the empty path.
    let relative: PathBuf = workspace
        .relative(start)?
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    let metadata = workspace
        .dir
        .metadata(at(&relative))
        .map_err(|error| workspace.refused(start, &error))?;
    let mut found = SearchResults::default();
    if metadata.is_file() {
        visit_file(workspace, &relative, query, stop, &mut found);
    } else if metadata.is_dir() {
        walk(workspace, &relative, query, stop, &mut found);
    } else {
        return Err(ToolError::new(format!(
            "`{start}` is neither a regular file nor a directory"
        )));
    }
    if stop.abort.is_cancelled() {
        return Err(cancelled());
    }
    Ok(found)
}

/// The tool's answer: `path:line: text` per match, and why the search stopped.
fn report(found: SearchResults) -> Result<String, ToolError> {
    let lines: Vec<String> = found
        .hits
        .iter()
        .map(|hit| match &hit.line {
            Some((number, text)) => format!("{}:{number}: {text}", hit.path),
            None => hit.path.clone(),
        })
        .collect();
    let mut out = if lines.is_empty() {
        "no matches".to_owned()
    } else {
        lines.join("\n")
    };
    if found.full {
        out.push_str(&format!(
            "\n[stopped at {MAX_MATCHES} matches: narrow the pattern or the path]"
        ));
    }
    if found.large > 0 {
        out.push_str(&format!(
            "\n[{} files over {} MiB skipped]",
            found.large,
            MAX_FILE / (1024 * 1024)
        ));
    }
    if found.timed_out {
        out.push_str(&format!(
            "\n[the search stopped after {} s: narrow the path]",
            TIMEOUT.as_secs()
        ));
    }
    Ok(out)
}

/// A directory being walked: its path, its entries not visited yet (in name order) and the
/// ignore rules that apply below it, nearest last.
struct Level {
    path: PathBuf,
    entries: std::vec::IntoIter<(String, FileType)>,
    rules: Vec<Arc<Gitignore>>,
}

fn walk(
    workspace: &Workspace,
    start: &Path,
    query: &Query,
    stop: &Stop,
    found: &mut SearchResults,
) {
    // The rules of the directories above the start apply too.
    let mut rules = Vec::new();
    let mut above = PathBuf::new();
    for component in start.components() {
        rules.extend(ignore_rules(workspace, &above, None));
        above.push(component);
    }
    let mut levels: Vec<Level> = Vec::new();
    if let Some(level) = enter(workspace, start.to_path_buf(), rules) {
        levels.push(level);
    }
    loop {
        let depth = levels.len();
        let Some(level) = levels.last_mut() else {
            return;
        };
        if found.done() {
            return;
        }
        if stop.abort.is_cancelled() {
            return;
        }
        if Instant::now() >= stop.deadline {
            found.timed_out = true;
            return;
        }
        let Some((name, file_type)) = level.entries.next() else {
            levels.pop();
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let path = level.path.join(&name);
        let is_dir = file_type.is_dir();
        if is_ignored(workspace, &level.rules, &path, is_dir) {
            continue;
        }
        if is_dir {
            if SKIPPED_DIRS.contains(&name.as_str()) || depth > MAX_DEPTH {
                continue;
            }
            let rules = level.rules.clone();
            if let Some(level) = enter(workspace, path, rules) {
                levels.push(level);
            }
        } else if file_type.is_file() {
            visit_file(workspace, &path, query, stop, found);
        }
        // Symbolic links, pipes, sockets and devices are not searched.
    }
}

/// Reads a directory beneath the root: its entries in name order and its ignore rules.
fn enter(workspace: &Workspace, path: PathBuf, mut rules: Vec<Arc<Gitignore>>) -> Option<Level> {
    let reader = workspace.dir.read_dir(at(&path)).ok()?;
    let mut entries: Vec<(String, FileType)> = reader
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file_type = entry.file_type().ok()?;
            Some((entry.file_name().to_string_lossy().into_owned(), file_type))
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    rules.extend(ignore_rules(workspace, &path, Some(&entries)));
    Some(Level {
        path,
        entries: entries.into_iter(),
        rules,
    })
}

/// The rules of a directory's `.gitignore` and `.ignore` (the latter wins), if it has any.
/// `entries`, when known, says which of the two exist.
fn ignore_rules(
    workspace: &Workspace,
    dir: &Path,
    entries: Option<&[(String, FileType)]>,
) -> Option<Arc<Gitignore>> {
    let mut builder = GitignoreBuilder::new(workspace.root.join(dir));
    let mut any = false;
    for name in [".gitignore", ".ignore"] {
        let listed = entries.is_none_or(|entries| {
            entries
                .iter()
                .any(|(entry, file_type)| entry == name && file_type.is_file())
        });
        if !listed {
            continue;
        }
        let Some(text) = read_small(workspace, &dir.join(name), MAX_IGNORE_FILE) else {
            continue;
        };
        for line in String::from_utf8_lossy(&text).lines() {
            // A line that is not a valid pattern is skipped, as git does.
            any |= builder.add_line(None, line).is_ok();
        }
    }
    if !any {
        return None;
    }
    builder.build().ok().map(Arc::new)
}

fn is_ignored(workspace: &Workspace, rules: &[Arc<Gitignore>], path: &Path, is_dir: bool) -> bool {
    let absolute = workspace.root.join(path);
    for rule in rules.iter().rev() {
        match rule.matched(&absolute, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    false
}

/// A regular file's bytes if it is at most `max` long (opened beneath the root, never
/// waiting on a pipe).
fn read_small(workspace: &Workspace, path: &Path, max: u64) -> Option<Vec<u8>> {
    let (file, size) = workspace.open_beneath(path, "").ok()?;
    if size > max {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// `path`, with `/` between its parts whatever the platform.
fn shown(path: &Path) -> String {
    path.components()
        .map(|part| part.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A regular file the walk reached: a match if its path fits the glob and there is no
/// pattern; its matching lines if there is one.
fn visit_file(
    workspace: &Workspace,
    path: &Path,
    query: &Query,
    stop: &Stop,
    found: &mut SearchResults,
) {
    let name = shown(path);
    let matched = match &query.glob {
        None => true,
        Some(glob) if query.whole_path => glob.is_match(&name),
        Some(glob) => path.file_name().is_some_and(|file| glob.is_match(file)),
    };
    if !matched {
        return;
    }
    match &query.grep {
        Some(pattern) => search_file(workspace, path, &name, pattern, query.max, stop, found),
        None if found.hits.len() == query.max => found.full = true,
        None => found.hits.push(SearchHit {
            path: name,
            line: None,
        }),
    }
}

fn search_file(
    workspace: &Workspace,
    path: &Path,
    name: &str,
    pattern: &Regex,
    max: usize,
    stop: &Stop,
    found: &mut SearchResults,
) {
    let Ok((file, size)) = workspace.open_beneath(path, "") else {
        return;
    };
    if size > MAX_FILE {
        found.large += 1;
        return;
    }
    let mut bytes = Vec::new();
    // The size was read before: a file that grew since is read no further than the limit.
    if file.take(MAX_FILE).read_to_end(&mut bytes).is_err() {
        return;
    }
    if bytes.iter().take(BINARY_PROBE).any(|&b| b == 0) {
        return;
    }
    let text = String::from_utf8_lossy(&bytes);
    for (number, line) in text.lines().enumerate() {
        if number % 4096 == 0 && stop.abort.is_cancelled() {
            return;
        }
        if !pattern.is_match(line) {
            continue;
        }
        if found.hits.len() == max {
            found.full = true;
            return;
        }
        found.hits.push(SearchHit {
            path: name.to_owned(),
            line: Some((number + 1, line.chars().take(MAX_LINE).collect())),
        });
    }
}

fn at(path: &Path) -> &Path {
    if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        (dir, workspace)
    }

    fn stop() -> Stop {
        Stop {
            abort: CancellationToken::new(),
            deadline: Instant::now() + TIMEOUT,
        }
    }

    fn grep(workspace: &Workspace, start: &str, pattern: &str) -> Result<String, String> {
        let query = Query {
            grep: Some(Regex::new(pattern).unwrap()),
            glob: None,
            whole_path: false,
            max: MAX_MATCHES,
        };
        search(workspace, start, &query, &stop())
            .and_then(report)
            .map_err(|e| e.message().to_owned())
    }

    fn write(root: &Path, path: &str, text: &[u8]) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn ignored_hidden_and_binary_files_are_skipped() {
        let (dir, workspace) = workspace();
        let root = dir.path();
        write(root, ".gitignore", b"*.log\nbuild/\n");
        write(root, "src/.ignore", b"generated.rs\n!keep.log\n");
        write(root, "src/main.rs", b"needle\n");
        write(root, "src/generated.rs", b"needle\n");
        write(root, "src/keep.log", b"needle\n");
        write(root, "app.log", b"needle\n");
        write(root, "build/out.txt", b"needle\n");
        write(root, ".hidden/x.txt", b"needle\n");
        write(root, ".env", b"needle\n");
        write(root, "node_modules/m/index.js", b"needle\n");
        write(root, "image.bin", b"needle\0\x01\x02");
        assert_eq!(
            grep(&workspace, ".", "needle").unwrap(),
            "src/keep.log:1: needle\nsrc/main.rs:1: needle"
        );
        // Rules above the start apply too; a file named explicitly is searched.
        assert_eq!(
            grep(&workspace, "src", "needle").unwrap(),
            "src/keep.log:1: needle\nsrc/main.rs:1: needle"
        );
        assert_eq!(
            grep(&workspace, "app.log", "needle").unwrap(),
            "app.log:1: needle"
        );
    }

    #[test]
    fn matches_files_and_lines_are_capped() {
        let (dir, workspace) = workspace();
        let root = dir.path();
        let many: String = (0..1000).map(|n| format!("hit {n}\n")).collect();
        write(root, "a.txt", many.as_bytes());
        write(root, "b.txt", b"hit again\n");
        let found = grep(&workspace, ".", "hit").unwrap();
        assert_eq!(found.lines().count(), MAX_MATCHES + 1);
        assert!(found.ends_with("[stopped at 200 matches: narrow the pattern or the path]"));

        let long = format!("{}needle{}\n", "x".repeat(10), "y".repeat(10_000));
        write(root, "long.txt", long.as_bytes());
        let line = grep(&workspace, "long.txt", "needle").unwrap();
        assert_eq!(line.chars().count(), "long.txt:1: ".len() + MAX_LINE);

        let large = std::fs::File::create(root.join("large.txt")).unwrap();
        large.set_len(MAX_FILE + 1).unwrap();
        assert_eq!(
            grep(&workspace, "large.txt", "x").unwrap(),
            "no matches\n[1 files over 2 MiB skipped]"
        );
    }

    #[tokio::test]
    async fn globs_pick_files_by_name_or_by_path() {
        let (dir, workspace) = workspace();
        write(dir.path(), "src/main.rs", b"fn main() {}\n");
        write(
            dir.path(),
            "src/deep/lib.rs",
            b"pub fn lib() {}\nfn main() {}\n",
        );
        write(dir.path(), "notes.md", b"fn main in prose\n");
        let search = |glob: &str, grep: Option<&str>, max: usize| {
            let query = crate::SearchQuery {
                glob: Some(glob.to_owned()),
                grep: grep.map(str::to_owned),
                ignore_case: false,
                max_results: max,
            };
            let workspace = workspace.clone();
            async move {
                workspace
                    .search(".", &query, &CancellationToken::new())
                    .await
                    .unwrap()
            }
        };
        let paths = |found: &SearchResults| -> Vec<String> {
            found.hits.iter().map(|hit| hit.path.clone()).collect()
        };
        assert_eq!(
            paths(&search("*.rs", None, 100).await),
            ["src/deep/lib.rs", "src/main.rs"]
        );
        assert_eq!(paths(&search("src/*.rs", None, 100).await), ["src/main.rs"]);
        assert_eq!(
            paths(&search("src/**/*.rs", None, 100).await),
            ["src/deep/lib.rs", "src/main.rs"]
        );
        let lines = search("*.rs", Some("fn main"), 100).await;
        let found: Vec<(String, usize)> = lines
            .hits
            .iter()
            .map(|hit| (hit.path.clone(), hit.line.as_ref().unwrap().0))
            .collect();
        assert_eq!(
            found,
            [
                ("src/deep/lib.rs".to_owned(), 2),
                ("src/main.rs".to_owned(), 1)
            ]
        );
        let capped = search("*", None, 1).await;
        assert_eq!(capped.hits.len(), 1);
        assert!(capped.full);
        let bad = crate::SearchQuery {
            glob: Some("a{".into()),
            ..Default::default()
        };
        let error = workspace
            .search(".", &bad, &CancellationToken::new())
            .await
            .unwrap_err();
        assert!(
            error.message().starts_with("invalid glob"),
            "{}",
            error.message()
        );
    }

    #[test]
    fn a_search_stops_on_cancellation_and_at_its_deadline() {
        let (dir, workspace) = workspace();
        write(dir.path(), "a.txt", b"needle\n");
        let pattern = Query {
            grep: Some(Regex::new("needle").unwrap()),
            glob: None,
            whole_path: false,
            max: MAX_MATCHES,
        };
        let cancelled = Stop {
            abort: CancellationToken::new(),
            deadline: Instant::now() + TIMEOUT,
        };
        cancelled.abort.cancel();
        let error = search(&workspace, ".", &pattern, &cancelled).unwrap_err();
        assert_eq!(error.message(), "the search was cancelled");
        let late = Stop {
            abort: CancellationToken::new(),
            deadline: Instant::now(),
        };
        assert_eq!(
            search(&workspace, ".", &pattern, &late)
                .and_then(report)
                .unwrap(),
            "no matches\n[the search stopped after 30 s: narrow the path]"
        );
    }

    #[cfg(unix)]
    #[test]
    fn hostile_ignore_files_neither_block_nor_exhaust_memory() {
        use std::os::unix::fs::symlink;
        let (dir, workspace) = workspace();
        let root = dir.path();
        write(root, "a/x.txt", b"needle\n");
        write(root, "b/x.txt", b"needle\n");
        write(root, "c/x.txt", b"needle\n");
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("a/.gitignore"))
            .status()
            .unwrap();
        assert!(made.success());
        symlink("/dev/zero", root.join("b/.gitignore")).unwrap();
        symlink("/dev/zero", root.join("c/.ignore")).unwrap();
        std::fs::write(root.join(".git"), "gitdir: /etc\n").unwrap();
        assert_eq!(
            grep(&workspace, ".", "needle").unwrap(),
            "a/x.txt:1: needle\nb/x.txt:1: needle\nc/x.txt:1: needle"
        );
    }

    #[test]
    fn bad_patterns_and_paths_say_what_is_wrong() {
        let (_dir, workspace) = workspace();
        let ctx = ToolContext::detached("grep", "c1");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let args = |pattern: &str, path: Option<&str>| GrepArgs {
            pattern: pattern.to_owned(),
            path: path.map(str::to_owned),
            ignore_case: None,
        };
        let error = runtime
            .block_on(run(workspace.clone(), args("(", None), &ctx))
            .unwrap_err();
        assert!(error.message().starts_with("invalid pattern"), "{error}");
        let error = runtime
            .block_on(run(workspace.clone(), args("a{1000}{1000}", None), &ctx))
            .unwrap_err();
        assert!(error.message().starts_with("invalid pattern"), "{error}");
        let error = runtime
            .block_on(run(workspace, args("x", Some("missing")), &ctx))
            .unwrap_err();
        assert!(error.message().contains("does not exist"), "{error}");
    }
}
