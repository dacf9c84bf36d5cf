//! The MCP servers every session shares: those of the configuration
//! ([`ServerConfig::mcp_servers`](crate::ServerConfig::mcp_servers)) and those connected over
//! the API (streamable HTTP only, kept in the store). One client each, whatever the number of
//! sessions: a stdio server runs once, not once per session. Every session offers the
//! servers' tools from its next step; a server starts when a run or a route first needs it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use harness_core::tool::{ToolRegistry, ToolSource, ToolSourceCtx};
use harness_mcp::{McpClient, McpServer, McpStatus};
use harness_store::{Store, WriteOp};
use harness_tags::Pipeline;
use harness_tags::util::{lock, unix_ms};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

const MCP_SERVERS: &str = "harness-server.mcp-servers";

/// A server connected over the API, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ConnectedServer {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) created_at: i64,
}

/// A server and its client.
#[derive(Clone, Debug)]
pub(crate) struct McpEntry {
    /// Its name for a configured server; `mcp_...` for one connected over the API.
    pub(crate) id: String,
    pub(crate) client: McpClient,
    /// From the configuration: not changed or removed over the API.
    pub(crate) configured: bool,
}

/// The merged tools of every server, and the registries they were merged from.
type Merged = (Vec<Arc<ToolRegistry>>, Arc<ToolRegistry>);

/// The shared servers.
pub(crate) struct McpServers {
    store: Arc<dyn Store>,
    /// The pipeline servers are started with when a route, not a run, starts them.
    pipeline: Pipeline,
    entries: Mutex<Vec<McpEntry>>,
    merged: Mutex<Option<Merged>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &lock(&self.entries).len())
            .finish_non_exhaustive()
    }
}

impl McpServers {
    /// The configured servers and those connected over the API before.
    pub(crate) async fn new(
        store: Arc<dyn Store>,
        pipeline: Pipeline,
        configured: Vec<McpServer>,
    ) -> Result<Arc<McpServers>, ApiError> {
        let mut entries: Vec<McpEntry> = configured
            .into_iter()
            .map(|server| McpEntry {
                id: server.name().to_owned(),
                client: McpClient::new(server),
                configured: true,
            })
            .collect();
        let mut connected = Vec::new();
        for record in store.records(MCP_SERVERS, "").await? {
            let server: ConnectedServer =
                serde_json::from_value(record.value).map_err(|error| {
                    ApiError::internal(format!("MCP server `{}` is corrupt: {error}", record.key))
                })?;
            connected.push(server);
        }
        connected.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        for server in connected {
            if entries
                .iter()
                .any(|entry| entry.client.name() == server.name)
            {
                tracing::warn!(
                    server = %server.name,
                    "an MCP server connected over the API has the name of a configured one; \
                     it is not started"
                );
                continue;
            }
            entries.push(McpEntry {
                id: server.id,
                client: McpClient::new(McpServer::http(server.name, server.url)),
                configured: false,
            });
        }
        Ok(Arc::new(McpServers {
            store,
            pipeline,
            entries: Mutex::new(entries),
            merged: Mutex::new(None),
        }))
    }

    /// Every server: the configured ones, then the connected ones, oldest first.
    pub(crate) fn all(&self) -> Vec<McpEntry> {
        lock(&self.entries).clone()
    }

    /// A server, or `404`.
    pub(crate) fn get(&self, id: &str) -> Result<McpEntry, ApiError> {
        lock(&self.entries)
            .iter()
            .find(|entry| entry.id == id)
            .cloned()
            .ok_or_else(|| ApiError::not_found("MCP server", id))
    }

    /// Checks a server a client describes: a valid name not taken by another server.
    fn check(&self, server: &McpServer, replacing: Option<&str>) -> Result<(), ApiError> {
        server.validate().map_err(|error| {
            let field = match error {
                harness_mcp::McpConfigError::InvalidName(_) => "name",
                _ => "transport.url",
            };
            ApiError::invalid_field(field, error.to_string())
        })?;
        let taken = lock(&self.entries).iter().any(|entry| {
            entry.client.name() == server.name() && Some(entry.id.as_str()) != replacing
        });
        if taken {
            return Err(ApiError::conflict(format!(
                "an MCP server named `{}` is connected already",
                server.name()
            )));
        }
        Ok(())
    }

    /// Connects a streamable HTTP server (it starts when first needed) and keeps it.
    pub(crate) async fn connect(&self, name: String, url: String) -> Result<McpEntry, ApiError> {
        let server = McpServer::http(name.clone(), url.clone());
        self.check(&server, None)?;
        let record = ConnectedServer {
            id: format!("mcp_{}", harness_core::harness::default_id()),
            name,
            url,
            created_at: unix_ms(),
        };
        self.save(&record).await?;
        let entry = McpEntry {
            id: record.id,
            client: McpClient::new(server),
            configured: false,
        };
        lock(&self.entries).push(entry.clone());
        Ok(entry)
    }

