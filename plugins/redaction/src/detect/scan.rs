//! The structural scanner: one forward pass over the bytes that finds every built-in entity.
//!
//! The loop walks the text word by word (ASCII word characters `[A-Za-z0-9_]`). At each word
//! start it looks at the first bytes and tries only the rules that can start there: digits
//! lead to the numeric shapes (IPv4, card, SSN, phones, IPv6 and MAC, Bitcoin), an uppercase
//! pair and two digits to an IBAN, a literal prefix (`AKIA`, `eyJ`, `ghp_`, `sk-`, `xox`,
//! `AIza`, `Bearer`, ...) to the rule of that prefix. Between words, a few trigger bytes do the
//! same: `@` (email), `:` and `=` (a keyword secret before them, `://` with credentials, `::`
//! of IPv6), `+` and `(` (phones), `-----BEGIN` (private keys). Every other byte costs one
//! table lookup, and non-ASCII bytes are never word characters, so any text stays fast.
//!
//! Numeric shapes are matched by hand; rules with a literal prefix run their regex anchored at
//! the prefix (rare, so cheap). Every candidate then goes through its rule's validator.

use aho_corasick::{AhoCorasick, MatchKind};
use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

use super::builtin::{Id, RULES, Rule};
use super::{Finding, phone, union};
use crate::entity::Entity;

/// ASCII word characters `[A-Za-z0-9_]`.
static WORD: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    table
};

/// The bytes the scan loop stops at: digits and the trigger punctuation. Letters, spaces,
/// other punctuation and non-ASCII bytes are skipped with one lookup each.
static STOP: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_digit() || matches!(c, b'@' | b':' | b'=' | b'+' | b'(');
        b += 1;
    }
    table
};

#[inline(always)]
fn is_word(byte: u8) -> bool {
    WORD[byte as usize]
}

