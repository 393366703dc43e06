//! Docusaurus front matter: the YAML block between `---` lines at the top of a page.

use super::inline::clean_inline;

/// What the front matter said; fields are empty when absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrontMatter {
    pub title: String,
    pub description: String,
    pub tags: Vec<String>,
    pub slug: String,
    pub sidebar_label: String,
}

/// Splits a page into its front matter, body and problems; broken or unclosed front matter
/// is reported and ignored (defaults), never fatal.
pub fn split_front_matter(source: &str) -> (FrontMatter, &str, Vec<String>) {
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
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).map_err(|error| error.to_string())?;
    let serde_yaml_ng::Value::Mapping(map) = value else { return Err("front matter is not a mapping".to_string()) };
    let text = |key: &str| map.get(key).map(scalar_text).unwrap_or_default();
    let tags = match map.get("tags") {
        Some(serde_yaml_ng::Value::Sequence(items)) => items
            .iter()
            .map(|item| match item {
                serde_yaml_ng::Value::Mapping(tag) => tag.get("label").map(scalar_text).unwrap_or_default(),
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

fn scalar_text(value: &serde_yaml_ng::Value) -> String {
    match value {
        serde_yaml_ng::Value::String(text) => text.clone(),
        serde_yaml_ng::Value::Number(number) => number.to_string(),
        serde_yaml_ng::Value::Bool(flag) => flag.to_string(),
        serde_yaml_ng::Value::Null
        | serde_yaml_ng::Value::Sequence(_)
        | serde_yaml_ng::Value::Mapping(_)
        | serde_yaml_ng::Value::Tagged(_) => String::new(),
    }
}
