//! Detection: the built-in and custom detectors and the engine that runs them.
//!
//! # Engine
//!
//! Detection runs on a normalized view of the text (`normalize.rs`): fullwidth forms become
//! ASCII, zero-width characters and soft hyphens are dropped, Unicode spaces and hyphens
//! become ASCII ones; findings are mapped back to the original bytes.
//!
//! Built-in detectors (`builtin.rs`) each have a reference regex and a validator. They are
//! found in one forward pass over the text (`scan.rs`): a loop that skips, eight bytes at a
//! time, every byte that cannot start an entity and stops only at digits and at
//! `@ : = + (`, where it tries by hand just the shapes that can start there (numbers with
//! their groupings, hex chains, dates and times that it skips whole, an email's domain, a
//! keyword before a separator, ...). Phone numbers are checked against the numbering plans
//! (`phone.rs`), cards against the issuer table (`card.rs`), both with the words before them
//! (`context.rs`). Detectors with a literal prefix (`eyJ`, `AKIA`, `ghp_`, `sk-`, `xox`,
//! `AIza`, `Bearer`, `-----BEGIN`, ...) are found by an Aho-Corasick search for those
//! prefixes, each hit confirmed by the rule's regex anchored there. Validators (Luhn, mod 97,
//! checksums, ranges, entropy) then accept, narrow or reject each candidate. Each custom
//! detector (a regex, or a deny-list compiled into one) is searched on its own.
//!
//! # Overlap rule
//!
//! Findings never overlap, and adding a detector never shows a byte that was hidden:
//! 1. each custom detector finds its matches as if it were alone, and the built-ins find
//!    theirs in one pass: among built-ins, at the same start the table order of
//!    [`Entity::BUILTIN`] decides (private keys, JWTs, URLs, API keys, secrets, emails,
//!    IBANs, Bitcoin, MACs, IPs, cards, SSNs, phones), a candidate its validator rejects
//!    gives way to the next shape that can start at the same place, a rejected card-, SSN-
//!    or IBAN-shaped number is skipped whole (the numbers inside it are not phone numbers),
//!    and the pass goes on where an accepted finding ends;
//! 2. a keyword secret (`password: ...`, `Bearer ...`) is narrowed to its value, and when a
//!    specific detector matches the whole value (an AWS key after `api_key=`), the finding
//!    takes that detector's entity: specific beats generic;
//! 3. findings whose value is on the allow-list are dropped;
//! 4. overlapping findings merge into one that covers their union: a deny-list `alice` and
//!    the email `alice.liddell@example.com` give one finding over the whole address. The
//!    merged finding is named after its longest part; among equally long parts, custom
//!    detectors (deny-lists first, then regexes in the order they were added) come before
//!    the built-ins.

mod builtin;
mod card;
mod context;
pub(crate) mod digest;
pub(crate) mod normalize;
mod phone;
mod phone_plan;
mod scan;
pub(crate) mod validate;

use std::collections::HashSet;
use std::fmt;

use regex_automata::Input;
use regex_automata::meta::{self, Regex};
use regex_automata::nfa::thompson::WhichCaptures;
use serde::Serialize;

use builtin::{RULES, Rule};
use normalize::Normalized;
use scan::{LITERAL_RULES, Scanner};

use crate::entity::Entity;
use crate::error::RedactionError;

/// One detected entity: its type and its byte range in the text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// What was found.
    #[serde(rename = "entity_type")]
    pub entity: Entity,
    /// A finer kind where the detector knows one: the provider of an API key (`github`,
    /// `aws_access_key_id`, ...), `ipv4`/`ipv6`, `international`/`national` phones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtype: Option<&'static str>,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
    /// How sure the detector is, from 0 to 1 (checksummed formats score 1).
    pub score: f32,
}

impl Finding {
    /// The finding's text in `text` (the text it was found in).
    pub fn text<'t>(&self, text: &'t str) -> &'t str {
        text.get(self.start..self.end).unwrap_or_default()
    }
}

/// A custom detector: a regex or a deny-list of literal values, with the entity it finds.
///
/// ```
/// use harness_redaction::{Detector, Redactor};
///
/// let redactor = Redactor::builder()
///     .detector(Detector::regex("EMPLOYEE_ID", r"\bEMP-[0-9]{6}\b"))
///     .detector(Detector::deny_list("PROJECT", ["Falcon", "Blue Heron"]))
///     .build()?;
/// let out = redactor.redact("EMP-123456 works on Blue Heron")?;
/// assert_eq!(out.text, "<EMPLOYEE_ID> works on <PROJECT>");
/// # Ok::<(), harness_redaction::RedactionError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Detector {
    pub(crate) entity: Entity,
    pub(crate) kind: DetectorKind,
    pub(crate) score: f32,
}

