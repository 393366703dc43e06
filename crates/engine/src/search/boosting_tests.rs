use super::*;
use crate::search::boosting_config::BoostingConfig;

fn config(yaml: &str) -> BoostingConfig {
    let (config, warnings) = BoostingConfig::from_yaml(yaml);
    assert!(warnings.is_empty(), "unexpected warnings: {warnings:?}");
    config
}

fn effect_of(outcome: &BoostOutcome, rule: BoostRule) -> BoostEffect {
    outcome.factors.iter().find(|(r, _)| *r == rule).map(|(_, e)| *e).expect("every rule is reported")
}

fn boosted(meta: &Metadata, text: Option<&str>, cfg: &BoostingConfig, ctx: &BoostContext) -> BoostOutcome {
    boost_score(0.5, &BoostInput { meta, text, features: None }, cfg, ctx)
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() < 1e-6
}

fn rich_meta() -> Metadata {
    Metadata {
        page_type: "overview".into(),
        section: "sdk".into(),
        platform: "android".into(),
        domain: "sdk_docs".into(),
        role: "integrator".into(),
        tags: vec!["getting-started".into()],
        url: "https://docs.example.com/sdk/android/start/install/step".into(),
        title: "Что такое SDK".into(),
        content_length: 2000,
        source: "docs-site".into(),
        ..Metadata::default()
    }
}

#[test]
fn no_config_leaves_score_unchanged() {
    let meta = rich_meta();
    let ctx = BoostContext {
        routing: Some(RoutingHint {
            named: false,
            primary: Some(ThemeFields { domain: Some("sdk_docs".into()), ..ThemeFields::default() }),
            secondary: Vec::new(),
        }),
        group_boosts: BTreeMap::new(),
        config_key: None,
        topics: None,
    };
    let outcome = boosted(&meta, Some("## Шаг 1\nНапример, так"), &BoostingConfig::default(), &ctx);
    assert_eq!(outcome.score, 0.5);
    assert_eq!(outcome.factors.len(), 10);
    let rules: Vec<BoostRule> = outcome.factors.iter().map(|(rule, _)| *rule).collect();
    assert_eq!(rules, BoostRule::ORDER.to_vec());
    for (rule, effect) in &outcome.factors {
        match effect {
            BoostEffect::Multiply(factor) => assert_eq!(*factor, 1.0, "{rule:?}"),
            BoostEffect::Add(addend) => assert_eq!(*addend, 0.0, "{rule:?}"),
        }
    }
}

#[test]
fn page_type_rule() {
    let cfg = config("page_type_boosts: {overview: 1.5, changelog: 0.8}");
    let meta = Metadata { page_type: "Overview".into(), ..Metadata::default() };
    let outcome = boosted(&meta, None, &cfg, &BoostContext::default());
    assert_eq!(effect_of(&outcome, BoostRule::PageType), BoostEffect::Multiply(1.5));
    assert!(close(outcome.score, 0.75));
    let other = Metadata { page_type: "howto".into(), ..Metadata::default() };
    assert_eq!(boosted(&other, None, &cfg, &BoostContext::default()).score, 0.5);
}

#[test]
fn section_and_platform_rule_multiplies_both() {
    let cfg = config("section_boosts: {sdk: 1.1}\nplatform_boosts: {android: 1.2}");
    let outcome = boosted(&rich_meta(), None, &cfg, &BoostContext::default());
    assert_eq!(effect_of(&outcome, BoostRule::SectionPlatform), BoostEffect::Multiply(1.1 * 1.2));
    let web = Metadata { section: "sdk".into(), platform: "web".into(), ..Metadata::default() };
    assert!(close(boosted(&web, None, &cfg, &BoostContext::default()).score, 0.55));
}

#[test]
fn theme_rule_adds_for_primary_and_next_themes_only() {
    let cfg = config("theme_boosts: {primary: 0.08, secondary: 0.04, secondary_count: 2}");
    let theme = |platform: &str| ThemeFields {
        domain: Some("sdk_docs".into()),
        section: Some("sdk".into()),
        platform: Some(platform.into()),
        role: None,
    };
    let ctx = BoostContext {
        routing: Some(RoutingHint {
            named: false,
            primary: Some(theme("ios")),
            secondary: vec![theme("web"), theme("main"), theme("android")],
        }),
        group_boosts: BTreeMap::new(),
        config_key: None,
        topics: None,
    };
    let meta_on = |platform: &str| Metadata { platform: platform.into(), ..rich_meta() };
    assert!(close(boosted(&meta_on("ios"), None, &cfg, &ctx).score, 0.58));
    assert!(close(boosted(&meta_on("web"), None, &cfg, &ctx).score, 0.54));
    assert!(close(boosted(&meta_on("main"), None, &cfg, &ctx).score, 0.54));
    assert_eq!(
        boosted(&meta_on("android"), None, &cfg, &ctx).score,
        0.5,
        "third secondary theme is beyond secondary_count"
    );
    assert_eq!(boosted(&meta_on("ios"), None, &cfg, &BoostContext::default()).score, 0.5, "no routing, no boost");
    let other_domain = Metadata { domain: "api_docs".into(), ..meta_on("ios") };
    assert_eq!(boosted(&other_domain, None, &cfg, &ctx).score, 0.5);
}

