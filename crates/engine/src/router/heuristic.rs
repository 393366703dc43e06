//! The heuristic router: keyword and phrase rules per theme over stemmed terms (Russian and
//! English), plus the user's role, platform and product.
//!
//! A keyword that belongs to one theme only is *discriminating*; a keyword several themes share is a
//! *topic* and its weight is split between them. Raw evidence is multiplied by the theme's priority
//! and normalised to shares that sum to 1, so `top1 − top2` is comparable across queries.

use super::RouterMode;
use super::{RouterConfig, RoutingResult, Theme, UserMetadata};
use crate::text;
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, BTreeSet};

/// One query or keyword word: its lower-cased form and its stem.
#[derive(Debug, Clone)]
struct Word {
    raw: String,
    stem: String,
}

/// Every word, function words included: a keyword phrase that has one («для сафари», the
/// product's own name) is matched word for word, so it stays apart from its bare noun («сафари»).
fn all_words(text: &str) -> Vec<Word> {
    text::tokenize(text).into_iter().map(|raw| Word { stem: text::stem(&raw), raw }).collect()
}

/// The words that are not function words.
fn content_words(all: &[Word]) -> Vec<Word> {
    all.iter().filter(|word| !text::is_stopword(&word.raw)).cloned().collect()
}

/// Same stem, or a Latin keyword followed only by digits ("ios17", "android14", "windows11").
fn word_matches(query: &Word, keyword: &Word) -> bool {
    if query.stem == keyword.stem {
        return true;
    }
    keyword.raw.chars().all(|c| c.is_ascii_alphabetic())
        && query.raw.len() > keyword.raw.len()
        && query.raw.starts_with(&keyword.raw)
        && query.raw[keyword.raw.len()..].chars().all(|c| c.is_ascii_digit())
}

fn phrase_occurs(query: &[Word], phrase: &[Word]) -> bool {
    !phrase.is_empty()
        && query.len() >= phrase.len()
        && query.windows(phrase.len()).any(|window| window.iter().zip(phrase).all(|(q, k)| word_matches(q, k)))
}

/// A keyword (by its stem sequence) and the themes that list it.
struct KeywordRule {
    phrase: Vec<Word>,
    /// The phrase has function words: it is matched against the query's words with theirs.
    with_stopwords: bool,
    themes: BTreeSet<usize>,
}

/// The keyword rules of a theme list, compiled (every keyword tokenized and stemmed) once when the
/// themes are loaded: stemming every keyword of every theme was the largest cost of a search.
#[derive(Default)]
pub(crate) struct KeywordRules {
    rules: Vec<KeywordRule>,
    /// Stem of a rule's first word → the rules starting with it (ascending).
    by_first_stem: HashMap<String, Vec<usize>>,
    /// First word of the rules whose first word is Latin letters only → those rules (ascending):
    /// "ios" also starts a phrase at the query word "ios17" (`word_matches`).
    by_first_letters: HashMap<String, Vec<usize>>,
}

impl KeywordRules {
    pub(crate) fn new(themes: &[Theme]) -> Self {
        let rules = keyword_rules(themes);
        let mut by_first_stem: HashMap<String, Vec<usize>> = HashMap::default();
        let mut by_first_letters: HashMap<String, Vec<usize>> = HashMap::default();
        for (number, rule) in rules.iter().enumerate() {
            let first = &rule.phrase[0];
            by_first_stem.entry(first.stem.clone()).or_default().push(number);
            if first.raw.chars().all(|c| c.is_ascii_alphabetic()) {
                by_first_letters.entry(first.raw.clone()).or_default().push(number);
            }
        }
        Self { rules, by_first_stem, by_first_letters }
    }

    /// The rules whose first word matches some word of `query` (`word_matches`), in rule order:
    /// only they can occur in it, and evidence is summed in rule order. A keyword phrase is
    /// matched against the query's content words or all its words; all of them are looked up.
    fn starting_in(&self, query: &[Word]) -> Vec<usize> {
        let mut numbers: Vec<usize> = Vec::new();
        for word in query {
            numbers.extend(self.by_first_stem.get(&word.stem).into_iter().flatten());
            let letters = word.raw.trim_end_matches(|c: char| c.is_ascii_digit());
            if letters.len() < word.raw.len() {
                numbers.extend(self.by_first_letters.get(letters).into_iter().flatten());
            }
        }
        numbers.sort_unstable();
        numbers.dedup();
        numbers
    }
}

