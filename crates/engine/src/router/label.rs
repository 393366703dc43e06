//! `theme_label` of a hit: which theme a record belongs to, from its topic metadata.

use super::{Theme, TopicFields};
use crate::model::Metadata;

/// The most specific theme whose set fields (domain, section, platform, role) all equal the
/// record's; ties go to the higher priority, then the smaller id. `None` when no theme matches.
pub fn infer_theme_label(meta: &Metadata, themes: &[Theme]) -> Option<String> {
    most_specific(themes.iter().filter(|theme| theme.fields_view().matches(meta)))
}

/// Of the themes that match a record, the label: the most specific one with a set field, ties to
/// the higher priority, then the smaller id.
fn most_specific<'a>(matching: impl Iterator<Item = &'a Theme>) -> Option<String> {
    matching
        .map(|theme| (theme, theme.fields_view().specificity()))
        .filter(|(_, specificity)| *specificity > 0)
        .max_by(|(a, a_specificity), (b, b_specificity)| {
            a_specificity.cmp(b_specificity).then(a.priority.total_cmp(&b.priority)).then_with(|| b.id.cmp(&a.id))
        })
        .map(|(theme, _)| theme.id.clone())
}

/// `infer_theme_label` for the records of one request: with the topic table of the index they
/// come from, the themes' fields are turned into topic numbers once, and a record with features is
/// matched on its topic numbers (four integer comparisons per theme) instead of its metadata
/// strings. Without a table, every record is matched on its strings.
pub(crate) struct ThemeLabels<'a> {
    themes: &'a [Theme],
    topics: Option<Vec<TopicFields>>,
}

impl<'a> ThemeLabels<'a> {
    pub(crate) fn new(themes: &'a [Theme], table: Option<&crate::index::features::TopicTable>) -> Self {
        let topics =
            table.map(|table| themes.iter().map(|theme| TopicFields::of(theme.fields_view(), table)).collect());
        Self { themes, topics }
    }

    pub(crate) fn themes(&self) -> &'a [Theme] {
        self.themes
    }

    /// `infer_theme_label(meta, themes)`; `topics`: the record's `RecordFeatures::topics`, when
    /// it has features.
    pub(crate) fn label(&self, meta: &Metadata, topics: Option<&[u32; 4]>) -> Option<String> {
        match (&self.topics, topics) {
            (Some(numbers), Some(topics)) => most_specific(
                self.themes.iter().zip(numbers).filter(|(_, numbers)| numbers.matches(topics)).map(|(theme, _)| theme),
            ),
            _ => most_specific(self.themes.iter().filter(|theme| theme.fields_view().matches(meta))),
        }
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
        // Records are numbered (their features made) when the index loads, before any request
        // makes its `ThemeLabels`: the themes' values then have the records' numbers.
        let table = crate::index::features::TopicTable::default();
        let records: Vec<(Metadata, RecordFeatures)> = [
            ("sdk_docs", "sdk", "android"),
            (" SDK_DOCS ", "Sdk", "ANDROID\t"),
            ("sdk_docs", "sdk", "ios"),
            ("sdk_docs", "sdk", "web"),
            ("api_docs", "sdk", "android"),
            ("", "", ""),
        ]
        .into_iter()
        .map(|(domain, section, platform)| {
            let meta = meta(domain, section, platform);
            let record = crate::model::Record {
                id: "r".into(),
                meta: meta.clone(),
                text: Default::default(),
                embedding: Vec::new(),
            };
            (meta, RecordFeatures::of(&record, &table))
        })
        .collect();
        let labels = ThemeLabels::new(&themes, Some(&table));
        // Without the table the records' numbers are not read: strings decide.
        let unnumbered = ThemeLabels::new(&themes, None);
        for (meta, features) in &records {
            let expected = infer_theme_label(meta, &themes);
            assert_eq!(labels.label(meta, Some(&features.topics)), expected, "{meta:?}");
            assert_eq!(labels.label(meta, None), expected, "{meta:?}");
            assert_eq!(unnumbered.label(meta, Some(&features.topics)), expected, "{meta:?}");
        }
        assert_eq!(
            labels.label(&meta("sdk_docs", "sdk", "android"), None).as_deref(),
            Some("sdk_android"),
            "the checks above are not all None"
        );
    }
}
