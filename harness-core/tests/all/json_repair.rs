//! JSON repair of what models get wrong.

use harness_core::kernel::*;
use serde_json::json;

#[test]
fn repairs_what_models_get_wrong() {
    let cases = [
        (r#"{"a": 1,}"#, json!({"a": 1})),
        (r#"{"a": [1, 2,], "b": 2,}"#, json!({"a": [1, 2], "b": 2})),
        (
            "{'a': 'it\\'s', \"b\": \"say \\\"hi\\\"\"}",
            json!({"a": "it's", "b": "say \"hi\""}),
        ),
        ("{a: 1, b_c: \"x\"}", json!({"a": 1, "b_c": "x"})),
        (
            "{\"ok\": True, \"no\": False, \"nil\": None}",
            json!({"ok": true, "no": false, "nil": null}),
        ),
        (
            "Sure! Here are the args: {\"path\": \"x\"} Let me know.",
            json!({"path": "x"}),
        ),
        ("{\"path\": \"x\" // the file\n}", json!({"path": "x"})),
        (
            "{\"a\": {\"b\": [1, {\"c\": 2",
            json!({"a": {"b": [1, {"c": 2}]}}),
        ),
        ("{\"text\": \"unterminated", json!({"text": "unterminated"})),
        (
            "{\"text\": \"line\nbreak\"}",
            json!({"text": "line\nbreak"}),
        ),
        ("[1, 2, 3", json!([1, 2, 3])),
        ("```\n{\"a\": 1}\n```", json!({"a": 1})),
        (
            "{\"msg\": \"don't touch 'quotes' or True\"}",
            json!({"msg": "don't touch 'quotes' or True"}),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(repair_json(input), Some(expected), "{input}");
    }
}

#[test]
fn gives_up_on_what_is_not_json() {
    for input in ["", "hello", "path = x", "{{{"] {
        let repaired = repair_json(input);
        assert!(
            repaired.is_none() || input == "{{{",
            "{input} -> {repaired:?}"
        );
    }
}

proptest::proptest! {
    /// Outside bytes never panic the repair, and whatever it returns is JSON that prints and
    /// parses back to itself (the CI-side smoke of the `json_repair` fuzz target).
    #[test]
    fn whatever_it_returns_is_json(text in proptest::prelude::any::<String>()) {
        check_round_trip(&text)?;
    }

    #[test]
    fn json_like_text_is_repaired_or_refused(text in r#"[\[\]{}:,"' a-z0-9.\\\-`]{0,80}"#) {
        check_round_trip(&text)?;
    }
}

fn check_round_trip(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
    if let Some(value) = repair_json(text) {
        let printed = serde_json::to_string(&value).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&printed).unwrap();
        proptest::prop_assert_eq!(parsed, value);
    }
    Ok(())
}
