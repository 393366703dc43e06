//! `boosting.yaml`: every coefficient of fusion and boosting, so none is hard-coded, loaded once at
//! start-up. Nothing here fails: a missing file or key means "no effect", a malformed file or a bad
//! value is reported as a `ConfigWarning` naming the key and replaced by the no-effect default.

use crate::yaml::{Mapping, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// Weights and constant of the reciprocal-rank fusion of the dense and lexical lists.
#[derive(Debug, Clone, PartialEq)]
pub struct FusionConfig {
    pub method: FusionMethod,
    pub k: f32,
    pub dense_weight: f32,
    pub lexical_weight: f32,
}

impl Default for FusionConfig {
    fn default() -> Self {
        Self {
            method: FusionMethod::Rrf,
            k: crate::search::fusion::ReciprocalRankFusion::DEFAULT_K,
            dense_weight: 1.0,
            lexical_weight: 1.0,
        }
    }
}

/// How the dense and lexical lists are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FusionMethod {
    /// Weighted reciprocal-rank fusion (ranks only).
    Rrf,
    /// Weighted sum of normalised scores: cosine min–max over the dense candidates, BM25 divided
    /// by the best BM25 score (score-aware: a lone weak lexical match adds little).
    Score,
}

/// A named rule: any of `needles` found → multiply by `boost`.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchRule {
    pub name: String,
    pub(crate) needles: Vec<String>,
    pub boost: f32,
}

/// Content-length rule; without both bounds it has no effect.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthConfig {
    pub optimal_min: Option<u32>,
    pub optimal_max: Option<u32>,
    pub optimal_boost: f32,
    pub(crate) long_boost: f32,
}

impl Default for LengthConfig {
    fn default() -> Self {
        Self { optimal_min: None, optimal_max: None, optimal_boost: 1.0, long_boost: 1.0 }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct StructureConfig {
    pub(crate) well_structured_markers: Vec<String>,
    pub example_markers: Vec<String>,
    pub(crate) well_structured_boost: f32,
    pub(crate) example_boost: f32,
}

impl Default for StructureConfig {
    fn default() -> Self {
        Self {
            well_structured_markers: Vec::new(),
            example_markers: Vec::new(),
            well_structured_boost: 1.0,
            example_boost: 1.0,
        }
    }
}

/// URL depth penalty; without `min_depth` it has no effect.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthPenaltyConfig {
    pub min_depth: Option<u32>,
    pub factor: f32,
}

impl Default for DepthPenaltyConfig {
    fn default() -> Self {
        Self { min_depth: None, factor: 1.0 }
    }
}

/// Additive theme boosts on the normalised score (a soft preference for the routed themes); 0 means no effect.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThemeBoostConfig {
    pub primary: f32,
    pub secondary: f32,
    pub secondary_count: usize,
    /// Subtracted from a hit of another specific theme when the question itself named its
    /// primary theme (a page of another platform); pages of no platform lose nothing.
    pub conflicting: f32,
}

/// How the doc step chooses pages. A page's score fuses (RRF with constant `k`) up to three
/// rankings of the tenant's pages: by the page's own record (title + summary), by its best
/// section and by its best chunk in tenant-wide rankings of those levels. A weight of 0 drops a
/// list; the default (doc 1, evidence 0) is the plain title + summary gate.
#[derive(Debug, Clone, PartialEq)]
pub struct CascadeConfig {
    pub k: f32,
    pub(crate) doc_weight: f32,
    pub section_weight: f32,
    pub chunk_weight: f32,
    /// Added to every section's boosted score, times the boosted score of its page's
    /// second-best ranked section: a page that answers with two sections. 0 = off.
    pub second_section_weight: f32,
}

impl Default for CascadeConfig {
    fn default() -> Self {
        Self { k: 20.0, doc_weight: 1.0, section_weight: 0.0, chunk_weight: 0.0, second_section_weight: 0.0 }
    }
}

