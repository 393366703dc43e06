//! The record filter of the cascade: tenant always, plus the request's metadata filters.

use super::condition::MetadataCondition;
use crate::model::Metadata;
use std::sync::Arc;

/// Which records a query may see. `tenant_id` is mandatory and always applied; every other field
/// narrows further when set. `tags` requires all listed tags; id lists allow any listed id;
/// `condition` (the Dify API's metadata conditions, a knowledge base's fixed filter) must hold too.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordFilter {
    pub tenant_id: String,
    pub product: Option<String>,
    pub version: Option<String>,
    pub tags: Vec<String>,
    pub doc_ids: Option<Vec<String>>,
    pub section_ids: Option<Vec<String>>,
    pub domain: Option<String>,
    pub section: Option<String>,
    pub platform: Option<String>,
    pub role: Option<String>,
    pub condition: Option<Arc<MetadataCondition>>,
    /// `doc_ids` as page numbers of one tenant build, when the caller has them: only a shortcut
    /// for an index that numbered the pages so (it finds their records without hashing ids);
    /// `doc_ids` alone decides which records pass.
    pub pages: Option<PageHint>,
}

/// The page numbers (`IdOrder::number`) of a filter's `doc_ids`, one per id in the same order,
/// all numbered in `scope`.
#[derive(Debug, Clone)]
pub struct PageHint {
    pub(crate) scope: Arc<()>,
    pub(crate) numbers: Vec<u32>,
}

impl PartialEq for PageHint {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.scope, &other.scope) && self.numbers == other.numbers
    }
}

impl RecordFilter {
    pub fn tenant(tenant_id: impl Into<String>) -> Self {
        Self { tenant_id: tenant_id.into(), ..Self::default() }
    }

    /// This filter with `doc_ids` in place of its own and no page hint: a hint names the pages of
    /// the doc ids it came with, so it must not outlive them.
    pub(crate) fn with_doc_ids(&self, doc_ids: Vec<String>) -> Self {
        Self { doc_ids: Some(doc_ids), pages: None, ..self.clone() }
    }

    /// True when `meta` passes every condition. Records without a section id never pass a
    /// `section_ids` condition (doc records are restricted through `doc_ids` instead).
    pub fn matches(&self, meta: &Metadata) -> bool {
        if meta.tenant_id != self.tenant_id {
            return false;
        }
        let equal = |wanted: &Option<String>, actual: &str| wanted.as_deref().is_none_or(|w| w == actual);
        if !equal(&self.product, &meta.product)
            || !equal(&self.version, &meta.version)
            || !equal(&self.domain, &meta.domain)
            || !equal(&self.section, &meta.section)
            || !equal(&self.platform, &meta.platform)
            || !equal(&self.role, &meta.role)
        {
            return false;
        }
        if !self.tags.iter().all(|tag| meta.tags.contains(tag)) {
            return false;
        }
        if let Some(doc_ids) = &self.doc_ids {
            if !doc_ids.iter().any(|id| *id == meta.doc_id) {
                return false;
            }
        }
        if let Some(section_ids) = &self.section_ids {
            match &meta.section_id {
                Some(section_id) if section_ids.contains(section_id) => {}
                _ => return false,
            }
        }
        self.condition.as_ref().is_none_or(|condition| condition.matches(meta))
    }

