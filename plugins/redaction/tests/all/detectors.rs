#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every built-in detector: values it must find, and look-alikes it must not.

use harness_redaction::{Detector, Entity, Finding, Redactor};

fn redactor() -> Redactor {
    Redactor::new().unwrap()
}

/// The findings in `text`, as (entity, subtype, matched text).
fn found(text: &str) -> Vec<(String, Option<&'static str>, String)> {
    redactor()
        .find(text)
        .into_iter()
        .map(|f: Finding| (f.entity.to_string(), f.subtype, f.text(text).to_owned()))
        .collect()
}

/// Asserts that `value`, embedded in a sentence, is found exactly, as `entity`.
#[track_caller]
fn finds(entity: &str, value: &str) {
    for text in [
        value.to_owned(),
        format!("value: {value} end"),
        format!("({value})"),
        format!("\"{value}\","),
    ] {
        finds_in(&text, entity, value);
    }
}

/// Asserts that `value` is found whole in `text`, as `entity`.
#[track_caller]
fn finds_in(text: &str, entity: &str, value: &str) {
    let got = found(text);
    assert!(
        got.iter().any(|(e, _, v)| e == entity && v == value),
        "expected {entity} `{value}` in `{text}`, got {got:?}"
    );
}

/// Asserts that nothing of `entity` is found in `text`.
#[track_caller]
fn ignores(entity: &str, text: &str) {
    let got = found(text);
    assert!(
        !got.iter().any(|(e, _, _)| e == entity),
        "expected no {entity} in `{text}`, got {got:?}"
    );
}

#[test]
fn email_addresses() {
    for value in [
        "jane.doe@example.com",
        "j+tag@mail.example.co.uk",
        "ops_team-1@sub.domain.io",
        "A.B@EXAMPLE.ORG",
    ] {
        finds("EMAIL_ADDRESS", value);
    }
    for text in [
        "user@localhost",
        "@example.com",
        "name@-bad.com",
        "a..b@example.com is odd",
        "see foo@bar for details",
        "version 1.2@3",
    ] {
        ignores("EMAIL_ADDRESS", text);
    }
}

#[test]
fn phone_numbers_international_and_national() {
    for value in [
        "+44 20 7946 0958",
        "+1 415 555 2671",
        "+14155552671",
        "+49 30 12345678",
        "+33 (0)1 23 45 67 89",
        "+1 (415) 555-2671",
        "(415) 555-2671",
        "415-555-2671",
        "415.555.2671",
        "1-800-555-2671",
        "020 7946 0958",
        "07700 900123",
        "030 12345678",
        "089/1234567",
        "01 23 45 67 89",
        // Shapes from many countries, unassigned North American area codes, extensions.
        "001-283-555-0147",
        "394.208.1176 x31",
        "+1 115 555 2671",
        "(591)341-7776",
        "0660 412 77 31",
        "(11) 4706-5521",
        "(07911) 123456",
        "06-12345678",
        "+44(0)115 4960914",
        "+41 44 337 40 68",
        "+61-2-8377-8353",
        "+55 61 9141-7776",
        "+91 914 1777631",
        "8 (066) 907-43-91",
        "080-9141-7776",
        "00420 702 914 177",
    ] {
        finds("PHONE_NUMBER", value);
    }
    for text in [
        "+12",
        "at +00:00 UTC",
        "+80 123 456 789",
        "2024-01-15 10:23:45",
        "01.02.2024",
        "version 1.2.3.4.5",
        "id 1234567",
        "+1 115 555 267",
        "12/31/2024",
        "15.01.2024 14:30",
        "order 4827361920",
        "invoice no. 2024-004512",
        "amount 1 234 567,89",
        "version 10.2.0.1",
        "ref 12345678901234567890123",
        "1700000000123",
    ] {
        ignores("PHONE_NUMBER", text);
    }
}

