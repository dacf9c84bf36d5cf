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
