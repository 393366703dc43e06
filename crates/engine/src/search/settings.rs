//! The search knobs that `GET/POST /internal/retrieval/config` expose and change at run time, and
//! their hard limits. The service configuration (`config`) reads and re-exports them.

use crate::router::RouterMode;
use serde::{Deserialize, Serialize};

pub use crate::model::MAX_RESULTS_CAP;
/// The largest `doc_top_k`, `section_top_k`, `chunk_top_k`, `rerank_top_n` and `min_docs`.
pub(crate) const MAX_TOP_K: usize = 1000;
/// The largest `topk_per_doc` (hits per doc): more than `MAX_RESULTS_CAP` could never show.
pub(crate) const MAX_TOPK_PER_DOC: usize = 50;
/// The search knobs that `GET/POST /internal/retrieval/config` expose and change at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RuntimeSettings {
    #[schema(minimum = 1, maximum = 50)]
    pub max_results: usize,
    #[schema(minimum = 1, maximum = 1000)]
    pub doc_top_k: usize,
    #[schema(minimum = 1, maximum = 1000)]
    pub section_top_k: usize,
    #[schema(minimum = 1, maximum = 1000)]
    pub chunk_top_k: usize,
    #[schema(minimum = 1, maximum = 50)]
    pub topk_per_doc: usize,
    #[schema(minimum = 0, maximum = 1000)]
    pub min_docs: usize,
    #[schema(minimum = -1, maximum = 1)]
    pub min_score: f32,
    pub enable_filters: bool,
    pub rerank_enabled: bool,
    #[schema(minimum = 1, maximum = 1000)]
    pub rerank_top_n: usize,
    pub theme_router_mode: RouterMode,
}

impl RuntimeSettings {
    /// Every out-of-range value, as (setting name, problem) pairs; empty when valid.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut at_least_one = |name: &str, value: usize| {
            if value < 1 {
                problems.push((name.to_string(), format!("must be at least 1, got {value}")));
            }
        };
        at_least_one("doc_top_k", self.doc_top_k);
        at_least_one("section_top_k", self.section_top_k);
        at_least_one("chunk_top_k", self.chunk_top_k);
        at_least_one("topk_per_doc", self.topk_per_doc);
        at_least_one("max_results", self.max_results);
        at_least_one("rerank_top_n", self.rerank_top_n);
        if self.max_results > MAX_RESULTS_CAP {
            problems
                .push(("max_results".into(), format!("must be at most {MAX_RESULTS_CAP}, got {}", self.max_results)));
        }
        for (name, value) in [
            ("doc_top_k", self.doc_top_k),
            ("section_top_k", self.section_top_k),
            ("chunk_top_k", self.chunk_top_k),
            ("rerank_top_n", self.rerank_top_n),
        ] {
            if value > MAX_TOP_K {
                problems.push((name.into(), format!("must be at most {MAX_TOP_K}, got {value}")));
            }
        }
        if self.topk_per_doc > MAX_TOPK_PER_DOC {
            problems.push((
                "topk_per_doc".into(),
                format!("must be at most {MAX_TOPK_PER_DOC}, got {}", self.topk_per_doc),
            ));
        }
        if self.min_docs > MAX_TOP_K {
            problems.push(("min_docs".into(), format!("must be at most {MAX_TOP_K}, got {}", self.min_docs)));
        }
        if !(-1.0..=1.0).contains(&self.min_score) || !self.min_score.is_finite() {
            problems.push(("min_score".into(), format!("must be within [-1, 1], got {}", self.min_score)));
        }
        problems
    }
}
