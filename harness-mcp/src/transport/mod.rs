//! The transports a server is reached over: a child process's stdio, or streamable HTTP.

pub(crate) mod http;
pub(crate) mod stdio;
