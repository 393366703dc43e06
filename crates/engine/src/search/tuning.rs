//! What shapes ranking besides the index and the runtime settings: the themes file, boosting.yaml
//! and the synonyms directory, as one value (`Tuning`) that a search reads once, so ops can reload
//! the files without a restart (`POST /internal/retrieval/config/reload`, or `SIGHUP`). A reload
//! reads and checks all three and either replaces them together or keeps the ones in use and says
//! why (`TuningStatus`, shown by `/health` and `/metrics`).
//!
//! Each file is read once per load, at most `max_file_bytes` of it, and what is checked is what
//! goes into use: the bytes read are parsed once, and the parsed value is installed. A file that
//! holds nothing (empty, only comments, `{}`), a boosting.yaml without one of its sections or a
//! themes file without a theme is refused at start-up; at a reload, so is a file that lacks a
//! section the file in use has, or that is gone while the one in use came from it (a truncated or
//! half-written file must not switch ranking to neutral).

use super::boosting_config::{BoostingConfig, SECTIONS};
use super::synonyms::Synonyms;
use crate::index::features::BoostCacheKey;
use crate::router::{parse_themes_yaml, RouterConfig, ThemeSet, ThemesFile, ThemesProvider, YamlThemesProvider};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The setting names of the three files, as `/health` and errors name them.
pub const THEMES_SETTING: &str = "RETR_THEMES_PATH";
pub(crate) const BOOSTING_SETTING: &str = "RETR_BOOSTING_PATH";
pub(crate) const SYNONYMS_SETTING: &str = "RETR_SYNONYMS_DIR";

/// The largest tuning file read, by default (`RETR_CONFIG_MAX_FILE_BYTES`): the synonyms
/// directory's files count together.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 << 20;

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
    /// The files it was loaded from (those that exist), by setting.
    pub files: Vec<FileInUse>,
}

/// One tuning file (or the synonyms directory) as it was read: what `/config` shows and what the
/// next reload is compared with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInUse {
    /// `RETR_THEMES_PATH`, `RETR_BOOSTING_PATH` or `RETR_SYNONYMS_DIR`.
    pub setting: &'static str,
    /// SHA-256 of the bytes read, in hex; for the synonyms directory, of each `.txt` file's name
    /// and bytes in name order.
    pub sha256: String,
    /// How many bytes were read.
    pub bytes: u64,
    /// The file's top-level sections (themes, boosting), or the directory's `.txt` files.
    pub sections: Vec<String>,
}

impl std::fmt::Debug for Tuning {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Tuning")
            .field("themes", &self.theme_set.len())
            .field("generation", &self.generation)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
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
            files: Vec::new(),
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

    /// The file of `setting` it was loaded from, when one existed.
    pub fn file(&self, setting: &str) -> Option<&FileInUse> {
        self.files.iter().find(|file| file.setting == setting)
    }
}

/// Where the three files are, and how large one may be (the service builds it:
/// `Settings::tuning_files`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningFiles {
    pub themes: PathBuf,
    pub boosting: PathBuf,
    pub synonyms: PathBuf,
    /// The largest file read; the synonyms directory's `.txt` files count together.
    pub max_file_bytes: u64,
}

/// A tuning loaded from the files, with the settings whose file is absent and every problem found.
struct Loaded {
    tuning: Tuning,
    missing: Vec<String>,
    problems: Vec<String>,
}

impl TuningFiles {
    /// The three files, each read once, checked and loaded from the bytes read. `installed` is the
    /// tuning in use at a reload (`None` at start-up): every section its files have must still be
    /// there, and a file it came from must still exist. Returns the tuning with the settings whose
    /// file is absent (the service runs without them: no themes, no theme routing; no boosting,
    /// every factor 1; no synonyms), or every problem, each starting with its setting and the
    /// file's name (`RETR_BOOSTING_PATH: boosting.yaml: …`).
    pub fn load(&self, installed: Option<&Tuning>) -> Result<(Tuning, Vec<String>), Vec<String>> {
        self.load_reporting(installed, &|_| {})
    }

