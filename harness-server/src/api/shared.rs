//! What the session and execution handlers share.

use harness_core::harness::HarnessError;
use harness_store::ThreadRecord;

use crate::agents::AgentRecord;
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
    skills: Option<&[String]>,
    system_prompt: Option<&str>,
) -> Result<(), ApiError> {
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

/// The agent named by `agent_id`, or `404`.
pub(crate) async fn agent(
    state: &Shared,
    agent_id: Option<&str>,
) -> Result<Option<AgentRecord>, ApiError> {
    match agent_id {
        Some(id) => Ok(Some(state.host.agents().get(id).await?)),
        None => Ok(None),
    }
}

/// The key of a hook's or tool's signatures: the one given (16 to 256 characters), or 32
/// random bytes from the operating system, in hex.
pub(crate) fn signing_secret(given: Option<String>) -> Result<String, ApiError> {
    match given {
        Some(secret) if (16..=256).contains(&secret.chars().count()) => Ok(secret),
        Some(_) => Err(ApiError::invalid_field(
            "secret",
            "a secret is 16 to 256 characters",
        )),
        None => crate::random_secret()
            .map_err(|error| ApiError::internal(format!("no random bytes for a secret: {error}"))),
    }
}

/// Why a model named in a request cannot be used: `400` for an id that is not
/// `provider/name`, `422` for a well-formed one this harness cannot use (unknown, or without
/// its key).
pub(crate) fn model_refused(model: &str, error: HarnessError) -> ApiError {
    match error {
        HarnessError::ModelId(_) => ApiError::invalid_field("model", error.to_string()),
        other => {
            ApiError::unprocessable("model", format!("model `{model}` cannot be used: {other}"))
        }
    }
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
