//! The agents and memory groups: agents as stored profiles, and their memory blocks.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use harness_tags::util::{rfc3339, unix_ms};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::types::{Page, Pagination, check_length};
use crate::agents::{AgentConfig, AgentRecord, BlockRecord};
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::state::Shared;

const MAX_VALUE: usize = 100_000;

/// An agent, as the spec shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct Agent {
    id: String,
    name: String,
    #[serde(rename = "vendorKey")]
    vendor_key: String,
    #[serde(rename = "agentKey")]
    agent_key: String,
    version: String,
    slug: String,
    description: String,
    tags: Vec<String>,
    /// Skills are not provided: always empty.
    #[schema(value_type = Vec<Object>)]
    skills: Vec<serde_json::Value>,
    /// MCP servers per agent are not provided: always empty.
    #[schema(value_type = Vec<Object>)]
    mcp_servers: Vec<serde_json::Value>,
    config: AgentConfig,
    created_at: String,
    updated_at: String,
}

pub(crate) fn slug(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_owned()
}

impl From<AgentRecord> for Agent {
    fn from(record: AgentRecord) -> Self {
        let slug = slug(&record.name);
        Agent {
            id: record.id,
            name: record.name,
            vendor_key: "local".to_owned(),
            agent_key: slug.clone(),
            version: "1.0.0".to_owned(),
            slug,
            description: record.description,
            tags: Vec::new(),
            skills: Vec::new(),
            mcp_servers: Vec::new(),
            config: record.config,
            created_at: rfc3339(record.created_at),
            updated_at: rfc3339(record.updated_at),
        }
    }
}

/// `{ agent }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct AgentResponse {
    agent: Agent,
}

/// *Extension*: an agent created from JSON (the spec's multipart bundle is not taken).
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateAgentRequest {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    /// Up to 1000 characters.
    #[serde(default)]
    #[schema(max_length = 1000)]
    description: Option<String>,
    #[serde(default, deserialize_with = "crate::error::object_only")]
    config: Option<AgentConfig>,
}

/// Changes an agent.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UpdateAgentRequest {
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    #[schema(max_length = 1000)]
    description: Option<String>,
    /// Replaces the fields it names.
    #[serde(deserialize_with = "crate::error::object_only")]
    config: Option<AgentConfig>,
}

fn check_config(config: &AgentConfig) -> Result<(), ApiError> {
    if let Some(prompt) = &config.system_prompt
        && prompt.chars().count() > MAX_VALUE
    {
        return Err(ApiError::invalid_field(
            "config.system_prompt",
            "a system prompt is at most 100000 characters",
        ));
    }
    if let Some(model) = &config.model
        && harness_core::model::ModelId::new(model).is_err()
    {
        return Err(ApiError::invalid_field(
            "config.model",
            format!("model id `{model}` is not `provider/name`"),
        ));
    }
    Ok(())
}

fn check_description(description: &str) -> Result<(), ApiError> {
    if description.chars().count() > 1000 {
        return Err(ApiError::invalid_field(
            "description",
            "a description is at most 1000 characters",
        ));
    }
    Ok(())
}

/// Lists the agents, oldest first.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/agents", tag = "agents",
    operation_id = "agents.list", params(("harnessId" = String, Path), Pagination),
    responses((status = 200, body = Page<Agent>), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiQuery(page): ApiQuery<Pagination>,
) -> Result<Json<Page<Agent>>, ApiError> {
    state.check_harness(&harness_id)?;
    let page = page.checked()?;
    let agents = state.host.agents().all().await?;
    Ok(Json(Page::of(
        agents.into_iter().map(Agent::from).collect(),
        page,
    )))
}

