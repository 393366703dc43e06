//! Prompt-ready context for the LLM (`router::context_format` formats it): search, fetch the
//! winning sections' or chunks' text for the same tenant, and format numbered sources grouped by
//! theme within a character budget.

use super::error::{Result, SearchError};
use super::ranking::RankingMode;
use super::service::SearchService;
use super::stages::LearnedUse;
use super::types::{RetrievalHit, SearchRequest, SearchResponse};
use crate::index::{RecordFilter, Source};
use crate::model::Level;
use crate::router::{format_context, ContextSource, FormattedContext};
use std::collections::{HashMap, HashSet};

/// Default and largest accepted `max_context_chars`.
pub const DEFAULT_CONTEXT_CHARS: usize = 6000;
pub const MAX_CONTEXT_CHARS: usize = 100_000;

pub struct ContextAnswer {
    pub formatted: FormattedContext,
    pub search: SearchResponse,
    /// For each source given to the formatter, the index of its hit in `search.hits`.
    pub source_hits: Vec<usize>,
}

/// The text of each hit (sections' and chunks' own text, docs' title and summary), by hit id,
/// read from the hits' own tenant in `source` (the one the search ran on).
pub(crate) async fn hit_texts(
    source: &Source,
    tenant_id: &str,
    hits: &[RetrievalHit],
) -> Result<HashMap<String, String>> {
    let mut texts = HashMap::with_capacity(hits.len());
    for level in Level::ALL {
        let ids: HashSet<&str> = hits.iter().filter(|hit| hit.level == level).map(|hit| hit.id.as_str()).collect();
        if ids.is_empty() {
            continue;
        }
        let mut filter = RecordFilter::tenant(tenant_id);
        match level {
            Level::Section => filter.section_ids = Some(ids.iter().map(|id| id.to_string()).collect()),
            Level::Chunk | Level::Doc => {
                let docs: HashSet<&str> =
                    hits.iter().filter(|hit| hit.level == level).map(|hit| hit.doc_id.as_str()).collect();
                filter.doc_ids = Some(docs.into_iter().map(str::to_string).collect());
            }
        }
        for record in source.get(level, &filter, usize::MAX).await? {
            if ids.contains(record.id.as_str()) {
                texts.insert(record.id.clone(), record.text.to_string());
            }
        }
    }
    Ok(texts)
}

impl SearchService {
    /// Searches, then reads the hits' texts from the same snapshot (`/context`, the Dify API).
    pub async fn search_with_texts(
        &self,
        request: &SearchRequest,
    ) -> Result<(SearchResponse, HashMap<String, String>)> {
        self.search_with_texts_in_mode(request, RankingMode::Hybrid).await
    }

    /// `search_with_texts` with the given ranking mode (the Dify API's lexical search).
    pub async fn search_with_texts_in_mode(
        &self,
        request: &SearchRequest,
        mode: RankingMode,
    ) -> Result<(SearchResponse, HashMap<String, String>)> {
        let pinned = self.pin_for(request).await?;
        let response = self.search_on(&pinned, request, mode, LearnedUse::Apply).await?;
        let source = pinned.as_ref().map_err(|error| SearchError::from(error.clone()))?;
        let texts = hit_texts(source, &request.tenant_id, &response.hits).await?;
        Ok((response, texts))
    }

    /// Searches, then formats the hits' text as one context of at most `budget_chars` characters.
    pub async fn context(&self, request: &SearchRequest, budget_chars: usize) -> Result<ContextAnswer> {
        let (search, texts) = self.search_with_texts(request).await?;
        let mut source_hits = Vec::new();
        let sources: Vec<ContextSource> = search
            .hits
            .iter()
            .enumerate()
            .filter_map(|(hit_index, hit)| {
                let text = texts.get(&hit.id)?;
                source_hits.push(hit_index);
                Some(ContextSource {
                    title: hit.title.clone(),
                    url: hit.metadata.url.clone(),
                    source: hit.metadata.source.clone(),
                    relevance: hit.relevance.clamp(0.0, 1.0),
                    theme_label: hit.metadata.theme_label.clone(),
                    text: text.clone(),
                })
            })
            .collect();
        Ok(ContextAnswer { formatted: format_context(&sources, budget_chars), search, source_hits })
    }
}
