//! A tag declared by another crate (the plugin fixture) joins the catalog of any binary that
//! links it, and works with typed and pattern handlers like a standard tag.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use harness_plugin_fixture::{Invoice, InvoiceSent};
use harness_tags::{BaseCtx, EmitOutcome, Flow, Phase, Pipeline, Tag, TagInfo, catalog, lookup};
use serde_json::{Value, json};

#[test]
fn a_tag_declared_in_another_crate_is_in_the_catalog() {
    let tag = lookup("acme.billing.invoice-sent").expect("the fixture's tag is in the catalog");
    assert_eq!(tag.crate_name(), "harness-plugin-fixture");
    assert_eq!(tag.phase(), Phase::Act);
    assert!(tag.suppressible());
    assert!(
        tag.description()
            .starts_with("Emitted by the billing plugin")
    );
    assert_eq!(
        tag.payload_schema()["properties"]["customerEmail"]["type"],
        "string"
    );
    assert!(std::ptr::eq(tag, InvoiceSent::descriptor()));
    assert!(catalog().windows(2).all(|w| w[0].name() <= w[1].name()));
    assert!(
        catalog().len() >= 34,
        "the standard catalog plus the fixture's tag"
    );
}

#[tokio::test]
async fn third_party_tags_take_typed_and_pattern_handlers() {
    let pipeline = Pipeline::builder()
        .compose(|c| {
            c.on_json("acme.**", |invoice: &Value, info: &TagInfo<'_>| {
                assert_eq!(info.name(), "acme.billing.invoice-sent");
                let mut invoice = invoice.clone();
                invoice["customerEmail"] = json!("<EMAIL_ADDRESS>");
                invoice
            })
            .on(InvoiceSent, |invoice: &Invoice, _: &BaseCtx| {
                if invoice.amount_cents == 0 {
                    Flow::Suppress
                } else {
                    Flow::Keep
                }
            })
        })
        .build()
        .unwrap();
    let invoice = Invoice {
        customer_email: "jane@example.com".into(),
        amount_cents: 1250,
    };
    let outcome = pipeline
        .emit::<InvoiceSent>(invoice, &BaseCtx::default())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        EmitOutcome::Continue(Invoice {
            customer_email: "<EMAIL_ADDRESS>".into(),
            amount_cents: 1250
        })
    );
    let free = Invoice {
        customer_email: "x@example.com".into(),
        amount_cents: 0,
    };
    assert!(
        pipeline
            .emit::<InvoiceSent>(free, &BaseCtx::default())
            .await
            .unwrap()
            .is_suppressed()
    );
}
