//! Agents as stored profiles (a system prompt, a model, tool allow and deny lists) and their
//! memory blocks, kept in the store; a session created for an agent runs with its profile.
//!
//! A session's harness reads its agent on every model call: the agent's system prompt and its
//! memory blocks (as `<memory_blocks>`) follow the harness's own instructions, the tools offered
//! are those the lists let through, and a call of another tool is refused at the gate. An edit
//! of the agent or a block reaches the next model call.
//!
//! A subagent is spawned by an agent and runs tasks in a session of its own: its sessions see
//! its system prompt (its parent's when it has none), its model (or its parent's), and its
//! parent's tool lists and memory blocks, read on every call like an agent's.

use std::sync::Arc;

use harness_core::harness::HarnessBuilder;
use harness_store::{Store, WriteOp};
use harness_tags::tags::{PromptSystem, ToolGateResult, ToolSchema};
use harness_tags::{BaseCtx, GateDecision, GateVerdict, ToolCallCtx, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::ApiError;

const AGENTS: &str = "harness-server.agents";
const BLOCKS: &str = "harness-server.memory";
const SESSION_AGENTS: &str = "harness-server.session-agents";
const SUBAGENTS: &str = "harness-server.subagents";
const ARCHIVE: &str = "harness-server.archive";

/// Which tools an agent may use: `*` in a pattern matches any run of characters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolsAccess {
    /// Only these (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Never these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

impl ToolsAccess {
    /// Whether `tool` may be used.
    pub fn permits(&self, tool: &str) -> bool {
        let matches = |patterns: &Option<Vec<String>>| {
            patterns.iter().flatten().any(|pattern| glob(pattern, tool))
        };
        (self.allow.is_none() || matches(&self.allow)) && !matches(&self.deny)
    }
}

/// An agent's configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The model its sessions start with, `provider/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[A-Za-z0-9._-]+/[A-Za-z0-9._:/@+-]+$")]
    pub model: Option<String>,
    /// Added to the harness's instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 100000)]
    pub system_prompt: Option<String>,
    /// Which tools it may use.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::error::object_only"
    )]
    pub tools_access: Option<ToolsAccess>,
}

/// An agent as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct AgentRecord {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) config: AgentConfig,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
}

/// A subagent as stored: what it runs with besides its parent's profile, and the session its
/// tasks run in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SubagentRecord {
    pub(crate) id: String,
    pub(crate) parent_agent_id: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) system_prompt: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) session_id: String,
    pub(crate) created_at: i64,
}

impl SubagentRecord {
    /// The profile its session runs with, over its parent's.
    pub(crate) fn profile(&self, parent: &AgentRecord) -> AgentRecord {
        AgentRecord {
            id: self.id.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            config: AgentConfig {
                model: self.model.clone().or_else(|| parent.config.model.clone()),
                system_prompt: self
                    .system_prompt
                    .clone()
                    .or_else(|| parent.config.system_prompt.clone()),
                tools_access: parent.config.tools_access.clone(),
            },
            created_at: self.created_at,
            updated_at: self.created_at,
        }
    }
}

/// A memory block: a labelled text every model call of the agent's sessions sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct BlockRecord {
    pub(crate) label: String,
    pub(crate) value: String,
    pub(crate) read_only: bool,
    pub(crate) updated_at: i64,
}

/// An entry of an agent's archival memory: a passage kept for search, not sent with every
/// model call. Its id is a hash of its content, so the same passage is kept once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ArchiveRecord {
    pub(crate) id: String,
    pub(crate) content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<serde_json::Map<String, Value>>,
    pub(crate) created_at: i64,
}

impl ArchiveRecord {
    /// The id of an entry of `content`.
    pub(crate) fn id_of(content: &str) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(content.as_bytes());
        let hex: String = digest
            .iter()
            .take(12)
            .map(|byte| format!("{byte:02x}"))
            .collect();
        format!("arc_{hex}")
    }
}

/// The agents and their memory, in the store.
#[derive(Debug)]
pub(crate) struct Agents {
    store: Arc<dyn Store>,
}

fn corrupt(what: &str, key: &str, error: &serde_json::Error) -> ApiError {
    ApiError::internal(format!("{what} `{key}` is corrupt: {error}"))
}

impl Agents {
    pub(crate) fn new(store: Arc<dyn Store>) -> Arc<Agents> {
        Arc::new(Agents { store })
    }

