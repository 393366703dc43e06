//! `TenantId`: a tenant id checked once, when it is parsed (from a request body, a query string
//! or code), so that everything downstream holds a valid one.

use super::error::Result;
use super::limits::validate_tenant;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// A tenant id: 1–`MAX_TENANT_ID_CHARS` characters of `[A-Za-z0-9._-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct TenantId(String);

impl TenantId {
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        validate_tenant(&id)?;
        Ok(Self(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for TenantId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        validate_tenant(&id).map_err(|error| match error {
            super::error::SearchError::InvalidRequest { message, .. } => serde::de::Error::custom(message),
            other => serde::de::Error::custom(other),
        })?;
        Ok(Self(id))
    }
}

impl std::ops::Deref for TenantId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for TenantId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl From<TenantId> for String {
    fn from(id: TenantId) -> String {
        id.0
    }
}

impl std::str::FromStr for TenantId {
    type Err = super::SearchError;

    fn from_str(id: &str) -> Result<Self> {
        Self::new(id)
    }
}

#[cfg(test)]
mod tests {
    use super::TenantId;

    #[test]
    fn a_tenant_id_is_checked_when_parsed() {
        assert_eq!(TenantId::new("acme-1.x_y").unwrap().as_str(), "acme-1.x_y");
        for bad in ["", " ", "a b", "тенант", "a/b", &"x".repeat(129)] {
            assert!(TenantId::new(bad).is_err(), "{bad:?}");
            let error = serde_json::from_str::<TenantId>(&serde_json::to_string(bad).unwrap()).unwrap_err();
            assert!(error.to_string().starts_with("must "), "{error}");
        }
        assert_eq!(serde_json::from_str::<TenantId>("\"t1\"").unwrap(), TenantId::new("t1").unwrap());
    }
}
