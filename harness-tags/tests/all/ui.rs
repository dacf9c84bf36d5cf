//! `#[derive(Tag)]` rejects invalid declarations at compile time, pointing at the offending
//! span (regenerate the expected output with
//! `TRYBUILD=overwrite cargo test -p harness-tags --test all ui`), and a valid one declared
//! outside harness-tags (this test binary is a crate of its own) lands in the catalog.
//!
//! The valid case is a plain test, not a trybuild `pass` case: with compile-fail cases only,
//! trybuild checks its dependencies instead of building and linking them, a minute less in CI.

use harness_tags::{BaseCtx, Tag};

/// A valid tag with a nested namespace, declared outside harness-tags.
#[derive(Tag)]
#[tag(name = "acme.billing.invoice-sent", phase = Act, payload = String, ctx = BaseCtx, suppressible = true)]
pub(crate) struct InvoiceSent;

#[test]
fn a_tag_declared_in_another_crate_is_in_the_catalog() {
    let tag = harness_tags::lookup("acme.billing.invoice-sent").expect("in the catalog");
    assert!(tag.suppressible());
    assert_eq!(InvoiceSent::NAME, tag.name());
}

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
}
