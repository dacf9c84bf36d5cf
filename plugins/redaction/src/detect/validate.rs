//! Validators: run on a regex match, they accept it, narrow it, or reject it.
//!
//! Each takes the haystack and the match's byte range and returns the range of the finding
//! (often the same, sometimes narrowed: an IBAN trimmed to its country's length, a secret
//! without its keyword) or `None` when the match is a look-alike (a number failing Luhn, an
//! SSN in a range never issued, an address with a bad checksum).

use super::card::{self, Issuer};
use super::context::{Keyword, keyword_before};
use super::digest::sha256;

/// The signature of a validator.
pub(crate) type Check = fn(&[u8], usize, usize) -> Option<(usize, usize)>;

/// Accepts the match as it is.
pub(crate) fn any(_: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    Some((start, end))
}

fn is_alnum(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
}

/// The byte before `at`, if any.
fn before(h: &[u8], at: usize) -> Option<u8> {
    at.checked_sub(1).and_then(|i| h.get(i)).copied()
}

/// True if `h[at..]` starts with `sep` followed by an ASCII digit: the match would continue a
/// longer number such as `1.2.3.4.5` or `123-45-6789-0`.
fn continues_number(h: &[u8], at: usize) -> bool {
    matches!(h.get(at), Some(b'.' | b'-' | b'/' | b':'))
        && h.get(at + 1).is_some_and(u8::is_ascii_digit)
}

/// True if the number before `at` continues into the match (`5.1.2.3.4`, `1-123-45-6789`).
fn number_before(h: &[u8], at: usize) -> bool {
    matches!(before(h, at), Some(b'.' | b'-' | b'/' | b':' | b'+'))
        && at >= 2
        && h.get(at - 2).is_some_and(u8::is_ascii_digit)
}

/// Token characters of keys and tokens (base64url and friends).
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-')
}

/// The key is not glued to more token characters on its right.
pub(crate) fn token_end(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let glued = h.get(end).copied().is_some_and(is_token_byte);
    let glued_left = before(h, start).is_some_and(is_token_byte);
    (!glued && !glued_left).then_some((start, end))
}

/// Mixed-case alphanumeric token of a provider (OpenAI, Slack, Stripe): not glued, and not a
/// run of words like `sk-learn-classifier-model`.
pub(crate) fn mixed_token(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    token_end(h, start, end)?;
    let body = &h[start..end];
    let digits = body.iter().filter(|b| b.is_ascii_digit()).count();
    let upper = body.iter().filter(|b| b.is_ascii_uppercase()).count();
    let lower = body.iter().filter(|b| b.is_ascii_lowercase()).count();
    (digits > 0 && upper + digits > 2 && lower > 0).then_some((start, end))
}

/// Luhn checksum over the digits of `bytes` (other bytes are skipped).
pub(crate) fn luhn(bytes: &[u8]) -> bool {
    let mut sum = 0u32;
    let mut double = false;
    for &byte in bytes.iter().rev() {
        if !byte.is_ascii_digit() {
            continue;
        }
        let mut digit = u32::from(byte - b'0');
        if double {
            digit *= 2;
            if digit > 9 {
                digit -= 9;
            }
        }
        sum += digit;
        double = !double;
    }
    sum.is_multiple_of(10)
}

/// The separators between digit groups are all the same (or absent).
fn consistent_separators(bytes: &[u8]) -> bool {
    let mut seen: Option<u8> = None;
    for &byte in bytes {
        if byte.is_ascii_digit() {
            continue;
        }
        match seen {
            None => seen = Some(byte),
            Some(sep) if sep == byte => {}
            Some(_) => return false,
        }
    }
    true
}

/// A payment card: 12 to 19 digits, one kind of separator, an issuer range that allows its
/// length (`card.rs`), Luhn; a number only a broad issuer block takes is no card when the
/// words before it name something else.
pub(crate) fn credit_card(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let text = &h[start..end];
    if number_before(h, start) || continues_number(h, end) || !consistent_separators(text) {
        return None;
    }
    let digits: Vec<u8> = text.iter().copied().filter(u8::is_ascii_digit).collect();
    if !(12..=19).contains(&digits.len()) || digits.iter().all(|d| *d == digits[0]) {
        return None;
    }
    let issuer = card::issuer(&digits)?;
    if issuer == Issuer::Broad
        && matches!(
            keyword_before(h, start),
            Some(Keyword::Other | Keyword::Version)
        )
    {
        return None;
    }
    luhn(&digits).then_some((start, end))
}

