//! `shell`: a command in a process group of its own, its output bounded.
//!
//! The command's output streams to the UI as it comes (the first [`MAX_LIVE`] bytes of it;
//! then one line says the rest is not shown live) and is kept for the model as its first
//! [`HEAD`] and last [`TAIL`] bytes per stream, with the number of bytes cut between them.
//! When the shell exits, times out or is cancelled, or the call is dropped, the whole process
//! group is killed, so a command's background processes do not outlive it.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use harness_core::tool::{ShellStream, ToolContext, ToolError, ToolProgress};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The default and largest command timeouts, in seconds.
pub(super) const SHELL_TIMEOUT: (u64, u64) = (120, 1800);
/// The bytes kept from the start of each stream.
const HEAD: usize = 16 * 1024;
/// The bytes kept from the end of each stream (where errors are).
const TAIL: usize = 48 * 1024;
/// The bytes of output streamed to the UI per call.
const MAX_LIVE: usize = 1024 * 1024;
/// How long output is still read after the command ended and its group was killed (a process
/// that left the group can hold the pipe open).
const DRAIN: Duration = Duration::from_secs(2);

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

/// The first and the last bytes of a stream, and how long it was: constant memory for any
/// length.
#[derive(Debug)]
pub(crate) struct HeadTail {
    head: Vec<u8>,
    /// The last bytes; between two compactions it holds up to twice [`HeadTail::tail_max`].
    tail: Vec<u8>,
    head_max: usize,
    tail_max: usize,
    total: u64,
}

