//! Clarifying questions: asked only when the router was unsure *and* the real top
//! hits split across several themes.

use super::{RoutingResult, Theme};
use serde::Serialize;

/// The question shown to the user.
pub(crate) const CLARIFICATION_QUESTION: &str = "Уточните, пожалуйста, о каком разделе идёт речь:";

/// At most this many options are offered.
pub(crate) const MAX_CLARIFICATION_OPTIONS: usize = 5;

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ClarificationOption {
    pub theme_id: String,
    pub display_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Clarification {
    pub question: String,
    pub options: Vec<ClarificationOption>,
}

/// A clarification when `routing.requires_disambiguation` holds and the labels of the top hits
/// (best first) name at least two distinct themes. Options are those themes in the order of their
/// best hit, with display names from `themes` (the id when the theme is unknown).
pub fn build_clarification(
    routing: &RoutingResult,
    top_hit_labels: &[Option<String>],
    themes: &[Theme],
) -> Option<Clarification> {
    if !routing.requires_disambiguation {
        return None;
    }
    let mut theme_ids: Vec<&str> = Vec::new();
    for label in top_hit_labels.iter().flatten() {
        if !theme_ids.contains(&label.as_str()) {
            theme_ids.push(label);
        }
    }
    if theme_ids.len() < 2 {
        return None;
    }
    let options = theme_ids
        .into_iter()
        .take(MAX_CLARIFICATION_OPTIONS)
        .map(|theme_id| ClarificationOption {
            theme_id: theme_id.to_string(),
            display_name: themes
                .iter()
                .find(|theme| theme.id == theme_id)
                .map_or_else(|| theme_id.to_string(), |theme| theme.display_name.clone()),
        })
        .collect();
    Some(Clarification { question: CLARIFICATION_QUESTION.to_string(), options })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::RouterMode;

    fn routing(requires_disambiguation: bool) -> RoutingResult {
        RoutingResult { requires_disambiguation, ..RoutingResult::empty(RouterMode::Heuristic) }
    }

    fn labels(values: &[Option<&str>]) -> Vec<Option<String>> {
        values.iter().map(|value| value.map(Into::into)).collect()
    }

    fn themes() -> Vec<Theme> {
        let theme = |id: &str, name: &str| Theme {
            id: id.into(),
            display_name: name.into(),
            domain: "d".into(),
            section: None,
            platform: None,
            role: None,
            description: String::new(),
            keywords: Vec::new(),
            priority: 1.0,
        };
        vec![theme("user_agent", "АРМ оператора"), theme("user_admin", "АРМ администратора")]
    }

    #[test]
    fn options_come_from_the_hits_in_hit_order() {
        let hits = labels(&[Some("user_admin"), None, Some("user_admin"), Some("user_agent"), Some("blog")]);
        let clarification = build_clarification(&routing(true), &hits, &themes()).unwrap();
        assert_eq!(clarification.question, CLARIFICATION_QUESTION);
        let options: Vec<(&str, &str)> =
            clarification.options.iter().map(|o| (o.theme_id.as_str(), o.display_name.as_str())).collect();
        assert_eq!(
            options,
            vec![("user_admin", "АРМ администратора"), ("user_agent", "АРМ оператора"), ("blog", "blog")]
        );
    }

    #[test]
    fn no_question_when_router_sure_or_hits_in_one_theme() {
        let split = labels(&[Some("user_admin"), Some("user_agent")]);
        assert_eq!(build_clarification(&routing(false), &split, &themes()), None);
        let one = labels(&[Some("user_admin"), None, Some("user_admin")]);
        assert_eq!(build_clarification(&routing(true), &one, &themes()), None);
        assert_eq!(build_clarification(&routing(true), &[], &themes()), None);
    }
}
