use harness_tags::Tag;

/// A tag without a context.
#[derive(Tag)]
#[tag(name = "demo.no-ctx", phase = Think, payload = String)]
pub struct NoCtx;

fn main() {}