/// A US SSN: area not 000, 666 or 9xx; group not 00; serial not 0000; and not a famous
/// advertising number.
pub(crate) fn us_ssn(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    if number_before(h, start) || continues_number(h, end) {
        return None;
    }
    let digits: Vec<u32> = h[start..end]
        .iter()
        .filter(|b| b.is_ascii_digit())
        .map(|b| u32::from(b - b'0'))
        .collect();
    if digits.len() != 9 {
        return None;
    }
    let area = digits[0] * 100 + digits[1] * 10 + digits[2];
    let group = digits[3] * 10 + digits[4];
    let serial = digits[5] * 1000 + digits[6] * 100 + digits[7] * 10 + digits[8];
    let invalid = area == 0
        || area == 666
        || area >= 900
        || group == 0
        || serial == 0
        || (area, group, serial) == (78, 5, 1120)
        || (area, group, serial) == (219, 9, 9999);
    (!invalid).then_some((start, end))
}

/// IBAN lengths by country (the IBAN registry).
const IBAN_LENGTHS: &[(&[u8; 2], usize)] = &[
    (b"AD", 24),
    (b"AE", 23),
    (b"AL", 28),
    (b"AT", 20),
    (b"AZ", 28),
    (b"BA", 20),
    (b"BE", 16),
    (b"BG", 22),
    (b"BH", 22),
    (b"BI", 27),
    (b"BR", 29),
    (b"BY", 28),
    (b"CH", 21),
    (b"CR", 22),
    (b"CY", 28),
    (b"CZ", 24),
    (b"DE", 22),
    (b"DJ", 27),
    (b"DK", 18),
    (b"DO", 28),
    (b"EE", 20),
    (b"EG", 29),
    (b"ES", 24),
    (b"FI", 18),
    (b"FK", 18),
    (b"FO", 18),
    (b"FR", 27),
    (b"GB", 22),
    (b"GE", 22),
    (b"GI", 23),
    (b"GL", 18),
    (b"GR", 27),
    (b"GT", 28),
    (b"HN", 28),
    (b"HR", 21),
    (b"HU", 28),
    (b"IE", 22),
    (b"IL", 23),
    (b"IQ", 23),
    (b"IS", 26),
    (b"IT", 27),
    (b"JO", 30),
    (b"KW", 30),
    (b"KZ", 20),
    (b"LB", 28),
    (b"LC", 32),
    (b"LI", 21),
    (b"LT", 20),
    (b"LU", 20),
    (b"LV", 21),
    (b"LY", 25),
    (b"MC", 27),
    (b"MD", 24),
    (b"ME", 22),
    (b"MK", 19),
    (b"MN", 20),
    (b"MR", 27),
    (b"MT", 31),
    (b"MU", 30),
    (b"NI", 28),
    (b"NL", 18),
    (b"NO", 15),
    (b"OM", 23),
    (b"PK", 24),
    (b"PL", 28),
    (b"PS", 29),
    (b"PT", 25),
    (b"QA", 29),
    (b"RO", 24),
    (b"RS", 22),
    (b"RU", 33),
    (b"SA", 24),
    (b"SC", 31),
    (b"SD", 18),
    (b"SE", 24),
    (b"SI", 19),
    (b"SK", 24),
    (b"SM", 27),
    (b"SO", 23),
    (b"ST", 25),
    (b"SV", 28),
    (b"TL", 23),
    (b"TN", 24),
    (b"TR", 26),
    (b"UA", 29),
    (b"VA", 22),
    (b"VG", 24),
    (b"XK", 20),
    (b"YE", 30),
];