impl HeadTail {
    pub(crate) fn new(head_max: usize, tail_max: usize) -> HeadTail {
        HeadTail {
            head: Vec::new(),
            tail: Vec::new(),
            head_max,
            tail_max,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let to_head = bytes.len().min(self.head_max - self.head.len());
        self.head.extend_from_slice(&bytes[..to_head]);
        bytes = &bytes[to_head..];
        if bytes.len() >= self.tail_max {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - self.tail_max..]);
            return;
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * self.tail_max {
            let start = self.tail.len() - self.tail_max;
            self.tail.copy_within(start.., 0);
            self.tail.truncate(self.tail_max);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The text kept: the head, then (if anything was cut) a line saying how many bytes, then
    /// the tail. Invalid UTF-8 (and a character split by a cut) shows as `�`.
    pub(crate) fn text(&self) -> String {
        let tail_start = self.tail.len().saturating_sub(self.tail_max);
        let tail = &self.tail[tail_start..];
        let kept = (self.head.len() + tail.len()) as u64;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.total > kept {
            text.push_str(&format!(
                "\n[{} bytes cut of {}]\n",
                self.total - kept,
                self.total
            ));
        }
        text.push_str(&String::from_utf8_lossy(tail));
        text
    }
}

/// How the command ended.
enum Ended {
    Exited(std::io::Result<std::process::ExitStatus>),
    Cancelled,
    TimedOut(Duration),
}

pub(super) async fn run(
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
    command
        .arg(&args.command)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command
        .spawn()
        .map_err(|error| ToolError::new(format!("the command did not start: {error}")))?;
    let group = Group::of(&child);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut out = HeadTail::new(HEAD, TAIL);
    let mut err = HeadTail::new(HEAD, TAIL);
    let live = Live::default();
    let (ended, drained) = {
        let pumps = async {
            tokio::join!(
                pump(stdout, ShellStream::Stdout, ctx, &mut out, &live),
                pump(stderr, ShellStream::Stderr, ctx, &mut err, &live)
            )
        };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(pumps, deadline);
        let mut drained = false;
        let ended = loop {
            tokio::select! {
                _ = &mut pumps, if !drained => drained = true,
                status = child.wait() => break Ended::Exited(status),
                () = ctx.abort.cancelled() => break Ended::Cancelled,
                () = &mut deadline => break Ended::TimedOut(timeout),
            }
        };
        // Whatever the shell left running goes with it; then the pipes close.
        group.kill();
        if !drained {
            drained = tokio::time::timeout(DRAIN, &mut pumps).await.is_ok();
        }
        (ended, drained)
    };
    if !matches!(ended, Ended::Exited(_)) {
        let _ = child.wait().await;
    }
    let mut report = match &ended {
        Ended::Exited(Ok(status)) => format!(
            "exit code: {}\n",
            status
                .code()
                .map_or_else(|| "killed by a signal".to_owned(), |c| c.to_string())
        ),
        Ended::Exited(Err(error)) => {
            return Err(ToolError::new(format!("the command failed: {error}")));
        }
        Ended::Cancelled => "the command was cancelled and killed\n".to_owned(),
        Ended::TimedOut(timeout) => format!(
            "the command did not finish within {} s and was killed; raise `timeoutSecs` or run \
             something shorter\n",
            timeout.as_secs()
        ),
    };
    for (name, output) in [("stdout", &out), ("stderr", &err)] {
        if !output.is_empty() {
            report.push_str(&format!("{name}:\n{}\n", output.text().trim_end()));
        }
    }
    if !drained {
        report.push_str(
            "[the output was still open after the command ended: a process it started outside \
             its process group may still run]\n",
        );
    }
    match ended {
        Ended::Exited(Ok(status)) if status.success() => Ok(report),
        _ => Err(ToolError::new(report)),
    }
}

/// How much output went to the UI.
#[derive(Default)]
struct Live {
    sent: std::sync::atomic::AtomicUsize,
    stopped: std::sync::atomic::AtomicBool,
}

impl Live {
    /// Streams a chunk to the UI while the call is under [`MAX_LIVE`].
    fn send(&self, ctx: &ToolContext, stream: ShellStream, chunk: &[u8]) {
        use std::sync::atomic::Ordering::Relaxed;
        if chunk.is_empty() {
            return;
        }
        if self.sent.fetch_add(chunk.len(), Relaxed) < MAX_LIVE {
            ctx.progress(ToolProgress::Shell {
                output: String::from_utf8_lossy(chunk).into_owned(),
                stream,
            });
        } else if !self.stopped.swap(true, Relaxed) {
            ctx.progress(ToolProgress::Shell {
                output: format!(
                    "\n[more output is not shown live; the result keeps its first {} KiB and \
                     last {} KiB]\n",
                    HEAD / 1024,
                    TAIL / 1024
                ),
                stream,
            });
        }
    }
}

/// Reads a pipe to its end into `kept`, streaming whole characters to the UI.
async fn pump(
    pipe: Option<impl AsyncRead + Unpin>,
    stream: ShellStream,
    ctx: &ToolContext,
    kept: &mut HeadTail,
    live: &Live,
) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buffer = vec![0u8; 64 * 1024];
    // The bytes of a character that a read split, carried to the next chunk.
    let mut pending = 0;
    loop {
        let read = match pipe.read(&mut buffer[pending..]).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let filled = pending + read;
        kept.push(&buffer[pending..filled]);
        let whole = complete_prefix(&buffer[..filled]);
        live.send(ctx, stream, &buffer[..whole]);
        buffer.copy_within(whole..filled, 0);
        pending = filled - whole;
    }
    if pending > 0 {
        live.send(ctx, stream, &buffer[..pending]);
    }
}

/// The length of `bytes` without a trailing, incomplete UTF-8 character (invalid bytes are
/// left in; they show as `�`).
fn complete_prefix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let byte = bytes[len - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

/// The command's process group, killed when the command ends or the call is dropped.
struct Group {
    #[cfg(unix)]
    leader: Option<rustix::process::Pid>,
}

impl Group {
    fn of(child: &tokio::process::Child) -> Group {
        #[cfg(unix)]
        {
            Group {
                leader: child
                    .id()
                    .and_then(|id| i32::try_from(id).ok())
                    .and_then(rustix::process::Pid::from_raw),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = child;
            Group {}
        }
    }

    /// Kills every process of the group (they may be gone already).
    fn kill(&self) {
        #[cfg(unix)]
        if let Some(leader) = self.leader {
            let _ = rustix::process::kill_process_group(leader, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use harness_core::tool::{
        ApprovalAnswer, ApprovalRequest, HarnessChannel, SuspendError, Suspension, Tool,
    };
    use serde_json::{Value, json};
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    use super::super::Workspace;
    use super::*;

    /// A harness stand-in that hands on what the tool streams.
    struct Progress(mpsc::UnboundedSender<String>);

    #[async_trait]
    impl HarnessChannel for Progress {
        async fn suspend(&self, _: Suspension) -> Result<Value, SuspendError> {
            Err(SuspendError::Unavailable)
        }
        fn progress(&self, _: &str, progress: ToolProgress) {
            if let ToolProgress::Shell { output, .. } = progress {
                let _ = self.0.send(output);
            }
        }
        async fn approve(&self, _: ApprovalRequest) -> ApprovalAnswer {
            ApprovalAnswer::Approve
        }
        async fn escalate(&self, _: &str) -> Option<String> {
            None
        }
    }

    fn context() -> (ToolContext, mpsc::UnboundedReceiver<String>) {
        let (send, receive) = mpsc::unbounded_channel();
        let ctx = ToolContext {
            call_id: "call_1".into(),
            tool_name: "shell".into(),
            abort: CancellationToken::new(),
            channel: Some(Arc::new(Progress(send))),
            thread_id: None,
        };
        (ctx, receive)
    }

    async fn shell(dir: &Path, args: Value, ctx: ToolContext) -> Result<String, String> {
        Workspace::new(dir)
            .unwrap()
            .shell()
            .execute(args, ctx)
            .await
            .map(|out| out.content)
            .map_err(|e| e.message().to_owned())
    }

    /// Waits (at most 10 s) for `pid` to end; true if it did. A pidfd becomes readable when
    /// the process exits, whoever its parent is.
    #[cfg(target_os = "linux")]
    fn ends(pid: &str) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        use rustix::process::{Pid, PidfdFlags, pidfd_open};
        let pid = Pid::from_raw(pid.parse().unwrap()).unwrap();
        let Ok(fd) = pidfd_open(pid, PidfdFlags::empty()) else {
            return true; // gone and reaped already
        };
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let limit = Timespec {
            tv_sec: 10,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&limit)) == Ok(1)
    }

    /// The pid the command printed on the line after `marker`.
    fn pid_after<'a>(output: &'a str, marker: &str) -> &'a str {
        let at = output.find(marker).unwrap_or_else(|| panic!("{output}"));
        output[at + marker.len()..].lines().next().unwrap().trim()
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn shell_runs_in_the_root_and_reports_failures() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker.txt"), "").unwrap();
        let listing = shell(dir.path(), json!({"command": "ls"}), context().0)
            .await
            .unwrap();
        assert_eq!(listing, "exit code: 0\nstdout:\nmarker.txt\n");
        let failure = shell(
            dir.path(),
            json!({"command": "echo oops >&2; exit 3"}),
            context().0,
        )
        .await
        .unwrap_err();
        assert_eq!(failure, "exit code: 3\nstderr:\noops\n");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn background_processes_end_with_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let done = shell(
            dir.path(),
            json!({"command": "sleep 300 & echo \"pid:$!\"; echo hi", "timeoutSecs": 20}),
            context().0,
        )
        .await
        .unwrap();
        assert!(done.ends_with("hi\n"), "{done}");
        let pid = pid_after(&done, "pid:");
        assert!(ends(pid), "sleep {pid} outlived its command");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_timeout_kills_the_whole_group_and_keeps_the_output() {
        let dir = tempfile::tempdir().unwrap();
        let error = shell(
            dir.path(),
            json!({"command": "sleep 300 & echo \"pid:$!\"; sleep 300", "timeoutSecs": 1}),
            context().0,
        )
        .await
        .unwrap_err();
        assert!(
            error.starts_with("the command did not finish within 1 s and was killed"),
            "{error}"
        );
        let pid = pid_after(&error, "pid:");
        assert!(ends(pid), "sleep {pid} outlived the timeout");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_abort_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, mut progress) = context();
        let abort = ctx.abort.clone();
        let command = json!({"command": "sleep 300 & echo \"pid:$!\"; wait"});
        let call = tokio::spawn({
            let dir = dir.path().to_path_buf();
            async move { shell(&dir, command, ctx).await }
        });
        let mut seen = String::new();
        while !seen.contains('\n') {
            seen.push_str(&progress.recv().await.unwrap());
        }
        abort.cancel();
        let error = call.await.unwrap().unwrap_err();
        assert!(
            error.starts_with("the command was cancelled and killed"),
            "{error}"
        );
        let pid = pid_after(&seen, "pid:");
        assert!(ends(pid), "sleep {pid} outlived the abort");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_huge_output_keeps_its_head_and_tail_and_says_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, mut progress) = context();
        let result = shell(
            dir.path(),
            json!({"command": "printf START; head -c 50000000 /dev/zero | tr '\\0' x; printf END"}),
            ctx,
        )
        .await
        .unwrap();
        assert!(
            result.starts_with("exit code: 0\nstdout:\nSTARTxxx"),
            "{}",
            &result[..40]
        );
        assert!(result.ends_with("xxxEND\n"));
        let cut = 50_000_008 - HEAD - TAIL;
        assert!(
            result.contains(&format!("\n[{cut} bytes cut of 50000008]\n")),
            "{}",
            result.len()
        );
        assert!(result.len() < HEAD + TAIL + 200);
        let mut live = 0;
        let mut last = String::new();
        while let Ok(chunk) = progress.try_recv() {
            live += chunk.len();
            last = chunk;
        }
        assert!(live < MAX_LIVE + 128 * 1024, "{live} bytes streamed live");
        assert!(last.contains("more output is not shown live"), "{last}");
    }

    #[test]
    fn head_and_tail_keep_their_bytes_in_any_cut() {
        let data: Vec<u8> = (0..10_000u32).map(|n| (n % 251) as u8).collect();
        for chunk in [1, 7, 100, 999, 10_000] {
            let mut kept = HeadTail::new(100, 300);
            for piece in data.chunks(chunk) {
                kept.push(piece);
            }
            assert_eq!(kept.head, data[..100]);
            let tail = &kept.tail[kept.tail.len() - 300..];
            assert_eq!(tail, &data[data.len() - 300..], "chunks of {chunk}");
            assert!(kept.tail.len() <= 600 + chunk);
        }
        let mut small = HeadTail::new(4, 4);
        small.push(b"abcdef");
        assert_eq!(small.text(), "abcdef");
        small.push(b"ghijkl");
        assert_eq!(small.text(), "abcd\n[4 bytes cut of 12]\nijkl");
        assert!(HeadTail::new(1, 1).is_empty());
    }

    #[test]
    fn a_split_character_waits_for_its_end() {
        let text = "aé€😀".as_bytes();
        assert_eq!(complete_prefix(text), text.len());
        assert_eq!(complete_prefix(&text[..2]), 1, "half of é");
        assert_eq!(complete_prefix(&text[..5]), 3, "two thirds of €");
        assert_eq!(complete_prefix(&text[..8]), 6, "three quarters of 😀");
        assert_eq!(
            complete_prefix(&[b'a', 0xff]),
            2,
            "invalid bytes are not held back"
        );
    }
}
