//! Phone numbers: candidates by shape, checked against the numbering plans, weighed by the
//! words before them.
//!
//! # Where the plan data comes from
//!
//! Country calling codes, the national significant number lengths each code allows and the
//! national (trunk) prefixes come from libphonenumber's metadata, as the `phonenumber` crate
//! (its Rust port, kept in step with libphonenumber's releases) ships it. Loading that crate's
//! whole database at run time costs about 150 ms and a dozen dependencies, for a redactor that
//! needs three small tables, so `phone_plan.rs` holds those tables, written from the crate by
//! the test `plan_is_the_phonenumber_metadata` below, which fails when the two differ (after a
//! `phonenumber` upgrade: run it with `UPDATE_PHONE_PLAN=1` to rewrite the file).
//!
//! The plan decides what is *possible* (the length for a country, as libphonenumber's
//! `isPossibleNumber`), not what is assigned: a redactor prefers hiding an unassigned number
//! to showing an assigned one.
//!
//! # Shapes and strength
//!
//! A candidate is a run of digit groups (`+44 (0)20 7946 0958`, `(11) 4706-5521`,
//! `0660 412 77 31`, `394.208.1176 x31`) with an optional extension, tried from its longest
//! prefix of groups down. Each shape has a strength:
//! - strong: `+` or `00` and a country code with a possible length; North American
//!   `NXX-NXX-XXXX` in its usual groupings; a trunk `0` (or a lone trunk digit such as
//!   Russia's `8`) followed by groups, with a possible length for some plan using that prefix;
//! - medium: the same shapes with an area code starting with 0 or 1 (North America), a bare
//!   trunk number (`0232781286`), a parenthesized area code (`(11) 4706-5521`), three or more
//!   groups of two or more digits (`22 657 07 04`);
//! - weak: two groups (`555-0147`, `3533 7406`), thousands-like groups (`609 141 777`) and
//!   bare runs of 8 to 12 digits.
//!
//! The nearest keyword in the 40 bytes before a candidate (same line) decides the rest: a
//! strong shape is always a phone number; a medium one unless the keyword names something
//! else (order, invoice, id, ticket, version, amount, ...); a weak one only after a phone
//! word (phone, tel, call, mobile, fax, Telefon, téléphone, teléfono, 電話, ...). Dates,
//! times, IPv4 addresses and versions are rejected by shape, and a candidate glued to a
//! longer number (`1.2.3.4.5`, `123-45-6789-0`, digits in a word) is no phone number.

use super::context::{Keyword, column_keyword, keyword_before};
use super::phone_plan::{COUNTRY_CODES, TRUNK_PREFIXES};

/// How phone-like a shape is on its own (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Strength {
    Weak,
    Medium,
    Strong,
}

/// A phone number found at a start position.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Phone {
    /// One past its last byte (after the extension, if any).
    pub(crate) end: usize,
    /// Written with `+` or `00` and a country code.
    pub(crate) international: bool,
    /// How sure: the strength of the shape, raised by a phone word before it.
    pub(crate) score: f32,
}

const MAX_GROUPS: usize = 8;
const MAX_DIGITS: usize = 17;

/// Digit groups of a candidate, with their separators.
struct Parts {
    /// Starts with `+` (or `(+`).
    plus: bool,
    start: [usize; MAX_GROUPS],
    end: [usize; MAX_GROUPS],
    /// The group is in parentheses.
    paren: [bool; MAX_GROUPS],
    /// The separator before each group: ` `, `-`, `.`, `/`, or 0 for none.
    sep: [u8; MAX_GROUPS],
    len: usize,
}

impl Parts {
    fn size(&self, i: usize) -> usize {
        self.end[i] - self.start[i]
    }

