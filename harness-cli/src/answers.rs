//! Turning what a person types into answers for approvals and suspended tools, and the
//! answers a headless run gives on its own.
//!
//! | waits on | typed | answer |
//! |---|---|---|
//! | an approval | `y`, `n [why]`, `a` (`always`), `c` (`category`) | approve, decline, always allow the tool, always allow its category |
//! | `ask_user` | a number, several (`1,3`), or words | the option's label(s), or the words |
//! | `submit_plan` | `y`, or `n [what to change]` (any other text is feedback too) | `{"action": "approved"}` or `{"action": "rejected", "feedback": ...}` |
//! | `request_access` | `y` / `n` | `{"granted": true / false}` |
//! | a strategy escalation | a hint, or nothing to stop | the hint, or `null` |
//!
//! A headless `harness run` answers by itself ([`headless_approval`], [`headless_answer`]):
//! with `--yes` it approves calls and plans and grants access; without, it declines them
//! with a message the model sees. Questions get a note that no one is there to answer.

use harness_core::display::PendingSuspension;
use harness_core::harness::ESCALATION;
use harness_core::tool::ApprovalAnswer;
use serde_json::{Value, json};

/// What the model is told when a headless run declines a call.
pub const HEADLESS_DECLINE: &str = "the CLI runs headless without --yes, so calls that need \
approval do not run. Continue without it, or say what you need approved.";

/// What a headless run answers to a question.
pub const HEADLESS_QUESTION: &str = "No one is at the terminal to answer (a headless run); \
decide yourself and say what you assumed.";

/// Parses an answer to an approval prompt; the error says what to type.
pub fn parse_approval(line: &str) -> Result<ApprovalAnswer, String> {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(ApprovalAnswer::Approve),
        "n" | "no" => Ok(ApprovalAnswer::Decline {
            reason: match rest.trim() {
                "" => "the user said no".to_owned(),
                why => format!("the user said no: {why}"),
            },
        }),
        "a" | "always" => Ok(ApprovalAnswer::AlwaysAllowTool),
        "c" | "category" => Ok(ApprovalAnswer::AlwaysAllowCategory),
        _ => Err(
            "answer y (yes), n (no, optionally followed by why), a (always allow this tool) \
                  or c (always allow its category)"
                .to_owned(),
        ),
    }
}

/// Parses what was typed for a suspended tool into the answer its schema expects; the error
/// says what to type.
pub fn parse_answer(pending: &PendingSuspension, line: &str) -> Result<Value, String> {
    let line = line.trim();
    match pending.tool_name.as_str() {
        "ask_user" => ask_user_answer(&pending.suspend_payload, line),
        "submit_plan" => {
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            match word.to_ascii_lowercase().as_str() {
                "y" | "yes" | "approve" | "ok" => Ok(json!({"action": "approved"})),
                "" => Err("answer y to approve, or n followed by what to change".to_owned()),
                "n" | "no" | "reject" if rest.trim().is_empty() => {
                    Ok(json!({"action": "rejected"}))
                }
                "n" | "no" | "reject" => Ok(json!({"action": "rejected", "feedback": rest.trim()})),
                _ => Ok(json!({"action": "rejected", "feedback": line})),
            }
        }
        "request_access" => match yes_no(line) {
            Some(granted) => Ok(json!({ "granted": granted })),
            None => Err("answer y to grant access or n to refuse".to_owned()),
        },
        ESCALATION if line.is_empty() => Ok(Value::Null),
        ESCALATION => Ok(Value::String(line.to_owned())),
        _ if line.is_empty() => Err("type an answer".to_owned()),
        _ => Ok(serde_json::from_str(line).unwrap_or_else(|_| Value::String(line.to_owned()))),
    }
}

