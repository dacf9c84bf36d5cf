//! The stdio transport: the server as a child process in a process group of its own (so that a
//! launcher like `npx` goes down with everything it started), its stdout read as
//! newline-delimited JSON-RPC with a size bound, and the end of its stderr kept for messages.
//!
//! rmcp's own child-process transport drops a message it cannot parse or that is too long and
//! keeps waiting; a request whose answer was dropped then hangs until its timeout. This one
//! tells the failures apart instead:
//! - a line that does not start like JSON (a stray log line on stdout) is skipped;
//! - a line that starts like JSON but does not parse, or a message over the size bound, breaks
//!   the connection: open requests fail at once with that reason, and the server is restarted
//!   on its next use;
//! - a well-formed JSON answer to a request that is not a valid JSON-RPC response becomes an
//!   error answer to that request, so only that request fails.

use std::collections::VecDeque;
use std::future::Future;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use rmcp::RoleClient;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::{INHERITED_ENV, McpServer};
use crate::error::McpError;

/// How much of a server's stderr is kept.
const STDERR_KEPT: usize = 8 * 1024;
/// How much of it goes into an error message.
const STDERR_IN_MESSAGES: usize = 1024;
/// How much of a bad line an error message quotes.
const EXCERPT: usize = 160;

/// A running server process.
pub(crate) struct ChildProcess {
    pid: Option<u32>,
    exit: watch::Receiver<Option<String>>,
    stderr_done: watch::Receiver<bool>,
    stderr: Arc<Tail>,
    fault: Mutex<Option<String>>,
    kill: CancellationToken,
    _kill_on_drop: DropGuard,
}

impl ChildProcess {
    /// Starts `command` with the server's arguments, environment and directory.
    pub(crate) fn spawn(
        server: &McpServer,
        command: &str,
    ) -> Result<(StdioTransport, Arc<ChildProcess>), McpError> {
        let config = server.config();
        let mut env = Vec::with_capacity(config.env.len());
        for (key, value) in &config.env {
            env.push((key, server.expand(key, value)?));
        }
        let mut wrap = CommandWrap::with_new(command, |cmd| {
            cmd.args(&config.args)
                .env_clear()
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let inherited = INHERITED_ENV
                .iter()
                .copied()
                .chain(config.inherit_env.iter().map(String::as_str));
            for name in inherited {
                if let Some(value) = std::env::var_os(name) {
                    cmd.env(name, value);
                }
            }
            cmd.envs(
                env.iter()
                    .map(|(key, value)| (key.as_str(), value.as_str())),
            );
            if let Some(cwd) = &config.cwd {
                cmd.current_dir(cwd);
            }
        });
        #[cfg(unix)]
        wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
        wrap.wrap(KillOnDrop);
        let start_error = |reason: String| McpError::Start {
            server: server.name().to_owned(),
            reason,
            stderr: String::new(),
        };
        let mut child = wrap
            .spawn()
            .map_err(|error| start_error(spawn_failure(command, config.cwd.is_some(), &error)))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            child.stdin().take(),
            child.stdout().take(),
            child.stderr().take(),
        ) else {
            return Err(start_error(
                "its standard streams could not be opened".to_owned(),
            ));
        };
        let pid = child.id();
        let kill = CancellationToken::new();
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(reap(child, kill.clone(), exit_tx));
        let tail = Arc::new(Tail::default());
        let (done_tx, stderr_done) = watch::channel(false);
        tokio::spawn(keep_stderr(
            stderr,
            Arc::clone(&tail),
            done_tx,
            server.name().to_owned(),
        ));
        let process = Arc::new(ChildProcess {
            pid,
            exit,
            stderr_done,
            stderr: tail,
            fault: Mutex::new(None),
            _kill_on_drop: kill.clone().drop_guard(),
            kill,
        });
        let transport = StdioTransport {
            lines: FramedRead::new(
                stdout,
                LinesCodec::new_with_max_length(server.message_limit()),
            ),
            stdin: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            process: Arc::clone(&process),
            server: server.name().to_owned(),
            limit: server.message_limit(),
        };
        Ok((transport, process))
    }

    /// The process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Everything kept of its stderr.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.text(STDERR_KEPT)
    }

    /// The end of its stderr, short enough for an error message.
    pub(crate) fn stderr_excerpt(&self) -> String {
        self.stderr.text(STDERR_IN_MESSAGES)
    }

    /// Kills it (and its process group).
    pub(crate) fn kill(&self) {
        self.kill.cancel();
    }

    /// Waits, at most `within`, until it exited and its stderr was read to the end, so that a
    /// message about its failure can say how it ended and quote its last words.
    pub(crate) async fn settle(&self, within: Duration) {
        let mut exit = self.exit.clone();
        let mut stderr_done = self.stderr_done.clone();
        let settled = async {
            let _ = exit.wait_for(Option::is_some).await;
            let _ = stderr_done.wait_for(|done| *done).await;
        };
        let _ = tokio::time::timeout(within, settled).await;
    }

    /// Why the connection ended: a protocol fault, how the process exited, or that stdout
    /// closed.
    pub(crate) fn ending(&self) -> String {
        if let Some(fault) = self
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return fault;
        }
        match self.exit.borrow().clone() {
            Some(exit) => exit,
            None => "it closed its standard output".to_owned(),
        }
    }

    fn set_fault(&self, fault: String) {
        let mut slot = self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert(fault);
    }
}

