//! Tool sources: tools that live outside the process and can change while a harness runs (an
//! MCP server's tools).
//!
//! A kernel asks each of its [`ToolSource`]s for its tools before every step and offers them
//! next to its own. A source answers with an `Arc<ToolRegistry>` and hands back the same `Arc`
//! while nothing changed, so an unchanged step costs a pointer comparison; the kernel rebuilds
//! its tool set only when a pointer differs. Connecting, listing and reconnecting are the
//! source's business: the kernel never waits on a source for anything but its list.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures_util::future::join_all;
use harness_tags::Pipeline;
use tokio_util::sync::CancellationToken;

use super::ToolRegistry;

/// What a source is asked for its tools with.
#[derive(Clone, Copy, Debug)]
pub struct ToolSourceCtx<'a> {
    /// The pipeline of the asking kernel: a source emits its own tags through it (the MCP
    /// client emits `mcp.tools-listed`) and finds the harness there
    /// ([`HarnessServices`](crate::harness::HarnessServices)) to tell the user about failures.
    pub pipeline: &'a Pipeline,
    /// The asking run's abort signal: a source that is connecting gives up when it fires.
    pub abort: &'a CancellationToken,
}

/// Tools that come from outside the kernel and may change between steps.
#[async_trait]
pub trait ToolSource: Send + Sync + 'static {
    /// A short name for messages (an MCP server's name).
    fn name(&self) -> &str;

    /// The tools to offer from now on, asked before every step of a run. Return the same `Arc`
    /// while nothing changed. This never fails: a source that cannot reach its tools returns
    /// what it had (or an empty registry) and reports the problem itself.
    async fn tools(&self, ctx: ToolSourceCtx<'_>) -> Arc<ToolRegistry>;
}

/// A kernel's tool sources and the tool set it last built from them.
#[derive(Default)]
pub(crate) struct ToolSources {
    sources: Vec<Arc<dyn ToolSource>>,
    merged: Mutex<Option<Merged>>,
}

struct Merged {
    /// The source lists the tool set was built from, in source order.
    from: Vec<Arc<ToolRegistry>>,
    generation: u64,
    tools: ToolRegistry,
}

impl ToolSources {
    pub(crate) fn new(sources: Vec<Arc<dyn ToolSource>>) -> Self {
        ToolSources {
            sources,
            merged: Mutex::new(None),
        }
    }

    /// The permission category of a tool the sources offered in the last tool set built.
    pub(crate) fn category(&self, tool_name: &str) -> Option<harness_tags::ToolCategory> {
        let merged = self.merged.lock().unwrap_or_else(PoisonError::into_inner);
        let tool = merged.as_ref()?.tools.get(tool_name)?;
        Some(tool.tool.category())
    }

    /// The kernel's own tools with every source's current tools, when that set is not the
    /// one of generation `seen` (0: none seen yet); `None` when nothing changed or there are
    /// no sources. A source tool whose name is taken is skipped with a warning.
    pub(crate) async fn changed(
        &self,
        own: &ToolRegistry,
        seen: u64,
        ctx: ToolSourceCtx<'_>,
    ) -> Option<(u64, ToolRegistry)> {
        if self.sources.is_empty() {
            return None;
        }
        let lists = join_all(self.sources.iter().map(|source| source.tools(ctx))).await;
        let mut merged = self.merged.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(current) = merged.as_ref()
            && current.from.len() == lists.len()
            && current
                .from
                .iter()
                .zip(&lists)
                .all(|(a, b)| Arc::ptr_eq(a, b))
        {
            return (current.generation != seen)
                .then(|| (current.generation, current.tools.clone()));
        }
        let mut tools = own.clone();
        for (source, list) in self.sources.iter().zip(&lists) {
            for taken in tools.absorb(list) {
                tracing::warn!(
                    source = source.name(),
                    tool = %taken,
                    "a tool source offers a tool whose name is already taken; it is not offered"
                );
            }
        }
        let generation = merged.as_ref().map_or(1, |m| m.generation + 1);
        *merged = Some(Merged {
            from: lists,
            generation,
            tools: tools.clone(),
        });
        Some((generation, tools))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{ToolContext, ToolError, tool_fn};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct NoArgs {}

    fn registry(names: &[&str]) -> Arc<ToolRegistry> {
        let mut tools = ToolRegistry::new();
        for name in names {
            tools
                .register(tool_fn(
                    *name,
                    "A tool.",
                    |_: NoArgs, _: ToolContext| async { Ok::<_, ToolError>("") },
                ))
                .unwrap();
        }
        Arc::new(tools)
    }

    struct Fixed(Mutex<Arc<ToolRegistry>>);

    #[async_trait]
    impl ToolSource for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }

        async fn tools(&self, _ctx: ToolSourceCtx<'_>) -> Arc<ToolRegistry> {
            Arc::clone(&self.0.lock().unwrap())
        }
    }

    #[tokio::test]
    async fn the_set_is_rebuilt_only_when_a_source_hands_back_another_list() {
        let source = Arc::new(Fixed(Mutex::new(registry(&["remote_a", "own"]))));
        let sources = ToolSources::new(vec![source.clone() as Arc<dyn ToolSource>]);
        let own = registry(&["own"]);
        let pipeline = Pipeline::default();
        let abort = CancellationToken::new();
        let ctx = ToolSourceCtx {
            pipeline: &pipeline,
            abort: &abort,
        };

        let (first, tools) = sources.changed(&own, 0, ctx).await.unwrap();
        // The source's `own` collides with the kernel's and is skipped.
        assert_eq!(tools.names().collect::<Vec<_>>(), ["own", "remote_a"]);
        assert_eq!(tools.specs().len(), 2);
        assert!(sources.changed(&own, first, ctx).await.is_none());

        *source.0.lock().unwrap() = registry(&["remote_b"]);
        let (second, tools) = sources.changed(&own, first, ctx).await.unwrap();
        assert_ne!(first, second);
        assert_eq!(tools.names().collect::<Vec<_>>(), ["own", "remote_b"]);
        assert!(tools.get("remote_b").is_some());
        assert_eq!(
            sources.category("remote_b"),
            Some(harness_tags::ToolCategory::Other)
        );
        assert_eq!(sources.category("remote_a"), None);
        assert!(ToolSources::default().changed(&own, 0, ctx).await.is_none());
    }
}
