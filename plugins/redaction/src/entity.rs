//! Entity types: what a finding is, named as in Presidio's vocabulary where one exists.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The kind of a finding: a built-in entity or a custom one named by the user.
///
/// Built-in names follow Presidio (`EMAIL_ADDRESS`, `PHONE_NUMBER`, ...). API keys share the
/// entity `API_KEY` and carry a subtype on the finding (`aws_access_key_id`, `github`, ...);
/// keyword-anchored secrets without a known format are `SECRET`.
///
/// ```
/// use harness_redaction::Entity;
///
/// assert_eq!(Entity::EmailAddress.name(), "EMAIL_ADDRESS");
/// assert_eq!(Entity::from_name("CREDIT_CARD"), Entity::CreditCard);
/// assert_eq!(Entity::from_name("EMPLOYEE_ID").name(), "EMPLOYEE_ID");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Entity {
    /// An email address.
    EmailAddress,
    /// A phone number in international (`+44 20 7946 0958`) or national format.
    PhoneNumber,
    /// A payment card number that passes the Luhn check.
    CreditCard,
    /// An IBAN with a valid mod-97 checksum and its country's length.
    IbanCode,
    /// A US social security number outside the ranges never issued.
    UsSsn,
    /// An IPv4 or IPv6 address.
    IpAddress,
    /// A MAC address.
    MacAddress,
    /// A URL that carries credentials (`scheme://user:password@host`).
    Url,
    /// A Bitcoin address with a valid checksum (base58check or bech32).
    Crypto,
    /// A JSON Web Token.
    Jwt,
    /// A PEM or PGP private key block.
    PrivateKey,
    /// An API key of a known format; the finding's subtype names the provider.
    ApiKey,
    /// A high-entropy secret next to a keyword such as `api_key=` or `password:`.
    Secret,
    /// A custom entity from a user's detector or deny-list.
    Custom(Arc<str>),
}

impl Entity {
    /// Every built-in entity, in the order of the detector table.
    pub const BUILTIN: [Entity; 13] = [
        Entity::PrivateKey,
        Entity::Jwt,
        Entity::Url,
        Entity::ApiKey,
        Entity::Secret,
        Entity::EmailAddress,
        Entity::IbanCode,
        Entity::Crypto,
        Entity::MacAddress,
        Entity::IpAddress,
        Entity::CreditCard,
        Entity::UsSsn,
        Entity::PhoneNumber,
    ];

    /// The entity's name, e.g. `EMAIL_ADDRESS`.
    pub fn name(&self) -> &str {
        match self {
            Entity::EmailAddress => "EMAIL_ADDRESS",
            Entity::PhoneNumber => "PHONE_NUMBER",
            Entity::CreditCard => "CREDIT_CARD",
            Entity::IbanCode => "IBAN_CODE",
            Entity::UsSsn => "US_SSN",
            Entity::IpAddress => "IP_ADDRESS",
            Entity::MacAddress => "MAC_ADDRESS",
            Entity::Url => "URL",
            Entity::Crypto => "CRYPTO",
            Entity::Jwt => "JWT",
            Entity::PrivateKey => "PRIVATE_KEY",
            Entity::ApiKey => "API_KEY",
            Entity::Secret => "SECRET",
            Entity::Custom(name) => name,
        }
    }

    /// The entity with this name: a built-in one if the name is built in, else a custom one.
    pub fn from_name(name: &str) -> Entity {
        Entity::BUILTIN
            .iter()
            .find(|entity| entity.name() == name)
            .cloned()
            .unwrap_or_else(|| Entity::Custom(Arc::from(name)))
    }

    /// True for the entities found by a built-in detector.
    pub fn is_builtin(&self) -> bool {
        !matches!(self, Entity::Custom(_))
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<&str> for Entity {
    fn from(name: &str) -> Self {
        Entity::from_name(name)
    }
}

impl Serialize for Entity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Entity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(Entity::from_name(&name))
    }
}