#[test]
fn credit_cards_pass_luhn() {
    for value in [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111111111111111",
        "5500 0000 0000 0004",
        "3782 822463 10005",
        "6011 1111 1111 1117",
        "2223 0000 4841 0010",
        // Issuers beyond the big four, 12 to 19 digits.
        "675904123451",        // Maestro, 12 digits
        "5018 1234 5673",      // Maestro, grouped
        "213100482155679",     // JCB, 15 digits in the 2131 range
        "180012345678905",     // JCB, 1800
        "3056 930902 5904",    // Diners Club, 14
        "3530 1113 3330 0000", // JCB
        "6200 0000 0000 0005", // UnionPay
        "621234567890123457",  // UnionPay, 18
        "2200 1234 5678 9019", // Mir
        "5060991234567895",    // Verve
    ] {
        finds("CREDIT_CARD", value);
    }
    for text in [
        "4111 1111 1111 1112", // fails Luhn
        "4111-1111 1111-1111", // mixed separators
        "1700000000123",       // a timestamp in ms, no issuer
        "9111 1111 1111 1111", // no issuer range holds 9111
        "97921234567890",      // Troy's range, but Troy numbers have 16 digits
        "4444 4444 4444 4444", // one repeated digit
        "order 41111111111111111111 shipped",
    ] {
        ignores("CREDIT_CARD", text);
    }
}

#[test]
fn iban_codes_pass_mod_97_and_country_length() {
    for value in [
        "DE89 3704 0044 0532 0130 00",
        "DE89370400440532013000",
        "GB82 WEST 1234 5698 7654 32",
        "FR14 2004 1010 0505 0001 3M02 606",
        "NL91 ABNA 0417 1643 00",
    ] {
        finds("IBAN_CODE", value);
    }
    for text in [
        "DE89 3704 0044 0532 0130 01", // checksum
        "DE89 3704 0044 0532 0130",    // too short for DE
        "XX89 3704 0044 0532 0130 00", // no such country
        "GB82WEST123456987654320000",  // too long for GB
    ] {
        ignores("IBAN_CODE", text);
    }
    // Followed by more uppercase words, the IBAN ends at its country's length.
    let got = found("pay DE89 3704 0044 0532 0130 00 EUR");
    assert_eq!(got[0].2, "DE89 3704 0044 0532 0130 00");
}

#[test]
fn us_ssns_outside_never_issued_ranges() {
    for value in ["123-45-6789", "123 45 6789", "078-05-1121", "665-12-3456"] {
        finds("US_SSN", value);
    }
    for text in [
        "000-12-3456",
        "666-12-3456",
        "900-12-3456",
        "123-00-4567",
        "123-45-0000",
        "078-05-1120",
        "123-45-6789-0",
        "123-45 6789",
    ] {
        ignores("US_SSN", text);
    }
}

#[test]
fn ip_addresses_v4_and_v6() {
    for value in ["192.168.0.1", "10.0.0.255", "8.8.8.8"] {
        finds("IP_ADDRESS", value);
    }
    for value in [
        "2001:db8::8a2e:370:7334",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "fe80::1ff:fe23:4567:890a",
        "::ffff:192.0.2.128",
    ] {
        finds("IP_ADDRESS", value);
    }
    assert_eq!(found("host 10.1.2.3 up")[0].1, Some("ipv4"));
    assert_eq!(found("host 2001:db8::1:2 up")[0].1, Some("ipv6"));
    for text in [
        "256.1.1.1",
        "1.2.3",
        "version 1.2.3.4.5",
        "01.02.03.04",
        "10:23:45",
        "std::io::Result",
        "a::b",
        "fe80:",
    ] {
        ignores("IP_ADDRESS", text);
    }
}

#[test]
fn mac_addresses() {
    for value in [
        "00:1a:2b:3c:4d:5e",
        "00-1A-2B-3C-4D-5E",
        "a4:5e:60:c1:2b:3f",
        "001a.2b3c.4d5e",
    ] {
        finds("MAC_ADDRESS", value);
    }
    for text in [
        "00:1a:2b-3c:4d:5e",
        "00:1a:2b:3c:4d",
        "aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99",
        "10:23:45",
    ] {
        ignores("MAC_ADDRESS", text);
    }
}