/// Transliteration-aware lexical matching (`search::transliteration`): a Cyrillic query word
/// spelled like a Latin word of the tenant's pages also asks BM25 for the Latin word, and with
/// `reverse` a Latin query word spelled in Cyrillic as a word of the pages asks for that word.
#[derive(Debug, Clone, PartialEq)]
pub struct TransliterationConfig {
    pub enabled: bool,
    pub reverse: bool,
    /// Fewest letters of a Latin word that is spelled in Cyrillic (fewer than 4 counts as 4,
    /// which `to_cyrillic` needs).
    pub min_letters: usize,
    /// A Latin term is added only when the pages hold it in at least this share of the records
    /// that hold its Cyrillic spelling (0: always): the pages write the name in Latin, so the
    /// Cyrillic query word is a name, not a Russian word the pages use themselves.
    pub min_latin_ratio: f32,
}

impl Default for TransliterationConfig {
    fn default() -> Self {
        Self { enabled: false, reverse: false, min_letters: 4, min_latin_ratio: 0.0 }
    }
}

/// The whole boosting configuration. `Default` is the no-op configuration: every factor 1.0,
/// every addend 0, no rules, and the paper's fusion (k = 60, equal weights).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoostingConfig {
    pub fusion: FusionConfig,
    pub cascade: CascadeConfig,
    pub page_type_boosts: BTreeMap<String, f32>,
    pub section_boosts: BTreeMap<String, f32>,
    pub platform_boosts: BTreeMap<String, f32>,
    pub theme_boosts: ThemeBoostConfig,
    pub(crate) group_boosts: BTreeMap<String, f32>,
    pub url_patterns: Vec<MatchRule>,
    pub title_keywords: Vec<MatchRule>,
    pub length: LengthConfig,
    pub structure: StructureConfig,
    pub source_boosts: BTreeMap<String, f32>,
    pub depth_penalty: DepthPenaltyConfig,
    pub transliteration: TransliterationConfig,
}

/// A problem found while loading; `key` is the dotted path of the offending entry (or the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub key: String,
    pub(crate) message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// The top-level sections of boosting.yaml (a start-up needs every one: `tuning`).
pub(crate) const SECTIONS: [&str; 14] = [
    "fusion",
    "cascade",
    "page_type_boosts",
    "section_boosts",
    "platform_boosts",
    "theme_boosts",
    "group_boosts",
    "url_patterns",
    "title_keywords",
    "length",
    "structure",
    "source_boosts",
    "depth_penalty",
    "transliteration",
];

struct Parser {
    warnings: Vec<ConfigWarning>,
}

impl Parser {
    fn warn(&mut self, key: &str, message: impl Into<String>) {
        self.warnings.push(ConfigWarning { key: key.to_string(), message: message.into() });
    }

