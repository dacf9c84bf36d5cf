//! The words before a number: a phone word makes a weak phone shape a phone number; an
//! order, invoice or id word makes a medium one (and a card number from a broad issuer
//! block) something else; a version word makes a dotted quad a version, not an IPv4 address.
//!
//! The nearest keyword within `CONTEXT` bytes on the same line wins (`call about order
//! 4827361920` is an order). Keywords are lowercase ASCII or UTF-8 in several languages;
//! ASCII letters are compared case-insensitively.

/// What the nearest keyword before a number says it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keyword {
    /// A phone word: phone, tel, call, mobile, fax, ...
    Phone,
    /// A version word: version, v, build, release, ...
    Version,
    /// A word naming another kind of number: order, invoice, id, amount, ...
    Other,
}

/// Keywords, lowercase; `true` when only the whole word counts (otherwise a word starting
/// with it does: `mobil` in `mobile`, `mobiel`, `Mobilnummer`).
const KEYWORDS: &[(&str, bool, Keyword)] = &[
    ("phone", false, Keyword::Phone),
    ("tel", false, Keyword::Phone),
    ("tél", false, Keyword::Phone),
    ("call", false, Keyword::Phone),
    ("mobil", false, Keyword::Phone),
    ("mob", true, Keyword::Phone),
    ("cell", false, Keyword::Phone),
    ("fax", false, Keyword::Phone),
    ("contact", false, Keyword::Phone),
    ("kontakt", false, Keyword::Phone),
    ("reach", false, Keyword::Phone),
    ("dial", false, Keyword::Phone),
    ("ring", true, Keyword::Phone),
    ("sms", true, Keyword::Phone),
    ("whatsapp", false, Keyword::Phone),
    ("hotline", false, Keyword::Phone),
    ("handy", true, Keyword::Phone),
    ("rufnummer", false, Keyword::Phone),
    ("anruf", false, Keyword::Phone),
    ("erreichen", false, Keyword::Phone),
    ("téléphone", false, Keyword::Phone),
    ("portable", true, Keyword::Phone),
    ("joindre", false, Keyword::Phone),
    ("appel", false, Keyword::Phone),
    ("rappel", false, Keyword::Phone),
    ("teléfono", false, Keyword::Phone),
    ("móvil", false, Keyword::Phone),
    ("movil", false, Keyword::Phone),
    ("celular", false, Keyword::Phone),
    ("llam", false, Keyword::Phone),
    ("contacto", false, Keyword::Phone),
    ("contato", false, Keyword::Phone),
    ("ligar", false, Keyword::Phone),
    ("chiam", false, Keyword::Phone),
    ("contatt", false, Keyword::Phone),
    ("bel", true, Keyword::Phone),
    ("bellen", true, Keyword::Phone),
    ("bereik", false, Keyword::Phone),
    ("dzwo", false, Keyword::Phone),
    ("kom", true, Keyword::Phone),
    ("når", true, Keyword::Phone),
    ("телефон", false, Keyword::Phone),
    ("тел", false, Keyword::Phone),
    ("звон", false, Keyword::Phone),
    ("моб", false, Keyword::Phone),
    ("Телефон", false, Keyword::Phone),
    ("Тел", false, Keyword::Phone),
    ("Звон", false, Keyword::Phone),
    ("Моб", false, Keyword::Phone),
    ("電話", false, Keyword::Phone),
    ("携帯", false, Keyword::Phone),
    ("問い合わせ", false, Keyword::Phone),
    ("电话", false, Keyword::Phone),
    ("手机", false, Keyword::Phone),
    ("version", false, Keyword::Version),
    ("ver", true, Keyword::Version),
    ("v", true, Keyword::Version),
    ("build", false, Keyword::Version),
    ("release", false, Keyword::Version),
    ("firmware", false, Keyword::Version),
    ("fw", true, Keyword::Version),
    ("rev", true, Keyword::Version),
    ("order", false, Keyword::Other),
    ("invoice", false, Keyword::Other),
    ("inv", true, Keyword::Other),
    ("id", true, Keyword::Other),
    ("ids", true, Keyword::Other),
    ("ref", false, Keyword::Other),
    ("account", false, Keyword::Other),
    ("acct", true, Keyword::Other),
    ("ticket", false, Keyword::Other),
    ("tracking", false, Keyword::Other),
    ("serial", false, Keyword::Other),
    ("sku", true, Keyword::Other),
    ("isbn", true, Keyword::Other),
    ("port", true, Keyword::Other),
    ("pid", true, Keyword::Other),
    ("zip", true, Keyword::Other),
    ("postcode", false, Keyword::Other),
    ("postal", false, Keyword::Other),
    ("amount", false, Keyword::Other),
    ("total", false, Keyword::Other),
    ("price", false, Keyword::Other),
    ("balance", false, Keyword::Other),
    ("transaction", false, Keyword::Other),
    ("txn", true, Keyword::Other),
    ("batch", false, Keyword::Other),
    ("req", true, Keyword::Other),
    ("request", false, Keyword::Other),
    ("timestamp", false, Keyword::Other),
    ("ts", true, Keyword::Other),
    ("no.", false, Keyword::Other),
    ("nº", false, Keyword::Other),
    ("nr", true, Keyword::Other),
    ("bestell", false, Keyword::Other),
    ("rechnung", false, Keyword::Other),
    ("commande", false, Keyword::Other),
    ("facture", false, Keyword::Other),
    ("pedido", false, Keyword::Other),
    ("factura", false, Keyword::Other),
    ("ordine", false, Keyword::Other),
    ("fattura", false, Keyword::Other),
    ("faktura", false, Keyword::Other),
    ("заказ", false, Keyword::Other),
    ("счет", false, Keyword::Other),
    ("#", false, Keyword::Other),
    ("№", false, Keyword::Other),
];