#[test]
fn urls_with_credentials() {
    for value in [
        "postgres://app:s3cret@db.internal:5432/prod",
        "https://user:pa55word@example.com/path?q=1",
        "redis://:hunter22@cache:6379",
    ] {
        let text = format!("connect to {value}. Then");
        let got = found(&text);
        let expected = if value.starts_with("redis://:") {
            // An empty user name still carries a password, but the URL form needs a user.
            continue;
        } else {
            value
        };
        assert!(
            got.iter().any(|(e, _, v)| e == "URL" && v == expected),
            "{got:?}"
        );
    }
    for text in [
        "https://example.com/path",
        "ssh://git@github.com/org/repo",
        "https://example.com:8080/a",
    ] {
        ignores("URL", text);
    }
}

#[test]
fn bitcoin_addresses_with_checksums() {
    for value in [
        "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
        "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
        "bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297",
    ] {
        finds("CRYPTO", value);
    }
    for text in [
        "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3",
        "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLz",
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5",
        "1111111111111111111111111111",
    ] {
        ignores("CRYPTO", text);
    }
}

#[test]
fn jwts() {
    let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
    finds("JWT", jwt);
    // A header that does not decode to a JSON object with `alg` is not a JWT.
    ignores(
        "JWT",
        "eyJub3RhdG9rZW4iOjF9.eyJzdWIiOiIxIn0.abcdefghijklmnop",
    );
    ignores("JWT", "eyJhbGciOiJIUzI1NiJ9");
}

#[test]
fn private_key_blocks() {
    let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\naFDrBz9vFqU4yC8mQ7dQh0WnIb0zK4MbBsJ5m7a1Hpy0L6y5VpzQ8y1s8rZ2M4Jc\n-----END RSA PRIVATE KEY-----";
    finds("PRIVATE_KEY", key);
    let openssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----";
    finds("PRIVATE_KEY", openssh);
    // JSON-escaped newlines, as in a tool's JSON output.
    let escaped =
        r"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----";
    finds("PRIVATE_KEY", escaped);
    ignores(
        "PRIVATE_KEY",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    );
    ignores(
        "PRIVATE_KEY",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
    );
}

#[test]
fn api_keys_by_provider() {
    let cases = [
        ("AKIAIOSFODNN7EXAMPLE", "aws_access_key_id"),
        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "github"),
        (
            "github_pat_11ABCDEFG0123456789abc_0123456789abcdefghijABCDEFGHIJ0123456789abcdefghijklmnopqrstu",
            "github",
        ),
        (
            "sk-proj-4fKx8Tq2Lm9Zr7Vw1Yb3Nc6Hd0Pj5Sg2Ue8Ia4Ok1Qt7Rx9Wz3Mv6Bn0Cy5El",
            "openai",
        ),
        (
            "sk-ant-api03-Xy7Kq2Lm9Zr7Vw1Yb3Nc6Hd0Pj5Sg2Ue8Ia4Ok1Qt7Rx9Wz3Mv6Bn0Cy5ElQ-AA",
            "anthropic",
        ),
        (
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "slack",
        ),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe"),
        ("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "google"),
    ];
    for (value, subtype) in cases {
        finds("API_KEY", value);
        let got = found(&format!("key {value} here"));
        assert_eq!(got[0].1, Some(subtype), "{value}: {got:?}");
    }
    let got = found("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    assert_eq!(
        got,
        vec![(
            "API_KEY".to_owned(),
            Some("aws_secret_access_key"),
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_owned()
        )]
    );
    let hook = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX";
    assert_eq!(found(hook)[0].1, Some("slack_webhook"));
    for text in [
        "AKIA1234",                                 // too short
        "sk-learn-classifier-model-for-production", // words, not a key
        "ghp_short",
        "AIzaShort",
        "xoxb-notatoken",
    ] {
        ignores("API_KEY", text);
    }
}

