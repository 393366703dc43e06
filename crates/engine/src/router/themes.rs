//! Themes (the product, role or area of a question): the `Theme` entity, the `ThemesProvider` trait and the YAML-file
//! provider that reads `config/themes.yaml` (the format `themes suggest` prints).

use super::config::RouterConfig;
use super::ThemeFields;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One theme: a combination of topic metadata fields plus what the router needs to recognise it.
///
/// `section`, `platform` and `role` are unset when absent or empty in the file; `domain` is empty
/// only when the theme is defined by the other fields alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Theme {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub(crate) display_name: String,
    #[serde(default)]
    pub(crate) domain: String,
    #[serde(default)]
    pub(crate) section: Option<String>,
    #[serde(default)]
    pub platform: Option<String>,
    #[serde(default)]
    pub(crate) role: Option<String>,
    #[serde(default)]
    pub(crate) description: String,
    #[serde(default)]
    pub(crate) keywords: Vec<String>,
    #[serde(default = "default_priority")]
    pub(crate) priority: f32,
}

fn default_priority() -> f32 {
    1.0
}

impl Theme {
    /// The metadata fields this theme stands for (only the set ones are `Some`).
    pub fn fields(&self) -> ThemeFields {
        self.fields_view().to_fields()
    }

    /// The theme's fields borrowed from it (nothing copied); an empty domain is no condition.
    pub(crate) fn fields_view(&self) -> super::FieldsView<'_> {
        super::FieldsView {
            domain: Some(self.domain.as_str()).filter(|value| !value.is_empty()),
            section: self.section.as_deref(),
            platform: self.platform.as_deref(),
            role: self.role.as_deref(),
        }
    }

    fn normalise(mut self) -> Self {
        let clean = |value: Option<String>| value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        self.id = self.id.trim().to_string();
        self.domain = self.domain.trim().to_string();
        self.section = clean(self.section);
        self.platform = clean(self.platform);
        self.role = clean(self.role);
        if self.display_name.trim().is_empty() {
            self.display_name = self.id.clone();
        }
        self.keywords.retain(|keyword| !keyword.trim().is_empty());
        self
    }
}

/// Where themes come from: a YAML file now, a database or HTTP service later.
pub trait ThemesProvider: Send + Sync {
    fn list_themes(&self) -> Vec<Theme>;
    fn get_theme(&self, theme_id: &str) -> Option<Theme>;
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThemesError {
    #[error("cannot read themes file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("themes file is not valid YAML of the expected shape: {0}")]
    Parse(String),
    #[error("invalid themes file: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

/// The whole themes file: `themes:` as a list (or a map keyed by id) and an optional `router:` section.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThemesFile {
    pub themes: Vec<Theme>,
    pub(crate) router: RouterConfig,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ThemeList {
    List(Vec<Theme>),
    Map(BTreeMap<String, Theme>),
}

#[derive(Deserialize)]
struct RawThemesFile {
    themes: ThemeList,
    #[serde(default, deserialize_with = "crate::yaml::empty_as_default")]
    router: RouterConfig,
}

/// Parses and validates a themes document: ids non-empty and unique, at least one metadata field
/// per theme, priority finite and positive, router thresholds in range.
pub fn parse_themes_yaml(text: &str) -> Result<ThemesFile, ThemesError> {
    let raw: RawThemesFile = crate::yaml::from_str(text).map_err(|error| ThemesError::Parse(error.to_string()))?;
    let themes: Vec<Theme> = match raw.themes {
        ThemeList::List(themes) => themes,
        ThemeList::Map(themes) => themes
            .into_iter()
            .map(|(id, theme)| Theme { id: if theme.id.is_empty() { id } else { theme.id.clone() }, ..theme })
            .collect(),
    };
    let themes: Vec<Theme> = themes.into_iter().map(Theme::normalise).collect();
    let mut problems = raw.router.problems();
    let mut seen = BTreeSet::new();
    for (position, theme) in themes.iter().enumerate() {
        if theme.id.is_empty() {
            problems.push(format!("theme #{} has an empty id", position + 1));
        } else if !seen.insert(theme.id.as_str()) {
            problems.push(format!("theme id {:?} is defined more than once", theme.id));
        }
        if theme.fields_view().specificity() == 0 {
            problems.push(format!("theme {:?} sets none of domain, section, platform, role", theme.id));
        }
        if !(theme.priority.is_finite() && theme.priority > 0.0) {
            problems.push(format!("theme {:?} has priority {}, expected a positive number", theme.id, theme.priority));
        }
    }
    if problems.is_empty() {
        Ok(ThemesFile { themes, router: raw.router })
    } else {
        Err(ThemesError::Invalid(problems))
    }
}

/// Themes read once from a YAML file. A missing or broken file is logged and yields no themes, which
/// makes the router behave as mode `none`; search keeps working.
#[derive(Debug, Clone)]
pub struct YamlThemesProvider {
    file: ThemesFile,
    load_error: Option<ThemesError>,
}

impl YamlThemesProvider {
    /// Loads `path`; never fails (see the type's contract). `load_error()` tells what went wrong.
    pub fn load(path: impl AsRef<Path>) -> Self {
        let path = path.as_ref().to_path_buf();
        match Self::try_load(&path) {
            Ok(provider) => {
                tracing::info!(path = %path.display(), num_themes = provider.file.themes.len(), "themes loaded");
                provider
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), reason = %error, "themes unavailable, theme routing disabled");
                Self { file: ThemesFile::default(), load_error: Some(error) }
            }
        }
    }