    async fn put(
        &self,
        namespace: &str,
        key: &str,
        value: Value,
        thread: Option<&str>,
    ) -> Result<(), ApiError> {
        Ok(self
            .store
            .write(vec![WriteOp::PutRecord {
                namespace: namespace.to_owned(),
                key: key.to_owned(),
                thread_id: thread.map(str::to_owned),
                value,
            }])
            .await?)
    }

    async fn remove(&self, namespace: &str, keys: Vec<String>) -> Result<(), ApiError> {
        let ops = keys
            .into_iter()
            .map(|key| WriteOp::DeleteRecord {
                namespace: namespace.to_owned(),
                key,
            })
            .collect();
        Ok(self.store.write(ops).await?)
    }

    /// Every agent, oldest first.
    pub(crate) async fn all(&self) -> Result<Vec<AgentRecord>, ApiError> {
        let mut agents = self
            .store
            .records(AGENTS, "")
            .await?
            .into_iter()
            .map(|record| {
                serde_json::from_value(record.value)
                    .map_err(|error| corrupt("agent", &record.key, &error))
            })
            .collect::<Result<Vec<AgentRecord>, _>>()?;
        agents.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(agents)
    }

    async fn agent_record(&self, id: &str) -> Result<Option<AgentRecord>, ApiError> {
        self.store
            .record(AGENTS, id)
            .await?
            .map(|record| {
                serde_json::from_value(record.value).map_err(|error| corrupt("agent", id, &error))
            })
            .transpose()
    }

    /// An agent, or `404`.
    pub(crate) async fn get(&self, id: &str) -> Result<AgentRecord, ApiError> {
        self.agent_record(id)
            .await?
            .ok_or_else(|| ApiError::not_found("agent", id))
    }

    /// Stores an agent.
    pub(crate) async fn save(&self, agent: &AgentRecord) -> Result<(), ApiError> {
        let value = serde_json::to_value(agent)
            .map_err(|error| ApiError::internal(format!("an agent did not serialize: {error}")))?;
        self.put(AGENTS, &agent.id, value, None).await
    }

    /// Deletes an agent, its memory blocks and archive, and its subagents' records (their sessions stay,
    /// with no tools: see [`Agents::access`]).
    pub(crate) async fn delete(&self, id: &str) -> Result<(), ApiError> {
        self.get(id).await?;
        let blocks = self
            .blocks(id)
            .await?
            .into_iter()
            .map(|block| block_key(id, &block.label))
            .collect();
        self.remove(BLOCKS, blocks).await?;
        let archive = self
            .archive(id)
            .await?
            .into_iter()
            .map(|entry| block_key(id, &entry.id))
            .collect();
        self.remove(ARCHIVE, archive).await?;
        let subagents = self
            .subagents(id)
            .await?
            .into_iter()
            .map(|subagent| subagent.id)
            .collect();
        self.remove(SUBAGENTS, subagents).await?;
        self.remove(AGENTS, vec![id.to_owned()]).await
    }

    /// The subagents `parent` spawned, oldest first.
    pub(crate) async fn subagents(&self, parent: &str) -> Result<Vec<SubagentRecord>, ApiError> {
        let mut subagents = Vec::new();
        for record in self.store.records(SUBAGENTS, "").await? {
            let subagent: SubagentRecord = serde_json::from_value(record.value)
                .map_err(|error| corrupt("subagent", &record.key, &error))?;
            if subagent.parent_agent_id == parent {
                subagents.push(subagent);
            }
        }
        subagents.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(subagents)
    }

    async fn subagent_record(&self, id: &str) -> Result<Option<SubagentRecord>, ApiError> {
        self.store
            .record(SUBAGENTS, id)
            .await?
            .map(|record| {
                serde_json::from_value(record.value)
                    .map_err(|error| corrupt("subagent", id, &error))
            })
            .transpose()
    }

    /// A subagent of `parent`, or `404`.
    pub(crate) async fn subagent(
        &self,
        parent: &str,
        id: &str,
    ) -> Result<SubagentRecord, ApiError> {
        self.get(parent).await?;
        self.subagent_record(id)
            .await?
            .filter(|subagent| subagent.parent_agent_id == parent)
            .ok_or_else(|| ApiError::not_found("subagent", id))
    }

