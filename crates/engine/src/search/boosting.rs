//! Boosting of fused scores by the docs' metadata: ten rules in a fixed order, every coefficient
//! from `BoostingConfig`. `keep_best` (through `boost_and_keep_best` and
//! `sort_best_first`) is the one place where boosted hits are sorted.

pub(crate) use crate::index::features::url_depth;
use crate::index::features::{BoostCacheKey, BOOST_RULES};
use crate::index::{keep_first_sorted_by, RecordFeatures};
use crate::model::Metadata;
use crate::router::{ThemeFields, TopicFields};
use crate::search::boosting_config::{BoostingConfig, MatchRule};
use serde::Serialize;
use std::collections::BTreeMap;

/// What the router suggests: the primary theme and the following ones, best first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RoutingHint {
    pub(crate) primary: Option<ThemeFields>,
    pub(crate) secondary: Vec<ThemeFields>,
    /// The question itself (a keyword only that theme lists) or the user's metadata named the
    /// primary theme.
    pub(crate) named: bool,
}

/// Per-request context of boosting: the router's hint and request-level group boosts (label →
/// factor), which override `group_boosts` of the config for the same label.
#[derive(Debug, Clone, Default)]
pub struct BoostContext {
    pub routing: Option<RoutingHint>,
    pub group_boosts: BTreeMap<String, f32>,
    /// Names the boosting config when it never changes (the `SearchService`'s): records then keep
    /// the factors of their config-only rules between requests. `None`: computed every time.
    pub config_key: Option<BoostCacheKey>,
    /// The topic table of the index the hits come from: with it, the routing hint is matched on
    /// the hits' topic numbers; without, on their metadata strings.
    pub topics: Option<std::sync::Arc<crate::index::features::TopicTable>>,
}

/// What boosting reads of a hit. `text` is optional: without it the structure rule has no effect.
/// `features`, when given, must be `RecordFeatures::of` the same record: the rules then read the
/// facts derived once at load instead of lower-casing and scanning on every request.
///
/// The fields are references into the record, taken without reading it: a candidate's metadata
/// and text are read only by a rule that needs them (with cached factors, none), so boosting a
/// list does not load each record from memory. (`text` is a `&String`, not a `&str`, for that:
/// making a `&str` reads the string's pointer and length out of the record.)
#[derive(Debug, Clone, Copy)]
pub struct BoostInput<'a> {
    pub(crate) meta: &'a Metadata,
    pub(crate) text: Option<&'a str>,
    pub(crate) features: Option<&'a RecordFeatures>,
}

/// The ten boosting rules, in application order (`explain.boosts` lists them in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum BoostRule {
    PageType,
    SectionPlatform,
    Theme,
    Group,
    UrlPattern,
    TitleKeyword,
    Length,
    Structure,
    Source,
    DepthPenalty,
}

impl BoostRule {
    pub(crate) const ORDER: [BoostRule; BOOST_RULES] = [
        BoostRule::PageType,
        BoostRule::SectionPlatform,
        BoostRule::Theme,
        BoostRule::Group,
        BoostRule::UrlPattern,
        BoostRule::TitleKeyword,
        BoostRule::Length,
        BoostRule::Structure,
        BoostRule::Source,
        BoostRule::DepthPenalty,
    ];
}

/// How one rule changed the score: `Multiply(1.0)` and `Add(0.0)` mean it had no effect.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum BoostEffect {
    Multiply(f32),
    Add(f32),
}

#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct BoostOutcome {
    pub(crate) score: f32,
    /// One entry per rule, in `BoostRule::ORDER`.
    pub(crate) factors: [(BoostRule, BoostEffect); BoostRule::ORDER.len()],
}

/// A `BoostOutcome`'s effects in `BoostRule::ORDER`, a quarter of its size: the theme rule's slot
/// holds its addend, every other slot a factor. Candidates carry this through sorting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoostFactors([f32; BOOST_RULES]);

impl BoostFactors {
    pub(crate) fn effects(&self) -> [(BoostRule, BoostEffect); BOOST_RULES] {
        std::array::from_fn(|slot| match BoostRule::ORDER[slot] {
            BoostRule::Theme => (BoostRule::Theme, BoostEffect::Add(self.0[slot])),
            rule => (rule, BoostEffect::Multiply(self.0[slot])),
        })
    }
}

fn lookup(map: &BTreeMap<String, f32>, key: &str) -> f32 {
    if key.is_empty() || map.is_empty() {
        return 1.0;
    }
    // Metadata values are normally already trimmed lower-case: look them up without allocating.
    if let Some(factor) = find(map, key) {
        return factor;
    }
    if is_trimmed_lower_case(key) {
        return 1.0;
    }
    find(map, &key.trim().to_lowercase()).unwrap_or(1.0)
}

