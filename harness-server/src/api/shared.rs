//! What the session and execution handlers share.

use harness_store::ThreadRecord;

use crate::error::ApiError;
use crate::host::{ExecutionRecord, Live};
use crate::state::Shared;

/// The session's thread, or `404`.
pub(crate) async fn thread(state: &Shared, session_id: &str) -> Result<ThreadRecord, ApiError> {
    state
        .host
        .store()
        .thread(session_id)
        .await?
        .filter(|thread| thread.resource_id == state.host.resource_id())
        .ok_or_else(|| ApiError::not_found("session", session_id))
}

/// Refuses what a session or an execution cannot be given here.
pub(crate) fn unsupported(
    agent_id: Option<&str>,
    skills: Option<&[String]>,
    system_prompt: Option<&str>,
) -> Result<(), ApiError> {
    if let Some(agent) = agent_id {
        return Err(ApiError::not_found("agent", agent));
    }
    if skills.is_some_and(|skills| !skills.is_empty()) {
        return Err(ApiError::invalid_field(
            "skills",
            "skills are not provided by this server",
        ));
    }
    if system_prompt.is_some() {
        return Err(ApiError::invalid_field(
            "system_prompt",
            "a system prompt per session is not supported; the harness's instructions apply",
        ));
    }
    Ok(())
}

/// A new execution id.
pub(crate) fn new_execution_id() -> String {
    format!("exec_{}", harness_core::harness::default_id())
}

/// Waits until a live execution is over, and returns its final record.
pub(crate) async fn wait_finished(live: &Live) -> ExecutionRecord {
    wait_for(live, |record| record.status.is_finished()).await
}

/// Waits until a live execution is over or waits for input.
pub(crate) async fn wait_settled(live: &Live) -> ExecutionRecord {
    wait_for(live, |record| {
        record.status.is_finished() || record.awaiting_input.is_some()
    })
    .await
}

async fn wait_for(live: &Live, settled: impl Fn(&ExecutionRecord) -> bool) -> ExecutionRecord {
    let mut changes = live.watch();
    loop {
        let record = live.record();
        if settled(&record) || changes.changed().await.is_err() {
            return live.record();
        }
    }
}