fn ask_user_answer(payload: &Value, line: &str) -> Result<Value, String> {
    if line.is_empty() {
        return Err("type an answer (or a number of the list)".to_owned());
    }
    let labels: Vec<&str> = payload
        .get("options")
        .and_then(Value::as_array)
        .map(|options| {
            options
                .iter()
                .filter_map(|o| o.get("label").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let pick = |item: &str| -> Option<String> {
        let item = item.trim();
        match item.parse::<usize>() {
            Ok(n) if (1..=labels.len()).contains(&n) => Some(labels[n - 1].to_owned()),
            _ => labels
                .iter()
                .find(|label| label.eq_ignore_ascii_case(item))
                .map(|label| (*label).to_owned()),
        }
    };
    let multi = payload.get("selectionMode").and_then(Value::as_str) == Some("multi_select");
    if multi {
        let picked: Option<Vec<String>> = line.split(',').map(pick).collect();
        return Ok(match picked {
            Some(picked) if !picked.is_empty() => json!(picked),
            _ => json!([line]),
        });
    }
    Ok(Value::String(pick(line).unwrap_or_else(|| line.to_owned())))
}

fn yes_no(line: &str) -> Option<bool> {
    match line.to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(true),
        "n" | "no" => Some(false),
        _ => None,
    }
}

/// A headless run's answer to an approval: approve with `--yes`, else decline.
pub fn headless_approval(yes: bool) -> ApprovalAnswer {
    if yes {
        ApprovalAnswer::Approve
    } else {
        ApprovalAnswer::Decline {
            reason: HEADLESS_DECLINE.to_owned(),
        }
    }
}

/// A headless run's answer to a suspended tool.
pub fn headless_answer(pending: &PendingSuspension, yes: bool) -> Value {
    match pending.tool_name.as_str() {
        "submit_plan" if yes => json!({"action": "approved"}),
        "submit_plan" => json!({
            "action": "rejected",
            "feedback": "No one can approve a plan in a headless run without --yes. Stop here \
                         and summarise the plan instead.",
        }),
        "request_access" => json!({ "granted": yes }),
        ESCALATION => Value::Null,
        _ => {
            let multi = pending
                .resume_schema
                .as_ref()
                .and_then(|s| s.get("type"))
                .and_then(Value::as_str)
                == Some("array");
            if multi {
                json!([HEADLESS_QUESTION])
            } else {
                Value::String(HEADLESS_QUESTION.to_owned())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(tool: &str, payload: Value) -> PendingSuspension {
        PendingSuspension {
            tool_call_id: "c1".into(),
            tool_name: tool.into(),
            suspend_payload: payload,
            resume_schema: None,
        }
    }

    #[test]
    fn approvals() {
        assert_eq!(parse_approval(" Y "), Ok(ApprovalAnswer::Approve));
        assert_eq!(
            parse_approval("n too risky"),
            Ok(ApprovalAnswer::Decline {
                reason: "the user said no: too risky".into()
            })
        );
        assert_eq!(
            parse_approval("always"),
            Ok(ApprovalAnswer::AlwaysAllowTool)
        );
        assert_eq!(parse_approval("c"), Ok(ApprovalAnswer::AlwaysAllowCategory));
        assert!(parse_approval("maybe").unwrap_err().contains("y (yes)"));
    }

    #[test]
    fn questions_take_numbers_labels_or_words() {
        let single = pending(
            "ask_user",
            json!({"question": "?", "options": [{"label": "Card"}, {"label": "Credit"}]}),
        );
        assert_eq!(parse_answer(&single, "2"), Ok(json!("Credit")));
        assert_eq!(parse_answer(&single, "card"), Ok(json!("Card")));
        assert_eq!(
            parse_answer(&single, "cash please"),
            Ok(json!("cash please"))
        );
        assert!(parse_answer(&single, " ").is_err());
        let multi = pending(
            "ask_user",
            json!({"question": "?", "options": [{"label": "A"}, {"label": "B"}, {"label": "C"}], "selectionMode": "multi_select"}),
        );
        assert_eq!(parse_answer(&multi, "1, 3"), Ok(json!(["A", "C"])));
        assert_eq!(
            parse_answer(&multi, "all of them"),
            Ok(json!(["all of them"]))
        );
    }

    #[test]
    fn plans_access_and_escalations() {
        let plan = pending("submit_plan", json!({}));
        assert_eq!(parse_answer(&plan, "y"), Ok(json!({"action": "approved"})));
        assert_eq!(parse_answer(&plan, "n"), Ok(json!({"action": "rejected"})));
        assert_eq!(
            parse_answer(&plan, "no add tests"),
            Ok(json!({"action": "rejected", "feedback": "add tests"}))
        );
        assert_eq!(
            parse_answer(&plan, "add tests"),
            Ok(json!({"action": "rejected", "feedback": "add tests"}))
        );
        let access = pending("request_access", json!({}));
        assert_eq!(parse_answer(&access, "yes"), Ok(json!({"granted": true})));
        assert!(parse_answer(&access, "hm").is_err());
        let stuck = pending(ESCALATION, json!({}));
        assert_eq!(parse_answer(&stuck, ""), Ok(Value::Null));
        assert_eq!(parse_answer(&stuck, "try grep"), Ok(json!("try grep")));
    }

    #[test]
    fn headless_answers_follow_yes() {
        assert_eq!(headless_approval(true), ApprovalAnswer::Approve);
        assert!(!headless_approval(false).approves());
        let plan = pending("submit_plan", json!({}));
        assert_eq!(headless_answer(&plan, true), json!({"action": "approved"}));
        assert_eq!(headless_answer(&plan, false)["action"], "rejected");
        let mut question = pending("ask_user", json!({}));
        assert_eq!(headless_answer(&question, true), json!(HEADLESS_QUESTION));
        question.resume_schema = Some(json!({"type": "array"}));
        assert_eq!(
            headless_answer(&question, false),
            json!([HEADLESS_QUESTION])
        );
    }
}
