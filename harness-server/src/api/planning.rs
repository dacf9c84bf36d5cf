//! The planning group: an execution's plan is its session's task list (`task_write`), read
//! live while the execution runs and from the stored thread afterwards.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use harness_core::task::TaskInput;
use harness_protocol::{HarnessEvent, TaskItem, TaskStatus};
use harness_store::metadata;
use harness_tags::util::rfc3339;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use utoipa::{IntoParams, ToSchema};

use super::types::{check_length, whole};
use crate::error::{ApiError, ApiJson, ApiQuery, ErrorResponse};
use crate::host::Live;
use crate::state::Shared;
use crate::stream::{event_stream, typed_frames};

/// A task's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PlanTaskStatus {
    Pending,
    InProgress,
    Completed,
}

impl From<PlanTaskStatus> for TaskStatus {
    fn from(status: PlanTaskStatus) -> Self {
        match status {
            PlanTaskStatus::Pending => TaskStatus::Pending,
            PlanTaskStatus::InProgress => TaskStatus::InProgress,
            PlanTaskStatus::Completed => TaskStatus::Completed,
        }
    }
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
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
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
    Ok((plan_tasks(items), thread.updated_at))
}

/// A task list as the spec shows it.
fn plan_tasks(items: Vec<TaskItem>) -> Vec<PlanTask> {
    items
        .into_iter()
        .zip(0u64..)
        .map(|(task, order)| PlanTask {
            id: task.id,
            content: task.content,
            status: task.status.into(),
            order,
        })
        .collect()
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

/// A task as a client writes it.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanTaskInput {
    /// Kept if given; otherwise the task keeps the id of the one task of the same content, or
    /// gets one from its content.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    id: Option<String>,
    /// 1-10000 characters.
    #[schema(min_length = 1, max_length = 10000)]
    content: String,
    /// Default `pending`; at most one task is `in_progress`.
    #[serde(default)]
    status: Option<PlanTaskStatus>,
    /// Where it goes (tasks are sorted by it, then kept in the order sent).
    #[serde(default)]
    #[schema(value_type = Option<u64>, minimum = 0)]
    order: Option<f64>,
}

/// Replaces the plan.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdatePlanRequest {
    /// The new task list (the plan is unchanged without it).
    #[serde(default)]
    #[schema(max_items = 200)]
    tasks: Option<Vec<PlanTaskInput>>,
}

/// Changes one task.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UpdateTaskRequest {
    #[schema(min_length = 1, max_length = 10000)]
    content: Option<String>,
    status: Option<PlanTaskStatus>,
}

/// `{ task }`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub(crate) struct TaskResponse {
    task: PlanTask,
}

/// The harness of an execution's session: the one running it, else the session's.
async fn session_harness(
    state: &Shared,
    execution_id: &str,
) -> Result<harness_core::harness::Harness, ApiError> {
    let record = state.host.execution(execution_id).await?;
    match state.host.live(execution_id) {
        Some(live) => Ok(live.harness().clone()),
        None => state.host.harness(&record.session_id).await,
    }
}

/// Replaces the plan: the session's task list, stored at once and seen by the run working on
/// it from its next step.
#[utoipa::path(patch, path = "/v1/harnesses/{harnessId}/executions/{executionId}/plan",
    tag = "planning", operation_id = "planning.update",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    request_body = UpdatePlanRequest,
    responses((status = 200, body = PlanResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse)))]
pub(crate) async fn update(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
    ApiJson(request): ApiJson<UpdatePlanRequest>,
) -> Result<Json<PlanResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    let harness = session_harness(&state, &execution_id).await?;
    if let Some(mut tasks) = request.tasks {
        if tasks.len() > 200 {
            return Err(ApiError::invalid_field(
                "tasks",
                "a plan has at most 200 tasks",
            ));
        }
        for task in &tasks {
            check_length("tasks.content", &task.content, 10_000)?;
            if let Some(id) = &task.id {
                check_length("tasks.id", id, 200)?;
            }
            if let Some(order) = task.order {
                whole("tasks.order", order, 0, u64::MAX)?;
            }
        }
        // Stable: tasks without an order keep their place after those with one.
        tasks.sort_by(|a, b| {
            let key = |task: &PlanTaskInput| task.order.unwrap_or(f64::INFINITY);
            key(a).total_cmp(&key(b))
        });
        let inputs: Vec<TaskInput> = tasks
            .into_iter()
            .map(|task| TaskInput {
                id: task.id,
                content: task.content,
                status: task.status.map(Into::into).unwrap_or_default(),
                active_form: None,
            })
            .collect();
        harness.write_tasks(&inputs).await?;
    }
    let (tasks, updated_at) = tasks(&state, &execution_id).await?;
    Ok(Json(PlanResponse {
        plan: Plan {
            execution_id,
            tasks,
            updated_at: rfc3339(updated_at),
        },
    }))
}

/// Changes one task's content or status, stored at once (neither: the task as it is).
#[utoipa::path(patch,
    path = "/v1/harnesses/{harnessId}/executions/{executionId}/plan/tasks/{taskId}",
    tag = "planning", operation_id = "planning.updateTask",
    params(("harnessId" = String, Path), ("executionId" = String, Path),
        ("taskId" = String, Path)),
    request_body = UpdateTaskRequest,
    responses((status = 200, body = TaskResponse), (status = 400, body = ErrorResponse),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse),
        (status = 409, body = ErrorResponse), (status = 413, body = ErrorResponse),
        (status = 415, body = ErrorResponse)))]
