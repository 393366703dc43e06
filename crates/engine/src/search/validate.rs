//! The stage **check**: what a request must be before a search reads anything (its fields
//! within `limits.rs`), the record filter built from it, and the runtime settings with its
//! overrides.

use super::error::{Result, SearchError};
use super::limits::{check_chars, is_blank, MAX_ID_CHARS, MAX_ID_LIST, MAX_TAGS, MAX_TAG_CHARS, MAX_TRACE_ID_CHARS};
use super::settings::{RuntimeSettings, MAX_RESULTS_CAP};
use super::types::SearchRequest;
use crate::index::RecordFilter;
use crate::router::RouterMode;
use std::collections::HashSet;

/// The union of the caller's id lists, in first-seen order. Every list's length is checked
/// before anything is done with its entries, so an oversized list costs nothing but its parse.
fn id_list(field: &str, lists: &[Option<&[String]>]) -> Result<Option<Vec<String>>> {
    for list in lists.iter().flatten() {
        if list.len() > MAX_ID_LIST {
            return Err(SearchError::invalid(field, format!("at most {MAX_ID_LIST} ids, got {}", list.len())));
        }
    }
    let total: usize = lists.iter().flatten().map(|list| list.len()).sum();
    let mut seen: HashSet<&str> = HashSet::with_capacity(total);
    let mut merged: Vec<String> = Vec::with_capacity(total.min(MAX_ID_LIST));
    for value in lists.iter().flatten().flat_map(|list| list.iter()) {
        if value.is_empty() {
            return Err(SearchError::invalid(field, "ids must not be empty strings"));
        }
        check_chars(field, "an id", value, MAX_ID_CHARS)?;
        if seen.insert(value.as_str()) {
            merged.push(value.clone());
        }
    }
    if merged.len() > MAX_ID_LIST {
        return Err(SearchError::invalid(field, format!("at most {MAX_ID_LIST} distinct ids, got {}", merged.len())));
    }
    Ok(if merged.is_empty() { None } else { Some(merged) })
}

/// `filters.tags` without empty or repeated entries; at most `MAX_TAGS` of at most
/// `MAX_TAG_CHARS` characters each.
fn tag_list(tags: &[String]) -> Result<Vec<String>> {
    if tags.len() > MAX_TAGS {
        return Err(SearchError::invalid("filters.tags", format!("at most {MAX_TAGS} tags, got {}", tags.len())));
    }
    let mut seen: HashSet<&str> = HashSet::with_capacity(tags.len());
    let mut kept = Vec::with_capacity(tags.len());
    for tag in tags {
        check_chars("filters.tags", "a tag", tag, MAX_TAG_CHARS)?;
        if !tag.is_empty() && seen.insert(tag.as_str()) {
            kept.push(tag.clone());
        }
    }
    Ok(kept)
}

/// Builds the record filter: the tenant and the request's `condition` always; the request's
/// filters only when enabled.
/// Top-level `doc_ids`/`section_ids` and those under `filters` are merged (union). Every list
/// and value is validated (and bounded) also when filters are disabled.
pub(crate) fn build_filter(request: &SearchRequest, enable_filters: bool) -> Result<RecordFilter> {
    let mut filter = RecordFilter::tenant(request.tenant_id.clone());
    filter.condition = request.condition.clone();
    let doc_ids = id_list("doc_ids", &[request.doc_ids.as_deref(), request.filters.doc_ids.as_deref()])?;
    let section_ids =
        id_list("section_ids", &[request.section_ids.as_deref(), request.filters.section_ids.as_deref()])?;
    let tags = tag_list(&request.filters.tags)?;
    for (field, value) in [("filters.product", &request.filters.product), ("filters.version", &request.filters.version)]
    {
        if let Some(value) = value {
            check_chars(field, "the value", value, MAX_TAG_CHARS)?;
        }
    }
    if !enable_filters {
        return Ok(filter);
    }
    let non_empty = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
    filter.product = non_empty(&request.filters.product);
    filter.version = non_empty(&request.filters.version);
    filter.tags = tags;
    filter.doc_ids = doc_ids;
    filter.section_ids = section_ids;
    Ok(filter)
}

/// `runtime` with this request's overrides (`router_mode`, the top-k knobs), each
/// checked against the same ranges as `POST /config`; the shared settings never change.
pub(crate) fn request_runtime(
    mut runtime: RuntimeSettings,
    request: &SearchRequest,
    has_llm_router: bool,
) -> Result<RuntimeSettings> {
    let knob = |field: &str, value: Option<i64>, current: usize| -> Result<usize> {
        match value {
            None => Ok(current),
            Some(value) if value < 1 => Err(SearchError::invalid(field, format!("must be at least 1, got {value}"))),
            Some(value) => Ok(usize::try_from(value).unwrap_or(usize::MAX)),
        }
    };
    runtime.doc_top_k = knob("doc_top_k", request.doc_top_k, runtime.doc_top_k)?;
    runtime.section_top_k = knob("section_top_k", request.section_top_k, runtime.section_top_k)?;
    runtime.topk_per_doc = knob("topk_per_doc", request.topk_per_doc, runtime.topk_per_doc)?;
    if let Some(mode) = request.router_mode {
        if mode == RouterMode::Llm && !has_llm_router {
            return Err(SearchError::invalid("router_mode", "llm needs a chat endpoint, which is not configured"));
        }
        runtime.theme_router_mode = mode;
    }
    let overridden = ["doc_top_k", "section_top_k", "topk_per_doc"];
    if let Some((field, problem)) =
        runtime.problems().into_iter().find(|(field, _)| overridden.contains(&field.as_str()))
    {
        return Err(SearchError::invalid(field, problem));
    }
    Ok(runtime)
}

/// The request's own checks (the query, the trace id) and the number of hits it asks for.
pub(crate) fn max_results(request: &SearchRequest, runtime: &RuntimeSettings, max_query_chars: usize) -> Result<usize> {
    if is_blank(&request.query) {
        return Err(SearchError::invalid("query", "must not be empty (or only spaces and invisible characters)"));
    }
    let length = request.query.chars().count();
    if length > max_query_chars {
        return Err(SearchError::invalid(
            "query",
            format!("is {length} characters long; the limit is {}", max_query_chars),
        ));
    }
    if let Some(trace_id) = &request.trace_id {
        check_chars("trace_id", "the trace id", trace_id, MAX_TRACE_ID_CHARS)?;
    }
    match request.max_results {
        Some(value) if value < 1 => {
            Err(SearchError::invalid("max_results", format!("must be at least 1, got {value}")))
        }
        Some(value) => Ok((value as usize).min(MAX_RESULTS_CAP)),
        None => Ok(runtime.max_results.min(MAX_RESULTS_CAP)),
    }
}
