//! A tenant's learned re-ranker: a linear model over `features::FEATURES`, kept as
//! `<feedback dir>/t-<tenant>/reranker.json` beside the tenant's feedback, and the registry the
//! search service reads models from. A refit writes a new file (atomically: a temporary file
//! renamed over it) and [`LearnedRerankers::refresh`] swaps the changed models in whole, so a
//! search uses either the old model or the new one.

use super::features::{Row, FEATURES};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// The model file's name in a tenant's feedback directory.
pub(crate) const MODEL_FILE: &str = "reranker.json";
/// A file of this name beside the model turns it off (the operator's switch).
pub const OFF_FILE: &str = "reranker.off";

/// How a model did on the part of the feedback it was not fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HeldOutScore {
    /// Feedback searches scored (one whose used pages are not among the candidates counts 0).
    pub records: usize,
    /// MRR@10 of the pages the answers used, in the service's own order.
    pub mrr_default: f64,
    /// The same in the learned order (out-of-fold: each part scored by a model fitted without it).
    pub mrr_learned: f64,
    /// Searches whose used page the learned order put higher / lower.
    pub wins: usize,
    pub losses: usize,
    /// The one-sided sign test's p-value of those wins and losses.
    pub p_value: f64,
}

/// A linear re-ranker of the first `candidates` hits: a hit's learned score is `weights · row`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LearnedReranker {
    /// The feature names, in the order of `weights` (must be `features::FEATURES`).
    pub features: Vec<String>,
    pub weights: Vec<f64>,
    /// Hits re-ranked: the search takes this many candidates, re-orders them, then cuts.
    pub candidates: usize,
    /// The L2 penalty on every weight but the score's (how much feedback it takes to move).
    pub regularization: f64,
    /// Feedback records it was fitted on.
    pub trained_records: usize,
    pub held_out: HeldOutScore,
    pub fitted_at_ms: u64,
}

impl LearnedReranker {
    /// Why the model cannot be used, if it cannot (a file written for another feature set).
    pub fn problem(&self) -> Option<String> {
        if self.features.len() != FEATURES.len() || self.features.iter().zip(FEATURES).any(|(a, b)| a != b) {
            return Some(format!("its features are not this version's ({})", FEATURES.join(", ")));
        }
        if self.weights.len() != FEATURES.len() || self.weights.iter().any(|w| !w.is_finite()) {
            return Some(format!("it needs {} finite weights", FEATURES.len()));
        }
        if !(1..=crate::model::MAX_RESULTS_CAP).contains(&self.candidates) {
            return Some(format!("candidates must be within 1..={}", crate::model::MAX_RESULTS_CAP));
        }
        None
    }

    pub fn score(&self, row: &Row) -> f64 {
        self.weights.iter().zip(row).map(|(w, x)| w * x).sum()
    }
}

/// Where a tenant's model is under the feedback directory `dir`.
pub fn model_path(dir: &Path, tenant: &str) -> PathBuf {
    crate::feedback::tenant_dir_of(dir, tenant).join(MODEL_FILE)
}

/// Writes a tenant's model atomically (temporary file, sync, rename, directory sync).
pub fn save(dir: &Path, tenant: &str, model: &LearnedReranker) -> std::io::Result<PathBuf> {
    let path = model_path(dir, tenant);
    let directory = path.parent().unwrap_or(dir).to_path_buf();
    std::fs::create_dir_all(&directory)?;
    let temporary = directory.join(format!("{MODEL_FILE}.tmp"));
    let bytes = serde_json::to_vec_pretty(model).map_err(std::io::Error::other)?;
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, &path)?;
    std::fs::File::open(&directory)?.sync_all()?;
    Ok(path)
}

fn read_model(path: &Path) -> Result<LearnedReranker, String> {
    let bytes = std::fs::read(path).map_err(|error| error.to_string())?;
    let model: LearnedReranker = serde_json::from_slice(&bytes).map_err(|error| error.to_string())?;
    match model.problem() {
        Some(problem) => Err(problem),
        None => Ok(model),
    }
}

/// The learned re-rankers of every tenant under one feedback directory (none without one).
#[derive(Debug, Default)]
pub struct LearnedRerankers {
    dir: Option<PathBuf>,
    models: RwLock<Arc<HashMap<String, Loaded>>>,
    /// The files found unusable, by tenant: not read (nor logged) again until they change.
    rejected: std::sync::Mutex<HashMap<String, Option<(SystemTime, u64)>>>,
}

#[derive(Debug, Clone)]
struct Loaded {
    stamp: Option<(SystemTime, u64)>,
    model: Arc<LearnedReranker>,
}

