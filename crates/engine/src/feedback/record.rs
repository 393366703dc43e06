//! One feedback record as stored: what a search answered with and whether it helped.

use serde::{Deserialize, Serialize};

/// Most hit ids in `used` or `shown`.
pub const MAX_FEEDBACK_IDS: usize = 50;

/// The user's verdict on the answer built from the hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Helpful,
    Unhelpful,
}

/// One feedback record as stored (one JSON line): the search it is about (its `trace_id` and
/// query), the hits the answer used and, when known, the hits shown and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackRecord {
    /// When the service accepted it, milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub trace_id: String,
    pub query: String,
    /// Hit ids (or their pages' doc ids, or source paths) the answer used; may be empty.
    pub used: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shown: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// Milliseconds since the Unix epoch now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