fn is_digit(byte: u8) -> bool {
    byte.is_ascii_digit()
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The bytes of `x` (eight bytes, little-endian) in `(`..=`@`, each marked by its high bit:
/// digits and the stop punctuation, with `)` to `/` and `;` to `?` along (the "has
/// between" bit trick, exact per byte).
#[inline(always)]
fn stop_candidates(x: u64) -> u64 {
    let low7 = x & (ONES * 127);
    (ONES * (127 + 0x41)).wrapping_sub(low7) & !x & low7.wrapping_add(ONES * (127 - 0x27)) & HIGHS
}

/// The position of the next stop byte at or after `i` (or `h.len()`): eight bytes at a time,
/// looking up only the candidates of a chunk, then byte by byte for the last few.
#[inline(always)]
fn next_stop(h: &[u8], mut i: usize) -> usize {
    let n = h.len();
    while i + 8 <= n {
        let mut chunk = [0u8; 8];
        chunk.copy_from_slice(&h[i..i + 8]);
        let mut bits = stop_candidates(u64::from_le_bytes(chunk));
        while bits != 0 {
            let at = i + (bits.trailing_zeros() / 8) as usize;
            if STOP[h[at] as usize] {
                return at;
            }
            bits &= bits - 1;
        }
        i += 8;
    }
    while i < n && !STOP[h[i] as usize] {
        i += 1;
    }
    i
}

/// True if no word character follows `at` (an ASCII `\b` after a word character).
fn boundary(h: &[u8], at: usize) -> bool {
    !h.get(at).copied().is_some_and(is_word)
}

fn starts(h: &[u8], at: usize, prefix: &[u8]) -> bool {
    h.get(at..at + prefix.len()) == Some(prefix)
}

/// The start of the chain of hex groups (`hh:`, `hh-`, `hhhh.`) that ends with the word at
/// `s`: where a MAC or IPv6 address containing that word would start.
fn chain_head(h: &[u8], s: usize) -> usize {
    let mut head = s;
    while head >= 2
        && matches!(h[head - 1], b':' | b'-' | b'.')
        && h[head - 2].is_ascii_hexdigit()
        && s - head < 40
    {
        let mut k = head - 1;
        while k > 0 && head - 1 - k < 4 && h[k - 1].is_ascii_hexdigit() {
            k -= 1;
        }
        if k > 0 && is_word(h[k - 1]) {
            break;
        }
        head = k;
    }
    head
}

/// `n` ASCII digits at `at`.
fn digits_at(h: &[u8], at: usize, n: usize) -> bool {
    h.get(at..at + n)
        .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
}

/// The end of an ISO date (`2024-01-15`), a time (`10:23`, `10:23:45.123`), or both
/// (`2024-01-15T10:23:45Z`, `2024-01-15 10:23:45+02:00`) at `s`, if one is there.
fn date_time(h: &[u8], s: usize) -> Option<usize> {
    let mut end = s;
    let date = digits_at(h, s, 4)
        && h.get(s + 4) == Some(&b'-')
        && digits_at(h, s + 5, 2)
        && h.get(s + 7) == Some(&b'-')
        && digits_at(h, s + 8, 2);
    if date {
        end = s + 10;
        if matches!(h.get(end), Some(b'T' | b' ')) && digits_at(h, end + 1, 2) {
            end += 1;
        } else {
            return boundary(h, end).then_some(end);
        }
    }
    // hh:mm[:ss][.fff][Z|±hh:mm]
    let hour = if digits_at(h, end, 2) {
        2
    } else if digits_at(h, end, 1) && !date {
        1
    } else {
        return date.then(|| end - 1);
    };
    if h.get(end + hour) != Some(&b':') || !digits_at(h, end + hour + 1, 2) {
        return date.then(|| end - 1);
    }
    end += hour + 3;
    if h.get(end) == Some(&b':') && digits_at(h, end + 1, 2) {
        end += 3;
    }
    if h.get(end) == Some(&b'.') && digits_at(h, end + 1, 1) {
        end += 1;
        while end < h.len() && h[end].is_ascii_digit() {
            end += 1;
        }
    }
    if h.get(end) == Some(&b'Z') {
        end += 1;
    } else if matches!(h.get(end), Some(b'+' | b'-')) && digits_at(h, end + 1, 2) {
        end += 3;
        if h.get(end) == Some(&b':') && digits_at(h, end + 1, 2) {
            end += 3;
        } else if digits_at(h, end, 2) {
            end += 2;
        }
    }
    (boundary(h, end) && h.get(end) != Some(&b':')).then_some(end)
}

/// Groups `0..=k` of `g` are card-shaped: 12 to 19 digits, bare or in groups of four (the
/// last one shorter), or 4-6-4 and 4-6-5 (Diners, American Express), separated by spaces or
/// dashes.
fn card_shape(h: &[u8], g: &Groups, k: usize) -> bool {
    let digits = g.digits(k);
    let shape = match k {
        0 => true,
        2 if g.sizes_are(&[4, 6]) => (4..=5).contains(&g.size(2)),
        _ => (0..k).all(|i| g.size(i) == 4) && (1..=4).contains(&g.size(k)),
    };
    shape && (12..=19).contains(&digits) && g.seps_in(k, b" -") && boundary(h, g.end[k])
}

/// The end of the longest card-shaped number in `g`, if there is one.
fn card_shape_end(h: &[u8], g: &Groups) -> Option<usize> {
    (0..g.len)
        .rev()
        .find(|&k| card_shape(h, g, k))
        .map(|k| g.end[k])
}

/// Digit groups separated by single separators: `4111 1111`, `123-45-6789`, `10.0.0.1`.
struct Groups {
    start: [usize; 9],
    end: [usize; 9],
    sep: [u8; 8],
    len: usize,
}

impl Groups {
    fn parse(h: &[u8], mut j: usize) -> Groups {
        let mut g = Groups {
            start: [0; 9],
            end: [0; 9],
            sep: [0; 8],
            len: 0,
        };
        loop {
            let start = j;
            while j < h.len() && is_digit(h[j]) {
                j += 1;
            }
            g.start[g.len] = start;
            g.end[g.len] = j;
            g.len += 1;
            if g.len == 9 {
                break;
            }
            match (h.get(j), h.get(j + 1)) {
                (Some(&sep @ (b' ' | b'-' | b'.' | b'/')), Some(&next)) if is_digit(next) => {
                    g.sep[g.len - 1] = sep;
                    j += 1;
                }
                _ => break,
            }
        }
        g
    }

    fn size(&self, i: usize) -> usize {
        self.end[i] - self.start[i]
    }

    fn sizes_are(&self, sizes: &[usize]) -> bool {
        self.len >= sizes.len() && sizes.iter().enumerate().all(|(i, &s)| self.size(i) == s)
    }

    fn seps_in(&self, count: usize, allowed: &[u8]) -> bool {
        self.sep[..count].iter().all(|s| allowed.contains(s))
    }

    fn digits(&self, upto: usize) -> usize {
        (0..=upto).map(|i| self.size(i)).sum()
    }
}

/// The rules with a literal prefix, found by one prefiltered multi-pattern regex.
pub(crate) const LITERAL_RULES: [Id; 12] = [
    Id::PrivateKey,
    Id::Jwt,
    Id::AwsAccessKey,
    Id::GithubClassic,
    Id::GithubPat,
    Id::Anthropic,
    Id::OpenAi,
    Id::Slack,
    Id::SlackWebhook,
    Id::Stripe,
    Id::Google,
    Id::Bearer,
];

/// The literal prefixes of the literal-prefixed rules, longest first where one extends
/// another, each with its rule.
const PREFIXES: &[(&str, Id)] = &[
    ("-----BEGIN ", Id::PrivateKey),
    ("eyJ", Id::Jwt),
    ("AKIA", Id::AwsAccessKey),
    ("ASIA", Id::AwsAccessKey),
    ("ABIA", Id::AwsAccessKey),
    ("ACCA", Id::AwsAccessKey),
    ("AGPA", Id::AwsAccessKey),
    ("AIDA", Id::AwsAccessKey),
    ("AIPA", Id::AwsAccessKey),
    ("ANPA", Id::AwsAccessKey),
    ("ANVA", Id::AwsAccessKey),
    ("APKA", Id::AwsAccessKey),
    ("AROA", Id::AwsAccessKey),
    ("ASCA", Id::AwsAccessKey),
    ("ghp_", Id::GithubClassic),
    ("gho_", Id::GithubClassic),
    ("ghu_", Id::GithubClassic),
    ("ghs_", Id::GithubClassic),
    ("ghr_", Id::GithubClassic),
    ("github_pat_", Id::GithubPat),
    ("sk-ant-", Id::Anthropic),
    ("sk-", Id::OpenAi),
    ("xox", Id::Slack),
    ("https://hooks.slack.com/", Id::SlackWebhook),
    ("sk_live_", Id::Stripe),
    ("sk_test_", Id::Stripe),
    ("rk_live_", Id::Stripe),
    ("rk_test_", Id::Stripe),
    ("AIza", Id::Google),
    ("Bearer", Id::Bearer),
    ("bearer", Id::Bearer),
];

/// The built-in rules; an Aho-Corasick automaton over the literal prefixes and the regex of
/// each enabled literal-prefixed rule, run anchored at each prefix found; and which rules are
/// enabled.
pub(crate) struct Scanner {
    rules: Vec<Rule>,
    prefixes: Option<AhoCorasick>,
    literals: Vec<(Id, Regex)>,
    enabled: [bool; RULES],
}

impl Scanner {
    pub(crate) fn new(
        rules: Vec<Rule>,
        literals: Vec<(Id, Regex)>,
        enabled: [bool; RULES],
    ) -> Scanner {
        let prefixes = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(PREFIXES.iter().map(|(prefix, _)| prefix))
            .ok();
        Scanner {
            rules,
            prefixes,
            literals,
            enabled,
        }
    }

    pub(crate) fn rules(&self) -> &[Rule] {
        &self.rules
    }

    fn on(&self, id: Id) -> bool {
        self.enabled[id as usize]
    }

    /// Finds every built-in entity in `h`, in order, without overlaps.
    pub(crate) fn scan(&self, h: &[u8], out: &mut Vec<Finding>) {
        self.scan_from(h, 0, out);
    }

    /// Like [`Scanner::scan`], from byte `from` on (earlier bytes are context only).
    fn scan_from(&self, h: &[u8], from: usize, out: &mut Vec<Finding>) {
        let mut literal = Vec::new();
        self.literals(h, from, &mut literal);
        if literal.is_empty() {
            self.structural(h, from, out);
            return;
        }
        let mut structural = Vec::new();
        self.structural(h, from, &mut structural);
        // Both lists are sorted; at the same start the literal rule comes first.
        let mut all = Vec::with_capacity(literal.len() + structural.len());
        let (mut a, mut b) = (
            literal.into_iter().peekable(),
            structural.into_iter().peekable(),
        );
        while let Some(next) = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if y.start < x.start => b.next(),
            (Some(_), _) => a.next(),
            (None, _) => b.next(),
        } {
            all.push(next);
        }
        union(all, out);
    }

    /// Findings of the literal-prefixed rules: one prefiltered search.
    fn literals(&self, h: &[u8], from: usize, out: &mut Vec<Finding>) {
        let Some(prefixes) = &self.prefixes else {
            return;
        };
        if self.literals.is_empty() {
            return;
        }
        let mut at = from;
        while at < h.len() {
            let Some(m) = prefixes.find(aho_corasick::Input::new(h).range(at..)) else {
                break;
            };
            let Some(&(_, id)) = PREFIXES.get(m.pattern().as_usize()) else {
                break;
            };
            let found = self.literal_at(id, h, m.start()).or_else(|| {
                // `sk-ant-...` that is not an Anthropic key may still be an OpenAI one.
                (id == Id::Anthropic)
                    .then(|| self.literal_at(Id::OpenAi, h, m.start()))
                    .flatten()
            });
            match found {
                Some(finding) => {
                    at = finding.end.max(m.start() + 1);
                    out.push(finding);
                }
                None => at = m.start() + 1,
            }
        }
    }

    /// Rule `id`'s regex, anchored at `at`, then its validator.
    fn literal_at(&self, id: Id, h: &[u8], at: usize) -> Option<Finding> {
        let (_, regex) = self.literals.iter().find(|(l, _)| *l == id)?;
        let input = Input::new(h).range(at..).anchored(Anchored::Yes);
        let m = regex.search(&input)?;
        self.accept(id, h, m.start(), m.end())
    }

    /// Findings of the structural rules: the byte loop.
    fn structural(&self, h: &[u8], from: usize, out: &mut Vec<Finding>) {
        let n = h.len();
        let mut i = from;
        let mut floor = from;
        loop {
            i = next_stop(h, i);
            if i >= n {
                break;
            }
            // The most common stops start nothing; decide those here, without the call.
            let b = h[i];
            if is_digit(b) {
                if let Some(end) = plain_number_end(h, i) {
                    i = end;
                    continue;
                }
            } else if matches!(b, b':' | b'=')
                && !(b == b':' && matches!(h.get(i + 1), Some(b'/' | b':')))
                && !may_end_keyword(h, keyword_end(h, i))
            {
                i += 1;
                continue;
            }
            let (found, next) = self.at_stop(h, i);
            match found {
                Some(finding) => {
                    let mut finding = *finding;
                    finding.start = finding.start.max(floor);
                    i = finding.end.max(i + 1);
                    if finding.start < finding.end {
                        floor = finding.end;
                        out.push(finding);
                    }
                }
                None => i = next.max(i + 1),
            }
        }
    }

    /// The rules that can start at stop byte `i`: a finding (boxed: the common answer is
    /// none, and a small return value keeps the scan loop fast) and where to go on.
    #[inline(never)]
    fn at_stop(&self, h: &[u8], i: usize) -> (Option<Box<Finding>>, usize) {
        let b = h[i];
        let (found, next) = if is_digit(b) {
            if i > 0 && is_word(h[i - 1]) {
                self.digit_in_word(h, i)
            } else {
                self.numeric(h, i)
            }
        } else {
            let found = match b {
                b'@' => self.email(h, i),
                b':' | b'=' => self.at_separator(h, i),
                _ => self.phone(h, i),
            };
            (found, i + 1)
        };
        (found.map(Box::new), next)
    }

    /// Validates a candidate of rule `id` and makes it a finding.
    pub(crate) fn accept(&self, id: Id, h: &[u8], start: usize, end: usize) -> Option<Finding> {
        if !self.on(id) {
            return None;
        }
        let rule = &self.rules[id as usize];
        let (start, end) = (rule.check)(h, start, end)?;
        if start >= end {
            return None;
        }
        if rule.reclassify
            && let Some(specific) = self.specific(h, start, end)
        {
            return Some(specific);
        }
        Some(self.finding(id, start, end))
    }

    fn finding(&self, id: Id, start: usize, end: usize) -> Finding {
        let rule = &self.rules[id as usize];
        Finding {
            entity: rule.entity.clone(),
            subtype: rule.subtype,
            start,
            end,
            score: rule.score,
        }
    }

    /// A specific rule that matches all of `start..end` (the value of a keyword secret).
    fn specific(&self, h: &[u8], start: usize, end: usize) -> Option<Finding> {
        let mut inner = Vec::new();
        self.scan_from(&h[..end], start, &mut inner);
        let first = inner.into_iter().next()?;
        let generic = matches!(first.entity, Entity::Secret);
        (first.start == start && first.end == end && !generic).then_some(first)
    }

    /// The first digit of a word that starts with a letter: an IBAN (`DE89...`) or a segwit
    /// address (`bc1...`) starts two bytes earlier; a MAC or IPv6 address starting with a hex
    /// letter (`fe80::1`, `aa:bb:c1:...`) starts at the head of its chain of hex groups.
    #[inline]
    fn digit_in_word(&self, h: &[u8], i: usize) -> (Option<Finding>, usize) {
        let mut end = i + 1;
        while end < h.len() && is_word(h[end]) {
            end += 1;
        }
        if let Some(s) = i.checked_sub(2)
            && (s == 0 || !is_word(h[s - 1]))
            && h[s].is_ascii_uppercase()
            && h[s + 1].is_ascii_uppercase()
        {
            let (found, skip) = self.iban(h, s);
            if found.is_some() || skip > s {
                return (found, skip.max(end));
            }
        }
        (self.digit_in_word_at(h, i), end)
    }

    fn digit_in_word_at(&self, h: &[u8], i: usize) -> Option<Finding> {
        let mut s = i;
        while s > 0 && i - s < 4 && h[s - 1].is_ascii_hexdigit() {
            s -= 1;
        }
        let mut e = i;
        while e < h.len() && e - s < 4 && h[e].is_ascii_hexdigit() {
            e += 1;
        }
        let chained = |at: Option<&u8>| matches!(at, Some(b':' | b'-' | b'.'));
        let word_start = s == 0 || !is_word(h[s - 1]);
        if word_start && (chained(h.get(e)) || s > 0 && chained(h.get(s - 1))) {
            // A hex word such as `fe80` in a chain of `hh:` / `hh-` / `hhhh.` groups.
            let head = chain_head(h, s);
            // (A chain whose head is a digit was tried at that digit.)
            if !h[head].is_ascii_digit()
                && let Some(f) = self.hex_colon(h, head)
            {
                return Some(f);
            }
        }
        let s = i.checked_sub(2)?;
        if s > 0 && is_word(h[s - 1]) {
            return None;
        }
        if h[s..i].eq_ignore_ascii_case(b"bc") && h[i] == b'1' {
            return self.crypto_word(h, s);
        }
        None
    }

    /// `[A-Z]{2}[0-9]{2}` then 11 to 30 more letters or digits, single spaces allowed.
    /// An IBAN, and where its shape ends (a rejected IBAN-shaped token is skipped whole: the
    /// numbers inside an invalid IBAN are not phone or card numbers).
    fn iban(&self, h: &[u8], s: usize) -> (Option<Finding>, usize) {
        let Some(head) = h.get(s..s + 4) else {
            return (None, s);
        };
        if !(head[1].is_ascii_uppercase()
            && is_digit(head[2])
            && is_digit(head[3])
            && self.on(Id::Iban))
        {
            return (None, s);
        }
        let alnum = |b: u8| b.is_ascii_uppercase() || is_digit(b);
        let (mut j, mut count) = (s + 4, 0);
        while count < 30 {
            match (h.get(j), h.get(j + 1)) {
                (Some(&b), _) if alnum(b) => j += 1,
                (Some(b' '), Some(&b)) if alnum(b) => j += 2,
                _ => break,
            }
            count += 1;
        }
        if count < 11 {
            return (None, s);
        }
        (self.accept(Id::Iban, h, s, j), j)
    }

    /// A Bitcoin address spanning the whole word at `s`.
    fn crypto_word(&self, h: &[u8], s: usize) -> Option<Finding> {
        if !h.get(s + 13).copied().is_some_and(is_word) || !self.on(Id::Crypto) {
            return None; // shorter than any address
        }
        let mut e = s;
        while e < h.len() && is_word(h[e]) {
            e += 1;
        }
        let word = &h[s..e];
        let shape = if word.len() >= 3 && word[..3].eq_ignore_ascii_case(b"bc1") {
            (14..=74).contains(&word.len())
        } else {
            (26..=35).contains(&word.len())
                && matches!(word[0], b'1' | b'3')
                && word
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() && !matches!(b, b'0' | b'O' | b'I' | b'l'))
        };
        shape.then(|| self.accept(Id::Crypto, h, s, e)).flatten()
    }

    /// MAC and IPv6 addresses starting with a hex digit at a word start.
    fn hex_colon(&self, h: &[u8], s: usize) -> Option<Finding> {
        let mut j = s;
        while j < h.len() && j - s < 5 && h[j].is_ascii_hexdigit() {
            j += 1;
        }
        let run = j - s;
        match h.get(j) {
            Some(b':') if (1..=4).contains(&run) => {
                if run == 2
                    && let Some(f) = self.mac(h, s, b':')
                {
                    return Some(f);
                }
                self.ipv6(h, s)
            }
            Some(b'-') if run == 2 => self.mac(h, s, b'-'),
            Some(b'.') if run == 4 => self.mac_dotted(h, s),
            _ => None,
        }
    }

    /// `hh:hh:hh:hh:hh:hh` (or with `-`).
    fn mac(&self, h: &[u8], s: usize, sep: u8) -> Option<Finding> {
        let e = s + 17;
        let bytes = h.get(s..e)?;
        let shape = bytes.iter().enumerate().all(|(i, &b)| {
            if i % 3 == 2 {
                b == sep
            } else {
                b.is_ascii_hexdigit()
            }
        });
        (shape && boundary(h, e))
            .then(|| self.accept(Id::Mac, h, s, e))
            .flatten()
    }

    /// `hhhh.hhhh.hhhh`.
    fn mac_dotted(&self, h: &[u8], s: usize) -> Option<Finding> {
        let e = s + 14;
        let bytes = h.get(s..e)?;
        let shape = bytes.iter().enumerate().all(|(i, &b)| {
            if i % 5 == 4 {
                b == b'.'
            } else {
                b.is_ascii_hexdigit()
            }
        });
        (shape && boundary(h, e))
            .then(|| self.accept(Id::Mac, h, s, e))
            .flatten()
    }

    /// An IPv6 address: the run of hex digits, colons and dots at `s`, parsed.
    fn ipv6(&self, h: &[u8], s: usize) -> Option<Finding> {
        if !self.on(Id::Ipv6) {
            return None;
        }
        let mut e = s;
        let mut colons = 0;
        let mut double = false;
        while e < h.len() && e - s < 45 {
            match h[e] {
                b':' => {
                    colons += 1;
                    double |= e > s && h[e - 1] == b':';
                }
                b'.' => {}
                b if b.is_ascii_hexdigit() => {}
                _ => break,
            }
            e += 1;
        }
        if colons < 2 || !(double || colons >= 7) {
            return None;
        }
        // Trailing punctuation is not part of the address (a `::` ending is).
        while e > s && h[e - 1] == b'.' {
            e -= 1;
        }
        if e >= s + 2 && h[e - 1] == b':' && h[e - 2] != b':' {
            e -= 1;
        }
        self.accept(Id::Ipv6, h, s, e)
    }

    /// Numbers at a word start: IPv4, cards, SSNs, phones, Bitcoin.
    fn numeric(&self, h: &[u8], s: usize) -> (Option<Finding>, usize) {
        if s >= 2 && matches!(h[s - 1], b':' | b'-' | b'.') && h[s - 2].is_ascii_hexdigit() {
            // Inside a chain of hex groups that starts with a letter (`AA-0D-...`).
            let head = chain_head(h, s);
            if head < s
                && !h[head].is_ascii_digit()
                && let Some(f) = self.hex_colon(h, head)
            {
                let end = f.end;
                return (Some(f), end);
            }
        }
        let mut j = s;
        while j < h.len() && is_digit(h[j]) {
            j += 1;
        }
        let word_end = || {
            let mut e = j;
            while e < h.len() && is_word(h[e]) {
                e += 1;
            }
            e
        };
        match h.get(j).copied() {
            // (A plain short number followed by punctuation never gets here: see
            // `plain_number_end`.)
            Some(c) if is_word(c) => {
                // `12ms`, `3f2504e0`, `1BvBMSEY...`: hex chains and Bitcoin only.
                let found = self.hex_colon(h, s).or_else(|| {
                    if matches!(h[s], b'1' | b'3') {
                        self.crypto_word(h, s)
                    } else {
                        None
                    }
                });
                return (found, word_end());
            }
            Some(b':' | b'-' | b'.') if j - s <= 4 => {
                if let Some(f) = self.hex_colon(h, s) {
                    return (Some(f), j);
                }
                // Dates and times (`2024-01-15T10:23:45.123Z`, `10:23:45`) hold no entity:
                // skip them whole instead of stopping at each of their numbers.
                if let Some(end) = date_time(h, s) {
                    return (None, end);
                }
            }
            _ => {}
        }
        self.numeric_groups(h, s, j)
    }

    /// Numbers with separators (or long ones) at a word start.
    /// Returns the finding, or where to go on: past a card-shaped number that failed its
    /// checks (the numbers inside it are not phone numbers).
    fn numeric_groups(&self, h: &[u8], s: usize, j: usize) -> (Option<Finding>, usize) {
        let grouped = matches!(h.get(j), Some(b' ' | b'-' | b'.' | b'/'))
            && h.get(j + 1)
                .copied()
                .is_some_and(|b| is_digit(b) || b == b'(');
        if !grouped && j - s < 8 {
            return (None, j);
        }
        let g = Groups::parse(h, s);
        let found = self.numeric_shapes(h, s, &g);
        if found.is_some() {
            return (found, j);
        }
        let card_end = (g.digits(g.len - 1) >= 12)
            .then(|| card_shape_end(h, &g))
            .flatten();
        (None, card_end.unwrap_or(j))
    }

    fn numeric_shapes(&self, h: &[u8], s: usize, g: &Groups) -> Option<Finding> {
        // IPv4: four dotted groups of 1 to 3 digits.
        if g.len >= 4
            && g.seps_in(3, b".")
            && (0..4).all(|i| (1..=3).contains(&g.size(i)))
            && boundary(h, g.end[3])
            && let Some(f) = self.accept(Id::Ipv4, h, s, g.end[3])
        {
            return Some(f);
        }
        // Cards: 12 to 19 digits in the usual groupings.
        if self.on(Id::Card) && g.digits(g.len - 1) >= 12 {
            for k in (0..g.len).rev() {
                if card_shape(h, g, k)
                    && let Some(f) = self.accept(Id::Card, h, s, g.end[k])
                {
                    return Some(f);
                }
            }
        }
        // SSN: 3-2-4 with dashes or spaces.
        let ssn_shape = g.sizes_are(&[3, 2, 4])
            && g.sep[0] == g.sep[1]
            && matches!(g.sep[0], b'-' | b' ')
            && boundary(h, g.end[2]);
        if ssn_shape && let Some(f) = self.accept(Id::Ssn, h, s, g.end[2]) {
            return Some(f);
        }
        // A card- or SSN-shaped number that failed its checks is no phone number.
        let digits = g.digits(g.len - 1);
        if ssn_shape || (digits >= 12 && card_shape_end(h, g).is_some()) {
            return None;
        }
        // Phone numbers have seven digits or more (`8 (066) ...` goes on past the groups).
        let paren_next = h.get(g.end[g.len - 1] + 1) == Some(&b'(');
        if digits < 7 && !paren_next {
            return None;
        }
        let phone = self.phone(h, s)?;
        Some(self.with_card_after(h, g, phone))
    }

    /// A phone number read from the first groups of a longer run may end inside a card
    /// number that starts at one of its later groups (`15.01 4111 1111 1111 1111`: a date
    /// and a card read as the phone `15.01 4111 1111`). Going on after the phone would show
    /// the card's last groups, so the finding covers both, as the card.
    fn with_card_after(&self, h: &[u8], g: &Groups, phone: Finding) -> Finding {
        if !self.on(Id::Card) {
            return phone;
        }
        for &start in &g.start[1..g.len] {
            if start >= phone.end {
                break;
            }
            let rest = Groups::parse(h, start);
            if rest.digits(rest.len - 1) < 12 {
                continue;
            }
            for k in (0..rest.len).rev() {
                if rest.end[k] <= phone.end {
                    break;
                }
                if card_shape(h, &rest, k)
                    && let Some(card) = self.accept(Id::Card, h, start, rest.end[k])
                {
                    return Finding {
                        start: phone.start,
                        ..card
                    };
                }
            }
        }
        phone
    }

    /// A phone number at `s` (a digit, `+` or `(`): see `phone.rs`.
    fn phone(&self, h: &[u8], s: usize) -> Option<Finding> {
        if !self.on(Id::PhoneIntl) && !self.on(Id::PhoneNational) {
            return None;
        }
        let phone = phone::find(h, s)?;
        let id = if phone.international {
            Id::PhoneIntl
        } else {
            Id::PhoneNational
        };
        let mut finding = self.accept(id, h, s, phone.end)?;
        finding.score = phone.score;
        Some(finding)
    }

    /// `@`: the domain to the right; the validator finds the local part to the left.
    fn email(&self, h: &[u8], at: usize) -> Option<Finding> {
        if !self.on(Id::Email) || at == 0 || !is_word(h[at - 1]) && h[at - 1] != b'-' {
            return None;
        }
        let domain_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'.' || b == b'-';
        let mut run = at + 1;
        while run < h.len() && run - at < 256 && domain_byte(h[run]) {
            run += 1;
        }
        // The longest domain ending in `.letters{2,24}` followed by a non-word byte.
        let mut end = run;
        while end > at + 3 {
            if h[end - 1].is_ascii_alphabetic() && boundary(h, end) {
                let mut q = end;
                while q > at + 1 && h[q - 1].is_ascii_alphabetic() {
                    q -= 1;
                }
                let tld = end - q;
                if q > at + 2 && h[q - 1] == b'.' && (2..=24).contains(&tld) {
                    return self.accept(Id::Email, h, at, end);
                }
            }
            end -= 1;
        }
        None
    }

    /// `:` or `=`: a keyword secret before it, credentials after `://`, or `::` of IPv6.
    fn at_separator(&self, h: &[u8], i: usize) -> Option<Finding> {
        if h[i] == b':' {
            if starts(h, i + 1, b"//") {
                return self.url(h, i);
            }
            if h.get(i + 1) == Some(&b':') && !(i > 0 && (is_word(h[i - 1]) || h[i - 1] == b':')) {
                return self.ipv6(h, i);
            }
        }
        self.keyword_secret(h, i)
    }

    /// `scheme://user:password@host...`.
    fn url(&self, h: &[u8], i: usize) -> Option<Finding> {
        if !self.on(Id::Url) {
            return None;
        }
        let user_byte = |b: u8| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'.' | b'_'
                        | b'~'
                        | b'%'
                        | b'!'
                        | b'$'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b','
                        | b';'
                        | b'='
                        | b'-'
                )
        };
        let mut j = i + 3;
        let user = j;
        while j < h.len() && user_byte(h[j]) {
            j += 1;
        }
        if j == user || h.get(j) != Some(&b':') {
            return None;
        }
        j += 1;
        let pass = j;
        while j < h.len() && (user_byte(h[j]) || h[j] == b'(' || h[j] == b')') {
            j += 1;
        }
        if j == pass || h.get(j) != Some(&b'@') {
            return None;
        }
        j += 1;
        let host = j;
        while j < h.len() && (h[j].is_ascii_alphanumeric() || h[j] == b'.' || h[j] == b'-') {
            j += 1;
        }
        if j == host {
            return None;
        }
        if h.get(j) == Some(&b':') {
            let port = j + 1;
            let mut k = port;
            while k < h.len() && k - port < 5 && is_digit(h[k]) {
                k += 1;
            }
            if k > port {
                j = k;
            }
        }
        if matches!(h.get(j), Some(b'/' | b'?' | b'#')) {
            while j < h.len()
                && (user_byte(h[j])
                    || matches!(h[j], b':' | b'@' | b'/' | b'?' | b'#' | b'(' | b')'))
            {
                j += 1;
            }
        }
        self.accept(Id::Url, h, i, j)
    }

    /// `keyword["']? {0,3}(=|:|=>|:=) {0,3}value` with the separator at `i`.
    fn keyword_secret(&self, h: &[u8], i: usize) -> Option<Finding> {
        if !self.on(Id::Secret) && !self.on(Id::AwsSecret) {
            return None;
        }
        if i > 0 && matches!(h[i - 1], b':' | b'=') {
            return None; // the second byte of `:=`, `==`
        }
        let k = keyword_end(h, i);
        let keyword = keyword_before(h, k)?;
        let kw_start = k - keyword;
        let mut j = i + 1;
        if matches!((h[i], h.get(j)), (b'=', Some(b'>')) | (b':', Some(b'='))) {
            j += 1;
        }
        let sep_end = j;
        while j < h.len() && j - sep_end < 3 && matches!(h[j], b' ' | b'\t') {
            j += 1;
        }
        let end = match h.get(j) {
            Some(&q @ (b'"' | b'\'')) => {
                let body = j + 1;
                let mut e = body;
                while e < h.len() && h[e] != q && h[e] != b'\n' && !(q == b'"' && h[e] == b'\\') {
                    e += 1;
                }
                if e == body || h.get(e) != Some(&q) {
                    return None;
                }
                e + 1
            }
            _ => {
                let bare = |b: u8| {
                    b.is_ascii_alphanumeric()
                        || matches!(
                            b,
                            b'_' | b'-'
                                | b'+'
                                | b'/'
                                | b'='
                                | b'.'
                                | b'!'
                                | b'@'
                                | b'#'
                                | b'$'
                                | b'%'
                                | b'^'
                                | b'&'
                                | b'*'
                                | b'~'
                                | b'?'
                        )
                };
                let mut e = j;
                while e < h.len() && bare(h[e]) {
                    e += 1;
                }
                if e - j < 6 {
                    return None;
                }
                e
            }
        };
        if self.on(Id::AwsSecret)
            && let Some(f) = self.aws_secret(h, kw_start, end)
        {
            return Some(f);
        }
        self.accept(Id::Secret, h, kw_start, end)
    }

    /// An AWS secret access key after its keyword.
    fn aws_secret(&self, h: &[u8], kw_start: usize, end: usize) -> Option<Finding> {
        let mut ident = kw_start;
        while ident > 0 && kw_start - ident < 32 && (is_word(h[ident - 1]) || h[ident - 1] == b'-')
        {
            ident -= 1;
        }
        let name: Vec<u8> = h[ident..kw_start + 20.min(end - kw_start)]
            .iter()
            .filter(|b| b.is_ascii_alphanumeric())
            .map(u8::to_ascii_lowercase)
            .collect();
        let named = name.windows(15).any(|w| w == b"secretaccesskey")
            || (name.starts_with(b"aws") && name.windows(9).any(|w| w == b"secretkey"));
        if !named {
            return None;
        }
        let value_end = if matches!(h[end - 1], b'"' | b'\'') {
            end - 1
        } else {
            end
        };
        let value_start = value_end.checked_sub(40)?;
        let value = &h[value_start..value_end];
        let shape = value
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'/' || b == b'+')
            && value_start > kw_start
            && !h[value_start - 1].is_ascii_alphanumeric();
        shape
            .then(|| self.accept(Id::AwsSecret, h, kw_start, value_end))
            .flatten()
    }
}

