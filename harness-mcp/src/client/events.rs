//! What a server tells the client unasked: its lists changed, a call made progress.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use harness_core::tool::{ToolContext, ToolProgress};
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, JsonRpcMessage, ProgressNotificationParam,
    ProgressToken, ServerNotification,
};
use rmcp::service::{NotificationContext, RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::json;

/// The notifications of one server, shared by its sessions and its client.
pub(crate) struct Events {
    /// The server said its tools or resources changed since the last listing.
    stale: AtomicBool,
    /// The open calls that asked for progress, by progress token.
    progress: Mutex<HashMap<ProgressToken, ToolContext>>,
}

impl Events {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Events {
            stale: AtomicBool::new(false),
            progress: Mutex::new(HashMap::new()),
        })
    }

    /// True if the server's lists changed since the last call to [`Events::take_stale`].
    pub(crate) fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Acquire)
    }

    /// Clears the changed mark, returning it. Called before listing, so that a change the
    /// server announces while the listing runs leads to another listing.
    pub(crate) fn take_stale(&self) -> bool {
        self.stale.swap(false, Ordering::AcqRel)
    }

    /// Sends the progress of the request with `token` to the call's context until the guard
    /// is dropped.
    pub(crate) fn route_progress(
        self: &Arc<Self>,
        token: ProgressToken,
        ctx: ToolContext,
    ) -> ProgressRoute {
        self.progress_map().insert(token.clone(), ctx);
        ProgressRoute {
            events: Arc::clone(self),
            token,
        }
    }

    fn progress_map(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, ToolContext>> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The handler a session runs with.
    pub(crate) fn handler(self: &Arc<Self>) -> Handler {
        Handler(Arc::clone(self))
    }
}

/// Stops routing a call's progress when dropped.
pub(crate) struct ProgressRoute {
    events: Arc<Events>,
    token: ProgressToken,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.events.progress_map().remove(&self.token);
    }
}

/// rmcp's side of a session: what the client tells the server about itself and where progress
/// goes.
pub(crate) struct Handler(Arc<Events>);

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let ctx = self.0.progress_map().get(&params.progress_token).cloned();
        if let Some(ctx) = ctx {
            let mut partial = json!({ "progress": params.progress });
            if let Some(total) = params.total {
                partial["total"] = json!(total);
            }
            if let Some(message) = params.message {
                partial["message"] = json!(message);
            }
            ctx.progress(ToolProgress::Partial(partial));
        }
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("harness", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A transport that notes list changes as they arrive, in order with everything else the
/// server sends. rmcp hands notifications to a task of their own, which may run after the
/// answer that followed them on the wire; a step that starts right after that answer must
/// already know the server's tools changed.
pub(crate) struct Watched<T> {
    pub(crate) inner: T,
    pub(crate) events: Arc<Events>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(notification) = &message
            && matches!(
                notification.notification,
                ServerNotification::ToolListChangedNotification(_)
                    // The resource tool's description lists the resources.
                    | ServerNotification::ResourceListChangedNotification(_)
            )
        {
            self.events.stale.store(true, Ordering::Release);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
