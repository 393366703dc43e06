//! Router thresholds and weights: the optional `router:` section of the themes file.

use serde::{Deserialize, Serialize};

/// Thresholds of the theme router. Every field has a default, so the `router:` section of the themes
/// file may be absent or partial.
///
/// Heuristic scores are shares of the total evidence (they sum to 1 over the matched themes), so
/// `heuristic_hard_filter_gap = 0.35` means the winner holds at least 35 points more of the evidence
/// than the runner-up: with two candidates roughly 2:1, with one candidate always.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouterConfig {
    /// Heuristic: minimal top1 − top2 gap for a hard metadata filter on the primary theme.
    pub heuristic_hard_filter_gap: f32,
    /// LLM: minimal confidence of the primary theme for a hard metadata filter.
    pub llm_hard_filter_min_score: f32,
    /// Themes whose score is within this gap of the top score are "close" (candidates for clarification).
    pub(crate) ambiguity_gap: f32,
    /// Extra weight per additional word of a multi-word keyword (a phrase is stronger evidence).
    pub(crate) phrase_bonus: f32,
    /// Evidence added to themes whose role (or section) equals `user_metadata.role`.
    pub(crate) user_role_weight: f32,
    /// Evidence added to themes whose platform equals `user_metadata.platform`.
    pub(crate) user_platform_weight: f32,
    /// Evidence added to themes whose id, domain or section equals `user_metadata.product`.
    pub(crate) user_product_weight: f32,
    /// At most this many themes are returned in `RoutingResult::themes`.
    pub(crate) max_themes: usize,
    /// A hard filter proposed by the router is applied only when this many best hits of the
    /// unfiltered search all belong to its theme (a keyword *mentioned* is not proof): with one
    /// hit, a passing mention filters out the page that answers; five is about never filtering.
    pub(crate) hard_filter_agreeing_hits: usize,
    /// A question that names no theme is ambiguous when its best hit is of a specific theme and
    /// the first this-many hits span at least two specific themes (themes with more than a domain).
    /// On the AdGuard dev questions: 5 → ambiguous flagged 0.82, clear wrongly flagged 0.10.
    pub(crate) ambiguity_top_hits: usize,
    /// ... and the best hit of the second theme scores at least this share of the first hit's
    /// score (0 = any split flags). Fitted out-of-fold by `eval` (docs/quality.md): a split whose
    /// second theme trails far behind is not a question that really splits across products.
    pub(crate) ambiguity_min_ratio: f32,
    /// Themes learned from an index: a question no keyword names names the theme its words give
    /// at least this probability over their pages' words (`ThemeSet::route_heuristic`), and is
    /// then not asked to clarify. Fitted out-of-fold by `eval` together with
    /// `ambiguity_min_ratio`.
    pub(crate) learned_named_probability: f32,
}

/// The default `ambiguity_min_ratio`.
pub(crate) const AMBIGUITY_MIN_RATIO: f32 = 0.82;

/// The default `learned_named_probability`: odds of 99 to 1.
pub(crate) const LEARNED_NAMED_PROBABILITY: f32 = 0.99;

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            heuristic_hard_filter_gap: 0.35,
            llm_hard_filter_min_score: 0.9,
            ambiguity_gap: 0.15,
            phrase_bonus: 0.5,
            user_role_weight: 0.5,
            user_platform_weight: 0.5,
            user_product_weight: 0.5,
            max_themes: 5,
            hard_filter_agreeing_hits: 3,
            ambiguity_top_hits: 5,
            ambiguity_min_ratio: AMBIGUITY_MIN_RATIO,
            learned_named_probability: LEARNED_NAMED_PROBABILITY,
        }
    }
}

impl RouterConfig {
    /// Every out-of-range value as a readable problem; empty when valid.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let unit = [
            ("heuristic_hard_filter_gap", self.heuristic_hard_filter_gap),
            ("llm_hard_filter_min_score", self.llm_hard_filter_min_score),
            ("ambiguity_gap", self.ambiguity_gap),
            ("ambiguity_min_ratio", self.ambiguity_min_ratio),
            ("learned_named_probability", self.learned_named_probability),
        ];
        for (name, value) in unit {
            if !(0.0..=1.0).contains(&value) {
                problems.push(format!("router.{name} must be within [0, 1], got {value}"));
            }
        }
        let weights = [
            ("phrase_bonus", self.phrase_bonus),
            ("user_role_weight", self.user_role_weight),
            ("user_platform_weight", self.user_platform_weight),
            ("user_product_weight", self.user_product_weight),
        ];
        for (name, value) in weights {
            if !(value.is_finite() && value >= 0.0) {
                problems.push(format!("router.{name} must be a finite number ≥ 0, got {value}"));
            }
        }
        if self.hard_filter_agreeing_hits < 1 || self.ambiguity_top_hits < 2 {
            problems.push("router.hard_filter_agreeing_hits must be ≥ 1 and router.ambiguity_top_hits ≥ 2".to_string());
        }
        if self.max_themes < 1 {
            problems.push("router.max_themes must be at least 1".to_string());
        }
        problems
    }
}