/// The length of an IBAN of this country, if the country uses IBANs.
pub(crate) fn iban_length(country: &[u8]) -> Option<usize> {
    IBAN_LENGTHS
        .iter()
        .find(|(code, _)| code.as_slice() == country)
        .map(|(_, len)| *len)
}

/// The IBAN mod-97 check over compact alphanumeric characters.
pub(crate) fn iban_checksum(compact: &[u8]) -> bool {
    if compact.len() < 5 {
        return false;
    }
    let rearranged = compact[4..].iter().chain(&compact[..4]);
    let mut rem = 0u32;
    for &byte in rearranged {
        match byte {
            b'0'..=b'9' => rem = (rem * 10 + u32::from(byte - b'0')) % 97,
            b'A'..=b'Z' => rem = (rem * 100 + u32::from(byte - b'A') + 10) % 97,
            _ => return false,
        }
    }
    rem == 1
}

/// An IBAN: the country's length, mod 97; the match is trimmed to that length.
pub(crate) fn iban(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let len = iban_length(&h[start..start + 2])?;
    let mut compact = Vec::with_capacity(len);
    let mut stop = start;
    for (i, &byte) in h[start..end].iter().enumerate() {
        if byte == b' ' {
            continue;
        }
        compact.push(byte);
        if compact.len() == len {
            stop = start + i + 1;
            break;
        }
    }
    if compact.len() != len || h.get(stop).copied().is_some_and(is_alnum) {
        return None;
    }
    iban_checksum(&compact).then_some((start, stop))
}

const BASE58: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Decodes base58 into bytes (leading `1`s become zero bytes).
fn base58_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut bytes: Vec<u8> = Vec::with_capacity(text.len());
    for &c in text {
        let mut carry = BASE58.iter().position(|&b| b == c)? as u32;
        for byte in bytes.iter_mut().rev() {
            carry += u32::from(*byte) * 58;
            *byte = (carry & 0xff) as u8;
            carry >>= 8;
        }
        while carry > 0 {
            bytes.insert(0, (carry & 0xff) as u8);
            carry >>= 8;
        }
    }
    let zeros = text.iter().take_while(|&&c| c == b'1').count();
    let mut out = vec![0u8; zeros];
    out.extend(bytes);
    Some(out)
}

/// A legacy (P2PKH, `1...`) or P2SH (`3...`) Bitcoin address with a valid base58check.
pub(crate) fn base58check(text: &[u8]) -> bool {
    let Some(decoded) = base58_decode(text) else {
        return false;
    };
    if decoded.len() != 25 || !matches!(decoded[0], 0x00 | 0x05) {
        return false;
    }
    let (payload, checksum) = decoded.split_at(21);
    sha256(&sha256(payload))[..4] == *checksum
}

const BECH32: &[u8; 32] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";

fn bech32_polymod(values: impl Iterator<Item = u8>) -> u32 {
    const GEN: [u32; 5] = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
    let mut chk = 1u32;
    for value in values {
        let top = chk >> 25;
        chk = ((chk & 0x1ff_ffff) << 5) ^ u32::from(value);
        for (i, g) in GEN.iter().enumerate() {
            if (top >> i) & 1 == 1 {
                chk ^= g;
            }
        }
    }
    chk
}

/// A segwit Bitcoin address (`bc1...`): bech32 for version 0, bech32m for later versions,
/// with a witness program of a valid length.
pub(crate) fn bech32_address(text: &[u8]) -> bool {
    let lower: Vec<u8> = text.iter().map(u8::to_ascii_lowercase).collect();
    let Some(sep) = lower.iter().rposition(|&b| b == b'1') else {
        return false;
    };
    let (hrp, data) = (&lower[..sep], &lower[sep + 1..]);
    if hrp != b"bc" || data.len() < 7 {
        return false;
    }
    let Some(values) = data
        .iter()
        .map(|c| BECH32.iter().position(|b| b == c).map(|v| v as u8))
        .collect::<Option<Vec<u8>>>()
    else {
        return false;
    };
    let expanded = hrp
        .iter()
        .map(|c| c >> 5)
        .chain([0])
        .chain(hrp.iter().map(|c| c & 31))
        .chain(values.iter().copied());
    let constant = bech32_polymod(expanded);
    let version = values[0];
    let expected = if version == 0 { 1 } else { 0x2bc8_30a3 };
    if constant != expected || version > 16 {
        return false;
    }
    // Convert the program (between version and checksum) from 5-bit groups to bytes.
    let program = &values[1..values.len() - 6];
    let bits = program.len() * 5;
    let bytes = bits / 8;
    let padding_ok = bits % 8 < 5;
    let len_ok = if version == 0 {
        bytes == 20 || bytes == 32
    } else {
        (2..=40).contains(&bytes)
    };
    padding_ok && len_ok
}