/// Creates an agent: a profile sessions run as.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/agents", tag = "agents",
    operation_id = "agents.create", params(("harnessId" = String, Path)),
    request_body = CreateAgentRequest,
    responses((status = 201, body = AgentResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn create(
    State(state): State<Shared>,
    Path(harness_id): Path<String>,
    ApiJson(request): ApiJson<CreateAgentRequest>,
) -> Result<(StatusCode, Json<AgentResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    check_length("name", &request.name, 100)?;
    let description = request.description.unwrap_or_default();
    check_description(&description)?;
    let config = request.config.unwrap_or_default();
    check_config(&config)?;
    let now = unix_ms();
    let record = AgentRecord {
        id: format!("agent_{}", harness_core::harness::default_id()),
        name: request.name,
        description,
        config,
        created_at: now,
        updated_at: now,
    };
    state.host.agents().save(&record).await?;
    Ok((
        StatusCode::CREATED,
        Json(AgentResponse {
            agent: record.into(),
        }),
    ))
}

/// An agent.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/agents/{agentId}", tag = "agents",
    operation_id = "agents.get", params(("harnessId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = AgentResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_agent(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
) -> Result<Json<AgentResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let record = state.host.agents().get(&agent_id).await?;
    Ok(Json(AgentResponse {
        agent: record.into(),
    }))
}

/// Changes an agent; its sessions see the change on their next model call.
#[utoipa::path(patch, path = "/v1/harnesses/{harnessId}/agents/{agentId}", tag = "agents",
    operation_id = "agents.update",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    request_body = UpdateAgentRequest,
    responses((status = 200, body = AgentResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn update(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<UpdateAgentRequest>,
) -> Result<Json<AgentResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let mut record = state.host.agents().get(&agent_id).await?;
    if let Some(name) = request.name {
        check_length("name", &name, 100)?;
        record.name = name;
    }
    if let Some(description) = request.description {
        check_description(&description)?;
        record.description = description;
    }
    if let Some(config) = request.config {
        check_config(&config)?;
        if config.model.is_some() {
            record.config.model = config.model;
        }
        if config.system_prompt.is_some() {
            record.config.system_prompt = config.system_prompt;
        }
        if config.tools_access.is_some() {
            record.config.tools_access = config.tools_access;
        }
    }
    record.updated_at = unix_ms();
    state.host.agents().save(&record).await?;
    Ok(Json(AgentResponse {
        agent: record.into(),
    }))
}

/// Deletes an agent and its memory blocks.
#[utoipa::path(delete, path = "/v1/harnesses/{harnessId}/agents/{agentId}", tag = "agents",
    operation_id = "agents.delete",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn delete(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    state.check_harness(&harness_id)?;
    state.host.agents().delete(&agent_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A memory block.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct MemoryBlock {
    label: String,
    value: String,
    read_only: bool,
    updated_at: String,
}

impl From<BlockRecord> for MemoryBlock {
    fn from(block: BlockRecord) -> Self {
        MemoryBlock {
            label: block.label,
            value: block.value,
            read_only: block.read_only,
            updated_at: rfc3339(block.updated_at),
        }
    }
}

/// An agent's memory.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct MemoryState {
    agent_id: String,
    blocks: Vec<MemoryBlock>,
    /// How many entries its archive keeps.
    archive_size: u64,
}

/// `{ memory }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct MemoryResponse {
    memory: MemoryState,
}

/// `{ blocks }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct BlockList {
    blocks: Vec<MemoryBlock>,
}

/// `{ block }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct BlockResponse {
    block: MemoryBlock,
}

/// Creates a memory block.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBlockRequest {
    /// 1-100 characters, kebab-case.
    #[schema(min_length = 1, max_length = 100, pattern = "^[a-z0-9]+(-[a-z0-9]+)*$")]
    label: String,
    /// 1-100000 characters.
    #[schema(min_length = 1, max_length = 100000)]
    value: String,
    /// Default false: read-only blocks cannot be changed over the API.
    #[serde(default)]
    read_only: Option<bool>,
}

/// Replaces a memory block's value.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateBlockRequest {
    /// 1-100000 characters.
    #[schema(min_length = 1, max_length = 100000)]
    value: String,
}

pub(crate) fn check_label(label: &str) -> Result<(), ApiError> {
    check_length("label", label, 100)?;
    let kebab = label.split('-').all(|part| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    if !kebab {
        return Err(ApiError::invalid_field(
            "label",
            format!("a label is kebab-case (`human`, `project-notes`), not `{label}`"),
        ));
    }
    Ok(())
}

async fn blocks(state: &Shared, agent_id: &str) -> Result<Vec<MemoryBlock>, ApiError> {
    state.host.agents().get(agent_id).await?;
    Ok(state
        .host
        .agents()
        .blocks(agent_id)
        .await?
        .into_iter()
        .map(MemoryBlock::from)
        .collect())
}

/// An agent's memory: its blocks.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory", tag = "memory",
    operation_id = "memory.get", params(("harnessId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = MemoryResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn memory(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
) -> Result<Json<MemoryResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let blocks = blocks(&state, &agent_id).await?;
    let archive_size = state.host.agents().archive(&agent_id).await?.len() as u64;
    Ok(Json(MemoryResponse {
        memory: MemoryState {
            agent_id,
            blocks,
            archive_size,
        },
    }))
}

/// An agent's memory blocks, by label.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/blocks",
    tag = "memory", operation_id = "memory.listBlocks",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    responses((status = 200, body = BlockList), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn list_blocks(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
) -> Result<Json<BlockList>, ApiError> {
    state.check_harness(&harness_id)?;
    Ok(Json(BlockList {
        blocks: blocks(&state, &agent_id).await?,
    }))
}

/// A memory block.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/blocks/{label}",
    tag = "memory", operation_id = "memory.getBlock",
    params(("harnessId" = String, Path), ("agentId" = String, Path), ("label" = String, Path)),
    responses((status = 200, body = BlockResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn get_block(
    State(state): State<Shared>,
    Path((harness_id, agent_id, label)): Path<(String, String, String)>,
) -> Result<Json<BlockResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    state.host.agents().get(&agent_id).await?;
    let block = state.host.agents().block(&agent_id, &label).await?;
    Ok(Json(BlockResponse {
        block: block.into(),
    }))
}

/// Creates a memory block; `409` if the label is taken.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/blocks",
    tag = "memory", operation_id = "memory.createBlock",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    request_body = CreateBlockRequest,
    responses((status = 201, body = BlockResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse)))]
pub(crate) async fn create_block(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<CreateBlockRequest>,
) -> Result<(StatusCode, Json<BlockResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    check_label(&request.label)?;
    check_length("value", &request.value, MAX_VALUE)?;
    let agents = state.host.agents();
    agents.get(&agent_id).await?;
    if agents.block(&agent_id, &request.label).await.is_ok() {
        return Err(ApiError::conflict(format!(
            "agent `{agent_id}` has a block `{}` already; PUT it to change it",
            request.label
        )));
    }
    let block = BlockRecord {
        label: request.label,
        value: request.value,
        read_only: request.read_only.unwrap_or(false),
        updated_at: unix_ms(),
    };
    agents.save_block(&agent_id, &block).await?;
    Ok((
        StatusCode::CREATED,
        Json(BlockResponse {
            block: block.into(),
        }),
    ))
}

/// Replaces a memory block's value; `409` if it is read-only.
#[utoipa::path(put, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/blocks/{label}",
    tag = "memory", operation_id = "memory.updateBlock",
    params(("harnessId" = String, Path), ("agentId" = String, Path), ("label" = String, Path)),
    request_body = UpdateBlockRequest,
    responses((status = 200, body = BlockResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse)))]