pub(crate) async fn update_task(
    State(state): State<Shared>,
    Path((harness_id, execution_id, task_id)): Path<(String, String, String)>,
    ApiJson(request): ApiJson<UpdateTaskRequest>,
) -> Result<Json<TaskResponse>, ApiError> {
    state.check_harness(&harness_id)?;
    if let Some(content) = &request.content {
        check_length("content", content, 10_000)?;
    }
    let harness = session_harness(&state, &execution_id).await?;
    // An update that changes nothing answers the task as it is.
    let updated = if request.content.is_none() && request.status.is_none() {
        harness.session().tasks().tasks()
    } else {
        harness
            .update_task(&task_id, request.content, request.status.map(Into::into))
            .await?
    };
    plan_tasks(updated)
        .into_iter()
        .find(|task| task.id == task_id)
        .map(|task| Json(TaskResponse { task }))
        .ok_or_else(|| ApiError::not_found("task", &task_id))
}

/// What changed between two task lists, as the spec's plan events: removals, additions,
/// changes, then the new order if the tasks kept moved.
fn plan_events(previous: &[PlanTask], next: &[PlanTask]) -> Vec<Value> {
    let mut events = Vec::new();
    for task in previous {
        if !next.iter().any(|kept| kept.id == task.id) {
            events.push(json!({ "type": "task.removed", "task_id": task.id }));
        }
    }
    for task in next {
        match previous.iter().find(|old| old.id == task.id) {
            None => events.push(json!({ "type": "task.added", "task": task })),
            Some(old) if old.content != task.content || old.status != task.status => {
                events.push(json!({ "type": "task.updated", "task": task }));
            }
            Some(_) => {}
        }
    }
    let kept_order = |list: &[PlanTask], other: &[PlanTask]| -> Vec<String> {
        list.iter()
            .filter(|task| other.iter().any(|o| o.id == task.id))
            .map(|task| task.id.clone())
            .collect()
    };
    if kept_order(previous, next) != kept_order(next, previous) {
        let task_ids: Vec<&str> = next.iter().map(|task| task.id.as_str()).collect();
        events.push(json!({ "type": "plan.reordered", "task_ids": task_ids }));
    }
    events
}

/// The plan as it changes: the tasks there now as `task.added`, then each change while the
/// execution runs; the stream ends with the execution (at once for one that is over). A
/// reconnect starts again from the list as it is, so frames carry no `id:`.
#[utoipa::path(get, path = "/v1/harnesses/{harnessId}/executions/{executionId}/plan/stream",
    tag = "planning", operation_id = "planning.stream",
    params(("harnessId" = String, Path), ("executionId" = String, Path)),
    responses((status = 200, content_type = "text/event-stream", body = String,
            description = "Plan events: `task.added`, `task.updated`, `task.removed`, \
                `plan.reordered`"),
        (status = 401, body = ErrorResponse), (status = 404, body = ErrorResponse)))]
pub(crate) async fn stream(
    State(state): State<Shared>,
    Path((harness_id, execution_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    state.check_harness(&harness_id)?;
    let harness = session_harness(&state, &execution_id).await?;
    // Subscribed before the list is read, so that no change falls in between.
    let events = harness.subscribe();
    let current = plan_tasks(harness.session().tasks().tasks());
    let opening = typed_frames(&plan_events(&[], &current));
    let live = state
        .host
        .live(&execution_id)
        .filter(|live| !live.record().status.is_finished());
    let follow = PlanFollower {
        events,
        current,
        ended: live.as_ref().map(|live| live.watch()),
        live,
        closing: state.closing.clone(),
    };
    let changes = futures_util::stream::unfold(follow, |mut follow| async move {
        let chunk = follow.next_chunk().await?;
        Some((chunk, follow))
    });
    Ok(event_stream(
        futures_util::stream::once(async move { opening }).chain(changes),
    ))
}

struct PlanFollower {
    events: harness_events::Subscription,
    current: Vec<PlanTask>,
    live: Option<Arc<Live>>,
    ended: Option<tokio::sync::watch::Receiver<u64>>,
    closing: CancellationToken,
}

impl PlanFollower {
    /// The next changes, or `None` once the execution is over (or was never running).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let (Some(live), Some(ended)) = (&self.live, &mut self.ended) else {
            return None;
        };
        loop {
            if live.record().status.is_finished() {
                return None;
            }
            tokio::select! {
                delivery = self.events.recv() => match delivery {
                    Some(delivery) => {
                        if let Some(HarnessEvent::TaskUpdated { tasks }) = delivery.event() {
                            let next = plan_tasks(tasks.clone());
                            let events = plan_events(&self.current, &next);
                            self.current = next;
                            if !events.is_empty() {
                                return Some(typed_frames(&events));
                            }
                        }
                    }
                    None => return None,
                },
                changed = ended.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                () = self.closing.cancelled() => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{PlanTask, PlanTaskStatus, plan_events};

    fn task(id: &str, content: &str, status: PlanTaskStatus, order: u64) -> PlanTask {
        PlanTask {
            id: id.into(),
            content: content.into(),
            status,
            order,
        }
    }

    #[test]
    fn changes_become_the_specs_plan_events() {
        use PlanTaskStatus::{Completed, InProgress, Pending};
        let before = [
            task("a", "A", Completed, 0),
            task("b", "B", InProgress, 1),
            task("c", "C", Pending, 2),
        ];
        let after = [
            task("c", "C", Pending, 0),
            task("b", "B", Completed, 1),
            task("d", "D", Pending, 2),
        ];
        let kinds: Vec<String> = plan_events(&before, &after)
            .iter()
            .map(|event| event["type"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            kinds,
            [
                "task.removed",
                "task.updated",
                "task.added",
                "plan.reordered"
            ]
        );
        assert!(plan_events(&after, &after).is_empty());
        let added = plan_events(&[], &before);
        assert_eq!(added.len(), 3);
        assert_eq!(added[0]["task"]["id"], "a");
    }
}
