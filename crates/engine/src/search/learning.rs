//! What the learner (`crate::learn`) asks of the search: each labelled question's first
//! candidates in the service's own order (no learned model), with the features a learned
//! re-ranker reads, marked with whether the answer used them.

use super::error::Result;
use super::ranking::RankingMode;
use super::service::SearchService;
use super::stages::LearnedUse;
use super::tenant::TenantId;
use super::types::SearchRequest;
use crate::learn::{Candidate, Example, LabelledSearch};

impl SearchService {
    /// The first `learn::CANDIDATES` hits of a search in the service's own order (no learned
    /// model), each with the features a learned re-ranker reads.
    pub(crate) async fn candidates(&self, request: &SearchRequest) -> Result<Vec<Candidate>> {
        let pinned = self.pin_for(request).await?;
        let mut candidates = Vec::new();
        self.search_on(&pinned, request, RankingMode::Hybrid, LearnedUse::Collect(&mut candidates)).await?;
        Ok(candidates)
    }

    /// Asks every search of `tenant` (without any learned model) and marks the candidates its
    /// answer used: the examples a re-ranker is fitted and scored on.
    pub async fn learning_examples(&self, tenant: &TenantId, searches: &[LabelledSearch]) -> Result<Vec<Example>> {
        let mut examples = Vec::with_capacity(searches.len());
        for search in searches {
            let request = SearchRequest::new(tenant.clone(), search.query.clone());
            let candidates = self.candidates(&request).await?;
            let used = candidates
                .iter()
                .map(|c| search.used.iter().any(|u| *u == c.hit_id || *u == c.doc_id || *u == c.source))
                .collect();
            examples.push(Example {
                rows: candidates.into_iter().map(|c| c.row).collect(),
                used,
                key: search.key.clone(),
            });
        }
        Ok(examples)
    }
}
