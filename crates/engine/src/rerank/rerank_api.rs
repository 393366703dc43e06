//! `RerankApiReranker`: a dedicated `POST {base}/rerank` API in the Cohere / Jina shape
//! (`query`, `documents`, `top_n` → `results[{index, relevance_score}]`).

use super::client::{RerankClientConfig, RerankHttp};
use super::{RerankCandidate, RerankError, RerankErrorKind, RerankScore, Reranker, Result};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::HashSet;

const MAX_DOCUMENT_CHARS: usize = 1_000;

pub struct RerankApiReranker {
    http: RerankHttp,
    endpoint: String,
}

impl RerankApiReranker {
    pub fn new(config: RerankClientConfig) -> Result<Self> {
        let http = RerankHttp::new(config)?;
        let endpoint = http.endpoint("rerank");
        Ok(Self { http, endpoint })
    }
}

#[async_trait]
impl Reranker for RerankApiReranker {
    async fn rerank(&self, query: &str, candidates: &[RerankCandidate]) -> Result<Vec<RerankScore>> {
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let documents: Vec<String> = candidates.iter().map(document_text).collect();
        let body = json!({
            "model": self.http.config.model,
            "query": query,
            "documents": documents,
            "top_n": documents.len(),
            "return_documents": false,
        });
        let text = self.http.post_json(&self.endpoint, &body).await?;
        parse_rerank_api_answer(&text, candidates)
    }
}

fn document_text(candidate: &RerankCandidate) -> String {
    let text = [candidate.title.as_str(), candidate.heading.as_str(), candidate.excerpt.as_str()]
        .iter()
        .filter(|part| !part.trim().is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    text.chars().take(MAX_DOCUMENT_CHARS).collect()
}

/// Maps `results[{index, relevance_score}]` (or TEI's bare `[{index, score}]`) back to section ids.
///
/// Out-of-range or repeated indices (the first wins) and non-finite scores are dropped; a body of
/// another shape is `InvalidResponse`.
pub(crate) fn parse_rerank_api_answer(body: &str, candidates: &[RerankCandidate]) -> Result<Vec<RerankScore>> {
    let invalid = |message: String| RerankError::new(RerankErrorKind::InvalidResponse, message);
    let value: Value = serde_json::from_str(body).map_err(|error| {
        tracing::warn!(%error, "malformed rerank answer");
        invalid("malformed rerank answer".into())
    })?;
    let results = match &value {
        Value::Array(results) => results,
        Value::Object(object) => match object.get("results") {
            Some(Value::Array(results)) => results,
            _ => return Err(invalid("rerank answer has no results array".to_string())),
        },
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            return Err(invalid("rerank answer is not a JSON object".to_string()))
        }
    };
    let mut seen = HashSet::new();
    Ok(results
        .iter()
        .filter_map(|result| {
            let index = usize::try_from(result.get("index")?.as_u64()?).ok()?;
            let score = result.get("relevance_score").or_else(|| result.get("score"))?.as_f64()? as f32;
            let candidate = candidates.get(index)?;
            (score.is_finite() && seen.insert(index))
                .then(|| RerankScore { section_id: candidate.section_id.clone(), score })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates() -> Vec<RerankCandidate> {
        ["a", "b", "c"]
            .iter()
            .map(|id| RerankCandidate {
                section_id: id.to_string(),
                title: format!("title {id}"),
                heading: String::new(),
                excerpt: "text".into(),
            })
            .collect()
    }

    #[test]
    fn maps_indices_to_section_ids() {
        let body = r#"{"results": [{"index": 2, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.2}]}"#;
        let scores = parse_rerank_api_answer(body, &candidates()).unwrap();
        assert_eq!(
            scores,
            vec![
                RerankScore { section_id: "c".into(), score: 0.9 },
                RerankScore { section_id: "a".into(), score: 0.2 }
            ]
        );
        let tei = r#"[{"index": 1, "score": 0.5}]"#;
        assert_eq!(parse_rerank_api_answer(tei, &candidates()).unwrap()[0].section_id, "b");
    }

    #[test]
    fn bad_entries_are_dropped_and_bad_bodies_rejected() {
        let body = r#"{"results": [{"index": 7, "relevance_score": 0.9}, {"index": 1, "relevance_score": "x"},
            {"index": 0, "relevance_score": 0.4}, {"index": 0, "relevance_score": 0.8}, {"index": -1, "relevance_score": 1}]}"#;
        let scores = parse_rerank_api_answer(body, &candidates()).unwrap();
        assert_eq!(scores, vec![RerankScore { section_id: "a".into(), score: 0.4 }]);
        for body in ["", "nope", "{}", r#"{"results": 3}"#, "42"] {
            assert_eq!(
                parse_rerank_api_answer(body, &candidates()).unwrap_err().kind,
                RerankErrorKind::InvalidResponse
            );
        }
    }

    #[test]
    fn documents_join_non_empty_parts() {
        assert_eq!(document_text(&candidates()[0]), "title a\ntext");
    }
}
