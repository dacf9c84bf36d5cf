//! `#[derive(Tag)]` rejects invalid declarations at compile time, pointing at the offending
//! span. Regenerate the expected output with `TRYBUILD=overwrite cargo test -p harness-tags --test ui`.

#[test]
fn derive_tag_diagnostics() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/bad_name.rs");
    t.compile_fail("tests/ui/single_segment_name.rs");
    t.compile_fail("tests/ui/missing_payload.rs");
    t.compile_fail("tests/ui/missing_ctx.rs");
    t.compile_fail("tests/ui/unknown_phase.rs");
    t.compile_fail("tests/ui/missing_doc.rs");
    t.compile_fail("tests/ui/not_unit_struct.rs");
    t.compile_fail("tests/ui/unknown_key.rs");
    t.compile_fail("tests/ui/payload_without_schema.rs");
    t.pass("tests/ui/valid_third_party_tag.rs");
}
