//! The planning group: an execution's plan is its session's task list (`task_write`), read
//! live while the execution runs and from the stored thread afterwards.

use axum::Json;
use axum::extract::{Path, State};
use harness_protocol::{TaskItem, TaskStatus};
use harness_store::metadata;
use harness_tags::util::rfc3339;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ApiQuery, ErrorResponse};
use crate::state::Shared;

/// A task's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PlanTaskStatus {
    Pending,
    InProgress,
    Completed,
}

impl From<TaskStatus> for PlanTaskStatus {
    fn from(status: TaskStatus) -> Self {
        match status {
            TaskStatus::Pending => PlanTaskStatus::Pending,
            TaskStatus::InProgress => PlanTaskStatus::InProgress,
            TaskStatus::Completed => PlanTaskStatus::Completed,
        }
    }
}

/// A task of the plan.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct PlanTask {
    id: String,
    content: String,
    status: PlanTaskStatus,
    /// Its place in the list, from 0.
    order: u64,
}

/// An execution's plan.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct Plan {
    execution_id: String,
    tasks: Vec<PlanTask>,
    updated_at: String,
}

/// `{ plan }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct PlanResponse {
    plan: Plan,
}

/// `{ tasks }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct TaskList {
    tasks: Vec<PlanTask>,
}

/// Tasks' filter.
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TaskFilter {
    /// Only tasks in this state.
    status: Option<PlanTaskStatus>,
}

/// The execution's session's tasks, and when they were last saved.
async fn tasks(state: &Shared, execution_id: &str) -> Result<(Vec<PlanTask>, i64), ApiError> {
    let record = state.host.execution(execution_id).await?;
    let thread = state
        .host
        .store()
        .thread(&record.session_id)
        .await?
        .ok_or_else(|| ApiError::not_found("session", &record.session_id))?;
    let items: Vec<TaskItem> = match state.host.live(execution_id) {
        Some(live) => live.harness().session().tasks().tasks(),
        None => thread
            .metadata
            .get(metadata::TASKS)
            .and_then(|saved| serde_json::from_value(saved.clone()).ok())
            .unwrap_or_default(),
    };
    let tasks = items
        .into_iter()
        .zip(0u64..)
        .map(|(task, order)| PlanTask {
            id: task.id,
            content: task.content,
            status: task.status.into(),
            order,
        })
        .collect();
    Ok((tasks, thread.updated_at))
}

/// An execution's plan: its session's task list.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions/{executionId}/plan",
    tag = "planning", operation_id = "planning.get",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    responses((status = 200, body = PlanResponse), (status = 401, body = ErrorResponse),
        (status = 404, body = ErrorResponse)))]
pub(crate) async fn plan(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
) -> Result<Json<PlanResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let (tasks, updated_at) = tasks(&state, &execution_id).await?;
    Ok(Json(PlanResponse {
        plan: Plan {
            execution_id,
            tasks,
            updated_at: rfc3339(updated_at),
        },
    }))
}

/// The plan's tasks, in order.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions/{executionId}/plan/tasks",
    tag = "planning", operation_id = "planning.listTasks",
    params(("harnessId" = String, Path), ("executionId" = String, Path), TaskFilter),
    responses((status = 200, body = TaskList), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn list_tasks(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
    ApiQuery(filter): ApiQuery<TaskFilter>,
) -> Result<Json<TaskList>, ApiError> {
    state.check_harness(&harness_id)?;
    let (tasks, _) = tasks(&state, &execution_id).await?;
    Ok(Json(TaskList {
        tasks: tasks
            .into_iter()
            .filter(|task| filter.status.is_none_or(|status| task.status == status))
            .collect(),
    }))
}
