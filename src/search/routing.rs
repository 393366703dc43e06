//! Theme routing around the cascade (seed 003 §3.3.2): route the query, decide hard filter vs soft
//! boost, label hits with their theme, and offer a clarification when the top hits really split.

use super::boosting::RoutingHint;
use super::ranking::Ranked;
use crate::router::{build_clarification, infer_theme_label, Clarification, RoutingResult, Theme};
use serde::Serialize;

/// Hits whose theme labels decide whether a clarification is offered.
pub const CLARIFICATION_TOP_HITS: usize = 5;

/// The routing part of a search response.
#[derive(Debug, Clone, Serialize)]
pub struct RoutingInfo {
    #[serde(flatten)]
    pub result: RoutingResult,
    /// True when the hits were restricted to the primary theme's metadata (hard filter).
    pub filter_applied: bool,
    /// The theme chosen by the caller (request field `theme`), which always filters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen_theme: Option<String>,
}

/// The soft boost hint: the primary theme and the next themes; with no primary (a tie), every
/// leading theme is a secondary one.
pub fn routing_hint(result: &RoutingResult, themes: &[Theme]) -> Option<RoutingHint> {
    if result.themes.is_empty() {
        return None;
    }
    let fields_of = |id: &String| themes.iter().find(|t| &t.id == id).map(Theme::fields);
    let primary = result.primary_theme.as_ref().and_then(fields_of);
    let secondary =
        result.themes.iter().filter(|id| Some(*id) != result.primary_theme.as_ref()).filter_map(fields_of).collect();
    Some(RoutingHint { primary, secondary })
}

/// The theme label of a ranked record (`infer_theme_label` over its metadata).
pub fn label(ranked: &Ranked, themes: &[Theme]) -> Option<String> {
    infer_theme_label(&ranked.record.meta, themes)
}

/// A clarification when routing was unsure and the top hits span several themes.
pub fn clarification(result: &RoutingResult, hits: &[Ranked], themes: &[Theme]) -> Option<Clarification> {
    if !result.requires_disambiguation {
        return None;
    }
    let labels: Vec<Option<String>> = hits.iter().take(CLARIFICATION_TOP_HITS).map(|hit| label(hit, themes)).collect();
    build_clarification(result, &labels, themes)
}

/// Whether the first `n` hits split across themes: the best hit belongs to a *specific* theme
/// (one defined by more than a domain, e.g. a product platform or a role), and the first `n` hits
/// name at least two specific themes. Hits of domain-only themes (general knowledge pages) answer
/// for every product and do not split a question.
pub fn hits_split(hits: &[Ranked], n: usize, themes: &[Theme]) -> bool {
    let specific = |hit: &Ranked| {
        label(hit, themes).filter(|id| themes.iter().any(|t| &t.id == id && t.fields().specificity() >= 2))
    };
    if hits.first().and_then(specific).is_none() {
        return false;
    }
    let mut seen: Vec<String> = Vec::new();
    for id in hits.iter().take(n).filter_map(specific) {
        if !seen.contains(&id) {
            seen.push(id);
        }
    }
    seen.len() >= 2
}