    /// Stores a subagent.
    pub(crate) async fn save_subagent(&self, subagent: &SubagentRecord) -> Result<(), ApiError> {
        let value = serde_json::to_value(subagent).map_err(|error| {
            ApiError::internal(format!("a subagent did not serialize: {error}"))
        })?;
        self.put(SUBAGENTS, &subagent.id, value, None).await
    }

    /// Forgets a subagent.
    pub(crate) async fn delete_subagent(&self, id: &str) -> Result<(), ApiError> {
        self.remove(SUBAGENTS, vec![id.to_owned()]).await
    }

    /// What a session bound to `id` runs with, and whose memory blocks it sees: an agent's own
    /// profile, or a subagent's over its parent's.
    async fn profile(&self, id: &str) -> Result<(AgentRecord, String), ApiError> {
        if let Some(agent) = self.agent_record(id).await? {
            return Ok((agent, id.to_owned()));
        }
        let subagent = self
            .subagent_record(id)
            .await?
            .ok_or_else(|| ApiError::not_found("agent", id))?;
        let parent = self.get(&subagent.parent_agent_id).await?;
        Ok((subagent.profile(&parent), parent.id))
    }

    /// An agent's memory blocks, by label.
    pub(crate) async fn blocks(&self, agent: &str) -> Result<Vec<BlockRecord>, ApiError> {
        self.store
            .records(BLOCKS, &format!("{agent}/"))
            .await?
            .into_iter()
            .map(|record| {
                serde_json::from_value(record.value)
                    .map_err(|error| corrupt("memory block", &record.key, &error))
            })
            .collect()
    }

    /// A memory block, or `404`.
    pub(crate) async fn block(&self, agent: &str, label: &str) -> Result<BlockRecord, ApiError> {
        let key = block_key(agent, label);
        let record = self
            .store
            .record(BLOCKS, &key)
            .await?
            .ok_or_else(|| ApiError::not_found("memory block", label))?;
        serde_json::from_value(record.value).map_err(|error| corrupt("memory block", &key, &error))
    }

    /// Stores a memory block.
    pub(crate) async fn save_block(
        &self,
        agent: &str,
        block: &BlockRecord,
    ) -> Result<(), ApiError> {
        let value = serde_json::to_value(block).map_err(|error| {
            ApiError::internal(format!("a memory block did not serialize: {error}"))
        })?;
        self.put(BLOCKS, &block_key(agent, &block.label), value, None)
            .await
    }

    /// Deletes a memory block, or `404`.
    pub(crate) async fn delete_block(&self, agent: &str, label: &str) -> Result<(), ApiError> {
        self.block(agent, label).await?;
        self.remove(BLOCKS, vec![block_key(agent, label)]).await
    }

    /// An agent's archive, oldest first.
    pub(crate) async fn archive(&self, agent: &str) -> Result<Vec<ArchiveRecord>, ApiError> {
        let mut entries = self
            .store
            .records(ARCHIVE, &format!("{agent}/"))
            .await?
            .into_iter()
            .map(|record| {
                serde_json::from_value(record.value)
                    .map_err(|error| corrupt("archive entry", &record.key, &error))
            })
            .collect::<Result<Vec<ArchiveRecord>, _>>()?;
        entries.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(entries)
    }

    /// Keeps an entry in an agent's archive; false if the same content was kept already.
    pub(crate) async fn add_to_archive(
        &self,
        agent: &str,
        entry: &ArchiveRecord,
    ) -> Result<bool, ApiError> {
        let key = block_key(agent, &entry.id);
        if self.store.record(ARCHIVE, &key).await?.is_some() {
            return Ok(false);
        }
        let value = serde_json::to_value(entry).map_err(|error| {
            ApiError::internal(format!("an archive entry did not serialize: {error}"))
        })?;
        self.put(ARCHIVE, &key, value, None).await?;
        Ok(true)
    }

    /// Binds a session to an agent (the binding goes with the session's thread).
    pub(crate) async fn bind(&self, session: &str, agent: &str) -> Result<(), ApiError> {
        self.put(
            SESSION_AGENTS,
            session,
            Value::String(agent.to_owned()),
            Some(session),
        )
        .await
    }

    /// The agent a session runs as, if any.
    pub(crate) async fn bound(&self, session: &str) -> Result<Option<String>, ApiError> {
        Ok(self
            .store
            .record(SESSION_AGENTS, session)
            .await?
            .and_then(|record| record.value.as_str().map(str::to_owned)))
    }

