//! Ingest versions: what makes a re-ingest atomic for searches.
//!
//! An ingest of one source of one tenant writes the records of its new or changed pages under
//! content-hashed ids (`{tenant}::{record id}::{page hash}`, with `page_hash` and `ingest_source`
//! in their metadata) next to the version being served, then commits by upserting one manifest
//! record — `{tenant}::{source}` in `{collection}_manifests`, listing the page hash of every doc of
//! the new version — and only then deletes what the new version no longer has. A replica serves a
//! record only when its page hash is the one a manifest of its tenant names for its doc
//! ([`Visibility`]), so before the commit it serves the previous version whole and after it the new
//! one whole. A failed or killed ingest leaves staged records nobody serves; the next ingest of
//! the source rewrites or deletes them.
//!
//! A manifest also holds each page's record count per level, so a replica checks that what it
//! read of a page is whole (a read racing a write may miss records) and reads again if not.
//!
//! Records without a page hash (written by `upsert` or `replace_tenants`, or by an ingest before
//! manifests existed) are served unless a manifest of their tenant lists their doc or owns their
//! source, so the first versioned ingest of a source hides its older records at its commit.

use crate::model::Metadata;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Record metadata keys of a versioned record (never part of `Metadata`).
pub(crate) const PAGE_HASH_KEY: &str = "page_hash";
pub(crate) const INGEST_SOURCE_KEY: &str = "ingest_source";

/// Separates the page hash from the rest of a versioned record's Chroma id.
pub(crate) const HASH_SEPARATOR: &str = "::";

/// The one-dimensional embedding every manifest carries (Chroma stores no record without one).
const MANIFEST_EMBEDDING: [f32; 1] = [1.0];

/// The committed version of one source of one tenant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Manifest {
    pub(crate) tenant_id: String,
    pub(crate) source: String,
    /// The commit's version marker: a new one on every commit.
    pub(crate) generation: String,
    /// doc id → the hash of the page's records that are served.
    pub(crate) pages: BTreeMap<String, String>,
    /// doc id → how many records the page has on each level (docs, sections, chunks).
    pub(crate) records: BTreeMap<String, [usize; 3]>,
}

/// What a poll reads of a manifest: enough to tell whether it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManifestHead {
    pub(crate) id: String,
    pub(crate) generation: String,
}

/// The manifest record's id.
pub(crate) fn manifest_id(tenant_id: &str, source: &str) -> String {
    format!("{tenant_id}::{source}")
}

impl Manifest {
    pub(crate) fn id(&self) -> String {
        manifest_id(&self.tenant_id, &self.source)
    }

    /// The ingest ownership rule (`SourceScope::owns`): a doc of this tenant whose `source` is
    /// this source or whose id starts with `{source}/`.
    fn owns(&self, meta: &Metadata) -> bool {
        meta.tenant_id == self.tenant_id
            && (meta.source == self.source
                || meta.doc_id.strip_prefix(self.source.as_str()).is_some_and(|rest| rest.starts_with('/')))
    }
}

/// The upsert body committing `manifests` in one request.
pub(crate) fn upsert_body(manifests: &[Manifest]) -> Value {
    let ids: Vec<String> = manifests.iter().map(Manifest::id).collect();
    let metadatas: Vec<Value> = manifests
        .iter()
        .map(|manifest| {
            json!({"tenant_id": manifest.tenant_id, "source": manifest.source, "generation": manifest.generation})
        })
        .collect();
    let documents: Vec<String> = manifests
        .iter()
        .map(|manifest| json!({"pages": manifest.pages, "records": manifest.records}).to_string())
        .collect();
    let embeddings = vec![MANIFEST_EMBEDDING; ids.len()];
    json!({"ids": ids, "embeddings": embeddings, "metadatas": metadatas, "documents": documents})
}

pub(crate) fn parse_head(id: String, metadata: Option<&Map<String, Value>>) -> Option<ManifestHead> {
    let generation = metadata?.get("generation")?.as_str()?.to_string();
    Some(ManifestHead { id, generation })
}

/// One manifest from Chroma's `get` columns; `None` when it is not one this service wrote.
pub(crate) fn parse_manifest(metadata: Option<&Map<String, Value>>, document: Option<&str>) -> Option<Manifest> {
    let metadata = metadata?;
    let field = |key: &str| metadata.get(key).and_then(Value::as_str).map(str::to_string);
    let document: Value = serde_json::from_str(document?).ok()?;
    let pages = document
        .get("pages")?
        .as_object()?
        .iter()
        .map(|(doc, hash)| hash.as_str().map(|hash| (doc.clone(), hash.to_string())))
        .collect::<Option<_>>()?;
    let records = match document.get("records") {
        Some(records) => serde_json::from_value(records.clone()).ok()?,
        None => BTreeMap::new(),
    };
    Some(Manifest {
        tenant_id: field("tenant_id")?,
        source: field("source")?,
        generation: field("generation")?,
        pages,
        records,
    })
}