fn keyword_rules(themes: &[Theme]) -> Vec<KeywordRule> {
    let mut by_stems: BTreeMap<Vec<String>, KeywordRule> = BTreeMap::new();
    for (index, theme) in themes.iter().enumerate() {
        for keyword in &theme.keywords {
            let every = all_words(keyword);
            let content = content_words(&every);
            if content.is_empty() {
                continue;
            }
            let with_stopwords = every.len() > content.len();
            let phrase = if with_stopwords { every } else { content };
            let stems: Vec<String> = phrase.iter().map(|word| word.stem.clone()).collect();
            by_stems
                .entry(stems)
                .or_insert_with(|| KeywordRule { phrase, with_stopwords, themes: BTreeSet::new() })
                .themes
                .insert(index);
        }
    }
    by_stems.into_values().collect()
}

fn same(wanted: Option<&str>, actual: Option<&str>) -> bool {
    match (wanted, actual) {
        (Some(wanted), Some(actual)) => !wanted.trim().is_empty() && wanted.trim().eq_ignore_ascii_case(actual),
        _ => false,
    }
}

/// Evidence the user's metadata gives `theme` (0 when nothing matches).
fn user_evidence(theme: &Theme, user: &UserMetadata, config: &RouterConfig) -> f32 {
    let mut evidence = 0.0;
    let role = user.role.as_deref();
    if same(role, theme.role.as_deref()) || same(role, theme.section.as_deref()) {
        evidence += config.user_role_weight;
    }
    if same(user.platform.as_deref(), theme.platform.as_deref()) {
        evidence += config.user_platform_weight;
    }
    let product = user.product.as_deref();
    if same(product, Some(theme.id.as_str()))
        || same(product, Some(theme.domain.as_str()))
        || same(product, theme.section.as_deref())
    {
        evidence += config.user_product_weight;
    }
    evidence
}

/// Theme indices with a positive score, best first; ties by priority (higher first) then id.
pub(super) fn rank(themes: &[Theme], scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..themes.len()).filter(|&index| scores[index] > 0.0).collect();
    order.sort_by(|&a, &b| {
        scores[b]
            .total_cmp(&scores[a])
            .then(themes[b].priority.total_cmp(&themes[a].priority))
            .then_with(|| themes[a].id.cmp(&themes[b].id))
    });
    order
}

/// Fills `themes`, `scores` and `primary_theme` from ranked indices. The primary theme is `None`
/// when the two best scores are tied: no theme is then preferred over the other.
pub(super) fn fill_ranking(
    result: &mut RoutingResult,
    order: &[usize],
    scores: &[f32],
    themes: &[Theme],
    max_themes: usize,
) {
    result.scores = order.iter().map(|&index| (themes[index].id.clone(), scores[index])).collect();
    result.themes = order.iter().take(max_themes).map(|&index| themes[index].id.clone()).collect();
    let tied = order.len() >= 2 && scores[order[0]] - scores[order[1]] < TIE_EPSILON;
    result.primary_theme = if tied { None } else { result.themes.first().cloned() };
}

const TIE_EPSILON: f32 = 1e-6;

/// Routes `query` by keyword rules and user metadata (mode `heuristic`).
///
/// - `scores`: shares of the evidence, summing to 1 over the matched themes.
/// - `requires_disambiguation`: at least two themes are within `ambiguity_gap` of the top and none of
///   them was named by a discriminating keyword or by the user's metadata (the query hits a topic
///   several themes share). Two themes the query names explicitly are a multi-theme question, not
///   an ambiguity.
/// - `hard_filter`: only when `top1 − top2 ≥ heuristic_hard_filter_gap`, the primary theme was named
///   by a discriminating keyword (user metadata alone never filters) and no clarification is needed.
///
/// This compiles the themes' keyword rules first: to route many queries over the same themes, use
/// `ThemeSet::route_heuristic`, which compiles them once (the service does, when it loads them).
pub fn route_heuristic(
    query: &str,
    user_metadata: Option<&UserMetadata>,
    themes: &[Theme],
    config: &RouterConfig,
) -> RoutingResult {
    route_with_rules(query, user_metadata, themes, &KeywordRules::new(themes), config)
}

