#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Accuracy on a labelled evaluation set generated here from templates and generated values
//! (seeded, deterministic, nothing downloaded): at least 2,000 samples, with valid values,
//! invalid look-alikes (a number failing Luhn, an IBAN with wrong check digits, an SSN in a
//! range never issued) and distractors (names, addresses, timestamps, ids, hashes, code).
//!
//! The test prints precision and recall per entity type (`cargo test -p harness-redaction
//! --test all accuracy -- --nocapture`) and fails below recall 0.95 or precision 0.90 for any
//! type. A finding counts as a true positive when it has a label's entity and overlaps it.

mod outside;

use std::collections::BTreeMap;

use harness_redaction::Redactor;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn digits(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b'0' + self.below(10) as u8))
            .collect()
    }

    fn chars(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const HEX: &[u8] = b"0123456789abcdef";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

const FIRST: &[&str] = &[
    "jane", "john", "maria", "wei", "olga", "ahmed", "lucas", "sofia", "ken", "amara",
];
const LAST: &[&str] = &[
    "doe", "smith", "garcia", "chen", "ivanova", "khan", "silva", "rossi", "tanaka", "okafor",
];
const DOMAINS: &[&str] = &[
    "example.com",
    "mail.example.co.uk",
    "corp.io",
    "sub.domain.org",
    "uni-berlin.de",
];

/// The Luhn check digit for `body`.
fn luhn_digit(body: &str) -> char {
    let mut sum = 0;
    for (i, c) in body.bytes().rev().enumerate() {
        let mut d = u32::from(c - b'0');
        if i % 2 == 0 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    char::from(b'0' + ((10 - sum % 10) % 10) as u8)
}

fn group(value: &str, sizes: &[usize], sep: &str) -> String {
    let mut out = Vec::new();
    let mut at = 0;
    for &size in sizes {
        out.push(&value[at..at + size]);
        at += size;
    }
    out.join(sep)
}

fn card(rng: &mut Rng, valid: bool) -> String {
    let (prefix, len, sizes): (String, usize, &[usize]) = match rng.below(5) {
        0 => ("4".to_owned(), 16, &[4, 4, 4, 4]),
        1 => (format!("5{}", rng.range(1, 5)), 16, &[4, 4, 4, 4]),
        2 => (rng.pick(&["34", "37"]).to_owned(), 15, &[4, 6, 5]),
        3 => ("6011".to_owned(), 16, &[4, 4, 4, 4]),
        _ => (format!("22{}", rng.range(21, 99)), 16, &[4, 4, 4, 4]),
    };
    let body = format!("{prefix}{}", rng.digits(len - prefix.len() - 1));
    let check = luhn_digit(&body);
    let check = if valid {
        check
    } else {
        char::from(b'0' + ((check as u8 - b'0' + 1 + rng.below(8) as u8) % 10))
    };
    let number = format!("{body}{check}");
    match rng.below(3) {
        0 => group(&number, sizes, " "),
        1 => group(&number, sizes, "-"),
        _ => number,
    }
}

fn iban_check(country: &str, bban: &str) -> u32 {
    let rearranged = format!("{bban}{country}00");
    let mut rem = 0u32;
    for c in rearranged.bytes() {
        rem = if c.is_ascii_digit() {
            (rem * 10 + u32::from(c - b'0')) % 97
        } else {
            (rem * 100 + u32::from(c - b'A') + 10) % 97
        };
    }
    98 - rem
}

fn iban(rng: &mut Rng, valid: bool) -> String {
    let (country, len) = [
        ("DE", 22),
        ("GB", 22),
        ("FR", 27),
        ("NL", 18),
        ("ES", 24),
        ("IT", 27),
        ("CH", 21),
        ("BE", 16),
    ][rng.below(8)];
    let bban = match country {
        "GB" => format!(
            "{}{}",
            rng.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 4),
            rng.digits(14)
        ),
        "NL" => format!(
            "{}{}",
            rng.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 4),
            rng.digits(10)
        ),
        "IT" => format!(
            "{}{}",
            rng.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 1),
            rng.digits(22)
        ),
        _ => rng.digits(len - 4),
    };
    let mut check = iban_check(country, &bban);
    if !valid {
        check = (check + 1 + rng.below(50) as u32) % 97 + 2;
        if check == iban_check(country, &bban) {
            check = (check % 96) + 2;
        }
    }
    let compact = format!("{country}{check:02}{bban}");
    if rng.below(2) == 0 {
        compact
            .as_bytes()
            .chunks(4)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        compact
    }
}