/// Which stored records a replica serves, from the manifests of every tenant.
#[derive(Debug, Clone, Default)]
pub(crate) struct Visibility {
    by_tenant: HashMap<String, Vec<Arc<Manifest>>>,
}

impl Visibility {
    pub(crate) fn new<'a>(manifests: impl IntoIterator<Item = &'a Arc<Manifest>>) -> Self {
        let mut by_tenant: HashMap<String, Vec<Arc<Manifest>>> = HashMap::new();
        for manifest in manifests {
            by_tenant.entry(manifest.tenant_id.clone()).or_default().push(Arc::clone(manifest));
        }
        Self { by_tenant }
    }

    /// The record counts a manifest of `tenant` gives for `doc`, when one lists it with counts.
    pub(crate) fn expected(&self, tenant: &str, doc: &str) -> Option<[usize; 3]> {
        let manifests = self.by_tenant.get(tenant)?;
        manifests.iter().find(|manifest| manifest.pages.contains_key(doc))?.records.get(doc).copied()
    }

    /// The docs the manifests of `tenant` list.
    pub(crate) fn pages<'a>(&'a self, tenant: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.by_tenant.get(tenant).into_iter().flatten().flat_map(|manifest| manifest.pages.keys().map(String::as_str))
    }

    /// The tenants that have manifests.
    pub(crate) fn tenants(&self) -> impl Iterator<Item = &str> {
        self.by_tenant.keys().map(String::as_str)
    }

    /// Whether a record with `meta` (and `page_hash`, for a versioned record) is served: a
    /// versioned record when a manifest of its tenant names its hash for its doc, any other record
    /// when no manifest of its tenant lists its doc or owns its source.
    pub(crate) fn admits(&self, meta: &Metadata, page_hash: Option<&str>) -> bool {
        let manifests = self.by_tenant.get(meta.tenant_id.as_str()).map(Vec::as_slice).unwrap_or_default();
        match page_hash {
            Some(hash) => {
                manifests.iter().any(|manifest| manifest.pages.get(meta.doc_id.as_str()).is_some_and(|h| h == hash))
            }
            None => !manifests
                .iter()
                .any(|manifest| manifest.pages.contains_key(meta.doc_id.as_str()) || manifest.owns(meta)),
        }
    }
}

/// How many served versioned records a read found per page and level.
#[derive(Debug, Default)]
pub(crate) struct Tally(HashMap<(String, String), [usize; 3]>);

impl Tally {
    pub(crate) fn add(&mut self, slot: usize, meta: &Metadata) {
        self.0.entry((meta.tenant_id.to_string(), meta.doc_id.to_string())).or_default()[slot] += 1;
    }

    /// The first page among `docs` of `tenant` whose records the read did not find whole (their
    /// count per level differs from the manifest's), described for the log.
    pub(crate) fn shortfall<'a>(
        &self,
        visibility: &Visibility,
        tenant: &str,
        docs: impl IntoIterator<Item = &'a str>,
    ) -> Option<String> {
        docs.into_iter().find_map(|doc| {
            let expected = visibility.expected(tenant, doc)?;
            let found = self.0.get(&(tenant.to_string(), doc.to_string())).copied().unwrap_or_default();
            (found != expected).then(|| format!("{tenant}/{doc}: read {found:?} records of {expected:?}"))
        })
    }
}

