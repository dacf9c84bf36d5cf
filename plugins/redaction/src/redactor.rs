//! The [`Redactor`]: compiled detectors plus operators, the vault and the hash key.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use serde::Serialize;

use crate::detect::digest::hmac_sha256;
use crate::detect::{Detector, Engine, Finding};
use crate::entity::Entity;
use crate::error::RedactionError;
use crate::operator::{Operator, mask_into};
use crate::vault::Vault;

/// The result of redacting a text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Redacted<'a> {
    /// What was found, with byte offsets into the input.
    pub findings: Vec<Finding>,
    /// The redacted text (borrowed from the input when nothing changed).
    pub text: Cow<'a, str>,
}

impl Redacted<'_> {
    /// True if the text was changed.
    pub fn changed(&self) -> bool {
        matches!(self.text, Cow::Owned(_))
    }
}

/// Compiled detectors and the operators applied to what they find.
///
/// Build one with [`Redactor::builder`]; it is immutable, cheap to share in an `Arc` and
/// safe to use from many threads.
///
/// ```
/// use harness_redaction::{Entity, Operator, Redactor};
///
/// let redactor = Redactor::builder()
///     .entity_operator(Entity::CreditCard, Operator::mask(4))
///     .build()?;
/// let out = redactor.redact("card 4111 1111 1111 1111, mail bob@example.com")?;
/// assert_eq!(out.text, "card ***************1111, mail <EMAIL_ADDRESS>");
/// assert_eq!(out.findings.len(), 2);
/// # Ok::<(), harness_redaction::RedactionError>(())
/// ```
pub struct Redactor {
    engine: Engine,
    operator: Operator,
    operators: BTreeMap<Entity, Operator>,
    key: [u8; 32],
    hash_len: usize,
    max_input_bytes: usize,
    vault: Arc<Vault>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("engine", &self.engine)
            .field("operator", &self.operator)
            .field("operators", &self.operators)
            .field("hash_len", &self.hash_len)
            .field("max_input_bytes", &self.max_input_bytes)
            .finish_non_exhaustive()
    }
}

/// Options of a [`Redactor`].
#[derive(Clone, Debug)]
pub struct RedactorBuilder {
    custom: Vec<Detector>,
    disabled: BTreeSet<Entity>,
    only: Option<BTreeSet<Entity>>,
    allow: HashSet<String>,
    operator: Operator,
    operators: BTreeMap<Entity, Operator>,
    key: Option<Vec<u8>>,
    hash_len: usize,
    max_input_bytes: usize,
    vault_capacity: usize,
}

impl Default for RedactorBuilder {
    fn default() -> Self {
        RedactorBuilder {
            custom: Vec::new(),
            disabled: BTreeSet::new(),
            only: None,
            allow: HashSet::new(),
            operator: Operator::Replace,
            operators: BTreeMap::new(),
            key: None,
            hash_len: 6,
            max_input_bytes: 64 << 20,
            vault_capacity: 100_000,
        }
    }
}

impl RedactorBuilder {
    /// Adds a custom detector. Custom detectors take priority over the built-ins when both
    /// match at the same place.
    pub fn detector(mut self, detector: Detector) -> Self {
        self.custom.push(detector);
        self
    }

    /// Never reports this exact value (a test account, a public support address).
    pub fn allow(mut self, value: impl Into<String>) -> Self {
        self.allow.insert(value.into());
        self
    }

    /// Turns off the built-in detectors of an entity.
    pub fn disable(mut self, entity: Entity) -> Self {
        self.disabled.insert(entity);
        self
    }

    /// Keeps only the built-in detectors of these entities (custom detectors always run).
    pub fn only(mut self, entities: impl IntoIterator<Item = Entity>) -> Self {
        self.only = Some(entities.into_iter().collect());
        self
    }

    /// The operator for every entity without its own (default: [`Operator::Replace`]).
    pub fn operator(mut self, operator: Operator) -> Self {
        self.operator = operator;
        self
    }

    /// The operator for one entity.
    pub fn entity_operator(mut self, entity: Entity, operator: Operator) -> Self {
        self.operators.insert(entity, operator);
        self
    }

