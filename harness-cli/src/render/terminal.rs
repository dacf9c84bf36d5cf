//! Text from a model, a tool or a server made safe to print on a terminal.
//!
//! A terminal acts on escape sequences and control characters: they move the cursor, rewrite
//! what is shown, set the window title, or (an OSC sequence left unterminated) swallow
//! everything printed after them, the next prompt included. Text that someone else wrote goes
//! through one of two functions before it is printed:
//!
//! - [`strip_controls`], for prose and output: escape sequences (CSI, OSC, DCS, SOS, PM, APC,
//!   two- and three-character ones) and control characters are removed; a carriage return
//!   becomes a line break; tabs and line breaks stay. An OSC or other string sequence without
//!   its terminator loses only its introducer, so the text after it stays visible.
//! - [`show_controls`], for what a person approves: nothing is removed, every control
//!   character is shown as an escape (`\u{1b}`), so what is approved is what is seen.
//!
//! Both also neutralize the Unicode bidirectional overrides and isolates, which can make text
//! read differently from what it is.
//!
//! ```
//! use harness_cli::render::{show_controls, strip_controls};
//!
//! assert_eq!(strip_controls("\x1b[31mred\x1b[0m\x1b]0;title\x07 text"), "red text");
//! assert_eq!(strip_controls("a\x1b]8;;https://x\nb"), "a8;;https://x\nb");
//! assert_eq!(show_controls("rm -rf ~\x1b[2K"), "rm -rf ~\\u{1b}[2K");
//! ```

use std::borrow::Cow;

const ESC: char = '\x1b';

/// True for the characters both functions act on.
fn is_special(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

/// The Unicode bidirectional embeddings, overrides and isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` without escape sequences and control characters (line breaks and tabs kept, a
/// carriage return turned into a line break).
pub fn strip_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_special) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    // Past this byte there is no string terminator, so an introducer there ends nothing.
    let mut unterminated_from = usize::MAX;
    while let Some((at, c)) = chars.next() {
        match c {
            '\r' => {
                if chars.peek().is_none_or(|&(_, next)| next != '\n') {
                    out.push('\n');
                }
            }
            ESC => match chars.peek().map(|&(_, next)| next) {
                Some('[') => {
                    chars.next();
                    // Parameters and intermediates, then one final byte.
                    while chars
                        .next_if(|&(_, c)| ('\x20'..='\x3f').contains(&c))
                        .is_some()
                    {}
                    chars.next_if(|&(_, c)| ('\x40'..='\x7e').contains(&c));
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    let rest = at + 2;
                    let end = if rest >= unterminated_from {
                        None
                    } else {
                        string_end(&text[rest..]).map(|end| rest + end)
                    };
                    match end {
                        Some(end) => while chars.next_if(|&(i, _)| i < end).is_some() {},
                        None => unterminated_from = unterminated_from.min(rest),
                    }
                }
                Some('\x20'..='\x2f') => {
                    while chars
                        .next_if(|&(_, c)| ('\x20'..='\x2f').contains(&c))
                        .is_some()
                    {}
                    chars.next_if(|&(_, c)| ('\x30'..='\x7e').contains(&c));
                }
                Some('\x30'..='\x7e') => {
                    chars.next();
                }
                _ => {}
            },
            c if is_special(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The byte offset just past the terminator (BEL or ESC `\`) of a string sequence whose
/// body starts `text`, if it has one.
fn string_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            0x07 => return Some(at + 1),
            0x1b if bytes.get(at + 1) == Some(&b'\\') => return Some(at + 2),
            _ => at += 1,
        }
    }
    None
}

/// `text` with every control character (but line breaks and tabs) and bidirectional control
/// shown as an escape, `\u{1b}`, instead of acting on the terminal.
pub fn show_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_special) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_special(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sequences_are_removed_whole() {
        let cases = [
            ("\x1b[1;31mbold red\x1b[0m", "bold red"),
            ("up\x1b[2Aover\x1b[2K", "upover"),
            ("\x1b[?1049hscreen", "screen"),
            ("title\x1b]0;pwned\x07 set", "title set"),
            (
                "link \x1b]8;;https://evil\x1b\\here\x1b]8;;\x1b\\",
                "link here",
            ),
            ("dcs\x1bPq#0;2;0;0;0\x1b\\ done", "dcs done"),
            ("apc\x1b_hidden\x07!", "apc!"),
            ("charset\x1b(B ok", "charset ok"),
            ("keypad\x1b= ok\x1bM", "keypad ok"),
            ("bell\x07 del\x7f nul\0 c1\u{9b}31m", "bell del nul c131m"),
            ("a\r\nb\rc", "a\nb\nc"),
            ("tabs\tand\nlines", "tabs\tand\nlines"),
            ("\u{202E}evil\u{202C} \u{2066}iso\u{2069}", "evil iso"),
            ("trailing \x1b", "trailing "),
            ("csi cut \x1b[3", "csi cut "),
        ];
        for (raw, clean) in cases {
            assert_eq!(strip_controls(raw), clean, "{raw:?}");
        }
        assert!(matches!(strip_controls("plain ✓ text"), Cow::Borrowed(_)));
    }

    #[test]
    fn an_unterminated_string_hides_nothing_after_it() {
        assert_eq!(
            strip_controls("before\x1b]0;after\n› next prompt"),
            "before0;after\n› next prompt"
        );
        // Many introducers without a terminator stay linear.
        let hostile = "\x1b]x".repeat(200_000);
        assert_eq!(strip_controls(&hostile), "x".repeat(200_000));
    }

    #[test]
    fn controls_are_shown_not_obeyed() {
        assert_eq!(
            show_controls("echo hi\x1b]0;\x07; rm -rf ~\r"),
            "echo hi\\u{1b}]0;\\u{7}; rm -rf ~\\u{d}"
        );
        assert_eq!(show_controls("a\u{202E}b\tc\n"), "a\\u{202e}b\tc\n");
        assert!(matches!(show_controls("nothing"), Cow::Borrowed(_)));
    }

    proptest! {
        #[test]
        fn nothing_a_terminal_acts_on_survives(text in ".*", raw in proptest::collection::vec(any::<u8>(), 0..256)) {
            let lossy = String::from_utf8_lossy(&raw);
            for input in [text.as_str(), &lossy] {
                for output in [strip_controls(input), show_controls(input)] {
                    prop_assert!(!output.chars().any(is_special), "{:?} -> {:?}", input, output);
                }
            }
        }
    }
}
