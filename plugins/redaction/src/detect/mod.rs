//! Detection: the built-in and custom detectors and the engine that runs them.
//!
//! # Engine
//!
//! Built-in detectors (`builtin.rs`) each have a reference regex and a validator. They are
//! found in one forward pass over the text (`scan.rs`): a loop that skips, eight bytes at a
//! time where it can, every byte that cannot start an entity and stops only at digits and at
//! `@ : = + (`, where it tries by hand just the shapes that can start there (numbers with
//! their groupings, hex chains, dates and times that it skips whole, an email's domain, a
//! keyword before a separator, ...). Detectors with a literal prefix (`eyJ`, `AKIA`, `ghp_`,
//! `sk-`, `xox`, `AIza`, `Bearer`, `-----BEGIN`, ...) are found by an Aho-Corasick search for
//! those prefixes, each hit confirmed by the rule's regex anchored there. Validators (Luhn,
//! mod 97, checksums, ranges, entropy) then accept, narrow or reject each candidate. Custom
//! detectors and deny-lists are compiled into one multi-pattern regex, searched once.
//!
//! # Overlap rule
//!
//! Findings never overlap. Among candidate matches:
//! 1. the leftmost start wins;
//! 2. at the same start, custom detectors (deny-lists first, then regexes in the order they
//!    were added) win over built-ins, and among built-ins the table order of [`Entity::BUILTIN`]
//!    decides (private keys, JWTs, URLs, API keys, secrets, emails, IBANs, Bitcoin, MACs, IPs,
//!    cards, SSNs, phones);
//! 3. a candidate its validator rejects gives way to the next shape that can start at the
//!    same place (a number failing Luhn may still be a phone number); a rejected card- or
//!    IBAN-shaped number is skipped whole, so the numbers inside it are not reported as
//!    phone numbers;
//! 4. the scan goes on where an accepted finding ends;
//! 5. a keyword secret (`password: ...`, `Bearer ...`) is narrowed to its value, and when a
//!    specific detector matches the whole value (an AWS key after `api_key=`), the finding
//!    takes that detector's entity: specific beats generic.
//!
//! Values on the allow-list are dropped from the findings.

mod builtin;
mod card;
mod context;
pub(crate) mod digest;
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

use builtin::{Id, RULES, Rule};
use scan::{LITERAL_RULES, Scanner, merge};

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

/// The compiled detectors: the structural scanner for the built-ins, one multi-pattern regex
/// for the custom detectors, and the allow-list.
pub(crate) struct Engine {
    scanner: Scanner,
    custom: Option<(Regex, Vec<Rule>)>,
    allow: HashSet<String>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("custom", &self.custom.as_ref().map_or(0, |(_, r)| r.len()))
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
        let literal_ids: Vec<Id> = LITERAL_RULES
            .into_iter()
            .filter(|&id| on[id as usize])
            .collect();
        let literals = if literal_ids.is_empty() {
            None
        } else {
            let patterns: Vec<&str> = literal_ids
                .iter()
                .map(|&id| rules[id as usize].pattern.as_ref())
                .collect();
            Some(compile(&patterns).map_err(|(_, message)| RedactionError::Build { message })?)
        };
        let scanner = Scanner::new(rules, literals, literal_ids, on);

        // Deny-lists first, then regexes, in the order they were added.
        let (deny, regexes): (Vec<Detector>, Vec<Detector>) = custom
            .into_iter()
            .partition(|d| matches!(d.kind, DetectorKind::Deny(_)));
        let custom: Vec<Rule> = deny
            .into_iter()
            .chain(regexes)
            .map(Detector::into_rule)
            .collect();
        let custom = if custom.is_empty() {
            None
        } else {
            let patterns: Vec<&str> = custom.iter().map(|r| r.pattern.as_ref()).collect();
            let regex = compile(&patterns).map_err(|(pattern, message)| match pattern {
                Some(index) => RedactionError::InvalidPattern {
                    entity: custom
                        .get(index)
                        .map(|r| r.entity.name().to_owned())
                        .unwrap_or_default(),
                    message,
                },
                None => RedactionError::Build { message },
            })?;
            Some((regex, custom))
        };
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
            .flat_map(|(_, rules)| rules.iter())
            .chain(self.scanner.rules())
            .map(|r| r.pattern.as_ref())
    }

    /// Finds every entity in `text`, in order, without overlaps.
    pub(crate) fn find(&self, text: &str, out: &mut Vec<Finding>) {
        let hay = text.as_bytes();
        let Some((regex, rules)) = &self.custom else {
            self.scanner.scan(hay, out);
            if !self.allow.is_empty() {
                out.retain(|f| !self.allow.contains(f.text(text)));
            }
            return;
        };
        let mut builtin = Vec::new();
        self.scanner.scan(hay, &mut builtin);
        let mut custom = Vec::new();
        let mut at = 0;
        while at < hay.len() {
            let Some(m) = regex.search(&Input::new(hay).range(at..)) else {
                break;
            };
            at = m.end().max(m.start() + 1);
            if m.is_empty() || !text.is_char_boundary(m.start()) || !text.is_char_boundary(m.end())
            {
                continue;
            }
            if let Some(rule) = rules.get(m.pattern().as_usize()) {
                custom.push(Finding {
                    entity: rule.entity.clone(),
                    subtype: None,
                    start: m.start(),
                    end: m.end(),
                    score: rule.score,
                });
            }
        }
        // Custom detectors win ties with built-ins.
        let mut merged = Vec::with_capacity(custom.len() + builtin.len());
        merge(custom, builtin, &mut merged);
        if self.allow.is_empty() {
            out.extend(merged);
        } else {
            out.extend(
                merged
                    .into_iter()
                    .filter(|f| !self.allow.contains(f.text(text))),
            );
        }
    }
}
