//! PII and secret redaction for the harness: detectors, operators, a pseudonym vault,
//! streaming redaction and the [`Redaction`] plugin.
//!
//! Add the plugin and every tool result and tool error is redacted before the model sees it:
//!
//! ```
//! use harness_redaction::Redaction;
//! use harness_tags::tags::MessageToolResult;
//! use harness_tags::{KernelMessage, Pipeline, ToolResultCtx};
//!
//! let pipeline = Pipeline::builder().plugin(Redaction::default()).build()?;
//!
//! let result = KernelMessage::tool_result(
//!     "call_1",
//!     "crm_lookup",
//!     "owner: jane.doe@example.com, card 4111 1111 1111 1111, key AKIAIOSFODNN7EXAMPLE",
//!     false,
//! );
//! let outcome = pipeline
//!     .emit::<MessageToolResult>(result, &ToolResultCtx::default())
//!     .now()
//!     .map_err(|_| "redaction handlers are synchronous")??;
//! assert_eq!(
//!     outcome.into_payload().map(|m| m.content().to_owned()).as_deref(),
//!     Some("owner: <EMAIL_ADDRESS>, card <CREDIT_CARD>, key <API_KEY>"),
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Or redact any text with [`redact`] (the default detectors) or a configured [`Redactor`]:
//!
//! ```
//! let text = harness_redaction::redact("call +44 20 7946 0958 or mail bob@example.com")?;
//! assert_eq!(text, "call <PHONE_NUMBER> or mail <EMAIL_ADDRESS>");
//! # Ok::<(), harness_redaction::RedactionError>(())
//! ```
//!
//! # Detectors
//!
//! | entity | what | validation |
//! |---|---|---|
//! | `EMAIL_ADDRESS` | `local@domain.tld` | labels, TLD of 2 to 24 letters |
//! | `PHONE_NUMBER` | `+44 20 7946 0958`, `001-283-555-0147`, `(415) 555-0100 x31`, `0660 412 77 31`, `(11) 4706-5521`, `8 (066) 907-43-91` | a country code and a length its numbering plan allows (libphonenumber's data, see below); national shapes by strength, weighed by the words before them |
//! | `CREDIT_CARD` | 12 to 19 digits, bare or grouped by spaces or dashes | an issuer range that allows the length (Visa, Mastercard, Amex, Discover, Diners, JCB, UnionPay, Maestro, Mir, RuPay, Verve, Troy, ...), Luhn |
//! | `IBAN_CODE` | `DE89 3704 0044 0532 0130 00` | the country's length, mod 97 |
//! | `US_SSN` | `123-45-6789`, `123 45 6789` | area not 000, 666 or 9xx; group not 00; serial not 0000 |
//! | `IP_ADDRESS` | IPv4 and IPv6 (subtype `ipv4`/`ipv6`) | octets up to 255; IPv6 parsed; not inside version strings |
//! | `MAC_ADDRESS` | `00:1a:2b:3c:4d:5e`, `00-1A-...`, `001a.2b3c.4d5e` | one kind of separator |
//! | `URL` | URLs with credentials, `scheme://user:password@host/...` | |
//! | `CRYPTO` | Bitcoin `1...`, `3...`, `bc1...` | base58check (double SHA-256); bech32/bech32m |
//! | `JWT` | `eyJ...eyJ...sig` | the header decodes to JSON with `alg` |
//! | `PRIVATE_KEY` | PEM and PGP private key blocks | |
//! | `API_KEY` | subtypes `aws_access_key_id`, `aws_secret_access_key`, `github`, `openai`, `anthropic`, `slack`, `slack_webhook`, `stripe`, `google` | provider formats |
//! | `SECRET` | `password: ...`, `api_key=...`, `Bearer ...` (subtypes `keyword`, `bearer`) | passwords mix character classes; other secrets need length and entropy |
//!
//! Phone numbers prefer recall: a number counts when its length is *possible* for its
//! country (as libphonenumber's `isPossibleNumber`), assigned or not. The country codes,
//! their lengths and the trunk prefixes come from the `phonenumber` crate, the Rust port of
//! libphonenumber's metadata, copied into a table that a test keeps equal to the crate's data
//! (loading the crate's database costs 150 ms at run time; the table costs nothing). Shapes
//! without a country code (`0660 412 77 31`, `(11) 4706-5521`, `555-0147`) have a strength:
//! strong ones are always phone numbers, medium ones unless the words just before them name
//! something else (order, invoice, id, amount, version, ...), weak ones only after a phone
//! word (phone, tel, call, mobile, fax, Telefon, téléphone, teléfono, 電話, ...; for a CSV
//! field, its column header). Dates, times, versions, IPv4 addresses, card- and SSN-shaped
//! numbers and digits inside longer runs are not phone numbers. The card table, with the
//! lengths each issuer range allows, is in `src/detect/card.rs`.
//!
//! `tests/all/accuracy/outside.jsonl` holds 12,000 samples of text nobody here wrote (Faker's
//! values in 17 locales, in sentences, JSON, logs and CSV, with look-alikes); the test
//! `accuracy` reports precision and recall per entity on it and fails below recall 0.95
//! (phone numbers 0.90) or precision 0.90.
//!
//! Custom detectors ([`Detector::regex`], [`Detector::deny_list`]) and an allow-list
//! ([`RedactorBuilder::allow`]) complete them. The overlap rule is documented on the engine
//! below.
//!
//! # Engine
//!
//! Detection runs on a normalized view: fullwidth forms (`ｂｏｂ＠ｅｘａｍｐｌｅ．ｃｏｍ`) become
//! ASCII, zero-width characters and soft hyphens are dropped, non-breaking and other Unicode
//! spaces and hyphens become ASCII ones, and every finding is mapped back to the original
//! bytes, so `4111<ZWSP>1111<ZWSP>1111<ZWSP>1111` is one card finding over all of them.
//!
//! The built-in detectors are found in one forward pass over the bytes: a loop that skips
//! every byte that cannot begin an entity (letters, spaces, most punctuation, all non-ASCII
//! bytes, eight at a time) and stops only at digits and at `@`, `:`, `=`, `+`, `(`, where it
//! tries just the rules that can match there, matching numeric shapes by hand and skipping
//! dates and times whole. The detectors with a literal prefix (`eyJ`, `AKIA`, `ghp_`, `sk-`,
//! `xox`, `AIza`, `Bearer`, `-----BEGIN`, ...) are found by an Aho-Corasick search for those
//! prefixes, each hit confirmed by the rule's regex anchored there. Validators (Luhn, mod 97,
//! checksums, ranges, entropy) run after a match. Word boundaries are ASCII
//! (`[A-Za-z0-9_]`), so non-ASCII text is as fast as ASCII text. Each custom detector is
//! searched on its own. `cargo run --release -p harness-bench -- redaction` compares the
//! engine with one `RegexSet::matches` pass over the same patterns.
//!
//! Overlaps: findings never overlap, and adding a detector never shows a byte that was
//! hidden. Overlapping findings merge into one over their union, named after the longest
//! (a deny-list `alice` inside `alice.liddell@example.com` hides the whole address, as
//! `<EMAIL_ADDRESS>`); among equally long ones custom detectors (deny-lists first) come
//! before built-ins, and among built-ins the table order (private keys, JWTs, URLs, API
//! keys, secrets, emails, IBANs, Bitcoin, MACs, IPs, cards, SSNs, phones) decides. A
//! candidate its validator rejects gives way to the next shape that can start there, and a
//! rejected card-, SSN- or IBAN-shaped number is skipped whole. A keyword secret is narrowed
//! to its value, and when a specific detector matches the whole value (an AWS key after
//! `api_key=`) the finding takes that detector's entity. Values on the allow-list are
//! skipped. An email's local part is hidden whole, however long.
//!
//! # Operators
//!
//! [`Operator`]: replace (`<EMAIL_ADDRESS>`), a fixed text (`••••••`), mask (keep the last N
//! characters), hash (keyed HMAC-SHA256, `<EMAIL_ADDRESS_7f3a1c>`, the same within a thread),
//! remove, keep, and pseudonym: a hash token remembered in the [`Vault`], which the plugin's
//! `tool.call` handler turns back into the real value, so a tool can act on data the model
//! never saw.
//!
//! # Where the plugin applies
//!
//! See [`Target`]: `message.tool-result` and `message.tool-error` by default;
//! `message.user-task`, `message.assistant`, `model.request`, `observation.*` and
//! `display.tool-result` (default operator `••••••`) on request, each with its own operator
//! if wanted. Every handler is fail-closed.
//!
//! # Streaming
//!
//! [`StreamRedactor`] redacts text deltas as they arrive; a value split across deltas is
//! still caught (look-alike characters included) and no text is held back more than the
//! window.
//!
//! # Command line
//!
//! `cargo run -p harness-examples --example redact [-- --json] < file` redacts standard
//! input; [`Report`] is its JSON output.

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

