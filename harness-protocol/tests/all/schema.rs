//! `schema/events.json` is generated from the types and must not go stale.

use std::path::PathBuf;

use serde_json::Value;

fn schema_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/events.json")
}

fn rendered() -> String {
    let mut text = serde_json::to_string_pretty(&harness_protocol::envelope_schema())
        .expect("a schema serializes");
    text.push('\n');
    text
}

#[test]
fn the_checked_in_schema_is_current() {
    let expected = rendered();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(schema_file(), &expected).expect("the schema file is writable");
        return;
    }
    let actual = std::fs::read_to_string(schema_file()).unwrap_or_default();
    assert!(
        actual == expected,
        "harness-protocol/schema/events.json is stale; regenerate it with:\n    \
         UPDATE_SCHEMA=1 cargo test -p harness-protocol --test all schema\n"
    );
}

/// Every envelope a harness publishes validates against the schema (a sample of each shape).
#[test]
fn envelopes_validate_against_the_schema() {
    let schema: Value = serde_json::from_str(&rendered()).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    for event in crate::kinds::one_of_each() {
        let envelope = harness_protocol::EventEnvelope {
            seq: 1,
            thread_id: Some("thread-1".into()),
            run_id: Some("run-1".into()),
            at: 1_700_000_000_000,
            event,
        };
        let json = serde_json::to_value(&envelope).expect("an envelope serializes");
        let errors: Vec<String> = validator
            .iter_errors(&json)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{} does not validate: {errors:?}",
            envelope.kind()
        );
    }
}