#[derive(Clone, Debug)]
pub(crate) enum DetectorKind {
    Regex(String),
    Deny(Vec<String>),
}

impl Detector {
    /// A regex detector. The syntax is the `regex` crate's; prefer ASCII word boundaries
    /// (`(?-u:\b)`) over `\b`, which makes the engine slower on non-ASCII text.
    pub fn regex(entity: impl Into<Entity>, pattern: impl Into<String>) -> Detector {
        Detector {
            entity: entity.into(),
            kind: DetectorKind::Regex(pattern.into()),
            score: 0.8,
        }
    }

    /// A deny-list: these literal values are always redacted (case-sensitive; whole words
    /// where a value starts or ends with a letter or digit).
    pub fn deny_list<I, S>(entity: impl Into<Entity>, values: I) -> Detector
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Detector {
            entity: entity.into(),
            kind: DetectorKind::Deny(values.into_iter().map(Into::into).collect()),
            score: 1.0,
        }
    }

    /// Sets the score reported with this detector's findings.
    pub fn score(mut self, score: f32) -> Detector {
        self.score = score.clamp(0.0, 1.0);
        self
    }

    fn into_rule(self) -> Rule {
        let pattern = match self.kind {
            DetectorKind::Regex(pattern) => pattern,
            DetectorKind::Deny(values) => deny_pattern(&values),
        };
        Rule {
            entity: self.entity,
            subtype: None,
            pattern: pattern.into(),
            score: self.score,
            check: validate::any,
            reclassify: false,
        }
    }
}

/// An alternation of escaped literals, each with ASCII word boundaries where it begins or
/// ends with a word character.
fn deny_pattern(values: &[String]) -> String {
    let mut alternatives: Vec<String> = values
        .iter()
        .filter(|v| !v.is_empty())
        .map(|value| {
            let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            let mut alt = String::new();
            if word(value.chars().next()) {
                alt.push_str(r"(?-u:\b)");
            }
            escape_into(&mut alt, value);
            if word(value.chars().last()) {
                alt.push_str(r"(?-u:\b)");
            }
            alt
        })
        .collect();
    // Longer literals first, so a value that extends another one wins.
    alternatives.sort_by_key(|alt| std::cmp::Reverse(alt.len()));
    if alternatives.is_empty() {
        // Matches nothing.
        return r"[a&&b]".to_owned();
    }
    format!("(?:{})", alternatives.join("|"))
}

/// Appends `value` with every regex meta character escaped.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        if matches!(
            c,
            '\\' | '.'
                | '+'
                | '*'
                | '?'
                | '('
                | ')'
                | '|'
                | '['
                | ']'
                | '{'
                | '}'
                | '^'
                | '$'
                | '#'
                | '&'
                | '-'
                | '~'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
}

/// The compiled detectors: the structural scanner for the built-ins, one regex per custom
/// detector, and the allow-list.
pub(crate) struct Engine {
    scanner: Scanner,
    custom: Vec<(Regex, Rule)>,
    allow: HashSet<String>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("custom", &self.custom.len())
            .field("allow", &self.allow.len())
            .finish_non_exhaustive()
    }
}

/// Compiles patterns into one multi-pattern regex; the error names the pattern at fault.
fn compile(patterns: &[&str]) -> Result<Regex, (Option<usize>, String)> {
    Regex::builder()
        .configure(
            meta::Config::new()
                .which_captures(WhichCaptures::Implicit)
                .nfa_size_limit(Some(64 << 20)),
        )
        .build_many(patterns)
        .map_err(|error| (error.pattern().map(|p| p.as_usize()), error.to_string()))
}