/// `map.get(key)`; a small map is scanned comparing lengths first, which spares most string
/// comparisons (the maps of `boosting.yaml` have a handful of keys).
fn find(map: &BTreeMap<String, f32>, key: &str) -> Option<f32> {
    if map.len() <= 16 {
        // Byte by byte: these keys are a few bytes long, shorter than a call to memcmp.
        let equal = |name: &str| name.len() == key.len() && name.bytes().zip(key.bytes()).all(|(a, b)| a == b);
        map.iter().find(|(name, _)| equal(name)).map(|(_, &factor)| factor)
    } else {
        map.get(key).copied()
    }
}

/// Whether `key.trim().to_lowercase() == key`, without allocating. `str::to_lowercase` maps each
/// character by `char::to_lowercase` except a final capital sigma, which is not its own lower case.
fn is_trimmed_lower_case(key: &str) -> bool {
    key.trim().len() == key.len()
        && key.chars().all(|c| {
            if c.is_ascii() {
                !c.is_ascii_uppercase()
            } else {
                let mut lower = c.to_lowercase();
                lower.next() == Some(c) && lower.next().is_none()
            }
        })
}

/// `lowered` is `haystack` already lower-cased, when known.
fn match_rules(rules: &[MatchRule], haystack: &str, lowered: Option<&str>) -> f32 {
    if haystack.is_empty() || rules.is_empty() {
        return 1.0;
    }
    let owned;
    let haystack = match lowered {
        Some(lowered) => lowered,
        None => {
            owned = haystack.to_lowercase();
            owned.as_str()
        }
    };
    // A rule whose boost is 1.0 cannot change the product: its needles are not searched.
    rules
        .iter()
        .filter(|rule| rule.boost != 1.0 && rule.needles.iter().any(|n| haystack.contains(n.as_str())))
        .map(|rule| rule.boost)
        .product()
}

fn theme_addend(
    cfg: &BoostingConfig,
    ctx: &BoostContext,
    meta: &Metadata,
    hint: Option<(&TopicHint, &[u32; 4])>,
) -> f32 {
    let Some(routing) = &ctx.routing else {
        return 0.0;
    };
    let count = cfg.theme_boosts.secondary_count;
    let (primary, secondary, conflicts) = match hint {
        Some((hint, topics)) => (
            hint.primary.as_ref().is_some_and(|theme| theme.matches(topics)),
            hint.secondary.iter().take(count).any(|theme| theme.matches(topics)),
            routing.named && hint.primary.as_ref().is_some_and(|theme| theme.conflicts(topics)),
        ),
        None => (
            routing.primary.as_ref().is_some_and(|theme| theme.matches(meta)),
            routing.secondary.iter().take(count).any(|theme| theme.matches(meta)),
            routing.named && routing.primary.as_ref().is_some_and(|theme| theme.conflicts(meta)),
        ),
    };
    if primary {
        cfg.theme_boosts.primary
    } else if secondary {
        cfg.theme_boosts.secondary
    } else if conflicts {
        -cfg.theme_boosts.conflicting
    } else {
        0.0
    }
}

/// A routing hint's themes as topic numbers of the hits' index (`BoostContext::topics`), made once per
/// boosted list: matching a candidate then compares four numbers, not four strings.
struct TopicHint {
    primary: Option<TopicFields>,
    secondary: Vec<TopicFields>,
}

impl TopicHint {
    fn of(hint: &RoutingHint, table: &crate::index::features::TopicTable) -> Self {
        Self {
            primary: hint.primary.as_ref().map(|fields| TopicFields::of(fields.view(), table)),
            secondary: hint.secondary.iter().map(|fields| TopicFields::of(fields.view(), table)).collect(),
        }
    }
}

/// Group labels are the record's tags; each distinct label with a factor multiplies once.
fn group_factor(cfg: &BoostingConfig, ctx: &BoostContext, meta: &Metadata, features: Option<&RecordFeatures>) -> f32 {
    // With features, whether there are labels is known without reading the record's metadata
    // (a cache miss per candidate) or the label list.
    let owned;
    let labels = match features {
        Some(features) => match features.labels() {
            Some(labels) => labels,
            None => return 1.0,
        },
        None if meta.tags.is_empty() => return 1.0,
        None => {
            let mut labels: Vec<String> = meta.tags.iter().map(|tag| tag.trim().to_lowercase()).collect();
            labels.sort();
            labels.dedup();
            owned = labels;
            owned.as_slice()
        }
    };
    labels
        .iter()
        .map(|label| {
            ctx.group_boosts
                .iter()
                .find(|(name, _)| name.trim().to_lowercase() == *label)
                .map(|(_, &factor)| if factor.is_finite() && factor > 0.0 { factor } else { 1.0 })
                .unwrap_or_else(|| lookup(&cfg.group_boosts, label))
        })
        .product()
}

