//! Tag patterns for handlers that apply to several tags.
//!
//! | form | matches | specificity |
//! |---|---|---|
//! | `**` | every tag | 0 |
//! | `a.**` | every tag under `a`, at any depth | 1 |
//! | `a.*` | every tag directly under `a` (one more segment) | 2 |
//! | predicate | every tag the function accepts | 2 |
//! | `a.b` | exactly `a.b` | 3 |
//!
//! Handlers of a tag run broadest first, most specific last (ties in registration order), so
//! the most specific handler has the final say.

use std::fmt;
use std::sync::Arc;

use crate::tag::TagDescriptor;

/// A set of tags a handler applies to.
///
/// ```
/// use harness_tags::Pattern;
///
/// let nudges = Pattern::parse("nudge.*").unwrap();
/// assert!(nudges.matches_name("nudge.loop-detected"));
/// assert!(!nudges.matches_name("nudge.a.b"));
/// assert!(Pattern::parse("nudge.**").unwrap().matches_name("nudge.a.b"));
/// assert!(Pattern::parse("a.**.b").is_err());
/// ```
#[derive(Clone)]
pub struct Pattern {
    kind: PatternKind,
}

#[derive(Clone)]
enum PatternKind {
    Exact(Arc<str>),
    OneSegment(Arc<str>),
    AnyDepth(Arc<str>),
    Everything,
    Predicate(Arc<dyn Fn(&TagDescriptor) -> bool + Send + Sync>),
}

/// A pattern string that is not one of the supported forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid tag pattern `{pattern}`: {reason}; use `a.b`, `a.*`, `a.**` or `**` \
     (wildcards only as the last segment)"
)]
pub struct PatternError {
    pattern: String,
    reason: &'static str,
}

impl Pattern {
    /// Parses `a.b`, `a.*`, `a.**` or `**`.
    pub fn parse(pattern: &str) -> Result<Self, PatternError> {
        let error = |reason| PatternError {
            pattern: pattern.to_owned(),
            reason,
        };
        if pattern == "**" {
            return Ok(Pattern {
                kind: PatternKind::Everything,
            });
        }
        let (prefix, kind): (&str, fn(Arc<str>) -> PatternKind) =
            if let Some(prefix) = pattern.strip_suffix(".**") {
                (prefix, PatternKind::AnyDepth)
            } else if let Some(prefix) = pattern.strip_suffix(".*") {
                (prefix, PatternKind::OneSegment)
            } else {
                (pattern, PatternKind::Exact)
            };
        if prefix.is_empty() {
            return Err(error("the pattern is empty"));
        }
        let segment_ok = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if prefix.contains('*') {
            return Err(error("a wildcard may only be the last segment"));
        }
        if !prefix.split('.').all(segment_ok) {
            return Err(error(
                "segments are lowercase letters, digits and hyphens, separated by single dots",
            ));
        }
        Ok(Pattern {
            kind: kind(Arc::from(prefix)),
        })
    }

    /// A pattern that matches every tag `accept` returns true for.
    ///
    /// ```
    /// use harness_tags::{Pattern, Phase};
    ///
    /// let act = Pattern::predicate(|tag| tag.phase() == Phase::Act);
    /// let tool_call = harness_tags::lookup("tool.call").unwrap();
    /// assert!(act.matches(tool_call));
    /// ```
    pub fn predicate(accept: impl Fn(&TagDescriptor) -> bool + Send + Sync + 'static) -> Self {
        Pattern {
            kind: PatternKind::Predicate(Arc::new(accept)),
        }
    }

    /// True if the pattern matches this tag.
    pub fn matches(&self, tag: &TagDescriptor) -> bool {
        match &self.kind {
            PatternKind::Predicate(accept) => accept(tag),
            _ => self.matches_name(tag.name()),
        }
    }

    /// True if the pattern matches a tag with this name (a predicate never matches by name).
    pub fn matches_name(&self, name: &str) -> bool {
        match &self.kind {
            PatternKind::Exact(exact) => **exact == *name,
            PatternKind::OneSegment(prefix) => name
                .strip_prefix(&**prefix)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|rest| !rest.is_empty() && !rest.contains('.')),
            PatternKind::AnyDepth(prefix) => name
                .strip_prefix(&**prefix)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|rest| !rest.is_empty()),
            PatternKind::Everything => true,
            PatternKind::Predicate(_) => false,
        }
    }

    /// The ordering rank: broader patterns run first, so they get lower numbers.
    pub fn specificity(&self) -> u8 {
        match self.kind {
            PatternKind::Everything => 0,
            PatternKind::AnyDepth(_) => 1,
            PatternKind::OneSegment(_) | PatternKind::Predicate(_) => 2,
            PatternKind::Exact(_) => 3,
        }
    }

    /// The specificity of a typed handler, which always names one exact tag.
    pub(crate) const EXACT: u8 = 3;
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            PatternKind::Exact(name) => f.write_str(name),
            PatternKind::OneSegment(prefix) => write!(f, "{prefix}.*"),
            PatternKind::AnyDepth(prefix) => write!(f, "{prefix}.**"),
            PatternKind::Everything => f.write_str("**"),
            PatternKind::Predicate(_) => f.write_str("<predicate>"),
        }
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({self})")
    }
}

/// Something that can be turned into a [`Pattern`]: a pattern, or a string to parse.
pub trait IntoPattern {
    /// Converts, or says why the string is not a pattern.
    fn into_pattern(self) -> Result<Pattern, PatternError>;
}

impl IntoPattern for Pattern {
    fn into_pattern(self) -> Result<Pattern, PatternError> {
        Ok(self)
    }
}

impl IntoPattern for &str {
    fn into_pattern(self) -> Result<Pattern, PatternError> {
        Pattern::parse(self)
    }
}

impl IntoPattern for String {
    fn into_pattern(self) -> Result<Pattern, PatternError> {
        Pattern::parse(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_match_what_they_say() {
        let cases = [
            ("message.tool-result", "message.tool-result", true),
            ("message.tool-result", "message.tool-error", false),
            ("message.*", "message.tool-result", true),
            ("message.*", "message", false),
            ("message.*", "messages.x", false),
            ("acme.*", "acme.billing.sent", false),
            ("acme.**", "acme.billing.sent", true),
            ("acme.**", "acme.x", true),
            ("acme.**", "acme", false),
            ("acme.billing.**", "acme.billing.sent", true),
            ("**", "anything.at-all", true),
        ];
        for (pattern, name, expected) in cases {
            let parsed = Pattern::parse(pattern).unwrap();
            assert_eq!(parsed.matches_name(name), expected, "{pattern} vs {name}");
        }
    }

    #[test]
    fn malformed_patterns_are_rejected_with_a_reason() {
        for bad in [
            "", "*", ".x", "a..b", "a.**.b", "A.b", "a.b*", "a.*.c", "a b",
        ] {
            let err = Pattern::parse(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn specificity_orders_broad_before_narrow() {
        let ranks: Vec<u8> = ["**", "a.**", "a.*", "a.b"]
            .iter()
            .map(|p| Pattern::parse(p).unwrap().specificity())
            .collect();
        assert_eq!(ranks, vec![0, 1, 2, 3]);
        assert_eq!(Pattern::predicate(|_| true).specificity(), 2);
    }
}
