//! `theme_label` of a hit: which theme a record belongs to, from its topic metadata.

use super::Theme;
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
}
