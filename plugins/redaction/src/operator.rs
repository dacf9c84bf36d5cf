//! Operators: what a finding becomes in the redacted text.

use serde::{Deserialize, Serialize};

/// What replaces a finding.
///
/// | operator | `bob@example.com` becomes |
/// |---|---|
/// | `Replace` | `<EMAIL_ADDRESS>` |
/// | `ReplaceWith { value: "••••••" }` | `••••••` |
/// | `Mask { ch: '*', keep_last: 4 }` | `************.com` |
/// | `Hash` | `<EMAIL_ADDRESS_7f3a1c>`: keyed, the same value gives the same token in a thread |
/// | `Remove` | nothing |
/// | `Pseudonym` | like `Hash`, and remembered in the vault: a pseudonym the model passes back in tool-call arguments is restored to the real value before the tool runs |
/// | `Keep` | unchanged (the finding is still reported) |
///
/// In JSON configuration an operator is an object with a `type`:
/// `{"type": "mask", "ch": "*", "keepLast": 4}`, `{"type": "replace"}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum Operator {
    /// `<ENTITY_TYPE>`.
    #[default]
    Replace,
    /// A fixed text.
    ReplaceWith {
        /// The text.
        value: String,
    },
    /// Every character replaced by `ch` except the last `keep_last` (all of them when the
    /// value is not longer than `keep_last`, so a mask never shows a whole value).
    Mask {
        /// The masking character.
        #[serde(default = "default_mask_char")]
        ch: char,
        /// How many trailing characters stay visible.
        #[serde(default)]
        keep_last: usize,
    },
    /// A keyed, stable pseudonym `<ENTITY_TYPE_hex>`; not reversible.
    Hash,
    /// Deleted.
    Remove,
    /// A pseudonym like `Hash`, remembered per thread so tool calls get the real value back.
    Pseudonym,
    /// Left as it is; the finding is only reported.
    Keep,
}

fn default_mask_char() -> char {
    '*'
}

impl Operator {
    /// `Mask` with `*`, keeping the last `keep_last` characters.
    pub fn mask(keep_last: usize) -> Operator {
        Operator::Mask { ch: '*', keep_last }
    }

    /// The fixed `••••••` UIs show for a secret (the default of `display.tool-result`).
    pub fn bullets() -> Operator {
        Operator::ReplaceWith {
            value: "••••••".to_owned(),
        }
    }

    /// True if the operator leaves the text as it is.
    pub fn is_keep(&self) -> bool {
        matches!(self, Operator::Keep)
    }
}

/// Writes `value` masked with `ch`, keeping the last `keep_last` characters.
pub(crate) fn mask_into(out: &mut String, value: &str, ch: char, keep_last: usize) {
    let count = value.chars().count();
    if count <= keep_last {
        out.extend(std::iter::repeat_n(ch, count));
        return;
    }
    let masked = count - keep_last;
    out.extend(std::iter::repeat_n(ch, masked));
    if let Some((index, _)) = value.char_indices().nth(masked) {
        out.push_str(&value[index..]);
    }
}
