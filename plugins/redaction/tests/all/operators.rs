#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Operators, custom detectors, the allow-list and configuration errors.

use harness_redaction::{Detector, Entity, Operator, RedactionError, Redactor};

const TEXT: &str = "mail bob@example.com or call +44 20 7946 0958";

fn with(operator: Operator) -> Redactor {
    Redactor::builder().operator(operator).build().unwrap()
}

#[test]
fn replace_names_the_entity() {
    let out = with(Operator::Replace).redact(TEXT).unwrap();
    assert_eq!(out.text, "mail <EMAIL_ADDRESS> or call <PHONE_NUMBER>");
    assert!(out.changed());
}

#[test]
fn replace_with_a_fixed_text() {
    let out = with(Operator::bullets()).redact(TEXT).unwrap();
    assert_eq!(out.text, "mail •••••• or call ••••••");
}

#[test]
fn mask_keeps_the_last_characters_and_never_a_whole_value() {
    let out = with(Operator::mask(4)).redact(TEXT).unwrap();
    assert_eq!(out.text, "mail ***********.com or call ************0958");
    let out = with(Operator::Mask {
        ch: '#',
        keep_last: 0,
    })
    .redact("ssn 123-45-6789")
    .unwrap();
    assert_eq!(out.text, "ssn ###########");
    // A value not longer than `keep_last` is masked entirely.
    let out = with(Operator::mask(40)).redact("ssn 123-45-6789").unwrap();
    assert_eq!(out.text, "ssn ***********");
}

#[test]
fn remove_deletes_and_keep_only_reports() {
    let out = with(Operator::Remove).redact(TEXT).unwrap();
    assert_eq!(out.text, "mail  or call ");
    let out = with(Operator::Keep).redact(TEXT).unwrap();
    assert_eq!(out.text, TEXT);
    assert!(!out.changed());
    assert_eq!(out.findings.len(), 2);
}

fn token_of(text: &str) -> &str {
    let start = text.find('<').unwrap();
    let end = text[start..].find('>').unwrap() + start + 1;
    &text[start..end]
}

#[test]
fn hash_is_keyed_and_stable_within_a_thread() {
    let r = Redactor::builder()
        .operator(Operator::Hash)
        .hash_key("k1")
        .build()
        .unwrap();
    let a = r.redact_in("bob@example.com", Some("t1")).unwrap();
    let b = r.redact_in("to: bob@example.com!", Some("t1")).unwrap();
    let c = r.redact_in("alice@example.com", Some("t1")).unwrap();
    let other_thread = r.redact_in("bob@example.com", Some("t2")).unwrap();
    let token = token_of(&a.text).to_owned();
    assert!(token.starts_with("<EMAIL_ADDRESS_") && token.len() == "<EMAIL_ADDRESS_>".len() + 6);
    assert_eq!(token_of(&b.text), token);
    assert_ne!(token_of(&c.text), token);
    assert_ne!(token_of(&other_thread.text), token);
    // The same key gives the same token in another redactor; another key does not.
    let same = Redactor::builder()
        .operator(Operator::Hash)
        .hash_key("k1")
        .build()
        .unwrap();
    assert_eq!(
        token_of(&same.redact_in("bob@example.com", Some("t1")).unwrap().text),
        token
    );
    let other = Redactor::builder()
        .operator(Operator::Hash)
        .hash_key("k2")
        .build()
        .unwrap();
    assert_ne!(
        token_of(&other.redact_in("bob@example.com", Some("t1")).unwrap().text),
        token
    );
}

#[test]
fn pseudonyms_are_reversible_through_the_vault() {
    let r = with(Operator::Pseudonym);
    let out = r
        .redact_in("bob@example.com and 4111 1111 1111 1111", Some("t"))
        .unwrap();
    let email = token_of(&out.text).to_owned();
    assert!(email.starts_with("<EMAIL_ADDRESS_"));
    assert_eq!(r.vault().len("t"), 2);
    assert_eq!(
        r.vault().lookup("t", &email).as_deref(),
        Some("bob@example.com")
    );
    let back = r.restore(Some("t"), &format!("send to {email}")).unwrap();
    assert_eq!(back, "send to bob@example.com");
    // Another thread does not know the pseudonym.
    assert_eq!(r.restore(Some("u"), &email), None);
    r.vault().forget("t");
    assert_eq!(r.restore(Some("t"), &email), None);
}

