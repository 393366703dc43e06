//! Theme routing around the cascade: route the query, decide hard filter vs soft
//! boost, label hits with their theme, and offer a clarification when the top hits really split.

use super::boosting::RoutingHint;
use super::cascade::CascadeOutput;
use super::ranking::Ranked;
use crate::model::Level;
use crate::router::{build_clarification, Clarification, RoutingResult, Theme, ThemeLabels};

/// Hits whose theme labels decide whether a clarification is offered.
pub(crate) const CLARIFICATION_TOP_HITS: usize = 5;

pub(crate) use super::ranking::theme_label as label;

/// The soft boost hint: the primary theme and the next themes; with no primary (a tie), every
/// leading theme is a secondary one. When the question named its primary theme, the next themes
/// are only those it named too: a theme that merely shares a topic word («сафари» for iOS, Mac
/// and Safari) is then another product, not a runner-up.
pub(crate) fn routing_hint(result: &RoutingResult, themes: &[Theme]) -> Option<RoutingHint> {
    if result.themes.is_empty() {
        return None;
    }
    let fields_of = |id: &String| themes.iter().find(|t| &t.id == id).map(Theme::fields);
    let primary = result.primary_theme.as_ref().and_then(fields_of);
    let named = result.named() && primary.is_some();
    let secondary = result
        .themes
        .iter()
        .filter(|id| Some(*id) != result.primary_theme.as_ref())
        .filter(|id| !named || result.named_themes.contains(id))
        .filter_map(fields_of)
        .collect();
    Some(RoutingHint { primary, secondary, named })
}

/// A clarification when routing was unsure and the top hits span several themes.
pub(crate) fn clarification(
    result: &RoutingResult,
    hits: &[Ranked],
    themes: &ThemeLabels<'_>,
) -> Option<Clarification> {
    if !result.requires_disambiguation {
        return None;
    }
    let labels: Vec<Option<String>> = hits.iter().take(CLARIFICATION_TOP_HITS).map(|hit| label(hit, themes)).collect();
    build_clarification(result, &labels, themes.themes())
}

/// How strongly the first `n` hits split across themes: `None` unless the best hit belongs to a
/// *specific* theme (one defined by more than a domain, e.g. a product platform or a role) and
/// another of the first `n` hits to a second specific theme; then the score of the best hit of
/// that second theme as a share of the first hit's score, in [0, 1]. Hits of domain-only themes
/// (general knowledge pages) answer for every product and do not split a question.
pub(crate) fn split_ratio(hits: &[Ranked], n: usize, labels: &ThemeLabels<'_>) -> Option<f32> {
    let themes = labels.themes();
    let specific = |hit: &Ranked| {
        label(hit, labels).filter(|id| themes.iter().any(|t| &t.id == id && t.fields_view().specificity() >= 2))
    };
    let first = hits.first()?;
    let first_theme = specific(first)?;
    let second = hits.iter().take(n).skip(1).find(|hit| specific(hit).is_some_and(|id| id != first_theme))?;
    Some(if first.score > 0.0 { (second.score / first.score).clamp(0.0, 1.0) } else { 1.0 })
}

/// A question that names several themes equally (no primary theme, e.g. «как оператору и
/// администратору…») gets an answer from each: a tied leading theme without a hit in the answer
/// gets its best ranked section in place of the answer's last hit of an over-represented theme.
pub(crate) fn cover_named_themes(
    output: &mut CascadeOutput,
    result: &RoutingResult,
    themes: &ThemeLabels<'_>,
    max_results: usize,
) {
    if result.primary_theme.is_some() || result.themes.len() < 2 || output.hits_level != Some(Level::Section) {
        return;
    }
    let top = result.scores.values().copied().fold(0.0_f32, f32::max);
    let tied: Vec<&String> =
        result.themes.iter().filter(|id| result.scores.get(*id).is_some_and(|s| top - s < 1e-6)).collect();
    if tied.len() < 2 {
        return;
    }
    for theme in tied {
        let labels: Vec<Option<String>> = output.hits.iter().map(|hit| label(hit, themes)).collect();
        if labels.iter().any(|l| l.as_ref() == Some(theme)) {
            continue;
        }
        let Some(best) = output.sections.iter().find(|s| label(s, themes).as_ref() == Some(theme)) else { continue };
        if output.hits.iter().any(|hit| hit.record.id == best.record.id) {
            continue;
        }
        if output.hits.len() < max_results {
            output.hits.push(best.clone());
            continue;
        }
        // Replace the last hit whose theme has more than one hit in the answer.
        let replace = (0..output.hits.len()).rev().find(|&i| {
            let l = &labels[i];
            l.as_ref() != Some(theme) && labels.iter().filter(|other| *other == l).count() > 1
        });
        if let Some(position) = replace {
            output.hits[position] = best.clone();
        }
    }
}