#[test]
fn keyword_secrets_are_narrowed_to_the_value() {
    let cases = [
        ("password: hunter2", "hunter2"),
        ("DB_PASSWORD=Tr0ub4dor&3", "Tr0ub4dor&3"),
        (
            r#"{"api_key": "q8Xz3LmN0pR7sT2vW9yB"}"#,
            "q8Xz3LmN0pR7sT2vW9yB",
        ),
        ("client_secret => 'a9F3kL0pQ7xZ2mN8'", "a9F3kL0pQ7xZ2mN8"),
        (
            "Authorization: Bearer 7fG2kL9pQ4xZ8mN3vB6cD1",
            "7fG2kL9pQ4xZ8mN3vB6cD1",
        ),
        ("auth_token := Zm9vYmFyYmF6cXV4MTIz", "Zm9vYmFyYmF6cXV4MTIz"),
    ];
    for (text, value) in cases {
        let got = found(text);
        assert_eq!(got.len(), 1, "{text}: {got:?}");
        assert_eq!(got[0].0, "SECRET", "{text}");
        assert_eq!(got[0].2, value, "{text}");
    }
    // Specific beats generic: a known key format after a keyword keeps its entity.
    let got = found("api_key=AKIAIOSFODNN7EXAMPLE");
    assert_eq!(got[0].0, "API_KEY");
    assert_eq!(got[0].1, Some("aws_access_key_id"));
    for text in [
        "password: required",
        "password = ********",
        "token: string",
        "password=${DB_PASSWORD}",
        "password = get_password()",
        "password: self.password",
        "secret_key=abc",
        "token = aaaaaaaaaaaaaaaaaaaa",
        "the password is hunter2",
    ] {
        ignores("SECRET", text);
    }
}

#[test]
fn findings_carry_byte_offsets_and_never_overlap() {
    let text = "é mail ü@x.de, bob@example.com; card 4111111111111111 — ok";
    let findings = redactor().find(text);
    assert_eq!(findings.len(), 2);
    for pair in findings.windows(2) {
        assert!(pair[0].end <= pair[1].start);
    }
    let email = &findings[0];
    assert_eq!(&text[email.start..email.end], "bob@example.com");
    assert_eq!(email.entity, Entity::EmailAddress);
}

#[test]
fn a_url_with_credentials_wins_over_the_email_inside_it() {
    let got = found("db https://admin:secret99@db.example.com/x");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "URL");
}

#[test]
fn disabled_and_only_entities() {
    let r = Redactor::builder()
        .disable(Entity::EmailAddress)
        .build()
        .unwrap();
    assert!(
        r.find("bob@example.com 123-45-6789")
            .iter()
            .all(|f| f.entity != Entity::EmailAddress)
    );
    let r = Redactor::builder().only([Entity::UsSsn]).build().unwrap();
    let findings = r.find("bob@example.com 123-45-6789");
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].entity, Entity::UsSsn);
}

/// A small deterministic generator for the robustness test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn arbitrary_text_never_panics_and_findings_are_on_char_boundaries() {
    let r = redactor();
    let alphabet: Vec<char> = "0123456789abcdefABCDEF:.-@+() =/_\"'\néü€😀xyzKQ#$%&*!?~"
        .chars()
        .collect();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    for _ in 0..3000 {
        let len = (rng.next() % 64) as usize;
        let text: String = (0..len)
            .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
            .collect();
        let out = r.redact(&text).unwrap();
        let mut last = 0;
        for f in &out.findings {
            assert!(f.start >= last && f.start < f.end && f.end <= text.len());
            assert!(text.is_char_boundary(f.start) && text.is_char_boundary(f.end));
            last = f.end;
        }
    }
}

