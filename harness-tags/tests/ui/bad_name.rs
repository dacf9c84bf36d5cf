use harness_tags::Tag;

/// A tag whose name is not `namespace.kebab-name`.
#[derive(Tag)]
#[tag(name = "Prompt_System", phase = Think, payload = String, ctx = harness_tags::BaseCtx)]
pub struct BadName;

fn main() {}
