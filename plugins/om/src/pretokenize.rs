//! The `o200k_base` pre-tokenizer, written out by hand for ASCII text.
//!
//! tiktoken splits text with one regex before it encodes each piece:
//!
//! ```text
//! [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//!
//! Running that regex was half the time of an exact count. On ASCII every class is a byte
//! test, so [`ascii_pieces`] walks the same alternatives in the same order (the first one that
//! matches at a position wins, each as greedy as the regex) without a regex engine. Text with
//! other characters goes to the regex: [`segments`] cuts the text where no piece can cross,
//! so each segment takes whichever path fits it. The counts are checked against tiktoken in
//! the crate's tests.

/// Cuts `text` into segments that pre-tokenize exactly as the whole text does: after a `\n`
/// whose next character is ASCII, not whitespace and not `/`. No piece crosses such a point:
/// the only pieces holding a `\n` are punctuation with its trailing `[\r\n/]*` and whitespace
/// up to its last line break, and both end right there; nor does the piece before it look
/// past it (the whitespace run it ends has ended).
pub(crate) fn segments(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let mut from = start;
        while let Some(offset) = bytes[from..].iter().position(|&b| b == b'\n') {
            let next = from + offset + 1;
            if let Some(&after) = bytes.get(next)
                && after.is_ascii()
                && !is_space(after)
                && after != b'/'
            {
                let segment = &text[start..next];
                start = next;
                return Some(segment);
            }
            from = next;
        }
        let segment = &text[start..];
        start = bytes.len();
        Some(segment)
    })
}

/// The pieces tiktoken's `o200k_base` pattern splits ASCII `text` into.
pub(crate) fn ascii_pieces(text: &str) -> impl Iterator<Item = &str> {
    debug_assert!(text.is_ascii());
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let end = piece_end(bytes, at);
        let piece = &text[at..end];
        at = end;
        Some(piece)
    })
}

/// Where the piece starting at `at` ends: the alternatives in the pattern's order.
fn piece_end(b: &[u8], at: usize) -> usize {
    words(b, at)
        .or_else(|| digits(b, at))
        .or_else(|| punctuation(b, at))
        .or_else(|| through_line_breaks(b, at))
        .unwrap_or_else(|| spaces(b, at))
}

/// `\s` on ASCII.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `[^\r\n\p{L}\p{N}]`: what may come before a word.
fn is_word_prefix(c: u8) -> bool {
    !matches!(c, b'\r' | b'\n') && !c.is_ascii_alphanumeric()
}

/// `[^\s\p{L}\p{N}]`.
fn is_punctuation(c: u8) -> bool {
    !is_space(c) && !c.is_ascii_alphanumeric()
}

fn skip(b: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    from + b[from..].iter().take_while(|&&c| class(c)).count()
}