mod detect;
mod entity;
mod error;
mod live;
mod operator;
mod plugin;
mod redactor;
mod stream;
mod vault;

use std::sync::LazyLock;

use serde::Serialize;

pub use detect::{Detector, Finding};
pub use entity::Entity;
pub use error::RedactionError;
pub use live::MAX_LIVE_STREAMS;
pub use operator::Operator;
pub use plugin::{CustomPattern, DenyList, Redaction, RedactionConfig, Target, TargetPolicy};
pub use redactor::{Redacted, Redactor, RedactorBuilder};
pub use stream::{DEFAULT_WINDOW, StreamRedactor};
pub use vault::Vault;

static DEFAULT: LazyLock<Result<Redactor, RedactionError>> = LazyLock::new(Redactor::new);

/// The default redactor: every built-in detector, `Replace`.
pub fn default_redactor() -> Result<&'static Redactor, RedactionError> {
    DEFAULT.as_ref().map_err(Clone::clone)
}

/// Redacts `text` with the default redactor: every finding becomes `<ENTITY_TYPE>`.
pub fn redact(text: &str) -> Result<String, RedactionError> {
    Ok(default_redactor()?.redact(text)?.text.into_owned())
}

/// What the `redact` command prints with `--json`: the findings (byte offsets into the
/// input) and the redacted text.
///
/// ```
/// let report = harness_redaction::report("mail bob@example.com")?;
/// assert_eq!(
///     serde_json::to_string(&report).unwrap(),
///     r#"{"findings":[{"entity_type":"EMAIL_ADDRESS","start":5,"end":20,"score":1.0}],"text":"mail <EMAIL_ADDRESS>"}"#
/// );
/// # Ok::<(), harness_redaction::RedactionError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// What was found.
    pub findings: Vec<Finding>,
    /// The redacted text.
    pub text: String,
}

/// Redacts `text` with the default redactor and reports the findings.
pub fn report(text: &str) -> Result<Report, RedactionError> {
    Redactor::report_with(default_redactor()?, text)
}

impl Redactor {
    /// Redacts `text` and reports the findings, for the `--json` output.
    pub fn report_with(&self, text: &str) -> Result<Report, RedactionError> {
        let out = self.redact(text)?;
        Ok(Report {
            text: out.text.into_owned(),
            findings: out.findings,
        })
    }
}
