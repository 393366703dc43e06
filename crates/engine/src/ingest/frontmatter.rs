//! Docusaurus front matter: the YAML block between `---` lines at the top of a page.

use super::inline::clean_inline;
use crate::yaml::Value;

/// What the front matter said; fields are empty when absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrontMatter {
    pub title: String,
    pub(crate) description: String,
    pub tags: Vec<String>,
    pub(crate) slug: String,
    pub(crate) sidebar_label: String,
}

/// Splits a page into its front matter, body and problems; broken or unclosed front matter
/// is reported and ignored (defaults), never fatal.
pub(crate) fn split_front_matter(source: &str) -> (FrontMatter, &str, Vec<String>) {
    let Some(rest) = source.strip_prefix("---\n") else { return (FrontMatter::default(), source, Vec::new()) };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let yaml = &rest[..offset];
            let body = &rest[offset + line.len()..];
            return match parse_front_matter(yaml) {
                Ok(front) => (front, body, Vec::new()),
                Err(message) => (FrontMatter::default(), body, vec![format!("broken front matter ignored: {message}")]),
            };
        }
        offset += line.len();
    }
    (FrontMatter::default(), rest, vec!["front matter is not closed by '---'; treated as text".to_string()])
}

fn parse_front_matter(yaml: &str) -> Result<FrontMatter, String> {
    if yaml.trim().is_empty() {
        return Ok(FrontMatter::default());
    }
    let value: Value = crate::yaml::from_str(yaml).map_err(|error| error.to_string())?;
    let Value::Mapping(map) = value else { return Err("front matter is not a mapping".to_string()) };
    let text = |key: &str| map.get(key).map(scalar_text).unwrap_or_default();
    let tags = match map.get("tags") {
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|item| match item {
                Value::Mapping(tag) => tag.get("label").map(scalar_text).unwrap_or_default(),
                other => scalar_text(other),
            })
            .filter(|tag| !tag.is_empty())
            .collect(),
        Some(other) => scalar_text(other).split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect(),
        None => Vec::new(),
    };
    Ok(FrontMatter {
        title: clean_inline(&text("title")).trim().to_string(),
        description: clean_inline(&text("description")).trim().to_string(),
        tags,
        slug: text("slug"),
        sidebar_label: text("sidebar_label"),
    })
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        Value::Null | Value::Sequence(_) | Value::Mapping(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_fields_tags_and_scalars() {
        let page = "---\ntitle: Setup *guide*\ndescription: 'It''s: fine'\ntags:\n  - label: Android\n    \
                    permalink: /android\n  - ios\n  - 2\nslug: /setup\nsidebar_label: 1.0\nextra: yes\n---\nBody\n";
        let (front, body, problems) = split_front_matter(page);
        assert_eq!(body, "Body\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(front.tags, ["Android", "ios", "2"]);
        assert_eq!((front.slug.as_str(), front.sidebar_label.as_str()), ("/setup", "1.0"));
        assert_eq!(front.description, "It's: fine");
        let (front, _, _) = split_front_matter("---\ntags: a, b ,,c\ntitle: 0755\n---\n");
        assert_eq!((front.tags, front.title.as_str()), (vec!["a".to_string(), "b".into(), "c".into()], "0755"));
    }

    #[test]
    fn broken_front_matter_is_ignored_with_its_line() {
        let (front, body, problems) = split_front_matter("---\ntitle: A\ntags: [x\n---\nBody\n");
        assert_eq!((front, body), (FrontMatter::default(), "Body\n"));
        assert!(problems.len() == 1 && problems[0].contains("line 2"), "{problems:?}");
        let (_, _, problems) = split_front_matter("---\ntitle: A\ntitle: B\n---\n");
        assert!(problems.len() == 1 && problems[0].contains("duplicate"), "{problems:?}");
    }
}
