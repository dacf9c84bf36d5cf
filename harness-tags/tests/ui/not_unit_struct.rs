use harness_tags::Tag;

/// A tag that carries data itself.
#[derive(Tag)]
#[tag(name = "demo.with-data", phase = Think, payload = String, ctx = harness_tags::BaseCtx)]
pub struct WithData {
    pub text: String,
}

fn main() {}
