use harness_tags::Tag;

/// A tag with a misspelled key.
#[derive(Tag)]
#[tag(name = "demo.typo", phase = Think, payload = String, ctx = harness_tags::BaseCtx, supressible)]
pub struct Typo;

fn main() {}
