//! Redacts standard input: PII and secrets become `<ENTITY_TYPE>`.
//!
//! ```text
//! cargo run -p harness-examples --example redact < tool-output.txt
//! cargo run -p harness-examples --example redact -- --json < tool-output.txt
//! ```
//!
//! With `--json` it prints one JSON object: `{"findings": [{"entity_type", "start", "end",
//! "score"}], "text": ...}`, offsets in bytes of the input. The CLI's `harness redact` prints
//! the same.

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = match args.as_slice() {
        [] => false,
        [flag] if flag == "--json" => true,
        _ => {
            eprintln!("usage: redact [--json] < input");
            return ExitCode::from(2);
        }
    };
    let mut input = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("redact: cannot read standard input: {error}");
        return ExitCode::FAILURE;
    }
    let Ok(text) = String::from_utf8(input) else {
        eprintln!("redact: the input is not UTF-8; convert it first (e.g. with iconv)");
        return ExitCode::FAILURE;
    };
    let output = if json {
        harness_redaction::report(&text).and_then(|report| {
            serde_json::to_string(&report)
                .map(|line| line + "\n")
                .map_err(|error| harness_redaction::RedactionError::Payload {
                    tag: "report".to_owned(),
                    message: error.to_string(),
                })
        })
    } else {
        harness_redaction::redact(&text)
    };
    match output {
        Ok(output) => {
            if std::io::stdout().write_all(output.as_bytes()).is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("redact: {error}");
            ExitCode::FAILURE
        }
    }
}