/// `route_heuristic` with `rules` compiled from `themes` beforehand (`KeywordRules::new`).
pub(crate) fn route_with_rules(
    query: &str,
    user_metadata: Option<&UserMetadata>,
    themes: &[Theme],
    rules: &KeywordRules,
    config: &RouterConfig,
) -> RoutingResult {
    let query_all_words = all_words(query);
    let query_words = content_words(&query_all_words);
    let mut keyword_evidence = vec![0.0_f32; themes.len()];
    let mut named_by_keyword = vec![false; themes.len()];
    for rule in rules.starting_in(&query_all_words).into_iter().map(|number| &rules.rules[number]) {
        let searched = if rule.with_stopwords { &query_all_words } else { &query_words };
        if !phrase_occurs(searched, &rule.phrase) {
            continue;
        }
        let weight = 1.0 + config.phrase_bonus * (rule.phrase.len() - 1) as f32;
        let share = weight / rule.themes.len() as f32;
        for &index in &rule.themes {
            keyword_evidence[index] += share;
            named_by_keyword[index] |= rule.themes.len() == 1;
        }
    }
    let user_evidence: Vec<f32> =
        themes.iter().map(|theme| user_metadata.map_or(0.0, |user| user_evidence(theme, user, config))).collect();
    let raw: Vec<f32> = themes
        .iter()
        .enumerate()
        .map(|(index, theme)| (keyword_evidence[index] + user_evidence[index]) * theme.priority)
        .collect();
    let total: f32 = raw.iter().sum();
    let mut result = RoutingResult::empty(RouterMode::Heuristic);
    if total <= 0.0 {
        return result;
    }
    let scores: Vec<f32> = raw.iter().map(|value| value / total).collect();
    let order = rank(themes, &scores);
    let top = scores[order[0]];
    let second = order.get(1).map_or(0.0, |&index| scores[index]);
    let close: Vec<usize> =
        order.iter().copied().filter(|&index| scores[index] >= top - config.ambiguity_gap).collect();
    result.requires_disambiguation =
        close.len() >= 2 && close.iter().all(|&index| !named_by_keyword[index] && user_evidence[index] <= 0.0);
    if top - second >= config.heuristic_hard_filter_gap && named_by_keyword[order[0]] && !result.requires_disambiguation
    {
        result.hard_filter = Some(themes[order[0]].fields());
    }
    result.named_themes = order
        .iter()
        .filter(|&&index| named_by_keyword[index] || user_evidence[index] > 0.0)
        .map(|&index| themes[index].id.clone())
        .collect();
    fill_ranking(&mut result, &order, &scores, themes, config.max_themes);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn theme(id: &str, platform: &str, keywords: &[&str]) -> Theme {
        Theme {
            id: id.into(),
            display_name: id.into(),
            domain: "docs".into(),
            section: None,
            platform: Some(platform.into()),
            role: None,
            description: String::new(),
            keywords: keywords.iter().map(|k| k.to_string()).collect(),
            priority: 1.0,
        }
    }

    fn themes() -> Vec<Theme> {
        vec![
            theme("android", "android", &["android", "андроид", "gradle", "сертификат"]),
            theme("ios", "ios", &["ios", "айфон", "сертификат"]),
            theme("windows", "windows", &["windows", "сертификат", "установщик windows"]),
        ]
    }

    fn route(query: &str) -> RoutingResult {
        route_heuristic(query, None, &themes(), &RouterConfig::default())
    }

    #[test]
    fn inflected_russian_and_english_hit_the_same_theme() {
        for query in ["на андроиде", "Android", "андроид", "android14 gradle"] {
            let result = route(query);
            assert_eq!(result.primary_theme.as_deref(), Some("android"), "{query}");
            assert!(result.hard_filter.is_some(), "{query}");
        }
    }

    #[test]
    fn shared_topic_without_platform_needs_clarification() {
        let result = route("как установить сертификат?");
        assert_eq!(result.themes.len(), 3);
        assert!(result.requires_disambiguation);
        assert!(result.hard_filter.is_none());
        let sum: f32 = result.scores.values().sum();
        assert!((sum - 1.0).abs() < 1e-5);
    }

    #[test]
    fn platform_word_resolves_a_shared_topic() {
        let result = route("сертификат на айфоне");
        assert_eq!(result.primary_theme.as_deref(), Some("ios"));
        assert!(!result.requires_disambiguation);
        assert!(result.hard_filter.is_some());
    }

    #[test]
    fn phrase_must_be_contiguous_and_outweighs_a_word() {
        let result = route("установщик windows");
        assert_eq!(result.scores["windows"], 1.0);
        assert_eq!(route("windows").scores["windows"], 1.0);
        let split = route("установщик для сертификат windows");
        assert!(split.scores["windows"] < 1.0);
    }

    #[test]
    fn two_named_themes_are_a_multi_theme_question() {
        let result = route("android и ios");
        assert_eq!(result.themes, vec!["android".to_string(), "ios".to_string()]);
        assert_eq!(result.primary_theme, None, "a tie prefers neither");
        assert!(!result.requires_disambiguation);
        assert!(result.hard_filter.is_none());
    }

    #[test]
    fn user_platform_tips_the_balance_but_never_filters_alone() {
        let user = UserMetadata { platform: Some("ios".into()), ..UserMetadata::default() };
        let config = RouterConfig::default();
        let tipped = route_heuristic("как установить сертификат", Some(&user), &themes(), &config);
        assert_eq!(tipped.primary_theme.as_deref(), Some("ios"));
        assert!(!tipped.requires_disambiguation);
        assert!(tipped.hard_filter.is_none());
        let alone = route_heuristic("что нового", Some(&user), &themes(), &config);
        assert_eq!(alone.primary_theme.as_deref(), Some("ios"));
        assert!(alone.hard_filter.is_none());
    }

    #[test]
    fn a_keyword_phrase_with_a_function_word_names_its_theme_apart_from_the_bare_noun() {
        let themes = vec![
            theme("ios", "ios", &["айфон", "сафари"]),
            theme("mac", "mac", &["мак", "сафари"]),
            theme("safari", "safari", &["для сафари", "сафари"]),
        ];
        let config = RouterConfig::default();
        let named = route_heuristic("адгард для сафари режет рекламу?", None, &themes, &config);
        assert_eq!(named.primary_theme.as_deref(), Some("safari"));
        assert!(named.named() && !named.requires_disambiguation);
        assert_eq!(named.named_themes, ["safari"], "«сафари» alone names no theme");
        let bare = route_heuristic("реклама в сафари", None, &themes, &config);
        assert_eq!(bare.primary_theme, None, "«сафари» alone is shared by three themes");
        assert!(bare.requires_disambiguation);
        let apart = route_heuristic("для браузера сафари", None, &themes, &config);
        assert_ne!(apart.primary_theme.as_deref(), Some("safari"), "the phrase must be contiguous");
    }

    #[test]
    fn the_rule_index_finds_every_rule_a_full_scan_finds() {
        let themes = vec![
            theme("android", "android", &["android", "андроид", "gradle", "сертификат", "для андроида"]),
            theme("ios", "ios", &["ios", "айфон", "сертификат", "ios app", "safari 17"]),
            theme("windows", "windows", &["windows", "установщик windows", "для windows 11"]),
        ];
        let rules = KeywordRules::new(&themes);
        for query in [
            "сертификат на айфоне",
            "ios17 и android14 gradle",
            "ios app для windows 11",
            "safari 17",
            "установщик windows для андроида",
            "17 ios",
            "ничего",
            "",
        ] {
            let words = all_words(query);
            let content = content_words(&words);
            let scanned: Vec<usize> = (0..rules.rules.len())
                .filter(|&number| {
                    let rule = &rules.rules[number];
                    phrase_occurs(if rule.with_stopwords { &words } else { &content }, &rule.phrase)
                })
                .collect();
            let indexed: Vec<usize> = rules
                .starting_in(&words)
                .into_iter()
                .filter(|&number| {
                    let rule = &rules.rules[number];
                    phrase_occurs(if rule.with_stopwords { &words } else { &content }, &rule.phrase)
                })
                .collect();
            assert_eq!(indexed, scanned, "{query}");
            assert_eq!(scanned.is_empty(), ["ничего", ""].contains(&query), "{query}: {scanned:?}");
        }
        assert!(!rules.starting_in(&all_words("ios17")).is_empty(), "a digit suffix keeps the rule");
    }

    #[test]
    fn nothing_matched_gives_an_empty_result() {
        let result = route("расскажи анекдот");
        assert!(result.themes.is_empty() && result.primary_theme.is_none() && !result.requires_disambiguation);
        assert_eq!(result.mode_used, RouterMode::Heuristic);
    }
}
