//! Healing: repairing a tool call the model got slightly wrong, so the run does not stall on a
//! typo.
//!
//! Stages, in order, each recorded in the [`HealingReport`]:
//! 1. the tool name: exact, an alias, the same name ignoring case and separators, or a unique
//!    name within edit distance 2;
//! 2. arguments that are not JSON: repaired ([`repair_json`](super::repair_json));
//! 3. when the arguments do not validate against the tool's schema: unwrap a single wrapper
//!    key, rename near-miss keys, map a lone unknown key onto a lone missing required
//!    parameter, and coerce values to the types the schema asks for.
//!
//! The healed call is validated again; if it still fails, healing gives up with a message
//! the model can act on.

use harness_tags::{HealingKind, HealingReport, HealingStep, ToolCall};
use serde_json::{Map, Value};

use super::json_repair::repair_json;
use crate::tool::{RegisteredTool, ToolRegistry};

/// What healing made of a tool call.
#[derive(Clone, Debug, PartialEq)]
pub enum Healing {
    /// The call was valid as it came.
    Valid(ToolCall),
    /// The call was repaired; the report says how.
    Repaired(HealingReport),
    /// The call could not be repaired.
    Failed(HealingFailure),
}

/// A call healing could not repair.
#[derive(Clone, Debug, PartialEq)]
pub struct HealingFailure {
    /// What went wrong: `unknown-tool`, `invalid-json` or `invalid-arguments`.
    pub trigger: &'static str,
    /// What the model is told, so it can fix the call itself.
    pub message: String,
    /// The tool the call resolved to, if it resolved to one.
    pub tool_name: Option<String>,
}

/// Heals `call` against the tools in `tools`.
///
/// ```
/// use harness_core::kernel::{heal_tool_call, Healing};
/// use harness_core::tool::{tool_fn, ToolContext, ToolError, ToolRegistry};
/// use serde_json::json;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Args { path: String, limit: u32 }
///
/// let mut tools = ToolRegistry::new();
/// tools.register(tool_fn("read_file", "Reads a file.", |_: Args, _: ToolContext| async {
///     Ok::<_, ToolError>("")
/// })).unwrap();
///
/// let call = harness_tags::ToolCall {
///     id: "c1".into(),
///     name: "ReadFile".into(),
///     arguments: json!({"filePath": "a.rs", "limit": "10"}),
/// };
/// let Healing::Repaired(report) = heal_tool_call(&call, &tools) else { panic!() };
/// assert_eq!(report.tool_name, "read_file");
/// assert_eq!(report.arguments, json!({"path": "a.rs", "limit": 10}));
/// ```
pub fn heal_tool_call(call: &ToolCall, tools: &ToolRegistry) -> Healing {
    let mut steps = Vec::new();
    let Some(tool) = resolve_tool(&call.name, tools, &mut steps) else {
        return Healing::Failed(HealingFailure {
            trigger: "unknown-tool",
            message: unknown_tool_message(&call.name, tools),
            tool_name: None,
        });
    };
    let name = tool.tool.name().to_owned();

    let mut arguments = match &call.arguments {
        Value::String(text) => match repair_json(text) {
            Some(value) => {
                steps.push(HealingStep {
                    kind: HealingKind::JsonRepair,
                    detail: "repaired the arguments text into JSON".to_owned(),
                });
                value
            }
            None => {
                return Healing::Failed(HealingFailure {
                    trigger: "invalid-json",
                    message: format!(
                        "The arguments of your `{name}` call are not valid JSON and could not be \
                         repaired. Send them as one JSON object: {}.",
                        describe_schema(tool.tool.input_schema())
                    ),
                    tool_name: Some(name),
                });
            }
        },
        Value::Null => Value::Object(Map::new()),
        other => other.clone(),
    };

    if !tool.validator.is_valid(&arguments) {
        heal_arguments(&mut arguments, tool, &mut steps);
    }
    if !tool.validator.is_valid(&arguments) {
        let problems: Vec<String> = tool
            .validator
            .iter_errors(&arguments)
            .take(3)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!("{error} (at `{path}`)")
                }
            })
            .collect();
        return Healing::Failed(HealingFailure {
            trigger: "invalid-arguments",
            message: format!(
                "Invalid arguments for `{name}`: {}. Expected {}.",
                problems.join("; "),
                describe_schema(tool.tool.input_schema())
            ),
            tool_name: Some(name),
        });
    }

    if steps.is_empty() {
        return Healing::Valid(ToolCall {
            id: call.id.clone(),
            name,
            arguments,
        });
    }
    Healing::Repaired(HealingReport {
        call_id: call.id.clone(),
        original_name: call.name.clone(),
        original_arguments: call.arguments.clone(),
        tool_name: name,
        arguments,
        steps,
    })
}

