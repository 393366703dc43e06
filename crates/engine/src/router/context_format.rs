//! Prompt-ready context for the LLM: numbered sources (`[n] Источник: …`, relevance, the text),
//! extended with title and url, grouped under `[THEME: <id>]` labels when the sources span several
//! themes (so the LLM answers each product or role apart), within a character budget.

use serde::Serialize;

/// Heading of every non-empty context: tells the LLM what follows is retrieved documentation.
pub(crate) const CONTEXT_HEADER: &str = "Найденные документы:";

/// Group label of sources without a theme when the others are grouped by theme.
pub(crate) const UNLABELLED_THEME: &str = "other";

/// The system-prompt rule for contexts that span several themes: answer each theme apart.
pub const MULTI_THEME_RULE: &str = "Если в контексте есть фрагменты с разными THEME, формируй ответ отдельными \
разделами по каждой THEME, с понятными заголовками («Для SDK Android», «Для АРМ администратора» и т.п.). \
Не смешивай инструкции.";

/// A truncated last source keeps at least this many characters of text, or is left out.
const MIN_TRUNCATED_TEXT_CHARS: usize = 80;

/// One retrieved chunk to put into the context, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextSource {
    pub title: String,
    pub url: String,
    pub source: String,
    pub relevance: f32,
    pub theme_label: Option<String>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FormattedContext {
    pub context: String,
    /// `MULTI_THEME_RULE` when the context is grouped by theme, for the caller's system prompt.
    pub system_prompt_rule: Option<String>,
    /// How many sources made it into the context (fully or truncated).
    pub(crate) used_sources: usize,
    /// True when a source was cut or left out to respect the budget.
    pub truncated: bool,
    /// Indices into the input sources in the order they are numbered [1], [2], … in `context`.
    pub order: Vec<usize>,
}

fn source_head(number: usize, source: &ContextSource) -> String {
    let origin = [&source.source, &source.url, &source.title].into_iter().find(|value| !value.is_empty());
    let mut head =
        format!("[{number}] Источник: {} (релевантность: {:.2})", origin.map_or("—", |v| v), source.relevance);
    if !source.title.is_empty() {
        head.push_str(&format!("\nЗаголовок: {}", source.title));
    }
    if !source.url.is_empty() {
        head.push_str(&format!("\nURL: {}", source.url));
    }
    head.push('\n');
    head
}

fn distinct_labels<'a>(sources: impl Iterator<Item = &'a ContextSource>) -> usize {
    let mut labels: Vec<&str> = sources.filter_map(|source| source.theme_label.as_deref()).collect();
    labels.sort_unstable();
    labels.dedup();
    labels.len()
}

/// Source indices grouped by label in the order of each group's best source.
fn grouped_order(sources: &[ContextSource]) -> Vec<usize> {
    let label = |index: usize| sources[index].theme_label.as_deref().unwrap_or(UNLABELLED_THEME);
    let mut groups: Vec<&str> = Vec::new();
    for index in 0..sources.len() {
        if !groups.contains(&label(index)) {
            groups.push(label(index));
        }
    }
    groups.iter().flat_map(|group| (0..sources.len()).filter(move |&index| label(index) == *group)).collect()
}

struct Rendered {
    text: String,
    used: Vec<usize>,
    truncated: bool,
}

fn render(sources: &[ContextSource], order: &[usize], grouped: bool, budget_chars: usize) -> Rendered {
    let mut rendered = Rendered { text: String::new(), used: Vec::new(), truncated: false };
    if CONTEXT_HEADER.chars().count() > budget_chars {
        rendered.truncated = true;
        return rendered;
    }
    rendered.text.push_str(CONTEXT_HEADER);
    let mut length = CONTEXT_HEADER.chars().count();
    let mut current_group: Option<&str> = None;
    for &index in order {
        let source = &sources[index];
        let mut prefix = String::new();
        let group = source.theme_label.as_deref().unwrap_or(UNLABELLED_THEME);
        if grouped && current_group != Some(group) {
            prefix.push_str(&format!("\n\n[THEME: {group}]"));
        }
        prefix.push_str("\n\n");
        prefix.push_str(&source_head(rendered.used.len() + 1, source));
        let prefix_length = prefix.chars().count();
        let text = source.text.trim();
        let text_length = text.chars().count();
        if length + prefix_length + text_length <= budget_chars {
            rendered.text.push_str(&prefix);
            rendered.text.push_str(text);
            length += prefix_length + text_length;
        } else {
            rendered.truncated = true;
            let room = budget_chars.saturating_sub(length + prefix_length + 1);
            if room >= MIN_TRUNCATED_TEXT_CHARS.min(text_length) && room > 0 {
                let cut: String = text.chars().take(room).collect();
                rendered.text.push_str(&prefix);
                rendered.text.push_str(cut.trim_end());
                rendered.text.push('…');
                rendered.used.push(index);
            }
            break;
        }
        current_group = Some(group);
        rendered.used.push(index);
    }
    rendered
}

