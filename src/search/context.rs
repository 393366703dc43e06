//! Prompt-ready context (seed 002 `format_results_for_llm`, seed 003 §4.4): search, fetch the
//! winning sections' or chunks' text for the same tenant, and format numbered sources grouped by
//! theme within a character budget.

use super::{Result, SearchRequest, SearchResponse, SearchService};
use crate::index::RecordFilter;
use crate::model::Level;
use crate::router::{format_context, ContextSource, FormattedContext};
use std::collections::HashMap;

/// Default and largest accepted `max_context_chars`.
pub const DEFAULT_CONTEXT_CHARS: usize = 6000;
pub const MAX_CONTEXT_CHARS: usize = 100_000;

pub struct ContextAnswer {
    pub formatted: FormattedContext,
    pub search: SearchResponse,
    /// For each source given to the formatter, the index of its hit in `search.hits`.
    pub source_hits: Vec<usize>,
}

impl SearchService {
    /// Searches, then formats the hits' text as one context of at most `budget_chars` characters.
    pub async fn context(&self, request: &SearchRequest, budget_chars: usize) -> Result<ContextAnswer> {
        let search = self.search(request).await?;
        let level = match search.hits.first().map(|hit| hit.level) {
            Some(level) => level,
            None => {
                let formatted = format_context(&[], budget_chars);
                return Ok(ContextAnswer { formatted, search, source_hits: Vec::new() });
            }
        };
        let mut filter = RecordFilter::tenant(request.tenant_id.clone());
        let ids: Vec<String> = search.hits.iter().map(|hit| hit.id.clone()).collect();
        match level {
            Level::Section => filter.section_ids = Some(ids.clone()),
            Level::Chunk | Level::Doc => {
                filter.doc_ids = Some(search.hits.iter().map(|hit| hit.doc_id.clone()).collect());
            }
        }
        let texts: HashMap<String, String> = self
            .index
            .get(level, &filter, usize::MAX)
            .await?
            .into_iter()
            .filter(|record| ids.contains(&record.id))
            .map(|record| (record.id.clone(), record.text.clone()))
            .collect();
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
