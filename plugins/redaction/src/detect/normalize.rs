//! The normalized view detection runs on, so look-alike characters do not hide an entity.
//!
//! - fullwidth forms (`ｂｏｂ＠ｅｘａｍｐｌｅ．ｃｏｍ`, `４１１１`) become their ASCII letters, digits
//!   and punctuation;
//! - zero-width and invisible characters (zero-width space, non-joiner and joiner, word
//!   joiner and invisible operators, byte order mark, Mongolian vowel separator) and soft
//!   hyphens are dropped;
//! - non-breaking and other Unicode spaces (U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029,
//!   U+202F, U+205F, U+3000) become a space;
//! - Unicode hyphens (U+2010–U+2013, U+2212) become `-`.
//!
//! Text without any of them (the common case, found by a vectorized search for their first
//! bytes) is scanned as it is. Otherwise findings are made on the normalized copy and mapped
//! back, so a finding covers the original bytes, the dropped characters inside it included.

use memchr::{memchr2_iter, memchr3_iter};

/// What a character becomes in the normalized view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// Dropped.
    Drop,
    /// This ASCII byte.
    Ascii(u8),
    /// Kept as it is.
    Keep,
}

/// What `c` becomes in the normalized view.
pub(crate) fn fold(c: char) -> Fold {
    match c {
        '\u{00AD}'
        | '\u{180E}'
        | '\u{200B}'..='\u{200D}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}' => Fold::Drop,
        '\u{00A0}'
        | '\u{1680}'
        | '\u{2000}'..='\u{200A}'
        | '\u{2028}'
        | '\u{2029}'
        | '\u{202F}'
        | '\u{205F}'
        | '\u{3000}' => Fold::Ascii(b' '),
        '\u{2010}'..='\u{2013}' | '\u{2212}' => Fold::Ascii(b'-'),
        '\u{FF01}'..='\u{FF5E}' => Fold::Ascii((u32::from(c) - 0xFF01 + 0x21) as u8),
        _ => Fold::Keep,
    }
}

/// A character the view changed: where it is in both texts and how long it is in each.
#[derive(Clone, Copy, Debug)]
struct Edit {
    /// Its offset in the normalized text.
    norm: usize,
    /// Original bytes minus normalized bytes, summed over this edit and every one before.
    shift: usize,
    /// Dropped (no byte in the normalized text).
    dropped: bool,
}

/// The normalized view of a text that needed one, with the way back to the original.
#[derive(Debug)]
pub(crate) struct Normalized {
    pub(crate) text: String,
    edits: Vec<Edit>,
}

/// The offsets, in order, of the bytes that start the UTF-8 encodings of the characters
/// [`fold`] changes (and of some characters it keeps).
fn candidates(text: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut a = memchr3_iter(0xC2, 0xE2, 0xEF, text).peekable();
    let mut b = memchr2_iter(0xE1, 0xE3, text).peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if y < x => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    })
}

impl Normalized {
    /// The normalized view of `text`, or `None` when it is the text itself.
    pub(crate) fn of(text: &str) -> Option<Normalized> {
        let mut view: Option<Normalized> = None;
        let mut copied = 0;
        let mut shift = 0;
        let bytes = text.as_bytes();
        for at in candidates(bytes) {
            // The second byte rules most characters out (kana, CJK punctuation, `€`, `…`).
            let second = bytes.get(at + 1).copied().unwrap_or(0);
            let may_fold = matches!(
                (bytes[at], second),
                (0xC2, 0xA0 | 0xAD)
                    | (0xE1, 0x9A | 0xA0)
                    | (0xE2, 0x80 | 0x81 | 0x88)
                    | (0xE3, 0x80)
                    | (0xEF, 0xBB..=0xBD)
            );
            if !may_fold {
                continue;
            }
            // Lead bytes only, so `at` is a character boundary.
            let Some(c) = text.get(at..).and_then(|rest| rest.chars().next()) else {
                continue;
            };
            let folded = fold(c);
            if folded == Fold::Keep {
                continue;
            }
            let view = view.get_or_insert_with(|| Normalized {
                text: String::with_capacity(text.len()),
                edits: Vec::new(),
            });
            view.text.push_str(&text[copied..at]);
            copied = at + c.len_utf8();
            match folded {
                Fold::Ascii(b) => {
                    shift += c.len_utf8() - 1;
                    view.edits.push(Edit {
                        norm: view.text.len(),
                        shift,
                        dropped: false,
                    });
                    view.text.push(char::from(b));
                }
                _ => {
                    shift += c.len_utf8();
                    view.edits.push(Edit {
                        norm: view.text.len(),
                        shift,
                        dropped: true,
                    });
                }
            }
        }
        let mut view = view?;
        view.text.push_str(&text[copied..]);
        Some(view)
    }

    /// The original offset of normalized offset `at` as the start of a span: after the
    /// characters dropped just before it.
    pub(crate) fn start(&self, at: usize) -> usize {
        let i = self
            .edits
            .partition_point(|e| e.norm < at || (e.norm == at && e.dropped));
        at + i.checked_sub(1).map_or(0, |i| self.edits[i].shift)
    }

    /// The original offset of normalized offset `at` as the end of a span: after the whole
    /// original character of the last byte, before the characters dropped after it.
    pub(crate) fn end(&self, at: usize) -> usize {
        let i = self.edits.partition_point(|e| e.norm < at);
        at + i.checked_sub(1).map_or(0, |i| self.edits[i].shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_maps_back() {
        let text = "mail ｂｏｂ＠ｅｘ.com or 4111\u{200B}1111\u{00A0}x \u{00AD}";
        let view = Normalized::of(text).unwrap();
        assert_eq!(view.text, "mail bob@ex.com or 41111111 x ");
        let at = view.text.find("bob").unwrap();
        let end = view.text.find(".com").unwrap() + 4;
        assert_eq!(&text[view.start(at)..view.end(end)], "ｂｏｂ＠ｅｘ.com");
        let at = view.text.find("4111").unwrap();
        assert_eq!(&text[view.start(at)..view.end(at + 8)], "4111\u{200B}1111");
        // A dropped character at the very end is not part of a span ending there.
        assert_eq!(view.end(view.text.len()), text.len() - "\u{00AD}".len());
        assert!(Normalized::of("plain — text €").is_none());
    }
}
