//! The task list as clients see it: [`TaskItem`]s and their [`TaskStatus`].

use serde::{Deserialize, Serialize};

/// Where a task stands.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started.
    #[default]
    Pending,
    /// Being worked on (at most one at a time).
    InProgress,
    /// Done.
    Completed,
}

/// One item of the task list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskItem {
    /// A stable id (a slug of the content unless the model gave one).
    pub id: String,
    /// What the task is, imperative ("Write the tests").
    pub content: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// The task in progressive form, for UIs ("Writing the tests").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
}