#[test]
fn a_named_platform_costs_pages_of_other_platforms_only() {
    let cfg = config("theme_boosts: {primary: 0.04, secondary: 0.02, secondary_count: 1, conflicting: 0.06}");
    let theme = |platform: &str| ThemeFields {
        domain: Some("apps".into()),
        platform: Some(platform.into()),
        ..ThemeFields::default()
    };
    let hint = |named: bool| BoostContext {
        routing: Some(RoutingHint { named, primary: Some(theme("mac")), secondary: vec![theme("safari")] }),
        group_boosts: BTreeMap::new(),
        config_key: None,
        topics: None,
    };
    let page = |domain: &str, platform: &str| Metadata {
        domain: domain.into(),
        platform: platform.into(),
        ..Metadata::default()
    };
    let named = hint(true);
    assert!(close(boosted(&page("apps", "mac"), None, &cfg, &named).score, 0.54));
    assert!(close(boosted(&page("apps", "safari"), None, &cfg, &named).score, 0.52), "a secondary theme is boosted");
    assert!(close(boosted(&page("apps", "windows"), None, &cfg, &named).score, 0.44), "another platform");
    assert_eq!(boosted(&page("kb", ""), None, &cfg, &named).score, 0.5, "a page for every platform");
    assert_eq!(boosted(&page("apps", "windows"), None, &cfg, &hint(false)).score, 0.5, "only a named theme costs");
}

#[test]
fn group_rule_uses_tags_and_request_overrides_config() {
    let cfg = config("group_boosts: {getting-started: 1.2, legacy: 0.5}");
    let meta = rich_meta();
    assert!(close(boosted(&meta, None, &cfg, &BoostContext::default()).score, 0.6));
    let ctx = BoostContext {
        routing: None,
        group_boosts: BTreeMap::from([("Getting-Started".to_string(), 1.4)]),
        config_key: None,
        topics: None,
    };
    assert_eq!(effect_of(&boosted(&meta, None, &cfg, &ctx), BoostRule::Group), BoostEffect::Multiply(1.4));
}

#[test]
fn url_pattern_rule_multiplies_each_matching_rule_once() {
    let cfg = config(
        "url_patterns:\n  overview: {paths: ['/start/', '/overview'], boost: 1.5}\n  technical: {paths: ['/sdk/'], boost: 1.2}\n  release: {paths: ['/blog'], boost: 0.8}",
    );
    let outcome = boosted(&rich_meta(), None, &cfg, &BoostContext::default());
    assert_eq!(effect_of(&outcome, BoostRule::UrlPattern), BoostEffect::Multiply(1.5 * 1.2));
    let blog = Metadata { url: "https://x.ru/Blog/post".into(), ..Metadata::default() };
    assert!(close(boosted(&blog, None, &cfg, &BoostContext::default()).score, 0.4));
}

#[test]
fn title_keyword_rule_is_case_insensitive() {
    let cfg = config("title_keywords:\n  overview: {words: ['что такое', 'обзор'], boost: 1.5}");
    assert!(close(boosted(&rich_meta(), None, &cfg, &BoostContext::default()).score, 0.75));
    let plain = Metadata { title: "Отчёты".into(), ..Metadata::default() };
    assert_eq!(boosted(&plain, None, &cfg, &BoostContext::default()).score, 0.5);
}

#[test]
fn length_rule_distinguishes_short_optimal_and_long() {
    let cfg = config("length: {optimal_min: 1000, optimal_max: 5000, optimal_boost: 1.1, long_boost: 1.05}");
    let with_length = |content_length| Metadata { content_length, ..Metadata::default() };
    let factor = |n| effect_of(&boosted(&with_length(n), None, &cfg, &BoostContext::default()), BoostRule::Length);
    assert_eq!(factor(999), BoostEffect::Multiply(1.0));
    assert_eq!(factor(1000), BoostEffect::Multiply(1.1));
    assert_eq!(factor(5000), BoostEffect::Multiply(1.1));
    assert_eq!(factor(5001), BoostEffect::Multiply(1.05));
}

