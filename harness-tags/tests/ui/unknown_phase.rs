use harness_tags::Tag;

/// A tag in a phase that does not exist.
#[derive(Tag)]
#[tag(name = "demo.bad-phase", phase = Thinking, payload = String, ctx = harness_tags::BaseCtx)]
pub struct BadPhase;

fn main() {}
