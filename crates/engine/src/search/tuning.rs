//! What shapes ranking besides the index and the runtime settings: the themes file, boosting.yaml
//! and the synonyms directory, as one value (`Tuning`) that a search reads once, so ops can reload
//! the files without a restart (`POST /internal/retrieval/config/reload`, or `SIGHUP`). A reload
//! reads and checks all three and either replaces them together or keeps the ones in use and says
//! why (`TuningStatus`, shown by `/health` and `/metrics`).

use super::boosting_config::BoostingConfig;
use super::synonyms::Synonyms;
use crate::index::features::BoostCacheKey;
use crate::router::{RouterConfig, ThemeSet, ThemesProvider, YamlThemesProvider};
use std::path::PathBuf;
use std::sync::Arc;

/// The setting names of the three files, as `/health` and errors name them.
pub const THEMES_SETTING: &str = "RETR_THEMES_PATH";
pub(crate) const BOOSTING_SETTING: &str = "RETR_BOOSTING_PATH";
pub(crate) const SYNONYMS_SETTING: &str = "RETR_SYNONYMS_DIR";

/// The themes, boosting and synonyms a search uses, loaded together.
#[derive(Clone)]
pub struct Tuning {
    /// The themes file's themes, their keyword rules compiled once.
    pub theme_set: Arc<ThemeSet>,
    pub(crate) router_config: RouterConfig,
    pub(crate) boosting: Arc<BoostingConfig>,
    /// Names `boosting` (which never changes once loaded) for the records' boost factor caches.
    pub(crate) boost_key: BoostCacheKey,
    pub(crate) synonyms: Arc<Synonyms>,
    /// Which reload loaded it (0: start-up), for what is cached per tuning.
    pub generation: u64,
}

impl Default for Tuning {
    /// No themes, neutral boosting, no synonyms.
    fn default() -> Self {
        Self::new(&YamlThemesProvider::from_themes(Vec::new(), RouterConfig::default()), RouterConfig::default())
    }
}

impl Tuning {
    /// No boosting and no synonyms over `themes`.
    pub(crate) fn new(themes: &dyn ThemesProvider, router_config: RouterConfig) -> Self {
        Self {
            theme_set: Arc::new(ThemeSet::new(themes.list_themes())),
            router_config,
            boosting: Arc::default(),
            boost_key: BoostCacheKey::new(),
            synonyms: Arc::default(),
            generation: 0,
        }
    }

    pub(crate) fn with_boosting(mut self, boosting: Arc<BoostingConfig>) -> Self {
        self.boosting = boosting;
        self.boost_key = BoostCacheKey::new();
        self
    }

    pub(crate) fn with_synonyms(mut self, synonyms: Arc<Synonyms>) -> Self {
        self.synonyms = synonyms;
        self
    }
}

/// Where the three files are (the service builds it: `Settings::tuning_files`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningFiles {
    pub themes: PathBuf,
    pub boosting: PathBuf,
    pub synonyms: PathBuf,
}

impl TuningFiles {
    /// The files that are configured but absent, by setting name. The service runs without them
    /// (no themes: no theme routing; no boosting: every factor 1; no synonyms).
    pub fn missing(&self) -> Vec<String> {
        [(THEMES_SETTING, &self.themes), (BOOSTING_SETTING, &self.boosting), (SYNONYMS_SETTING, &self.synonyms)]
            .into_iter()
            .filter(|(_, path)| !path.exists())
            .map(|(setting, _)| setting.to_string())
            .collect()
    }

