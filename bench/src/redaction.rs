//! The `redaction` suite: throughput of the redaction engine over 1 MB of mixed tool output.
//!
//! The corpus is generated (seeded, deterministic): JSON records, log lines, prose in several
//! languages (some non-ASCII), code, and PII and secrets sprinkled through it. Every built-in
//! detector is on. The baseline is one `regex::RegexSet::matches` pass over the same text with
//! the same patterns, measured in the same run: it only answers which patterns match, while
//! the engine finds, validates and replaces every entity. The suite also reports precision
//! on the corpus: a finding outside the PII lines (in a JSON record, a log line, prose or
//! code) is a false one.

use std::hint::black_box;
use std::time::Instant;

use harness_redaction::Redactor;
use regex::RegexSet;
use serde_json::json;

use crate::measure::{interleaved, median, round2};

const CORPUS_BYTES: usize = 1 << 20;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const NAMES: &[&str] = &[
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
];
const WORDS: &[&str] = &[
    "the",
    "request",
    "failed",
    "because",
    "cache",
    "was",
    "cold",
    "and",
    "retry",
    "succeeded",
    "after",
    "timeout",
    "deploy",
    "version",
    "build",
    "passed",
    "with",
    "warnings",
    "on",
    "node",
];
const PROSE: &[&str] = &[
    "The migration finished without errors; 3 tables were rewritten and the indexes rebuilt.",
    "Die Konfiguration wurde übernommen, aber der Dienst muss neu gestartet werden.",
    "La requête a échoué à cause d'un délai d'attente dépassé ; nouvelle tentative en cours.",
    "ビルドは成功しましたが、警告が3件あります。詳細はログを確認してください。",
    "Сервер ответил ошибкой 503, повторная попытка через 30 секунд.",
    "All 128 tests passed in 4.2s 🎉 — coverage is at 87% for the core crate.",
    "To reproduce, run the script twice and compare the outputs line by line.",
];
const CODE: &[&str] = &[
    "fn main() -> std::io::Result<()> {\n    let file = std::fs::File::open(\"Cargo.toml\")?;\n    Ok(())\n}\n",
    "def handler(event, context):\n    return {\"statusCode\": 200, \"body\": json.dumps(event)}\n",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: CI <ci@build.local>\nDate:   Mon Jan 15 10:23:45 2024\n",
    "const id = \"3f2504e0-4f89-11d3-9a0c-0305e82c3301\"; // uuid v1\nmap.insert(key, value);\n",
];

/// One piece of PII or a secret, as it appears in tool output.
fn pii(rng: &mut Rng) -> String {
    let name = rng.pick(NAMES);
    match rng.below(12) {
        0 => format!("contact: {name}.{}@example.com", rng.below(1000)),
        1 => format!("phone +44 20 7946 {:04}", rng.below(10_000)),
        2 => "card 4111 1111 1111 1111 exp 12/27".to_owned(),
        3 => "iban DE89 3704 0044 0532 0130 00".to_owned(),
        4 => format!("client_ip=10.{}.{}.{}", rng.below(256), rng.below(256), rng.below(256)),
        5 => "ssn 123-45-6789".to_owned(),
        6 => "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE".to_owned(),
        7 => "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".to_owned(),
        8 => "token ghp_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(),
        9 => "db: postgres://app:s3cr3t-Pa55@db.internal:5432/prod".to_owned(),
        10 => format!("mac {:02x}:1a:2b:3c:4d:5e", rng.below(256)),
        _ => format!("call (415) 555-{:04}", rng.below(10_000)),
    }
}

fn json_line(rng: &mut Rng) -> String {
    format!(
        "{{\"id\": {}, \"user\": \"{}\", \"created_at\": \"2024-01-{:02}T10:{:02}:{:02}Z\", \"status\": \"{}\", \"latency_ms\": {}, \"tags\": [\"{}\", \"{}\"], \"amount\": {}.{:02}}}\n",
        rng.below(1_000_000),
        rng.pick(NAMES),
        1 + rng.below(28),
        rng.below(60),
        rng.below(60),
        rng.pick(&["active", "pending", "closed"]),
        rng.below(2000),
        rng.pick(WORDS),
        rng.pick(WORDS),
        rng.below(10_000),
        rng.below(100),
    )
}

fn log_line(rng: &mut Rng) -> String {
    format!(
        "2024-01-15 10:{:02}:{:02}.{:03} {} [worker-{}] GET /api/v1/{}/{} {} {}ms sha={:016x}\n",
        rng.below(60),
        rng.below(60),
        rng.below(1000),
        rng.pick(&["INFO", "WARN", "DEBUG", "ERROR"]),
        rng.below(16),
        rng.pick(WORDS),
        rng.below(100_000),
        rng.pick(&["200", "201", "404", "500"]),
        rng.below(3000),
        rng.next(),
    )
}

