//! Permissions for tool calls: an ordered rule chain, first match wins.
//!
//! 1. a per-tool `deny`: absolute, nothing after it can reopen the tool (the verdict is a
//!    hard deny, and the tool is not even offered to the model);
//! 2. `yolo` in the session state: allow;
//! 3. a per-tool `allow` or `ask` (rules outrank grants: a tool whose rule is `ask` asks even
//!    after the user allowed it for the session; give the category a policy instead);
//! 4. a session grant for the tool (the user answered "always allow this tool");
//! 5. a session grant for the tool's category;
//! 6. the category's policy;
//! 7. `ask`.
//!
//! Categories (`read`, `edit`, `execute`, `mcp`, `other`) come from the harness's tool
//! category resolver through the tool-call context; a tool without one is judged by per-tool
//! rules, yolo and grants only, then asks.
//!
//! ```
//! use harness_permissions::{Permissions, Policy};
//! use harness_tags::{Pipeline, ToolCategory};
//!
//! let permissions = Permissions::builder()
//!     .tool("shell", Policy::Ask)
//!     .tool("delete_repo", Policy::Deny)
//!     .category(ToolCategory::Read, Policy::Allow)
//!     .build();
//! let pipeline = Pipeline::builder().plugin(permissions).build().unwrap();
//! # let _ = pipeline;
//!
//! // Or from a file:
//! let rules = Permissions::from_toml_str("[tools]\nshell = \"ask\"\n\n[categories]\nread = \"allow\"\n", "permissions.toml").unwrap();
//! assert_eq!(rules.rules().tools["shell"], Policy::Ask);
//! ```
//!
//! The plugin registers `tool.gate-result` (fail-closed: if it fails, the call does not run)
//! and `tool.schema` (denied tools are removed from what the model is offered).

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use harness_tags::tags::{ToolGateResult, ToolSchema};
use harness_tags::{
    BaseCtx, Compose, GateDecision, GateVerdict, Plugin, SessionView, ToolCallCtx, ToolCategory,
    ToolSpec, on,
};
use serde::{Deserialize, Serialize};

/// What a rule says about a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Run it.
    Allow,
    /// Ask the user first.
    Ask,
    /// Do not run it.
    Deny,
}

/// The rules in force: per tool and per category.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Per-tool policies, by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, Policy>,
    /// Per-category policies.
    #[serde(default)]
    pub categories: BTreeMap<ToolCategory, Policy>,
}

/// Which step of the chain decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A per-tool deny.
    ToolDeny,
    /// Yolo mode.
    Yolo,
    /// A per-tool allow or ask.
    ToolRule,
    /// A session grant for the tool.
    ToolGrant,
    /// A session grant for the category.
    CategoryGrant,
    /// The category's policy.
    CategoryRule,
    /// Nothing matched.
    Default,
}

/// The chain's decision for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub policy: Policy,
    /// Which step decided.
    pub step: Step,
}

/// Why rules could not be loaded. Messages name the file and, where known, the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PermissionsError {
    /// The file could not be read.
    #[error("cannot read permissions file `{file}`: {reason}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// The file's extension is neither `.toml` nor `.json`.
    #[error("permissions file `{0}` must end in `.toml` or `.json`")]
    Format(String),
    /// The content is malformed, or names an unknown category or policy.
    #[error("{file}{at}: {message}", at = line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        file: String,
        /// The 1-based line of the problem, when known.
        line: Option<usize>,
        /// What is wrong, and what is accepted.
        message: String,
    },
}

/// The permissions plugin.
#[derive(Clone, Debug, Default)]
pub struct Permissions {
    rules: Arc<Rules>,
}

/// Builds [`Permissions`] in code.
#[derive(Clone, Debug, Default)]
pub struct PermissionsBuilder {
    rules: Rules,
}

impl PermissionsBuilder {
    /// Sets a tool's policy.
    pub fn tool(mut self, name: impl Into<String>, policy: Policy) -> Self {
        self.rules.tools.insert(name.into(), policy);
        self
    }

    /// Sets a category's policy.
    pub fn category(mut self, category: ToolCategory, policy: Policy) -> Self {
        self.rules.categories.insert(category, policy);
        self
    }

    /// The plugin.
    pub fn build(self) -> Permissions {
        Permissions::new(self.rules)
    }
}

impl Permissions {
    /// The plugin with these rules.
    pub fn new(rules: Rules) -> Self {
        Permissions {
            rules: Arc::new(rules),
        }
    }

    /// Starts building rules in code.
    pub fn builder() -> PermissionsBuilder {
        PermissionsBuilder::default()
    }

