//! The harness's built-in tools: questions to the user, plan approval, access requests and the
//! task list. (`subagent` lives with the harness, which runs subagents.)
//!
//! The interactive tools pause through the tool's back-channel
//! ([`ToolContext::suspend`]); with no user interface attached they answer with plain text
//! instead of hanging, so the same agent runs headless.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::task::{TaskBoard, TaskInput, TaskItem, TaskStatus};
use crate::tool::{SuspendError, Tool, ToolContext, ToolError, ToolOutput, tool_fn};
use harness_tags::ToolCategory;

/// The built-in tools, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinTool {
    /// `ask_user`.
    AskUser,
    /// `submit_plan`.
    SubmitPlan,
    /// `request_access`.
    RequestAccess,
    /// `task_write`.
    TaskWrite,
    /// `task_update`.
    TaskUpdate,
    /// `task_complete`.
    TaskComplete,
    /// `task_check`.
    TaskCheck,
    /// `subagent` (only when subagents are configured).
    Subagent,
}

impl BuiltinTool {
    /// Every built-in tool.
    pub const ALL: [BuiltinTool; 8] = [
        BuiltinTool::AskUser,
        BuiltinTool::SubmitPlan,
        BuiltinTool::RequestAccess,
        BuiltinTool::TaskWrite,
        BuiltinTool::TaskUpdate,
        BuiltinTool::TaskComplete,
        BuiltinTool::TaskCheck,
        BuiltinTool::Subagent,
    ];

    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinTool::AskUser => "ask_user",
            BuiltinTool::SubmitPlan => "submit_plan",
            BuiltinTool::RequestAccess => "request_access",
            BuiltinTool::TaskWrite => "task_write",
            BuiltinTool::TaskUpdate => "task_update",
            BuiltinTool::TaskComplete => "task_complete",
            BuiltinTool::TaskCheck => "task_check",
            BuiltinTool::Subagent => "subagent",
        }
    }

    /// True for the task-list tools.
    pub fn is_task_tool(self) -> bool {
        matches!(
            self,
            BuiltinTool::TaskWrite
                | BuiltinTool::TaskUpdate
                | BuiltinTool::TaskComplete
                | BuiltinTool::TaskCheck
        )
    }
}

/// One choice of a question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionOption {
    /// The choice's label (what the answer contains).
    pub label: String,
    /// More about the choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// How many choices the user may pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SelectionMode {
    /// Exactly one.
    SingleSelect,
    /// Any number.
    MultiSelect,
}

/// Arguments of `ask_user`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskUserArgs {
    /// The question.
    pub question: String,
    /// Choices to offer; omit for a free-text answer.
    #[serde(default)]
    pub options: Option<Vec<QuestionOption>>,
    /// With options: `single_select` (the default) or `multi_select`.
    #[serde(default)]
    pub selection_mode: Option<SelectionMode>,
}

/// `ask_user`: asks the user a question (free text, or one or several of the given options)
/// and waits for the answer.
pub fn ask_user() -> impl Tool {
    tool_fn(
        "ask_user",
        "Ask the user a question and wait for their answer. Give `options` for a choice \
         (`selectionMode`: `single_select`, the default, or `multi_select`); omit them for a \
         free-text answer. Use it when you cannot proceed without the user's decision.",
        |args: AskUserArgs, ctx: ToolContext| async move {
            let selection = match (&args.options, args.selection_mode) {
                (None, Some(_)) => {
                    return Err(ToolError::new(
                        "`selectionMode` needs `options`: give the choices, or omit \
                         `selectionMode` for a free-text question",
                    ));
                }
                (None, None) => None,
                (Some(_), mode) => Some(mode.unwrap_or(SelectionMode::SingleSelect)),
            };
            let payload = json!({
                "question": args.question,
                "options": args.options,
                "selectionMode": selection,
            });
            let schema = match selection {
                Some(SelectionMode::MultiSelect) => {
                    json!({"type": "array", "items": {"type": "string"}})
                }
                _ => json!({"type": "string"}),
            };
            match ctx.suspend(payload, Some(schema)).await {
                Ok(answer) => Ok(ToolOutput::from(format!(
                    "User answered: {}",
                    answer_text(&answer)
                ))),
                Err(SuspendError::Unavailable) => Ok(ToolOutput::from(format!(
                    "[Question for user]: {}",
                    args.question
                ))),
                Err(SuspendError::Aborted) => Err(ToolError::new("the question was cancelled")),
            }
        },
    )
    .category(ToolCategory::Other)
}

