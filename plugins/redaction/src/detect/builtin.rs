//! The built-in detector table: one regex per rule, all compiled into one multi-pattern
//! automaton, and the validator each match must pass.
//!
//! Every pattern is ASCII-only (`(?-u)`): classes, `\d`, `\s` and word boundaries `\b` are
//! ASCII, so the lazy DFA never gives up on non-ASCII text. The order of the table is the
//! priority among rules that match at the same start (see the crate's overlap rule).

use std::borrow::Cow;

use super::validate::{self, Check};
use crate::entity::Entity;

/// The built-in rules, in table (priority) order; the index of each is its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Id {
    PrivateKey,
    Jwt,
    Url,
    AwsAccessKey,
    AwsSecret,
    GithubClassic,
    GithubPat,
    Anthropic,
    OpenAi,
    Slack,
    SlackWebhook,
    Stripe,
    Google,
    Secret,
    Bearer,
    Email,
    Iban,
    Crypto,
    Mac,
    Ipv6,
    Ipv4,
    Card,
    Ssn,
    PhoneIntl,
    PhoneNational,
}

/// How many built-in rules there are.
pub(crate) const RULES: usize = Id::PhoneNational as usize + 1;

/// One detector rule.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    pub(crate) entity: Entity,
    pub(crate) subtype: Option<&'static str>,
    pub(crate) pattern: Cow<'static, str>,
    pub(crate) score: f32,
    pub(crate) check: Check,
    /// The value of a generic match may be a specific entity: look for one inside it.
    pub(crate) reclassify: bool,
}

impl Rule {
    fn new(entity: Entity, pattern: &'static str, score: f32, check: Check) -> Rule {
        Rule {
            entity,
            subtype: None,
            pattern: Cow::Borrowed(pattern),
            score,
            check,
            reclassify: false,
        }
    }

    fn subtype(mut self, subtype: &'static str) -> Rule {
        self.subtype = Some(subtype);
        self
    }

    fn reclassify(mut self) -> Rule {
        self.reclassify = true;
        self
    }
}

/// The keywords that anchor a generic secret.
pub(crate) const SECRET_KEYWORDS: &str = r"(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?key|auth[_-]?key|secret[_-]?key|private[_-]?key|token|credentials?)";

