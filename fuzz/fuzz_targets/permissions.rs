//! A permissions file in both formats: rules, or an error naming the file, never a panic.
#![no_main]

use harness_permissions::Permissions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = Permissions::from_toml_str(text, "permissions.toml");
    let _ = Permissions::from_json_str(text, "permissions.json");
});
