//! Repairing the almost-JSON that models produce as tool arguments.

use serde_json::Value;

/// Parses `text` as JSON, repairing what models commonly get wrong: markdown code fences,
/// prose around the object, comments, single-quoted strings, unquoted keys, Python literals
/// (`True`, `False`, `None`), trailing commas, an unterminated string and missing closing
/// brackets. Returns `None` if the text still does not parse.
///
/// ```
/// use harness_core::kernel::repair_json;
/// use serde_json::json;
///
/// let repaired = repair_json("```json\n{path: 'src/main.rs', recursive: True,}\n```").unwrap();
/// assert_eq!(repaired, json!({"path": "src/main.rs", "recursive": true}));
/// assert_eq!(repair_json(r#"{"a": [1, 2"#).unwrap(), json!({"a": [1, 2]}));
/// assert!(repair_json("no json here").is_none());
/// ```
pub fn repair_json(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    let body = extract_body(text)?;
    let rewritten = rewrite(body);
    serde_json::from_str(&rewritten).ok()
}

/// The part of the text that should hold the JSON: inside a code fence if there is one, from
/// the first `{` or `[` on.
fn extract_body(text: &str) -> Option<&str> {
    let mut body = text.trim();
    if let Some(start) = body.find("```") {
        let after = &body[start + 3..];
        let after = after
            .strip_prefix("json")
            .or_else(|| after.strip_prefix("JSON"))
            .unwrap_or(after);
        body = match after.find("```") {
            Some(end) => &after[..end],
            None => after,
        };
    }
    let start = body.find(['{', '['])?;
    let body = &body[start..];
    // Drop prose after the last closing bracket, when there is one.
    match body.rfind(['}', ']']) {
        Some(end) if !body[end + 1..].trim().is_empty() && !looks_unclosed(&body[..=end]) => {
            Some(&body[..=end])
        }
        _ => Some(body),
    }
}

fn looks_unclosed(body: &str) -> bool {
    let opens = body.matches(['{', '[']).count();
    let closes = body.matches(['}', ']']).count();
    opens > closes
}

/// One pass over the text, outside strings fixing quotes, keys, literals, comments and commas,
/// then closing whatever is still open.
fn rewrite(body: &str) -> String {
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::with_capacity(body.len() + 8);
    let mut stack: Vec<char> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                i = copy_string(&chars, i, &mut out);
                continue;
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            '{' | '[' => {
                stack.push(if c == '{' { '}' } else { ']' });
                out.push(c);
            }
            '}' | ']' => {
                trim_trailing_comma(&mut out);
                if stack.last() == Some(&c) {
                    stack.pop();
                    out.push(c);
                }
            }
            ',' => {
                // A comma straight after another or after an opening bracket is dropped.
                let last = out.trim_end().chars().last();
                if !matches!(last, Some(',') | Some('{') | Some('[')) {
                    out.push(',');
                }
            }
            c if c.is_alphabetic() || c == '_' || c == '$' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = chars[i..].iter().find(|c| !c.is_whitespace());
                if next == Some(&':') && stack.last() == Some(&'}') {
                    out.push('"');
                    out.push_str(&word);
                    out.push('"');
                } else {
                    out.push_str(match word.as_str() {
                        "True" => "true",
                        "False" => "false",
                        "None" | "undefined" => "null",
                        other => other,
                    });
                }
                continue;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    trim_trailing_comma(&mut out);
    while let Some(close) = stack.pop() {
        trim_trailing_comma(&mut out);
        out.push(close);
    }
    out
}

/// Copies a string literal starting at `start` (single or double quoted) as a double-quoted
/// JSON string; an unterminated string is closed. Returns the index after it.
fn copy_string(chars: &[char], start: usize, out: &mut String) -> usize {
    let quote = chars[start];
    out.push('"');
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            match chars.get(i + 1) {
                // `\'` is not a JSON escape; the quote needs none inside double quotes.
                Some('\'') => out.push('\''),
                Some(next) => {
                    out.push('\\');
                    out.push(*next);
                }
                None => {}
            }
            i += 2;
            continue;
        }
        if c == quote {
            out.push('"');
            return i + 1;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            other => out.push(other),
        }
        i += 1;
    }
    out.push('"');
    i
}

fn trim_trailing_comma(out: &mut String) {
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    if out.ends_with(',') {
        out.pop();
    }
}