/// A Bitcoin address with a valid checksum.
pub(crate) fn crypto(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let text = &h[start..end];
    let valid = if text.len() >= 3 && text[..3].eq_ignore_ascii_case(b"bc1") {
        bech32_address(text)
    } else {
        base58check(text)
    };
    valid.then_some((start, end))
}

/// A MAC address with one kind of separator, not part of a longer colon or dash list (a key
/// fingerprint, an IPv6 address).
pub(crate) fn mac(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let text = &h[start..end];
    let seps: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_hexdigit())
        .collect();
    if seps.windows(2).any(|w| w[0] != w[1]) {
        return None;
    }
    let sep = seps.first().copied().unwrap_or(b':');
    let longer_right =
        h.get(end) == Some(&sep) && h.get(end + 1).is_some_and(u8::is_ascii_hexdigit);
    let longer_left = before(h, start) == Some(sep)
        && start >= 2
        && h.get(start - 2).is_some_and(u8::is_ascii_hexdigit);
    (!longer_right && !longer_left).then_some((start, end))
}

/// An IPv4 address: four octets up to 255 without leading zeros, not part of a longer dotted
/// number such as a version string, and not named a version by the words before it.
pub(crate) fn ipv4(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    if number_before(h, start) || continues_number(h, end) || before(h, start) == Some(b'.') {
        return None;
    }
    if keyword_before(h, start) == Some(Keyword::Version) {
        return None; // `version 10.2.0.1`
    }
    let text = std::str::from_utf8(&h[start..end]).ok()?;
    for octet in text.split('.') {
        let value: u32 = octet.parse().ok()?;
        if value > 255 || (octet.len() > 1 && octet.starts_with('0')) {
            return None;
        }
    }
    Some((start, end))
}

/// An IPv6 address as the standard library parses it, with at least two non-empty groups
/// and five hex digits (so `a::b` in code is not an address), not glued to a word.
pub(crate) fn ipv6(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    if before(h, start).is_some_and(|b| is_alnum(b) || b == b':' || b == b'.' || b == b'_') {
        return None;
    }
    if h.get(end)
        .is_some_and(|&b| is_alnum(b) || b == b':' || b == b'_')
    {
        return None;
    }
    let text = std::str::from_utf8(&h[start..end]).ok()?;
    let groups = text.split(':').filter(|g| !g.is_empty()).count();
    let hex = text.bytes().filter(u8::is_ascii_hexdigit).count();
    if groups < 2 || hex < 5 {
        return None;
    }
    text.parse::<std::net::Ipv6Addr>().ok()?;
    Some((start, end))
}

/// Walks left from `at` over bytes `allowed`, at most `max` of them; returns the new start.
fn extend_left(h: &[u8], at: usize, max: usize, allowed: impl Fn(u8) -> bool) -> usize {
    let mut start = at;
    while start > 0 && at - start < max && allowed(h[start - 1]) {
        start -= 1;
    }
    start
}

/// An email address. The pattern starts at `@`; the local part is found here, walking left.
/// No empty labels, no label starting or ending with a hyphen.
pub(crate) fn email(h: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
    let local_byte = |b: u8| is_alnum(b) || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-');
    // No length limit: a local part past the 64 bytes RFC 5321 allows is still hidden whole.
    let mut start = extend_left(h, at, usize::MAX, local_byte);
    while start < at && !is_alnum(h[start]) {
        start += 1;
    }
    let (local, domain) = (&h[start..at], &h[at + 1..end]);
    if local.is_empty() || local.ends_with(b".") || local.windows(2).any(|w| w == b"..") {
        return None;
    }
    let labels_ok = domain.split(|&b| b == b'.').all(|label| {
        !label.is_empty() && !label.starts_with(b"-") && !label.ends_with(b"-") && label.len() <= 63
    });
    labels_ok.then_some((start, end))
}