#[test]
fn structure_rule_reads_line_markers_and_whole_words() {
    let cfg = config(
        "structure: {well_structured_markers: ['##', '1.'], example_markers: ['например', 'шаг'], well_structured_boost: 1.05, example_boost: 1.1}",
    );
    let meta = Metadata::default();
    let factor =
        |text: Option<&str>| effect_of(&boosted(&meta, text, &cfg, &BoostContext::default()), BoostRule::Structure);
    assert_eq!(factor(Some("## Установка\n1. Откройте меню")), BoostEffect::Multiply(1.05));
    assert_eq!(factor(Some("Версия 1.5 вышла, шагнув вперёд")), BoostEffect::Multiply(1.0));
    assert_eq!(factor(Some("Например, так")), BoostEffect::Multiply(1.1));
    assert_eq!(factor(Some("## Шаг 2")), BoostEffect::Multiply(1.05 * 1.1));
    assert_eq!(factor(None), BoostEffect::Multiply(1.0));
}

#[test]
fn source_rule() {
    let cfg = config("source_boosts: {docs-site: 1.1}");
    assert!(close(boosted(&rich_meta(), None, &cfg, &BoostContext::default()).score, 0.55));
    let other = Metadata { source: "forum".into(), ..Metadata::default() };
    assert_eq!(boosted(&other, None, &cfg, &BoostContext::default()).score, 0.5);
}

#[test]
fn depth_penalty_rule_counts_path_segments() {
    assert_eq!(url_depth("https://docs.example.com/a/b/c/d?x=1#y"), 4);
    assert_eq!(url_depth("https://docs.example.com"), 0);
    assert_eq!(url_depth("/docs/admin/"), 2);
    let cfg = config("depth_penalty: {min_depth: 4, factor: 0.95}");
    let at = |url: &str| Metadata { url: url.into(), ..Metadata::default() };
    assert!(close(boosted(&at("https://x.ru/a/b/c/d"), None, &cfg, &BoostContext::default()).score, 0.475));
    assert_eq!(boosted(&at("https://x.ru/a/b/c"), None, &cfg, &BoostContext::default()).score, 0.5);
}

#[test]
fn rules_apply_in_fixed_order() {
    let cfg =
        config("page_type_boosts: {overview: 1.5}\ntheme_boosts: {primary: 0.08}\nsource_boosts: {docs-site: 2.0}");
    let ctx = BoostContext {
        routing: Some(RoutingHint {
            named: false,
            primary: Some(ThemeFields { domain: Some("sdk_docs".into()), ..ThemeFields::default() }),
            secondary: Vec::new(),
        }),
        group_boosts: BTreeMap::new(),
        config_key: None,
        topics: None,
    };
    // ((0.5 × 1.5) + 0.08) × 2.0: the addend comes after page type and before source.
    let outcome = boosted(&rich_meta(), None, &cfg, &ctx);
    assert!(close(outcome.score, 1.66), "got {}", outcome.score);
}

#[derive(Clone)]
struct Hit {
    id: String,
    base: f32,
    meta: Metadata,
    boosted: f32,
}

impl Boostable for Hit {
    fn id(&self) -> &str {
        &self.id
    }
    fn base_score(&self) -> f32 {
        self.base
    }
    fn boost_input(&self) -> BoostInput<'_> {
        BoostInput { meta: &self.meta, text: None, features: None }
    }
    fn set_boost(&mut self, score: f32, _factors: BoostFactors) {
        self.boosted = score;
    }
    fn boosted_score(&self) -> f32 {
        self.boosted
    }
}

#[test]
fn boost_and_keep_best_reorders_by_boosted_score_then_id() {
    let cfg = config("page_type_boosts: {faq: 1.5}");
    let hit = |id: &str, base: f32, page_type: &str| Hit {
        id: id.into(),
        base,
        meta: Metadata { page_type: page_type.into(), ..Metadata::default() },
        boosted: 0.0,
    };
    let hits = vec![hit("c", 0.9, ""), hit("b", 0.7, "faq"), hit("a", 0.9, "")];
    let ids = |hits: &[Hit]| hits.iter().map(|h| h.id.clone()).collect::<Vec<_>>();
    let mut all = hits.clone();
    boost_and_keep_best(&mut all, usize::MAX, &cfg, &BoostContext::default());
    assert_eq!(ids(&all), vec!["b", "a", "c"]);
    assert!(close(all[0].boosted, 1.05));
    let mut two = hits.clone();
    boost_and_keep_best(&mut two, 2, &cfg, &BoostContext::default());
    assert_eq!(ids(&two), vec!["b", "a"]);
    let mut none = hits;
    boost_and_keep_best(&mut none, 0, &cfg, &BoostContext::default());
    assert!(none.is_empty());
}