    /// The key of `Hash` and `Pseudonym` tokens. Set it (from a secret store) for tokens that
    /// stay the same across restarts; by default each redactor draws a random key.
    pub fn hash_key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.key = Some(key.as_ref().to_vec());
        self
    }

    /// Hex digits in `Hash` and `Pseudonym` tokens, 4 to 32 (default 6). The vault adds
    /// digits when two values of a thread would get the same token.
    pub fn hash_len(mut self, digits: usize) -> Self {
        self.hash_len = digits;
        self
    }

    /// The largest text redacted (default 64 MiB); a larger one is an error, so a plugin
    /// emit fails instead of letting it through.
    pub fn max_input_bytes(mut self, max: usize) -> Self {
        self.max_input_bytes = max;
        self
    }

    /// The most values the pseudonym vault keeps per thread, at least 1 (default 100,000;
    /// see [`Vault`] for what happens past it).
    pub fn vault_capacity(mut self, max: usize) -> Self {
        self.vault_capacity = max;
        self
    }

    /// Compiles the detectors.
    pub fn build(self) -> Result<Redactor, RedactionError> {
        if !(4..=32).contains(&self.hash_len) {
            return Err(RedactionError::Config {
                setting: "hash_len",
                message: format!("{} is out of range; use 4 to 32 hex digits", self.hash_len),
            });
        }
        if self.vault_capacity == 0 {
            return Err(RedactionError::Config {
                setting: "vault_capacity",
                message: "0 leaves no room for a pseudonym; use at least 1 (default 100,000)"
                    .to_owned(),
            });
        }
        let disabled = self.disabled;
        let only = self.only;
        let engine = Engine::new(
            self.custom,
            |entity| !disabled.contains(entity) && only.as_ref().is_none_or(|o| o.contains(entity)),
            self.allow,
        )?;
        let key = match self.key {
            Some(key) => hmac_sha256(b"harness-redaction key", &[&key]),
            None => random_key(),
        };
        Ok(Redactor {
            engine,
            operator: self.operator,
            operators: self.operators,
            key,
            hash_len: self.hash_len,
            max_input_bytes: self.max_input_bytes,
            vault: Arc::new(Vault::new(self.vault_capacity)),
        })
    }
}

/// 32 random bytes from the standard library's per-process random hasher keys.
fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    for (i, chunk) in key.chunks_exact_mut(8).enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(i);
        chunk.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    key
}

impl Redactor {
    /// A builder with every built-in detector and the `Replace` operator.
    pub fn builder() -> RedactorBuilder {
        RedactorBuilder::default()
    }

    /// Every built-in detector, `Replace` for everything.
    pub fn new() -> Result<Redactor, RedactionError> {
        Redactor::builder().build()
    }

    /// The pseudonym vault.
    pub fn vault(&self) -> &Arc<Vault> {
        &self.vault
    }