/// The first two alternatives: an optional prefix, then upper case then lower case (at least
/// one lower), or upper case (at least one) then lower case; then a contraction.
fn words(b: &[u8], at: usize) -> Option<usize> {
    let prefixed = is_word_prefix(b[at]).then_some(at + 1);
    let lower_last = |start: usize| {
        let upper = skip(b, start, |c| c.is_ascii_uppercase());
        let lower = skip(b, upper, |c| c.is_ascii_lowercase());
        (lower > upper).then_some(lower)
    };
    let upper_first = |start: usize| {
        let upper = skip(b, start, |c| c.is_ascii_uppercase());
        (upper > start).then(|| skip(b, upper, |c| c.is_ascii_lowercase()))
    };
    let end = prefixed
        .and_then(lower_last)
        .or_else(|| lower_last(at))
        .or_else(|| prefixed.and_then(upper_first))
        .or_else(|| upper_first(at))?;
    Some(contraction(b, end))
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `at`.
fn contraction(b: &[u8], at: usize) -> usize {
    if b.get(at) != Some(&b'\'') {
        return at;
    }
    let rest = &b[at + 1..];
    ["s", "t", "re", "ve", "m", "ll", "d"]
        .iter()
        .find(|suffix| {
            rest.len() >= suffix.len()
                && rest[..suffix.len()].eq_ignore_ascii_case(suffix.as_bytes())
        })
        .map_or(at, |suffix| at + 1 + suffix.len())
}

/// `\p{N}{1,3}`.
fn digits(b: &[u8], at: usize) -> Option<usize> {
    let end = skip(b, at, |c| c.is_ascii_digit()).min(at + 3);
    (end > at).then_some(end)
}

/// ` ?[^\s\p{L}\p{N}]+[\r\n/]*`.
fn punctuation(b: &[u8], at: usize) -> Option<usize> {
    let start = if b[at] == b' ' && b.get(at + 1).is_some_and(|&c| is_punctuation(c)) {
        at + 1
    } else {
        at
    };
    let end = skip(b, start, is_punctuation);
    (end > start).then(|| skip(b, end, |c| matches!(c, b'\r' | b'\n' | b'/')))
}

/// `\s*[\r\n]+`: the whitespace here up to its last line break.
fn through_line_breaks(b: &[u8], at: usize) -> Option<usize> {
    let run = skip(b, at, is_space);
    b[at..run]
        .iter()
        .rposition(|&c| matches!(c, b'\r' | b'\n'))
        .map(|last| at + last + 1)
}

/// `\s+(?!\S)|\s+`: whitespace, leaving its last character to the word after it.
fn spaces(b: &[u8], at: usize) -> usize {
    let run = skip(b, at, is_space);
    if run == b.len() || run - at < 2 {
        run
    } else {
        run - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn regex_pieces(text: &str) -> Vec<&str> {
        bpe_openai::o200k_base().split(text).collect()
    }

    #[test]
    fn pieces_are_the_patterns_on_its_edge_cases() {
        for text in [
            "",
            "Hello, world!",
            "HTTPRequest parseJSON XMLHttpRequest aB ABc",
            "I'm sure they'LL say we'd've don'T 'sup '",
            "  two spaces, three   before, tab\tthen\t\tend   ",
            "line\n\nbreaks \r\n and\n  indented\n\t/path //x ./y\n/",
            "1234567 12 3.14 -7 x86_64",
            "...!!! ) ( \"quoted\" ' ''",
            "\u{0}\u{1}\u{1b}[0m\u{7f}",
            "a\u{b}b\u{c}c \u{b} \u{c}",
        ] {
            assert_eq!(
                ascii_pieces(text).collect::<Vec<_>>(),
                regex_pieces(text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn segments_cover_the_text_and_split_only_after_line_breaks() {
        let text = "a\nb\n c\n/d\n\ne\u{a0}\n\u{3000}f\ng";
        let parts: Vec<&str> = segments(text).collect();
        assert_eq!(parts.concat(), text);
        assert_eq!(parts, ["a\n", "b\n c\n/d\n\n", "e\u{a0}\n\u{3000}f\n", "g"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, .. ProptestConfig::default() })]

        #[test]
        fn pieces_are_the_patterns_on_arbitrary_ascii(text in "[\\x00-\\x7f]{0,120}") {
            prop_assert_eq!(ascii_pieces(&text).collect::<Vec<_>>(), regex_pieces(&text));
        }

        #[test]
        fn pieces_are_the_patterns_on_word_like_ascii(
            text in "([a-zA-Z]{1,6}|'[sStTdDmMx]|'(re|ve|ll|RE|Ll|vE)|[0-9]{1,5}|[ \\t\\r\\n\\x0b\\x0c]{1,4}|[.,;:!?/()<>@#$%^&*_+=|~\"-]{1,3}){0,60}"
        ) {
            prop_assert_eq!(ascii_pieces(&text).collect::<Vec<_>>(), regex_pieces(&text));
        }

        #[test]
        fn segments_pre_tokenize_as_the_whole_text(text in "(\\PC|[ \\t\\r\\n/]){0,80}") {
            let whole = regex_pieces(&text);
            let parts: Vec<&str> = segments(&text).flat_map(regex_pieces).collect();
            prop_assert_eq!(parts, whole);
        }
    }
}
