//! `theme_label` of a hit: which theme a record belongs to, from its topic metadata.

use super::{Theme, TopicFields};
use crate::model::Metadata;

/// The most specific theme whose set fields (domain, section, platform, role) all equal the
/// record's; ties go to the higher priority, then the smaller id. `None` when no theme matches.
pub fn infer_theme_label(meta: &Metadata, themes: &[Theme]) -> Option<String> {
    themes
        .iter()
        .map(|theme| (theme, theme.fields_view()))
        .filter(|(_, fields)| fields.specificity() > 0 && fields.matches(meta))
        .max_by(|(a, a_fields), (b, b_fields)| {
            a_fields
                .specificity()
                .cmp(&b_fields.specificity())
                .then(a.priority.total_cmp(&b.priority))
                .then_with(|| b.id.cmp(&a.id))
        })
        .map(|(theme, _)| theme.id.clone())
}

/// `infer_theme_label` for the records of one request: the themes' fields are turned into topic
/// numbers once, and a record with features is matched on its topic numbers (four integer
/// comparisons per theme) instead of its metadata strings.
pub struct ThemeLabels<'a> {
    themes: &'a [Theme],
    topics: Vec<TopicFields>,
}

impl<'a> ThemeLabels<'a> {
    pub fn new(themes: &'a [Theme]) -> Self {
        Self { themes, topics: themes.iter().map(|theme| TopicFields::of(theme.fields_view())).collect() }
    }

    pub fn themes(&self) -> &'a [Theme] {
        self.themes
    }

    /// `infer_theme_label(meta, themes)`; `topics`: the record's `RecordFeatures::topics`, when
    /// it has features.
    pub fn label(&self, meta: &Metadata, topics: Option<&[u32; 4]>) -> Option<String> {
        self.themes
            .iter()
            .zip(&self.topics)
            .map(|(theme, numbers)| (theme, theme.fields_view(), numbers))
            .filter(|(_, fields, numbers)| {
                fields.specificity() > 0
                    && match topics {
                        Some(topics) => numbers.matches(topics),
                        None => fields.matches(meta),
                    }
            })
            .max_by(|(a, a_fields, _), (b, b_fields, _)| {
                a_fields
                    .specificity()
                    .cmp(&b_fields.specificity())
                    .then(a.priority.total_cmp(&b.priority))
                    .then_with(|| b.id.cmp(&a.id))
            })
            .map(|(theme, ..)| theme.id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn theme(id: &str, domain: &str, section: Option<&str>, platform: Option<&str>) -> Theme {
        Theme {
            id: id.into(),
            display_name: id.into(),
            domain: domain.into(),
            section: section.map(Into::into),
            platform: platform.map(Into::into),
            role: None,
            description: String::new(),
            keywords: Vec::new(),
            priority: 1.0,
        }
    }

    fn meta(domain: &str, section: &str, platform: &str) -> Metadata {
        Metadata { domain: domain.into(), section: section.into(), platform: platform.into(), ..Metadata::default() }
    }

    #[test]
    fn most_specific_matching_theme_wins() {
        let themes = vec![
            theme("sdk_all", "sdk_docs", None, None),
            theme("sdk_android", "sdk_docs", Some("sdk"), Some("android")),
            theme("sdk_ios", "sdk_docs", Some("sdk"), Some("ios")),
        ];
        assert_eq!(infer_theme_label(&meta("sdk_docs", "sdk", "android"), &themes).as_deref(), Some("sdk_android"));
        assert_eq!(infer_theme_label(&meta("sdk_docs", "sdk", "web"), &themes).as_deref(), Some("sdk_all"));
        assert_eq!(infer_theme_label(&meta("api_docs", "sdk", "android"), &themes), None);
        assert_eq!(infer_theme_label(&meta("", "", ""), &themes), None);
    }

    #[test]
    fn equal_specificity_ties_by_priority_then_id() {
        let mut themes = vec![theme("b", "d", Some("s"), None), theme("a", "d", None, Some("p"))];
        assert_eq!(infer_theme_label(&meta("d", "s", "p"), &themes).as_deref(), Some("a"));
        themes[0].priority = 2.0;
        assert_eq!(infer_theme_label(&meta("d", "s", "p"), &themes).as_deref(), Some("b"));
    }

    #[test]
    fn labels_on_topic_numbers_equal_labels_on_strings() {
        use crate::index::RecordFeatures;
        let mut themes = vec![
            theme("sdk_all", "sdk_docs", None, None),
            theme("sdk_android", "SDK_docs", Some("sdk"), Some("Android")),
            theme("sdk_ios", "sdk_docs", Some("sdk"), Some("ios")),
            theme("unknown", "sdk_docs", Some("sdk"), Some("a value no record has")),
            theme("empty", "", None, None),
        ];
        themes[2].priority = 2.0;
        let labels = ThemeLabels::new(&themes);
        for (domain, section, platform) in [
            ("sdk_docs", "sdk", "android"),
            (" SDK_DOCS ", "Sdk", "ANDROID\t"),
            ("sdk_docs", "sdk", "ios"),
            ("sdk_docs", "sdk", "web"),
            ("api_docs", "sdk", "android"),
            ("", "", ""),
        ] {
            let meta = meta(domain, section, platform);
            let record =
                crate::model::Record { id: "r".into(), meta: meta.clone(), text: String::new(), embedding: Vec::new() };
            let features = RecordFeatures::of(&record);
            let expected = infer_theme_label(&meta, &themes);
            assert_eq!(labels.label(&meta, Some(&features.topics)), expected, "{meta:?}");
            assert_eq!(labels.label(&meta, None), expected, "{meta:?}");
        }
        assert_eq!(
            labels.label(&meta("sdk_docs", "sdk", "android"), None).as_deref(),
            Some("sdk_android"),
            "the checks above are not all None"
        );
    }
}