/// What the replica must re-read of one tenant when its manifests go from `before` to `after`:
/// `None` when nothing served changed, the docs whose served page changed, or (`Some(None)`)
/// the whole tenant when a source lost its manifest (its unversioned records appear again, and no
/// list names them). A source that gains its first manifest changes the docs it lists and the
/// served docs it owns, whose unversioned records it hides: `served` gives the metadata of the
/// tenant's served docs (read only then).
pub(crate) fn tenant_change(
    before: &[&Manifest],
    after: &[&Manifest],
    served: impl FnOnce() -> Vec<Metadata>,
) -> Option<Option<BTreeSet<String>>> {
    let sources = |manifests: &[&Manifest]| -> BTreeSet<String> {
        manifests.iter().map(|manifest| manifest.source.clone()).collect()
    };
    let (sources_before, sources_after) = (sources(before), sources(after));
    if !sources_before.is_subset(&sources_after) {
        return Some(None);
    }
    let pairs = |manifests: &[&Manifest]| -> BTreeSet<(String, String)> {
        manifests
            .iter()
            .flat_map(|manifest| manifest.pages.iter().map(|(doc, hash)| (doc.clone(), hash.clone())))
            .collect()
    };
    let mut docs: BTreeSet<String> =
        pairs(before).symmetric_difference(&pairs(after)).map(|(doc, _)| doc.clone()).collect();
    let added: Vec<&&Manifest> = after.iter().filter(|manifest| !sources_before.contains(&manifest.source)).collect();
    if !added.is_empty() {
        for meta in served() {
            if added.iter().any(|manifest| manifest.owns(&meta)) {
                docs.insert(meta.doc_id.to_string());
            }
        }
    }
    (!docs.is_empty()).then_some(Some(docs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(source: &str, pages: &[(&str, &str)]) -> Manifest {
        Manifest {
            tenant_id: "t".into(),
            source: source.into(),
            generation: "1".into(),
            pages: pages.iter().map(|(doc, hash)| (doc.to_string(), hash.to_string())).collect(),
            records: pages.iter().map(|(doc, _)| (doc.to_string(), [1, 2, 4])).collect(),
        }
    }

    fn meta(doc_id: &str, source: &str) -> Metadata {
        Metadata { tenant_id: "t".into(), doc_id: doc_id.into(), source: source.into(), ..Metadata::default() }
    }

    #[test]
    fn manifests_round_trip_through_their_stored_form() {
        let written = manifest("docs", &[("docs/a.md", "h1"), ("docs/b.md", "h2")]);
        let body = upsert_body(std::slice::from_ref(&written));
        assert_eq!(body["ids"][0], "t::docs");
        let read = parse_manifest(body["metadatas"][0].as_object(), body["documents"][0].as_str()).unwrap();
        assert_eq!(read, written);
        let head = parse_head("t::docs".into(), body["metadatas"][0].as_object()).unwrap();
        assert_eq!(head.generation, "1");
        assert_eq!(parse_manifest(None, Some("{}")), None);
    }

    #[test]
    fn only_the_committed_page_version_is_served() {
        let docs = Arc::new(manifest("docs", &[("docs/a.md", "new")]));
        let visibility = Visibility::new([&docs]);
        assert!(visibility.admits(&meta("docs/a.md", "a.md"), Some("new")));
        assert!(!visibility.admits(&meta("docs/a.md", "a.md"), Some("old")), "a superseded version");
        assert!(!visibility.admits(&meta("docs/b.md", "b.md"), Some("staged")), "an uncommitted page");
        assert!(!visibility.admits(&meta("docs/a.md", "a.md"), None), "an unversioned record of a listed doc");
        assert!(!visibility.admits(&meta("docs/gone.md", "gone.md"), None), "an unversioned record the source owns");
        assert!(visibility.admits(&meta("other/x.md", "x.md"), None), "another source's unversioned record");
        let other_tenant = Metadata { tenant_id: "u".into(), ..meta("docs/a.md", "a.md") };
        assert!(visibility.admits(&other_tenant, None), "a tenant without manifests");
        assert!(!visibility.admits(&other_tenant, Some("new")));
    }

    #[test]
    fn a_tenant_change_names_the_docs_whose_served_page_changed() {
        let before = manifest("docs", &[("a", "1"), ("b", "1"), ("c", "1")]);
        let after = manifest("docs", &[("a", "1"), ("b", "2"), ("d", "1")]);
        let docs = ["b", "c", "d"].map(String::from).into_iter().collect();
        let nothing_served = || -> Vec<Metadata> { unreachable!("no source gained a manifest") };
        assert_eq!(tenant_change(&[&before], &[&after], nothing_served), Some(Some(docs)));
        assert_eq!(tenant_change(&[&before], &[&before], nothing_served), None);
        assert_eq!(tenant_change(&[&before], &[], nothing_served), Some(None), "a source gone: the whole tenant");
    }

    /// A source's first manifest changes the pages it lists and the served docs it owns (by
    /// source or by id prefix), whose unversioned records it now hides; nothing else.
    #[test]
    fn a_first_manifest_names_its_pages_and_the_served_docs_it_owns() {
        let other = manifest("other", &[("x", "1")]);
        let new = manifest("docs", &[("docs/a.md", "1")]);
        let served =
            || vec![meta("docs/old.md", "elsewhere"), meta("kept.md", "docs"), meta("x", "other"), meta("y", "misc")];
        let docs = ["docs/a.md", "docs/old.md", "kept.md"].map(String::from).into_iter().collect();
        assert_eq!(tenant_change(&[&other], &[&other, &new], served), Some(Some(docs)));
        // Against the visibility rule itself: exactly the named docs change whether they are served.
        let (before, after) =
            (Visibility::new([&Arc::new(other.clone())]), Visibility::new([&Arc::new(other), &Arc::new(new)]));
        for meta in served() {
            let changed = before.admits(&meta, None) != after.admits(&meta, None);
            assert_eq!(changed, ["docs/old.md", "kept.md"].contains(&meta.doc_id.as_str()), "{}", meta.doc_id);
        }
    }

    #[test]
    fn a_read_missing_records_of_a_page_falls_short() {
        let docs = Arc::new(manifest("docs", &[("docs/a.md", "h")]));
        let visibility = Visibility::new([&docs]);
        let mut tally = Tally::default();
        let page = meta("docs/a.md", "a.md");
        for slot in [0, 1, 1, 2, 2, 2] {
            tally.add(slot, &page);
        }
        assert_eq!(
            tally.shortfall(&visibility, "t", visibility.pages("t")),
            Some("t/docs/a.md: read [1, 2, 3] records of [1, 2, 4]".into())
        );
        tally.add(2, &page);
        assert_eq!(tally.shortfall(&visibility, "t", visibility.pages("t")), None);
        assert_eq!(Tally::default().shortfall(&visibility, "t", ["docs/unlisted.md"]), None);
    }
}
