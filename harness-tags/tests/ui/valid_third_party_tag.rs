use harness_tags::{BaseCtx, Tag};

/// A valid tag with a nested namespace, declared outside harness-tags.
#[derive(Tag)]
#[tag(name = "acme.billing.invoice-sent", phase = Act, payload = String, ctx = BaseCtx, suppressible = true)]
pub struct InvoiceSent;

fn main() {
    let tag = harness_tags::lookup("acme.billing.invoice-sent").expect("in the catalog");
    assert!(tag.suppressible());
    assert_eq!(InvoiceSent::NAME, tag.name());
}