pub(crate) async fn update_block(
    State(state): State<Shared>,
    Path((harness_id, agent_id, label)): Path<(String, String, String)>,
    ApiJson(request): ApiJson<UpdateBlockRequest>,
) -> Result<Json<BlockResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    check_length("value", &request.value, MAX_VALUE)?;
    let agents = state.host.agents();
    agents.get(&agent_id).await?;
    let mut block = agents.block(&agent_id, &label).await?;
    if block.read_only {
        return Err(ApiError::conflict(format!("block `{label}` is read-only")));
    }
    block.value = request.value;
    block.updated_at = unix_ms();
    agents.save_block(&agent_id, &block).await?;
    Ok(Json(BlockResponse {
        block: block.into(),
    }))
}

/// Deletes a memory block.
#[utoipa::path(delete, path = "/v1/harnesses/{harnessId}/agents/{agentId}/memory/blocks/{label}",
    tag = "memory", operation_id = "memory.deleteBlock",
    params(("harnessId" = String, Path), ("agentId" = String, Path), ("label" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn delete_block(
    State(state): State<Shared>,
    Path((harness_id, agent_id, label)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    state.check_harness(&harness_id)?;
    state.host.agents().get(&agent_id).await?;
    state.host.agents().delete_block(&agent_id, &label).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Copies an agent.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CloneAgentRequest {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100)]
    new_name: String,
    /// Copy its memory blocks and archive too (default false).
    #[serde(default)]
    include_memory: Option<bool>,
}

/// A new agent with the profile of another (its system prompt, model and tool lists), and
/// its memory with `include_memory`.
#[utoipa::path(post, path = "/v1/harnesses/{harnessId}/agents/{agentId}/clone", tag = "agents",
    operation_id = "agents.clone",
    params(("harnessId" = String, Path), ("agentId" = String, Path)),
    request_body = CloneAgentRequest,
    responses((status = 201, body = AgentResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 413, body = ErrorResponse), (status = 415, body = ErrorResponse)))]
pub(crate) async fn clone_agent(
    State(state): State<Shared>,
    Path((harness_id, agent_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<CloneAgentRequest>,
) -> Result<(StatusCode, Json<AgentResponse>), ApiError> {
    state.check_harness(&harness_id)?;
    check_length("new_name", &request.new_name, 100)?;
    let agents = state.host.agents();
    let source = agents.get(&agent_id).await?;
    let now = unix_ms();
    let copy = AgentRecord {
        id: format!("agent_{}", harness_core::harness::default_id()),
        name: request.new_name,
        description: source.description,
        config: source.config,
        created_at: now,
        updated_at: now,
    };
    agents.save(&copy).await?;
    if request.include_memory.unwrap_or(false) {
        for block in agents.blocks(&agent_id).await? {
            agents.save_block(&copy.id, &block).await?;
        }
        for entry in agents.archive(&agent_id).await? {
            agents.add_to_archive(&copy.id, &entry).await?;
        }
    }
    Ok((
        StatusCode::CREATED,
        Json(AgentResponse { agent: copy.into() }),
    ))
}
