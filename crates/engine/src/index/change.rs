//! What one write changed in one tenant: the scope a refresh re-reads and an index rebuilds
//! (written by the Chroma backend's change log, read by the in-memory index's rebuild).

use std::collections::BTreeSet;

/// What one write changed in one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeScope {
    /// Records of these docs were written or deleted.
    Docs(BTreeSet<String>),
    /// Any record of the tenant may have changed (a tenant delete or replacement, a filtered delete).
    Tenant,
}

impl ChangeScope {
    /// The union of two changes of one tenant.
    pub(crate) fn merge(self, other: ChangeScope) -> ChangeScope {
        match (self, other) {
            (ChangeScope::Docs(mut a), ChangeScope::Docs(b)) => {
                a.extend(b);
                ChangeScope::Docs(a)
            }
            _ => ChangeScope::Tenant,
        }
    }
}