fn length_factor(cfg: &BoostingConfig, content_length: u32) -> f32 {
    let (Some(min), Some(max)) = (cfg.length.optimal_min, cfg.length.optimal_max) else {
        return 1.0;
    };
    if content_length > max {
        cfg.length.long_boost
    } else if content_length >= min {
        cfg.length.optimal_boost
    } else {
        1.0
    }
}

/// Well-structured markers count at the start of a line (a Markdown heading or list item);
/// example markers count as whole words, so "как" does not fire on "какой".
fn structure_factor(cfg: &BoostingConfig, text: Option<&str>, features: Option<&RecordFeatures>) -> f32 {
    let Some(text) = text else { return 1.0 };
    let structure = &cfg.structure;
    let mut factor = 1.0;
    let line_starts_with = |marker: &str| {
        features
            .and_then(|features| features.line_starts_with(marker))
            .unwrap_or_else(|| text.lines().map(str::trim_start).any(|line| line.starts_with(marker)))
    };
    // A factor of 1.0 has no effect: skip the scan (the text of every candidate, every query).
    let structured = structure.well_structured_boost != 1.0
        && structure.well_structured_markers.iter().any(|marker| line_starts_with(marker));
    if structured {
        factor *= structure.well_structured_boost;
    }
    if !structure.example_markers.is_empty() && structure.example_boost != 1.0 {
        let words: Vec<String> = crate::text::tokenize(text);
        let has_example = structure.example_markers.iter().any(|marker| {
            let marker_words = crate::text::tokenize(marker);
            !marker_words.is_empty()
                && words.windows(marker_words.len()).any(|window| window == marker_words.as_slice())
        });
        if has_example {
            factor *= structure.example_boost;
        }
    }
    factor
}

fn depth_factor(cfg: &BoostingConfig, url: &str, depth: Option<u32>) -> f32 {
    match cfg.depth_penalty.min_depth {
        Some(min_depth) if !url.is_empty() && depth.unwrap_or_else(|| url_depth(url)) >= min_depth => {
            cfg.depth_penalty.factor
        }
        Some(_) | None => 1.0,
    }
}

/// The factors of the rules that read only the record and the config, in `BoostRule::ORDER`
/// (1.0 in the slots of the rules that read the request).
fn config_factors(cfg: &BoostingConfig, hit: &BoostInput<'_>) -> [f32; BOOST_RULES] {
    let (meta, features) = (hit.meta, hit.features);
    BoostRule::ORDER.map(|rule| match rule {
        BoostRule::PageType => lookup(&cfg.page_type_boosts, &meta.page_type),
        BoostRule::SectionPlatform => {
            lookup(&cfg.section_boosts, &meta.section) * lookup(&cfg.platform_boosts, &meta.platform)
        }
        BoostRule::UrlPattern => match_rules(&cfg.url_patterns, &meta.url, features.map(|f| &*f.url_lower)),
        BoostRule::TitleKeyword => match_rules(&cfg.title_keywords, &meta.title, features.map(|f| &*f.title_lower)),
        BoostRule::Length => length_factor(cfg, meta.content_length),
        BoostRule::Structure => structure_factor(cfg, hit.text, features),
        BoostRule::Source => lookup(&cfg.source_boosts, &meta.source),
        BoostRule::DepthPenalty => depth_factor(cfg, &meta.url, features.map(|f| f.url_depth)),
        BoostRule::Theme | BoostRule::Group => 1.0,
    })
}

/// Applies the ten rules to `base` (the normalised fused score) in `BoostRule::ORDER`:
/// multiplicative rules multiply the running score, the theme rule adds to it. With
/// `BoostingConfig::default()` and an empty context the score is returned unchanged. The factors
/// of the config-only rules come from the record's cache when `ctx.config_key` names the config.
#[cfg(test)]
pub(crate) fn boost_score(base: f32, hit: &BoostInput<'_>, cfg: &BoostingConfig, ctx: &BoostContext) -> BoostOutcome {
    let (score, factors) = boost_factors(base, hit, cfg, ctx);
    BoostOutcome { score, factors: factors.effects() }
}

/// `boost_score` as the cascade keeps it: the boosted score and each rule's effect by slot.
#[cfg(test)]
pub(crate) fn boost_factors(
    base: f32,
    hit: &BoostInput<'_>,
    cfg: &BoostingConfig,
    ctx: &BoostContext,
) -> (f32, BoostFactors) {
    boost_factors_with(base, hit, cfg, ctx, None)
}

