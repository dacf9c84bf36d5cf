//! Hooks: webhooks the server calls when a tool is about to run (`pre_tool`, which may block
//! the call), after it ran (`post_tool`), when an execution ends (`stop`) and when one fails
//! (`error`).
//!
//! A delivery is a `POST` of `{"id", "event", "hook_id", "harness_id", "timestamp", "data"}`
//! with `X-OpenHarness-Signature: sha256=<hex HMAC-SHA256 of the body with the hook's
//! secret>`, `X-OpenHarness-Delivery: <id>` (the same on every retry, to drop duplicates) and
//! `X-OpenHarness-Event`. A connection failure, a `408`, `429` or `5xx` is retried with
//! backoff, four attempts in all. A `pre_tool` hook answers `{"decision": "block", "reason":
//! "..."}` to refuse the call (the model is told the reason); any other answer lets it run,
//! and a hook that cannot be reached refuses it: a check that did not happen is not a pass.
//!
//! URLs are `https`, or `http` to a loopback address when the server allows it
//! ([`ServerConfig::loopback_callbacks`](crate::ServerConfig::loopback_callbacks)).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use harness_core::harness::HarnessBuilder;
use harness_store::{Store, WriteOp};
use harness_tags::tags::{ToolCallTag, ToolGateResult};
use harness_tags::util::{lock, rfc3339, unix_ms};
use harness_tags::{GateDecision, GateVerdict, ToolCall, ToolCallCtx};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::journal::{EventSink, Journal, with_fields};

/// The store namespace of hooks.
const HOOKS: &str = "harness-server.hooks";

/// Attempts of one delivery, the first included.
const ATTEMPTS: u32 = 4;

/// When a hook is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before a tool runs; the hook may block it.
    PreTool,
    /// After a tool ran.
    PostTool,
    /// When an execution ends.
    Stop,
    /// When an execution fails.
    Error,
    /// Never called by this server (the spec's placeholder for harness-defined events).
    Custom,
}

impl HookEvent {
    fn name(self) -> &'static str {
        match self {
            HookEvent::PreTool => "pre_tool",
            HookEvent::PostTool => "post_tool",
            HookEvent::Stop => "stop",
            HookEvent::Error => "error",
            HookEvent::Custom => "custom",
        }
    }
}

/// What a hook calls: a webhook (`command` handlers are not provided: a command run on the
/// server's machine by anyone holding the token is more than an API should hand out).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HookHandler {
    /// `POST`s every delivery to `url`.
    Webhook {
        /// `https` (or `http` to a loopback address, when the server is started with
        /// `--allow-loopback-callbacks`: the document shows the default).
        #[schema(pattern = "^https://[^\\s/?#]+([/?#]\\S*)?$")]
        url: String,
    },
}

/// A hook.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Hook {
    /// Its id.
    pub id: String,
    /// When it is called.
    pub event: HookEvent,
    /// What it calls.
    pub handler: HookHandler,
    /// Disabled hooks are not called.
    pub enabled: bool,
    /// *Extension*: the key of the deliveries' HMAC-SHA256 signatures.
    pub secret: String,
}

/// The hooks, kept in the store, and their deliveries.
#[derive(Debug)]
pub(crate) struct Hooks {
    store: Arc<dyn Store>,
    http: reqwest::Client,
    harness_id: String,
    loopback_callbacks: bool,
    /// The first retry's delay; each next one doubles it.
    retry_after: Duration,
    /// Where deliveries are journaled (weak: the journal sends to the webhooks through this).
    journal: Mutex<Weak<Journal>>,
}