    fn mapping<'v>(&mut self, key: &str, value: &'v Value) -> Option<&'v Mapping> {
        match value {
            Value::Mapping(mapping) => Some(mapping),
            Value::Null => None,
            other => {
                self.warn(key, format!("expected a mapping, got {}", kind(other)));
                None
            }
        }
    }

    fn entries<'v>(&mut self, key: &str, value: &'v Value) -> Vec<(String, &'v Value)> {
        let Some(mapping) = self.mapping(key, value) else {
            return Vec::new();
        };
        let mut entries = Vec::new();
        for (name, inner) in mapping {
            match name {
                Value::String(name) => entries.push((name.clone(), inner)),
                other => self.warn(key, format!("keys must be strings, got {}", kind(other))),
            }
        }
        entries
    }

    /// A finite number ≥ 0 (or > 0 when `positive`), else a warning and `None`.
    fn number(&mut self, key: &str, value: &Value, positive: bool) -> Option<f32> {
        let number = match value {
            Value::Number(number) => number.as_f64(),
            other => {
                self.warn(key, format!("expected a number, got {}", kind(other)));
                return None;
            }
        };
        match number {
            Some(n) if n.is_finite() && n > 0.0 => Some(n as f32),
            Some(n) if n == 0.0 && !positive => Some(0.0),
            Some(n) => {
                self.warn(key, format!("must be {}, got {n}", if positive { "positive" } else { "non-negative" }));
                None
            }
            None => {
                self.warn(key, "not a number");
                None
            }
        }
    }

    fn factor(&mut self, key: &str, value: Option<&Value>) -> f32 {
        value.and_then(|v| self.number(key, v, true)).unwrap_or(1.0)
    }

    /// A boolean, else a warning and `None`.
    fn flag(&mut self, key: &str, value: Option<&Value>) -> Option<bool> {
        match value? {
            Value::Bool(flag) => Some(*flag),
            other => {
                self.warn(key, format!("expected true or false, got {}", describe(other)));
                None
            }
        }
    }

    fn count(&mut self, key: &str, value: Option<&Value>) -> Option<u32> {
        let value = value?;
        match value.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                self.warn(key, format!("expected a non-negative integer, got {}", describe(value)));
                None
            }
        }
    }

    fn strings(&mut self, key: &str, value: Option<&Value>) -> Vec<String> {
        let Some(value) = value else {
            return Vec::new();
        };
        let Value::Sequence(items) = value else {
            self.warn(key, format!("expected a list of strings, got {}", kind(value)));
            return Vec::new();
        };
        let mut strings = Vec::new();
        for (position, item) in items.iter().enumerate() {
            match item {
                Value::String(text) if !text.is_empty() => strings.push(text.to_lowercase()),
                other => self.warn(
                    &format!("{key}[{position}]"),
                    format!("expected a non-empty string, got {}", describe(other)),
                ),
            }
        }
        strings
    }

    fn factor_map(&mut self, key: &str, value: Option<&Value>) -> BTreeMap<String, f32> {
        let Some(value) = value else {
            return BTreeMap::new();
        };
        let mut factors = BTreeMap::new();
        for (name, inner) in self.entries(key, value) {
            if let Some(factor) = self.number(&format!("{key}.{name}"), inner, true) {
                factors.insert(name.to_lowercase(), factor);
            }
        }
        factors
    }

    fn match_rules(&mut self, key: &str, value: Option<&Value>, needles_key: &str) -> Vec<MatchRule> {
        let Some(value) = value else {
            return Vec::new();
        };
        let mut rules = Vec::new();
        for (name, inner) in self.entries(key, value) {
            let rule_key = format!("{key}.{name}");
            let Some(fields) = self.mapping(&rule_key, inner) else {
                continue;
            };
            self.unknown_keys(&rule_key, fields, &[needles_key, "boost"]);
            let needles = self.strings(&format!("{rule_key}.{needles_key}"), fields.get(needles_key));
            let boost = self.factor(&format!("{rule_key}.boost"), fields.get("boost"));
            if !needles.is_empty() {
                rules.push(MatchRule { name, needles, boost });
            }
        }
        rules
    }

    fn unknown_keys(&mut self, key: &str, mapping: &Mapping, known: &[&str]) {
        for name in mapping.keys() {
            let name = name.as_str().unwrap_or("<non-string>");
            if !known.contains(&name) {
                self.warn(&format!("{key}.{name}"), "unknown key ignored");
            }
        }
    }

    fn parse(&mut self, root: &Mapping) -> BoostingConfig {
        for name in root.keys() {
            let name = name.as_str().unwrap_or("<non-string>");
            if !SECTIONS.contains(&name) {
                self.warn(name, "unknown section ignored");
            }
        }
        let section = |name: &str| root.get(name).filter(|v| !v.is_null());
        let mut config = BoostingConfig {
            page_type_boosts: self.factor_map("page_type_boosts", section("page_type_boosts")),
            section_boosts: self.factor_map("section_boosts", section("section_boosts")),
            platform_boosts: self.factor_map("platform_boosts", section("platform_boosts")),
            group_boosts: self.factor_map("group_boosts", section("group_boosts")),
            source_boosts: self.factor_map("source_boosts", section("source_boosts")),
            url_patterns: self.match_rules("url_patterns", section("url_patterns"), "paths"),
            title_keywords: self.match_rules("title_keywords", section("title_keywords"), "words"),
            ..BoostingConfig::default()
        };
        if let Some(fusion) = section("fusion").and_then(|v| self.mapping("fusion", v)) {
            self.unknown_keys("fusion", fusion, &["method", "k", "weights"]);
            match fusion.get("method") {
                None => {}
                Some(Value::String(method)) if method == "rrf" => config.fusion.method = FusionMethod::Rrf,
                Some(Value::String(method)) if method == "score" => config.fusion.method = FusionMethod::Score,
                Some(other) => self.warn("fusion.method", format!("expected rrf or score, got {}", describe(other))),
            }
            if let Some(k) = fusion.get("k").and_then(|v| self.number("fusion.k", v, false)) {
                config.fusion.k = k;
            }
            if let Some(weights) = fusion.get("weights").and_then(|v| self.mapping("fusion.weights", v)) {
                self.unknown_keys("fusion.weights", weights, &["dense", "lexical"]);
                let weight = |parser: &mut Self, name: &str| {
                    weights
                        .get(name)
                        .and_then(|v| parser.number(&format!("fusion.weights.{name}"), v, false))
                        .unwrap_or(1.0)
                };
                config.fusion.dense_weight = weight(self, "dense");
                config.fusion.lexical_weight = weight(self, "lexical");
            }
        }
        if let Some(cascade) = section("cascade").and_then(|v| self.mapping("cascade", v)) {
            let known = ["k", "doc_weight", "section_weight", "chunk_weight", "second_section_weight"];
            self.unknown_keys("cascade", cascade, &known);
            let defaults = CascadeConfig::default();
            let mut number = |name: &str, default: f32| {
                cascade.get(name).and_then(|v| self.number(&format!("cascade.{name}"), v, false)).unwrap_or(default)
            };
            config.cascade = CascadeConfig {
                k: number("k", defaults.k),
                doc_weight: number("doc_weight", defaults.doc_weight),
                section_weight: number("section_weight", defaults.section_weight),
                chunk_weight: number("chunk_weight", defaults.chunk_weight),
                second_section_weight: number("second_section_weight", defaults.second_section_weight),
            };
        }
        if let Some(theme) = section("theme_boosts").and_then(|v| self.mapping("theme_boosts", v)) {
            self.unknown_keys("theme_boosts", theme, &["primary", "secondary", "secondary_count", "conflicting"]);
            let addend = |parser: &mut Self, name: &str| {
                theme.get(name).and_then(|v| parser.number(&format!("theme_boosts.{name}"), v, false)).unwrap_or(0.0)
            };
            config.theme_boosts.primary = addend(self, "primary");
            config.theme_boosts.secondary = addend(self, "secondary");
            config.theme_boosts.conflicting = addend(self, "conflicting");
            config.theme_boosts.secondary_count =
                self.count("theme_boosts.secondary_count", theme.get("secondary_count")).unwrap_or(0) as usize;
        }
        if let Some(length) = section("length").and_then(|v| self.mapping("length", v)) {
            self.unknown_keys("length", length, &["optimal_min", "optimal_max", "optimal_boost", "long_boost"]);
            config.length = LengthConfig {
                optimal_min: self.count("length.optimal_min", length.get("optimal_min")),
                optimal_max: self.count("length.optimal_max", length.get("optimal_max")),
                optimal_boost: self.factor("length.optimal_boost", length.get("optimal_boost")),
                long_boost: self.factor("length.long_boost", length.get("long_boost")),
            };
            if let (Some(min), Some(max)) = (config.length.optimal_min, config.length.optimal_max) {
                if min > max {
                    self.warn(
                        "length.optimal_min",
                        format!("greater than optimal_max ({min} > {max}); length rule disabled"),
                    );
                    config.length = LengthConfig::default();
                }
            }
        }
        if let Some(structure) = section("structure").and_then(|v| self.mapping("structure", v)) {
            self.unknown_keys(
                "structure",
                structure,
                &["well_structured_markers", "example_markers", "well_structured_boost", "example_boost"],
            );
            config.structure = StructureConfig {
                well_structured_markers: self
                    .strings("structure.well_structured_markers", structure.get("well_structured_markers")),
                example_markers: self.strings("structure.example_markers", structure.get("example_markers")),
                well_structured_boost: self
                    .factor("structure.well_structured_boost", structure.get("well_structured_boost")),
                example_boost: self.factor("structure.example_boost", structure.get("example_boost")),
            };
        }
        if let Some(depth) = section("depth_penalty").and_then(|v| self.mapping("depth_penalty", v)) {
            self.unknown_keys("depth_penalty", depth, &["min_depth", "factor"]);
            config.depth_penalty = DepthPenaltyConfig {
                min_depth: self.count("depth_penalty.min_depth", depth.get("min_depth")),
                factor: self.factor("depth_penalty.factor", depth.get("factor")),
            };
        }
        if let Some(spelling) = section("transliteration").and_then(|v| self.mapping("transliteration", v)) {
            self.unknown_keys("transliteration", spelling, &["enabled", "reverse", "min_letters", "min_latin_ratio"]);
            let defaults = TransliterationConfig::default();
            config.transliteration = TransliterationConfig {
                enabled: self.flag("transliteration.enabled", spelling.get("enabled")).unwrap_or(defaults.enabled),
                reverse: self.flag("transliteration.reverse", spelling.get("reverse")).unwrap_or(defaults.reverse),
                min_letters: self
                    .count("transliteration.min_letters", spelling.get("min_letters"))
                    .map_or(defaults.min_letters, |n| n as usize),
                min_latin_ratio: spelling
                    .get("min_latin_ratio")
                    .and_then(|v| self.number("transliteration.min_latin_ratio", v, false))
                    .unwrap_or(defaults.min_latin_ratio),
            };
        }
        config
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Number(number) => number.to_string(),
        Value::String(text) => format!("{text:?}"),
        other => kind(other).to_string(),
    }
}

