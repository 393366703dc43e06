//! Theme router (seed 003 §3–4): decides which themes a query is about before the cascade runs,
//! whether the search may be hard-filtered to one theme, and whether the user should be asked to
//! choose; plus the theme-aware pieces after the search (hit labels, clarification, LLM context).
//!
//! Everything here is pure except `LlmRouter`, whose call is bounded by a timeout and falls back to
//! the heuristic, so routing never blocks or fails a search.

mod config;
pub(crate) mod context_format;
pub(crate) mod disambiguation;
pub(crate) mod heuristic;
pub(crate) mod label;
pub(crate) mod learned;
pub(crate) mod llm;
pub(crate) mod mode;
pub(crate) mod themes;

pub use config::RouterConfig;
pub(crate) use config::LEARNED_NAMED_PROBABILITY;
pub(crate) use context_format::FormattedContext;
pub use context_format::{format_context, ContextSource, MULTI_THEME_RULE};
pub use disambiguation::{build_clarification, Clarification, ClarificationOption};
pub use heuristic::route_heuristic;
pub(crate) use heuristic::KeywordRules;
pub use label::infer_theme_label;
pub(crate) use label::ThemeLabels;
pub use llm::LlmRouter;
pub use mode::RouterMode;
pub use themes::{parse_themes_yaml, Theme, ThemesFile, ThemesProvider, YamlThemesProvider};

use crate::index::RecordFilter;
use crate::model::Metadata;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// What the caller knows about the user (request field `user_metadata`); every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserMetadata {
    pub role: Option<String>,
    pub product: Option<String>,
    pub platform: Option<String>,
}

/// The topic metadata fields of a theme; `None` means "any value".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ThemeFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) domain: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) section: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<String>,
}

/// `ThemeFields` borrowed from where they are kept (a theme, a routing hint): what matching reads,
/// without copying strings for every record matched.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FieldsView<'a> {
    pub(crate) domain: Option<&'a str>,
    pub(crate) section: Option<&'a str>,
    pub(crate) platform: Option<&'a str>,
    pub(crate) role: Option<&'a str>,
}

impl FieldsView<'_> {
    /// The fields as an owned `ThemeFields` (a routing result, a filter).
    pub(crate) fn to_fields(self) -> ThemeFields {
        ThemeFields {
            domain: self.domain.map(str::to_string),
            section: self.section.map(str::to_string),
            platform: self.platform.map(str::to_string),
            role: self.role.map(str::to_string),
        }
    }

    /// How many fields are set: the more, the more specific the theme.
    pub(crate) fn specificity(&self) -> usize {
        [self.domain, self.section, self.platform, self.role].iter().filter(|field| field.is_some()).count()
    }

    /// True when every set field equals the record's value (ASCII case-insensitive).
    pub(crate) fn matches(&self, meta: &Metadata) -> bool {
        let equal = |wanted: Option<&str>, actual: &str| {
            wanted.is_none_or(|wanted| wanted.eq_ignore_ascii_case(trimmed(actual)))
        };
        equal(self.domain, &meta.domain)
            && equal(self.section, &meta.section)
            && equal(self.platform, &meta.platform)
            && equal(self.role, &meta.role)
    }
}

impl ThemeFields {
    pub(crate) fn view(&self) -> FieldsView<'_> {
        FieldsView {
            domain: self.domain.as_deref(),
            section: self.section.as_deref(),
            platform: self.platform.as_deref(),
            role: self.role.as_deref(),
        }
    }

    /// True when the record is of another platform than the one this theme sets. A record of
    /// no platform (a page for every product) never conflicts; roles and sections never do (a
    /// role mentioned in a question is not the role asking it).
    pub(crate) fn conflicts(&self, meta: &Metadata) -> bool {
        let actual = trimmed(&meta.platform);
        self.platform.as_deref().is_some_and(|wanted| !actual.is_empty() && !wanted.eq_ignore_ascii_case(actual))
    }

    /// True when every set field equals the record's value (ASCII case-insensitive).
    pub(crate) fn matches(&self, meta: &Metadata) -> bool {
        self.view().matches(meta)
    }

    /// Narrows `filter` to this theme: every set field overwrites the filter's condition.
    pub fn apply_to(&self, filter: &mut RecordFilter) {
        for (wanted, condition) in [
            (&self.domain, &mut filter.domain),
            (&self.section, &mut filter.section),
            (&self.platform, &mut filter.platform),
            (&self.role, &mut filter.role),
        ] {
            if let Some(value) = wanted {
                *condition = Some(value.clone());
            }
        }
    }
}

/// One theme's wanted domain, section, platform and role as topic numbers of one index
/// (`index::features::TopicTable`): `None` any value, `Some(None)` a value no record has,
/// `Some(Some(n))` the value numbered `n`. Matching the `RecordFeatures::topics` of a record of
/// that index then compares four numbers, not four strings.
pub(crate) struct TopicFields([Option<Option<u32>>; 4]);

