//! Payment card numbers: issuer ranges (IINs) and the lengths each allows.
//!
//! The table follows the issuer identification number table of the Wikipedia article
//! "Payment card number" (ISO/IEC 7812 numbers), checked in 2025:
//!
//! | network | IIN ranges | lengths |
//! |---|---|---|
//! | Visa (with Visa Electron, Dankort co-branded) | 4 | 13, 16, 19 |
//! | Mastercard | 51–55, 2221–2720 | 16 |
//! | American Express | 34, 37 | 15 |
//! | Diners Club International, Carte Blanche | 300–305, 309, 36, 38–39 | 14–19 |
//! | Discover | 6011, 644–649, 65 | 16–19 |
//! | JCB | 3528–3589 (the whole 35 block is taken, with RuPay's 353/356 and LankaPay's 357111) | 16–19 |
//! | JCB (older numbers) | 1800, 2131 | 15 |
//! | UnionPay | 62, 81 | 16–19 |
//! | Maestro | 5018, 5020, 5038, 5893, 6304, 6759, 6761–6763 (and Maestro UK 676770, 676774) | 12–19 |
//! | Maestro (the wider allotment the table gave it before) | 50, 56–69 | 12–19 |
//! | Mir | 2200–2204 | 16–19 |
//! | BORICA | 2205 | 16 |
//! | RuPay | 60, 65, 81, 82, 508 | 16 |
//! | Verve | 506099–506198, 507865–507964, 650002–650027 | 16, 18, 19 |
//! | Troy | 65, 9792 | 16 |
//! | InterPayment | 636 | 16–19 |
//! | InstaPayment | 637–639 | 16 |
//! | GPN | 1946, 50, 56, 58, 60–63 | 16, 18, 19 |
//! | Napas | 9704 | 16, 19 |
//! | UzCard, Humo | 8600, 9860 | 16 |
//! | UATP | 1 | 15 |
//!
//! Elo, Hipercard and Dankort fall inside the Visa, Maestro and RuPay blocks. A number must
//! also pass Luhn and not be one repeated digit. The broad blocks (Maestro's earlier 50 and
//! 56–69 at 12 to 15 digits, UATP's 1) hold many ordinary numbers that pass Luhn by chance,
//! so a number that only they accept is a card unless the words before it call it something
//! else (an order, an invoice, a request id: see `context.rs`).

/// One row: the first `digits` digits of a number, read as a number, fall in
/// `first..=last`; `lengths` is a bit set of the lengths allowed.
struct Range {
    first: u32,
    last: u32,
    digits: u8,
    lengths: u32,
    /// A block shared with many ordinary numbers (see the module docs).
    broad: bool,
}

const fn lengths(from: u32, to: u32) -> u32 {
    let mut set = 0;
    let mut len = from;
    while len <= to {
        set |= 1 << len;
        len += 1;
    }
    set
}

const fn range(first: u32, last: u32, lengths: u32) -> Range {
    let digits = if first >= 100_000 {
        6
    } else if first >= 1000 {
        4
    } else if first >= 100 {
        3
    } else if first >= 10 {
        2
    } else {
        1
    };
    Range {
        first,
        last,
        digits,
        lengths,
        broad: false,
    }
}

const fn broad(mut range: Range) -> Range {
    range.broad = true;
    range
}

const L13_16_19: u32 = (1 << 13) | (1 << 16) | (1 << 19);
const L16_18_19: u32 = (1 << 16) | (1 << 18) | (1 << 19);
const L16: u32 = 1 << 16;
const L15: u32 = 1 << 15;

const ISSUERS: &[Range] = &[
    range(4, 4, L13_16_19),
    range(51, 55, L16),
    range(2221, 2720, L16),
    range(34, 34, L15),
    range(37, 37, L15),
    range(300, 305, lengths(14, 19)),
    range(309, 309, lengths(14, 19)),
    range(36, 36, lengths(14, 19)),
    range(38, 39, lengths(14, 19)),
    range(6011, 6011, lengths(16, 19)),
    range(644, 649, lengths(16, 19)),
    range(65, 65, lengths(16, 19)),
    range(35, 35, lengths(16, 19)),
    range(1800, 1800, L15),
    range(2131, 2131, L15),
    range(62, 62, lengths(16, 19)),
    range(81, 81, lengths(16, 19)),
    range(5018, 5018, lengths(12, 19)),
    range(5020, 5020, lengths(12, 19)),
    range(5038, 5038, lengths(12, 19)),
    range(5893, 5893, lengths(12, 19)),
    range(6304, 6304, lengths(12, 19)),
    range(6759, 6759, lengths(12, 19)),
    range(6761, 6763, lengths(12, 19)),
    range(676770, 676770, lengths(12, 19)),
    range(676774, 676774, lengths(12, 19)),
    range(50, 50, lengths(16, 19)),
    range(56, 69, lengths(16, 19)),
    broad(range(50, 50, lengths(12, 15))),
    broad(range(56, 69, lengths(12, 15))),
    range(2200, 2204, lengths(16, 19)),
    range(2205, 2205, L16),
    range(60, 60, L16),
    range(82, 82, L16),
    range(508, 508, L16),
    range(506099, 506198, L16_18_19),
    range(507865, 507964, L16_18_19),
    range(650002, 650027, L16_18_19),
    range(9792, 9792, L16),
    range(636, 636, lengths(16, 19)),
    range(637, 639, L16),
    range(1946, 1946, L16_18_19),
    range(9704, 9704, (1 << 16) | (1 << 19)),
    range(8600, 8600, L16),
    range(9860, 9860, L16),
    broad(range(1, 1, L15)),
];

/// How an issuer table row takes a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Issuer {
    /// A specific issuer range allows this length.
    Specific,
    /// Only a broad block does (see the module docs).
    Broad,
}

/// The issuer that takes `digits` (ASCII digits, 12 to 19 of them), if any.
pub(crate) fn issuer(digits: &[u8]) -> Option<Issuer> {
    let len = digits.len();
    let prefix = |n: u8| {
        digits
            .iter()
            .take(usize::from(n))
            .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'))
    };
    let mut found = None;
    for row in ISSUERS {
        if row.lengths & (1 << len) != 0 && (row.first..=row.last).contains(&prefix(row.digits)) {
            if !row.broad {
                return Some(Issuer::Specific);
            }
            found = Some(Issuer::Broad);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_and_lengths() {
        for (number, want) in [
            ("4111111111111111", Some(Issuer::Specific)),
            ("675904123451", Some(Issuer::Specific)),
            ("213100482155679", Some(Issuer::Specific)),
            ("2200123456789012", Some(Issuer::Specific)),
            ("5712345678901", Some(Issuer::Broad)),
            ("511111111111", None),
            ("7111111111111111", None),
            ("341111111111111111", None),
        ] {
            assert_eq!(issuer(number.as_bytes()), want, "{number}");
        }
    }
}