impl BoostingConfig {
    /// Parses YAML text. Never fails: problems come back as warnings and the affected entries
    /// keep their no-effect defaults; an unparsable document yields `BoostingConfig::default()`.
    pub fn from_yaml(text: &str) -> (Self, Vec<ConfigWarning>) {
        let mut parser = Parser { warnings: Vec::new() };
        let config = match crate::yaml::from_str::<Value>(text) {
            Ok(Value::Mapping(root)) => parser.parse(&root),
            Ok(Value::Null) => BoostingConfig::default(),
            Ok(other) => {
                parser.warn("<root>", format!("expected a mapping of sections, got {}", kind(&other)));
                BoostingConfig::default()
            }
            Err(error) => {
                parser.warn("<file>", format!("malformed YAML: {error}"));
                BoostingConfig::default()
            }
        };
        (config, parser.warnings)
    }

    /// Reads and parses `path`; a missing or unreadable file is a warning and the no-op config.
    pub fn load(path: &Path) -> (Self, Vec<ConfigWarning>) {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_yaml(&text),
            Err(error) => (
                BoostingConfig::default(),
                vec![ConfigWarning {
                    key: path.display().to_string(),
                    message: format!("not loaded ({error}); every factor is 1.0"),
                }],
            ),
        }
    }

    /// `load` with each warning logged; the service calls it once at start-up and keeps the `Arc`
    /// in its state, so the file is read once and shared by every request.
    pub fn load_shared(path: &Path) -> Arc<Self> {
        let (config, warnings) = Self::load(path);
        for warning in &warnings {
            tracing::warn!(path = %path.display(), key = %warning.key, problem = %warning.message, "boosting config value ignored");
        }
        tracing::info!(path = %path.display(), warnings = warnings.len(), "boosting config loaded");
        Arc::new(config)
    }
}
