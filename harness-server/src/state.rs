//! What every handler shares: the configuration and the host of live sessions.

use std::sync::{Arc, OnceLock};

use crate::ServerConfig;
use crate::error::ApiError;
use crate::host::Host;

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: ServerConfig,
    pub(crate) host: Arc<Host>,
    /// When the server started, Unix milliseconds.
    pub(crate) started_at: i64,
    /// The OpenAPI document, made on first request.
    pub(crate) openapi: OnceLock<String>,
    /// The files the files routes serve, if the server has a workspace.
    pub(crate) workspace: Option<harness_workspace::Workspace>,
    /// Cancelled when the server shuts down: streams that would stay open end.
    pub(crate) closing: tokio_util::sync::CancellationToken,
}

impl State {
    /// `404` unless `harness_id` is the harness this server hosts.
    pub(crate) fn check_harness(&self, harness_id: &str) -> Result<(), ApiError> {
        if harness_id == self.config.harness_id {
            Ok(())
        } else {
            Err(ApiError::not_found("harness", harness_id))
        }
    }
}

/// The state as handlers take it.
pub(crate) type Shared = Arc<State>;
