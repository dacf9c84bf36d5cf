use harness_tags::Tag;

/// A tag without a payload.
#[derive(Tag)]
#[tag(name = "demo.no-payload", phase = Think, ctx = harness_tags::BaseCtx)]
pub struct NoPayload;

fn main() {}