#[test]
fn dates_and_times_are_skipped_but_do_not_hide_what_follows() {
    let text = "2024-01-15T10:23:45.123+02:00 call 415-555-2671 at 10:30 from 192.168.0.1, \
                2024-01-15 10:23:45 ssn 123-45-6789";
    let got: Vec<String> = found(text).into_iter().map(|(e, _, _)| e).collect();
    assert_eq!(got, ["PHONE_NUMBER", "IP_ADDRESS", "US_SSN"]);
}

#[test]
fn runs_of_short_numbers_are_skipped_but_do_not_hide_what_follows() {
    // Short numbers joined by spaces or dots (status codes, latencies, amounts, versions) are
    // skipped whole by the scanner; whatever starts inside or after them is still found.
    for (text, entity, value) in [
        (
            "GET /a/12345 200 1234ms then call 555 0147",
            "PHONE_NUMBER",
            "555 0147",
        ),
        ("1 234-567-8901", "PHONE_NUMBER", "1 234-567-8901"),
        ("at 1.2 10.0.0.1 ok", "IP_ADDRESS", "10.0.0.1"),
        ("ip 1.2.3.4,", "IP_ADDRESS", "1.2.3.4"),
        ("v 12.5 mac 1234.5678.9abc", "MAC_ADDRESS", "1234.5678.9abc"),
        ("12 34 56 ssn 123-45-6789", "US_SSN", "123-45-6789"),
        ("3 4 (415) 555-0147", "PHONE_NUMBER", "(415) 555-0147"),
        (
            "1.5ms 200 x 394.208.1176 x31",
            "PHONE_NUMBER",
            "394.208.1176 x31",
        ),
    ] {
        finds_in(text, entity, value);
    }
}

#[test]
fn a_card_after_numbers_read_as_a_phone_is_hidden_whole() {
    // `15.01 4111 1111` alone is a possible phone number; the card that goes on after it must
    // not be cut there (its last groups were shown).
    let text = "paid 15.01 4111 1111 1111 1111 ok";
    let got = found(text);
    assert!(
        got.iter()
            .any(|(e, _, v)| e == "CREDIT_CARD" && v == "15.01 4111 1111 1111 1111"),
        "{got:?}"
    );
}

#[test]
fn look_alike_characters_do_not_hide_an_entity() {
    for (text, entity, value) in [
        (
            "mail ｂｏｂ＠ｅｘａｍｐｌｅ．ｃｏｍ now",
            "EMAIL_ADDRESS",
            "ｂｏｂ＠ｅｘａｍｐｌｅ．ｃｏｍ",
        ),
        (
            "card 4111\u{200B}1111\u{200B}1111\u{200B}1111 ok",
            "CREDIT_CARD",
            "4111\u{200B}1111\u{200B}1111\u{200B}1111",
        ),
        (
            "to bob\u{00AD}smith@exam\u{00AD}ple.com today",
            "EMAIL_ADDRESS",
            "bob\u{00AD}smith@exam\u{00AD}ple.com",
        ),
        (
            "call +44\u{00A0}20\u{202F}7946\u{2009}0958 now",
            "PHONE_NUMBER",
            "+44\u{00A0}20\u{202F}7946\u{2009}0958",
        ),
        (
            "ssn １２３－４５－６７８９.",
            "US_SSN",
            "１２３－４５－６７８９",
        ),
        (
            "tel 555\u{2013}0147 \u{FEFF}",
            "PHONE_NUMBER",
            "555\u{2013}0147",
        ),
    ] {
        finds_in(text, entity, value);
        let out = redactor().redact(text).unwrap().text.into_owned();
        assert!(!out.contains(value), "{out}");
    }
}

#[test]
fn an_email_local_part_past_64_bytes_is_redacted_whole() {
    let local =
        "a.very.long.local.part.that.goes.on.and.on.past.the.sixty.four.bytes.rfc5321.allows";
    assert!(local.len() > 64);
    let text = format!("write to {local}@example.com today");
    assert_eq!(
        redactor().redact(&text).unwrap().text,
        "write to <EMAIL_ADDRESS> today"
    );
}

