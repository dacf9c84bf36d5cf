//! Child processes for crash and race tests: a test binary re-runs itself with one test
//! selected (its "entry point") and a role in the environment; the child reports on stdout,
//! one line at a time, and the parent acts on those lines instead of sleeping.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Lines, Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};

/// The prefix of the lines a child reports on (the test runner prints its own lines too).
const SAYS: &str = "child-says:";

/// A child's reports.
pub type Reports = Lines<BufReader<ChildStdout>>;

/// Reports one line to the parent (call it in the child).
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A parent that went away cannot be told anything; the child ends with its stdin.
    let _ = writeln!(out, "{SAYS} {line}");
    let _ = out.flush();
}

/// Holds on until killed; also ends when the parent goes away (its stdin closes), so that a
/// failed test leaves no orphan behind.
pub fn park_until_killed() {
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
}

/// Re-runs this test binary with only the test `entry_point`, the given environment, and
/// piped stdin and stdout.
///
/// # Panics
/// If the binary cannot be started: the test cannot go on.
pub fn spawn<K, V>(entry_point: &str, env: impl IntoIterator<Item = (K, V)>) -> (Child, Reports)
where
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let exe = std::env::current_exe().unwrap_or_else(|error| panic!("no test binary: {error}"));
    let mut child = Command::new(exe)
        .args(["--exact", entry_point, "--nocapture", "--test-threads=1"])
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("the child process did not start: {error}"));
    let stdout = child
        .stdout
        .take()
        .unwrap_or_else(|| panic!("the child's stdout is piped"));
    (child, BufReader::new(stdout).lines())
}

/// The child's next report (skipping the test runner's own lines); `None` once it exits.
pub fn next_report(reports: &mut Reports) -> Option<String> {
    for line in reports.by_ref() {
        let Ok(line) = line else { return None };
        // The runner may have started the line with the test's name.
        if let Some(at) = line.find(SAYS) {
            return Some(line[at + SAYS.len()..].trim().to_owned());
        }
    }
    None
}

/// Kills the child (SIGKILL on Unix) and reaps it.
pub fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}