fn spawn_failure(command: &str, has_cwd: bool, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound if has_cwd => format!(
            "`{command}` or the directory `cwd` was not found; check `command` (and PATH) and \
             `cwd`"
        ),
        std::io::ErrorKind::NotFound => {
            format!("`{command}` was not found; check `command` and PATH")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("`{command}` may not be run (permission denied)")
        }
        _ => format!("`{command}` could not be started ({error})"),
    }
}

/// Waits for the process (killing it on request) and publishes how it ended.
async fn reap(
    mut child: Box<dyn ChildWrapper>,
    kill: CancellationToken,
    exit: watch::Sender<Option<String>>,
) {
    let exited = tokio::select! {
        status = child.wait() => Some(status),
        () = kill.cancelled() => None,
    };
    let status = match exited {
        Some(status) => status,
        None => {
            // An error means it is gone already; `wait` then reports how it ended.
            let _ = child.start_kill();
            child.wait().await
        }
    };
    let _ = exit.send(Some(describe_exit(status)));
}

fn describe_exit(status: std::io::Result<ExitStatus>) -> String {
    let status = match status {
        Ok(status) => status,
        Err(error) => return format!("its exit status could not be read ({error})"),
    };
    if let Some(code) = status.code() {
        return format!("it exited with status {code}");
    }
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return format!("it was killed by signal {signal}");
    }
    format!("it exited ({status})")
}

/// Reads stderr to the end, keeping its tail and logging it at debug level.
async fn keep_stderr(
    mut stderr: ChildStderr,
    tail: Arc<Tail>,
    done: watch::Sender<bool>,
    server: String,
) {
    let mut chunk = vec![0u8; 4096];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                let bytes = &chunk[..read];
                tracing::debug!(server = %server, stderr = %String::from_utf8_lossy(bytes));
                tail.push(bytes);
            }
        }
    }
    let _ = done.send(true);
}

/// The last bytes of a stream.
#[derive(Default)]
struct Tail(Mutex<VecDeque<u8>>);

