//! The optional LLM rerank of the top sections (after the section step). Any failure keeps the original
//! order and reports a degradation; the call is bounded by the rerank timeout.

use super::ranking::Ranked;
use super::types::Degradation;
use crate::rerank::{merge_rerank, RerankCandidate, RerankErrorKind, Reranker};
use std::collections::HashMap;
use std::time::Duration;

/// Characters of section text offered to the reranker per candidate.
pub(crate) const EXCERPT_CHARS: usize = 500;

/// Slack on top of the client's own timeout before the search stops waiting for the reranker.
const TIMEOUT_SLACK: Duration = Duration::from_millis(250);

fn excerpt(text: &str) -> String {
    text.chars().take(EXCERPT_CHARS).collect()
}

/// Reorders the first `top_n` of `sections` by the reranker's scores; the rest keep their place.
/// Every original section stays exactly once whatever the reranker answers.
pub(crate) async fn rerank_sections(
    reranker: &dyn Reranker,
    query: &str,
    sections: Vec<Ranked>,
    top_n: usize,
    timeout: Duration,
) -> (Vec<Ranked>, Option<Degradation>) {
    if sections.len() < 2 || top_n < 2 {
        return (sections, None);
    }
    let head_len = top_n.min(sections.len());
    let candidates: Vec<RerankCandidate> = sections[..head_len]
        .iter()
        .map(|ranked| RerankCandidate {
            section_id: ranked.record.id.clone(),
            title: ranked.record.meta.title.to_string(),
            heading: ranked.record.meta.heading.clone(),
            excerpt: excerpt(&ranked.record.text),
        })
        .collect();
    let answer = tokio::time::timeout(timeout + TIMEOUT_SLACK, reranker.rerank(query, &candidates)).await;
    let scores = match answer {
        Ok(Ok(scores)) => scores,
        Ok(Err(error)) => {
            let code = match error.kind {
                RerankErrorKind::NotConfigured => "rerank_unavailable",
                RerankErrorKind::BadRequest
                | RerankErrorKind::Unauthorized
                | RerankErrorKind::NotFound
                | RerankErrorKind::Timeout
                | RerankErrorKind::RateLimited
                | RerankErrorKind::Unavailable
                | RerankErrorKind::InvalidResponse
                | RerankErrorKind::Internal => "rerank_failed",
            };
            tracing::warn!(kind = ?error.kind, error = %error.message, "rerank failed; keeping the original order");
            return (sections, Some(Degradation::new(code, format!("rerank skipped, original order kept: {error}"))));
        }
        Err(_elapsed) => {
            tracing::warn!(timeout_ms = timeout.as_millis() as u64, "rerank timed out; keeping the original order");
            let message = format!("rerank timed out after {} ms, original order kept", timeout.as_millis());
            return (sections, Some(Degradation::new("rerank_failed", message)));
        }
    };
    let mut head: HashMap<String, Ranked> =
        sections[..head_len].iter().map(|ranked| (ranked.record.id.clone(), ranked.clone())).collect();
    let original: Vec<String> = candidates.iter().map(|c| c.section_id.clone()).collect();
    let mut reordered: Vec<Ranked> = merge_rerank(&original, &scores)
        .into_iter()
        .filter_map(|(id, score)| {
            let mut ranked = head.remove(&id)?;
            ranked.rerank_score = score;
            Some(ranked)
        })
        .collect();
    reordered.extend(sections.into_iter().skip(head_len));
    (reordered, None)
}