    /// Runs a session's harness as `agent`: see the [module docs](self).
    pub(crate) fn apply(
        self: &Arc<Self>,
        agent: String,
        builder: HarnessBuilder,
    ) -> HarnessBuilder {
        let prompts = (Arc::clone(self), agent.clone());
        let offers = (Arc::clone(self), agent.clone());
        let gate = (Arc::clone(self), agent);
        builder.compose(move |c| {
            c.on_async(PromptSystem, move |prompt: String, _: BaseCtx| {
                let (agents, agent) = prompts.clone();
                async move { agents.system_prompt(&agent, prompt).await }
            })
            .on_async(ToolSchema, move |tools: Arc<[ToolSpec]>, _: BaseCtx| {
                let (agents, agent) = offers.clone();
                async move {
                    let access = agents.access(&agent).await;
                    if tools.iter().all(|tool| access.permits(&tool.name)) {
                        return tools;
                    }
                    tools
                        .iter()
                        .filter(|tool| access.permits(&tool.name))
                        .cloned()
                        .collect()
                }
            })
            .on_async(
                ToolGateResult,
                move |verdict: GateVerdict, ctx: ToolCallCtx| {
                    let (agents, agent) = gate.clone();
                    async move {
                        if verdict.decision == GateDecision::Deny
                            || agents.access(&agent).await.permits(&ctx.tool_name)
                        {
                            return verdict;
                        }
                        GateVerdict::deny(format!(
                            "the agent `{agent}` may not use `{}`",
                            ctx.tool_name
                        ))
                    }
                },
            )
        })
    }

    /// The tools `agent` may use (none if it cannot be read: a profile that fails to load
    /// must not widen what runs).
    async fn access(&self, agent: &str) -> ToolsAccess {
        match self.profile(agent).await {
            Ok((record, _)) => record.config.tools_access.unwrap_or_default(),
            Err(error) => {
                tracing::warn!(agent, error = error.message(), "reading an agent failed");
                ToolsAccess {
                    allow: Some(Vec::new()),
                    deny: None,
                }
            }
        }
    }

    /// The harness's prompt, then the agent's, then its memory blocks.
    async fn system_prompt(&self, agent: &str, mut prompt: String) -> String {
        let memory_of = match self.profile(agent).await {
            Ok((record, memory_of)) => {
                if let Some(own) = record.config.system_prompt.filter(|own| !own.is_empty()) {
                    prompt.push_str("\n\n");
                    prompt.push_str(&own);
                }
                memory_of
            }
            Err(error) => {
                tracing::warn!(agent, error = error.message(), "reading an agent failed");
                agent.to_owned()
            }
        };
        let blocks = match self.blocks(&memory_of).await {
            Ok(blocks) => blocks,
            Err(error) => {
                tracing::warn!(
                    agent,
                    error = error.message(),
                    "reading memory blocks failed"
                );
                Vec::new()
            }
        };
        if !blocks.is_empty() {
            prompt.push_str("\n\n<memory_blocks>");
            for block in blocks {
                prompt.push_str(&format!(
                    "\n<{label}>\n{value}\n</{label}>",
                    label = block.label,
                    value = block.value
                ));
            }
            prompt.push_str("\n</memory_blocks>");
        }
        prompt
    }
}

fn block_key(agent: &str, label: &str) -> String {
    format!("{agent}/{label}")
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return text.is_empty();
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::{ToolsAccess, glob};

    #[test]
    fn globs_match_runs_of_characters() {
        assert!(glob("read_file", "read_file"));
        assert!(!glob("read_file", "read_files"));
        assert!(glob("read_*", "read_file"));
        assert!(glob("*_file", "write_file"));
        assert!(glob("mcp__*__search", "mcp__github__search"));
        assert!(!glob("mcp__*__search", "mcp__github__list"));
        assert!(glob("*", ""));
        assert!(!glob("a*b", "ab_"));
        assert!(glob("a*b*c", "abbc"));
    }

    #[test]
    fn deny_wins_over_allow() {
        let access = ToolsAccess {
            allow: Some(vec!["read_*".into(), "grep".into()]),
            deny: Some(vec!["read_secrets".into()]),
        };
        assert!(access.permits("read_file"));
        assert!(access.permits("grep"));
        assert!(!access.permits("read_secrets"));
        assert!(!access.permits("shell"));
        assert!(ToolsAccess::default().permits("shell"));
    }
}
