//! Errors of the search layer, by kind; `error.rs` maps them to HTTP statuses.

use crate::index::IndexError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum SearchError {
    /// The request is well-formed JSON but a value is not acceptable.
    #[error("{field}: {message}")]
    InvalidRequest { field: String, message: String },
    #[error("unknown tenant {0:?}")]
    UnknownTenant(String),
    #[error("{0}")]
    NotFound(String),
    /// The tenant is not among those this instance serves (`RETR_TENANTS`).
    #[error("{0}")]
    TenantNotServed(String),
    /// The index did not reach the request's `min_index_version` within the wait.
    #[error("{0}")]
    IndexNotReady(String),
    #[error(transparent)]
    Index(#[from] IndexError),
}

impl SearchError {
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        SearchError::InvalidRequest { field: field.into(), message: message.into() }
    }
}

pub(crate) type Result<T> = std::result::Result<T, SearchError>;
