#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Streaming redaction: a value split across deltas at any offset is still caught, and no
//! text is held back longer than the window.

use harness_redaction::{Operator, Redactor};

const SECRETS: &[&str] = &[
    "bob.smith@example.com",
    "4111 1111 1111 1111",
    "+44 20 7946 0958",
    "(415) 555-2671",
    "DE89 3704 0044 0532 0130 00",
    "123-45-6789",
    "192.168.10.20",
    "2001:db8::8a2e:370:7334",
    "00:1a:2b:3c:4d:5e",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "postgres://app:s3cret@db.internal:5432/prod",
    "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
    "password: hunter2",
    // New shapes, and values hidden behind look-alike characters.
    "394.208.1176 x31",
    "001-283-555-0147",
    "(11) 4706-5521",
    "675904123451",
    "ｂｏｂ＠ｅｘａｍｐｌｅ．ｃｏｍ",
    "4111\u{200B}1111\u{200B}1111\u{200B}1111",
    "bob\u{00AD}smith@example.com",
    "+44\u{00A0}20\u{00A0}7946\u{00A0}0958",
];

fn stream(redactor: &Redactor, deltas: &[&str]) -> String {
    let mut s = redactor.stream(Some("t"));
    let mut out = String::new();
    for delta in deltas {
        out += &s.push(delta).unwrap();
    }
    out + &s.finish().unwrap()
}

#[test]
fn a_secret_split_at_every_offset_is_redacted_as_in_one_piece() {
    let redactor = Redactor::new().unwrap();
    for secret in SECRETS {
        let text = format!("the value {secret} was logged; ünïcödé after.\n");
        let whole = redactor.redact(&text).unwrap().text.into_owned();
        assert!(
            !whole.contains(secret.trim_start_matches("password: ")),
            "{whole}"
        );
        let start = text.find(secret).unwrap();
        for cut in (start..=start + secret.len()).filter(|&cut| text.is_char_boundary(cut)) {
            let out = stream(&redactor, &[&text[..cut], &text[cut..]]);
            assert_eq!(out, whole, "split at {cut} of `{secret}`");
        }
    }
}

#[test]
fn byte_by_byte_deltas_give_the_same_text() {
    let redactor = Redactor::new().unwrap();
    let text = SECRETS.join(" | ") + " — fin";
    let whole = redactor.redact(&text).unwrap().text.into_owned();
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let deltas: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(stream(&redactor, &deltas), whole);
}

#[test]
fn no_delta_is_held_back_longer_than_the_window() {
    let redactor = Redactor::new().unwrap();
    let mut s = redactor.stream(None).window(64);
    // A long run of characters an entity could continue is flushed at the window.
    let mut emitted = 0;
    for _ in 0..100 {
        emitted += s.push("abcdefghij").unwrap().len();
        assert!(s.pending() <= 64, "{} bytes pending", s.pending());
    }
    emitted += s.finish().unwrap().len();
    assert_eq!(emitted, 1000);
    // Prose flows through at once: only the last word may be held.
    let mut s = redactor.stream(None);
    let out = s.push("Hello there, the build passed. Next").unwrap();
    assert_eq!(out, "Hello there, the build passed. ");
}

#[test]
fn a_keyword_in_an_earlier_delta_still_marks_the_secret() {
    let redactor = Redactor::new().unwrap();
    let out = stream(&redactor, &["config:\n  password: ", "hun", "ter2\n"]);
    assert_eq!(out, "config:\n  password: <SECRET>\n");
}

#[test]
fn a_private_key_block_is_swallowed_until_its_end_line() {
    let redactor = Redactor::new().unwrap();
    let body = "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n".repeat(40);
    let text = format!(
        "key:\n-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\ndone\n"
    );
    let mut s = redactor.stream(None).window(128);
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(37) {
        out += &s.push(std::str::from_utf8(chunk).unwrap()).unwrap();
        assert!(s.pending() <= 128);
        assert!(!out.contains("MIIE"), "key material leaked: {out}");
    }
    out += &s.finish().unwrap();
    assert_eq!(out, "key:\n<PRIVATE_KEY>\ndone\n");
}

#[test]
fn streaming_uses_the_operator_and_the_thread() {
    let redactor = Redactor::builder()
        .operator(Operator::Pseudonym)
        .build()
        .unwrap();
    let out = stream(&redactor, &["to bob@exa", "mple.com"]);
    let token = out.trim_start_matches("to ");
    assert_eq!(
        redactor.vault().lookup("t", token).as_deref(),
        Some("bob@example.com")
    );
}