    /// The regex of every detector rule, in priority order.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.engine.patterns()
    }

    /// The operator applied to `entity` (unless a caller overrides it).
    pub fn operator_for(&self, entity: &Entity) -> &Operator {
        self.operators.get(entity).unwrap_or(&self.operator)
    }

    /// True if any operator is [`Operator::Pseudonym`].
    pub fn uses_pseudonyms(&self) -> bool {
        self.operator == Operator::Pseudonym
            || self.operators.values().any(|o| *o == Operator::Pseudonym)
    }

    /// Every finding in `text`, in order, without overlaps.
    pub fn find(&self, text: &str) -> Vec<Finding> {
        let mut findings = Vec::new();
        self.engine.find(text, &mut findings);
        findings
    }

    /// Redacts `text` outside any thread.
    pub fn redact<'a>(&self, text: &'a str) -> Result<Redacted<'a>, RedactionError> {
        self.redact_with(text, None, None)
    }

    /// Redacts `text` in a thread: `Hash` and `Pseudonym` tokens are stable within it.
    pub fn redact_in<'a>(
        &self,
        text: &'a str,
        thread: Option<&str>,
    ) -> Result<Redacted<'a>, RedactionError> {
        self.redact_with(text, thread, None)
    }

    /// Redacts `text` in a thread, with `operator` (if given) instead of the configured ones.
    pub fn redact_with<'a>(
        &self,
        text: &'a str,
        thread: Option<&str>,
        operator: Option<&Operator>,
    ) -> Result<Redacted<'a>, RedactionError> {
        self.check_size(text.len())?;
        let findings = self.find(text);
        if findings.is_empty() {
            return Ok(Redacted {
                findings,
                text: Cow::Borrowed(text),
            });
        }
        let text = self.apply(text, &findings, thread, operator)?;
        Ok(Redacted { findings, text })
    }

    pub(crate) fn check_size(&self, len: usize) -> Result<(), RedactionError> {
        if len > self.max_input_bytes {
            return Err(RedactionError::TooLarge {
                len,
                max: self.max_input_bytes,
            });
        }
        Ok(())
    }

    /// `text` with `findings` (sorted, not overlapping) replaced by their operators.
    pub(crate) fn apply<'a>(
        &self,
        text: &'a str,
        findings: &[Finding],
        thread: Option<&str>,
        operator: Option<&Operator>,
    ) -> Result<Cow<'a, str>, RedactionError> {
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut changed = false;
        for finding in findings {
            let (Some(gap), Some(value)) = (
                text.get(copied..finding.start),
                text.get(finding.start..finding.end),
            ) else {
                continue;
            };
            out.push_str(gap);
            let op = operator.unwrap_or_else(|| self.operator_for(&finding.entity));
            changed |= !op.is_keep();
            self.render(&mut out, op, &finding.entity, value, thread)?;
            copied = finding.end;
        }
        if !changed {
            return Ok(Cow::Borrowed(text));
        }
        out.push_str(text.get(copied..).unwrap_or_default());
        Ok(Cow::Owned(out))
    }

    /// Writes what `value` becomes under `op`.
    pub(crate) fn render(
        &self,
        out: &mut String,
        op: &Operator,
        entity: &Entity,
        value: &str,
        thread: Option<&str>,
    ) -> Result<(), RedactionError> {
        match op {
            Operator::Replace => {
                out.push('<');
                out.push_str(entity.name());
                out.push('>');
            }
            Operator::ReplaceWith { value: with } => out.push_str(with),
            Operator::Mask { ch, keep_last } => mask_into(out, value, *ch, *keep_last),
            Operator::Hash => out.push_str(&self.token(thread, entity, value, self.hash_len)),
            Operator::Remove => {}
            Operator::Pseudonym => {
                let thread = thread.unwrap_or_default();
                let token = self.vault.pseudonym(
                    thread,
                    entity,
                    value,
                    |len| self.token(Some(thread), entity, value, len),
                    self.hash_len,
                )?;
                out.push_str(&token);
            }
            Operator::Keep => out.push_str(value),
        }
        Ok(())
    }

    /// `<ENTITY_hex>`: HMAC-SHA256 of thread, entity and value under the redactor's key.
    fn token(&self, thread: Option<&str>, entity: &Entity, value: &str, len: usize) -> String {
        let mac = hmac_sha256(
            &self.key,
            &[
                thread.unwrap_or_default().as_bytes(),
                &[0],
                entity.name().as_bytes(),
                &[0],
                value.as_bytes(),
            ],
        );
        let mut token = String::with_capacity(entity.name().len() + len + 3);
        token.push('<');
        token.push_str(entity.name());
        token.push('_');
        for byte in mac.iter() {
            if token.len() >= entity.name().len() + 2 + len {
                break;
            }
            token.push_str(&format!("{byte:02x}"));
        }
        token.truncate(entity.name().len() + 2 + len);
        token.push('>');
        token
    }

    /// Restores the pseudonyms of `thread` in `text` (see [`Vault::restore`]).
    pub fn restore(&self, thread: Option<&str>, text: &str) -> Option<String> {
        self.vault.restore(thread.unwrap_or_default(), text)
    }
}