    /// Loads rules from a `.toml` or `.json` file with a `tools` and a `categories` table.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, PermissionsError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| PermissionsError::Read {
            file: name.clone(),
            reason: error.to_string(),
        })?;
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Permissions::from_toml_str(&text, &name),
            Some("json") => Permissions::from_json_str(&text, &name),
            _ => Err(PermissionsError::Format(name)),
        }
    }

    /// Parses TOML rules; `name` is used in errors.
    pub fn from_toml_str(text: &str, name: &str) -> Result<Self, PermissionsError> {
        toml::from_str::<Rules>(text)
            .map(Permissions::new)
            .map_err(|error| PermissionsError::Invalid {
                file: name.to_owned(),
                line: error.span().map(|span| line_of(text, span.start)),
                message: explain(error.message()),
            })
    }

    /// Parses JSON rules; `name` is used in errors.
    pub fn from_json_str(text: &str, name: &str) -> Result<Self, PermissionsError> {
        serde_json::from_str::<Rules>(text)
            .map(Permissions::new)
            .map_err(|error| PermissionsError::Invalid {
                file: name.to_owned(),
                line: Some(error.line()).filter(|l| *l > 0),
                message: explain(&strip_position(&error.to_string())),
            })
    }

    /// The rules in force.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Walks the chain for one call.
    pub fn decide(
        &self,
        tool: &str,
        category: Option<ToolCategory>,
        session: &SessionView,
    ) -> Decision {
        let rule = self.rules.tools.get(tool).copied();
        let decided = |policy, step| Decision { policy, step };
        if rule == Some(Policy::Deny) {
            return decided(Policy::Deny, Step::ToolDeny);
        }
        if session.yolo() {
            return decided(Policy::Allow, Step::Yolo);
        }
        if let Some(policy) = rule {
            return decided(policy, Step::ToolRule);
        }
        if session.granted_tools.contains(tool) {
            return decided(Policy::Allow, Step::ToolGrant);
        }
        if let Some(category) = category {
            if session.granted_categories.contains(&category) {
                return decided(Policy::Allow, Step::CategoryGrant);
            }
            if let Some(policy) = self.rules.categories.get(&category) {
                return decided(*policy, Step::CategoryRule);
            }
        }
        decided(Policy::Ask, Step::Default)
    }

    fn verdict(&self, ctx: &ToolCallCtx) -> GateVerdict {
        let decision = self.decide(&ctx.tool_name, ctx.category, &ctx.session);
        let reason = match decision.step {
            Step::ToolDeny => format!("`{}` is denied by the permission rules", ctx.tool_name),
            Step::Yolo => "yolo mode".to_owned(),
            Step::ToolRule => format!("the rule for `{}`", ctx.tool_name),
            Step::ToolGrant => format!("`{}` was allowed for this session", ctx.tool_name),
            Step::CategoryGrant | Step::CategoryRule => {
                let category = ctx.category.map(ToolCategory::as_str).unwrap_or("unknown");
                if decision.step == Step::CategoryGrant {
                    format!("{category} tools were allowed for this session")
                } else {
                    format!("the rule for {category} tools")
                }
            }
            Step::Default => "no rule allows it".to_owned(),
        };
        match decision.policy {
            Policy::Deny if decision.step == Step::ToolDeny => GateVerdict::hard_deny(reason),
            Policy::Deny => GateVerdict::deny(reason),
            Policy::Ask => GateVerdict::ask(reason),
            Policy::Allow => GateVerdict {
                decision: GateDecision::Allow,
                reason: Some(reason),
                hard_deny: false,
            },
        }
    }
}

impl Plugin for Permissions {
    fn name(&self) -> &str {
        "permissions"
    }

    fn compose(&self, c: Compose) -> Compose {
        let gate = self.clone();
        let schema = self.clone();
        c.register(
            on(ToolGateResult, move |_: &GateVerdict, ctx: &ToolCallCtx| {
                gate.verdict(ctx)
            })
            .named("rule chain")
            .fail_closed(),
        )
        .register(
            on(ToolSchema, move |tools: &Arc<[ToolSpec]>, _: &BaseCtx| {
                let denied = |t: &ToolSpec| schema.rules.tools.get(&t.name) == Some(&Policy::Deny);
                tools.iter().any(denied).then(|| {
                    tools
                        .iter()
                        .filter(|t| !denied(t))
                        .cloned()
                        .collect::<Arc<[_]>>()
                })
            })
            .named("hide denied tools")
            .fail_closed(),
        )
    }

