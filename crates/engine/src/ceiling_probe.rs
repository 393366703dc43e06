//! The throughput ceiling probe: built only with `--features ceiling-probe` (never in a
//! release), run by `bench/ceiling.sh`. It answers `/internal/retrieval/search` doing only
//! part of a search, so a load generator measures what that part alone allows:
//!
//! - `CEILING_PROBE=http`: parse and check the request, answer the first search's response
//!   again (HTTP, JSON in and out, no ranking);
//! - `CEILING_PROBE=scan`: the same, plus the exact vector scans of a default search — the
//!   tenant's pages and the tenant-wide sections, `FUSION_DEPTH` best of each.
//!
//! Unset, the service searches as always.

use crate::model::Level;
use crate::search::ranking::FUSION_DEPTH;
use crate::search::validate::build_filter;
use crate::search::{Result, SearchError, SearchRequest, SearchResponse, SearchService};
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Http,
    Scan,
}

fn probe() -> Option<Probe> {
    static PROBE: OnceLock<Option<Probe>> = OnceLock::new();
    *PROBE.get_or_init(|| match std::env::var("CEILING_PROBE").as_deref() {
        Ok("http") => Some(Probe::Http),
        Ok("scan") => Some(Probe::Scan),
        _ => None,
    })
}

/// The probe's answer to `request`, or `None` when no probe is set (search as always).
pub async fn answer(service: &SearchService, request: &SearchRequest) -> Result<Option<SearchResponse>> {
    static FIRST: OnceLock<SearchResponse> = OnceLock::new();
    let Some(probe) = probe() else { return Ok(None) };
    if probe == Probe::Scan {
        exact_scans(service, request).await?;
    }
    if let Some(first) = FIRST.get() {
        return Ok(Some(first.clone()));
    }
    let response = service.search(request).await?;
    Ok(Some(FIRST.get_or_init(|| response).clone()))
}

/// The two tenant-wide exact scans of a default search, their results dropped.
async fn exact_scans(service: &SearchService, request: &SearchRequest) -> Result<()> {
    let pinned = service.pin_for(request).await?;
    let source = pinned.as_ref().map_err(|error| SearchError::from(error.clone()))?;
    let filter = build_filter(request, true)?;
    let vector = service.embed_query(source, request, &mut Vec::new()).await?;
    for level in [Level::Doc, Level::Section] {
        std::hint::black_box(source.knn(level, &filter, &vector, FUSION_DEPTH).await?);
    }
    Ok(())
}
