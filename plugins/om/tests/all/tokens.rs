#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Exact token counts equal tiktoken's `o200k_base` (`encode_ordinary(text).len()`) on text
//! nobody on the team wrote: 12,000 Faker samples in 17 locales (sentences, JSON, logs, CSV;
//! Latin, Cyrillic and Japanese script), the workspace's own Rust sources, edge cases of the
//! pre-tokenizer, and arbitrary strings.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use harness_om::TokenCounter;
use proptest::prelude::*;
use tiktoken_rs::CoreBPE;

fn tiktoken() -> &'static CoreBPE {
    static ENCODING: OnceLock<CoreBPE> = OnceLock::new();
    ENCODING.get_or_init(|| tiktoken_rs::o200k_base().unwrap())
}

fn tiktoken_count(text: &str) -> u64 {
    tiktoken().encode_ordinary(text).len() as u64
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first texts on which the counter and tiktoken disagree, with both counts.
fn disagreements<'t>(texts: impl IntoIterator<Item = &'t str>) -> Vec<(String, u64, u64)> {
    texts
        .into_iter()
        .filter_map(|text| {
            let ours = TokenCounter::global().count(text);
            let theirs = tiktoken_count(text);
            (ours != theirs).then(|| (text.chars().take(120).collect(), ours, theirs))
        })
        .take(5)
        .collect()
}

#[test]
fn counts_equal_tiktoken_on_faker_samples_in_seventeen_locales() {
    // Generated with Python Faker by the redaction crate's evaluation (see its generate.py).
    let corpus = std::fs::read_to_string(
        workspace().join("plugins/redaction/tests/all/accuracy/outside.jsonl"),
    )
    .unwrap();
    let texts: Vec<String> = corpus
        .lines()
        .map(|line| {
            let sample: serde_json::Value = serde_json::from_str(line).unwrap();
            sample["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(texts.len() >= 12_000, "{} samples", texts.len());
    assert_eq!(disagreements(texts.iter().map(String::as_str)), []);
    // Whole lines of JSON too: quotes, escapes, labels and numbers.
    assert_eq!(disagreements(corpus.lines().take(2_000)), []);
}

#[test]
fn counts_equal_tiktoken_on_the_workspaces_rust_sources() {
    let mut sources = Vec::new();
    for dir in [
        "harness-core/src/kernel",
        "harness-tags/src/pipeline",
        "plugins/om/src",
    ] {
        for entry in std::fs::read_dir(workspace().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                sources.push(std::fs::read_to_string(path).unwrap());
            }
        }
    }
    assert!(sources.len() >= 10);
    assert_eq!(disagreements(sources.iter().map(String::as_str)), []);
}

#[test]
fn counts_equal_tiktoken_where_the_pre_tokenizer_has_edge_cases() {
    let cases = [
        "",
        " ",
        "\n",
        "a",
        "hello world",
        "   leading and trailing   ",
        "words  \n\n  with\t\tmixed \r\n whitespace\n",
        "trailing spaces then end     ",
        "    \n",
        "x\u{a0}\u{a0}y\u{2003}z",
        "I'm sure they'll say we'd've DONE'T It's",
        "CamelCaseWordsAndHTTPRequestsAndXMLHttpRequest",
        "1234567890 12 123 1234 3.14159 -42 1e10 0xDEADBEEF",
        "path/to/file.rs:12:5 https://example.com/a?b=c&d=e#f",
        "!!!??? ... --- *** /// \\\\ ;;; ''' \"\"\"",
        "日本語のテキストと English が混ざった文。東京都千代田区1-2-3",
        "Съешь же ещё этих мягких французских булок, да выпей чаю.",
        "مرحبا بالعالم، هذا نص عربي من اليمين إلى اليسار",
        "שלום עולם",
        "नमस्ते दुनिया, यह हिंदी पाठ है",
        "한국어 문장입니다. 안녕하세요!",
        "emoji 👩‍👩‍👧‍👦 flags 🇩🇪🇯🇵 skin 👍🏽 and ✨✨✨",
        "combining e\u{301}\u{301} a\u{30a} n\u{303} Z\u{335}\u{31b}a\u{334}l\u{336}g",
        "zero\u{200b}width\u{200d}joiner\u{feff}bom",
        "\u{0}\u{1}\u{7f} control \u{1b}[31m escape",
        "{\"key\": [1, 2, {\"nested\": null}], \"s\": \"\\u00e9\\n\"}",
        &"a".repeat(10_000),
        &" ".repeat(5_000),
        &"ab ".repeat(3_000),
        &"\n".repeat(1_000),
        &"🦀".repeat(1_000),
        &"1".repeat(4_001),
    ];
    assert_eq!(disagreements(cases.iter().copied()), []);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn counts_equal_tiktoken_on_arbitrary_strings(text in any::<String>()) {
        prop_assert_eq!(TokenCounter::global().count(&text), tiktoken_count(&text));
    }

    #[test]
    fn counts_equal_tiktoken_on_arbitrary_mixes_of_words_spaces_and_digits(
        text in r"([a-zA-Z]{1,8}|[0-9]{1,5}|[ \t\r\n]{1,4}|[.,;:!?'/-]{1,3}|[éßøåЖжこん한]{1,3}){0,40}"
    ) {
        prop_assert_eq!(TokenCounter::global().count(&text), tiktoken_count(&text));
    }
}