/// The built-in rules, in the order of [`Id`]. The structural scanner (`scan.rs`) matches
/// most of them by hand and runs the regex only where a literal prefix was seen; the regexes
/// are the reference syntax of each rule (and the patterns of the benchmark's baseline).
pub(crate) fn rules() -> Vec<Rule> {
    use Entity::*;
    let secret = format!(
        r#"(?i-u){SECRET_KEYWORDS}["']?[ \t]{{0,3}}(?:=>|:=|[:=])[ \t]{{0,3}}(?:"(?u:[^"\n\\])(?u:[^"\n\\])*"|'(?u:[^'\n])(?u:[^'\n])*'|[a-z0-9_\-+/=.!@#$%^&*~?]{{6}}[a-z0-9_\-+/=.!@#$%^&*~?]*)"#
    );
    vec![
        Rule::new(
            PrivateKey,
            r"(?-u)-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\s:,.\\-]*?-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----",
            1.0,
            validate::any,
        ),
        Rule::new(
            Jwt,
            r"(?-u)\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
            0.95,
            validate::jwt,
        ),
        Rule::new(
            Url,
            r"(?-u)://[A-Za-z0-9._~%!$&'*+,;=-]+:[A-Za-z0-9._~%!$&'*+,;=()-]+@[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:[/?#][A-Za-z0-9._~%!$&'*+,;=:@/?#()-]*)?",
            1.0,
            validate::url_credentials,
        ),
        Rule::new(
            ApiKey,
            r"(?-u)\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z2-7]{16}\b",
            1.0,
            validate::any,
        )
        .subtype("aws_access_key_id"),
        Rule::new(
            ApiKey,
            r#"(?i-u)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)["']?[ \t]{0,3}[:=][ \t]{0,3}["']?[A-Za-z0-9/+]{40}"#,
            1.0,
            validate::aws_secret,
        )
        .subtype("aws_secret_access_key"),
        Rule::new(
            ApiKey,
            r"(?-u)\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36}\b",
            1.0,
            validate::any,
        )
        .subtype("github"),
        Rule::new(
            ApiKey,
            r"(?-u)\bgithub_pat_[A-Za-z0-9_]{22}[A-Za-z0-9_]*",
            1.0,
            validate::token_end,
        )
        .subtype("github"),
        Rule::new(
            ApiKey,
            r"(?-u)\bsk-ant-[a-z]{2,8}[0-9]{2}-[A-Za-z0-9_-]{32}[A-Za-z0-9_-]*",
            1.0,
            validate::token_end,
        )
        .subtype("anthropic"),
        Rule::new(
            ApiKey,
            r"(?-u)\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32}[A-Za-z0-9_-]*",
            1.0,
            validate::mixed_token,
        )
        .subtype("openai"),
        Rule::new(
            ApiKey,
            r"(?-u)\bxox[abposre]-[A-Za-z0-9-]{10}[A-Za-z0-9-]*",
            1.0,
            validate::mixed_token,
        )
        .subtype("slack"),
        Rule::new(
            ApiKey,
            r"(?-u)https://hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/[A-Za-z0-9]{16,32}",
            1.0,
            validate::token_end,
        )
        .subtype("slack_webhook"),
        Rule::new(
            ApiKey,
            r"(?-u)\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16}[A-Za-z0-9]*",
            1.0,
            validate::token_end,
        )
        .subtype("stripe"),
        Rule::new(
            ApiKey,
            r"(?-u)\bAIza[A-Za-z0-9_-]{35}",
            1.0,
            validate::token_end,
        )
        .subtype("google"),
        Rule {
            pattern: Cow::Owned(secret),
            ..Rule::new(Secret, "", 0.7, validate::keyword_secret)
        }
        .subtype("keyword")
        .reclassify(),
        Rule::new(
            Secret,
            r"(?-u)\b[Bb]earer[ \t]+[A-Za-z0-9_.=+/~-]{8}[A-Za-z0-9_.=+/~-]*",
            0.8,
            validate::bearer,
        )
        .subtype("bearer")
        .reclassify(),
        Rule::new(
            EmailAddress,
            r"(?-u)@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b",
            1.0,
            validate::email,
        ),
        Rule::new(
            IbanCode,
            r"(?-u)\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\b",
            1.0,
            validate::iban,
        ),
        Rule::new(
            Crypto,
            r"(?-u)\b(?:[13][1-9A-HJ-NP-Za-km-z]{25,34}|bc1[02-9ac-hj-np-z]{11,71}|BC1[02-9AC-HJ-NP-Z]{11,71})\b",
            1.0,
            validate::crypto,
        )
        .subtype("bitcoin"),
        Rule::new(
            MacAddress,
            r"(?-u)\b(?:[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4})\b",
            0.9,
            validate::mac,
        ),
        Rule::new(
            IpAddress,
            r"(?-u)\b(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}\b|\b(?:[0-9A-Fa-f]{1,4}:){1,6}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?|::(?:[0-9A-Fa-f]{1,4}:){0,5}(?:[0-9A-Fa-f]{1,4}|(?:[0-9]{1,3}\.){3}[0-9]{1,3})",
            0.9,
            validate::ipv6,
        )
        .subtype("ipv6"),
        Rule::new(
            IpAddress,
            r"(?-u)\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b",
            0.9,
            validate::ipv4,
        )
        .subtype("ipv4"),
        Rule::new(
            CreditCard,
            r"(?-u)\b(?:[0-9]{12,19}|(?:[0-9]{4}[ -]){2,4}[0-9]{1,4}|[0-9]{4}[ -][0-9]{6}[ -][0-9]{4,5})\b",
            1.0,
            validate::credit_card,
        ),
        Rule::new(
            UsSsn,
            r"(?-u)\b(?:[0-9]{3}-[0-9]{2}-[0-9]{4}|[0-9]{3} [0-9]{2} [0-9]{4})\b",
            0.85,
            validate::us_ssn,
        ),
        Rule::new(
            PhoneNumber,
            r"(?-u)(?:\+|\(\+|\b00)[0-9]{1,3}\)?(?:(?:[ .\-/]| - | / |/ )?(?:\([0-9]{1,4}\)|[0-9]{1,12})){1,7}(?: ?(?:x|ext\.?|extension|#) ?[0-9]{1,6})?\b",
            0.85,
            validate::any,
        )
        .subtype("international"),
        Rule::new(
            PhoneNumber,
            r"(?-u)(?:\([0-9]{2,6}\)[ .-]?|\b[0-9]{1,6}(?:[ .\-/]| - | / |/ ))(?:[0-9]{1,8}(?:[ .\-/]| - | / |/ )){0,6}[0-9]{2,8}(?: ?(?:x|ext\.?|extension|#) ?[0-9]{1,6})?\b|\b[0-9]{8,12}\b",
            0.7,
            validate::any,
        )
        .subtype("national"),
    ]
}