#[test]
fn features_derived_at_load_boost_exactly_like_the_raw_record() {
    let cfg = config(
        "url_patterns: {docs: {paths: [/sdk/, /admin], boost: 1.05}}\n\
         title_keywords: {setup: {words: [установка, что такое], boost: 1.03}}\n\
         group_boosts: {ios: 1.1, android: 0.9}\n\
         structure: {well_structured_markers: ['##', '1.', '•', 'очень длинный маркер'], well_structured_boost: 1.01}\n\
         depth_penalty: {min_depth: 3, factor: 0.98}",
    );
    let ctx = BoostContext { group_boosts: BTreeMap::from([("IOS".to_string(), 1.2)]), ..BoostContext::default() };
    let snapshot = crate::fixtures::snapshot();
    let mut records: Vec<crate::model::Record> =
        snapshot.docs.into_iter().chain(snapshot.sections).chain(snapshot.chunks).collect();
    records.push(crate::model::Record {
        id: "extra".into(),
        meta: Metadata { tags: vec![" iOS".into(), "ios".into()], ..rich_meta() },
        text: "вступление\n   очень длинный маркер и текст\n".into(),
        embedding: Vec::new(),
    });
    for record in &records {
        let features = crate::index::RecordFeatures::of(record, &Default::default());
        let raw = BoostInput { meta: &record.meta, text: Some(&record.text), features: None };
        let derived = BoostInput { features: Some(&features), ..raw };
        assert_eq!(boost_score(0.7, &derived, &cfg, &ctx), boost_score(0.7, &raw, &cfg, &ctx), "{}", record.id);
    }
}

#[test]
fn cached_factors_boost_like_fresh_ones_and_never_leak_into_another_config() {
    let first = config("page_type_boosts: {faq: 1.5}\ntitle_keywords: {setup: {words: [установка], boost: 1.03}}");
    let second = config("page_type_boosts: {faq: 0.5}\nlength: {optimal_min: 10, optimal_max: 20, optimal_boost: 1.2}");
    let record = crate::model::Record {
        id: "r".into(),
        meta: Metadata {
            page_type: "faq".into(), title: "Установка".into(), content_length: 15, ..rich_meta()
        },
        text: "## Установка\n1. шаг".into(),
        embedding: Vec::new(),
    };
    let features = crate::index::RecordFeatures::of(&record, &Default::default());
    let input = BoostInput { meta: &record.meta, text: Some(&record.text), features: Some(&features) };
    let fresh = |cfg: &BoostingConfig| boost_score(0.6, &input, cfg, &BoostContext::default());
    let (first_key, second_key) = (BoostCacheKey::new(), BoostCacheKey::new());
    let cached = |cfg: &BoostingConfig, key| {
        boost_score(0.6, &input, cfg, &BoostContext { config_key: Some(key), ..BoostContext::default() })
    };
    for _ in 0..2 {
        assert_eq!(cached(&first, first_key), fresh(&first));
        assert_eq!(cached(&second, second_key), fresh(&second));
    }
    assert_ne!(fresh(&first).score, fresh(&second).score);
}

#[test]
fn lookup_tries_the_normalised_key_only_when_it_differs() {
    let map = BTreeMap::from([("android".to_string(), 1.5), ("σ".to_string(), 2.0)]);
    assert_eq!(lookup(&map, "android"), 1.5);
    assert_eq!(lookup(&map, " Android "), 1.5);
    assert_eq!(lookup(&map, "ios"), 1.0);
    assert_eq!(lookup(&map, "Σ"), 2.0);
    for key in ["android", "ios-app", "ǅ", "straße", " x", "Σ", "ς", "ı", "İ", "ﬃ"] {
        assert_eq!(is_trimmed_lower_case(key), key.trim().to_lowercase() == key, "{key:?}");
    }
}