    fn settings(&self) -> serde_json::Value {
        serde_json::to_value(&*self.rules).unwrap_or(serde_json::Value::Null)
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(1, |before| before.matches('\n').count() + 1)
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// Adds what is accepted to serde's unknown-variant messages.
fn explain(message: &str) -> String {
    let message = message.trim().to_owned();
    if message.contains("unknown variant") {
        format!(
            "{message} (policies: allow, ask, deny; categories: read, edit, execute, mcp, other)"
        )
    } else {
        message
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use serde_json::json;

    fn session(yolo: bool, tools: &[&str], categories: &[ToolCategory]) -> SessionView {
        SessionView {
            state: Arc::new(json!({ "yolo": yolo })),
            granted_tools: Arc::new(
                tools
                    .iter()
                    .map(|t| (*t).to_owned())
                    .collect::<BTreeSet<_>>(),
            ),
            granted_categories: Arc::new(categories.iter().copied().collect()),
        }
    }

    fn permissions() -> Permissions {
        Permissions::builder()
            .tool("rm", Policy::Deny)
            .tool("shell", Policy::Ask)
            .tool("cat", Policy::Allow)
            .category(ToolCategory::Edit, Policy::Ask)
            .category(ToolCategory::Read, Policy::Allow)
            .category(ToolCategory::Mcp, Policy::Deny)
            .build()
    }

    #[test]
    fn each_step_decides_when_the_earlier_ones_are_silent() {
        let p = permissions();
        let none = session(false, &[], &[]);
        let cases = [
            (
                p.decide(
                    "rm",
                    Some(ToolCategory::Read),
                    &session(true, &["rm"], &[ToolCategory::Read]),
                ),
                Policy::Deny,
                Step::ToolDeny,
            ),
            (
                p.decide(
                    "shell",
                    Some(ToolCategory::Execute),
                    &session(true, &[], &[]),
                ),
                Policy::Allow,
                Step::Yolo,
            ),
            (
                p.decide(
                    "shell",
                    Some(ToolCategory::Execute),
                    &session(false, &["shell"], &[]),
                ),
                Policy::Ask,
                Step::ToolRule,
            ),
            (p.decide("cat", None, &none), Policy::Allow, Step::ToolRule),
            (
                p.decide(
                    "write",
                    Some(ToolCategory::Edit),
                    &session(false, &["write"], &[]),
                ),
                Policy::Allow,
                Step::ToolGrant,
            ),
            (
                p.decide(
                    "write",
                    Some(ToolCategory::Edit),
                    &session(false, &[], &[ToolCategory::Edit]),
                ),
                Policy::Allow,
                Step::CategoryGrant,
            ),
            (
                p.decide("write", Some(ToolCategory::Edit), &none),
                Policy::Ask,
                Step::CategoryRule,
            ),
            (
                p.decide("grep", Some(ToolCategory::Read), &none),
                Policy::Allow,
                Step::CategoryRule,
            ),
            (
                p.decide("query", Some(ToolCategory::Mcp), &none),
                Policy::Deny,
                Step::CategoryRule,
            ),
            (
                p.decide(
                    "query",
                    Some(ToolCategory::Mcp),
                    &session(false, &[], &[ToolCategory::Mcp]),
                ),
                Policy::Allow,
                Step::CategoryGrant,
            ),
            (p.decide("unknown", None, &none), Policy::Ask, Step::Default),
            (
                p.decide("other", Some(ToolCategory::Other), &none),
                Policy::Ask,
                Step::Default,
            ),
        ];
        for (decision, policy, step) in cases {
            assert_eq!((decision.policy, decision.step), (policy, step));
        }
    }

    #[test]
    fn files_load_and_errors_name_the_file_and_line() {
        let toml = "[tools]\nshell = \"ask\"\n\n[categories]\nread = \"allow\"\nexec = \"ask\"\n";
        let error = Permissions::from_toml_str(toml, "perm.toml").unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("perm.toml:6:"), "{text}");
        assert!(
            text.contains("exec") && text.contains("categories: read, edit"),
            "{text}"
        );

        let error =
            Permissions::from_toml_str("[tools]\nshell = \"maybe\"\n", "perm.toml").unwrap_err();
        assert!(error.to_string().starts_with("perm.toml:2:"), "{error}");
        assert!(error.to_string().contains("maybe"), "{error}");

        let error = Permissions::from_toml_str("[tools\nshell = 1", "perm.toml").unwrap_err();
        assert!(
            matches!(error, PermissionsError::Invalid { line: Some(1), .. }),
            "{error}"
        );

        let json =
            "{\n  \"tools\": {\"shell\": \"ask\"},\n  \"categories\": {\"network\": \"deny\"}\n}";
        let error = Permissions::from_json_str(json, "perm.json").unwrap_err();
        assert!(error.to_string().starts_with("perm.json:3:"), "{error}");

        let error = Permissions::from_json_str("{\"tool\": {}}", "perm.json").unwrap_err();
        assert!(
            error.to_string().contains("unknown field `tool`"),
            "{error}"
        );

        let ok =
            Permissions::from_json_str("{\"tools\": {\"rm\": \"deny\"}}", "perm.json").unwrap();
        assert_eq!(ok.rules().tools["rm"], Policy::Deny);
        assert!(matches!(
            Permissions::from_file("/nonexistent/perm.toml"),
            Err(PermissionsError::Read { .. })
        ));
        assert!(matches!(
            Permissions::from_file("perm.yaml"),
            Err(PermissionsError::Read { .. } | PermissionsError::Format(_))
        ));
    }
}