/// How far before a number keywords are looked for.
const CONTEXT: usize = 40;

/// The nearest keyword in the `CONTEXT` bytes before `s` on the same line.
pub(crate) fn keyword_before(h: &[u8], s: usize) -> Option<Keyword> {
    let mut from = s.saturating_sub(CONTEXT);
    if let Some(nl) = h[from..s].iter().rposition(|&b| b == b'\n') {
        from += nl + 1;
    }
    let mut window = [0u8; CONTEXT];
    let window = &mut window[..s - from];
    for (w, &b) in window.iter_mut().zip(&h[from..s]) {
        *w = b.to_ascii_lowercase();
    }
    nearest(window)
}

/// The first bytes of the keywords.
static FIRST_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < KEYWORDS.len() {
        table[KEYWORDS[i].0.as_bytes()[0] as usize] = true;
        i += 1;
    }
    table
};

/// The keyword of `window` (lowercase) nearest to its end.
fn nearest(window: &[u8]) -> Option<Keyword> {
    let letter = |b: u8| b.is_ascii_alphabetic() || b >= 0x80;
    // Keywords do not span words, so the one ending nearest the end starts nearest it.
    for at in (0..window.len()).rev() {
        let first = window[at];
        if !FIRST_BYTES[usize::from(first)] {
            continue;
        }
        // Words start after a non-letter; CJK keywords (three-byte UTF-8) anywhere.
        let word_start = at == 0 || !letter(window[at - 1]) || first >= 0xe0;
        if (first.is_ascii_alphabetic() || first >= 0xc0) && !word_start {
            continue;
        }
        let rest = &window[at..];
        let found = KEYWORDS
            .iter()
            .filter(|(word, whole, _)| {
                let word = word.as_bytes();
                // The first byte first: a slice comparison is a call, and most fail there.
                word[0] == first
                    && rest.starts_with(word)
                    && !(*whole && rest.get(word.len()).copied().is_some_and(letter))
            })
            .max_by_key(|(word, _, _)| word.len());
        if let Some(&(_, _, kind)) = found {
            return Some(kind);
        }
    }
    None
}

/// The most lines walked up to find a CSV header.
const HEADER_LINES: usize = 64;

/// For a value that is a whole field of a comma-, semicolon- or tab-separated row: the
/// keyword of its column's header (`name,phone,city` over `Jane,555-0147,Oslo`).
pub(crate) fn column_keyword(h: &[u8], start: usize, end: usize) -> Option<Keyword> {
    let delimiter = *start.checked_sub(1).and_then(|i| h.get(i))?;
    if !matches!(delimiter, b',' | b';' | b'\t')
        || !h
            .get(end)
            .is_none_or(|&b| b == delimiter || b == b'\n' || b == b'\r')
    {
        return None;
    }
    let line_start = h[..start]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = fields(&h[line_start..start], delimiter) - 1;
    let width = fields(line_of(h, line_start), delimiter);
    // Walk up while the lines have as many fields: the top one is the header.
    let mut header = line_start;
    for _ in 0..HEADER_LINES {
        if header == 0 {
            break;
        }
        let above = h[..header - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        if fields(line_of(h, above), delimiter) != width {
            break;
        }
        header = above;
    }
    if header == line_start {
        return None;
    }
    let name = field(line_of(h, header), delimiter, column)?;
    let name: Vec<u8> = name.iter().map(u8::to_ascii_lowercase).collect();
    nearest(&name)
}

/// The line starting at `start`, without its end.
fn line_of(h: &[u8], start: usize) -> &[u8] {
    let end = h[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(h.len(), |i| start + i);
    &h[start..end]
}

/// How many fields `line` has (delimiters inside double quotes do not count).
fn fields(line: &[u8], delimiter: u8) -> usize {
    let mut quoted = false;
    let mut count = 1;
    for &b in line {
        match b {
            b'"' => quoted = !quoted,
            b if b == delimiter && !quoted => count += 1,
            _ => {}
        }
    }
    count
}

/// Field `index` of `line`.
fn field(line: &[u8], delimiter: u8, index: usize) -> Option<&[u8]> {
    let mut quoted = false;
    let mut at = 0;
    let mut start = 0;
    for (i, &b) in line.iter().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b if b == delimiter && !quoted => {
                if at == index {
                    return Some(&line[start..i]);
                }
                at += 1;
                start = i + 1;
            }
            _ => {}
        }
    }
    (at == index).then(|| &line[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_keyword_decides() {
        let near = |t: &str| keyword_before(t.as_bytes(), t.len());
        assert_eq!(near("Call about order "), Some(Keyword::Other));
        assert_eq!(near("Order 12 shipped; call "), Some(Keyword::Phone));
        assert_eq!(near("Hotel "), None);
        assert_eq!(near("{\"phone_number\": \""), Some(Keyword::Phone));
        assert_eq!(near("Téléphone : "), Some(Keyword::Phone));
        assert_eq!(near("携帯："), Some(Keyword::Phone));
    }
}