#[test]
fn a_full_vault_is_an_error_not_a_leak() {
    let r = Redactor::builder()
        .operator(Operator::Pseudonym)
        .vault_capacity(1)
        .build()
        .unwrap();
    let first = r
        .redact_in("a@example.com", Some("t"))
        .unwrap()
        .text
        .into_owned();
    let error = r.redact_in("b@example.com", Some("t")).unwrap_err();
    assert!(
        matches!(error, RedactionError::VaultFull { max: 1, .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("thread `t`") && message.contains("vault_capacity"),
        "the error names the thread and the setting: {message}"
    );
    // A value the vault holds keeps its pseudonym; other threads have their own room.
    assert_eq!(r.redact_in("a@example.com", Some("t")).unwrap().text, first);
    r.redact_in("b@example.com", Some("u")).unwrap();
    let outside = r.redact_in("c@example.com", None).unwrap();
    assert!(!outside.text.contains("c@example.com"));
    let error = r.redact_in("d@example.com", None).unwrap_err();
    assert!(error.to_string().contains("outside any thread"), "{error}");

    let error = Redactor::builder().vault_capacity(0).build().unwrap_err();
    assert!(
        matches!(
            error,
            RedactionError::Config {
                setting: "vault_capacity",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn per_entity_operators() {
    let r = Redactor::builder()
        .entity_operator(Entity::PhoneNumber, Operator::mask(4))
        .build()
        .unwrap();
    let out = r.redact(TEXT).unwrap();
    assert_eq!(out.text, "mail <EMAIL_ADDRESS> or call ************0958");
}

#[test]
fn custom_regex_deny_list_and_allow_list() {
    let r = Redactor::builder()
        .detector(Detector::regex(
            "EMPLOYEE_ID",
            r"(?-u:\b)EMP-[0-9]{6}(?-u:\b)",
        ))
        .detector(Detector::deny_list("PROJECT", ["Falcon", "Blue Heron"]))
        .allow("support@example.com")
        .build()
        .unwrap();
    let out = r
        .redact(
            "EMP-123456 on Blue Heron (not Falconry); mail support@example.com or bob@example.com",
        )
        .unwrap();
    assert_eq!(
        out.text,
        "<EMPLOYEE_ID> on <PROJECT> (not Falconry); mail support@example.com or <EMAIL_ADDRESS>"
    );
    // A custom detector wins over a built-in at the same start.
    let r = Redactor::builder()
        .detector(Detector::regex("TEST_CARD", "4111 1111 1111 1111"))
        .build()
        .unwrap();
    assert_eq!(r.redact("4111 1111 1111 1111").unwrap().text, "<TEST_CARD>");
}

#[test]
fn invalid_configuration_is_an_error_that_says_what_to_fix() {
    let error = Redactor::builder()
        .detector(Detector::regex("BROKEN", "(unclosed"))
        .build()
        .unwrap_err();
    assert!(matches!(&error, RedactionError::InvalidPattern { entity, .. } if entity == "BROKEN"));
    assert!(error.to_string().contains("fix the pattern"), "{error}");
    let error = Redactor::builder().hash_len(2).build().unwrap_err();
    assert!(error.to_string().contains("use 4 to 32"), "{error}");
}

#[test]
fn text_over_the_limit_is_an_error() {
    let r = Redactor::builder().max_input_bytes(8).build().unwrap();
    let error = r.redact("more than eight bytes").unwrap_err();
    assert!(matches!(
        error,
        RedactionError::TooLarge { len: 21, max: 8 }
    ));
}

#[test]
fn text_without_findings_is_borrowed() {
    let out = Redactor::new()
        .unwrap()
        .redact("nothing to see here")
        .unwrap();
    assert!(!out.changed());
    assert!(out.findings.is_empty());
}

#[test]
fn operators_deserialize_from_json_config() {
    let op: Operator = serde_json::from_str(r##"{"type":"mask","ch":"#","keepLast":2}"##).unwrap();
    assert_eq!(
        op,
        Operator::Mask {
            ch: '#',
            keep_last: 2
        }
    );
    let op: Operator = serde_json::from_str(r#"{"type":"pseudonym"}"#).unwrap();
    assert_eq!(op, Operator::Pseudonym);
}