fn resolve_tool<'t>(
    name: &str,
    tools: &'t ToolRegistry,
    steps: &mut Vec<HealingStep>,
) -> Option<&'t RegisteredTool> {
    if let Some(tool) = tools.get(name) {
        return Some(tool);
    }
    let mut record = |tool: &'t RegisteredTool, how: &str| {
        steps.push(HealingStep {
            kind: HealingKind::ToolName,
            detail: format!("`{name}` is {how} `{}`", tool.tool.name()),
        });
        Some(tool)
    };
    if let Some(tool) = tools
        .iter()
        .find(|t| t.tool.aliases().iter().any(|alias| alias == name))
    {
        return record(tool, "an alias of");
    }
    let wanted = normalize(name);
    if let Some(tool) = tools.iter().find(|t| normalize(t.tool.name()) == wanted) {
        return record(tool, "a spelling of");
    }
    let candidates = tools.iter().map(|t| (normalize(t.tool.name()), t));
    let tool = closest(&wanted, candidates, 2)?;
    record(tool, "a near miss of")
}

/// The unique candidate within `max` edits of `wanted`, if there is one.
fn closest<'c, T>(
    wanted: &str,
    candidates: impl Iterator<Item = (String, &'c T)>,
    max: usize,
) -> Option<&'c T> {
    let mut best: Option<(usize, &'c T)> = None;
    let mut tie = false;
    for (candidate, item) in candidates {
        let distance = edit_distance(wanted, &candidate);
        if distance > max {
            continue;
        }
        match best {
            Some((best_distance, _)) if distance > best_distance => {}
            Some((best_distance, _)) if distance == best_distance => tie = true,
            _ => {
                best = Some((distance, item));
                tie = false;
            }
        }
    }
    if tie {
        None
    } else {
        best.map(|(_, item)| item)
    }
}

fn heal_arguments(arguments: &mut Value, tool: &RegisteredTool, steps: &mut Vec<HealingStep>) {
    let schema = tool.tool.input_schema();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();

    if !arguments.is_object()
        && properties.len() == 1
        && let Some(only) = properties.keys().next()
    {
        steps.push(HealingStep {
            kind: HealingKind::RemapMissingParameter,
            detail: format!("wrapped the bare value as `{only}`"),
        });
        let mut wrapped = Map::new();
        wrapped.insert(only.clone(), arguments.take());
        *arguments = Value::Object(wrapped);
    }
    let Value::Object(args) = arguments else {
        return;
    };

    unwrap_wrapper(args, &properties, steps);
    rename_near_misses(args, &properties, steps);
    remap_lone_missing(args, &properties, &required, steps);
    coerce_types(args, &properties, steps);
}

fn unwrap_wrapper(
    args: &mut Map<String, Value>,
    properties: &Map<String, Value>,
    steps: &mut Vec<HealingStep>,
) {
    if args.len() != 1 || properties.is_empty() {
        return;
    }
    let Some((key, Value::Object(inner))) = args.iter().next() else {
        return;
    };
    if properties.contains_key(key) {
        return;
    }
    let known = inner.keys().filter(|k| properties.contains_key(*k)).count();
    if known == 0 && inner.len() != properties.len() {
        return;
    }
    let (key, inner) = (key.clone(), inner.clone());
    steps.push(HealingStep {
        kind: HealingKind::UnwrapWrapper,
        detail: format!("removed the wrapper key `{key}`"),
    });
    *args = inner;
}

fn rename_near_misses(
    args: &mut Map<String, Value>,
    properties: &Map<String, Value>,
    steps: &mut Vec<HealingStep>,
) {
    let unknown: Vec<String> = args
        .keys()
        .filter(|k| !properties.contains_key(*k))
        .cloned()
        .collect();
    for key in unknown {
        let wanted = normalize(&key);
        let free = properties
            .keys()
            .filter(|p| !args.contains_key(*p))
            .map(|p| (normalize(p), p));
        let Some(target) = closest(&wanted, free, 2).cloned() else {
            continue;
        };
        if let Some(value) = args.remove(&key) {
            steps.push(HealingStep {
                kind: HealingKind::RenameArgument,
                detail: format!("renamed `{key}` to `{target}`"),
            });
            args.insert(target, value);
        }
    }
}

