use harness_tags::Tag;

#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct NoSchema {
    pub text: String,
}

/// A tag whose payload has no JSON Schema.
#[derive(Tag)]
#[tag(name = "demo.no-schema", phase = Think, payload = NoSchema, ctx = harness_tags::BaseCtx)]
pub struct NoSchemaTag;

fn main() {}
