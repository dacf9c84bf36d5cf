use harness_tags::Tag;

/// A tag without a namespace.
#[derive(Tag)]
#[tag(name = "system", phase = Think, payload = String, ctx = harness_tags::BaseCtx)]
pub struct NoNamespace;

fn main() {}