/// Decodes unpadded base64url (or standard base64); `None` on a bad character.
pub(crate) fn base64url_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for &c in text {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// A JWT: the header decodes to a JSON object naming an algorithm.
pub(crate) fn jwt(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    token_end(h, start, end)?;
    let text = &h[start..end];
    let dot = text.iter().position(|&b| b == b'.')?;
    let header = base64url_decode(&text[..dot])?;
    let header = String::from_utf8(header).ok()?;
    (header.starts_with('{') && header.contains("\"alg\"")).then_some((start, end))
}

/// Shannon entropy of a byte string, in bits per byte.
pub(crate) fn entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    // The distinct bytes, so that the sum visits only those (secrets are short; 256 slots
    // are not).
    let mut distinct = [0u8; 256];
    let mut seen = 0;
    for &b in bytes {
        let count = &mut counts[usize::from(b)];
        if *count == 0 {
            distinct[seen] = b;
            seen += 1;
        }
        *count += 1;
    }
    let len = bytes.len() as f64;
    distinct[..seen]
        .iter()
        .map(|&b| {
            let p = f64::from(counts[usize::from(b)]) / len;
            -p * p.log2()
        })
        .sum()
}

/// How many of lower, upper, digit and other character classes occur.
fn char_classes(bytes: &[u8]) -> usize {
    let lower = bytes.iter().any(u8::is_ascii_lowercase);
    let upper = bytes.iter().any(u8::is_ascii_uppercase);
    let digit = bytes.iter().any(u8::is_ascii_digit);
    let other = bytes.iter().any(|b| !b.is_ascii_alphanumeric());
    [lower, upper, digit, other]
        .into_iter()
        .filter(|&x| x)
        .count()
}

/// Values that configuration files use as placeholders, never as secrets.
fn is_placeholder(value: &[u8]) -> bool {
    let lower: Vec<u8> = value.iter().map(u8::to_ascii_lowercase).collect();
    let first = value.first().copied().unwrap_or(b'x');
    if matches!(first, b'$' | b'%' | b'{' | b'<' | b'[' | b'(') || value.starts_with(b"process.env")
    {
        return true;
    }
    if value.iter().all(|&b| b == first) {
        return true;
    }
    const WORDS: &[&[u8]] = &[
        b"password",
        b"required",
        b"optional",
        b"redacted",
        b"undefined",
        b"placeholder",
        b"string",
        b"boolean",
        b"null",
        b"none",
        b"true",
        b"false",
        b"secret",
        b"example",
        b"your_password",
        b"your-password",
        b"xxxxxx",
        b"******",
        b"changeit",
        b"environment",
    ];
    if WORDS.contains(&lower.as_slice()) {
        return true;
    }
    // A dotted identifier (`self.password`, `config.api_key`) is code, not a value.
    let dotted = value.contains(&b'.')
        && value.split(|&b| b == b'.').all(|part| {
            !part.is_empty()
                && part
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || *b == b'_' || b.is_ascii_digit())
                && !part[0].is_ascii_digit()
        });
    dotted || lower.windows(3).any(|w| w == b"***")
}

/// The value of a `keyword: value` / `keyword=value` / `"keyword": "value"` match: the range
/// after the separator, without quotes.
fn keyword_value(h: &[u8], start: usize, end: usize) -> Option<(usize, usize, bool)> {
    let text = &h[start..end];
    let sep = text.iter().position(|&b| b == b':' || b == b'=')?;
    let mut i = sep + 1;
    while i < text.len() && matches!(text[i], b'>' | b'=' | b' ' | b'\t') {
        i += 1;
    }
    let quoted = matches!(text.get(i), Some(b'"' | b'\''));
    if quoted {
        i += 1;
    }
    let mut stop = text.len();
    if quoted && stop > i && matches!(text[stop - 1], b'"' | b'\'') {
        stop -= 1;
    }
    (stop > i).then_some((start + i, start + stop, quoted))
}

