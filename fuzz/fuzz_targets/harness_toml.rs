//! `harness.toml` as a project could write it: parsed, or an error naming the file, never a
//! panic.
#![no_main]

use std::path::Path;

use harness_cli::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = Config::parse(text, "harness.toml", Path::new("/nonexistent/project"));
});