/// Where the keyword before the separator at `i` would end: before up to three spaces or
/// tabs and a quote (`"password" : `).
#[inline(always)]
fn keyword_end(h: &[u8], i: usize) -> usize {
    let mut k = i;
    while k > 0 && i - k < 3 && matches!(h[k - 1], b' ' | b'\t') {
        k -= 1;
    }
    if k > 0 && matches!(h[k - 1], b'"' | b'\'') {
        k -= 1;
    }
    k
}

/// The two letters before `k` end some secret keyword (each ends in one of these pairs): a
/// quick reject for every other name.
#[inline(always)]
fn may_end_keyword(h: &[u8], k: usize) -> bool {
    let (Some(&before), Some(&last)) = (
        k.checked_sub(2).and_then(|i| h.get(i)),
        k.checked_sub(1).and_then(|i| h.get(i)),
    ) else {
        return false;
    };
    matches!(
        [before.to_ascii_lowercase(), last.to_ascii_lowercase()],
        [b'r' | b'w', b'd']
            | [b's', b'e']
            | [b'e', b't' | b'y' | b'n']
            | [b'a', b'l']
            | [b'l', b's']
    )
}

/// Where a plain number at `s` ends, when nothing can start there (and it is not inside a
/// chain of hex groups such as `AA-0D-...`): fewer than eight digits followed by punctuation
/// no numeric shape goes on with, or by a space and no digit (`3 tables`); or a word of
/// digits and then letters that are not hex digits (`123ms`), unless it may be a Bitcoin
/// address (those start with 1 or 3). More groups after a space or a dot: see
/// [`short_run_end`].
#[inline(always)]
fn plain_number_end(h: &[u8], s: usize) -> Option<usize> {
    if s > 0 && is_word(h[s - 1])
        || s >= 2 && matches!(h[s - 1], b':' | b'-' | b'.') && h[s - 2].is_ascii_hexdigit()
    {
        return None;
    }
    let mut j = s + 1;
    while j < h.len() && j - s < 8 && is_digit(h[j]) {
        j += 1;
    }
    if j - s >= 8 {
        return None;
    }
    match h.get(j).copied() {
        next if ends_number(next) => Some(j),
        Some(b' ' | b'.') if h.get(j + 1).copied().is_some_and(is_digit) => short_run_end(h, s, j),
        Some(b' ') => (h.get(j + 1) != Some(&b'(')).then_some(j),
        Some(c) if glued_word(c) && !matches!(h[s], b'1' | b'3') => Some(word_end(h, j)),
        _ => None,
    }
}