impl Tail {
    fn push(&self, bytes: &[u8]) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.extend(bytes);
        let excess = kept.len().saturating_sub(STDERR_KEPT);
        kept.drain(..excess);
    }

    /// At most the last `limit` bytes, from the start of a line where one is in reach.
    fn text(&self, limit: usize) -> String {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let skip = kept.len().saturating_sub(limit);
        let bytes: Vec<u8> = kept.iter().skip(skip).copied().collect();
        drop(kept);
        let start = if skip > 0 {
            bytes
                .iter()
                .position(|&b| b == b'\n')
                .map_or(0, |at| at + 1)
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

/// rmcp's transport over the child's stdin and stdout.
pub(crate) struct StdioTransport {
    lines: FramedRead<ChildStdout, LinesCodec>,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    process: Arc<ChildProcess>,
    server: String,
    limit: usize,
}

impl rmcp::transport::Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = Arc::clone(&self.stdin);
        let line = serde_json::to_vec(&item);
        async move {
            let mut line = line.map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut stdin = stdin.lock().await;
            let Some(stdin) = stdin.as_mut() else {
                return Err(std::io::ErrorKind::NotConnected.into());
            };
            stdin.write_all(&line).await?;
            stdin.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let line = match self.lines.next().await? {
                Ok(line) => line,
                Err(LinesCodecError::MaxLineLengthExceeded) => {
                    self.fail(format!(
                        "it sent a message of more than {} bytes (`max_message_bytes`)",
                        self.limit
                    ));
                    return None;
                }
                Err(LinesCodecError::Io(error)) => {
                    self.fail(format!("its output could not be read ({error})"));
                    return None;
                }
            };
            match classify(&line) {
                Incoming::Message(message) => return Some(*message),
                Incoming::Skip(why) => {
                    tracing::debug!(server = %self.server, line = %excerpt(&line), "{why}");
                }
                Incoming::Fault(fault) => {
                    self.fail(fault);
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin is how a stdio server is asked to stop; the kill makes sure it does.
        self.stdin.lock().await.take();
        self.process.kill();
        Ok(())
    }
}

impl StdioTransport {
    fn fail(&self, fault: String) {
        tracing::warn!(server = %self.server, "{fault}");
        self.process.set_fault(fault);
        self.process.kill();
    }
}

/// What one line of a server's stdout is.
enum Incoming {
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    Skip(&'static str),
    Fault(String),
}

fn classify(line: &str) -> Incoming {
    let line = line.trim();
    if line.is_empty() {
        return Incoming::Skip("empty line");
    }
    let error = match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(line) {
        Ok(message) => return Incoming::Message(Box::new(message)),
        Err(error) => error,
    };
    if !line.starts_with(['{', '[']) {
        return Incoming::Skip("the server wrote a line that is not JSON-RPC to stdout; skipped");
    }
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(_) => {
            return Incoming::Fault(format!(
                "it sent a malformed JSON-RPC message ({error}): `{}`",
                excerpt(line)
            ));
        }
    };
    let answers_a_request = value.get("result").is_some() || value.get("error").is_some();
    let id = value
        .get("id")
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    match id {
        Some(id) if answers_a_request => {
            let error = ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("the server's answer is not a valid JSON-RPC response ({error})"),
                None,
            );
            Incoming::Message(Box::new(JsonRpcMessage::Error(JsonRpcError::new(
                Some(id),
                error,
            ))))
        }
        _ => Incoming::Skip("the server sent a message this client does not understand; skipped"),
    }
}

/// The start of a line, for messages.
fn excerpt(line: &str) -> &str {
    match line.char_indices().nth(EXCERPT) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stray_output_is_skipped_and_broken_messages_are_told_apart() {
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            Incoming::Message(_)
        ));
        assert!(matches!(
            classify("Secure MCP Filesystem Server running on stdio"),
            Incoming::Skip(_)
        ));
        match classify(r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text""#) {
            Incoming::Fault(fault) => assert!(fault.contains("malformed JSON-RPC"), "{fault}"),
            _ => panic!("a truncated message is a fault"),
        }
        match classify(r#"{"jsonrpc":"1.0","id":7,"result":{}}"#) {
            Incoming::Message(message) if matches!(*message, JsonRpcMessage::Error(_)) => {
                let JsonRpcMessage::Error(error) = *message else {
                    unreachable!()
                };
                assert_eq!(error.id, Some(RequestId::Number(7)));
                assert!(
                    error
                        .error
                        .message
                        .contains("not a valid JSON-RPC response")
                );
            }
            _ => panic!("an invalid answer to request 7 fails request 7"),
        }
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","method":"vendor/ping","params":3}"#),
            Incoming::Skip(_)
        ));
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        let tail = Tail::default();
        for n in 0..2000 {
            tail.push(format!("line {n}\n").as_bytes());
        }
        let text = tail.text(40);
        assert!(text.starts_with("line 19"), "{text}");
        assert!(text.ends_with("line 1999\n"));
        assert!(tail.text(STDERR_KEPT).len() <= STDERR_KEPT);
    }
}