#[test]
fn a_deny_list_entry_inside_a_longer_finding_hides_the_union() {
    let r = Redactor::builder()
        .detector(Detector::deny_list("PERSON", ["alice"]))
        .build()
        .unwrap();
    let out = r
        .redact("from alice.liddell@example.com and alice")
        .unwrap();
    assert_eq!(out.text, "from <EMAIL_ADDRESS> and <PERSON>");
    // The same span: the custom detector names it.
    let r = Redactor::builder()
        .detector(Detector::regex("CONTACT", r"bob@example\.com"))
        .build()
        .unwrap();
    assert_eq!(r.redact("bob@example.com").unwrap().text, "<CONTACT>");
    // Overlapping from the left: the union of both.
    let r = Redactor::builder()
        .detector(Detector::regex("TICKET", r"ref 4111"))
        .build()
        .unwrap();
    assert_eq!(
        r.redact("ref 4111 1111 1111 1111 ok").unwrap().text,
        "<CREDIT_CARD> ok"
    );
}

mod adding_detectors {
    use harness_redaction::{Detector, Redactor};
    use proptest::prelude::*;

    /// Pieces of text: words, separators, and values the built-ins find.
    const PIECES: &[&str] = &[
        "alice",
        "liddell",
        "bob",
        "smith",
        "order",
        "call",
        "card",
        " ",
        " ",
        ", ",
        ".",
        "-",
        "@",
        ":",
        "\n",
        "example.com",
        "alice.liddell@example.com",
        "bob@example.com",
        "4111 1111 1111 1111",
        "+44 20 7946 0958",
        "(415) 555-2671",
        "123-45-6789",
        "10.0.0.1",
        "2024-01-15",
        "4827361920",
        "06-12345678",
        "ｂｏｂ＠ｅｘ．ｃｏｍ",
        "\u{200B}",
        "\u{00A0}",
        "password: hunter2!",
        "ünï",
        "12",
        "555",
    ];

    /// Patterns for random regex detectors.
    const PATTERNS: &[&str] = &[
        r"[a-z]+",
        r"[0-9]{2,4}",
        r"[a-z]+@",
        r"\d+ \d+",
        r"[0-9]{3}-",
        r"e\w+",
        r"\.com",
        r"1111 1111",
        r"[^ ]{3}",
        r"liddell@ex",
        r"\d",
        r":\s*\w+",
    ];

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(PIECES), 1..24).prop_map(|p| p.concat())
    }

    fn detector() -> impl Strategy<Value = Detector> {
        prop_oneof![
            prop::collection::vec(prop::sample::select(PIECES), 1..4)
                .prop_map(|values| Detector::deny_list("DENY", values)),
            prop::sample::select(PATTERNS).prop_map(|p| Detector::regex("CUSTOM", p)),
        ]
    }

    /// Which bytes of `text` the redactor hides.
    fn hidden(redactor: &Redactor, text: &str) -> Vec<bool> {
        let mut hidden = vec![false; text.len()];
        for f in redactor.find(text) {
            hidden[f.start..f.end].iter_mut().for_each(|h| *h = true);
        }
        hidden
    }

    proptest! {
        #[test]
        fn never_reveals_a_byte(
            text in text(),
            base in prop::collection::vec(detector(), 0..3),
            extra in prop::collection::vec(detector(), 1..4),
        ) {
            let build = |detectors: &[Detector]| {
                detectors
                    .iter()
                    .cloned()
                    .fold(Redactor::builder(), |b, d| b.detector(d))
                    .build()
                    .unwrap()
            };
            let without = hidden(&build(&base), &text);
            let all: Vec<Detector> = base.iter().chain(&extra).cloned().collect();
            let with = hidden(&build(&all), &text);
            for (at, (&before, &after)) in without.iter().zip(&with).enumerate() {
                prop_assert!(!before || after, "byte {at} of {text:?} is shown once {extra:?} are added");
            }
        }
    }
}
