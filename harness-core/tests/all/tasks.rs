//! Task ids: slugs, repeats, reuse of earlier ids, explicit ids.

use harness_core::task::*;
use std::sync::Arc;
use std::sync::Mutex;

fn input(id: Option<&str>, content: &str) -> TaskInput {
    TaskInput {
        id: id.map(str::to_owned),
        content: content.to_owned(),
        status: TaskStatus::Pending,
        active_form: None,
    }
}

fn ids(items: &[TaskItem]) -> Vec<&str> {
    items.iter().map(|t| t.id.as_str()).collect()
}

#[test]
fn slugs_repeats_and_fallbacks() {
    let tasks = assign_task_ids(
        &[
            input(None, "Fix the bug in `parse()`!"),
            input(None, "Fix the bug in `parse()`!"),
            input(None, "!!!"),
            input(None, "42 things"),
            input(None, &"long ".repeat(20)),
        ],
        &[],
    );
    assert_eq!(
        ids(&tasks),
        [
            "fix_the_bug_in_parse",
            "fix_the_bug_in_parse_2",
            "task",
            "task_42_things",
            "long_long_long_long_long_long_long_long_long_lon"
        ]
    );
}

#[test]
fn explicit_ids_win_duplicates_get_fallbacks_and_previous_ids_are_reused() {
    let first = assign_task_ids(&[input(None, "Write tests"), input(None, "Ship")], &[]);
    let second = assign_task_ids(
        &[
            input(Some("ship"), "Ship it now"),
            input(None, "Write tests"),
            input(Some("ship"), "Ship again"),
            input(None, "Ship"),
        ],
        &first,
    );
    assert_eq!(
        ids(&second),
        ["ship", "write_tests", "ship_again", "ship_2"]
    );
}

#[test]
fn the_board_enforces_one_in_progress_and_reports_unknown_ids() {
    let board = TaskBoard::new();
    let changes = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&changes);
    board.on_change(move |_, _| *counter.lock().unwrap() += 1);
    board.write(&[input(None, "a"), input(None, "b")]).unwrap();
    board
        .update("a", None, Some(TaskStatus::InProgress), None)
        .unwrap();
    let error = board
        .update("b", None, Some(TaskStatus::InProgress), None)
        .unwrap_err();
    assert_eq!(error, TaskError::SeveralInProgress(2));
    assert_eq!(board.tasks()[1].status, TaskStatus::Pending, "unchanged");
    let error = board
        .update("zzz", None, Some(TaskStatus::Completed), None)
        .unwrap_err();
    assert_eq!(error.to_string(), "there is no task `zzz`; known ids: a, b");
    assert_eq!(
        board.update("a", None, None, None).unwrap_err(),
        TaskError::EmptyUpdate
    );
    assert_eq!(*changes.lock().unwrap(), 2);
    assert_eq!(board.incomplete().len(), 2);
}