/// A keyword-anchored secret: narrows the match to the value; accepts passwords that mix
/// character classes and other secrets that look random (length and entropy).
pub(crate) fn keyword_secret(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let (vs, ve, quoted) = keyword_value(h, start, end)?;
    let value = &h[vs..ve];
    if !quoted && matches!(h.get(ve), Some(b'(' | b'[')) {
        return None; // a call or an index: code, not a value
    }
    if is_placeholder(value) {
        return None;
    }
    let keyword: Vec<u8> = h[start..vs].iter().map(u8::to_ascii_lowercase).collect();
    let password_like = [&b"pass"[..], b"pwd"]
        .iter()
        .any(|k| keyword.windows(k.len()).any(|w| w == *k));
    let classes = char_classes(value);
    let ok = if password_like {
        (value.len() >= 6 && classes >= 2) || value.len() >= 12
    } else {
        value.len() >= 10 && classes >= 2 && entropy(value) >= 3.0
    };
    ok.then_some((vs, ve))
}

/// `Bearer <token>`: narrows to the token, which must look random.
pub(crate) fn bearer(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let text = &h[start..end];
    let space = text.iter().position(|b| b.is_ascii_whitespace())?;
    let mut vs = start + space;
    while h.get(vs).is_some_and(u8::is_ascii_whitespace) {
        vs += 1;
    }
    let value = &h[vs..end];
    (char_classes(value) >= 2 && entropy(value) >= 3.0 && !is_placeholder(value))
        .then_some((vs, end))
}

/// `aws_secret_access_key = <40 chars>`: narrows to the 40-character value.
pub(crate) fn aws_secret(h: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let vs = end.checked_sub(40)?;
    let glued = h
        .get(end)
        .is_some_and(|&b| is_alnum(b) || b == b'/' || b == b'+');
    (!glued && vs >= start && char_classes(&h[vs..end]) >= 2).then_some((vs, end))
}

/// A URL with credentials. The pattern starts at `://`; the scheme is found here, walking
/// left. Trailing sentence punctuation is not part of the URL.
pub(crate) fn url_credentials(h: &[u8], at: usize, mut end: usize) -> Option<(usize, usize)> {
    let scheme_byte = |b: u8| is_alnum(b) || matches!(b, b'+' | b'.' | b'-');
    let mut start = extend_left(h, at, 16, scheme_byte);
    while start < at && !h[start].is_ascii_alphabetic() {
        start += 1;
    }
    if at - start < 2 {
        return None;
    }
    while end > at && matches!(h[end - 1], b'.' | b',' | b';' | b':' | b'!' | b'?' | b'\'') {
        end -= 1;
    }
    let text = &h[start..end];
    let opens = text.iter().filter(|&&b| b == b'(').count();
    let closes = text.iter().filter(|&&b| b == b')').count();
    if closes > opens && text.ends_with(b")") {
        end -= 1;
    }
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_accepts_test_cards_and_rejects_off_by_one() {
        assert!(luhn(b"4111111111111111"));
        assert!(luhn(b"378282246310005"));
        assert!(!luhn(b"4111111111111112"));
    }

    #[test]
    fn iban_checksum_follows_mod_97() {
        assert!(iban_checksum(b"GB82WEST12345698765432"));
        assert!(iban_checksum(b"DE89370400440532013000"));
        assert!(!iban_checksum(b"DE89370400440532013001"));
    }

    #[test]
    fn bitcoin_checksums() {
        assert!(base58check(b"1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"));
        assert!(base58check(b"3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"));
        assert!(!base58check(b"1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3"));
        assert!(bech32_address(
            b"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"
        ));
        assert!(bech32_address(
            b"bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297"
        ));
        assert!(!bech32_address(
            b"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5"
        ));
    }

    #[test]
    fn entropy_of_uniform_bytes() {
        assert!((entropy(b"abcd") - 2.0).abs() < 1e-9);
        assert_eq!(entropy(b"aaaa"), 0.0);
    }
}