fn answer_text(answer: &Value) -> String {
    match answer {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| item.to_string())
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// Arguments of `submit_plan`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct SubmitPlanArgs {
    /// A short title.
    #[serde(default)]
    pub title: Option<String>,
    /// The plan, in Markdown.
    pub plan: String,
}

/// The user's decision on a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanDecision {
    /// `approved` or `rejected`.
    pub action: PlanAction,
    /// What the user wants changed.
    #[serde(default)]
    pub feedback: Option<String>,
}

/// Approved or rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    /// Go ahead.
    Approved,
    /// Revise it.
    Rejected,
}

/// Called when the user approves a plan (the harness switches mode once the run is at rest).
pub type OnPlanApproved = Arc<dyn Fn(&str) + Send + Sync>;

/// `submit_plan`: submits a plan for the user's approval and waits. Approval calls
/// `on_approved` with the plan's title; rejection hands the feedback back to the model.
pub fn submit_plan(on_approved: OnPlanApproved) -> impl Tool {
    tool_fn(
        "submit_plan",
        "Submit your implementation plan (Markdown) for the user's review and wait for the \
         decision. On approval you move on to implementing it; on rejection you get feedback \
         to revise and resubmit.",
        move |args: SubmitPlanArgs, ctx: ToolContext| {
            let on_approved = Arc::clone(&on_approved);
            async move {
                let title = args
                    .title
                    .unwrap_or_else(|| "Implementation Plan".to_owned());
                let payload = json!({"title": title, "plan": args.plan});
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "action": {"enum": ["approved", "rejected"]},
                        "feedback": {"type": "string"}
                    },
                    "required": ["action"]
                });
                let answer = match ctx.suspend(payload, Some(schema)).await {
                    Ok(answer) => answer,
                    Err(SuspendError::Unavailable) => {
                        return Ok(ToolOutput::from(format!(
                            "[Plan submitted for review]\n\nTitle: {title}\n\n{}",
                            args.plan
                        )));
                    }
                    Err(SuspendError::Aborted) => {
                        return Err(ToolError::new("the plan review was cancelled"));
                    }
                };
                let decision: PlanDecision = serde_json::from_value(answer).map_err(|error| {
                    ToolError::new(format!("the plan review answer is not valid: {error}"))
                })?;
                match decision.action {
                    PlanAction::Approved => {
                        on_approved(&title);
                        Ok(ToolOutput::from(
                            "Plan approved. Proceed with implementation following the approved plan.",
                        ))
                    }
                    PlanAction::Rejected => {
                        let feedback = decision
                            .feedback
                            .map(|f| format!("\n\nUser feedback: {f}"))
                            .unwrap_or_default();
                        Ok(ToolOutput::from(format!(
                            "Plan was not approved. The user wants revisions.{feedback}"
                        )))
                    }
                }
            }
        },
    )
}

/// Arguments of `request_access`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct RequestAccessArgs {
    /// What you need access to (a path, a host, a secret's name).
    pub resource: String,
    /// Why you need it.
    pub reason: String,
}

/// `request_access`: asks the user for access to something outside the agent's bounds.
pub fn request_access() -> impl Tool {
    tool_fn(
        "request_access",
        "Ask the user for access to a resource you are not allowed to use yet (a path outside \
         the workspace, a host, a credential), explaining why. Waits for the decision.",
        |args: RequestAccessArgs, ctx: ToolContext| async move {
            let payload = json!({"resource": args.resource, "reason": args.reason});
            let schema = json!({"type": "object", "properties": {"granted": {"type": "boolean"}}, "required": ["granted"]});
            match ctx.suspend(payload, Some(schema)).await {
                Ok(answer) => {
                    let granted = match &answer {
                        Value::Bool(granted) => *granted,
                        Value::Object(object) => object
                            .get("granted")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        Value::String(text) => matches!(
                            text.trim().to_ascii_lowercase().as_str(),
                            "yes" | "y" | "true" | "granted"
                        ),
                        _ => false,
                    };
                    Ok(ToolOutput::from(if granted {
                        format!("Access to {} was granted.", args.resource)
                    } else {
                        format!(
                            "Access to {} was denied. Continue without it.",
                            args.resource
                        )
                    }))
                }
                Err(SuspendError::Unavailable) => Ok(ToolOutput::from(format!(
                    "[Access request]: {} ({}). No one is available to grant it; continue without it.",
                    args.resource, args.reason
                ))),
                Err(SuspendError::Aborted) => {
                    Err(ToolError::new("the access request was cancelled"))
                }
            }
        },
    )
}

/// Arguments of `task_write`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct TaskWriteArgs {
    /// The whole list, replacing the current one.
    pub tasks: Vec<TaskInput>,
}