    /// Loads `path`, returning the reason when the file is missing or invalid.
    pub fn try_load(path: impl AsRef<Path>) -> Result<Self, ThemesError> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&path)
            .map_err(|error| ThemesError::Read { path: path.clone(), message: error.to_string() })?;
        let file = parse_themes_yaml(&text)?;
        Ok(Self { file, load_error: None })
    }

    /// A provider over themes already in memory (tests, other sources).
    pub(crate) fn from_themes(themes: Vec<Theme>, router: RouterConfig) -> Self {
        Self { file: ThemesFile { themes, router }, load_error: None }
    }

    /// The `router:` section of the file, or the defaults.
    pub fn router_config(&self) -> &RouterConfig {
        &self.file.router
    }

    pub fn load_error(&self) -> Option<&ThemesError> {
        self.load_error.as_ref()
    }
}

impl ThemesProvider for YamlThemesProvider {
    fn list_themes(&self) -> Vec<Theme> {
        self.file.themes.clone()
    }

    fn get_theme(&self, theme_id: &str) -> Option<Theme> {
        self.file.themes.iter().find(|theme| theme.id == theme_id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_list_with_defaults_and_router_section() {
        let file = parse_themes_yaml(
            "themes:\n  - id: sdk_android\n    domain: sdk_docs\n    section: sdk\n    platform: android\n    role: ''\n    keywords: [android, gradle]\nrouter:\n  ambiguity_gap: 0.2\n",
        )
        .unwrap();
        let theme = &file.themes[0];
        assert_eq!(theme.display_name, "sdk_android");
        assert_eq!(theme.priority, 1.0);
        assert_eq!(theme.role, None);
        assert_eq!(theme.platform.as_deref(), Some("android"));
        assert_eq!(file.router.ambiguity_gap, 0.2);
        assert_eq!(file.router.heuristic_hard_filter_gap, 0.35);
    }

    #[test]
    fn parses_map_keyed_by_id_and_ignores_extra_fields() {
        let file = parse_themes_yaml(
            "themes:\n  chatcenter_user_docs_supervisor:\n    display_name: АРМ супервайзера\n    domain: chatcenter_user_docs\n    section: supervisor\n    stats:\n      doc_count: 3\n",
        )
        .unwrap();
        assert_eq!(file.themes[0].id, "chatcenter_user_docs_supervisor");
        assert_eq!(file.themes[0].display_name, "АРМ супервайзера");
    }

    #[test]
    fn rejects_duplicate_empty_and_fieldless_themes() {
        let error = parse_themes_yaml(
            "themes:\n  - {id: a, domain: d}\n  - {id: a, domain: d}\n  - {id: '', domain: d}\n  - {id: b}\n  - {id: c, domain: d, priority: -1}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("\"a\" is defined more than once"), "{error}");
        assert!(error.contains("#3 has an empty id"), "{error}");
        assert!(error.contains("\"b\" sets none"), "{error}");
        assert!(error.contains("\"c\" has priority -1"), "{error}");
    }

    #[test]
    fn rejects_bad_router_thresholds_and_unknown_router_keys() {
        assert!(parse_themes_yaml("themes: []\nrouter:\n  ambiguity_gap: 3\n").is_err());
        assert!(parse_themes_yaml("themes: []\nrouter:\n  hard_gap: 0.3\n").is_err());
    }

    #[test]
    fn missing_or_broken_file_gives_no_themes() {
        let dir = tempfile::tempdir().unwrap();
        let missing = YamlThemesProvider::load(dir.path().join("absent.yaml"));
        assert!(missing.list_themes().is_empty());
        assert!(matches!(missing.load_error(), Some(ThemesError::Read { .. })));
        let broken_path = dir.path().join("broken.yaml");
        std::fs::write(&broken_path, "themes: [ {id: x, domain: ").unwrap();
        let broken = YamlThemesProvider::load(&broken_path);
        assert!(broken.list_themes().is_empty());
        assert!(matches!(broken.load_error(), Some(ThemesError::Parse(_))));
        assert_eq!(broken.get_theme("x"), None);
    }
}