fn remap_lone_missing(
    args: &mut Map<String, Value>,
    properties: &Map<String, Value>,
    required: &[String],
    steps: &mut Vec<HealingStep>,
) {
    let missing: Vec<&String> = required.iter().filter(|r| !args.contains_key(*r)).collect();
    let unknown: Vec<String> = args
        .keys()
        .filter(|k| !properties.contains_key(*k))
        .cloned()
        .collect();
    let ([target], [source]) = (missing.as_slice(), unknown.as_slice()) else {
        return;
    };
    let Some(value) = args.get(source) else {
        return;
    };
    let expected = properties.get(*target).map(types_of).unwrap_or_default();
    if !expected.is_empty()
        && coerce(value, &expected).is_none()
        && !matches_types(value, &expected)
    {
        return;
    }
    if let Some(value) = args.remove(source) {
        steps.push(HealingStep {
            kind: HealingKind::RemapMissingParameter,
            detail: format!("used `{source}` as the missing required `{target}`"),
        });
        args.insert((*target).clone(), value);
    }
}

fn coerce_types(
    args: &mut Map<String, Value>,
    properties: &Map<String, Value>,
    steps: &mut Vec<HealingStep>,
) {
    for (key, value) in args.iter_mut() {
        let Some(schema) = properties.get(key) else {
            continue;
        };
        let expected = types_of(schema);
        if expected.is_empty() || matches_types(value, &expected) {
            continue;
        }
        if let Some(coerced) = coerce(value, &expected) {
            steps.push(HealingStep {
                kind: HealingKind::TypeCoercion,
                detail: format!(
                    "converted `{key}` from {} to {}",
                    type_name(value),
                    type_name(&coerced)
                ),
            });
            *value = coerced;
        }
    }
}

/// The JSON types a property schema allows (`type` as a string or a list; `anyOf`/`oneOf` of
/// typed schemas, as schemars writes `Option<T>`).
fn types_of(schema: &Value) -> Vec<String> {
    let mut types = Vec::new();
    match schema.get("type") {
        Some(Value::String(single)) => types.push(single.clone()),
        Some(Value::Array(many)) => {
            types.extend(many.iter().filter_map(|t| t.as_str().map(str::to_owned)))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get(key) {
            for option in options {
                types.extend(types_of(option));
            }
        }
    }
    types
}

fn matches_types(value: &Value, types: &[String]) -> bool {
    types.iter().any(|t| match (t.as_str(), value) {
        ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("null", Value::Null) => true,
        ("object", Value::Object(_)) | ("array", Value::Array(_)) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    })
}

fn coerce(value: &Value, types: &[String]) -> Option<Value> {
    types
        .iter()
        .find_map(|target| match (target.as_str(), value) {
            ("integer", Value::String(text)) => text.trim().parse::<i64>().ok().map(Value::from),
            ("integer", Value::Number(n)) => n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| Value::from(f as i64)),
            ("number", Value::String(text)) => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
            ("boolean", Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" => Some(Value::Bool(true)),
                "false" | "no" | "0" => Some(Value::Bool(false)),
                _ => None,
            },
            ("boolean", Value::Number(n)) => match n.as_i64() {
                Some(1) => Some(Value::Bool(true)),
                Some(0) => Some(Value::Bool(false)),
                _ => None,
            },
            ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
            ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
            ("array", Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(array @ Value::Array(_)) => Some(array),
                _ => Some(Value::Array(vec![value.clone()])),
            },
            ("array", scalar @ (Value::Number(_) | Value::Bool(_) | Value::Object(_))) => {
                Some(Value::Array(vec![scalar.clone()]))
            }
            ("object", Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(object @ Value::Object(_)) => Some(object),
                _ => None,
            },
            _ => None,
        })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Lowercase, without `_`, `-`, spaces and dots: `filePath`, `file_path` and `File-Path` agree.
fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' ' | '.'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

fn unknown_tool_message(name: &str, tools: &ToolRegistry) -> String {
    let available: Vec<&str> = tools.names().collect();
    if available.is_empty() {
        format!("There is no tool named `{name}`, and no tool is available in this step.")
    } else {
        format!(
            "There is no tool named `{name}`. Available tools: {}.",
            available.join(", ")
        )
    }
}

/// A short description of what a tool's input looks like, for messages to the model.
fn describe_schema(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "a JSON object".to_owned();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, property)| {
            let types = types_of(property);
            let types: Vec<&str> = types
                .iter()
                .map(String::as_str)
                .filter(|t| *t != "null")
                .collect();
            let kind = if types.is_empty() {
                "any".to_owned()
            } else {
                types.join(" or ")
            };
            let needed = if required.contains(&name.as_str()) {
                ", required"
            } else {
                ""
            };
            format!("`{name}` ({kind}{needed})")
        })
        .collect();
    format!("a JSON object with {}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
