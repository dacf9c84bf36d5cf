//! The task list: items, their statuses, stable id assignment, and the shared [`TaskBoard`]
//! the task tools edit.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use harness_protocol::{TaskItem, TaskStatus};

use harness_tags::util::lock;

/// A task as the model writes it: the id is optional.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskInput {
    /// An id to keep; omitted, one is derived from the content.
    #[serde(default)]
    pub id: Option<String>,
    /// What the task is.
    pub content: String,
    /// Where it stands (default pending).
    #[serde(default)]
    pub status: TaskStatus,
    /// The task in progressive form.
    #[serde(default)]
    pub active_form: Option<String>,
}

/// Assigns stable ids to a new task list.
///
/// An explicit id is kept if it is not used twice in the same write. A task without an id
/// whose content appears once in the write reuses the id of the single previous task with that
/// content (so rewriting the list keeps ids stable). Otherwise the id is a slug of the content
/// (lowercase ASCII letters and digits, other runs collapsed to `_`, at most 48 characters;
/// `task_<n>` for content with no slug), with `_<n>` for the n-th repeat of the same content,
/// made unique with `_2`, `_3`, ... against every id in use or reserved.
///
/// ```
/// use harness_core::task::{assign_task_ids, TaskInput, TaskStatus};
///
/// let input = |content: &str| TaskInput { id: None, content: content.into(), status: TaskStatus::Pending, active_form: None };
/// let first = assign_task_ids(&[input("Write the tests!"), input("Ship it")], &[]);
/// assert_eq!(first[0].id, "write_the_tests");
/// let again = assign_task_ids(&[input("Ship it"), input("Write the tests!")], &first);
/// assert_eq!(again[1].id, "write_the_tests");
/// ```
pub fn assign_task_ids(tasks: &[TaskInput], previous: &[TaskItem]) -> Vec<TaskItem> {
    let explicit: HashSet<&str> = tasks.iter().filter_map(|t| t.id.as_deref()).collect();
    let mut omitted_counts: HashMap<&str, usize> = HashMap::new();
    for task in tasks.iter().filter(|t| t.id.is_none()) {
        *omitted_counts.entry(task.content.as_str()).or_default() += 1;
    }
    let mut reusable: HashMap<usize, &str> = HashMap::new();
    for (index, task) in tasks.iter().enumerate() {
        if task.id.is_some() || omitted_counts.get(task.content.as_str()) != Some(&1) {
            continue;
        }
        let mut matches = previous
            .iter()
            .filter(|p| p.content == task.content && !explicit.contains(p.id.as_str()));
        if let (Some(only), None) = (matches.next(), matches.next()) {
            reusable.insert(index, only.id.as_str());
        }
    }
    let reserved: HashSet<&str> = explicit
        .iter()
        .copied()
        .chain(reusable.values().copied())
        .collect();

    let mut used: HashSet<String> = HashSet::new();
    let mut occurrences: HashMap<&str, usize> = HashMap::new();
    tasks
        .iter()
        .enumerate()
        .map(|(index, task)| {
            let occurrence = {
                let count = occurrences.entry(task.content.as_str()).or_default();
                *count += 1;
                *count
            };
            let requested = task.id.as_deref().filter(|id| !used.contains(*id));
            let reused = reusable
                .get(&index)
                .copied()
                .filter(|id| !used.contains(*id));
            let id = match requested.or(reused) {
                Some(id) => id.to_owned(),
                None => unique_id(&fallback_id(&task.content, occurrence), &used, &reserved),
            };
            used.insert(id.clone());
            TaskItem {
                id,
                content: task.content.clone(),
                status: task.status,
                active_form: task.active_form.clone(),
            }
        })
        .collect()
}

