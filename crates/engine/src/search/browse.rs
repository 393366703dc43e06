//! What an agent reads to find its way around a tenant before or after it searches: the themes
//! the tenant's pages fall under, with page counts, and the outline (section headings) of one page.
//! Both read one pinned snapshot, like a search.

use super::error::{Result, SearchError};
use super::limits::validate_id;
use super::service::SearchService;
use super::tenant::TenantId;
use crate::index::{RecordFilter, Source};
use crate::model::{Level, Record};
use crate::router::infer_theme_label;
use std::collections::HashMap;
use std::sync::Arc;

/// One theme of a tenant and how many of its pages it labels.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicCount {
    pub id: String,
    pub display_name: String,
    pub description: String,
    pub pages: usize,
}

/// The themes of a tenant with page counts (the themes file's, else the ones learned from the
/// tenant's pages, as routing uses them).
#[derive(Debug, Clone, PartialEq)]
pub struct Topics {
    /// Every page of the tenant.
    pub pages: usize,
    /// The themes that label at least one page, most pages first (ties by id).
    pub topics: Vec<TopicCount>,
    /// Pages no theme labels.
    pub unlabelled_pages: usize,
}

impl SearchService {
    /// The current snapshot of `tenant_id`, once the tenant is this instance's and has pages.
    async fn pin_tenant(&self, tenant_id: &TenantId) -> Result<Source> {
        self.check_served(tenant_id)?;
        let source = self.index.pin().await?;
        if !source.tenant_exists(tenant_id).await? {
            return Err(SearchError::UnknownTenant(tenant_id.to_string()));
        }
        Ok(source)
    }

    /// The themes `tenant_id`'s pages fall under, each with its page count: a page counts under
    /// the theme a hit of it is labelled with (`theme_label`).
    pub async fn topics(&self, tenant_id: &TenantId) -> Result<Topics> {
        let index = self.pin_tenant(tenant_id).await?;
        let themes = self.themes_for(&index, tenant_id).await;
        let docs = index.get(Level::Doc, &RecordFilter::tenant(tenant_id.to_string()), usize::MAX).await?;
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut unlabelled_pages = 0;
        for doc in &docs {
            match infer_theme_label(&doc.meta, &themes) {
                Some(label) => *counts.entry(label).or_default() += 1,
                None => unlabelled_pages += 1,
            }
        }
        let mut topics: Vec<TopicCount> = themes
            .iter()
            .filter_map(|theme| {
                let pages = counts.get(&theme.id).copied()?;
                Some(TopicCount {
                    id: theme.id.clone(),
                    display_name: theme.display_name.clone(),
                    description: theme.description.clone(),
                    pages,
                })
            })
            .collect();
        topics.sort_by(|a, b| b.pages.cmp(&a.pages).then_with(|| a.id.cmp(&b.id)));
        Ok(Topics { pages: docs.len(), topics, unlabelled_pages })
    }

    /// The sections of one page of `tenant_id` in reading order (page, then id): their headings
    /// are the page's outline. `NotFound` when the tenant has no such page.
    pub async fn outline(&self, tenant_id: &TenantId, doc_id: &str) -> Result<Vec<Arc<Record>>> {
        validate_id("doc_id", doc_id)?;
        let index = self.pin_tenant(tenant_id).await?;
        let mut filter = RecordFilter::tenant(tenant_id.to_string());
        filter.doc_ids = Some(vec![doc_id.to_string()]);
        let mut sections = index.get(Level::Section, &filter, usize::MAX).await?;
        if sections.is_empty() {
            return Err(SearchError::NotFound(format!("doc {doc_id:?} not found for tenant {:?}", tenant_id.as_str())));
        }
        sections
            .sort_by(|a, b| (a.meta.page, a.meta.chunk_index, &a.id).cmp(&(b.meta.page, b.meta.chunk_index, &b.id)));
        Ok(sections)
    }
}