/// `boost_factors` with the routing hint already as topic numbers (used when the hit has features).
fn boost_factors_with(
    base: f32,
    hit: &BoostInput<'_>,
    cfg: &BoostingConfig,
    ctx: &BoostContext,
    hint: Option<&TopicHint>,
) -> (f32, BoostFactors) {
    let meta = hit.meta;
    let topics = hint.zip(hit.features.map(|features| &features.topics));
    let mut values = match (ctx.config_key, hit.features) {
        (Some(key), Some(features)) => features.config_boosts(key, || config_factors(cfg, hit)),
        _ => config_factors(cfg, hit),
    };
    let mut score = base;
    for (value, rule) in values.iter_mut().zip(BoostRule::ORDER) {
        match rule {
            BoostRule::Theme => {
                *value = theme_addend(cfg, ctx, meta, topics);
                score += *value;
            }
            BoostRule::Group => {
                *value = group_factor(cfg, ctx, meta, hit.features);
                score *= *value;
            }
            BoostRule::PageType
            | BoostRule::SectionPlatform
            | BoostRule::UrlPattern
            | BoostRule::TitleKeyword
            | BoostRule::Length
            | BoostRule::Structure
            | BoostRule::Source
            | BoostRule::DepthPenalty => score *= *value,
        }
    }
    (score, BoostFactors(values))
}

/// A hit the cascade can boost: it exposes its id, base score and metadata, and stores the outcome.
pub trait Boostable {
    fn id(&self) -> &str;
    /// The normalised fused score boosting starts from.
    fn base_score(&self) -> f32;
    fn boost_input(&self) -> BoostInput<'_>;
    /// Stores the boosted score and the rules' effects.
    fn set_boost(&mut self, score: f32, factors: BoostFactors);
    /// The score after boosting, as stored by `set_boost`.
    fn boosted_score(&self) -> f32;
}

/// Boosts every hit and keeps the best `k`, sorted by descending boosted score, ties by
/// ascending id. The cascade calls this once per boosted level.
pub fn boost_and_keep_best<T: Boostable>(hits: &mut Vec<T>, k: usize, cfg: &BoostingConfig, ctx: &BoostContext) {
    let hint = ctx.routing.as_ref().zip(ctx.topics.as_deref()).map(|(routing, table)| TopicHint::of(routing, table));
    for at in 0..hits.len() {
        // The features a few candidates ahead are asked for now: each candidate's are a load from
        // memory, and this loop does too much per candidate for the CPU to start the next ones
        // itself.
        if let Some(ahead) = hits.get(at + PREFETCH_AHEAD) {
            if let Some(features) = ahead.boost_input().features {
                crate::index::features::prefetch(features);
            }
        }
        let hit = &mut hits[at];
        let (score, factors) = boost_factors_with(hit.base_score(), &hit.boost_input(), cfg, ctx, hint.as_ref());
        hit.set_boost(score, factors);
    }
    keep_best(hits, k);
}

/// How many candidates ahead `boost_and_keep_best` asks for features.
const PREFETCH_AHEAD: usize = 4;

/// Sorts boosted hits by descending boosted score, ties by ascending id: the one order of boosted
/// hits (after boosting, and after anything that adds to boosted scores).
pub(crate) fn sort_best_first<T: Boostable>(hits: &mut Vec<T>) {
    keep_best(hits, usize::MAX);
}

/// Keeps the first `k` hits of the boosted order (`sort_best_first`'s), in that order. The order
/// is found on (score, position) pairs — a partial selection of the best `k`, then a sort of
/// those — and each kept hit is moved once: candidates are large, and neither a sort nor the
/// swaps of a permutation should move each of them several times.
fn keep_best<T: Boostable>(hits: &mut Vec<T>, k: usize) {
    let mut order: Vec<(f32, u32)> =
        hits.iter().enumerate().map(|(at, hit)| (hit.boosted_score(), at as u32)).collect();
    // Positions make the order total, so selecting then sorting gives the head of a full sort.
    keep_first_sorted_by(&mut order, k, |a, b| {
        b.0.total_cmp(&a.0).then_with(|| hits[a.1 as usize].id().cmp(hits[b.1 as usize].id())).then(a.1.cmp(&b.1))
    });
    let mut slots: Vec<Option<T>> = std::mem::take(hits).into_iter().map(Some).collect();
    hits.extend(order.into_iter().map(|(_, at)| slots[at as usize].take().expect("each position is kept once")));
}

#[cfg(test)]
#[path = "boosting_tests.rs"]
mod tests;