fn ssn(rng: &mut Rng, valid: bool) -> String {
    let (area, group, serial) = if valid {
        let mut area = rng.range(1, 899);
        if area == 666 {
            area = 665;
        }
        (area, rng.range(1, 99), rng.range(1, 9999))
    } else {
        match rng.below(4) {
            0 => (0, rng.range(1, 99), rng.range(1, 9999)),
            1 => (666, rng.range(1, 99), rng.range(1, 9999)),
            2 => (rng.range(900, 999), rng.range(1, 99), rng.range(1, 9999)),
            _ => (rng.range(1, 665), 0, rng.range(1, 9999)),
        }
    };
    let sep = if rng.below(5) == 0 { " " } else { "-" };
    format!("{area:03}{sep}{group:02}{sep}{serial:04}")
}

fn phone(rng: &mut Rng) -> String {
    let nanp = |rng: &mut Rng| format!("{}{}", rng.range(2, 9), rng.digits(2));
    match rng.below(10) {
        0 => format!("+44 20 {} {}", rng.digits(4), rng.digits(4)),
        1 => format!("+1 ({}) {}-{}", nanp(rng), nanp(rng), rng.digits(4)),
        2 => format!("+49 30 {}", rng.digits(8)),
        3 => format!(
            "+33 {} {} {} {} {}",
            rng.range(1, 9),
            rng.digits(2),
            rng.digits(2),
            rng.digits(2),
            rng.digits(2)
        ),
        4 => format!("+91 {} {}", rng.digits(5), rng.digits(5)),
        5 => format!("({}) {}-{}", nanp(rng), nanp(rng), rng.digits(4)),
        6 => format!("{}-{}-{}", nanp(rng), nanp(rng), rng.digits(4)),
        7 => format!("0{} {} {}", rng.range(20, 99), rng.digits(4), rng.digits(4)),
        8 => format!("07{} {}", rng.digits(3), rng.digits(6)),
        _ => format!(
            "0{} {} {} {} {}",
            rng.range(1, 9),
            rng.digits(2),
            rng.digits(2),
            rng.digits(2),
            rng.digits(2)
        ),
    }
}

fn email(rng: &mut Rng) -> String {
    let (f, l) = (rng.pick(FIRST), rng.pick(LAST));
    let local = match rng.below(4) {
        0 => format!("{f}.{l}"),
        1 => format!("{f}_{l}{}", rng.below(100)),
        2 => format!("{}{l}", &f[..1]),
        _ => format!("{f}+news"),
    };
    format!("{local}@{}", rng.pick(DOMAINS))
}

fn ip(rng: &mut Rng) -> String {
    match rng.below(3) {
        0 | 1 => format!(
            "{}.{}.{}.{}",
            rng.range(1, 254),
            rng.below(256),
            rng.below(256),
            rng.range(1, 254)
        ),
        _ => {
            let g = |rng: &mut Rng| format!("{:x}", rng.range(1, 0xffff));
            if rng.below(2) == 0 {
                (0..8).map(|_| g(rng)).collect::<Vec<_>>().join(":")
            } else {
                format!("2001:db8::{}:{}", g(rng), g(rng))
            }
        }
    }
}

fn mac(rng: &mut Rng) -> String {
    let bytes: Vec<String> = (0..6).map(|_| rng.chars(HEX, 2)).collect();
    match rng.below(3) {
        0 => bytes.join(":"),
        1 => bytes.join("-").to_uppercase(),
        _ => format!(
            "{}{}.{}{}.{}{}",
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5]
        ),
    }
}

fn url(rng: &mut Rng) -> String {
    let scheme = rng.pick(&["https", "postgres", "mysql", "redis", "amqp", "ftp"]);
    let host = rng.pick(&["db.internal", "example.com", "10.0.3.7", "cache-1.prod"]);
    let user = rng.pick(LAST);
    let len = rng.range(6, 16);
    let pass = rng.chars(ALNUM, len);
    let port = if rng.below(2) == 0 {
        format!(":{}", rng.range(1000, 9999))
    } else {
        String::new()
    };
    format!(
        "{scheme}://{user}:{pass}@{host}{port}/{}",
        rng.pick(&["app", "prod", "v1/items"])
    )
}

const BECH32: &[u8] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";

fn bech32_address(rng: &mut Rng) -> String {
    // Segwit v0, a 20-byte program: 32 groups of 5 bits.
    let mut values: Vec<u8> = vec![0];
    values.extend((0..32).map(|_| rng.below(32) as u8));
    let hrp = b"bc";
    let mut expanded: Vec<u8> = hrp.iter().map(|c| c >> 5).collect();
    expanded.push(0);
    expanded.extend(hrp.iter().map(|c| c & 31));
    expanded.extend(&values);
    expanded.extend([0u8; 6]);
    let mut chk = 1u32;
    for v in expanded {
        let top = chk >> 25;
        chk = ((chk & 0x1ff_ffff) << 5) ^ u32::from(v);
        for (i, g) in [
            0x3b6a57b2u32,
            0x26508e6d,
            0x1ea119fa,
            0x3d4233dd,
            0x2a1462b3,
        ]
        .iter()
        .enumerate()
        {
            if (top >> i) & 1 == 1 {
                chk ^= g;
            }
        }
    }
    let polymod = chk ^ 1;
    values.extend((0..6).map(|i| ((polymod >> (5 * (5 - i))) & 31) as u8));
    let data: String = values
        .iter()
        .map(|&v| char::from(BECH32[usize::from(v)]))
        .collect();
    format!("bc1{data}")
}