impl LearnedRerankers {
    /// The models under `dir`, loaded now (and again by each `refresh`).
    pub fn new(dir: Option<PathBuf>) -> Self {
        let rerankers = Self { dir, models: Default::default(), rejected: Default::default() };
        rerankers.refresh();
        rerankers
    }

    /// The tenant's model in use, if any.
    pub fn get(&self, tenant: &str) -> Option<Arc<LearnedReranker>> {
        self.models.read().unwrap_or_else(|p| p.into_inner()).get(tenant).map(|loaded| Arc::clone(&loaded.model))
    }

    /// Every tenant's model in use, by tenant.
    pub fn all(&self) -> Vec<(String, Arc<LearnedReranker>)> {
        let models = Arc::clone(&self.models.read().unwrap_or_else(|p| p.into_inner()));
        let mut all: Vec<_> =
            models.iter().map(|(tenant, loaded)| (tenant.clone(), Arc::clone(&loaded.model))).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Reads the directory again: a changed model file is loaded, a removed one (or one turned
    /// off by `reranker.off`) dropped, an unusable one logged and the tenant's previous model
    /// kept. The new set replaces the old in one step.
    pub fn refresh(&self) {
        let Some(dir) = &self.dir else { return };
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let current = Arc::clone(&self.models.read().unwrap_or_else(|p| p.into_inner()));
        let mut next = HashMap::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(tenant) = name.to_str().and_then(|name| name.strip_prefix("t-")) else { continue };
            let path = entry.path().join(MODEL_FILE);
            if entry.path().join(OFF_FILE).exists() {
                continue;
            }
            let Ok(metadata) = std::fs::metadata(&path) else { continue };
            let stamp = metadata.modified().ok().map(|modified| (modified, metadata.len()));
            if let Some(loaded) = current.get(tenant).filter(|loaded| loaded.stamp == stamp && stamp.is_some()) {
                next.insert(tenant.to_string(), loaded.clone());
                continue;
            }
            let mut rejected = self.rejected.lock().unwrap_or_else(|p| p.into_inner());
            if stamp.is_some() && rejected.get(tenant) == Some(&stamp) {
                if let Some(loaded) = current.get(tenant) {
                    next.insert(tenant.to_string(), loaded.clone());
                }
                continue;
            }
            match read_model(&path) {
                Ok(model) => {
                    rejected.remove(tenant);
                    tracing::info!(tenant, path = %path.display(), "learned re-ranker loaded");
                    next.insert(tenant.to_string(), Loaded { stamp, model: Arc::new(model) });
                }
                Err(problem) => {
                    tracing::warn!(tenant, path = %path.display(), %problem, "learned re-ranker not loaded");
                    rejected.insert(tenant.to_string(), stamp);
                    if let Some(loaded) = current.get(tenant) {
                        next.insert(tenant.to_string(), loaded.clone());
                    }
                }
            }
        }
        *self.models.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(weight: f64) -> LearnedReranker {
        let mut weights = vec![0.0; FEATURES.len()];
        weights[0] = 1.0;
        weights[10] = weight;
        LearnedReranker {
            features: FEATURES.iter().map(|f| f.to_string()).collect(),
            weights,
            candidates: 20,
            regularization: 30.0,
            trained_records: 40,
            held_out: HeldOutScore {
                records: 40,
                mrr_default: 0.5,
                mrr_learned: 0.6,
                wins: 10,
                losses: 1,
                p_value: 0.006,
            },
            fitted_at_ms: 0,
        }
    }

    #[test]
    fn a_refresh_swaps_a_new_model_in_and_keeps_the_last_good_one_over_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), "acme", &model(0.5)).unwrap();
        let rerankers = LearnedRerankers::new(Some(dir.path().to_path_buf()));
        assert_eq!(rerankers.get("acme").unwrap().weights[10], 0.5);
        assert!(rerankers.get("other").is_none());
        // A written file of another length is a change even within the clock's resolution.
        save(dir.path(), "acme", &model(0.25)).unwrap();
        rerankers.refresh();
        assert_eq!(rerankers.get("acme").unwrap().weights[10], 0.25);
        std::fs::write(model_path(dir.path(), "acme"), b"{\"features\": []}").unwrap();
        rerankers.refresh();
        assert_eq!(rerankers.get("acme").unwrap().weights[10], 0.25, "the last good model stays");
        rerankers.refresh();
        assert_eq!(rerankers.get("acme").unwrap().weights[10], 0.25, "and stays while the bad file is unchanged");
        let mut other_features = model(0.5);
        other_features.features[3] = "something else".into();
        assert!(other_features.problem().is_some());
        std::fs::remove_file(model_path(dir.path(), "acme")).unwrap();
        rerankers.refresh();
        assert!(rerankers.get("acme").is_none());
    }
}