impl Engine {
    /// Compiles the enabled built-ins and the custom detectors.
    pub(crate) fn new(
        custom: Vec<Detector>,
        enabled: impl Fn(&Entity) -> bool,
        allow: HashSet<String>,
    ) -> Result<Engine, RedactionError> {
        let rules = builtin::rules();
        let mut on = [false; RULES];
        for (slot, rule) in on.iter_mut().zip(&rules) {
            *slot = enabled(&rule.entity);
        }
        // Each literal-prefixed rule on its own: an anchored search of one pattern runs on
        // the lazy DFA, where one pattern of a multi-pattern regex would not.
        let literals = LITERAL_RULES
            .into_iter()
            .filter(|&id| on[id as usize])
            .map(|id| {
                compile(&[rules[id as usize].pattern.as_ref()])
                    .map(|regex| (id, regex))
                    .map_err(|(_, message)| RedactionError::Build { message })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let scanner = Scanner::new(rules, literals, on);

        // Deny-lists first, then regexes, in the order they were added. Each detector is
        // searched on its own, so one never hides another's match (see the overlap rule).
        let (deny, regexes): (Vec<Detector>, Vec<Detector>) = custom
            .into_iter()
            .partition(|d| matches!(d.kind, DetectorKind::Deny(_)));
        let custom = deny
            .into_iter()
            .chain(regexes)
            .map(|detector| {
                let rule = detector.into_rule();
                let regex = compile(&[rule.pattern.as_ref()]).map_err(|(_, message)| {
                    RedactionError::InvalidPattern {
                        entity: rule.entity.name().to_owned(),
                        message,
                    }
                })?;
                Ok((regex, rule))
            })
            .collect::<Result<Vec<_>, RedactionError>>()?;
        Ok(Engine {
            scanner,
            custom,
            allow,
        })
    }

    /// The pattern of every rule: custom ones first, then the built-ins' reference regexes.
    pub(crate) fn patterns(&self) -> impl Iterator<Item = &str> {
        self.custom
            .iter()
            .map(|(_, rule)| rule)
            .chain(self.scanner.rules())
            .map(|r| r.pattern.as_ref())
    }

    /// Finds every entity in `text`, in order, without overlaps, on the normalized view of
    /// the text (see `normalize.rs`) with offsets into `text`.
    pub(crate) fn find(&self, text: &str, out: &mut Vec<Finding>) {
        let Some(view) = Normalized::of(text) else {
            self.find_in(text, out);
            return;
        };
        let from = out.len();
        self.find_in(&view.text, out);
        for finding in &mut out[from..] {
            finding.start = view.start(finding.start);
            finding.end = view.end(finding.end);
        }
    }

    fn find_in(&self, text: &str, out: &mut Vec<Finding>) {
        let hay = text.as_bytes();
        let allowed = |f: &Finding| self.allow.contains(f.text(text));
        if self.custom.is_empty() {
            self.scanner.scan(hay, out);
            if !self.allow.is_empty() {
                out.retain(|f| !allowed(f));
            }
            return;
        }
        // Every detector's findings, custom ones first: at the same start, the first listed
        // names a union of equally long findings.
        let mut all = Vec::new();
        for (regex, rule) in &self.custom {
            let mut at = 0;
            while at < hay.len() {
                let Some(m) = regex.search(&Input::new(hay).range(at..)) else {
                    break;
                };
                at = m.end().max(m.start() + 1);
                if m.is_empty()
                    || !text.is_char_boundary(m.start())
                    || !text.is_char_boundary(m.end())
                {
                    continue;
                }
                all.push(Finding {
                    entity: rule.entity.clone(),
                    subtype: None,
                    start: m.start(),
                    end: m.end(),
                    score: rule.score,
                });
            }
        }
        self.scanner.scan(hay, &mut all);
        all.retain(|f| !allowed(f));
        // A stable sort keeps the custom-first order among findings with the same start.
        all.sort_by_key(|f| f.start);
        union(all, out);
    }
}

/// Appends findings sorted by start to `out`, overlapping ones merged into one finding that
/// covers their union (so adding a detector never shows a byte another one hides). The
/// merged finding takes the entity, subtype and score of its longest part; among equally
/// long parts, the first one.
pub(crate) fn union(sorted: impl IntoIterator<Item = Finding>, out: &mut Vec<Finding>) {
    let mut current: Option<(Finding, usize)> = None;
    for finding in sorted {
        let len = finding.end - finding.start;
        match &mut current {
            Some((merged, longest)) if finding.start < merged.end => {
                let end = merged.end.max(finding.end);
                if len > *longest {
                    *longest = len;
                    let start = merged.start;
                    *merged = Finding { start, ..finding };
                }
                merged.end = end;
            }
            _ => {
                out.extend(current.take().map(|(merged, _)| merged));
                current = Some((finding, len));
            }
        }
    }
    out.extend(current.map(|(merged, _)| merged));
}
