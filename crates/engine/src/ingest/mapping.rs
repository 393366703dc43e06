//! Topic metadata rules: a YAML file maps a page's path and title to `domain`,
//! `section`, `platform`, `role`, `page_type` (and optionally `product`). The knowledge lives in
//! the file (`config/mapping.yaml`, `config/mapping-adguard.yaml`), never in code.

use serde::Deserialize;
use std::path::Path;

/// The compiled-in default mapping (the seed's ChatCenter + SDK layout).
pub(crate) const DEFAULT_MAPPING_YAML: &str = include_str!("../../../../config/mapping.yaml");

/// The topic fields derived for one page; copied onto its doc, sections and chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Topic {
    pub(crate) domain: String,
    pub(crate) section: String,
    pub(crate) platform: String,
    pub(crate) role: String,
    pub(crate) page_type: String,
    pub(crate) product: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(value) => vec![value],
            OneOrMany::Many(values) => values,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicFields {
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    section: Option<String>,
    #[serde(default)]
    platform: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    page_type: Option<String>,
    #[serde(default)]
    product: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathRuleFile {
    prefix: OneOrMany,
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    section: Option<String>,
    #[serde(default)]
    platform: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    page_type: Option<String>,
    #[serde(default)]
    product: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageTypeRuleFile {
    page_type: String,
    #[serde(default, deserialize_with = "crate::yaml::empty_as_default")]
    sections: Vec<String>,
    #[serde(default, deserialize_with = "crate::yaml::empty_as_default")]
    path_keywords: Vec<String>,
    #[serde(default, deserialize_with = "crate::yaml::empty_as_default")]
    title_keywords: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MappingFile {
    #[serde(default, deserialize_with = "crate::yaml::empty_as_default")]
    default: TopicFields,
    #[serde(default, deserialize_with = "crate::yaml::empty_as_default")]
    rules: Vec<PathRuleFile>,
    #[serde(default, deserialize_with = "crate::yaml::empty_as_default")]
    section_roles: std::collections::BTreeMap<String, String>,
    #[serde(default, deserialize_with = "crate::yaml::empty_as_default")]
    page_types: Vec<PageTypeRuleFile>,
}

#[derive(Debug, Clone)]
struct PathRule {
    prefixes: Vec<String>,
    fields: TopicFields,
}

/// Parsed mapping rules.
///
/// Resolution for a path relative to the tree root: every rule whose `prefix` (a whole-segment
/// path prefix, leading `/` ignored) matches fills the fields that are still empty, in file order
/// (so put specific prefixes first); `role` then falls back to `section_roles[section]`; any
/// field still unset takes `default`. `page_type` comes from the first matching rule, else the
/// first `page_types` entry whose `sections` contain the section or whose `path_keywords` match a
/// path segment (hyphen-word aware: `install` matches `how-to-install`, not `installer`) or whose
/// `title_keywords` occur in the lowercased title; else `default.page_type`.
#[derive(Debug, Clone, Default)]
pub struct MappingRules {
    default: TopicFields,
    rules: Vec<PathRule>,
    section_roles: std::collections::BTreeMap<String, String>,
    page_types: Vec<PageTypeRuleFile>,
}

#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    #[error("mapping file {path} cannot be read: {message}")]
    Unreadable { path: String, message: String },
    #[error("mapping file {path} is invalid: {message}")]
    Invalid { path: String, message: String },
}

impl MappingRules {
    /// Parses mapping YAML; `origin` names the file in errors.
    pub(crate) fn from_yaml(yaml: &str, origin: &str) -> Result<Self, MappingError> {
        let file: MappingFile = crate::yaml::from_str(yaml)
            .map_err(|error| MappingError::Invalid { path: origin.to_string(), message: error.to_string() })?;
        let rules = file
            .rules
            .into_iter()
            .map(|rule| PathRule {
                prefixes: rule.prefix.into_vec().iter().map(|p| normalize_prefix(p)).collect(),
                fields: TopicFields {
                    domain: rule.domain,
                    section: rule.section,
                    platform: rule.platform,
                    role: rule.role,
                    page_type: rule.page_type,
                    product: rule.product,
                },
            })
            .collect();
        Ok(Self { default: file.default, rules, section_roles: file.section_roles, page_types: file.page_types })
    }

    pub fn from_file(path: &Path) -> Result<Self, MappingError> {
        let yaml = std::fs::read_to_string(path).map_err(|error| MappingError::Unreadable {
            path: path.display().to_string(),
            message: error.to_string(),
        })?;
        Self::from_yaml(&yaml, &path.display().to_string())
    }

    /// The compiled-in default (`config/mapping.yaml`).
    pub fn builtin() -> Self {
        Self::from_yaml(DEFAULT_MAPPING_YAML, "config/mapping.yaml").unwrap_or_default()
    }

    /// The topic of a page at `relative_path` (relative to the tree root, `/`-separated) with `title`.
    pub(crate) fn resolve(&self, relative_path: &str, title: &str) -> Topic {
        let path = relative_path.trim_start_matches('/');
        let mut fields = TopicFields::default();
        let mut matched = false;
        for rule in &self.rules {
            if rule.prefixes.iter().any(|prefix| path_has_prefix(path, prefix)) {
                fill(&mut fields, &rule.fields);
                matched = true;
            }
        }
        // A page no rule knows: its first folder is its section, so a site ingested without a
        // mapping written for it still has areas (the router learns themes from them).
        if !matched && fields.section.is_none() && self.default.section.as_deref().is_none_or(str::is_empty) {
            fields.section = path.split_once('/').map(|(folder, _)| folder.to_string()).filter(|f| !f.is_empty());
        }
        let section = fields.section.clone().or_else(|| self.default.section.clone()).unwrap_or_default();
        if fields.role.is_none() {
            fields.role = self.section_roles.get(&section).cloned();
        }
        let page_type = fields.page_type.clone().or_else(|| self.page_type_by_keywords(path, &section, title));
        Topic {
            domain: fields.domain.or_else(|| self.default.domain.clone()).unwrap_or_default(),
            platform: fields.platform.or_else(|| self.default.platform.clone()).unwrap_or_default(),
            role: fields.role.or_else(|| self.default.role.clone()).unwrap_or_default(),
            page_type: page_type.or_else(|| self.default.page_type.clone()).unwrap_or_default(),
            product: fields.product.or_else(|| self.default.product.clone()).unwrap_or_default(),
            section,
        }
    }

    fn page_type_by_keywords(&self, path: &str, section: &str, title: &str) -> Option<String> {
        let title = title.to_lowercase();
        let segments: Vec<Vec<String>> = path
            .split('/')
            .filter(|segment| !segment.is_empty())
            .map(|segment| segment_words(strip_extension(segment)))
            .collect();
        self.page_types
            .iter()
            .find(|rule| {
                rule.sections.iter().any(|s| s == section)
                    || rule.path_keywords.iter().any(|keyword| {
                        let wanted = segment_words(keyword);
                        segments.iter().any(|words| contains_sequence(words, &wanted))
                    })
                    || rule.title_keywords.iter().any(|keyword| title.contains(&keyword.to_lowercase()))
            })
            .map(|rule| rule.page_type.clone())
    }
}

fn fill(target: &mut TopicFields, source: &TopicFields) {
    let pairs = [
        (&mut target.domain, &source.domain),
        (&mut target.section, &source.section),
        (&mut target.platform, &source.platform),
        (&mut target.role, &source.role),
        (&mut target.page_type, &source.page_type),
        (&mut target.product, &source.product),
    ];
    for (slot, value) in pairs {
        if slot.is_none() {
            slot.clone_from(value);
        }
    }
}

fn normalize_prefix(prefix: &str) -> String {
    prefix.trim_start_matches('/').trim_end_matches('/').to_string()
}

fn path_has_prefix(path: &str, prefix: &str) -> bool {
    if prefix.is_empty() {
        return true;
    }
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/') || prefix.ends_with(".md") || prefix.ends_with(".mdx"),
        None => false,
    }
}

fn strip_extension(segment: &str) -> &str {
    segment.rsplit_once('.').map(|(stem, _)| stem).filter(|stem| !stem.is_empty()).unwrap_or(segment)
}

fn segment_words(segment: &str) -> Vec<String> {
    segment.split(['-', '_', '.', ' ']).filter(|word| !word.is_empty()).map(|word| word.to_lowercase()).collect()
}

fn contains_sequence(words: &[String], wanted: &[String]) -> bool {
    !wanted.is_empty() && words.windows(wanted.len()).any(|window| window == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adguard() -> MappingRules {
        MappingRules::from_yaml(include_str!("../../../../config/mapping-adguard.yaml"), "adguard").unwrap()
    }

    #[test]
    fn seed_sdk_example() {
        let topic = MappingRules::builtin().resolve("android/getting-started/installation.md", "Установка");
        assert_eq!(
            (topic.domain.as_str(), topic.section.as_str(), topic.platform.as_str(), topic.role.as_str()),
            ("sdk_docs", "sdk", "android", "integrator")
        );
        assert_eq!(topic.page_type, "install");
    }

    #[test]
    fn seed_chatcenter_examples() {
        let rules = MappingRules::builtin();
        let admin = rules.resolve("/docs/admin/settings/tags.md", "Обязательные теги");
        assert_eq!(
            (admin.domain.as_str(), admin.section.as_str(), admin.role.as_str()),
            ("chatcenter_user_docs", "admin", "administrator")
        );
        assert_eq!(admin.platform, "");
        let cases = [
            ("docs/agent/chats.md", "agent", "operator"),
            ("docs/supervisor/reports.md", "supervisor", "supervisor"),
            ("docs/api/webhooks.md", "api", "integrator"),
            ("docs/chat-bot/start.md", "chat-bot", "administrator"),
            ("docs/faq/login.md", "faq", ""),
            ("blog/release-5-2.md", "blog", ""),
        ];
        for (path, section, role) in cases {
            let topic = rules.resolve(path, "x");
            assert_eq!((topic.section.as_str(), topic.role.as_str()), (section, role), "{path}");
        }
        assert_eq!(rules.resolve("blog/release-5-2.md", "Релиз 5.2").page_type, "changelog");
        assert_ne!(rules.resolve("docs/agent/mobile.md", "Мобильная версия").page_type, "changelog");
        assert_eq!(rules.resolve("docs/agent/history.md", "История версий").page_type, "changelog");
        assert_eq!(rules.resolve("docs/faq/login.md", "Вход").page_type, "faq");
        assert_eq!(rules.resolve("ios/push.md", "Push").platform, "ios");
        assert_eq!(rules.resolve("sdk/web/install.md", "x").platform, "web");
        assert_eq!(rules.resolve("other/page.md", "x").domain, "external_site");
    }

    #[test]
    fn prefixes_match_whole_segments() {
        let rules = MappingRules::builtin();
        assert_eq!(rules.resolve("docs/agentless/x.md", "x").section, "");
        assert_eq!(rules.resolve("androidx/x.md", "x").domain, "external_site");
    }

    #[test]
    fn adguard_layout() {
        let rules = adguard();
        let topic = rules.resolve("adguard-for-android/solving-problems/auto-blocker.md", "Auto Blocker");
        assert_eq!((topic.platform.as_str(), topic.page_type.as_str()), ("android", "faq"));
        assert_eq!(rules.resolve("adguard-for-ios/installation.md", "Как установить").page_type, "install");
        assert_eq!(rules.resolve("adguard-for-windows/features/x.md", "x").platform, "windows");
        assert_eq!(rules.resolve("adguard-for-windows-8/protection/x.md", "x").platform, "windows");
        assert_eq!(rules.resolve("adguard-for-mac/overview.md", "x").page_type, "overview");
        assert_eq!(rules.resolve("adguard-browser-extension/x.md", "x").platform, "browser-extension");
        assert_eq!(rules.resolve("adguard-for-linux/x.md", "x").platform, "linux");
        assert_eq!(rules.resolve("general/license/activation.md", "x").section, "license");
        assert_eq!(rules.resolve("general/how-to-install.md", "x").page_type, "install");
    }

    #[test]
    fn title_keywords_and_defaults() {
        let yaml = "default: {page_type: howto, domain: d}\npage_types:\n  - page_type: overview\n    title_keywords: [Обзор]\n";
        let rules = MappingRules::from_yaml(yaml, "t").unwrap();
        assert_eq!(rules.resolve("a/b.md", "Краткий обзор").page_type, "overview");
        assert_eq!(rules.resolve("a/b.md", "Настройка").page_type, "howto");
        assert_eq!(rules.resolve("a/b.md", "x").domain, "d");
    }

    #[test]
    fn a_page_no_rule_knows_takes_its_first_folder_as_section() {
        let rules = MappingRules::builtin();
        assert_eq!(rules.resolve("broker/engineer_guide/install.md", "x").section, "broker");
        assert_eq!(rules.resolve("index.md", "x").section, "", "a page at the root has no area");
        // A rule that matched keeps its own (possibly empty) section.
        assert_eq!(rules.resolve("docs/intro.md", "x").section, "");
        assert_eq!(rules.resolve("docs/agent/x.md", "x").section, "agent");
    }

    #[test]
    fn bad_yaml_names_the_file() {
        let error = MappingRules::from_yaml("rules: [{prefx: a}]", "my.yaml").unwrap_err().to_string();
        assert!(error.contains("my.yaml"), "{error}");
    }

    /// A key with nothing after it is an empty value, as serde_yaml_ng read it.
    #[test]
    fn keys_left_empty_are_empty() {
        let rules = MappingRules::from_yaml(
            "default:\nrules:\nsection_roles:\npage_types:\n  - page_type: guide\n    sections:\n    path_keywords: [setup]\n",
            "my.yaml",
        )
        .unwrap();
        assert_eq!(rules.page_types.len(), 1);
        assert!(rules.page_types[0].sections.is_empty() && rules.rules.is_empty());
    }
}