/// The end of the text, or punctuation after a number that no numeric shape goes on with.
#[inline(always)]
fn ends_number(next: Option<u8>) -> bool {
    matches!(
        next,
        None | Some(b',' | b'"' | b'\n' | b')' | b']' | b'}' | b';' | b'\r' | b'\t' | b'%')
    )
}

/// A letter after digits that makes them part of a word no numeric shape continues: not a
/// hex digit (MAC and IPv6 groups, hex ids) and not `x` (a phone extension, `x31`).
#[inline(always)]
fn glued_word(c: u8) -> bool {
    c.is_ascii_alphabetic() && !c.is_ascii_hexdigit() && !matches!(c, b'x' | b'X') || c == b'_'
}

fn word_end(h: &[u8], mut end: usize) -> usize {
    while end < h.len() && is_word(h[end]) {
        end += 1;
    }
    end
}

/// Where a run of short numbers starting at `s` ends when no entity can start inside it:
/// groups of digits joined by single spaces or dots (`200 404 17`, `1234.56`), six digits or
/// fewer in all and at most two dots (a phone number has seven digits or more, an SSN nine,
/// a card twelve, an IPv4 address three dots; the other shapes need other separators),
/// ending in punctuation or a space and a word. A later group glued to a word (`200
/// 1234ms`) ends the run too, and is where to go on: the groups before it cannot reach past
/// the word, so only their digits count. Anything else goes to the full check (`None`).
/// `first_end` is where the first group ends, before a separator and a digit.
#[inline(never)]
fn short_run_end(h: &[u8], s: usize, first_end: usize) -> Option<usize> {
    const MAX_DIGITS: usize = 6;
    const MAX_DOTS: usize = 2;
    let mut digits = first_end - s;
    let mut dots = 0;
    let mut end = first_end;
    loop {
        // `h[end]` is a space or a dot, and a digit follows.
        dots += usize::from(h[end] == b'.');
        let start = end + 1;
        end = start;
        while end < h.len() && is_digit(h[end]) {
            end += 1;
        }
        if dots > MAX_DOTS {
            return None;
        }
        match h.get(end).copied() {
            Some(c) if glued_word(c) => return (digits <= MAX_DIGITS).then_some(start),
            _ => digits += end - start,
        }
        if digits > MAX_DIGITS {
            return None;
        }
        match h.get(end).copied() {
            next if ends_number(next) => return Some(end),
            Some(b' ' | b'.') if h.get(end + 1).copied().is_some_and(is_digit) => {}
            Some(b' ') if h.get(end + 1) != Some(&b'(') => return Some(end),
            _ => return None,
        }
    }
}

