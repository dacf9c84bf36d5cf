//! Canonical JSON: the same value always renders to the same text.

use std::fmt::Write as _;

use serde_json::Value;

/// Renders `value` compactly with object keys sorted at every depth, so that two calls with
/// the same arguments in another key order compare equal.
///
/// ```
/// use serde_json::json;
/// use harness_core::kernel::canonical_json;
///
/// let a = json!({"b": {"y": 1, "x": [2, {"d": 0, "c": 1}]}, "a": null});
/// let b = json!({"a": null, "b": {"x": [2, {"c": 1, "d": 0}], "y": 1}});
/// assert_eq!(canonical_json(&a), canonical_json(&b));
/// assert_eq!(canonical_json(&a), r#"{"a":null,"b":{"x":[2,{"c":1,"d":0}],"y":1}}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (position, (key, value)) in entries.into_iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::String(text) => write_string(text, out),
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

fn write_string(text: &str, out: &mut String) {
    // `Value`'s Display escapes exactly as JSON requires.
    let _ = write!(out, "{}", Value::String(text.to_owned()));
}