    /// What is wrong with the files that exist, each naming its setting: a themes file that does
    /// not parse, a boosting value that would be ignored, an unreadable synonyms file or a
    /// malformed line in one. Empty when they can be used as they are.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.themes.exists() {
            if let Err(error) = YamlThemesProvider::try_load(&self.themes) {
                problems.push(format!("{THEMES_SETTING}: {error}"));
            }
        }
        if self.boosting.exists() {
            match std::fs::read_to_string(&self.boosting) {
                Ok(text) => {
                    let (_, warnings) = BoostingConfig::from_yaml(&text);
                    problems.extend(warnings.iter().map(|warning| format!("{BOOSTING_SETTING}: {warning}")));
                }
                Err(error) => problems.push(format!("{BOOSTING_SETTING}: cannot read it: {error}")),
            }
        }
        if self.synonyms.exists() {
            problems.extend(
                Synonyms::problems_in_dir(&self.synonyms).into_iter().map(|p| format!("{SYNONYMS_SETTING}: {p}")),
            );
        }
        problems
    }

    /// The three files loaded, when none of them has a problem.
    pub fn load(&self) -> Result<Tuning, Vec<String>> {
        let problems = self.problems();
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(self.load_leniently())
    }

    /// The three files loaded as they are: a missing or unusable file counts as absent, an
    /// ignored value or line is logged (`serve` checks `problems` before it gets here).
    pub fn load_leniently(&self) -> Tuning {
        let themes = YamlThemesProvider::load(&self.themes);
        let router_config = themes.router_config().clone();
        Tuning::new(&themes, router_config)
            .with_boosting(BoostingConfig::load_shared(&self.boosting))
            .with_synonyms(Arc::new(Synonyms::load_dir(&self.synonyms)))
    }
}

/// What ops need to know about the files in use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TuningStatus {
    /// The configured files that were absent when they were last loaded, by setting.
    pub missing: Vec<String>,
    /// Why the last reload was rejected (the files in use are older), until one succeeds: one
    /// problem per line, each starting with the setting it is about.
    pub reload_error: Option<Vec<String>>,
    /// How many reloads replaced the files since start-up.
    pub generation: u64,
}

impl TuningStatus {
    /// The settings whose files the last rejected reload found broken (what `/health` names: the
    /// problems themselves may quote server paths and go to the reload's caller and the log).
    pub fn rejected_settings(&self) -> Vec<&str> {
        let mut settings: Vec<&str> =
            self.reload_error.iter().flatten().map(|problem| problem.split(':').next().unwrap_or_default()).collect();
        settings.dedup();
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &std::path::Path) -> TuningFiles {
        TuningFiles {
            themes: dir.join("themes.yaml"),
            boosting: dir.join("boosting.yaml"),
            synonyms: dir.join("synonyms"),
        }
    }

    #[test]
    fn missing_files_are_named_and_load_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        assert_eq!(files.missing(), vec![THEMES_SETTING, BOOSTING_SETTING, SYNONYMS_SETTING]);
        assert!(files.problems().is_empty());
        let tuning = files.load().unwrap();
        assert!(tuning.theme_set.is_empty());
    }

    #[test]
    fn every_broken_file_is_a_problem_naming_its_setting() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        std::fs::write(&files.themes, "themes: [oops").unwrap();
        std::fs::write(&files.boosting, "fusion:\n  weights:\n    dense: -3\n").unwrap();
        std::fs::create_dir(&files.synonyms).unwrap();
        std::fs::write(files.synonyms.join("_all.txt"), "айфон, iphone\nодно слово\n").unwrap();
        let problems = files.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        for (problem, setting) in problems.iter().zip([THEMES_SETTING, BOOSTING_SETTING, SYNONYMS_SETTING]) {
            assert!(problem.starts_with(setting), "{problem}");
        }
        assert!(problems[2].contains("_all.txt") && problems[2].contains("line 2"), "{}", problems[2]);
        assert!(files.load().is_err());
    }

    #[test]
    fn the_project_files_have_no_problem() {
        for themes in ["config/themes.yaml", "config/themes-adguard.yaml"] {
            let files = TuningFiles {
                themes: crate::fixtures::project_file(themes),
                ..crate::fixtures::project_tuning_files()
            };
            assert_eq!(files.problems(), Vec::<String>::new());
        }
    }
}
