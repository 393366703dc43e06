//! What the orchestrator reports back about a search: which hits its answer used, and the user's
//! verdict. Kept durably per tenant (`store.rs`: one append-only JSON-lines file per tenant,
//! group-committed and synced before a post is acknowledged, bounded in size and age) and read by
//! the learner (`crate::learn`), which refits the tenant's re-ranker on it.

mod record;
mod store;

pub use record::{now_ms, FeedbackRecord, Verdict, MAX_FEEDBACK_IDS};
pub use store::{FeedbackLimits, FeedbackStore, StoreError};

/// The directory of a tenant's feedback (and learned re-ranker) under the feedback directory.
pub(crate) fn tenant_dir_of(dir: &std::path::Path, tenant: &str) -> std::path::PathBuf {
    store::tenant_dir(dir, tenant)
}
