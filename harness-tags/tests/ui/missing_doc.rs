use harness_tags::Tag;

#[derive(Tag)]
#[tag(name = "demo.undocumented", phase = Think, payload = String, ctx = harness_tags::BaseCtx)]
pub struct Undocumented;

fn main() {}