/// Formats `sources` (best first) into one context of at most `budget_chars` characters.
///
/// Sources are numbered `[1]`, `[2]`… in output order. When they carry at least two distinct theme
/// labels they are grouped under `[THEME: <id>]` headers (groups ordered by their best source,
/// unlabelled ones under `[THEME: other]`) and `system_prompt_rule` is set. Sources are added in
/// order until the budget is reached; the first one that does not fit is cut at a character
/// boundary (marked `…`) if enough room is left, and the rest are left out. No sources → empty context.
pub fn format_context(sources: &[ContextSource], budget_chars: usize) -> FormattedContext {
    if sources.is_empty() {
        return FormattedContext {
            context: String::new(),
            system_prompt_rule: None,
            used_sources: 0,
            truncated: false,
            order: Vec::new(),
        };
    }
    let natural: Vec<usize> = (0..sources.len()).collect();
    let mut rendered = None;
    if distinct_labels(sources.iter()) >= 2 {
        let grouped = render(sources, &grouped_order(sources), true, budget_chars);
        if distinct_labels(grouped.used.iter().map(|&index| &sources[index])) >= 2 {
            rendered = Some((grouped, true));
        }
    }
    let (rendered, grouped) = rendered.unwrap_or_else(|| (render(sources, &natural, false, budget_chars), false));
    FormattedContext {
        context: rendered.text,
        system_prompt_rule: grouped.then(|| MULTI_THEME_RULE.to_string()),
        used_sources: rendered.used.len(),
        truncated: rendered.truncated,
        order: rendered.used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(title: &str, label: Option<&str>, text: &str) -> ContextSource {
        ContextSource {
            title: title.into(),
            url: format!("https://docs.example/{title}"),
            source: format!("{title}.md"),
            relevance: 0.873,
            theme_label: label.map(Into::into),
            text: text.into(),
        }
    }

    #[test]
    fn single_theme_uses_seed_layout_without_labels() {
        let formatted = format_context(&[source("a", Some("t"), "Текст А"), source("b", None, "Текст Б")], 10_000);
        assert_eq!(
            formatted.context,
            "Найденные документы:\n\n[1] Источник: a.md (релевантность: 0.87)\nЗаголовок: a\nURL: https://docs.example/a\nТекст А\n\n\
             [2] Источник: b.md (релевантность: 0.87)\nЗаголовок: b\nURL: https://docs.example/b\nТекст Б"
        );
        assert_eq!((formatted.used_sources, formatted.truncated, formatted.system_prompt_rule), (2, false, None));
    }

    #[test]
    fn several_themes_are_grouped_and_renumbered() {
        let sources = [
            source("a1", Some("user_admin"), "A1"),
            source("b1", Some("user_agent"), "B1"),
            source("a2", Some("user_admin"), "A2"),
            source("n", None, "N"),
        ];
        let formatted = format_context(&sources, 10_000);
        let context = &formatted.context;
        let position = |needle: &str| context.find(needle).unwrap_or_else(|| panic!("{needle} missing in {context}"));
        assert!(position("[THEME: user_admin]") < position("[1] Источник: a1.md"));
        assert!(position("[2] Источник: a2.md") < position("[THEME: user_agent]"));
        assert!(position("[THEME: user_agent]") < position("[3] Источник: b1.md"));
        assert!(position("[THEME: other]") < position("[4] Источник: n.md"));
        assert_eq!(formatted.system_prompt_rule.as_deref(), Some(MULTI_THEME_RULE));
        assert_eq!(formatted.used_sources, 4);
    }

    #[test]
    fn budget_is_respected_and_cut_on_a_char_boundary() {
        let long = "Ёжик в тумане ".repeat(100);
        let sources = [source("a", Some("x"), &long), source("b", Some("y"), "short")];
        for budget in [0, 10, 150, 300, 1000, 1500] {
            let formatted = format_context(&sources, budget);
            assert!(
                formatted.context.chars().count() <= budget,
                "budget {budget}: {}",
                formatted.context.chars().count()
            );
            assert!(formatted.truncated, "budget {budget}");
        }
        let formatted = format_context(&sources, 300);
        assert_eq!(formatted.used_sources, 1);
        assert!(formatted.context.ends_with('…'));
        assert_eq!(formatted.system_prompt_rule, None, "only one theme made it into the context");
        assert!(!formatted.context.contains("[THEME:"));
    }

    #[test]
    fn no_sources_no_context() {
        let formatted = format_context(&[], 100);
        assert_eq!((formatted.context.as_str(), formatted.used_sources, formatted.truncated), ("", 0, false));
    }
}