/// About `bytes` of mixed tool output, with PII in roughly one line in twelve.
pub(crate) fn corpus(bytes: usize, seed: u64) -> String {
    labelled_corpus(bytes, seed).0
}

/// The corpus and the byte ranges of its PII lines (every other line holds no entity).
fn labelled_corpus(bytes: usize, seed: u64) -> (String, Vec<std::ops::Range<usize>>) {
    let mut rng = Rng(seed | 1);
    let mut out = String::with_capacity(bytes + 512);
    let mut pii_lines = Vec::new();
    while out.len() < bytes {
        match rng.below(12) {
            0..=3 => out.push_str(&json_line(&mut rng)),
            4..=7 => out.push_str(&log_line(&mut rng)),
            8 | 9 => {
                out.push_str(rng.pick(PROSE));
                out.push('\n');
            }
            10 => {
                // The commit's author address is an email: that snippet counts as PII.
                let code = rng.pick(CODE);
                if code.contains('@') {
                    pii_lines.push(out.len()..out.len() + code.len());
                }
                out.push_str(code);
            }
            _ => {
                let start = out.len();
                out.push_str(&pii(&mut rng));
                pii_lines.push(start..out.len());
                out.push('\n');
            }
        }
    }
    (out, pii_lines)
}

pub(crate) fn run() -> serde_json::Value {
    let redactor = Redactor::new()
        .unwrap_or_else(|error| panic!("the default redactor does not build: {error}"));
    let set = RegexSet::new(redactor.patterns())
        .unwrap_or_else(|error| panic!("the baseline RegexSet does not build: {error}"));
    let (text, pii_lines) = labelled_corpus(CORPUS_BYTES, 0x5eed);
    let message = {
        let mut end = 2048.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..end]
    };

    // Precision on the JSON records, log lines, prose and code around the PII lines: any
    // finding outside a PII line is a false one.
    let all = redactor.find(&text);
    let findings = all.len();
    let false_findings = all
        .iter()
        .filter(|f| {
            !pii_lines
                .iter()
                .any(|line| line.start <= f.start && f.end <= line.end)
        })
        .count();
    let precision = 1.0 - false_findings as f64 / findings.max(1) as f64;
    let matched = set.matches(&text);
    if matched.matched_all() {
        println!("note: every baseline pattern matched, so the RegexSet pass may stop early");
    }

    let mut engine = |n: u64| {
        for _ in 0..n {
            black_box(
                redactor
                    .redact(black_box(&text))
                    .map(|r| r.findings.len())
                    .ok(),
            );
        }
    };
    let mut baseline = |n: u64| {
        for _ in 0..n {
            black_box(set.matches(black_box(&text)).matched_any());
        }
    };
    let ns = interleaved(9, 4, &mut [&mut engine, &mut baseline]);
    let mb = text.len() as f64 / 1e6;
    let mb_per_s = mb / (ns[0] / 1e9);
    let baseline_mb_per_s = mb / (ns[1] / 1e9);

    // One 2 KB tool result, redacted end to end (find, validate, replace).
    let mut samples = Vec::with_capacity(2000);
    for _ in 0..2000 {
        let started = Instant::now();
        black_box(
            redactor
                .redact(black_box(message))
                .map(|r| r.findings.len())
                .ok(),
        );
        samples.push(started.elapsed().as_nanos() as f64 / 1e3);
    }
    let msg_2k_us = median(samples);

    println!("{:<34} {:>12}", "case", "MB/s");
    println!("{:<34} {:>12.1}", "redact 1 MB (all detectors)", mb_per_s);
    println!(
        "{:<34} {:>12.1}",
        "baseline RegexSet::matches", baseline_mb_per_s
    );
    println!(
        "ratio {:.2}; 2 KB message {:.2} us; {} findings in {} bytes ({} patterns), {} outside \
         the PII lines (precision {:.3})",
        mb_per_s / baseline_mb_per_s,
        msg_2k_us,
        findings,
        text.len(),
        set.len(),
        false_findings,
        precision
    );
    json!({
        "suite": "redaction",
        "mb_per_s": round2(mb_per_s),
        "baseline_mb_per_s": round2(baseline_mb_per_s),
        "ratio": round2(mb_per_s / baseline_mb_per_s),
        "msg_2k_us": round2(msg_2k_us),
        "findings": findings,
        "precision": round2(precision),
    })
}