impl TopicFields {
    pub(crate) fn of(fields: FieldsView<'_>, table: &crate::index::features::TopicTable) -> Self {
        Self(
            [fields.domain, fields.section, fields.platform, fields.role]
                .map(|wanted| wanted.map(|value| table.number(value))),
        )
    }

    /// `FieldsView::matches` on the record's numbers.
    pub(crate) fn matches(&self, topics: &[u32; 4]) -> bool {
        self.0.iter().zip(topics).all(|(wanted, &actual)| wanted.is_none_or(|wanted| wanted == Some(actual)))
    }

    /// `ThemeFields::conflicts`: another platform than the one wanted, when the record has one.
    pub(crate) fn conflicts(&self, topics: &[u32; 4]) -> bool {
        let actual = topics[2];
        self.0[2].is_some_and(|wanted| actual != 0 && wanted != Some(actual))
    }
}

/// A stored metadata value without surrounding blanks. Stored values are normally trimmed: an
/// ASCII non-space at both ends needs no trim.
fn trimmed(value: &str) -> &str {
    let plain = |byte: Option<&u8>| byte.is_some_and(|b| b.is_ascii() && !b.is_ascii_whitespace());
    let bytes = value.as_bytes();
    if plain(bytes.first()) && plain(bytes.last()) {
        value
    } else {
        value.trim()
    }
}

/// The router's answer (seed 003 §3.3).
///
/// `themes` are ordered by score (best first, ties by priority then id); `primary_theme` is
/// `themes[0]`, or `None` when nothing matched or the two best scores are tied (the soft theme boost
/// then gives every one of the first themes the secondary amount). `hard_filter` is set only at very high confidence and then holds the primary theme's
/// fields; otherwise routing is a soft signal. `mode_used` is the mode that produced the answer
/// (`heuristic` when `llm` failed), and `degradation` says why it differs from the requested mode.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RoutingResult {
    pub themes: Vec<String>,
    pub primary_theme: Option<String>,
    pub scores: BTreeMap<String, f32>,
    pub requires_disambiguation: bool,
    pub mode_used: RouterMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hard_filter: Option<ThemeFields>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degradation: Option<String>,
    /// The themes the question itself (a keyword only one theme lists) or the user's metadata
    /// named (the LLM router: those it is sure of), best first.
    #[serde(skip)]
    pub(crate) named_themes: Vec<String>,
    /// Learned themes ranked by the question's words (no keyword named one): the best one's
    /// probability. `None` when the rules decided.
    #[serde(skip)]
    pub(crate) words_probability: Option<f32>,
}

impl RoutingResult {
    /// No themes, no filter: what mode `none` (or an empty themes list) produces.
    pub(crate) fn empty(mode_used: RouterMode) -> Self {
        Self {
            themes: Vec::new(),
            primary_theme: None,
            scores: BTreeMap::new(),
            requires_disambiguation: false,
            named_themes: Vec::new(),
            words_probability: None,
            mode_used,
            hard_filter: None,
            degradation: None,
        }
    }

    /// True when the best theme was named (`named_themes`); a question that names no theme may
    /// be ambiguous when its hits split.
    pub fn named(&self) -> bool {
        self.themes.first().is_some_and(|best| self.named_themes.contains(best))
    }

    /// `named`, by a keyword or the user's metadata (not by the question's words over learned
    /// themes' pages).
    pub(crate) fn named_by_rules(&self) -> bool {
        self.named() && self.words_probability.is_none()
    }
}

/// Routes `query` in `mode` over `themes`. Never fails: with no themes the result is empty (mode
/// `none`); in mode `llm` a missing `llm` client or any LLM failure falls back to the heuristic and
/// says so in `degradation`. The LLM call is bounded by the client's timeout.
pub async fn route_query(
    query: &str,
    user_metadata: Option<&UserMetadata>,
    themes: &ThemeSet,
    mode: RouterMode,
    config: &RouterConfig,
    llm: Option<&LlmRouter>,
) -> RoutingResult {
    if themes.is_empty() {
        let mut result = RoutingResult::empty(RouterMode::None);
        if mode != RouterMode::None {
            result.degradation = Some("no themes configured: theme routing skipped".to_string());
        }
        return result;
    }
    let by_rules = || themes.route_heuristic(query, user_metadata, config);
    match mode {
        RouterMode::None => RoutingResult::empty(RouterMode::None),
        RouterMode::Heuristic => by_rules(),
        RouterMode::Llm => {
            let Some(llm) = llm else {
                let mut result = by_rules();
                result.degradation = Some("llm router not configured: heuristic routing used".to_string());
                return result;
            };
            match llm.route(query, user_metadata, themes, config).await {
                Ok(result) => result,
                Err(error) => {
                    tracing::warn!(kind = ?error.kind, error = %error, "llm theme routing failed, using heuristic");
                    let mut result = by_rules();
                    result.degradation = Some(format!("llm router failed ({error}): heuristic routing used"));
                    result
                }
            }
        }
    }
}