impl Hooks {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        harness_id: &str,
        loopback_callbacks: bool,
        retry_after: Duration,
    ) -> Arc<Hooks> {
        harness_core::model::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Arc::new(Hooks {
            store,
            http,
            harness_id: harness_id.to_owned(),
            loopback_callbacks,
            retry_after,
            journal: Mutex::new(Weak::new()),
        })
    }

    /// Journals deliveries in `journal` from now on.
    pub(crate) fn attach(&self, journal: &Arc<Journal>) {
        *lock(&self.journal) = Arc::downgrade(journal);
    }

    /// `400` naming `url` unless it is `https`, or `http` to a loopback address when allowed.
    pub(crate) fn check_url(&self, field: &str, url: &str) -> Result<(), ApiError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|error| ApiError::invalid_field(field, format!("not a URL: {error}")))?;
        let loopback = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            None => false,
        };
        match parsed.scheme() {
            "https" => Ok(()),
            "http" if loopback && self.loopback_callbacks => Ok(()),
            "http" if loopback => Err(ApiError::invalid_field(
                field,
                "http to a loopback address needs the server's --allow-loopback-callbacks",
            )),
            _ => Err(ApiError::invalid_field(
                field,
                "a callback URL must be https",
            )),
        }
    }

    /// Every hook, by id.
    pub(crate) async fn all(&self) -> Result<Vec<Hook>, ApiError> {
        self.store
            .records(HOOKS, "")
            .await?
            .into_iter()
            .map(|record| {
                serde_json::from_value(record.value).map_err(|error| {
                    ApiError::internal(format!("hook `{}` is corrupt: {error}", record.key))
                })
            })
            .collect()
    }

    /// A hook, or `404`.
    pub(crate) async fn get(&self, id: &str) -> Result<Hook, ApiError> {
        let record = self
            .store
            .record(HOOKS, id)
            .await?
            .ok_or_else(|| ApiError::not_found("hook", id))?;
        serde_json::from_value(record.value)
            .map_err(|error| ApiError::internal(format!("hook `{id}` is corrupt: {error}")))
    }

    /// Stores a hook (new or changed).
    pub(crate) async fn put(&self, hook: &Hook) -> Result<(), ApiError> {
        let value = serde_json::to_value(hook)
            .map_err(|error| ApiError::internal(format!("a hook did not serialize: {error}")))?;
        Ok(self
            .store
            .write(vec![WriteOp::PutRecord {
                namespace: HOOKS.to_owned(),
                key: hook.id.clone(),
                thread_id: None,
                value,
            }])
            .await?)
    }

    /// Deletes a hook, or `404`.
    pub(crate) async fn delete(&self, id: &str) -> Result<(), ApiError> {
        self.get(id).await?;
        Ok(self
            .store
            .write(vec![WriteOp::DeleteRecord {
                namespace: HOOKS.to_owned(),
                key: id.to_owned(),
            }])
            .await?)
    }

    async fn enabled(&self, event: HookEvent) -> Vec<Hook> {
        match self.all().await {
            Ok(hooks) => hooks
                .into_iter()
                .filter(|hook| hook.enabled && hook.event == event)
                .collect(),
            Err(error) => {
                tracing::warn!(error = error.message(), "reading hooks failed");
                Vec::new()
            }
        }
    }

    /// Delivers `data` to every enabled hook of `event`, in the background.
    pub(crate) fn notify(self: &Arc<Self>, event: HookEvent, data: Value) {
        let hooks = Arc::clone(self);
        tokio::spawn(async move {
            for hook in hooks.enabled(event).await {
                let hooks = Arc::clone(&hooks);
                let data = data.clone();
                tokio::spawn(async move {
                    if let Err(error) = hooks.deliver(&hook, event, data).await {
                        tracing::warn!(hook = %hook.id, %error, "a hook delivery failed");
                    }
                });
            }
        });
    }

    /// Asks every enabled `pre_tool` hook about a call: the reason of the first that blocks it.
    async fn pre_tool(&self, data: Value) -> Option<String> {
        for hook in self.enabled(HookEvent::PreTool).await {
            let answer = match self.deliver(&hook, HookEvent::PreTool, data.clone()).await {
                Ok(answer) => answer,
                Err(error) => {
                    return Some(format!(
                        "the pre_tool hook `{}` could not be asked ({error}), so the call did \
                         not run",
                        hook.id
                    ));
                }
            };
            if answer["decision"] == "block" {
                let reason = answer["reason"]
                    .as_str()
                    .unwrap_or("a pre_tool hook blocked it");
                return Some(format!("blocked by a hook: {reason}"));
            }
        }
        None
    }

    /// One delivery, retried: the answer's JSON body (`Null` if it has none). Journaled as
    /// `hook.triggered`, and as `error` if it fails.
    async fn deliver(&self, hook: &Hook, event: HookEvent, data: Value) -> Result<Value, String> {
        let HookHandler::Webhook { url } = &hook.handler;
        let delivery = format!("dlv_{}", harness_core::harness::default_id());
        let body = json!({
            "id": delivery,
            "event": event.name(),
            "hook_id": hook.id,
            "harness_id": self.harness_id,
            "timestamp": rfc3339(unix_ms()),
            "data": data,
        });
        let journal = lock(&self.journal).upgrade();
        if let Some(journal) = &journal {
            journal
                .record(
                    "hook.triggered",
                    json!({ "hook_id": hook.id, "event": event.name(), "data": body["data"] }),
                )
                .await;
        }
        let outcome = self
            .post_signed(url, &hook.secret, &delivery, event.name(), body.to_string())
            .await;
        if let (Err(error), Some(journal)) = (&outcome, &journal) {
            journal
                .record(
                    "error",
                    json!({
                        "code": "hook_delivery_failed",
                        "message": format!("hook `{}`: {error}", hook.id),
                    }),
                )
                .await;
        }
        outcome
    }

    /// A signed `POST` of `body`, retried after a connection failure, a `408`, `429` or
    /// `5xx`: the answer's JSON body (`Null` if it has none).
    async fn post_signed(
        &self,
        url: &str,
        secret: &str,
        delivery: &str,
        event: &str,
        body: String,
    ) -> Result<Value, String> {
        let signature = sign(secret, body.as_bytes());
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(self.retry_after * 2u32.pow(attempt - 1)).await;
            }
            let sent = self
                .http
                .post(url)
                .header("content-type", "application/json")
                .header("x-openharness-signature", &signature)
                .header("x-openharness-delivery", delivery)
                .header("x-openharness-event", event)
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => {
                    let bytes = response.bytes().await.unwrap_or_default();
                    return Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null));
                }
                Ok(response) => {
                    let status = response.status();
                    last = format!("{url} answered {status}");
                    let retried = status.is_server_error()
                        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT;
                    if !retried {
                        return Err(last);
                    }
                }
                Err(error) => last = format!("{url}: {error}"),
            }
        }
        Err(last)
    }

    /// Adds the `pre_tool` check to a session's harness: the gate asks the hooks about each
    /// call it would let run.
    pub(crate) fn guard(self: &Arc<Self>, builder: HarnessBuilder) -> HarnessBuilder {
        // The arguments of each call, from `tool.call` to the gate (which does not carry them).
        let arguments: Arc<Mutex<HashMap<String, Value>>> = Arc::default();
        let hooks = Arc::clone(self);
        builder.compose(move |c| {
            let recorded = Arc::clone(&arguments);
            c.on(ToolCallTag, move |call: &ToolCall, ctx: &ToolCallCtx| {
                lock(&recorded).insert(ctx.call_id.clone(), call.arguments.clone());
                call.clone()
            })
            .on_async(
                ToolGateResult,
                move |verdict: GateVerdict, ctx: ToolCallCtx| {
                    let hooks = Arc::clone(&hooks);
                    let input = lock(&arguments).remove(&ctx.call_id).unwrap_or(Value::Null);
                    async move {
                        if verdict.decision == GateDecision::Deny {
                            return verdict;
                        }
                        let data = json!({
                            "session_id": ctx.base.root_thread_id(),
                            "tool": { "id": ctx.call_id, "name": ctx.tool_name, "input": input },
                        });
                        match hooks.pre_tool(data).await {
                            Some(reason) => GateVerdict::deny(reason),
                            None => verdict,
                        }
                    }
                },
            )
        })
    }
}

