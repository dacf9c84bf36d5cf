//! The redaction scanner on arbitrary text, whole and streamed in arbitrary cuts: never a
//! panic, and an email planted between spaces in the text never survives either way. (Only
//! the planted copy: the arbitrary text may hold the same characters inside a longer token
//! that is rightly not an email, e.g. `x.value@example.comontact1`.)
#![no_main]

use std::sync::OnceLock;

use harness_redaction::Redactor;
use libfuzzer_sys::fuzz_target;

const PLANTED: &str = "planted.value@example.com";

fn redactor() -> &'static Redactor {
    static REDACTOR: OnceLock<Redactor> = OnceLock::new();
    REDACTOR.get_or_init(|| Redactor::new().expect("the default redactor builds"))
}

fuzz_target!(|input: (String, Vec<u8>)| {
    let (text, cuts) = input;
    let redactor = redactor();
    let _ = redactor.redact(&text);

    // Planted between spaces, so that arbitrary neighbours cannot make it part of a longer
    // token that is legitimately something else.
    let planted = format!("{text} {PLANTED} {text}");
    let alone = format!(" {PLANTED} ");
    if let Ok(whole) = redactor.redact(&planted) {
        assert!(!whole.text.contains(&alone), "{}", whole.text);
    }
    let mut stream = redactor.stream(None);
    let mut shown = String::new();
    let mut rest = planted.as_str();
    for cut in cuts {
        let mut at = usize::from(cut).min(rest.len());
        while !rest.is_char_boundary(at) {
            at -= 1;
        }
        let (delta, tail) = rest.split_at(at);
        match stream.push(delta) {
            Ok(out) => shown.push_str(&out),
            Err(_) => return,
        }
        rest = tail;
    }
    if stream.push(rest).map(|out| shown.push_str(&out)).is_err() {
        return;
    }
    if let Ok(out) = stream.finish() {
        shown.push_str(&out);
        assert!(!shown.contains(&alone), "{shown}");
    }
});