/// Arguments of `task_update`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskUpdateArgs {
    /// The task's id.
    pub id: String,
    /// New content.
    #[serde(default)]
    pub content: Option<String>,
    /// New status.
    #[serde(default)]
    pub status: Option<TaskStatus>,
    /// New progressive form.
    #[serde(default)]
    pub active_form: Option<String>,
}

/// Arguments of `task_complete`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct TaskIdArgs {
    /// The task's id.
    pub id: String,
}

/// Arguments of `task_check`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
pub struct TaskCheckArgs {}

fn snapshot(tasks: &[TaskItem]) -> ToolOutput {
    ToolOutput::from(json!({ "tasks": tasks }))
}

/// `task_write`: replaces the task list.
pub fn task_write(board: Arc<TaskBoard>) -> impl Tool {
    tool_fn(
        "task_write",
        "Create or replace your task list for a multi-step job. Each task has `content`, a \
         `status` (pending, in_progress, completed; at most one in_progress) and optionally an \
         `id` and `activeForm`. Ids are assigned when omitted. Returns the list.",
        move |args: TaskWriteArgs, _: ToolContext| {
            let board = Arc::clone(&board);
            async move {
                board
                    .write(&args.tasks)
                    .map(|tasks| snapshot(&tasks))
                    .map_err(|e| ToolError::new(e.to_string()))
            }
        },
    )
}

/// `task_update`: changes one task.
pub fn task_update(board: Arc<TaskBoard>) -> impl Tool {
    tool_fn(
        "task_update",
        "Update one task by id: its `content`, `status` or `activeForm` (at least one). Returns \
         the list.",
        move |args: TaskUpdateArgs, _: ToolContext| {
            let board = Arc::clone(&board);
            async move {
                board
                    .update(&args.id, args.content, args.status, args.active_form)
                    .map(|tasks| snapshot(&tasks))
                    .map_err(|e| ToolError::new(e.to_string()))
            }
        },
    )
}

/// `task_complete`: marks one task completed.
pub fn task_complete(board: Arc<TaskBoard>) -> impl Tool {
    tool_fn(
        "task_complete",
        "Mark one task completed by id. Returns the list.",
        move |args: TaskIdArgs, _: ToolContext| {
            let board = Arc::clone(&board);
            async move {
                board
                    .update(&args.id, None, Some(TaskStatus::Completed), None)
                    .map(|tasks| snapshot(&tasks))
                    .map_err(|e| ToolError::new(e.to_string()))
            }
        },
    )
}

/// `task_check`: reads the list back with a summary, before finishing.
pub fn task_check(board: Arc<TaskBoard>) -> impl Tool {
    tool_fn(
        "task_check",
        "Check the task list before you finish: returns the tasks, a summary and the tasks \
         still incomplete.",
        move |_: TaskCheckArgs, _: ToolContext| {
            let board = Arc::clone(&board);
            async move { Ok::<_, ToolError>(ToolOutput::from(task_check_report(&board.tasks()))) }
        },
    )
}

/// What `task_check` returns.
pub fn task_check_report(tasks: &[TaskItem]) -> Value {
    let count = |status: TaskStatus| tasks.iter().filter(|t| t.status == status).count();
    let completed = count(TaskStatus::Completed);
    let incomplete: Vec<&TaskItem> = tasks
        .iter()
        .filter(|t| t.status != TaskStatus::Completed)
        .collect();
    json!({
        "tasks": tasks,
        "summary": {
            "total": tasks.len(),
            "completed": completed,
            "inProgress": count(TaskStatus::InProgress),
            "pending": count(TaskStatus::Pending),
            "incomplete": incomplete.len(),
            "hasTasks": !tasks.is_empty(),
            "allCompleted": !tasks.is_empty() && incomplete.is_empty(),
        },
        "incompleteTasks": incomplete,
        "isError": false,
    })
}

/// A stand-in for a tool a forked subagent must not use: same name and schema (so the
/// prompt-cache prefix stays identical), but it only returns a notice.
pub fn unavailable_in_fork(name: &str, description: &str, schema: Value) -> impl Tool {
    ForkStub {
        name: name.to_owned(),
        description: description.to_owned(),
        schema,
    }
}

struct ForkStub {
    name: String,
    description: String,
    schema: Value,
}

#[async_trait::async_trait]
impl Tool for ForkStub {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    async fn execute(&self, _: Value, _: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::from(format!(
            "`{}` is unavailable inside a forked subagent; finish the task with the other tools.",
            self.name
        )))
    }
}