const WEBHOOKS: &str = "harness-server.webhooks";

/// A webhook: the journal events of the types it asked for (`*`: all), each a signed `POST`
/// of `{"id", "event", "harness_id", "timestamp", ...the event's fields}` with the headers of
/// a hook delivery, retried the same way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Webhook {
    pub(crate) id: String,
    pub(crate) url: String,
    pub(crate) events: Vec<String>,
    pub(crate) secret: String,
    pub(crate) enabled: bool,
    pub(crate) created_at: i64,
}

impl Hooks {
    /// Every webhook, oldest first.
    pub(crate) async fn webhooks(&self) -> Result<Vec<Webhook>, ApiError> {
        let mut webhooks = self
            .store
            .records(WEBHOOKS, "")
            .await?
            .into_iter()
            .map(|record| {
                serde_json::from_value(record.value).map_err(|error| {
                    ApiError::internal(format!("webhook `{}` is corrupt: {error}", record.key))
                })
            })
            .collect::<Result<Vec<Webhook>, _>>()?;
        webhooks.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(webhooks)
    }

    /// Stores a webhook.
    pub(crate) async fn put_webhook(&self, webhook: &Webhook) -> Result<(), ApiError> {
        let value = serde_json::to_value(webhook)
            .map_err(|error| ApiError::internal(format!("a webhook did not serialize: {error}")))?;
        Ok(self
            .store
            .write(vec![WriteOp::PutRecord {
                namespace: WEBHOOKS.to_owned(),
                key: webhook.id.clone(),
                thread_id: None,
                value,
            }])
            .await?)
    }

