//! What a search learns from a tenant's own pages: the themes it is routed over (when no themes
//! file describes it) and its Latin/Cyrillic spellings. Both are learned together, once per tenant,
//! index version and tuning generation, from one read of the tenant's docs and sections, on a
//! blocking thread: on a large tenant the learning takes seconds of CPU, which must not hold an
//! async worker (every other search and `/health` wait for those), and searches that arrive while
//! it runs wait for that one learning instead of starting their own. After a write, the learning
//! of the version before serves until the new one is done.

use super::tenant::TenantId;
use super::transliteration::Transliterations;
use super::tuning::Tuning;
use crate::index::{RecordFilter, Source};
use crate::model::{Level, Record};
use crate::router::ThemeSet;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::OnceCell;

/// Most docs and sections read to learn a tenant's themes (a sample of a very large tenant).
const THEMES_MAX_DOCS: usize = 50_000;
const THEMES_MAX_SECTIONS: usize = 20_000;
/// Most docs and most sections the spellings are learned from: a site of a few hundred pages is
/// read whole (tens of milliseconds), and a very large tenant's first search does not wait
/// seconds for a sample bigger than the spellings need.
const SPELLINGS_MAX_PAGES: usize = 3_000;

/// One tenant's learning.
#[derive(Default)]
pub(crate) struct Learned {
    /// The themes file's when at least one of its themes describes some of the tenant's docs (the
    /// file overrides), else the themes learned from the tenant's pages (`router::learned`).
    pub(crate) themes: Arc<ThemeSet>,
    /// Empty when `transliteration` is off.
    pub(crate) spellings: Arc<Transliterations>,
}

/// The index version and tuning generation a learning is for.
type At = (Option<u64>, u64);

/// A learning, done or under way: whoever asks first learns, the others wait for it.
type Learning = Arc<OnceCell<Arc<Learned>>>;

/// One tenant's learning at its version, and the one before it (at the same tuning generation)
/// that searches use while it is under way.
struct Tenant {
    at: At,
    learning: Learning,
    previous: Option<Arc<Learned>>,
}

/// Per tenant: the last learning asked for.
#[derive(Default)]
pub(crate) struct LearnedPerTenant(Mutex<HashMap<String, Tenant>>);

impl LearnedPerTenant {
    /// The tenant's learning at `source`'s version and `tuning`'s generation.
    ///
    /// - The first time (or after a reload of the tuning), the first caller learns and the others
    ///   wait for it.
    /// - After a write (a new index version), the learning of the version before answers at
    ///   once while the new one is learned in the background: a page written changes a tenant's
    ///   themes and spellings little, and a search must not wait seconds for them.
    pub(crate) async fn get(&self, tuning: &Arc<Tuning>, source: &Source, tenant: &TenantId) -> Arc<Learned> {
        let at = (source.version(), tuning.generation);
        let (learning, previous, start_in_background) = {
            let mut tenants = self.0.lock().unwrap_or_else(|p| p.into_inner());
            match tenants.get_mut(tenant.as_str()) {
                Some(entry) if entry.at == at => (Arc::clone(&entry.learning), entry.previous.clone(), false),
                entry => {
                    let previous = entry
                        .filter(|entry| entry.at.1 == at.1)
                        .and_then(|entry| entry.learning.get().cloned().or_else(|| entry.previous.clone()));
                    let learning = Learning::default();
                    let tenant_entry = Tenant { at, learning: Arc::clone(&learning), previous: previous.clone() };
                    tenants.insert(tenant.as_str().to_string(), tenant_entry);
                    let start_in_background = previous.is_some();
                    (learning, previous, start_in_background)
                }
            }
        };
        if let Some(done) = learning.get() {
            return Arc::clone(done);
        }
        match previous {
            Some(previous) => {
                if start_in_background {
                    let (tuning, source, tenant) = (Arc::clone(tuning), source.clone(), tenant.clone());
                    tokio::spawn(async move {
                        learning.get_or_init(|| learn(tuning, &source, &tenant)).await;
                    });
                }
                previous
            }
            None => Arc::clone(learning.get_or_init(|| learn(Arc::clone(tuning), source, tenant)).await),
        }
    }

    /// Forgets every learning (a reload of the tuning; the generation key would skip them anyway).
    pub(crate) fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

async fn learn(tuning: Arc<Tuning>, source: &Source, tenant: &TenantId) -> Arc<Learned> {
    let filter = RecordFilter::tenant(tenant.as_str());
    let docs = source.get(Level::Doc, &filter, THEMES_MAX_DOCS).await.unwrap_or_default();
    let file = Arc::clone(&tuning.theme_set);
    let described =
        docs.is_empty() || docs.iter().any(|doc| file.iter().any(|theme| theme.fields_view().matches(&doc.meta)));
    let spell = tuning.boosting.transliteration.enabled;
    let section_limit = match (described, spell) {
        (false, _) => THEMES_MAX_SECTIONS,
        (true, true) => SPELLINGS_MAX_PAGES,
        (true, false) => 0,
    };
    let sections = if section_limit == 0 {
        Vec::new()
    } else {
        source.get(Level::Section, &filter, section_limit).await.unwrap_or_default()
    };
    let started = Instant::now();
    let learned = tokio::task::spawn_blocking(move || {
        let routing = if described {
            (Vec::new(), Default::default())
        } else {
            let docs: Vec<&Record> = docs.iter().map(Arc::as_ref).collect();
            let sections: Vec<&Record> = sections.iter().map(Arc::as_ref).collect();
            crate::router::learned::learn_routing(&docs, &sections)
        };
        let spellings = if spell {
            let first = |records: &[Arc<Record>]| records.len().min(SPELLINGS_MAX_PAGES);
            let pages = docs[..first(&docs)].iter().chain(&sections[..first(&sections)]);
            Transliterations::learn(pages.map(Arc::as_ref))
        } else {
            Transliterations::default()
        };
        (routing, spellings)
    })
    .await;
    let ((learned_themes, area_words), spellings) = match learned {
        Ok(learned) => learned,
        Err(error) => {
            tracing::error!(tenant_id = %tenant, %error, "learning from the tenant's pages failed");
            ((Vec::new(), Default::default()), Transliterations::default())
        }
    };
    let learned_count = learned_themes.len();
    let themes = if learned_themes.is_empty() { file } else { Arc::new(ThemeSet::learned(learned_themes, area_words)) };
    tracing::info!(
        tenant_id = %tenant,
        learned_themes = learned_count,
        spellings = spellings.spellings(),
        took_ms = started.elapsed().as_secs_f64() * 1000.0,
        "learned from the tenant's pages"
    );
    Arc::new(Learned { themes, spellings: Arc::new(spellings) })
}
