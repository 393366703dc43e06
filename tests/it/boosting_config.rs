//! Loading `boosting.yaml`: the shipped file, partial files, malformed files and bad values.

use retrieval_engine::{BoostingConfig, ConfigWarning};
use std::path::Path;

fn keys(warnings: &[ConfigWarning]) -> Vec<&str> {
    warnings.iter().map(|w| w.key.as_str()).collect()
}

#[test]
fn shipped_file_loads_every_section_without_warnings() {
    let (config, warnings) =
        BoostingConfig::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/config/boosting.yaml")));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.fusion.method, retrieval_engine::FusionMethod::Score);
    assert_eq!(config.fusion.lexical_weight, 0.7);
    assert_eq!((config.cascade.k, config.cascade.section_weight, config.cascade.chunk_weight), (5.0, 1.0, 0.0));
    assert_eq!(config.cascade.second_section_weight, 0.1);
    assert_eq!(config.theme_boosts.conflicting, 0.06);
    assert_eq!(config.page_type_boosts["overview"], 1.06);
    assert_eq!(config.section_boosts["api"], 1.02);
    assert_eq!(config.platform_boosts["android"], 1.03);
    assert_eq!(config.theme_boosts.primary, 0.04);
    assert_eq!(config.theme_boosts.secondary, 0.02);
    assert_eq!(config.theme_boosts.secondary_count, 2);
    assert_eq!(config.url_patterns.len(), 4);
    assert_eq!(config.title_keywords.iter().find(|r| r.name == "overview").map(|r| r.boost), Some(1.0));
    assert_eq!(config.length.optimal_max, Some(5000));
    assert_eq!(config.structure.example_markers.len(), 3);
    assert_eq!(config.source_boosts["docs-site"], 1.02);
    assert_eq!(config.depth_penalty.min_depth, Some(4));
    assert_eq!(config.depth_penalty.factor, 0.98);
    assert!(config.transliteration.enabled && !config.transliteration.reverse);
    assert_eq!((config.transliteration.min_letters, config.transliteration.min_latin_ratio), (4, 2.0));
}

#[test]
fn transliteration_is_off_unless_the_file_turns_it_on_and_bad_values_are_named() {
    assert!(!BoostingConfig::default().transliteration.enabled);
    let (config, warnings) = BoostingConfig::from_yaml(
        "transliteration:\n  enabled: yes please\n  reverse: true\n  min_letters: -2\n  min_latin_ratio: 0.5\n  weight: 1\n",
    );
    assert_eq!(
        keys(&warnings),
        vec!["transliteration.weight", "transliteration.enabled", "transliteration.min_letters"]
    );
    assert!(!config.transliteration.enabled && config.transliteration.reverse);
    assert_eq!((config.transliteration.min_letters, config.transliteration.min_latin_ratio), (4, 0.5));
}

#[test]
fn missing_file_is_the_no_op_config_with_a_warning() {
    let (config, warnings) = BoostingConfig::load(Path::new("/nonexistent/boosting.yaml"));
    assert_eq!(config, BoostingConfig::default());
    assert_eq!(warnings.len(), 1);
}

#[test]
fn partial_file_keeps_defaults_for_the_rest() {
    let (config, warnings) = BoostingConfig::from_yaml("page_type_boosts:\n  faq: 1.2\nlength:\n  optimal_min: 10\n");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.page_type_boosts.len(), 1);
    assert_eq!(config.length.optimal_min, Some(10));
    assert_eq!(config.length.optimal_max, None);
    assert_eq!(config.length.optimal_boost, 1.0);
    assert_eq!(config.fusion, BoostingConfig::default().fusion);
    assert_eq!(config.theme_boosts.primary, 0.0);
    assert!(config.url_patterns.is_empty());
}

#[test]
fn empty_file_is_the_no_op_config() {
    let (config, warnings) = BoostingConfig::from_yaml("");
    assert!(warnings.is_empty());
    assert_eq!(config, BoostingConfig::default());
}

#[test]
fn malformed_yaml_gives_defaults_and_a_warning() {
    let (config, warnings) = BoostingConfig::from_yaml("page_type_boosts: [unclosed\n  : :");
    assert_eq!(config, BoostingConfig::default());
    assert_eq!(keys(&warnings), vec!["<file>"]);
    let (config, warnings) = BoostingConfig::from_yaml("- just\n- a list\n");
    assert_eq!(config, BoostingConfig::default());
    assert_eq!(keys(&warnings), vec!["<root>"]);
}

#[test]
fn bad_values_are_replaced_by_defaults_and_named() {
    let yaml = r#"
page_type_boosts:
  overview: -1.5
  faq: "high"
  howto: 1.2
section_boosts: [1, 2]
fusion:
  k: -5
  weights: {dense: 2.0, lexical: true}
theme_boosts: {primary: 0.08, secondary: -0.04, secondary_count: 1.5, conflicting: -0.1}
cascade: {second_section_weight: "much"}
url_patterns:
  faq: {paths: "/faq", boost: 1.2}
  blog: {paths: ["/blog", 3], boost: 0}
length: {optimal_min: 5000, optimal_max: 1000}
depth_penalty: {min_depth: -1, factor: .nan}
surprise: 1
"#;
    let (config, warnings) = BoostingConfig::from_yaml(yaml);
    let keys = keys(&warnings);
    for expected in [
        "page_type_boosts.overview",
        "page_type_boosts.faq",
        "section_boosts",
        "fusion.k",
        "fusion.weights.lexical",
        "theme_boosts.secondary",
        "theme_boosts.secondary_count",
        "theme_boosts.conflicting",
        "cascade.second_section_weight",
        "url_patterns.faq.paths",
        "url_patterns.blog.paths[1]",
        "url_patterns.blog.boost",
        "length.optimal_min",
        "depth_penalty.min_depth",
        "depth_penalty.factor",
        "surprise",
    ] {
        assert!(keys.contains(&expected), "no warning for {expected}: {keys:?}");
    }
    assert_eq!(config.page_type_boosts.len(), 1);
    assert_eq!(config.page_type_boosts["howto"], 1.2);
    assert!(config.section_boosts.is_empty());
    assert_eq!(config.fusion.k, 60.0);
    assert_eq!(config.fusion.dense_weight, 2.0);
    assert_eq!(config.fusion.lexical_weight, 1.0);
    assert_eq!(config.theme_boosts.primary, 0.08);
    assert_eq!(config.theme_boosts.secondary, 0.0);
    assert_eq!(config.theme_boosts.conflicting, 0.0, "a bad value has no effect");
    assert_eq!(config.cascade.second_section_weight, 0.0);
    assert_eq!(config.url_patterns.len(), 1);
    assert_eq!(config.url_patterns[0].name, "blog");
    assert_eq!(config.url_patterns[0].boost, 1.0);
    assert_eq!(config.length, BoostingConfig::default().length);
    assert_eq!(config.depth_penalty.min_depth, None);
    assert_eq!(config.depth_penalty.factor, 1.0);
}
