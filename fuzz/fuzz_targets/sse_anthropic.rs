//! The Anthropic stream decoder over a body cut into arbitrary pieces, with small limits so that
//! the limit errors are reached too: never a panic, never more events than bytes.
#![no_main]

use harness_model::SseLimits;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (Vec<Vec<u8>>, u16)| {
    let (pieces, limit) = input;
    let bytes: usize = pieces.iter().map(Vec::len).sum();
    let limits = SseLimits {
        max_line_bytes: usize::from(limit) + 1,
        max_event_bytes: usize::from(limit) * 2 + 1,
        max_body_bytes: u64::from(limit) * 64 + 1,
    };
    let events = harness_model::fuzzing::anthropic_stream(pieces, limits);
    assert!(events.len() <= bytes + 2);
});