#[test]
fn keep_best_is_the_head_of_the_full_order() {
    // Scores with many ties (broken by id) and equal ids (broken by position): keeping the best
    // `k` must give the first `k` of a stable sort by (score descending, id ascending).
    let mut state = 7u64;
    let mut next = |modulo: u64| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) % modulo
    };
    for len in [0usize, 1, 2, 5, 17, 64, 200] {
        let hits: Vec<Hit> = (0..len)
            .map(|at| Hit {
                id: format!("r{:02}", next(40)),
                base: 0.0,
                meta: Metadata { url: format!("{at}").into(), ..Metadata::default() },
                boosted: [0.5, 0.25, -0.0, 0.0, 1.0][next(5) as usize] + next(3) as f32 * 0.125,
            })
            .collect();
        let mut expected: Vec<&Hit> = hits.iter().collect();
        expected.sort_by(|a, b| b.boosted.total_cmp(&a.boosted).then(a.id.cmp(&b.id)));
        let positions = |list: &[&Hit]| list.iter().map(|h| h.meta.url.clone()).collect::<Vec<_>>();
        for k in [0, 1, 3, len / 2, len, len + 1, usize::MAX] {
            let mut kept = hits.clone();
            keep_best(&mut kept, k);
            let want: Vec<&Hit> = expected.iter().take(k).copied().collect();
            assert_eq!(positions(&kept.iter().collect::<Vec<_>>()), positions(&want), "len {len}, k {k}");
        }
    }
}

#[test]
fn theme_boost_on_topic_numbers_equals_the_string_rule() {
    let cfg = config("theme_boosts: {primary: 0.04, secondary: 0.02, secondary_count: 2, conflicting: 0.06}");
    let meta = |domain: &str, section: &str, platform: &str, role: &str| Metadata {
        domain: domain.into(),
        section: section.into(),
        platform: platform.into(),
        role: role.into(),
        ..Metadata::default()
    };
    let records: Vec<crate::model::Record> = [
        meta("kb", "sdk", "android", ""),
        meta("KB", " SDK", "Android ", "admin"),
        meta("kb", "sdk", "ios", "operator"),
        meta("kb", "", "", ""),
        meta("", "api", "web", "  "),
        meta("kb", "sdk", "Андроид", ""),
    ]
    .into_iter()
    .enumerate()
    .map(|(number, meta)| crate::model::Record {
        id: format!("r{number}"),
        meta,
        text: Default::default(),
        embedding: Vec::new(),
    })
    .collect();
    let fields =
        |domain: Option<&str>, section: Option<&str>, platform: Option<&str>, role: Option<&str>| ThemeFields {
            domain: domain.map(Into::into),
            section: section.map(Into::into),
            platform: platform.map(Into::into),
            role: role.map(Into::into),
        };
    let hints = [
        RoutingHint { primary: Some(fields(None, None, Some("ANDROID"), None)), secondary: vec![], named: true },
        RoutingHint {
            primary: Some(fields(Some("kb"), Some("sdk"), Some("ios"), None)),
            secondary: vec![fields(None, Some("api"), None, None), fields(None, None, None, Some("Admin"))],
            named: false,
        },
        RoutingHint { primary: Some(fields(None, None, Some("never-seen"), None)), secondary: vec![], named: true },
        RoutingHint {
            primary: Some(fields(None, None, Some("андроид"), Some(""))), secondary: vec![], named: true
        },
        RoutingHint { primary: None, secondary: vec![fields(Some("kb"), None, None, Some("operator"))], named: false },
        RoutingHint { primary: Some(fields(None, None, Some("android "), None)), secondary: vec![], named: true },
    ];
    // Records are numbered (their features made) when the index loads, before a request turns
    // its hint into numbers in the same table.
    let table = crate::index::features::TopicTable::default();
    let features: Vec<crate::index::RecordFeatures> =
        records.iter().map(|record| crate::index::RecordFeatures::of(record, &table)).collect();
    let mut differs = 0;
    for routing in hints {
        let ctx = BoostContext { routing: Some(routing), ..BoostContext::default() };
        let hint = TopicHint::of(ctx.routing.as_ref().unwrap(), &table);
        for (record, features) in records.iter().zip(&features) {
            let input = BoostInput { meta: &record.meta, text: None, features: Some(features) };
            let by_strings = boost_factors(0.5, &input, &cfg, &ctx);
            let by_numbers = boost_factors_with(0.5, &input, &cfg, &ctx, Some(&hint));
            assert_eq!(by_numbers, by_strings, "{} {:?}", record.id, ctx.routing);
            differs += usize::from(by_strings.0 != 0.5);
        }
    }
    assert!(differs > 10, "the hints must boost and penalise some records: {differs}");
}
