//! JSON repair of model-written argument text: whatever it returns is a JSON value that
//! serializes and parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Some(value) = harness_core::kernel::repair_json(text) {
        let printed = serde_json::to_string(&value).expect("a repaired value serializes");
        let parsed: serde_json::Value = serde_json::from_str(&printed).expect("and parses back");
        assert_eq!(parsed, value);
    }
});
