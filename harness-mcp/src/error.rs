//! What can go wrong with an MCP server, in words a model and a user can act on.

use std::fmt;
use std::time::Duration;

use crate::config::McpConfigError;

/// Why talking to an MCP server failed. The message is the tool error the model reads and
/// what the user is shown.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The configuration is wrong.
    #[error(transparent)]
    Config(#[from] McpConfigError),
    /// The server is configured with `enabled = false`.
    #[error("MCP server `{server}` is disabled in its configuration")]
    Disabled {
        /// The server.
        server: String,
    },
    /// The server could not be started, or did not finish its handshake.
    #[error(
        "MCP server `{server}` could not be started: {reason}.{}",
        StderrNote(stderr)
    )]
    Start {
        /// The server.
        server: String,
        /// What happened.
        reason: String,
        /// The end of what the server wrote to stderr.
        stderr: String,
    },
    /// The server stopped or the connection broke while a request was open.
    #[error(
        "MCP server `{server}` stopped while handling `{what}`: {reason}. It will be restarted \
         on the next call.{}",
        StderrNote(stderr)
    )]
    Stopped {
        /// The server.
        server: String,
        /// The request (the tool the model called).
        what: String,
        /// What happened.
        reason: String,
        /// The end of what the server wrote to stderr.
        stderr: String,
    },
    /// The server failed recently and is waiting out its backoff before the next start.
    #[error(
        "MCP server `{server}` is not available ({reason}); it will be started again in {}",
        Seconds(*.retry_in)
    )]
    Restarting {
        /// The server.
        server: String,
        /// Its last failure.
        reason: String,
        /// When the next start may happen.
        retry_in: Duration,
    },
    /// A request took longer than the server's timeout; the server was told to cancel it.
    #[error(
        "MCP server `{server}` did not answer `{what}` within {}; the request was cancelled. \
         The server keeps running: try again with less work, or raise `timeout_ms` in its \
         configuration",
        Seconds(*.timeout)
    )]
    Timeout {
        /// The server.
        server: String,
        /// The request.
        what: String,
        /// The server's timeout.
        timeout: Duration,
    },
    /// The run was aborted while a request was open; the server was told to cancel it.
    #[error("`{what}` was cancelled because the run was aborted")]
    Aborted {
        /// The request.
        what: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("MCP server `{server}` rejected `{what}`: {message} (JSON-RPC error {code})")]
    Rejected {
        /// The server.
        server: String,
        /// The request.
        what: String,
        /// The server's message.
        message: String,
        /// The JSON-RPC error code.
        code: i32,
    },
    /// The server answered something the protocol does not allow.
    #[error("MCP server `{server}` answered `{what}` with something MCP does not allow: {detail}")]
    Protocol {
        /// The server.
        server: String,
        /// The request.
        what: String,
        /// What was wrong.
        detail: String,
    },
    /// A result holds more text than the configuration lets through.
    #[error(
        "the result of `{what}` is {size} bytes, more than the {limit} bytes MCP server \
         `{server}` may return (`max_result_bytes`); ask for less, e.g. a narrower query or a \
         smaller range"
    )]
    TooLarge {
        /// The server.
        server: String,
        /// The request.
        what: String,
        /// The result's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The client was dropped or shut down.
    #[error("the MCP client of server `{server}` was shut down")]
    Closed {
        /// The server.
        server: String,
    },
}

/// `\nIts stderr ended with:\n...` when there is any.
struct StderrNote<'a>(&'a str);

impl fmt::Display for StderrNote<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail = self.0.trim();
        if tail.is_empty() {
            Ok(())
        } else {
            write!(f, "\nIts stderr ended with:\n{tail}")
        }
    }
}

/// A duration in seconds, with up to one decimal.
pub(crate) struct Seconds(pub(crate) Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.0.as_secs_f64();
        if seconds.fract() == 0.0 || seconds >= 10.0 {
            write!(f, "{} s", self.0.as_secs())
        } else {
            write!(f, "{seconds:.1} s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_the_servers_stderr_and_readable_durations() {
        let error = McpError::Start {
            server: "fs".into(),
            reason: "it exited with status 1".into(),
            stderr: "Error: ENOENT\n".into(),
        };
        assert_eq!(
            error.to_string(),
            "MCP server `fs` could not be started: it exited with status 1.\nIts stderr ended \
             with:\nError: ENOENT"
        );
        let error = McpError::Timeout {
            server: "fs".into(),
            what: "fs__read".into(),
            timeout: Duration::from_millis(1500),
        };
        assert!(error.to_string().contains("within 1.5 s"), "{error}");
        assert_eq!(Seconds(Duration::from_secs(60)).to_string(), "60 s");
    }
}
