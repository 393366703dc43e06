//! `ThemeSet`: a theme list as the service routes over it, with its keyword rules compiled once.

use super::{heuristic, learned, KeywordRules, RouterConfig, RouterMode, RoutingResult, Theme, UserMetadata};

/// A theme list as the service routes over it: the themes, and their keyword rules compiled once
/// (not per request). Reads as the slice of themes.
#[derive(Default)]
pub struct ThemeSet {
    themes: Vec<Theme>,
    rules: KeywordRules,
    /// Themes learned from an index: every word of their areas' pages, for routing.
    area_words: Option<learned::AreaWords>,
}

impl ThemeSet {
    pub fn new(themes: Vec<Theme>) -> Self {
        let rules = KeywordRules::new(&themes);
        Self { themes, rules, area_words: None }
    }

    /// Themes learned from an index (`learned::learn_routing`), `area_words` in their order.
    pub(crate) fn learned(themes: Vec<Theme>, area_words: learned::AreaWords) -> Self {
        Self { area_words: Some(area_words), ..Self::new(themes) }
    }

    /// `route_heuristic` over these themes, with the rules compiled once for all queries.
    ///
    /// Learned themes: when neither a keyword only one theme lists nor the user's metadata names
    /// a theme, the themes are ranked by the question's words over all of their pages' words
    /// instead (their probabilities are the scores); the most probable is named when it has at
    /// least `router.learned_named_probability`. No hard filter comes of it.
    pub fn route_heuristic(
        &self,
        query: &str,
        user_metadata: Option<&UserMetadata>,
        config: &RouterConfig,
    ) -> RoutingResult {
        let by_rules = heuristic::route_with_rules(query, user_metadata, &self.themes, &self.rules, config);
        let Some(area_words) = &self.area_words else { return by_rules };
        if !by_rules.named_themes.is_empty() {
            return by_rules;
        }
        let Some(posterior) = area_words.posterior(query).filter(|p| p.len() == self.themes.len()) else {
            return by_rules;
        };
        let scores: Vec<f32> = posterior.iter().map(|&p| p as f32).collect();
        let order = heuristic::rank(&self.themes, &scores);
        let mut result = RoutingResult::empty(RouterMode::Heuristic);
        heuristic::fill_ranking(&mut result, &order, &scores, &self.themes, config.max_themes);
        if let Some(&best) = order.first() {
            result.words_probability = Some(posterior[best] as f32);
            if posterior[best] >= f64::from(config.learned_named_probability) {
                result.named_themes.push(self.themes[best].id.clone());
            }
        }
        result
    }
}

impl std::ops::Deref for ThemeSet {
    type Target = [Theme];

    fn deref(&self) -> &[Theme] {
        &self.themes
    }
}
