//! A stand-in for a third-party plugin crate: it declares its own tag with `#[derive(Tag)]`,
//! and tests check that the tag shows up in `harness_tags::catalog()` of any binary that links
//! this crate.

use harness_tags::{BaseCtx, Tag};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An invoice a billing plugin is about to send.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Invoice {
    /// Who gets the invoice.
    pub customer_email: String,
    /// Amount in cents.
    pub amount_cents: u64,
}

/// Emitted by the billing plugin before an invoice is sent; the reshaped invoice is the one sent.
#[derive(Tag, Clone, Copy, Debug)]
#[tag(name = "acme.billing.invoice-sent", phase = Act, payload = Invoice, ctx = BaseCtx, suppressible)]
pub struct InvoiceSent;