    /// Whether `matches` gives `a` and `b` the same verdict because they agree on every field it
    /// reads: the tenant, the equality fields, the id lists' fields and, with a condition, every
    /// field a condition can test (`condition::Field`). A page's sections and chunks share their
    /// page's metadata, so a costly condition is checked once per page, not once per record.
    pub(crate) fn same_verdict(&self, a: &Metadata, b: &Metadata) -> bool {
        let page_fields = a.tenant_id == b.tenant_id
            && a.doc_id == b.doc_id
            && (self.section_ids.is_none() || a.section_id == b.section_id)
            && a.product == b.product
            && a.version == b.version
            && a.tags == b.tags
            && a.domain == b.domain
            && a.section == b.section
            && a.platform == b.platform
            && a.role == b.role;
        page_fields
            && (self.condition.is_none()
                || (a.page_type == b.page_type
                    && a.source == b.source
                    && a.url == b.url
                    && a.title == b.title
                    && a.indexed_at == b.indexed_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(tenant: &str, doc: &str, section: Option<&str>) -> Metadata {
        Metadata {
            tenant_id: tenant.into(),
            doc_id: doc.into(),
            section_id: section.map(Into::into),
            product: "chatcenter".into(),
            tags: vec!["a".into(), "b".into()],
            ..Metadata::default()
        }
    }

    #[test]
    fn tenant_is_always_checked() {
        let filter = RecordFilter::tenant("demo");
        assert!(filter.matches(&meta("demo", "d1", None)));
        assert!(!filter.matches(&meta("acme", "d1", None)));
    }

    #[test]
    fn every_condition_narrows() {
        let mut filter = RecordFilter::tenant("demo");
        filter.tags = vec!["a".into()];
        filter.product = Some("chatcenter".into());
        assert!(filter.matches(&meta("demo", "d1", None)));
        filter.tags.push("c".into());
        assert!(!filter.matches(&meta("demo", "d1", None)));
        let mut by_section = RecordFilter::tenant("demo");
        by_section.section_ids = Some(vec!["s1".into()]);
        assert!(by_section.matches(&meta("demo", "d1", Some("s1"))));
        assert!(!by_section.matches(&meta("demo", "d1", Some("s2"))));
        assert!(!by_section.matches(&meta("demo", "d1", None)));
    }

    #[test]
    fn new_doc_ids_drop_the_page_hint_of_the_old_ones() {
        let hinted = RecordFilter {
            doc_ids: Some(vec!["d1".into()]),
            pages: Some(PageHint { scope: Arc::new(()), numbers: vec![0] }),
            product: Some("chatcenter".into()),
            ..RecordFilter::tenant("demo")
        };
        let moved = hinted.with_doc_ids(vec!["d2".into(), "d3".into()]);
        assert_eq!(moved.doc_ids, Some(vec!["d2".to_string(), "d3".to_string()]));
        assert!(moved.pages.is_none());
        assert_eq!(moved.product, hinted.product);
        assert_eq!(moved.tenant_id, "demo");
    }

    /// A record that differs from another in any field a condition can test never borrows the
    /// other's verdict (the match has no `_` arm: a new field must be set here, and then fails
    /// until `same_verdict` compares it).
    #[test]
    fn same_verdict_compares_every_field_a_condition_reads() {
        use crate::index::condition::{Clause, Field, MetadataCondition, Test};
        let mut filter = RecordFilter::tenant("demo");
        filter.condition = Some(Arc::new(MetadataCondition::all(vec![Clause::Field(Field::Product, Test::NotEmpty)])));
        let base = Metadata { indexed_at: "2026-11-27T00:00:00Z".into(), ..meta("demo", "d1", Some("s1")) };
        assert!(filter.same_verdict(&base, &base.clone()));
        for field in Field::ALL {
            let mut other = base.clone();
            match field {
                Field::Product => other.product = "other".into(),
                Field::Version => other.version = "2".into(),
                Field::Tags => other.tags.push("c".into()),
                Field::Domain => other.domain = "other".into(),
                Field::Section => other.section = "other".into(),
                Field::Platform => other.platform = "other".into(),
                Field::Role => other.role = "other".into(),
                Field::PageType => other.page_type = "other".into(),
                Field::Source => other.source = "other".into(),
                Field::Url => other.url = "other".into(),
                Field::DocId => other.doc_id = "other".into(),
                Field::Title => other.title = "other".into(),
                Field::IndexedAt => other.indexed_at = "2026-11-28T00:00:00Z".into(),
            }
            assert!(!filter.same_verdict(&base, &other), "{field:?} is not compared");
        }
        // Section ids matter only to a filter that names sections.
        let sibling = Metadata { section_id: Some("s2".into()), ..base.clone() };
        assert!(filter.same_verdict(&base, &sibling));
        filter.section_ids = Some(vec!["s1".into()]);
        assert!(!filter.same_verdict(&base, &sibling));
    }
}