fn slug(content: &str) -> String {
    let mut slug = String::new();
    let mut gap = false;
    for c in content.chars() {
        if c.is_ascii_alphanumeric() {
            if gap && !slug.is_empty() {
                slug.push('_');
            }
            gap = false;
            slug.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    slug.truncate(48);
    slug.trim_end_matches('_').to_owned()
}

fn fallback_id(content: &str, occurrence: usize) -> String {
    let slug = slug(content);
    let base = if slug.is_empty() {
        "task".to_owned()
    } else if slug.starts_with(|c: char| c.is_ascii_digit()) {
        format!("task_{slug}")
    } else {
        slug
    };
    if occurrence > 1 {
        format!("{base}_{occurrence}")
    } else {
        base
    }
}

fn unique_id(base: &str, used: &HashSet<String>, reserved: &HashSet<&str>) -> String {
    let taken = |id: &str| used.contains(id) || reserved.contains(id);
    if !taken(base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|id| !taken(id))
        .unwrap_or_else(|| base.to_owned())
}

/// Why a task-list edit was refused; the message is what the model sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// More than one task would be in progress.
    #[error(
        "only one task can be in progress at a time, but {0} would be; the list was not changed"
    )]
    SeveralInProgress(usize),
    /// The id is not in the list.
    #[error("there is no task `{id}`; known ids: {known}")]
    UnknownId {
        /// The id asked for.
        id: String,
        /// The ids in the list.
        known: String,
    },
    /// An update changed nothing.
    #[error("task_update needs at least one of `content`, `status` or `activeForm`")]
    EmptyUpdate,
}

type Listener = Arc<dyn Fn(&[TaskItem], &[TaskItem]) + Send + Sync>;

/// The task list of a session, shared by the task tools and the harness. Every change calls
/// the listener with the previous and the new list (the harness emits `task_updated`).
#[derive(Default)]
pub struct TaskBoard {
    tasks: Mutex<Vec<TaskItem>>,
    listener: Mutex<Option<Listener>>,
}

impl fmt::Debug for TaskBoard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.tasks().iter()).finish()
    }
}

impl TaskBoard {
    /// An empty board.
    pub fn new() -> Self {
        TaskBoard::default()
    }

    /// Calls `listener(previous, new)` after every change.
    pub fn on_change(&self, listener: impl Fn(&[TaskItem], &[TaskItem]) + Send + Sync + 'static) {
        *lock(&self.listener) = Some(Arc::new(listener));
    }

    /// The list now.
    pub fn tasks(&self) -> Vec<TaskItem> {
        lock(&self.tasks).clone()
    }

    /// The tasks not completed yet.
    pub fn incomplete(&self) -> Vec<TaskItem> {
        lock(&self.tasks)
            .iter()
            .filter(|t| t.status != TaskStatus::Completed)
            .cloned()
            .collect()
    }

    /// Replaces the list (ids assigned by [`assign_task_ids`]).
    pub fn write(&self, tasks: &[TaskInput]) -> Result<Vec<TaskItem>, TaskError> {
        let mut current = lock(&self.tasks);
        let next = assign_task_ids(tasks, &current);
        check_in_progress(&next)?;
        let previous = std::mem::replace(&mut *current, next.clone());
        drop(current);
        self.changed(&previous, &next);
        Ok(next)
    }

    /// Replaces the list as it is, without id assignment (restoring a saved list).
    pub fn restore(&self, tasks: Vec<TaskItem>) {
        let previous = std::mem::replace(&mut *lock(&self.tasks), tasks.clone());
        self.changed(&previous, &tasks);
    }

    /// Changes one task.
    pub fn update(
        &self,
        id: &str,
        content: Option<String>,
        status: Option<TaskStatus>,
        active_form: Option<String>,
    ) -> Result<Vec<TaskItem>, TaskError> {
        if content.is_none() && status.is_none() && active_form.is_none() {
            return Err(TaskError::EmptyUpdate);
        }
        let mut current = lock(&self.tasks);
        let mut next = current.clone();
        let Some(task) = next.iter_mut().find(|t| t.id == id) else {
            return Err(TaskError::UnknownId {
                id: id.to_owned(),
                known: known_ids(&current),
            });
        };
        if let Some(content) = content {
            task.content = content;
        }
        if let Some(status) = status {
            task.status = status;
        }
        if active_form.is_some() {
            task.active_form = active_form;
        }
        check_in_progress(&next)?;
        let previous = std::mem::replace(&mut *current, next.clone());
        drop(current);
        self.changed(&previous, &next);
        Ok(next)
    }

    fn changed(&self, previous: &[TaskItem], next: &[TaskItem]) {
        let listener = lock(&self.listener).clone();
        if let Some(listener) = listener {
            listener(previous, next);
        }
    }
}

fn check_in_progress(tasks: &[TaskItem]) -> Result<(), TaskError> {
    let in_progress = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::InProgress)
        .count();
    if in_progress > 1 {
        return Err(TaskError::SeveralInProgress(in_progress));
    }
    Ok(())
}

fn known_ids(tasks: &[TaskItem]) -> String {
    if tasks.is_empty() {
        return "none (the list is empty)".to_owned();
    }
    tasks
        .iter()
        .map(|t| t.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
