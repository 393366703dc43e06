//! Reading what changed: the change-log entries since a time, and the records they name (or any
//! `where` clause's), a page at a time.

use super::changes::{self, ChangeEntry, ChangeScope};
use super::manifest::{Tally, Visibility};
use super::{wire, ChromaIndex, LOAD_PAGE_SIZE};
use crate::index::{IndexError, IndexErrorKind, Result};
use crate::model::Record;
use serde_json::json;

impl ChromaIndex {
    /// The change-log entries written at or after `since_ms` (none when nothing was ever logged).
    pub(super) async fn poll_changes(&self, since_ms: i64) -> Result<Vec<ChangeEntry>> {
        let info = match self.client.collection(&self.changes_name).await {
            Ok(info) => info,
            Err(error) if error.kind == IndexErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut entries = Vec::new();
        let mut offset = 0;
        loop {
            let body = json!({
                "where": {"at_ms": {"$gte": since_ms}},
                "include": ["metadatas", "documents"],
                "limit": LOAD_PAGE_SIZE,
                "offset": offset,
            });
            let page = self.client.get(&info.id, &body).await?;
            let count = page.ids.len();
            let metadatas = page.metadatas.unwrap_or_default().into_iter().chain(std::iter::repeat(None));
            let documents = page.documents.unwrap_or_default().into_iter().chain(std::iter::repeat(None));
            for ((id, metadata), document) in page.ids.into_iter().zip(metadatas).zip(documents) {
                match changes::parse_entry(id.clone(), metadata, document) {
                    Some(entry) => entries.push(entry),
                    None => tracing::warn!(%id, "ignoring a malformed change-log entry"),
                }
            }
            if count < LOAD_PAGE_SIZE {
                return Ok(entries);
            }
            offset += LOAD_PAGE_SIZE;
        }
    }

    /// The served ones (`visibility`) among the records, on each level, of what `scope` names in
    /// `tenant`: its docs, or all of it.
    pub(super) async fn fetch_changed(
        &self,
        tenant: &str,
        scope: &ChangeScope,
        visibility: &Visibility,
    ) -> Result<Option<[Vec<Record>; 3]>> {
        let tenant_condition = json!({"tenant_id": {"$eq": tenant}});
        let clauses: Vec<serde_json::Value> = match scope {
            ChangeScope::Tenant => vec![tenant_condition],
            ChangeScope::Docs(docs) => {
                let docs: Vec<&String> = docs.iter().collect();
                docs.chunks(changes::IDS_PER_FETCH)
                    .map(|ids| json!({"$and": [tenant_condition, {"doc_id": {"$in": ids}}]}))
                    .collect()
            }
        };
        let ids = self.collection_id_list()?;
        let fetch_level = |slot: usize| {
            let (clauses, id) = (&clauses, &ids[slot]);
            async move {
                let mut records = Vec::new();
                for clause in clauses {
                    let fetched = self.fetch_where(id, clause).await?;
                    records.extend(
                        fetched
                            .into_iter()
                            .filter(|(record, page_hash)| visibility.admits(&record.meta, page_hash.as_deref()))
                            .map(|(record, _)| record),
                    );
                }
                Ok::<_, IndexError>(records)
            }
        };
        let (docs, sections, chunks) = tokio::try_join!(fetch_level(0), fetch_level(1), fetch_level(2))?;
        let levels = [docs, sections, chunks];
        let mut tally = Tally::default();
        for (slot, records) in levels.iter().enumerate() {
            records.iter().for_each(|record| tally.add(slot, &record.meta));
        }
        let shortfall = match scope {
            ChangeScope::Tenant => tally.shortfall(visibility, tenant, visibility.pages(tenant)),
            ChangeScope::Docs(docs) => tally.shortfall(visibility, tenant, docs.iter().map(String::as_str)),
        };
        if let Some(shortfall) = shortfall {
            tracing::info!(%shortfall, "chroma answered part of a committed page; reading it again at the next poll");
            return Ok(None);
        }
        Ok(Some(levels))
    }

    /// Every record of one collection matching `where_clause`, a page at a time.
    pub(super) async fn fetch_where(
        &self,
        collection_id: &str,
        where_clause: &serde_json::Value,
    ) -> Result<Vec<wire::StoredRecord>> {
        let mut records = Vec::new();
        loop {
            let body = json!({
                "where": where_clause,
                "include": ["embeddings", "metadatas", "documents"],
                "limit": LOAD_PAGE_SIZE,
                "offset": records.len(),
            });
            let page = self.client.get(collection_id, &body).await?.into_records()?;
            let full = page.len() == LOAD_PAGE_SIZE;
            records.extend(page);
            if !full {
                return Ok(records);
            }
        }
    }
}