    /// Deletes a webhook, or `404`.
    pub(crate) async fn delete_webhook(&self, id: &str) -> Result<(), ApiError> {
        if self.store.record(WEBHOOKS, id).await?.is_none() {
            return Err(ApiError::not_found("webhook", id));
        }
        Ok(self
            .store
            .write(vec![WriteOp::DeleteRecord {
                namespace: WEBHOOKS.to_owned(),
                key: id.to_owned(),
            }])
            .await?)
    }

    /// Sends a journal event to the enabled webhooks that asked for its type, in the
    /// background. A failed delivery is logged, not journaled: an `error` webhook that fails
    /// must not feed itself.
    fn send_to_webhooks(self: &Arc<Self>, kind: &str, data: &Value, at: i64) {
        let hooks = Arc::clone(self);
        let kind = kind.to_owned();
        let data = data.clone();
        tokio::spawn(async move {
            let webhooks = match hooks.webhooks().await {
                Ok(webhooks) => webhooks,
                Err(error) => {
                    tracing::warn!(error = error.message(), "reading webhooks failed");
                    return;
                }
            };
            for webhook in webhooks.into_iter().filter(|webhook| {
                webhook.enabled
                    && webhook
                        .events
                        .iter()
                        .any(|wanted| *wanted == kind || wanted == "*")
            }) {
                let delivery = format!("dlv_{}", harness_core::harness::default_id());
                let body = with_fields(
                    json!({
                        "id": delivery,
                        "event": kind,
                        "harness_id": hooks.harness_id,
                        "timestamp": rfc3339(at),
                    }),
                    &data,
                );
                let hooks = Arc::clone(&hooks);
                let kind = kind.clone();
                tokio::spawn(async move {
                    let sent = hooks
                        .post_signed(
                            &webhook.url,
                            &webhook.secret,
                            &delivery,
                            &kind,
                            body.to_string(),
                        )
                        .await;
                    if let Err(error) = sent {
                        tracing::warn!(webhook = %webhook.id, %error, "a webhook delivery failed");
                    }
                });
            }
        });
    }
}

/// The journal's events go to the webhooks.
pub(crate) struct Webhooks(pub(crate) Arc<Hooks>);

impl EventSink for Webhooks {
    fn send(&self, kind: &str, data: &Value, at: i64) {
        self.0.send_to_webhooks(kind, data, at);
    }
}

/// `sha256=<hex>`: the HMAC-SHA256 of `body` with `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        // HMAC takes keys of any length; this cannot happen.
        Err(_) => return String::new(),
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut signature = String::from("sha256=");
    for byte in digest {
        signature.push_str(&format!("{byte:02x}"));
    }
    signature
}