    /// Where group `i` ends, with its closing parenthesis.
    fn close(&self, i: usize) -> usize {
        self.end[i] + usize::from(self.paren[i])
    }
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// Fills `p` (empty) with the digit groups at `s` (a digit, `+` or `(`); false if there are
/// none. (Filled in place: returning the arrays by value costs a copy per candidate, and
/// candidates are as common as numbers with a space after them.)
fn parse(h: &[u8], s: usize, p: &mut Parts) -> bool {
    let mut j = s;
    let mut sep = 0;
    let mut digits = 0;
    if h[j] == b'+' {
        p.plus = true;
        j += 1;
    } else if h[j] == b'(' && h.get(j + 1) == Some(&b'+') {
        // `(+358) 083778353`: the country code in parentheses.
        p.plus = true;
        j += 2;
        let start = j;
        while j < h.len() && j - start < 3 && is_digit(h[j]) {
            j += 1;
        }
        if j == start || h.get(j) != Some(&b')') {
            return false;
        }
        p.start[0] = start;
        p.end[0] = j;
        p.paren[0] = true;
        p.len = 1;
        digits = j - start;
        j += 1;
        sep = match h.get(j) {
            Some(&b @ (b' ' | b'-' | b'.')) if h.get(j + 1).copied().is_some_and(is_digit) => {
                j += 1;
                b
            }
            _ => return false,
        };
    }
    while p.len < MAX_GROUPS {
        let open = h.get(j) == Some(&b'(');
        let d0 = j + usize::from(open);
        let mut d1 = d0;
        while d1 < h.len() && is_digit(h[d1]) && d1 - d0 < 12 {
            d1 += 1;
        }
        if d1 == d0 || (open && h.get(d1) != Some(&b')')) || digits + (d1 - d0) > MAX_DIGITS {
            break;
        }
        p.start[p.len] = d0;
        p.end[p.len] = d1;
        p.paren[p.len] = open;
        p.sep[p.len] = sep;
        p.len += 1;
        digits += d1 - d0;
        j = d1 + usize::from(open);
        // The separator to the next group: one of ` - . /`, a space around `-` or `/`
        // (`06/ 834 49 78`), or none before a parenthesis and after one.
        let next_starts = |k: usize| h.get(k).copied().is_some_and(|b| is_digit(b) || b == b'(');
        sep = match (h.get(j), h.get(j + 1)) {
            (Some(b'('), _) if p.len < MAX_GROUPS => 0,
            (Some(b), _) if open && is_digit(*b) => 0,
            (Some(&b @ (b'-' | b'/')), Some(b' ')) if next_starts(j + 2) => {
                j += 1;
                b
            }
            (Some(b' '), Some(&b @ (b'-' | b'/')))
                if h.get(j + 2) == Some(&b' ') && next_starts(j + 3) =>
            {
                j += 2;
                b
            }
            (Some(&b @ (b' ' | b'-' | b'.' | b'/')), _) if next_starts(j + 1) => b,
            _ => break,
        };
        if sep != 0 {
            j += 1;
        }
    }
    p.len > 0
}

/// The digits of groups `0..k`, without a `(0)` trunk group of an international number.
fn digits(h: &[u8], p: &Parts, k: usize, out: &mut [u8; MAX_DIGITS]) -> usize {
    let mut n = 0;
    for i in 0..k {
        if p.plus && p.paren[i] && p.size(i) == 1 && h[p.start[i]] == b'0' && i > 0 {
            continue;
        }
        for &d in &h[p.start[i]..p.end[i]] {
            if n < MAX_DIGITS {
                out[n] = d;
                n += 1;
            }
        }
    }
    n
}

fn has_length(mask: u32, len: usize) -> bool {
    len < 32 && mask & (1 << len) != 0
}

/// The plan of the country code that starts `digits`: (code length, lengths, trunk digit).
fn country(digits: &[u8]) -> Option<(usize, u32, u8)> {
    let mut code = 0u16;
    for (i, &d) in digits.iter().take(3).enumerate() {
        code = code * 10 + u16::from(d - b'0');
        if let Ok(at) = COUNTRY_CODES.binary_search_by_key(&code, |&(c, _, _)| c) {
            let (_, lengths, trunk) = COUNTRY_CODES[at];
            return Some((i + 1, lengths, trunk));
        }
    }
    None
}

/// `digits` (after `+` or `00`) is a country code and a national number of a possible length
/// (written with or without the country's trunk prefix).
fn international(digits: &[u8]) -> bool {
    let Some((code, lengths, trunk)) = country(digits) else {
        return false;
    };
    let national = &digits[code..];
    has_length(lengths, national.len())
        || (national.first() == Some(&trunk) && has_length(lengths, national.len() - 1))
}

fn trunk_lengths(trunk: u8) -> Option<u32> {
    TRUNK_PREFIXES
        .iter()
        .find(|&&(t, _)| t == trunk)
        .map(|&(_, lengths)| lengths)
}

/// `dd.mm.yyyy`, `mm/dd/yy`, `yyyy-mm-dd` and the like.
fn date_like(p: &Parts, k: usize) -> bool {
    if k != 3 || p.sep[1] != p.sep[2] || !matches!(p.sep[1], b'.' | b'/' | b'-') {
        return false;
    }
    matches!(
        (p.size(0), p.size(1), p.size(2)),
        (1..=2, 1..=2, 2 | 4) | (4, 1..=2, 1..=2)
    )
}

/// Four dotted groups of up to three digits.
fn ipv4_like(p: &Parts, k: usize) -> bool {
    k == 4 && (1..4).all(|i| p.sep[i] == b'.') && (0..4).all(|i| p.size(i) <= 3)
}

/// The separators of groups `1..k` are of one kind, or of two when the first differs
/// (`089/123 456`); the ones next to a parenthesis do not count (`8 (066) 907-43-91`).
fn separators_ok(p: &Parts, k: usize) -> bool {
    let mut later = (2..k)
        .filter(|&i| p.sep[i] != 0 && !p.paren[i] && !p.paren[i - 1])
        .map(|i| p.sep[i]);
    let first = later.next();
    later.all(|s| Some(s) == first)
}

/// North American `NXX-NXX-XXXX` in its groupings, optionally after a `1`: the strength.
fn nanp(h: &[u8], p: &Parts, k: usize) -> Option<Strength> {
    let off = usize::from(k == 4 && p.size(0) == 1 && h[p.start[0]] == b'1');
    if k - off != 3 || p.size(off) != 3 || p.size(off + 1) != 3 || p.size(off + 2) != 4 {
        return None;
    }
    let (a, b) = (p.sep[off + 1], p.sep[off + 2]);
    let shape = if p.paren[off] {
        matches!(a, 0 | b' ' | b'-' | b'.') && matches!(b, b' ' | b'-' | b'.')
    } else {
        a == b && matches!(a, b' ' | b'-' | b'.') && !p.paren[off + 1]
    };
    if !shape || p.paren[off + 2] {
        return None;
    }
    let area = h[p.start[off]];
    let exchange = h[p.start[off + 1]];
    Some(if area >= b'2' && exchange >= b'2' {
        Strength::Strong
    } else {
        Strength::Medium
    })
}

/// The strength of groups `0..k` as a phone number, and whether it is international.
fn classify(h: &[u8], p: &Parts, k: usize) -> Option<(Strength, bool)> {
    let mut buf = [0u8; MAX_DIGITS];
    let n = digits(h, p, k, &mut buf);
    let d = &buf[..n];
    if n < 7 {
        return None;
    }
    // After `+` the country code decides; national groupings vary (`+55 47 3071-9359`).
    if p.plus {
        return international(d).then_some((Strength::Strong, true));
    }
    if date_like(p, k) || ipv4_like(p, k) || !separators_ok(p, k) {
        return None;
    }
    if d.starts_with(b"00") && !p.paren[0] {
        return international(&d[2..]).then_some((Strength::Strong, true));
    }
    if let Some(strength) = nanp(h, p, k) {
        return Some((strength, false));
    }
    if (1..k).any(|i| p.size(i) > 8) || p.size(k - 1) < 2 {
        return None;
    }
    // A trunk prefix: `0` leading the first group, or a lone trunk digit (`8 812 415 86 83`).
    let trunk = if d[0] == b'0' && d[1] != b'0' && p.size(0) >= 2 {
        Some(b'0')
    } else if p.size(0) == 1 && k >= 3 && d[0] != b'0' {
        Some(d[0])
    } else {
        None
    };
    if let Some(lengths) = trunk.and_then(trunk_lengths)
        && has_length(lengths, n - 1)
        && (8..=13).contains(&n)
    {
        if k == 1 {
            return (trunk == Some(b'0') && (9..=12).contains(&n))
                .then_some((Strength::Medium, false));
        }
        let first = p.size(0);
        let groups = (1..k).all(|i| p.size(i) >= 2);
        // Eight digits in two groups is also how some postcodes look (`03470-230`).
        let strength = if n >= 9 {
            Strength::Strong
        } else {
            Strength::Medium
        };
        return (groups && first <= 6).then_some((strength, false));
    }
    if d[0] == b'0' || !(7..=12).contains(&n) {
        return None;
    }
    if k == 1 {
        // Ten digits that fit the North American plan are how databases keep phone numbers.
        if n == 10 && d[0] >= b'2' && d[3] >= b'2' {
            return Some((Strength::Medium, false));
        }
        return (n >= 8).then_some((Strength::Weak, false));
    }
    let groups = (1..k).all(|i| p.size(i) >= 2) && (2..=5).contains(&p.size(0));
    if !groups {
        return None;
    }
    if p.paren[0] && n >= 8 {
        return Some((Strength::Medium, false));
    }
    // `12 345 678` reads as an amount.
    let thousands = (1..k).all(|i| p.size(i) == 3 && p.sep[i] == b' ');
    if k >= 3 && n >= 8 && !thousands {
        return Some((Strength::Medium, false));
    }
    (k >= 3 || p.size(k - 1) >= 4).then_some((Strength::Weak, false))
}

/// The end of an extension after a number ending at `end` (`x31`, ` ext. 123`, ` #12`).
fn extension(h: &[u8], end: usize) -> usize {
    let marker_start = |b: Option<&u8>| matches!(b, Some(b'x' | b'X' | b'e' | b'E' | b'#'));
    if !(marker_start(h.get(end)) || h.get(end) == Some(&b' ') && marker_start(h.get(end + 1))) {
        return end;
    }
    let mut j = end;
    if h.get(j) == Some(&b' ') {
        j += 1;
    }
    let rest = &h[j.min(h.len())..];
    let marker = [&b"extension"[..], b"ext.", b"ext", b"x", b"#"]
        .into_iter()
        .find(|m| rest.len() >= m.len() && rest[..m.len()].eq_ignore_ascii_case(m));
    let Some(marker) = marker else {
        return end;
    };
    j += marker.len();
    if h.get(j) == Some(&b' ') {
        j += 1;
    }
    let digits = j;
    while j < h.len() && j - digits < 6 && is_digit(h[j]) {
        j += 1;
    }
    let glued = h
        .get(j)
        .copied()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
    if j == digits || glued { end } else { j }
}

/// The candidate ends where a number can end: not glued to a word or to more digits
/// (`1.2.3.4.5`, `123-45-6789-0`).
fn ends_clean(h: &[u8], end: usize) -> bool {
    match h.get(end) {
        Some(b) if b.is_ascii_alphanumeric() || *b == b'_' => false,
        Some(b'.' | b'-' | b'/' | b':') => !h.get(end + 1).copied().is_some_and(is_digit),
        _ => true,
    }
}

/// The candidate does not continue a number or word on its left.
fn starts_clean(h: &[u8], s: usize) -> bool {
    let Some(&before) = s.checked_sub(1).and_then(|i| h.get(i)) else {
        return true;
    };
    if before.is_ascii_alphanumeric() || matches!(before, b'_' | b'+') {
        return false;
    }
    let digit_before = s >= 2 && is_digit(h[s - 2]);
    !(matches!(before, b'.' | b'-' | b'/' | b':') && digit_before)
}

/// A phone number starting at `s` (a digit, `+` or `(`), if there is one.
pub(crate) fn find(h: &[u8], s: usize) -> Option<Phone> {
    if !starts_clean(h, s) {
        return None;
    }
    let mut p = Parts {
        plus: false,
        start: [0; MAX_GROUPS],
        end: [0; MAX_GROUPS],
        paren: [false; MAX_GROUPS],
        sep: [0; MAX_GROUPS],
        len: 0,
    };
    if !parse(h, s, &mut p) {
        return None;
    }
    let mut context = None;
    let mut digits_upto = [0; MAX_GROUPS + 1];
    for i in 0..p.len {
        digits_upto[i + 1] = digits_upto[i] + p.size(i);
    }
    for k in (1..=p.len).rev() {
        if digits_upto[k] < 7 {
            break; // no phone number has fewer digits
        }
        let end = extension(h, p.close(k - 1));
        if !ends_clean(h, end) {
            continue;
        }
        let Some((strength, international)) = classify(h, &p, k) else {
            continue;
        };
        let words = *context
            .get_or_insert_with(|| column_keyword(h, s, end).or_else(|| keyword_before(h, s)));
        let accepted = match strength {
            Strength::Strong => true,
            Strength::Medium => !matches!(words, Some(Keyword::Other | Keyword::Version)),
            Strength::Weak => words == Some(Keyword::Phone),
        };
        if !accepted {
            continue;
        }
        let phone_word = words == Some(Keyword::Phone);
        let score = match (strength, phone_word) {
            (Strength::Strong, true) => 0.95,
            (Strength::Strong, false) => 0.85,
            (Strength::Medium, true) => 0.8,
            (Strength::Medium, false) => 0.7,
            (Strength::Weak, _) => 0.6,
        };
        return Some(Phone {
            end,
            international,
            score,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phone(text: &str) -> Option<&str> {
        let h = text.as_bytes();
        let s = h
            .iter()
            .position(|&b| b.is_ascii_digit() || b == b'+' || b == b'(')?;
        find(h, s).map(|p| &text[s..p.end])
    }

    #[test]
    fn shapes_of_many_countries() {
        for (text, want) in [
            ("Call 001-283-555-0147", "001-283-555-0147"),
            ("at 394.208.1176 x31 today", "394.208.1176 x31"),
            ("0660 412 77 31", "0660 412 77 31"),
            ("(11) 4706-5521", "(11) 4706-5521"),
            ("(07911) 123456", "(07911) 123456"),
            ("06-12345678", "06-12345678"),
            ("+44(0)115 4960914", "+44(0)115 4960914"),
            ("+49 (0) 9141 777631", "+49 (0) 9141 777631"),
            ("(+358) 083778353", "(+358) 083778353"),
            ("8 (066) 907-43-91", "8 (066) 907-43-91"),
            ("06/ 834 49 78", "06/ 834 49 78"),
            ("+1-537-640-6812x41586", "+1-537-640-6812x41586"),
            ("tel 609 141 777", "609 141 777"),
        ] {
            assert_eq!(phone(text), Some(want), "{text}");
        }
    }

    #[test]
    fn look_alikes_are_not_phones() {
        for text in [
            "01.02.2024",
            "12/31/2024",
            "2024-01-15",
            "version 1.2.3.4",
            "010.001.002.003",
            "order 4827361920",
            "609 141 777",
            "12345 200",
            "+80 123 456 789",
            "+12",
        ] {
            assert_eq!(phone(text), None, "{text}");
        }
    }

    /// The tables of `phone_plan.rs`, written from the `phonenumber` crate's metadata.
    fn plan_source() -> String {
        use std::collections::BTreeMap;
        use std::fmt::Write;

        use phonenumber::metadata::DATABASE;

        let mut codes: BTreeMap<u16, (u32, u8)> = BTreeMap::new();
        let mut trunks: BTreeMap<u8, u32> = BTreeMap::new();
        for region in DATABASE.iter() {
            let d = region.descriptors();
            let mut lengths = 0u32;
            for descriptor in [
                d.fixed_line(),
                d.mobile(),
                d.toll_free(),
                d.premium_rate(),
                d.shared_cost(),
                d.personal_number(),
                d.voip(),
                d.pager(),
                d.uan(),
                d.voicemail(),
            ]
            .into_iter()
            .flatten()
            {
                for &len in descriptor.possible_length() {
                    lengths |= 1 << len;
                }
            }
            let trunk = region
                .national_prefix()
                .filter(|p| p.len() == 1)
                .map_or(b'-', |p| p.as_bytes()[0]);
            let entry = codes.entry(region.country_code()).or_insert((0, b'-'));
            entry.0 |= lengths;
            if region.is_main_country_for_code() || entry.1 == b'-' {
                entry.1 = trunk;
            }
            if trunk != b'-' {
                *trunks.entry(trunk).or_default() |= lengths;
            }
        }
        let mut out = String::from(
            "//! Numbering plans, written from the `phonenumber` crate's metadata (libphonenumber)\n\
             //! by the test `plan_is_the_phonenumber_metadata` in `phone.rs`: do not edit.\n\n\
             /// Country calling codes, sorted: (code, bit set of the possible lengths of its\n\
             /// national significant numbers, its national (trunk) prefix digit or `-`).\n\
             #[rustfmt::skip]\n\
             pub(super) const COUNTRY_CODES: &[(u16, u32, u8)] = &[\n",
        );
        for (code, (lengths, trunk)) in &codes {
            let _ = writeln!(
                out,
                "    ({code}, {lengths:#010x}, b'{}'),",
                char::from(*trunk)
            );
        }
        out.push_str(
            "];\n\n\
             /// One-digit national (trunk) prefixes: (digit, bit set of the lengths of the\n\
             /// national significant numbers dialled after it, over every plan using it).\n\
             #[rustfmt::skip]\n\
             pub(super) const TRUNK_PREFIXES: &[(u8, u32)] = &[\n",
        );
        for (trunk, lengths) in &trunks {
            let _ = writeln!(out, "    (b'{}', {lengths:#010x}),", char::from(*trunk));
        }
        out.push_str("];\n");
        out
    }

    #[test]
    fn plan_is_the_phonenumber_metadata() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/detect/phone_plan.rs");
        let want = plan_source();
        if std::env::var_os("UPDATE_PHONE_PLAN").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap();
        assert!(
            have == want,
            "phone_plan.rs differs from the phonenumber crate's metadata: \
             rerun with UPDATE_PHONE_PLAN=1 to rewrite it"
        );
    }
}