/// The length of the secret keyword ending at `k` (case-insensitive), if one does.
fn keyword_before(h: &[u8], k: usize) -> Option<usize> {
    const KEYWORDS: &[&[u8]] = &[
        b"password",
        b"passwd",
        b"pwd",
        b"passphrase",
        b"secret",
        b"apikey",
        b"api_key",
        b"api-key",
        b"accesskey",
        b"access_key",
        b"access-key",
        b"authkey",
        b"auth_key",
        b"auth-key",
        b"secretkey",
        b"secret_key",
        b"secret-key",
        b"privatekey",
        b"private_key",
        b"private-key",
        b"token",
        b"credential",
        b"credentials",
    ];
    if !may_end_keyword(h, k) {
        return None;
    }
    KEYWORDS
        .iter()
        .filter(|kw| {
            k >= kw.len()
                && h[k - kw.len()..k]
                    .iter()
                    .zip(kw.iter())
                    .all(|(a, b)| a.to_ascii_lowercase() == *b)
        })
        .map(|kw| kw.len())
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eight_byte_stop_search_agrees_with_the_table() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let alphabet = b"ab ,.-/;<>?09:=+(@)\xc3\xa9\x80\xff\"'\n";
        for _ in 0..2000 {
            let len = (state % 40) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            for from in 0..=text.len() {
                let naive = (from..text.len())
                    .find(|&i| STOP[text[i] as usize])
                    .unwrap_or(text.len());
                assert_eq!(next_stop(&text, from), naive, "{text:?} from {from}");
            }
        }
    }
}