fn crypto(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => rng
            .pick(&[
                "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa",
                "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
                "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
            ])
            .to_owned(),
        _ => bech32_address(rng),
    }
}

fn base64url(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(char::from(B64URL[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

fn jwt(rng: &mut Rng) -> String {
    let alg = rng.pick(&["HS256", "RS256", "ES256"]);
    let header = format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#);
    let payload = format!(
        r#"{{"sub":"{}","name":"{} {}","iat":{}}}"#,
        rng.digits(8),
        rng.pick(FIRST),
        rng.pick(LAST),
        rng.range(1_500_000_000, 1_800_000_000)
    );
    format!(
        "{}.{}.{}",
        base64url(header.as_bytes()),
        base64url(payload.as_bytes()),
        rng.chars(B64URL, 43)
    )
}

fn private_key(rng: &mut Rng) -> String {
    let kind = rng.pick(&["RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED "]);
    let lines: Vec<String> = (0..rng.range(2, 12)).map(|_| rng.chars(B64, 64)).collect();
    format!(
        "-----BEGIN {kind}PRIVATE KEY-----\n{}\n-----END {kind}PRIVATE KEY-----",
        lines.join("\n")
    )
}

fn api_key(rng: &mut Rng) -> String {
    const B32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    match rng.below(8) {
        0 => format!("AKIA{}", rng.chars(B32, 16)),
        1 => format!("ghp_{}", rng.chars(ALNUM, 36)),
        2 => format!("sk-proj-{}", rng.chars(ALNUM, 48)),
        3 => format!("sk-ant-api03-{}", rng.chars(ALNUM, 80)),
        4 => format!(
            "xoxb-{}-{}-{}",
            rng.digits(12),
            rng.digits(13),
            rng.chars(ALNUM, 24)
        ),
        5 => format!("sk_live_{}", rng.chars(ALNUM, 24)),
        6 => format!("AIza{}", rng.chars(ALNUM, 35)),
        _ => format!(
            "github_pat_{}_{}",
            rng.chars(ALNUM, 22),
            rng.chars(ALNUM, 59)
        ),
    }
}

/// A keyword secret: the text around it and the value.
fn secret(rng: &mut Rng) -> (String, String) {
    let len = rng.range(8, 20);
    let value = format!(
        "{}{}{}",
        rng.chars(ALNUM, len),
        rng.digits(2),
        rng.pick(&["", "!", "#", "_x"])
    );
    let (before, after) = match rng.below(6) {
        0 => ("password: ".to_owned(), String::new()),
        1 => ("DB_PASSWORD=".to_owned(), String::new()),
        2 => (r#"{"api_key": ""#.to_owned(), r#""}"#.to_owned()),
        3 => ("client_secret => '".to_owned(), "'".to_owned()),
        4 => ("Authorization: Bearer ".to_owned(), String::new()),
        _ => ("auth_token = ".to_owned(), String::new()),
    };
    (format!("{before}{{V}}{after}"), value)
}

/// Text around values: `{V}` is where the value goes.
const CONTEXTS: &[&str] = &[
    "Customer record updated: {V} (verified).",
    "{\"id\": 4821, \"contact\": \"{V}\", \"status\": \"active\"}",
    "2024-03-02T11:45:09Z INFO request from {V} took 12ms",
    "Please reach {V} before Friday.",
    "name,value\nJane Doe,{V}\n",
    "- field: {V}\n  updated: 2024-01-15",
    "Die Zahlung an {V} wurde bestätigt — merci.",
];

/// Text with no entity at all (distractors and invalid look-alikes are added to it).
const DISTRACTORS: &[&str] = &[
    "Jane Doe lives at 221B Baker Street, London NW1 6XE.",
    "Order 88412337 shipped on 2024-01-15 at 10:23:45 (3 items, $1,234.56).",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 by CI",
    "request id 3f2504e0-4f89-11d3-9a0c-0305e82c3301 finished in 1.25s",
    "Upgraded from version 1.2.3 to 10.2.3.4.5 without issues.",
    "fn main() -> std::io::Result<()> { let x = a::b(); Ok(()) }",
    "password: required, token: string, api_key=${API_KEY}",
    "Call the front desk at extension 4412 or room 305.",
    "Die Besprechung findet am 01.02.2024 um 14:30 statt.",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "The meeting ID is 845 2291 0037 and the passcode is in the invite.",
    "Timestamps 1700000000123 and 1700000000456 were out of order.",
];

struct Sample {
    text: String,
    labels: Vec<(&'static str, usize, usize)>,
}

fn place(context: &str, value: &str) -> (String, usize, usize) {
    let at = context.find("{V}").unwrap();
    let text = format!("{}{}{}", &context[..at], value, &context[at + 3..]);
    (text, at, at + value.len())
}

fn generate(count: usize) -> Vec<Sample> {
    let mut rng = Rng(0x5eed_2024);
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        let context = CONTEXTS[rng.below(CONTEXTS.len())];
        let kind = i % 18;
        let (entity, value): (&'static str, String) = match kind {
            0 => ("EMAIL_ADDRESS", email(&mut rng)),
            1 => ("PHONE_NUMBER", phone(&mut rng)),
            2 => ("CREDIT_CARD", card(&mut rng, true)),
            3 => ("IBAN_CODE", iban(&mut rng, true)),
            4 => ("US_SSN", ssn(&mut rng, true)),
            5 => ("IP_ADDRESS", ip(&mut rng)),
            6 => ("MAC_ADDRESS", mac(&mut rng)),
            7 => ("URL", url(&mut rng)),
            8 => ("CRYPTO", crypto(&mut rng)),
            9 => ("JWT", jwt(&mut rng)),
            10 => ("PRIVATE_KEY", private_key(&mut rng)),
            11 => ("API_KEY", api_key(&mut rng)),
            12 => {
                let (around, value) = secret(&mut rng);
                let (text, start, end) = place(&around, &value);
                let (text, s, _) = place(context, &text);
                samples.push(Sample {
                    text,
                    labels: vec![("SECRET", s + start, s + end)],
                });
                continue;
            }
            // Invalid look-alikes and distractors: no labels.
            13 => ("", card(&mut rng, false)),
            14 => ("", iban(&mut rng, false)),
            15 => ("", ssn(&mut rng, false)),
            _ => ("", DISTRACTORS[rng.below(DISTRACTORS.len())].to_owned()),
        };
        let (text, start, end) = place(context, &value);
        let labels = if entity.is_empty() {
            Vec::new()
        } else {
            vec![(entity, start, end)]
        };
        samples.push(Sample { text, labels });
    }
    samples
}

#[derive(Default)]
struct Score {
    tp: usize,
    fp: usize,
    fn_: usize,
}

#[test]
fn precision_and_recall_per_entity_type() {
    let samples = generate(2700);
    assert!(samples.len() >= 2000);
    let redactor = Redactor::new().unwrap();
    let mut scores: BTreeMap<String, Score> = BTreeMap::new();
    let mut errors = Vec::new();
    for sample in &samples {
        let findings = redactor.find(&sample.text);
        let mut matched = vec![false; sample.labels.len()];
        for f in &findings {
            let hit = sample
                .labels
                .iter()
                .enumerate()
                .find(|(i, (entity, start, end))| {
                    !matched[*i] && f.entity.name() == *entity && f.start < *end && *start < f.end
                });
            let score = scores.entry(f.entity.name().to_owned()).or_default();
            match hit {
                Some((i, _)) => {
                    matched[i] = true;
                    score.tp += 1;
                }
                None => {
                    score.fp += 1;
                    errors.push(format!(
                        "FP {} `{}` in {:?}",
                        f.entity,
                        f.text(&sample.text),
                        sample.text
                    ));
                }
            }
        }
        for (i, (entity, start, end)) in sample.labels.iter().enumerate() {
            if !matched[i] {
                scores.entry((*entity).to_owned()).or_default().fn_ += 1;
                errors.push(format!(
                    "FN {entity} `{}` in {:?}",
                    &sample.text[*start..*end],
                    sample.text
                ));
            }
        }
    }

    println!("{} samples", samples.len());
    println!(
        "{:<14} {:>5} {:>4} {:>4} {:>9} {:>7}",
        "entity", "tp", "fp", "fn", "precision", "recall"
    );
    let mut failed = Vec::new();
    for (entity, s) in &scores {
        let precision = s.tp as f64 / (s.tp + s.fp).max(1) as f64;
        let recall = s.tp as f64 / (s.tp + s.fn_).max(1) as f64;
        println!(
            "{entity:<14} {:>5} {:>4} {:>4} {precision:>9.3} {recall:>7.3}",
            s.tp, s.fp, s.fn_
        );
        if precision < 0.90 || recall < 0.95 {
            failed.push(entity.clone());
        }
    }
    for error in errors.iter().take(20) {
        println!("{error}");
    }
    assert_eq!(scores.len(), 13, "every entity type is evaluated");
    assert!(
        failed.is_empty(),
        "below precision 0.90 or recall 0.95: {failed:?}"
    );
}