    /// Renames a connected server or points it elsewhere: its client is replaced (the old
    /// one stops), so sessions offer the new tools from their next step.
    pub(crate) async fn update(
        &self,
        id: &str,
        name: Option<String>,
        url: Option<String>,
    ) -> Result<McpEntry, ApiError> {
        let entry = self.connected(id)?;
        let current = entry.client.server();
        let name = name.unwrap_or_else(|| current.name().to_owned());
        let url = url
            .or_else(|| current.config().url.clone())
            .unwrap_or_default();
        let server = McpServer::http(name.clone(), url.clone());
        self.check(&server, Some(id))?;
        let record = ConnectedServer {
            id: id.to_owned(),
            name,
            url,
            created_at: self.stored(id).await?.created_at,
        };
        self.save(&record).await?;
        let replacement = McpEntry {
            id: id.to_owned(),
            client: McpClient::new(server),
            configured: false,
        };
        if let Some(slot) = lock(&self.entries).iter_mut().find(|entry| entry.id == id) {
            *slot = replacement.clone();
        }
        entry.client.shutdown().await;
        Ok(replacement)
    }

    /// Disconnects a connected server: it stops, and sessions stop offering its tools.
    pub(crate) async fn disconnect(&self, id: &str) -> Result<(), ApiError> {
        let entry = self.connected(id)?;
        self.store
            .write(vec![WriteOp::DeleteRecord {
                namespace: MCP_SERVERS.to_owned(),
                key: id.to_owned(),
            }])
            .await?;
        lock(&self.entries).retain(|entry| entry.id != id);
        entry.client.shutdown().await;
        Ok(())
    }

    /// Starts the server if it is not running and lists what it offers.
    pub(crate) async fn refresh(&self, entry: &McpEntry) -> Result<McpStatus, ApiError> {
        entry.client.connect(&self.pipeline).await.map_err(|error| {
            ApiError::unavailable(format!(
                "MCP server `{}` cannot be reached: {error}",
                entry.client.name()
            ))
        })
    }

    /// A server connected over the API, or `404`; a configured one is `409`.
    fn connected(&self, id: &str) -> Result<McpEntry, ApiError> {
        let entry = self.get(id)?;
        if entry.configured {
            return Err(ApiError::conflict(format!(
                "MCP server `{id}` comes from the configuration; change it there"
            )));
        }
        Ok(entry)
    }

    async fn stored(&self, id: &str) -> Result<ConnectedServer, ApiError> {
        let record = self
            .store
            .record(MCP_SERVERS, id)
            .await?
            .ok_or_else(|| ApiError::not_found("MCP server", id))?;
        serde_json::from_value(record.value)
            .map_err(|error| ApiError::internal(format!("MCP server `{id}` is corrupt: {error}")))
    }

    async fn save(&self, server: &ConnectedServer) -> Result<(), ApiError> {
        let value = serde_json::to_value(server).map_err(|error| {
            ApiError::internal(format!("an MCP server did not serialize: {error}"))
        })?;
        Ok(self
            .store
            .write(vec![WriteOp::PutRecord {
                namespace: MCP_SERVERS.to_owned(),
                key: server.id.clone(),
                thread_id: None,
                value,
            }])
            .await?)
    }

    /// The tools of every server, merged; the same registry while no server's changed.
    async fn tools(&self, ctx: ToolSourceCtx<'_>) -> Arc<ToolRegistry> {
        let clients: Vec<McpClient> = self.all().into_iter().map(|entry| entry.client).collect();
        let lists =
            futures_util::future::join_all(clients.iter().map(|client| client.tools(ctx))).await;
        let mut merged = lock(&self.merged);
        if let Some((from, tools)) = merged.as_ref()
            && from.len() == lists.len()
            && from.iter().zip(&lists).all(|(a, b)| Arc::ptr_eq(a, b))
        {
            return Arc::clone(tools);
        }
        let mut tools = ToolRegistry::new();
        for (client, list) in clients.iter().zip(&lists) {
            for taken in tools.absorb(list) {
                tracing::warn!(
                    server = client.name(),
                    tool = %taken,
                    "an MCP server offers a tool whose name another server's has; it is not offered"
                );
            }
        }
        let tools = Arc::new(tools);
        *merged = Some((lists, Arc::clone(&tools)));
        tools
    }

    /// Stops every server (stdio ones are child processes).
    pub(crate) async fn shutdown(&self) {
        for entry in self.all() {
            entry.client.shutdown().await;
        }
    }
}

/// The source every session's harness asks.
#[derive(Debug)]
pub(crate) struct McpSource(pub(crate) Arc<McpServers>);

#[async_trait]
impl ToolSource for McpSource {
    fn name(&self) -> &str {
        "MCP servers"
    }

    async fn tools(&self, ctx: ToolSourceCtx<'_>) -> Arc<ToolRegistry> {
        self.0.tools(ctx).await
    }
}