    /// `load`, calling `reading` with each setting before its file is read (a reload that takes
    /// too long names the file it is stuck on).
    pub fn load_reporting(
        &self,
        installed: Option<&Tuning>,
        reading: &dyn Fn(&'static str),
    ) -> Result<(Tuning, Vec<String>), Vec<String>> {
        let read = self.read(installed, reading);
        if read.problems.is_empty() {
            Ok((read.tuning, read.missing))
        } else {
            Err(read.problems)
        }
    }

    /// The three files loaded as they are: a missing or unusable file counts as absent, an ignored
    /// value or line is logged (`serve` loads with `load` and refuses to start on a problem).
    /// Returns the tuning and the settings whose file is absent.
    pub fn load_leniently(&self) -> (Tuning, Vec<String>) {
        let read = self.read(None, &|_| {});
        for problem in &read.problems {
            tracing::warn!(%problem, "config file problem; what it affects is left out");
        }
        (read.tuning, read.missing)
    }

    fn read(&self, installed: Option<&Tuning>, reading: &dyn Fn(&'static str)) -> Loaded {
        let mut problems = Vec::new();
        let mut missing = Vec::new();
        let mut files = Vec::new();
        let had = |setting: &str| installed.and_then(|tuning| tuning.file(setting));
        let absent = |setting: &str, missing: &mut Vec<String>, problems: &mut Vec<String>| {
            missing.push(setting.to_string());
            if had(setting).is_some() {
                problems.push(format!("{setting}: the file in use is gone (restore it, or restart to run without it)"));
            }
        };

        reading(THEMES_SETTING);
        let themes = match read_capped(&self.themes, self.max_file_bytes) {
            Ok(None) => {
                absent(THEMES_SETTING, &mut missing, &mut problems);
                ThemesFile::default()
            }
            Err(error) => {
                problems.push(format!("{THEMES_SETTING}: {}: {error}", file_name(&self.themes)));
                ThemesFile::default()
            }
            Ok(Some(bytes)) => {
                let name = file_name(&self.themes);
                let mut file_problems = Vec::new();
                let file = match text_of(&bytes) {
                    Err(error) => {
                        file_problems.push(error);
                        None
                    }
                    Ok(text) => {
                        let sections = top_level_keys(text);
                        if sections.as_ref().is_some_and(Vec::is_empty) {
                            file_problems.push("holds nothing (empty, only comments or `{}`)".to_string());
                            None
                        } else if let Some(problem) = sections.as_ref().and_then(|sections| {
                            lacking(sections, &required(had(THEMES_SETTING), &["themes"]), installed.is_some())
                        }) {
                            file_problems.push(problem);
                            None
                        } else {
                            match parse_themes_yaml(text) {
                                Ok(file) => {
                                    if file.themes.is_empty() {
                                        file_problems.push("defines no theme".to_string());
                                    }
                                    files.push(in_use(THEMES_SETTING, &bytes, sections.unwrap_or_default()));
                                    Some(file)
                                }
                                Err(error) => {
                                    file_problems.push(error.to_string());
                                    None
                                }
                            }
                        }
                    }
                };
                problems
                    .extend(file_problems.into_iter().map(|problem| format!("{THEMES_SETTING}: {name}: {problem}")));
                file.unwrap_or_default()
            }
        };

        reading(BOOSTING_SETTING);
        let boosting = match read_capped(&self.boosting, self.max_file_bytes) {
            Ok(None) => {
                absent(BOOSTING_SETTING, &mut missing, &mut problems);
                BoostingConfig::default()
            }
            Err(error) => {
                problems.push(format!("{BOOSTING_SETTING}: {}: {error}", file_name(&self.boosting)));
                BoostingConfig::default()
            }
            Ok(Some(bytes)) => {
                let name = file_name(&self.boosting);
                let mut file_problems = Vec::new();
                let config = match text_of(&bytes) {
                    Err(error) => {
                        file_problems.push(error);
                        BoostingConfig::default()
                    }
                    Ok(text) => {
                        let sections = top_level_keys(text);
                        if sections.as_ref().is_some_and(Vec::is_empty) {
                            file_problems.push("holds no section (empty, only comments or `{}`)".to_string());
                        }
                        let (config, warnings) = BoostingConfig::from_yaml(text);
                        file_problems.extend(warnings.iter().map(ToString::to_string));
                        if let Some(sections) = sections.filter(|sections| !sections.is_empty()) {
                            let required = required(had(BOOSTING_SETTING), &SECTIONS);
                            file_problems.extend(lacking(&sections, &required, installed.is_some()));
                            files.push(in_use(BOOSTING_SETTING, &bytes, sections));
                        }
                        config
                    }
                };
                problems
                    .extend(file_problems.into_iter().map(|problem| format!("{BOOSTING_SETTING}: {name}: {problem}")));
                config
            }
        };

        reading(SYNONYMS_SETTING);
        let synonyms = match read_dir_capped(&self.synonyms, self.max_file_bytes) {
            Ok(None) => {
                absent(SYNONYMS_SETTING, &mut missing, &mut problems);
                Synonyms::default()
            }
            Err(error) => {
                problems.push(format!("{SYNONYMS_SETTING}: {error}"));
                Synonyms::default()
            }
            Ok(Some(read)) => {
                let mut texts = Vec::new();
                let mut hasher = Sha256::new();
                let mut bytes = 0;
                for (name, content) in &read {
                    hasher.update(name.as_bytes());
                    hasher.update([0]);
                    hasher.update(content);
                    hasher.update([0]);
                    bytes += content.len() as u64;
                    match text_of(content) {
                        Ok(text) => texts.push((name.as_str(), text)),
                        Err(error) => problems.push(format!("{SYNONYMS_SETTING}: {name}: {error}")),
                    }
                }
                let (synonyms, malformed) = Synonyms::from_files(texts);
                problems.extend(malformed.into_iter().map(|problem| format!("{SYNONYMS_SETTING}: {problem}")));
                files.push(FileInUse {
                    setting: SYNONYMS_SETTING,
                    sha256: hex(&hasher.finalize()),
                    bytes,
                    sections: read.into_iter().map(|(name, _)| name).collect(),
                });
                synonyms
            }
        };

        let provider = YamlThemesProvider::from_themes(themes.themes, themes.router.clone());
        let mut tuning =
            Tuning::new(&provider, themes.router).with_boosting(Arc::new(boosting)).with_synonyms(Arc::new(synonyms));
        tuning.files = files;
        Loaded { tuning, missing, problems }
    }
}

/// The sections a file must have: those of the file in use at a reload, else `at_start_up`.
fn required(in_use: Option<&FileInUse>, at_start_up: &[&str]) -> Vec<String> {
    match in_use {
        Some(file) => file.sections.clone(),
        None => at_start_up.iter().map(|section| section.to_string()).collect(),
    }
}

/// The problem of a file without some of the `required` sections.
fn lacking(sections: &[String], required: &[String], reload: bool) -> Option<String> {
    let lacking: Vec<&str> =
        required.iter().filter(|section| !sections.contains(section)).map(String::as_str).collect();
    if lacking.is_empty() {
        return None;
    }
    let why = if reload { "which the file in use has" } else { "which is required" };
    Some(format!(
        "lacks {} ({why}: a truncated or half-written file?); write a section left neutral as `name: {{}}`",
        lacking.join(", ")
    ))
}

fn in_use(setting: &'static str, bytes: &[u8], sections: Vec<String>) -> FileInUse {
    FileInUse { setting, sha256: hex(&Sha256::digest(bytes)), bytes: bytes.len() as u64, sections }
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The file's name without its directories (errors name it; a reload's answer never shows a
/// server path).
fn file_name(path: &Path) -> String {
    path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string())
}

fn text_of(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|error| format!("not UTF-8 text ({error})"))
}

/// The top-level keys of a YAML document: empty for an empty document, only comments or `{}`;
/// `None` when it is not a mapping (the file's own parser names the problem).
fn top_level_keys(text: &str) -> Option<Vec<String>> {
    match crate::yaml::from_str::<crate::yaml::Value>(text).ok()? {
        crate::yaml::Value::Null => Some(Vec::new()),
        crate::yaml::Value::Mapping(mapping) => {
            Some(mapping.keys().map(|key| key.as_str().unwrap_or("<non-string>").to_string()).collect())
        }
        _ => None,
    }
}

/// Opens `path` for reading without waiting: a FIFO whose writer never comes must not block
/// (it is refused below, as a device or a directory is).
fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// The bytes of the regular file at `path`, read once and at most `max` of them; `Ok(None)` when
/// nothing is there. A FIFO, a device, a directory or a file over `max` bytes is an error.
pub(crate) fn read_capped(path: &Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    let file = match open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read it: {error}")),
    };
    // The opened file's type and size, not the path's: what is checked is what is read.
    let metadata = file.metadata().map_err(|error| format!("cannot read it: {error}"))?;
    if !metadata.is_file() {
        return Err("not a regular file (a FIFO, a device or a directory)".to_string());
    }
    let too_large = |size: u64| format!("{size} bytes, over the limit of {max} (RETR_CONFIG_MAX_FILE_BYTES)");
    if metadata.len() > max {
        return Err(too_large(metadata.len()));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(|error| format!("cannot read it: {error}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("more than {max} bytes, the limit (RETR_CONFIG_MAX_FILE_BYTES)"));
    }
    Ok(Some(bytes))
}

/// A directory's files as (file name, bytes).
type NamedFiles = Vec<(String, Vec<u8>)>;

/// The `.txt` files of the directory `dir` as (file name, bytes), in name order, each read once,
/// at most `max` bytes together; `Ok(None)` when nothing is there.
fn read_dir_capped(dir: &Path, max: u64) -> Result<Option<NamedFiles>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read the directory: {error}")),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().map(str::to_string))
        .filter(|name| name.ends_with(".txt"))
        .collect();
    names.sort();
    let mut files = Vec::new();
    let mut left = max;
    for name in names {
        match read_capped(&dir.join(&name), left) {
            Ok(Some(bytes)) => {
                left -= bytes.len() as u64;
                files.push((name, bytes));
            }
            // Removed since the directory was listed.
            Ok(None) => {}
            Err(error) if left < max => {
                return Err(format!("{name}: {error} (the directory's .txt files count together)"))
            }
            Err(error) => return Err(format!("{name}: {error}")),
        }
    }
    Ok(Some(files))
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
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }

    /// The project's three files copied to `dir`.
    fn project_copies(dir: &std::path::Path) -> TuningFiles {
        let files = files(dir);
        let project = crate::fixtures::project_tuning_files();
        std::fs::copy(&project.themes, &files.themes).unwrap();
        std::fs::copy(&project.boosting, &files.boosting).unwrap();
        std::fs::create_dir(&files.synonyms).unwrap();
        std::fs::copy(project.synonyms.join("_all.txt"), files.synonyms.join("_all.txt")).unwrap();
        files
    }

    #[test]
    fn missing_files_are_named_and_load_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        let (tuning, missing) = files.load(None).unwrap();
        assert_eq!(missing, vec![THEMES_SETTING, BOOSTING_SETTING, SYNONYMS_SETTING]);
        assert!(tuning.theme_set.is_empty() && tuning.files.is_empty());
    }

    #[test]
    fn every_broken_file_is_a_problem_naming_its_setting_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let files = project_copies(dir.path());
        std::fs::write(&files.themes, "themes: [oops").unwrap();
        let boosting = std::fs::read_to_string(&files.boosting).unwrap();
        std::fs::write(&files.boosting, boosting.replace("lexical: 0.7", "lexical: -3")).unwrap();
        std::fs::write(files.synonyms.join("_all.txt"), "айфон, iphone\nодно слово\n").unwrap();
        let problems = files.load(None).unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
        for (problem, prefix) in problems.iter().zip([
            "RETR_THEMES_PATH: themes.yaml: ",
            "RETR_BOOSTING_PATH: boosting.yaml: fusion.weights.lexical",
            "RETR_SYNONYMS_DIR: _all.txt: line 2",
        ]) {
            assert!(problem.starts_with(prefix), "{problem}");
        }
    }

    #[test]
    fn the_project_files_have_no_problem() {
        for themes in ["config/themes.yaml", "config/themes-adguard.yaml"] {
            let files = TuningFiles {
                themes: crate::fixtures::project_file(themes),
                ..crate::fixtures::project_tuning_files()
            };
            let (tuning, missing) = files.load(None).unwrap();
            assert!(missing.is_empty());
            assert_eq!(tuning.files.len(), 3);
        }
    }

    /// A file that parses to nothing would switch ranking to neutral (or routing off) without a
    /// word: it is a problem at start-up and at a reload.
    #[test]
    fn a_file_that_holds_nothing_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let files = project_copies(dir.path());
        let (installed, _) = files.load(None).unwrap();
        for empty in ["", "# only a comment\n", "{}\n", "\n\n"] {
            for (path, setting) in [(&files.themes, THEMES_SETTING), (&files.boosting, BOOSTING_SETTING)] {
                let kept = std::fs::read(path).unwrap();
                std::fs::write(path, empty).unwrap();
                for at in [None, Some(&installed)] {
                    let problems = files.load(at).unwrap_err();
                    assert!(
                        problems.iter().any(|p| p.starts_with(setting) && p.contains("holds no")),
                        "{empty:?}: {problems:?}"
                    );
                }
                std::fs::write(path, kept).unwrap();
            }
        }
        std::fs::write(&files.themes, "themes: []\n").unwrap();
        let problems = files.load(None).unwrap_err();
        assert_eq!(problems, vec!["RETR_THEMES_PATH: themes.yaml: defines no theme"]);
    }

    /// A truncated file: at start-up boosting.yaml needs every section; at a reload, both files
    /// need every section the files in use have.
    #[test]
    fn a_file_without_a_section_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let files = project_copies(dir.path());
        let (installed, _) = files.load(None).unwrap();
        let boosting = std::fs::read_to_string(&files.boosting).unwrap();
        let truncated = &boosting[..boosting.find("\nstructure:").unwrap()];
        std::fs::write(&files.boosting, truncated).unwrap();
        for at in [None, Some(&installed)] {
            let problems = files.load(at).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].starts_with(
                    "RETR_BOOSTING_PATH: boosting.yaml: lacks structure, source_boosts, depth_penalty, transliteration"
                ),
                "{problems:?}"
            );
        }
        std::fs::write(&files.boosting, &boosting).unwrap();
        // The themes file in use has a router section; one without it is a truncated file at a
        // reload (at start-up the router's defaults apply).
        let themes = std::fs::read_to_string(&files.themes).unwrap();
        let router = themes.find("\nrouter:").unwrap() + 1;
        let end = router + themes[router..].find("\nthemes:").unwrap();
        std::fs::write(&files.themes, format!("{}{}", &themes[..router], &themes[end + 1..])).unwrap();
        files.load(None).unwrap();
        let problems = files.load(Some(&installed)).unwrap_err();
        assert!(problems[0].starts_with("RETR_THEMES_PATH: themes.yaml: lacks router"), "{problems:?}");
        // A file the tuning in use came from is gone.
        std::fs::remove_file(&files.boosting).unwrap();
        assert!(files.load(None).is_ok());
        let problems = files.load(Some(&installed)).unwrap_err();
        assert!(problems.iter().any(|p| p.starts_with("RETR_BOOSTING_PATH: the file in use is gone")), "{problems:?}");
    }

    /// What was checked is what is in use: one read, whose digest the tuning carries.
    #[test]
    fn the_tuning_names_the_bytes_it_was_loaded_from() {
        let dir = tempfile::tempdir().unwrap();
        let files = project_copies(dir.path());
        let (tuning, _) = files.load(None).unwrap();
        let boosting = tuning.file(BOOSTING_SETTING).unwrap();
        assert_eq!(boosting.sha256, hex(&Sha256::digest(std::fs::read(&files.boosting).unwrap())));
        assert_eq!(boosting.sections.len(), SECTIONS.len());
        assert_eq!(tuning.file(SYNONYMS_SETTING).unwrap().sections, vec!["_all.txt"]);
    }

    #[test]
    fn a_file_over_the_limit_or_not_a_regular_file_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let files = project_copies(dir.path());
        let small = TuningFiles { max_file_bytes: 1024, ..files.clone() };
        let problems = small.load(None).unwrap_err();
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("RETR_THEMES_PATH: themes.yaml: ") && p.contains("over the limit of 1024")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("RETR_SYNONYMS_DIR: _all.txt: ") && p.contains("limit")),
            "{problems:?}"
        );
        std::fs::remove_file(&files.boosting).unwrap();
        std::fs::create_dir(&files.boosting).unwrap();
        let problems = files.load(None).unwrap_err();
        assert_eq!(
            problems,
            vec!["RETR_BOOSTING_PATH: boosting.yaml: not a regular file (a FIFO, a device or a directory)"]
        );
    }
}
