//! PII and secret redaction (WIP).
#![forbid(unsafe_code)]

mod detect;
mod entity;
mod error;
mod operator;
mod redactor;
mod stream;
mod vault;

pub use detect::{Detector, Finding};
pub use entity::Entity;
pub use error::RedactionError;
pub use operator::Operator;
pub use redactor::{Redacted, Redactor, RedactorBuilder};
pub use stream::{DEFAULT_WINDOW, StreamRedactor};
pub use vault::Vault;
